"""Soak report figures: one time series per host (GPU and memory temperature, power, SM
clock, GEMM rate per GPU; clock-event reasons as an event strip) with the profile's limits
drawn, and an HTML table of maxima and medians."""

from __future__ import annotations

import math

from signoff.figures import png, pyplot
from signoff.render import render
from signoff.soak.judge import FAIL_REASONS, REASON_BITS, Series, mask_of

MAX_POINTS = 4000  # per line; longer soaks are plotted every k-th sample (the table uses all)


def _x(s: Series) -> tuple[list, str, float]:
    span = s.t[-1] if len(s) else 0
    if span > 3 * 3600:
        return [t / 3600 for t in s.t], "h", 3600.0
    if span > 600:
        return [t / 60 for t in s.t], "min", 60.0
    return list(s.t), "s", 1.0


def timeseries(host: str, s: Series, gpus: list[dict], limits: dict, warmup: float,
               fail: tuple = FAIL_REASONS) -> str:
    """limits: {"temp": °C, "mem_temp": °C, "tflops": TFLOP/s or None}."""
    plt = pyplot()
    x, unit, scale = _x(s)
    step = max(1, len(x) // MAX_POINTS)
    panels = [("temp", "GPU °C"), ("mem_temp", "memory °C"), ("power", "power W"),
              ("sm_clock", "SM clock MHz"), ("tflops", "GEMM TFLOP/s")]
    fig, axes = plt.subplots(len(panels) + 1, 1, figsize=(8, 12), sharex=True,
                             gridspec_kw={"height_ratios": [3, 3, 3, 3, 3, 1.2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (f, label) in zip(axes, panels):
        for g in range(s.n):
            ys = [v if not math.isnan(v) else None for v in s.cols[f][g]]
            ax.plot(x[::step], ys[::step], lw=0.9, color=colors[g % len(colors)],
                    label=f"GPU {g}")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        if warmup:
            ax.axvspan(0, warmup / scale, color="grey", alpha=0.12, lw=0)
    thr = (gpus[0].get("temp_thresholds") or {}) if gpus else {}
    # profile limits: black dashed; the GPU's own NVML limits: grey dotted
    _hline(axes[0], limits.get("temp"), "black", f"limit {limits.get('temp')} °C (sustained)", "--")
    _hline(axes[0], thr.get("slowdown"), "grey", f"NVML slowdown {thr.get('slowdown')} °C", ":")
    _hline(axes[1], limits.get("mem_temp"), "black", f"limit {limits.get('mem_temp')} °C (sustained)",
           "--")
    _hline(axes[1], thr.get("mem_max"), "grey", f"NVML memory max {thr.get('mem_max')} °C", ":")
    power = gpus[0].get("power_limit_w") if gpus else None
    _hline(axes[2], power, "grey", f"NVML power limit {power} W", ":")
    _hline(axes[4], limits.get("tflops"), "black", f"minimum {limits.get('tflops')} TFLOP/s", "--")
    axes[0].legend(fontsize=6, ncol=min(8, s.n + 2), loc="lower right")
    for ax in axes[1:5]:
        if ax.get_legend_handles_labels()[0]:
            handles, labels = ax.get_legend_handles_labels()
            keep = [(h, lab) for h, lab in zip(handles, labels) if not lab.startswith("GPU ")]
            if keep:
                ax.legend(*zip(*keep), fontsize=6, loc="lower right")
    _reasons_strip(axes[-1], s, x, fail)
    axes[-1].set_xlabel(f"time since load start ({unit}); shaded: warm-up", fontsize=8)
    axes[0].set_title(f"{host}: sustained bf16 GEMM on {s.n} GPU(s)", fontsize=10)
    return png(fig)


def _hline(ax, y, color, label, ls):
    if y is not None:
        ax.axhline(y, color=color, lw=1.2, ls=ls, label=label)


def _reasons_strip(ax, s: Series, x: list, fail: tuple) -> None:
    """One row per GPU: grey ticks where only the SW power cap is set, red where a failing
    reason is, blue for any other reason."""
    fail_mask, cap = mask_of(fail), REASON_BITS["sw_power_cap"]
    step = max(1, len(x) // MAX_POINTS)  # thin the grey and blue ticks, never the red ones
    for g in range(s.n):
        groups = {"failing": [], "power cap": [], "other": []}
        for k, (xi, m) in enumerate(zip(x, s.cols["reasons"][g])):
            if math.isnan(m) or not int(m):
                continue
            m = int(m)
            key = "failing" if m & fail_mask else "power cap" if m & ~0x1 == cap else "other"
            if key == "failing" or k % step == 0:
                groups[key].append(xi)
        for key, color, size in (("power cap", "0.6", 4), ("other", "tab:blue", 6),
                                 ("failing", "red", 12)):
            if groups[key]:
                ax.scatter(groups[key], [g] * len(groups[key]), marker="|", s=size * 8,
                           color=color, label=key if g == 0 or key == "failing" else None)
    ax.set_yticks(range(s.n), [f"GPU {g}" for g in range(s.n)], fontsize=6)
    ax.set_ylim(-0.7, s.n - 0.3)
    ax.set_ylabel("reasons", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    if uniq:
        ax.legend(uniq.values(), uniq.keys(), fontsize=6, loc="upper right", ncol=3)


def _fmt(v, nd=0) -> str:
    return "–" if v is None else f"{v:.{nd}f}"


def table(rows: list[dict], interval: float) -> str:
    """Per GPU: maxima, sustained values and medians over the load (signoff.soak.summary)."""
    body = []
    for r in rows:
        t, m, p, c = r["temp"] or {}, r["mem_temp"] or {}, r["power"] or {}, r["sm_clock"] or {}
        body.append({
            "gpu": r["gpu"],
            "temp": " / ".join(map(_fmt, (t.get("max"), r.get("temp_sustained"), t.get("median")))),
            "mem_temp": " / ".join(map(_fmt, (m.get("max"), r.get("mem_temp_sustained"), m.get("median")))),
            "power": f"{_fmt(p.get('max'), 1)} / {_fmt(p.get('median'), 1)}",
            "clock": f"{_fmt(c.get('median'))} / {_fmt(c.get('min'))}", "tflops": _fmt(r.get("tflops"), 1),
            "reasons": ", ".join(f"{k} {v * interval:g}" for k, v in sorted(r["reasons"].items())) or "none"})
    return render("soak/table.jinja2", rows=body)
