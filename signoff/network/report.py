"""The report's network section: each host pair's throughput as a share of line rate, and the
multi-node all-reduce with its bisection to the slow host or link."""

from __future__ import annotations

from html import escape

from signoff.report import status_class


def _pct(fraction) -> str:
    return "" if fraction is None else f"{100 * fraction:.0f} %"



def network_section(records: list[dict]) -> str:
    """Per host pair: throughput as % of line rate; and the multi-node bisection."""
    pairs = [r for r in records if r["criterion"] == "net_pair_bandwidth" and r.get("details")]
    multi = next((r for r in records if r["criterion"] == "multinode_allreduce"), None)
    if not pairs and not multi:
        return ""
    rows = "".join(
        f"<tr class='{status_class(r['status'])}'><td>{escape(r['host'])}</td>"
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
