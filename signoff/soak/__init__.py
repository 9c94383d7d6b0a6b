"""Sustained load: a GEMM on every GPU of every host at once for the profile's `soak:`
duration (probe_soak streams NVML samples), judged for temperature held, throttling, clock
stability, GEMM rate, stragglers and errors (judge.py; run.py streams, plots.py draws)."""

from signoff import InputError
from signoff.soak import judge

CRITERIA = {
    # sustained load (docs/soak.md); the load itself is the profile's `soak:` section
    "soak_gpu_temp": {"type": "number", "ops": ("max",), "extra": ("hold",)},  # sustained: held `hold` s
    "soak_mem_temp": {"type": "number", "ops": ("max",), "extra": ("hold",)},
    # samples with a failing reason; % clock drop, hot vs cool
    "soak_throttle": {"type": "number", "ops": ("max",), "extra": ("reasons",)},
    # with_limit: correlation is the rule's second limit, set with the first in a child (profiles.py)
    "soak_clock_stability": {"type": "number", "ops": ("max",), "extra": ("correlation",),
                             "with_limit": ("correlation",)},
    # per GPU, mean after warm-up; derived model_median (no class): a fraction of the median GPU
    # of its model in the run (judge.judge_gemm_model), N.A. where the run has one such GPU
    "soak_gemm_tflops": {"type": "number", "fleet": True, "derived": {"model_median": "x model median"}},
    "soak_gemm_straggler": {"type": "number"},  # GPU / the host's median GPU
    "soak_errors": {"type": "number", "ops": ("max",)},  # new uncorrectable ECC errors, XIDs, failed loads
}
PLUGIN = "signoff.soak.plugin"
REPORT_DIRS = ("soak",)  # the report dir's soak/<host>.jsonl: every sample, as streamed


def check_extra(name: str, value, extra: dict, where: str) -> None:
    try:
        judge.check_extra(name, extra)
    except ValueError as exc:
        raise InputError(f"{where}.{exc}") from None


def merge_section(inherited: dict, section, where: str) -> dict:
    """The profile's `soak:` over its parent's, in seconds, checked as a whole."""
    if not isinstance(section, dict):
        raise InputError(f"{where}: expected a mapping of {', '.join(judge.SOAK_KEYS)}")
    try:
        out = {**inherited, **judge.check_section(section)}
        judge.plan(out)
    except ValueError as exc:
        raise InputError(f"{where}.{exc}") from None
    return out


SECTIONS = {"soak": merge_section}


def rebuild(report_dir, doc: dict) -> None:
    """After the controller was killed: each soaked host's series from soak/<host>.jsonl."""
    from signoff.soak.run import replay
    for name, live in (doc.get("soak") or {}).items():
        if "series" not in live:
            doc["soak"][name] = replay(report_dir, name, live)


def bound(doc: dict) -> None:
    """results.json's soak section: each host's samples are in soak/<host>.jsonl (its `file`,
    every sample), not repeated there (~80 KB a host on a 5 min soak, 1,800 samples x GPUs on
    a long one); load() reads the kept ones back."""
    if doc.get("soak"):
        doc["soak"] = {name: {k: v for k, v in live.items() if k != "series"} if live.get("file") else live
                       for name, live in doc["soak"].items()}


def load(report_dir, doc: dict) -> None:
    """bound()'s inverse: each host's `series` (every `every_nth_sample_kept`-th sample) from its file."""
    from signoff.soak.run import kept_samples
    for name, live in (doc.get("soak") or {}).items():
        if "series" not in live and live.get("file"):
            doc["soak"][name] = {**live, "series": kept_samples(report_dir, live)}


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: the soak's load time (the run's, --soak-duration or the profile's)."""
    if "soak_gpu_temp" not in picked and "soak_errors" not in picked:
        return []
    try:
        p = judge.plan(prof.section("soak"), config.getoption("soak_duration"))
    except ValueError as exc:
        raise InputError(f"profile {prof.name} soak.{exc}") from None
    whose = "--soak-duration" if config.getoption("soak_duration") is not None else \
        f"profile {prof.name} soak.duration"
    return [f"soak: {judge.human_duration(p['duration'])} of load on every host at once ({whose})"]
