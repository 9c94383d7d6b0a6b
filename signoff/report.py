"""HTML fragments for the pytest-html report: verdict, per-criterion summary (and the host x
criterion matrix on small clusters), notes on the hosts, the profile used. The families add
their own sections (pytest_signoff_report_sections)."""

from __future__ import annotations

import statistics
from collections import Counter
from html import escape

from signoff import hostlist
from signoff.results import ALL, STATUSES

STYLE = """<style>
.so-table{border-collapse:collapse;margin:6px 0 16px}
.so-table td,.so-table th{border:1px solid #bbb;padding:3px 7px;font-size:12px;vertical-align:top}
.so-PASS{background:#d4f4d4}.so-FAIL{background:#f8c8c8}.so-ERROR{background:#f4b183}
.so-NA{background:#e8e8e8}.so-NOTRUN{background:#fff2a8}.so-odd{background:#f8c8c8;font-weight:bold}
.so-verdict{font-size:20px;font-weight:bold;padding:6px 12px;display:inline-block}
</style>"""


def status_class(status: str) -> str:
    return "so-" + status.replace(".", "").replace(" ", "")


def verdict_block(verdict: str, meta: dict) -> str:
    hosts = hostlist.fold(meta.get("hosts", []))
    return (f"{STYLE}<h2>Sign-off verdict</h2>"
            f"<div class='so-verdict {status_class('PASS' if verdict == 'PASS' else 'FAIL')}'>"
            f"{escape(verdict)}</div>"
            f"<p>Profile <b>{escape(str(meta.get('profile')))}</b> "
            f"({escape(str(meta.get('profile_class', '')))}); hosts: {escape(hosts)}; "
            f"inventory: {escape(str(meta.get('inventory')))}; started {meta.get('started')} UTC."
            + (f"<br>Probe Python: {escape(', '.join(f'{h} {py}' for h, py in meta['probe_python'].items()))}"
               if meta.get("probe_python") else "")
            + f"<br>Launcher: {escape(launcher(meta))}"
            + (f"<br><b>Partial run</b>: {escape(meta['partial'])}" if meta.get("partial") else "")
            + "</p>"
            "<p>PASS needs every applicable check to run and pass; ERROR means the check "
            "could not measure (it is not a pass); N.A. means the profile does not apply it to "
            "that host.</p>")


def launcher(meta: dict) -> str:
    """What ran the checks' host commands (each record's `launcher` says it per check)."""
    got = meta.get("launcher") or {}
    if got.get("launcher") != "slurm":
        return "SSH (Fabric) to each host; this machine without SSH where the inventory says local"
    steps = got.get("steps") or []
    return (f"srun inside Slurm job {got.get('job')}: every check's probes as tasks of srun steps, one "
            f"step per probe and phase across the nodes ({len(steps)} steps"
            + (f": {steps[0]} to {steps[-1]}" if steps else "") + "), the multi-node all-reduce as one "
            "step of one task per rank")


# Up to this many hosts the report shows every host x criterion cell (and every host's
# versions); above it, per-criterion counts and the hosts that need a look, so that the
# summary stays one screen at 1,000 hosts.
MATRIX_MAX_HOSTS = 16
WORST = 3  # hosts named per criterion at the bad end of its measured values
FOLD_MAX = 160  # characters of folded host names in one cell before "and N more"
PROBLEMS = ("FAIL", "ERROR", "NOT RUN")


def hosts_text(names) -> str:
    """Host names folded into ranges (node[001-512]); cut at FOLD_MAX characters."""
    names = sorted(set(names))
    text = hostlist.fold(names)
    if len(text) <= FOLD_MAX:
        return text
    lo, hi = 1, len(names)  # the most names whose fold fits, then "and N more"
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(hostlist.fold(names[:mid])) <= FOLD_MAX else (lo, mid - 1)
    return f"{hostlist.fold(names[:lo])} and {len(names) - lo} more"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _direction(expected: str) -> int:
    """+1 where higher is better (">= x"), -1 where lower is ("<= x"), 0 otherwise."""
    return {">=": 1, "<=": -1}.get(str(expected or "").split(" ", 1)[0], 0)


def criterion_stats(recs: list[dict]) -> dict:
    """One criterion's records: hosts per status, min/median/max of the numeric measured
    values, and its worst hosts: the non-PASS ones by status, then the bad end of the values."""
    counts = Counter(r["status"] for r in recs)
    values = sorted(((r["measured"], r["host"]) for r in recs if _number(r.get("measured"))),
                    key=lambda x: x[0])
    some = next((r for r in recs if r.get("expected")), recs[0])
    direction = _direction(some.get("expected"))
    worst = {s: [r["host"] for r in recs if r["status"] == s] for s in PROBLEMS}
    bad_end = (values if direction > 0 else values[::-1])[:WORST] if direction and len(values) > 1 else []
    return {"counts": counts, "unit": some.get("unit") or "", "expected": some.get("expected") or "",
            "source": some.get("source") or "", "direction": direction,
            "min": values[0][0] if values else None, "max": values[-1][0] if values else None,
            "median": statistics.median(v for v, _ in values) if values else None,
            "problems": {s: h for s, h in worst.items() if h}, "bad_end": bad_end}


