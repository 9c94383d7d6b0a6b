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


def figure(v: float) -> str:
    """A measured figure as every output says it (report.html, report.md, the terminal's
    messages): 4 significant digits, whole from 10,000 up (451.658521 -> '451.7'; 103674.2 ->
    '103674', never '1.037e+05'): one rounding, so one figure never reads two ways in two places."""
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}"


# A float as Python prints it, not as a figure: 5 decimals or more, not part of a version
# (580.159.04), an address or a path (the pattern tests/test_report.py checks reports with)
_RAW_FLOAT = re.compile(r"(?<![\w.:/-])\d+\.\d{5,}(?![\w.])")


def figures_in(text: str) -> str:
    """A message's raw floats said as figures: messages recorded by an older signoff, or a
    family that wrote a float as Python prints it ('= 438.517653 TFLOP/s' -> '= 438.5 TFLOP/s')."""
    return _RAW_FLOAT.sub(lambda m: figure(float(m.group(0))), text or "")


def label(key) -> str:
    """A details key as a person reads it: 'resident_fraction' -> 'resident fraction'."""
    return str(key).replace("_", " ")


def empty(v) -> bool:
    """Nothing to say: None, '' or an empty container."""
    return v is None or v == "" or (isinstance(v, (dict, list, tuple, set)) and not v)


def readable(v) -> str:
    """A value as a person reads it: no Python repr, no None, no binary float's 17 digits, no
    internal key ({'bs': 1048576, 'resident_fraction': None, 'note': ''} -> 'bs 1048576': a
    dict's empty values left out, its keys in words; 451.658521 -> '451.7'; None -> 'none')."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return figure(v)
    if isinstance(v, dict):
        return ", ".join(f"{label(k)} {readable(x)}" for k, x in v.items() if not empty(x)) or "none"
    if isinstance(v, (list, tuple, set)):
        return ", ".join(readable(x) for x in v) or "none"
    return str(v)
