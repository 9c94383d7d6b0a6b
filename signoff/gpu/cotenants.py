"""Another process on a GPU while signoff measured it (probe_cotenants.py's sampler, as every GPU
measurement's `cotenants`): the figures are not the hardware's alone, so the checks judged from
them ERROR (not measured: a FAIL would blame the hardware for another's load) naming the
process, its GPU and when it ran, as their likely cause; a hardware fault seen beside it (an
XID, an uncorrectable ECC error) still FAILs, the process named first in its cause."""

from __future__ import annotations

from signoff.fleet import ProbeError

SHOWN = 3  # processes named in one message; the rest counted (all in the check's details)


def seen(doc: dict | None) -> list[dict]:
    """The foreign processes a measurement saw (none: absent, i.e. not sampled, or empty)."""
    return list((doc or {}).get("cotenants") or [])


def _clock(iso: str) -> str:
    return (iso or "?")[11:19] or "?"


def _one(pid: int, es: list[dict], during: str) -> str:
    gpus = sorted({e["gpu"] for e in es})
    name = next((e["name"] for e in es if e.get("name")), None) or \
        ("name unknown" if any(e.get("visible") for e in es) else "outside this pid namespace")
    first, last = min(e["first_seen"] for e in es), max(e.get("last_seen") or e["first_seen"] for e in es)
    t0, t1 = min(e["t_first"] for e in es), max(e.get("t_last", e["t_first"]) for e in es)
    when = (f"at {_clock(first)} UTC ({t0:g} s into the {during})" if first == last else
            f"from {_clock(first)} to {_clock(last)} UTC ({t0:g}-{t1:g} s into the {during})")
    return f"GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}: pid {pid} ({name}) {when}"


def text(doc: dict | None, during: str) -> str:
    """'another process on GPU 0: pid 4711 (python3) from 12:00:40 to 12:02:00 UTC (40-120 s
    into the soak) ran beside the soak'; '' when none was seen."""
    by_pid: dict = {}
    for e in seen(doc):
        by_pid.setdefault(e["pid"], []).append(e)
    if not by_pid:
        return ""
    parts = [_one(pid, es, during) for pid, es in by_pid.items()]
    if len(parts) == 1:
        return f"another process on {parts[0]} ran beside the {during}"
    more = f"; and {len(parts) - SHOWN} more" if len(parts) > SHOWN else ""
    return f"{len(parts)} other processes ran beside the {during}: " + "; ".join(parts[:SHOWN]) + more


def first(cause: str, doc: dict | None, during: str) -> str:
    """A FAIL's cause with the foreign process named before it."""
    who = text(doc, during)
    return "; ".join(x for x in (who, cause) if x)


def guard(check, host, doc: dict | None, during: str, measured=None, expected: str = "",
          unit: str = "", source: str = "", details: dict | None = None) -> None:
    """ERROR this check if its measurement saw another process on a GPU: what it measured is
    kept in its record; the message is the same for every check of that measurement (one
    cover line per host) and names the process as the likely cause."""
    found = seen(doc)
    if not found:
        return
    check.record(measured, expected, unit, source, {**(details or {}), "cotenants": found})
    raise ProbeError(f"{host}: not judged: the {during}'s figures are not the hardware's alone "
                     f"(another process used a GPU during it): measure again with the GPUs idle; "
                     f"likely cause: {text(doc, during)}")
