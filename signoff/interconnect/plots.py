"""Interconnect figures: every host's all-reduce busbw curve on one chart, the GPU pair heatmaps."""

from __future__ import annotations

from signoff.figures import png, pyplot
from signoff.render import render
from signoff.units import human_bytes

# probe_allreduce's collectives, as the report names them
OP_NAMES = {"allreduce": "all-reduce", "allgather": "all-gather", "reduce_scatter": "reduce-scatter",
            "alltoall": "all-to-all", "sendrecv": "send/recv"}


def p2p_heatmap(host: str, n: int, matrix: dict, title: str, limit: float | None = None) -> str:
    plt = pyplot()
    import numpy as np

    m = np.full((n, n), np.nan)
    for key, v in matrix.items():
        i, j = map(int, key.split("-"))
        m[i, j] = v
    fig, ax = plt.subplots(figsize=(1.2 + 0.55 * n, 1.0 + 0.5 * n))
    im = ax.imshow(m, cmap="viridis")
    for i in range(n):
        for j in range(n):
            if not np.isnan(m[i, j]):
                bad = limit is not None and m[i, j] < limit
                ax.text(j, i, f"{m[i, j]:.0f}", ha="center", va="center", fontsize=7,
                        color="red" if bad else "white", fontweight="bold" if bad else None)
    ax.set_xlabel("to GPU")
    ax.set_ylabel("from GPU")
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_title(f"{host}: {title} (GB/s)", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return png(fig)


def allreduce_table(doc: dict) -> str:
    return render("interconnect/allreduce_table.jinja2", rows=[
        {"size": human_bytes(r["bytes"]), "time_us": f"{r['time_us']:.1f}", "algbw": f"{r['algbw']:.2f}",
         "busbw": f"{r['busbw']:.2f}", "result": "ok" if r["correct"] else "WRONG"} for r in doc["rows"]])


def busbw_hosts(rows: dict[str, list[dict]], limit: float | None, ref_bytes: int | None,
                max_lines: int = 16, worst: int = 3) -> str:
    """busbw vs size of every host on one chart; above `max_lines` hosts, their distribution
    (median, 10-90 % and min-max bands) and the `worst` hosts at the judged size as lines."""
    plt = pyplot()
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    sizes = sorted({r["bytes"] for rs in rows.values() for r in rs})
    if len(rows) <= max_lines:
        for h, rs in sorted(rows.items()):
            ax.plot([r["bytes"] for r in rs], [r["busbw"] for r in rs], "o-", ms=3, lw=1, label=h)
        title = f"all-reduce busbw, {len(rows)} host(s)"
    else:
        grid = np.array([[next((r["busbw"] for r in rs if r["bytes"] == b), np.nan) for b in sizes]
                         for rs in rows.values()])
        q = {p: np.nanpercentile(grid, p, axis=0) for p in (0, 10, 50, 90, 100)}
        ax.fill_between(sizes, q[0], q[100], color="tab:blue", alpha=0.15, label="min-max")
        ax.fill_between(sizes, q[10], q[90], color="tab:blue", alpha=0.3, label="10-90 %")
        ax.plot(sizes, q[50], "-", color="tab:blue", lw=1.5, label="median")
        at = ref_bytes if ref_bytes in sizes else sizes[-1]
        low = sorted(rows, key=lambda h: next((r["busbw"] for r in rows[h] if r["bytes"] == at), 0))[:worst]
        for h in low:
            ax.plot([r["bytes"] for r in rows[h]], [r["busbw"] for r in rows[h]], ".-", lw=1,
                    label=f"{h} (lowest)")
        title = f"all-reduce busbw, {len(rows)} hosts: distribution and the {worst} lowest"
    if limit is not None:
        ax.axhline(limit, color="red", lw=1, label=f"threshold {limit:g} GB/s")
    if ref_bytes:
        ax.axvline(ref_bytes, color="grey", lw=0.8, ls=":", label=f"judged at {human_bytes(ref_bytes)}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [human_bytes(v) for v in sizes], rotation=60, fontsize=7)
    ax.set_ylabel("busbw GB/s (1e9 B/s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    return png(fig)


def collectives_table(doc: dict) -> str:
    """busbw of every collective of one probe run by size, the all-reduce's first."""
    ops = {"allreduce": doc.get("rows") or [], **(doc.get("ops") or {})}
    sizes = sorted({r["bytes"] for rs in ops.values() for r in rs})

    def cell(rs, b):
        r = next((x for x in rs if x["bytes"] == b), None)
        return "" if r is None else f"{r['busbw']:.2f}{'' if r['correct'] else ' WRONG'}"
    # an op's name is the host's probe's word (its document's keys): the template shows it as text
    return render("interconnect/collectives_table.jinja2", ops=[OP_NAMES.get(o, o) for o in ops],
                  rows=[(human_bytes(b), [cell(rs, b) for rs in ops.values()]) for b in sizes])


def collectives_chart(host: str, ops: dict[str, list[dict]], ref_bytes: int | None,
                      title: str = "collectives") -> str:
    """busbw vs size of each collective of one host (or one rail, one run), the all-reduce among them."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    sizes = sorted({r["bytes"] for rs in ops.values() for r in rs})
    for op in sorted(ops, key=lambda o: list(OP_NAMES).index(o) if o in OP_NAMES else 99):
        rs = ops[op]
        ax.plot([r["bytes"] for r in rs], [r["busbw"] for r in rs], "o-" if op == "allreduce" else ".-",
                ms=3, lw=1.6 if op == "allreduce" else 1, label=OP_NAMES.get(op, op))
    if ref_bytes:
        ax.axvline(ref_bytes, color="grey", lw=0.8, ls=":", label=f"judged at {human_bytes(ref_bytes)}")
    ax.set_xscale("log", base=2)
    if sizes:
        ax.set_xticks(sizes, [human_bytes(v) for v in sizes], rotation=60, fontsize=7)
    ax.set_ylabel("busbw GB/s (1e9 B/s)")
    ax.set_title(f"{host}: {title} busbw beside the all-reduce", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=3)
    return png(fig)
