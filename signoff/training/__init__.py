"""Training-level sign-off: a real data-parallel training step (probe_train: DDP, bf16 autocast,
fused AdamW on a transformer stack the profile's `training:` section sizes) at 1, 2, 4, ... all
GPUs of a host and over every node; whether a DataLoader's CPU work can feed it (probe_loader);
host<->GPU copy bandwidth and NUMA placement (probe_hostlink); a model-parallel step over the
host's GPUs (probe_parallel: Megatron's tensor-parallel MLP, a GPipe pipeline). Judged in judge.py
and parallel.py."""

from signoff import InputError

CRITERIA = {
    # retry: measured again after a miss, up to `attempts` in all (signoff/retry.py)
    # fleet: also judged against the median of the run's hosts of the class (signoff/outlier.py)
    "train_throughput": {"type": "number", "retry": True, "fleet": True},  # model TFLOP/s, 1-GPU step
    "train_loss_falls": {"type": "number", "ops": ("max",)},  # late loss / first loss, worst width
    "train_scaling_host": {"type": "number"},  # efficiency at all GPUs of the host
    # efficiency over every node; derived step_bound: a fraction of what a step that cannot overlap
    # its gradient all-reduce reaches, from figures of the same run (judge.step_bound)
    "train_scaling_nodes": {"type": "number", "derived": {"step_bound": "x step bound"}},
    "train_input_headroom": {"type": "number"},  # DataLoader samples/s / the step's samples/s
    # GB/s, slowest GPU's pinned H2D or D2H; derived pcie_link (no class): a fraction of each
    # GPU's own PCIe link, the gen x width it and its slot support (judge.link_fractions)
    "host_link_bandwidth": {"type": "number", "retry": True, "fleet": True,
                            "derived": {"pcie_link": "x PCIe link"}},
    # which transport the step's traffic between nodes took (network/route.py), as multinode_transport
    # for the all-reduce: NET, MNNVL or data_iface. Judged by the class's multinode_transport unless
    # a profile sets this one (a site whose training takes another path than its benchmark)
    "train_transport": {"type": "name", "ops": ("equals",)},
    # the model-parallel step over the host's ranks (probe_parallel, judged in parallel.py): model
    # TFLOP/s per GPU; derived train_throughput: a fraction of the class's train_throughput figure
    # (the pipeline's x (1 - its schedule's ideal bubble)), ERROR where the class has none
    "tp_step_tflops": {"type": "number", "derived": {"train_throughput": "x train_throughput"}},
    "tp_comm_share": {"type": "number", "ops": ("max",)},  # share of the TP step in its all-reduces
    "pipeline_step_tflops": {"type": "number",
                             "derived": {"train_throughput": "x train_throughput x (1 - ideal bubble)"}},
    # the most idle stage's bubble; the limit is a margin over the schedule's ideal (p-1)/(m+p-1)
    "pipeline_bubble": {"type": "number", "ops": ("max",)},
}
PLUGIN = "signoff.training.plugin"

# The step and the loader, where a profile sets no `training:` key: the H200 anchor's model
# (measured on one H200, docs/h200.md: 12 layers, d_model 2048, seq 2048, batch 8, 604 M
# parameters) and its DataLoader (3x256x256 uint8 -> bilinear 224 -> normalise, batch 64).
DEFAULTS = {"layers": 12, "d_model": 2048, "heads": 16, "ffn": 8192, "seq": 2048, "batch": 8,
            "warmup": 3, "steps": 20, "lr": 1e-4, "threads": 1}
LOADER = {"size": 256, "crop": 224, "batch": 64, "samples": 1024, "workers": None, "delay_ms": 0}
# The model-parallel step (probe_parallel) takes the step's sizes above; its own: the pipeline's
# micro-batches (None: 4 x its stages) and, for tests, a sleep of delay_ms per micro-batch on stage
# delay_stage (a fake slow stage: signoff cannot slow one rank of a host for real).
PARALLEL = {"micro_batches": None, "delay_ms": 0, "delay_stage": 0}


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "train_transport":
        from signoff.network import TRANSPORTS
        if value not in TRANSPORTS:
            raise InputError(f"{where}.equals: expected one of {', '.join(TRANSPORTS)}, got {value!r}")


