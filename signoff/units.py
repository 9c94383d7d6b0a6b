"""Sizes and versions as profiles, options and probes write them."""

from __future__ import annotations

import re

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text) -> int:
    """'8G' / '1MiB' / 1048576 -> bytes (binary units, as nccl-tests' -b/-e)."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)(?:I?B)?", str(text).strip().upper())
    if not m:
        raise ValueError(f"not a size: {text!r} (expected e.g. 1M, 8G)")
    return int(m.group(1)) * _UNITS[m.group(2)]


def parse_fraction(text) -> float:
    """'5%' / '0.05' -> 0.05, in [0, 1)."""
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise ValueError(f"{text!r}: expected a percentage (5%) or a fraction (0.05)") from None
    if not 0 <= v < 1:
        raise ValueError(f"{text!r}: expected 0-100 %")
    return v


def human_bytes(n: int) -> str:
    for unit, k in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k}{unit}"
    return str(n)


def version_tuple(text) -> tuple:
    """'580.159.04' -> (580, 159, 4); 12040 (NVML CUDA int) is not handled here."""
    return tuple(int(p) for p in re.findall(r"\d+", str(text)))


def readable(v) -> str:
    """A value as a person reads it: no Python repr, no None, no binary float's 17 digits
    ({'bs': 1048576, ...} -> 'bs 1048576, ...'; 451.658521 -> '451.7'; None -> 'none')."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.0f}"
    if isinstance(v, dict):
        return ", ".join(f"{k} {readable(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple, set)):
        return ", ".join(readable(x) for x in v) or "none"
    return str(v)
