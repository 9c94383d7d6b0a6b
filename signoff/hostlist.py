"""Slurm-style hostlist expansion: ``node[01-16],gpu[1,3-5]``."""

from __future__ import annotations

import re

from signoff import InputError

_BRACKET = re.compile(r"\[([^\[\]]*)\]")


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise InputError(f"hostlist {text!r}: unbalanced ']'")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise InputError(f"hostlist {text!r}: unbalanced '['")
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _range(spec: str, whole: str) -> list[str]:
    out = []
    for item in spec.split(","):
        item = item.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not m:
            raise InputError(f"hostlist {whole!r}: bad range {item!r} (expected N or N-M)")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise InputError(f"hostlist {whole!r}: range {item!r} runs backwards")
        width = len(lo) if lo.startswith("0") else 0  # keep zero padding: node[01-16]
        out += [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
    return out


def expand(text: str) -> list[str]:
    """Expand a hostlist into names, keeping order and dropping duplicates."""
    names: list[str] = []
    for part in _split_top(text):
        pending = [part]
        while any("[" in p for p in pending):
            nxt = []
            for p in pending:
                m = _BRACKET.search(p)
                if not m:
                    nxt.append(p)
                    continue
                for v in _range(m.group(1), text):
                    nxt.append(p[: m.start()] + v + p[m.end():])
            pending = nxt
        for p in pending:
            if p not in names:
                names.append(p)
    if not names:
        raise InputError(f"hostlist {text!r} names no host")
    return names
