"""The report's versions section: driver/CUDA/NCCL/PyTorch per host (or per value on a large
cluster), the values that differ from the majority marked."""

from __future__ import annotations

from signoff.printable import escape
from signoff.report import MATRIX_MAX_HOSTS, hosts_text, probe_env_text
from signoff.units import readable
from signoff.versions import parity


def judged_env(hosts: dict[str, dict], meta: dict) -> str:
    """Whose software the section shows: each host's probe interpreter (the training
    environment it was pointed at), or signoff's own on a bare machine."""
    own = probe_env_text(meta)
    pys: dict[str, list[str]] = {}
    for h, f in hosts.items():
        if "error" not in f:
            pys.setdefault(str(f.get("python_executable")), []).append(h)
    where = "; ".join(f"{py} on {hosts_text(hs)}" for py, hs in sorted(pys.items()))
    return (f"<p class='so-env'>Environment judged: the probes' interpreter on each host ({escape(where)})"
            + (f". <b>{escape(own)}</b>" if own else ": the training environment it was pointed at")
            + ".</p>")


def versions_matrix(hosts: dict[str, dict], meta: dict | None = None) -> str:
    ok = {h: f for h, f in hosts.items() if "error" not in f}
    per_host = {h: parity.versions(f) for h, f in ok.items()}
    odd = parity.odd_cells(per_host) if len(per_host) > 1 else set()
    for h, f in ok.items():  # the GPUs, as one more field
        gpus = (f.get("nvidia") or {}).get("gpus") or []
        per_host[h]["gpus"] = f"{len(gpus)} x {gpus[0]['name']}" if gpus else "no GPU"
    errors = "".join(f"<li>{escape(h)}: {escape(f['error'])}</li>"
                     for h, f in sorted(hosts.items()) if "error" in f)
    labels = {**{k: label for k, (label, _) in parity.FIELDS.items()}, "gpus": "GPUs"}
    if len(hosts) <= MATRIX_MAX_HOSTS:
        table = _versions_per_host(hosts, per_host, odd, labels)
    else:
        table = _versions_per_value(hosts, per_host, odd, labels)
    return (f"<h2>Versions across hosts</h2>{judged_env(hosts, meta or {})}"
            f"<p>Marked cells differ from the majority.</p>{table}"
            + (f"<h3>Hosts that could not be probed</h3><ul>{errors}</ul>" if errors else ""))



def _versions_per_host(hosts, per_host, odd, labels) -> str:
    names = sorted(hosts)
    head = "".join(f"<th>{escape(h)}</th>" for h in names)
    rows = []
    for field, label in labels.items():
        tds = []
        for h in names:
            if h not in per_host:
                tds.append("<td class='so-ERROR'>unreachable</td>")
            else:
                cls = " class='so-odd'" if (h, field) in odd else ""
                tds.append(f"<td{cls}>{escape(readable(per_host[h][field]))}</td>")
        rows.append(f"<tr><th>{escape(label)}</th>{''.join(tds)}</tr>")
    return f"<table class='so-table'><tr><th></th>{head}</tr>{''.join(rows)}</table>"



def _versions_per_value(hosts, per_host, odd, labels) -> str:
    """Per field, each distinct value with the hosts holding it (folded), the most common first."""
    rows = []
    for field, label in labels.items():
        holders: dict[str, list[str]] = {}
        for h, v in per_host.items():
            holders.setdefault(readable(v[field]), []).append(h)
        cells = []
        for value, hs in sorted(holders.items(), key=lambda x: -len(x[1])):
            cls = " class='so-odd'" if any((h, field) in odd for h in hs) else ""
            cells.append(f"<td{cls}><b>{escape(value)}</b>: {len(hs)} hosts, {escape(hosts_text(hs))}</td>")
        rows.append(f"<tr><th>{escape(label)}</th>{''.join(cells)}</tr>")
    unreachable = sorted(set(hosts) - set(per_host))
    if unreachable:
        rows.append(f"<tr><th>unreachable</th><td class='so-ERROR'>{len(unreachable)} hosts, "
                    f"{escape(hosts_text(unreachable))}</td></tr>")
    return f"<table class='so-table'>{''.join(rows)}</table>"
