"""Interconnect figures: the all-reduce busbw curve and the GPU pair heatmaps."""

from __future__ import annotations

from signoff.figures import plt, png
from signoff.units import human_bytes


def busbw_curve(host: str, rows: list[dict], limit: float | None, ref_bytes: int | None) -> str:
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    x = [r["bytes"] for r in rows]
    ax.plot(x, [r["busbw"] for r in rows], "o-", label="busbw")
    ax.plot(x, [r["algbw"] for r in rows], ".--", alpha=0.6, label="algbw")
    if limit is not None:
        ax.axhline(limit, color="red", lw=1, label=f"threshold {limit:g} GB/s")
    if ref_bytes:
        ax.axvline(ref_bytes, color="grey", lw=0.8, ls=":", label=f"judged at {human_bytes(ref_bytes)}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [human_bytes(v) for v in x], rotation=60, fontsize=7)
    ax.set_ylabel("GB/s (1e9 B/s)")
    ax.set_title(f"{host}: all-reduce bandwidth")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return png(fig)


def p2p_heatmap(host: str, n: int, matrix: dict, title: str, limit: float | None = None) -> str:
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
    rows = "".join(f"<tr><td>{human_bytes(r['bytes'])}</td><td>{r['time_us']:.1f}</td>"
                   f"<td>{r['algbw']:.2f}</td><td>{r['busbw']:.2f}</td>"
                   f"<td>{'ok' if r['correct'] else 'WRONG'}</td></tr>" for r in doc["rows"])
    return ("<table class='so-table'><tr><th>size</th><th>time us</th><th>algbw GB/s</th>"
            f"<th>busbw GB/s</th><th>result</th></tr>{rows}</table>")
