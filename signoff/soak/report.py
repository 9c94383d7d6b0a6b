"""The report's soak section: each soaked host's time series (temperature, memory
temperature, power, SM clock, GEMM rate, clock-event reasons) with the profile's limits; on a
large cluster the WORST hosts by peak GPU temperature, and the soak's plan."""

from __future__ import annotations

from signoff.figures import img
from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, WORST
from signoff.soak import plots
from signoff.soak.judge import Series


def _peak(live: dict) -> float:
    return max((v for v in (live.get("max") or {}).get("temp") or [] if v is not None), default=0)


def soak_section(doc: dict, profile) -> str:
    soaks = {h: live for h, live in (doc.get("soak") or {}).items() if len(live.get("series") or []) > 1}
    if not soaks:
        return ""
    crit = profile.criteria if profile else {}
    limits = {k: crit[c].value if c in crit else None for k, c in
              (("temp", "soak_gpu_temp"), ("mem_temp", "soak_mem_temp"), ("tflops", "soak_gemm_tflops"))}
    shown, hottest, figs = sorted(soaks), None, []
    if len(shown) > MATRIX_MAX_HOSTS:
        shown = sorted(sorted(soaks, key=lambda h: -_peak(soaks[h]))[:WORST])
        hottest = {"worst": WORST, "n": len(soaks)}
    for h in shown:
        live = soaks[h]
        gpus = live.get("gpus") or []
        s = Series.from_samples(live["series"], len(gpus))
        figs.append(img(plots.timeseries(h, s, gpus, limits, live.get("warmup_s") or 0),
                        f"{h} soak time series"))
    return render("soak/section.jinja2", hottest=hottest, figures=figs)


def methodology(doc: dict) -> list[dict]:
    live = next(iter((doc.get("soak") or {}).values()), None)
    if not live:
        return []
    return [{"check": "soak_*", "tool": "torch bf16 GEMM on every GPU at once, NVML (nvidia-ml-py) samples",
             "how": f"{live.get('duration_s')} s of load after which the first "
                    f"{live.get('warmup_s', '?')} s are warm-up, sampled every "
                    f"{live.get('interval_s', '?')} s on every soaked host at once; temperatures judged as "
                    f"held for the profile's `hold`, "
                    f"GEMM rate as the mean after warm-up in TFLOP/s (1e12), clock-event reasons counted per "
                    f"sample; XIDs and ECC counters compared before and after"}]
