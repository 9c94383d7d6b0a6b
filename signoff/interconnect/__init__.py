"""Intra-node GPU interconnect: all-reduce bus bandwidth over a sweep of sizes (probe_allreduce,
torch.distributed: NCCL on GPUs, gloo on CPUs), GPU pair copies and topology (probe_p2p), the
NCCL transport; measured on every host at once (run.py), diagnosed (judge.py), drawn (plots.py)."""

from signoff import InputError
from signoff.units import parse_size

CRITERIA = {
    # judged at `size`; `sweep` = [smallest, largest] message, x2 steps
    # `attempts`: measured again after a miss, up to this many in all (ATTEMPTS by default)
    "allreduce_busbw": {"type": "number", "extra": ("size", "sweep", "attempts")},
    "p2p_bandwidth": {"type": "number"},  # slowest GPU pair, unidirectional copy
    "p2p_uniformity": {"type": "number"},  # slowest pair / median pair of the host
}
PLUGIN = "signoff.interconnect.plugin"
SWEEP = ["1M", "8G"]  # where a profile sets no sweep
# Bandwidth is noisy (a neighbour's job, a clock ramp): a miss is measured again, best of 3
# in all (the policy); bounded so a truly slow host costs 3 sweeps, not more.
ATTEMPTS, MAX_ATTEMPTS = 3, 5


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "allreduce_busbw":
        check_sweep(extra, where)
        n = extra.get("attempts", ATTEMPTS)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_ATTEMPTS:
            raise InputError(f"{where}.attempts: {n!r}: expected 1-{MAX_ATTEMPTS} (1: never measured again)")


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
