"""The report's RoCE section: per host and port, how each watched counter grew over the run (the
loss counters roce_loss judges, and the pause frames and CNPs roce_congestion judges only against a
site's bound: shown here whatever the verdict, so a site can set one from healthy runs)."""

from __future__ import annotations

from signoff.render import render

MAX_ROWS = 300
CONGESTION = ("pause", "cnp")


def rows(records: list[dict]) -> list[dict]:
    """Every counter's growth of every host's roce_loss record (its details: start and end)."""
    out = []
    for r in records:
        if r.get("criterion") != "roce_loss":
            continue
        d = r.get("details") or {}
        before, after = d.get("before") or {}, d.get("after") or {}
        for port, start in sorted(before.items()):
            end = after.get(port) or {}
            for name, b in sorted((start or {}).items()):
                e = end.get(name)
                if isinstance(b, int) and isinstance(e, int):
                    out.append({"host": r.get("host"), "port": port, "counter": name, "start": b, "end": e,
                                "growth": e - b, "kind": "congestion" if any(k in name for k in CONGESTION)
                                else "loss"})
    out.sort(key=lambda x: (-x["growth"], str(x["host"]), x["port"], x["counter"]))
    return out


def section(records: list[dict]) -> str:
    got = rows(records)
    if not got:
        return ""
    return render("roce/section.jinja2", rows=got[:MAX_ROWS], more=max(0, len(got) - MAX_ROWS))
