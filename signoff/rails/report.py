"""The report's rails section: every measured rail's GB/s beside its floor, the FAILs first,
bounded (the rest stays in results.json)."""

from __future__ import annotations

from signoff.render import render

MAX_ROWS = 200


def section(records: list[dict]) -> str:
    rows = []
    for r in records:
        if r.get("criterion") != "gdr_rail_bw":
            continue
        for row in (r.get("details") or {}).get("rows") or []:
            rows.append({"host": r.get("host"), "status": r.get("status"), **row})
    if not rows:
        return ""
    rows.sort(key=lambda x: (x["status"] == "PASS", x.get("gb_s") is not None, x.get("gb_s") or 0))
    total = len(rows)
    rows = [{k: "" if v is None else v for k, v in x.items()} for x in rows[:MAX_ROWS]]
    return render("rails/section.jinja2", rows=rows, more=max(0, total - MAX_ROWS))
