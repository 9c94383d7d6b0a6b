"""HTML fragments for the pytest-html report: verdict, host x criterion summary,
versions matrix with the odd values marked, and the profile used."""

from __future__ import annotations

from collections import Counter
from html import escape

from signoff import parity
from signoff.results import STATUSES

STYLE = """<style>
.so-table{border-collapse:collapse;margin:6px 0 16px}
.so-table td,.so-table th{border:1px solid #bbb;padding:3px 7px;font-size:12px;vertical-align:top}
.so-PASS{background:#d4f4d4}.so-FAIL{background:#f8c8c8}.so-ERROR{background:#f4b183}
.so-NA{background:#e8e8e8}.so-NOTRUN{background:#fff2a8}.so-odd{background:#f8c8c8;font-weight:bold}
.so-verdict{font-size:20px;font-weight:bold;padding:6px 12px;display:inline-block}
</style>"""


def _cls(status: str) -> str:
    return "so-" + status.replace(".", "").replace(" ", "")


def verdict_block(verdict: str, meta: dict) -> str:
    hosts = ", ".join(meta.get("hosts", []))
    return (f"{STYLE}<h2>Sign-off verdict</h2>"
            f"<div class='so-verdict {_cls('PASS' if verdict == 'PASS' else 'FAIL')}'>"
            f"{escape(verdict)}</div>"
            f"<p>Profile <b>{escape(str(meta.get('profile')))}</b> "
            f"({escape(str(meta.get('profile_class', '')))}); hosts: {escape(hosts)}; "
            f"inventory: {escape(str(meta.get('inventory')))}; started {meta.get('started')} UTC."
            + (f"<br>Probe Python: {escape(', '.join(f'{h} {py}' for h, py in meta['probe_python'].items()))}"
               if meta.get("probe_python") else "")
            + (f"<br><b>Partial run</b>: {escape(meta['partial'])}" if meta.get("partial") else "")
            + "</p>"
            "<p>PASS needs every applicable check to run and pass; ERROR means the check "
            "could not measure (it is not a pass); N.A. means the profile does not apply it to "
            "that host.</p>")


def summary_table(records: list[dict]) -> str:
    hosts = sorted({r["host"] for r in records})
    criteria = list(dict.fromkeys(r["criterion"] for r in records))
    cell = {(r["criterion"], r["host"]): r for r in records}
    head = "".join(f"<th>{escape(h)}</th>" for h in hosts)
    rows = []
    for c in criteria:
        some = next(r for r in records if r["criterion"] == c)
        tds = []
        for h in hosts:
            r = cell.get((c, h))
            if r is None:
                tds.append("<td></td>")
                continue
            measured = "" if r.get("measured") is None else f"<br>{escape(str(r['measured']))}"
            title = escape(r.get("message") or "", quote=True)
            tds.append(f"<td class='{_cls(r['status'])}' title='{title}'>"
                       f"{r['status']}{measured}</td>")
        rows.append(f"<tr><th>{escape(c)}</th>{''.join(tds)}"
                    f"<td>{escape(str(some.get('expected') or ''))}"
                    f"</td><td>{escape(some.get('source') or '')}</td></tr>")
    problems = "".join(
        f"<li><b>{r['status']}</b> {escape(r['criterion'])} [{escape(r['host'])}]: "
        f"{escape(r.get('message') or '')}</li>"
        for r in records if r["status"] in ("FAIL", "ERROR", "NOT RUN"))
    return (f"<h2>Summary: host &times; criterion</h2><table class='so-table'><tr><th>criterion</th>"
            f"{head}<th>threshold</th><th>source</th></tr>{''.join(rows)}</table>"
            + (f"<h3>Failures and errors</h3><ul>{problems}</ul>" if problems else ""))


def versions_matrix(hosts: dict[str, dict]) -> str:
    ok = {h: f for h, f in hosts.items() if "error" not in f}
    per_host = {h: parity.versions(f) for h, f in ok.items()}
    odd = parity.odd_cells(per_host) if len(per_host) > 1 else set()
    names = sorted(hosts)
    head = "".join(f"<th>{escape(h)}</th>" for h in names)
    rows = []
    for field, (label, _) in parity.FIELDS.items():
        tds = []
        for h in names:
            if h not in per_host:
                tds.append("<td class='so-ERROR'>unreachable</td>")
            else:
                cls = " class='so-odd'" if (h, field) in odd else ""
                tds.append(f"<td{cls}>{escape(str(per_host[h][field]))}</td>")
        rows.append(f"<tr><th>{escape(label)}</th>{''.join(tds)}</tr>")
    gpu_row = []
    for h in names:
        f = ok.get(h)
        gpus = (f or {}).get("nvidia", {}).get("gpus") or []
        gpu_row.append(f"<td>{len(gpus)} x {escape(gpus[0]['name']) if gpus else 'no GPU'}</td>"
                       if f else "<td></td>")
    rows.append(f"<tr><th>GPUs</th>{''.join(gpu_row)}</tr>")
    errors = "".join(f"<li>{escape(h)}: {escape(f['error'])}</li>"
                     for h, f in sorted(hosts.items()) if "error" in f)
    return (f"<h2>Versions across hosts</h2><p>Marked cells differ from the majority.</p>"
            f"<table class='so-table'><tr><th></th>{head}</tr>{''.join(rows)}</table>"
            + (f"<h3>Hosts that could not be probed</h3><ul>{errors}</ul>" if errors else ""))


