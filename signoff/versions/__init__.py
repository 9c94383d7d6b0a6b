"""Software versions: the driver judged against its own branch's minimum, CUDA, and the
parity of driver/CUDA/NCCL/PyTorch across hosts (judge.py; acceptance/test_versions.py)."""

from signoff import InputError
from signoff.units import version_tuple

CRITERIA = {
    # branches: the published minimum of each current driver branch (a driver is judged
    # against its own branch's, not only the oldest branch's)
    # with_limit: the branch table is the threshold, set with its min in a child (profiles.py)
    "nvidia_driver_version": {"type": "version", "extra": ("branches",), "with_limit": ("branches",)},
    "cuda_driver_version": {"type": "version"},
}
PLUGIN = "signoff.versions.plugin"


def check_extra(name: str, value, extra: dict, where: str) -> None:
    """branches: a list of quoted versions, one per branch (major number), none below the floor."""
    if "branches" not in extra:
        return
    branches, floor = extra["branches"], value
    if not isinstance(branches, list) or not branches or \
            not all(isinstance(b, str) and version_tuple(b) for b in branches):
        raise InputError(f"{where}.branches: expected a list of quoted versions, one per driver "
                         f"branch (e.g. ['535.309.01', '570.211.01']), got {branches!r}")
    majors = [version_tuple(b)[0] for b in branches]
    if len(set(majors)) != len(majors):
        raise InputError(f"{where}.branches: one minimum per branch; {branches} repeats one")
    if min(version_tuple(b) for b in branches) < version_tuple(floor):
        raise InputError(f"{where}.branches: {min(branches, key=version_tuple)} is below the "
                         f"threshold's min {floor}")