def _fmt(v) -> str:
    return "" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def criteria_summary(records: list[dict]) -> str:
    """Per criterion, one row whatever the number of hosts."""
    by = {}
    for r in records:
        by.setdefault(r["criterion"], []).append(r)
    rows = []
    for c, recs in by.items():
        st = criterion_stats(recs)
        counts = "".join(f"<td class='{status_class(s)}'>{st['counts'][s]}</td>"
                         if st["counts"][s] else "<td>0</td>" for s in STATUSES)
        worst = [f"<b>{s}</b> {escape(hosts_text(h))}" for s, h in st["problems"].items()]
        if st["bad_end"]:
            end = "lowest" if st["direction"] > 0 else "highest"
            worst.append(f"{end}: " + ", ".join(f"{escape(h)} {_fmt(v)}" for v, h in st["bad_end"]))
        rows.append(f"<tr><th>{escape(c)}</th>{counts}<td>{_fmt(st['min'])}</td><td>{_fmt(st['median'])}"
                    f"</td><td>{_fmt(st['max'])}</td><td>{escape(st['unit'])}</td>"
                    f"<td>{'<br>'.join(worst)}</td><td>{escape(str(st['expected']))}</td>"
                    f"<td>{escape(st['source'])}</td></tr>")
    head = "".join(f"<th>{s}</th>" for s in STATUSES)
    return (f"<h2>Summary: hosts per criterion</h2><table class='so-table'><tr><th>criterion</th>{head}"
            f"<th>min</th><th>median</th><th>max</th><th>unit</th><th>worst hosts</th>"
            f"<th>threshold</th><th>source</th></tr>{''.join(rows)}</table>")


def host_matrix(records: list[dict]) -> str:
    """Every host x criterion cell: for clusters of up to MATRIX_MAX_HOSTS hosts."""
    hosts = sorted({r["host"] for r in records})
    criteria = list(dict.fromkeys(r["criterion"] for r in records))
    cell = {(r["criterion"], r["host"]): r for r in records}
    head = "".join(f"<th>{escape(h)}</th>" for h in hosts)
    rows = []
    for c in criteria:
        tds = []
        for h in hosts:
            r = cell.get((c, h))
            if r is None:
                tds.append("<td></td>")
                continue
            measured = "" if r.get("measured") is None else f"<br>{escape(str(r['measured']))}"
            title = escape(r.get("message") or "", quote=True)
            tds.append(f"<td class='{status_class(r['status'])}' title='{title}'>"
                       f"{r['status']}{measured}</td>")
        rows.append(f"<tr><th>{escape(c)}</th>{''.join(tds)}</tr>")
    return (f"<h2>Host &times; criterion</h2><table class='so-table'><tr><th>criterion</th>"
            f"{head}</tr>{''.join(rows)}</table>")


def problem_tables(records: list[dict]) -> str:
    """Per criterion with a host not passed: those hosts, with value and message (what a
    person must look at on a large cluster, instead of the full matrix)."""
    out = []
    for c in dict.fromkeys(r["criterion"] for r in records):
        recs = [r for r in records if r["criterion"] == c and r["status"] in PROBLEMS]
        rows = "".join(f"<tr class='{status_class(r['status'])}'><td>{escape(r['host'])}</td>"
                       f"<td>{r['status']}</td>"
                       f"<td>{escape(_fmt(r.get('measured')))}</td>"
                       f"<td>{escape(r.get('message') or '')}</td></tr>"
                       for r in sorted(recs, key=lambda r: (PROBLEMS.index(r["status"]), r["host"])))
        if rows:
            out.append(f"<h3>{escape(c)}: {len(recs)} hosts not passed</h3><table class='so-table'>"
                       f"<tr><th>host</th><th></th><th>measured</th><th>message</th></tr>{rows}</table>")
    return "".join(out)


def summary_table(records: list[dict]) -> str:
    if not records:
        return "<h2>Summary</h2><p>no check reported a result</p>"
    if len({r["host"] for r in records} - {ALL}) <= MATRIX_MAX_HOSTS:
        problems = "".join(
            f"<li><b>{r['status']}</b> {escape(r['criterion'])} [{escape(r['host'])}]: "
            f"{escape(r.get('message') or '')}</li>"
            for r in records if r["status"] in PROBLEMS)
        return (criteria_summary(records) + host_matrix(records)
                + (f"<h3>Failures and errors</h3><ul>{problems}</ul>" if problems else ""))
    return (criteria_summary(records) + "<h2>Hosts not passed, per criterion</h2>"
            + (problem_tables(records) or "<p>none</p>"))


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


def host_notes(doc: dict) -> list[str]:
    """What the user must hear of besides the checks, one line per host and kind: what this
    run could not clean up, what killed runs left, GPUs already in use before measuring."""
    lines = [f"left behind on {h}: {w}" for h, ws in doc.get("left_behind", {}).items() for w in ws]
    lines += [f"leftover on {h}: {w}: remove it once no run of it is alive"
              for h, ws in doc.get("leftovers", {}).items() for w in ws]
    lines += [f"{w} before the run: its checks ERROR" for ws in doc.get("slurm", {}).values() for w in ws]
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
    parts = ", ".join(f"<span class='{status_class(s)}' data-status='{s}'>{counts[s]} {s}</span>"
                      for s in STATUSES if counts[s])
    return f"{_HIDE_PYTEST_COUNTS}<p class='so-counts'>{len(records)} checks: {parts}</p>"
