"""The model-parallel step's judgement (probe_parallel's document): pure functions."""

from __future__ import annotations

from dataclasses import replace
from statistics import median

from signoff import InputError
from signoff.training.judge import STRAGGLER


def ideal_bubble(p: int, m: int) -> float:
    """GPipe's (and 1F1B's) bubble as a share of the step: p - 1 idle slots of m + p - 1, every
    stage's ops equal (Huang et al., GPipe, arXiv:1811.06965; Narayanan et al. arXiv:2104.04473
    §2.2.1 give (p-1)/m of the ideal time, the same share of the whole step)."""
    return (p - 1) / (m + p - 1)


# Where tensor parallelism is laid: inside one server's NVLink domain, pipeline parallelism across
# the slower links (Narayanan et al., arXiv:2104.04473, section 3.2, Takeaway #1: tensor model
# parallelism up to degree g on g-GPU servers, its all-reduces on the servers' NVLink)
TP_DOMAIN = "tensor parallelism is laid inside an NVLink domain (Megatron-LM: arXiv:2104.04473, section 3.2)"


def tp_not_laid(profile, devices: list[dict]) -> str | None:
    """Why the tensor-parallel checks are N.A. on this host, or None (judged): a class whose GPUs
    talk over PCIe only (hardware.interconnect pcie), or, under a profile that promises no
    interconnect (any), GPUs with no NVLink at all. Its all-reduces there take most of the step
    (tp_comm_share's source), and no public figure judges that step. gloo ranks (no GPU) stay
    judged: the lab's profile sets its own floors."""
    how = profile.hardware.get("interconnect", "any")
    if how == "nvlink":
        return None
    if how != "any":
        return (f"profile {profile.name}'s GPUs talk over {how.upper()} only (hardware.interconnect "
                f"{how}): {TP_DOMAIN}; the pipeline steps are judged")
    if devices and not any(g["nvlink"]["links"] for g in devices):
        return (f"no NVLink between this host's GPUs (profile {profile.name} promises no interconnect): "
                f"{TP_DOMAIN}; the pipeline steps are judged")
    return None


def floor(t, profile, ideal: float | None = None):
    """tp_step_tflops / pipeline_step_tflops as judged: `t` itself, or under `derived:
    train_throughput` t.value x the profile's train_throughput figure (TFLOP/s), the pipeline's
    times (1 - `ideal`, its schedule's bubble). A profile without that figure: InputError (ERROR)."""
    if t.extra.get("derived") != "train_throughput":
        return t
    base = profile.criteria.get("train_throughput")
    if base is None or base.unit != "TFLOP/s":
        why = "has no threshold for it" if base is None else f"has it in {base.unit}, not TFLOP/s"
        raise InputError(f"profile {profile.name}: {t.criterion} is derived from the class's "
                         f"train_throughput (derived: train_throughput), and the profile {why}: no "
                         f"figure to judge the step by (measure the class's step: docs/thresholds.md)")
    factor = 1.0 if ideal is None else 1 - ideal
    rule = f"derived: {t.value:g} x train_throughput {base.value:g} TFLOP/s" + \
        ("" if ideal is None else f" x (1 - the ideal bubble {ideal:.4g})")
    return replace(t, value=round(t.value * base.value * factor, 6), unit="TFLOP/s",
                   source=f"{rule} (train_throughput: {base.source}); {t.source}")


def bubble_limit(t, ideal: float):
    """pipeline_bubble's limit: the schedule's ideal bubble plus the threshold's margin."""
    return replace(t, value=round(ideal + t.value, 4), unit="share of the step",
                   source=f"the schedule's ideal bubble (p-1)/(m+p-1) = {ideal:.4g} + {t.value:g} "
                          f"({t.source})")


def slow_stage(stages: list[dict]) -> tuple[int | None, str]:
    """(the stage whose own work stands out, why), or (None, why none does): its busy time over
    STRAGGLER x the other stages' median (a slow GPU or a stage given more work makes every
    other stage wait on it)."""
    if len(stages) < 2:
        return None, "one stage"
    top = max(stages, key=lambda s: s["busy_s"])
    mid = median(s["busy_s"] for s in stages if s is not top)
    if mid > 0 and top["busy_s"] > STRAGGLER * mid:
        return top["stage"], (f"stage {top['stage']} is busy {top['busy_s'] * 1e3:.1f} ms per step, "
                              f"{top['busy_s'] / mid:.1f} x the other stages' median "
                              f"{mid * 1e3:.1f} ms: the others wait on it")
    return None, (f"no stage stands out (each busy within {STRAGGLER:g} x the others' median, the "
                  f"busiest {top['busy_s'] * 1e3:.1f} ms per step)")


def idlest(stages: list[dict]) -> dict:
    return max(stages, key=lambda s: s["bubble"])


def plan_seconds(sec: dict, p: int, tflops: float) -> float:
    """The probe's model FLOP per GPU (both steps, warm-up, timed and no-comm steps) at `tflops`
    per GPU, the pipeline at its ideal bubble: a healthy host's time at the class's floor."""
    tokens = sec["batch"] * sec["seq"]
    m = sec["parallel"]["micro_batches"] or 4 * p
    per = -(-sec["layers"] // p)
    tp = 6 * sec["layers"] * 2 * sec["d_model"] * sec["ffn"] * tokens / p
    pp = 6 * per * 2 * sec["d_model"] * sec["ffn"] * tokens * m / (1 - ideal_bubble(p, m))
    steps = sec["warmup"] + sec["steps"]
    return (tp * (steps + 1 + max(2, sec["steps"] // 2)) + pp * steps) / (tflops * 1e12)
