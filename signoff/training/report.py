"""The report's training section: per host, the step at each width (tokens/s, model TFLOP/s
per GPU, comm share, efficiency), the loader's headroom, and the step over the nodes."""

from __future__ import annotations

from html import escape

from signoff.report import status_class


def training_section(records: list[dict]) -> str:
    by = {(r["criterion"], r["host"]): r for r in records}
    steps = [r for r in records
             if r["criterion"] == "train_throughput" and (r.get("details") or {}).get("widths")]
    nodes = by.get(("train_scaling_nodes", "all hosts"))
    if not steps and not (nodes and (nodes.get("details") or {}).get("efficiency")):
        return ""
    rows = []
    for r in steps:
        scale = by.get(("train_scaling_host", r["host"]), {})
        # int keys in the run's own document, str once read back from results.json
        eff = {str(k): v for k, v in ((scale.get("details") or {}).get("efficiency") or {}).items()}
        head = by.get(("train_input_headroom", r["host"]), {})
        for w in r["details"]["widths"]:
            rows.append(f"<tr class='{status_class(scale.get('status') or r['status'])}'>"
                        f"<td>{escape(r['host'])}</td><td>{w['ranks']}</td><td>{w['step_s'] * 1e3:.1f}</td>"
                        f"<td>{w['tokens_per_s']:g}</td><td>{w['tflops_per_gpu']:g}</td>"
                        f"<td>{w['comm_share']:.0%}</td><td>{eff.get(str(w['ranks']), '')}</td>"
                        f"<td>{escape(str(head.get('measured', '')))}</td></tr>")
    out = ("<h2>Training step</h2><table class='so-table'><tr><th>host</th><th>ranks</th><th>ms/step</th>"
           "<th>tokens/s</th><th>model TFLOP/s per GPU</th><th>comm share</th><th>efficiency</th>"
           f"<th>input headroom</th></tr>{''.join(rows)}</table>")
    d = (nodes or {}).get("details") or {}
    if d.get("efficiency"):
        eff = ", ".join(f"{k} nodes {v}" for k, v in d["efficiency"].items())
        out += (f"<p>Across nodes: <b>{nodes['status']}</b>, efficiency {escape(eff)}; slowest node "
                f"<b>{escape(str(d.get('slowest_node')))}</b></p>")
    return out
