"""The versions family's pure judgements beside parity: whether torch's build runs on a GPU."""

from __future__ import annotations

import re


def runs_on(arches: list[str], cc: str) -> bool:
    """Whether a torch built for `arches` has kernels for compute capability `cc` (e.g. 8.9): a
    cubin sm_XY runs on X.z for z >= Y (an L40S, 8.9, runs sm_86's), PTX compute_XY is compiled
    for any later one (CUDA C++ Programming Guide, binary and PTX compatibility)."""
    major, minor = (int(x) for x in cc.split("."))
    sass = [int(a[3:]) for a in arches if re.fullmatch(r"sm_\d+", a)]
    ptx = [int(a[8:]) for a in arches if re.fullmatch(r"compute_\d+", a)]
    return any(s // 10 == major and s % 10 <= minor for s in sass) \
        or any(p <= major * 10 + minor for p in ptx)