def profile_block(profile) -> str:
    if profile is None:
        return "<h2>Profile</h2><p>not resolved</p>"
    rows = "".join(
        f"<tr><td>{escape(t.criterion)}</td><td>{escape(t.expected)}</td>"
        f"<td>{escape(t.source)}</td></tr>" for t in profile.criteria.values())
    hw = ", ".join(f"{k}={v}" for k, v in profile.hardware.items())
    return (f"<h2>Profile {escape(profile.name)}</h2><p>{escape(profile.description)}<br>"
            f"file {escape(profile.path)}; inherits {' &rarr; '.join(map(escape, profile.chain))}"
            f"<br>hardware class: {escape(hw)}</p><table class='so-table'>"
            f"<tr><th>criterion</th><th>threshold</th><th>source</th></tr>{rows}</table>")


def _pct(fraction) -> str:
    return "" if fraction is None else f"{100 * fraction:.0f} %"


def network_section(records: list[dict]) -> str:
    """Per host pair: throughput as % of line rate; and the multi-node bisection."""
    pairs = [r for r in records if r["criterion"] == "net_pair_bandwidth" and r.get("details")]
    multi = next((r for r in records if r["criterion"] == "multinode_allreduce"), None)
    if not pairs and not multi:
        return ""
    rows = "".join(
        f"<tr class='{_cls(r['status'])}'><td>{escape(r['host'])}</td>"
        f"<td>{escape(str(d.get('tool')))} ({d.get('streams')} streams, {d.get('duration')} s)</td>"
        f"<td>{d.get('gbps')}</td><td>{d.get('line_rate_gbps')}</td>"
        f"<td>{_pct(d.get('fraction'))}</td>"
        f"<td>{r['status']}</td></tr>"
        for r in pairs for d in [r["details"]])
    out = ("<h2>Network</h2><table class='so-table'><tr><th>pair (sender-&gt;receiver)</th>"
           "<th>tool</th><th>Gb/s</th><th>line rate Gb/s</th><th>% of line rate</th><th></th></tr>"
           f"{rows}</table>")
    bis = ((multi or {}).get("details") or {}).get("bisection")
    if multi:
        out += (f"<p>Multi-node all-reduce: <b>{multi['status']}</b> "
                f"{escape(str(multi.get('measured') or ''))} {escape(multi.get('unit') or '')}</p>")
    if bis:
        named = ", ".join(bis["slow_hosts"] + bis["slow_links"]) or "no single host or link"
        cells = "".join(f"<tr><td>{escape(p)}</td><td>{bw}</td></tr>" for p, bw in bis["pairs"].items())
        out += (f"<p>Bisection (2-host all-reduce per ring pair): slow <b>{escape(named)}</b></p>"
                f"<table class='so-table'><tr><th>pair</th><th>busbw GB/s</th></tr>{cells}</table>")
    return out


def host_notes(doc: dict) -> list[str]:
    """What the user must hear of besides the checks, one line per host and kind: what this
    run could not clean up, what killed runs left, GPUs already in use before measuring."""
    lines = [f"left behind on {h}: {w}" for h, ws in doc.get("left_behind", {}).items() for w in ws]
    lines += [f"leftover on {h}: {w}: remove it once no run of it is alive"
              for h, ws in doc.get("leftovers", {}).items() for w in ws]
    for h, facts in doc.get("hosts", {}).items():
        used = [f"GPU {g['index']}: pid {p['pid']} ({p['name'] or '?'}"
                + (f", {p['used_mib']} MiB)" if p.get("used_mib") is not None else ")")
                for g in (facts.get("nvidia") or {}).get("gpus") or [] for p in g.get("processes") or []]
        if used:
            lines.append(f"GPUs in use on {h} before measuring: {'; '.join(used)}: its GPU "
                         f"measurements are suspect (shared or oversold node)")
    return lines


def notes_section(doc: dict) -> str:
    lines = host_notes(doc)
    if not lines:
        return ""
    return ("<h2>On the hosts</h2><ul>" + "".join(f"<li class='so-odd'>{escape(x)}</li>" for x in lines)
            + "</ul>")


# pytest-html's own counters count pytest outcomes (an ERROR that could not measure shows as
# "Failed", N.A. and NOT RUN as "Skipped"): hidden, and ours shown instead.
_HIDE_PYTEST_COUNTS = ("<style>.summary__data>.run-count,.summary__data>.filter,.controls .filters"
                       "{display:none}</style>")


def status_counts(records: list[dict]) -> str:
    counts = Counter(r["status"] for r in records)
    parts = ", ".join(f"<span class='{_cls(s)}' data-status='{s}'>{counts[s]} {s}</span>"
                      for s in STATUSES if counts[s])
    return f"{_HIDE_PYTEST_COUNTS}<p class='so-counts'>{len(records)} checks: {parts}</p>"
