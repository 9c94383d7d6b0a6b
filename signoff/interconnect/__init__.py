"""Intra-node GPU interconnect: all-reduce bus bandwidth over a sweep of sizes (probe_allreduce,
torch.distributed: NCCL on GPUs, gloo on CPUs), GPU pair copies and topology (probe_p2p), the
NCCL transport; measured on every host at once (run.py), diagnosed (judge.py), drawn (plots.py)."""

from signoff import InputError
from signoff.units import parse_size

CRITERIA = {
    # judged at `size`; `sweep` = [smallest, largest] message, x2 steps
    # retry: measured again after a miss, up to `attempts` in all (signoff/retry.py)
    "allreduce_busbw": {"type": "number", "extra": ("size", "sweep"), "retry": True, "fleet": True},
    # fleet: also judged against the median of the run's hosts of the class (signoff/outlier.py)
    # slowest pair, unidirectional; derived link_rate: a fraction of each pair's own link rate
    # (the NVLinks between the two, else their PCIe link: judge.py), where the class has no figure
    "p2p_bandwidth": {"type": "number", "retry": True, "fleet": True,
                      "derived": {"link_rate": "x link rate"}},
    "p2p_uniformity": {"type": "number"},  # slowest pair / median pair, of the judged P2P attempt
    # the other collectives of nccl-tests, measured in the all-reduce's probe run, judged at
    # allreduce_busbw's size (GB/s); derived allreduce: a fraction of the host's own all-reduce
    # busbw at that size in the same run (acceptance/test_interconnect.py, collective_threshold)
    **{f"{op}_busbw": {"type": "number", "derived": {"allreduce": "x all-reduce"}}
       for op in ("allgather", "reduce_scatter", "alltoall", "sendrecv")},
}
PLUGIN = "signoff.interconnect.plugin"
SWEEP = ["1M", "8G"]  # where a profile sets no sweep


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "allreduce_busbw":
        check_sweep(extra, where)


def check_sweep(extra: dict, where: str) -> None:
    """The reference size must be one of the swept sizes (x2 steps from the smallest)."""
    if "size" not in extra:
        raise InputError(f"{where}.size: missing (the message size the threshold applies to)")
    sweep = extra.get("sweep", SWEEP)
    try:
        lo, hi = (parse_size(s) for s in sweep)
        size = parse_size(extra["size"])
    except (ValueError, TypeError) as exc:
        raise InputError(f"{where}: {exc}") from None
    if not lo <= size <= hi or (size // lo) & (size // lo - 1) or size % lo:
        raise InputError(f"{where}.size: {extra['size']} is not among the swept sizes "
                         f"{sweep[0]}..{sweep[1]} (x2 steps)")
    extra["sweep"] = [str(s) for s in sweep]