def _number(where: str, key: str, val, low: float, integer: bool = True):
    ok = not isinstance(val, bool) and isinstance(val, int if integer else (int, float)) and val >= low
    if not ok:
        raise InputError(f"{where}.{key}: expected {'an integer' if integer else 'a number'} "
                         f">= {low:g}, got {val!r}")
    return val


def merge_section(inherited: dict, section, where: str) -> dict:
    """The profile's `training:` over its parent's; every key checked, unknown ones refused."""
    if not isinstance(section, dict):
        raise InputError(f"{where}: expected a mapping of {', '.join([*DEFAULTS, 'loader', 'parallel'])}")
    out = {**DEFAULTS, **inherited, "loader": {**LOADER, **inherited.get("loader", {})},
           "parallel": {**PARALLEL, **inherited.get("parallel", {})}}
    for key, val in section.items():
        if key == "parallel":
            if not isinstance(val, dict):
                raise InputError(f"{where}.parallel: expected a mapping of {', '.join(PARALLEL)}")
            for k, v in val.items():
                if k not in PARALLEL:
                    raise InputError(f"{where}.parallel.{k}: unknown key (allowed: {', '.join(PARALLEL)})")
                if not (k == "micro_batches" and v is None):
                    _number(where, f"parallel.{k}", v, 1 if k == "micro_batches" else 0, k != "delay_ms")
                out["parallel"][k] = v
            continue
        if key == "loader":
            if not isinstance(val, dict):
                raise InputError(f"{where}.loader: expected a mapping of {', '.join(LOADER)}")
            for k, v in val.items():
                if k not in LOADER:
                    raise InputError(f"{where}.loader.{k}: unknown key (allowed: {', '.join(LOADER)})")
                if k == "workers":
                    if v is not None and (not isinstance(v, list) or not v
                                          or any(isinstance(w, bool) or not isinstance(w, int) or w < 0
                                                 for w in v)):
                        raise InputError(f"{where}.loader.workers: expected a list of worker counts "
                                         f">= 0 (or null: 0, 1, 2, 4, ... the host's CPUs), got {v!r}")
                else:
                    _number(where, f"loader.{k}", v, 0 if k == "delay_ms" else 1, k != "delay_ms")
                out["loader"][k] = v
        elif key in DEFAULTS:
            out[key] = _number(where, key, val, 0 if key == "lr" else 1, key != "lr")
        else:
            raise InputError(f"{where}.{key}: unknown key (allowed: "
                             f"{', '.join([*DEFAULTS, 'loader', 'parallel'])})")
    if out["d_model"] % out["heads"]:
        raise InputError(f"{where}: d_model {out['d_model']} is not a multiple of heads {out['heads']}")
    if out["loader"]["crop"] > out["loader"]["size"]:
        raise InputError(f"{where}.loader.crop: {out['loader']['crop']} is larger than size "
                         f"{out['loader']['size']}")
    return out


SECTIONS = {"training": merge_section}


def section(profile) -> dict:
    """The profile's training section with every default filled in."""
    return merge_section(profile.section("training"), {}, f"profile {profile.name}: training")


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: the model-parallel step's time per host (every host at once), its model FLOP
    at the class's train_throughput floor: the most a healthy host takes (start-up on top)."""
    from signoff.training.parallel import plan_seconds
    ours = [c for c in ("tp_step_tflops", "tp_comm_share", "pipeline_step_tflops", "pipeline_bubble")
            if c in picked]
    if not ours:
        return []
    t = prof.criteria.get("train_throughput")
    ranks = prof.hardware.get("gpu_count") or 2  # a CPU-only host's 2 gloo ranks
    if ranks < 2:
        return ["model-parallel steps: N.A. on these hosts (one GPU each): no time"]
    if t is None or t.unit != "TFLOP/s":
        return [f"model-parallel steps ({', '.join(ours)}): time unknown (no train_throughput figure)"]
    return [f"model-parallel steps (tensor-parallel, then a GPipe pipeline over {ranks} ranks; at "
            f"train_throughput's {t.value:g} TFLOP/s): {plan_seconds(section(prof), ranks, t.value):.0f} s"]
