"""Slurm-style hostlists, ``node[01-16],gpu[1,3-5]``, through ClusterShell's NodeSet.

Comma-separated parts keep their order (NodeSet alone sorts); names are checked to be
host names, so one can be used as a file name; the size is checked before anything grows."""

from __future__ import annotations

import re

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetError

from signoff import InputError

# A run over more hosts than this is a typo (node[1-100000000] grew to 4 GB before it was
# refused). 100 000 names expand in about 0.5 s; no one run signs off more nodes than that.
MAX_HOSTS = 100_000
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a host name's characters; never '/'
_TEXT = re.compile(r"[A-Za-z0-9_.,\[\]\s-]*")  # also keeps NodeSet's operators (!&^@) out
_PART = re.compile(r",(?![^\[]*\])")  # a comma outside brackets
_GROUP = re.compile(r"\[([^\[\]]*)\]")
_ITEM = re.compile(r"(\d+)(?:-(\d+))?")


def _count(part: str, whole: str) -> int:
    """How many names `part` grows to, from its brackets' bounds alone (nothing expanded)."""
    rest = _GROUP.sub("", part)
    for ch, side in (("[", "'['"), ("]", "']'")):
        if ch in rest:
            raise InputError(f"hostlist {whole!r}: unbalanced {side}")
    n = 1
    for group in _GROUP.findall(part):
        size = 0
        for item in group.split(","):
            m = _ITEM.fullmatch(item.strip())
            if not m:
                raise InputError(f"hostlist {whole!r}: bad range {item.strip()!r} (expected N or N-M)")
            lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
            if hi < lo:
                raise InputError(f"hostlist {whole!r}: range {item.strip()!r} runs backwards")
            size += hi - lo + 1
        n *= size
    return n


def check_name(name: str, where: str) -> None:
    if not NAME.fullmatch(name):
        raise InputError(f"{where}: {name!r} is not a host name (letters, digits, '-', '.', '_'; "
                         f"starting with a letter or digit)")


def expand(text: str, already: int = 0) -> list[str]:
    """Expand a hostlist into names, keeping the order of its parts and dropping duplicates;
    `already`: hosts the run has before these (an inventory's earlier entries)."""
    if not _TEXT.fullmatch(text):
        bad = sorted(set(_TEXT.sub("", text)))
        raise InputError(f"hostlist {text!r}: {''.join(bad)!r} cannot be in a host name "
                         f"(letters, digits, '-', '.', '_')")
    parts = [p.strip() for p in _PART.split(text) if p.strip()]
    total = already
    for part in parts:
        total += _count(part, text)
        if total > MAX_HOSTS:
            raise InputError(f"hostlist {text!r}: {part!r} grows the run to {total} hosts, over the "
                             f"cap of {MAX_HOSTS} (signoff.hostlist.MAX_HOSTS): a typo in a range?")
    names: dict[str, None] = {}
    for part in parts:
        try:
            names.update(dict.fromkeys(NodeSet(part, resolver=RESOLVER_NOGROUP)))
        except NodeSetError as exc:
            raise InputError(f"hostlist {text!r}: {exc}") from None
    if not names:
        raise InputError(f"hostlist {text!r} names no host")
    for name in names:
        check_name(name, f"hostlist {text!r}")
    return list(names)


def fold(names) -> str:
    """Names folded into ranges for text: node001..node512 -> 'node[001-512]'."""
    return str(NodeSet.fromlist(list(names), resolver=RESOLVER_NOGROUP))
