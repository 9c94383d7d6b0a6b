"""Another process on a GPU while a probe measured it (the sampler shipped beside every GPU
probe, signoff/gpu/probe_cotenants.py, gives the probe's document `cotenants`: absent, not
sampled; [], none seen). Its figures are not the hardware's alone, so the checks judged from
them ERROR (not measured: a FAIL would blame the hardware for another's load) naming the
process, its GPU and when it ran as their likely cause: Fleet.measured does so for every
per-host measurement, acceptance/test_soak.py for the soak, whose faults under load (an XID,
an uncorrectable ECC error) still FAIL with the process named first in their cause."""

from __future__ import annotations

SHOWN = 3  # processes named in one message; the rest counted (all in the probe's document)


def seen(doc) -> list[dict]:
    """The foreign processes a measurement saw (none: not sampled, or none seen)."""
    return list(doc.get("cotenants") or []) if isinstance(doc, dict) else []


def during(doc: dict) -> str:
    return doc.get("cotenants_during") or doc.get("probe") or "measurement"


def _clock(iso: str) -> str:
    return (iso or "?")[11:19] or "?"


def _one(pid: int, es: list[dict], what: str) -> str:
    host = es[0].get("host")  # a collective across nodes: each node's own processes
    gpus = sorted({e["gpu"] for e in es})
    name = next((e["name"] for e in es if e.get("name")), None) or \
        ("name unknown" if any(e.get("visible") for e in es) else "outside this pid namespace")
    first, last = min(e["first_seen"] for e in es), max(e.get("last_seen") or e["first_seen"] for e in es)
    t0, t1 = min(e["t_first"] for e in es), max(e.get("t_last", e["t_first"]) for e in es)
    when = (f"at {_clock(first)} UTC ({t0:g} s into the {what})" if first == last else
            f"from {_clock(first)} to {_clock(last)} UTC ({t0:g}-{t1:g} s into the {what})")
    return (f"{host + ' ' if host else ''}GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}: "
            f"pid {pid} ({name}) {when}")


def text(doc, what: str | None = None) -> str:
    """'another process on GPU 0: pid 4711 (python3) from 12:00:40 to 12:02:00 UTC (40-120 s
    into the soak) ran beside the soak'; '' when none was seen."""
    by_pid: dict = {}
    for e in seen(doc):
        by_pid.setdefault((e.get("host"), e["pid"]), []).append(e)
    if not by_pid:
        return ""
    what = what or during(doc)
    parts = [_one(pid, es, what) for (_, pid), es in by_pid.items()]
    if len(parts) == 1:
        return f"another process on {parts[0]} ran beside the {what}"
    more = f"; and {len(parts) - SHOWN} more" if len(parts) > SHOWN else ""
    return f"{len(parts)} other processes ran beside the {what}: " + "; ".join(parts[:SHOWN]) + more


def first(cause: str, doc, what: str | None = None) -> str:
    """A FAIL's cause with the foreign process named before it."""
    return "; ".join(x for x in (text(doc, what), cause) if x)


def error(host, doc, what: str | None = None):
    """The ERROR (a ProbeError) of every check judged from `doc` when it saw another process
    on a GPU: one message for all of them (one cover line per host), the process as the
    likely cause; None when it saw none."""
    if not seen(doc):
        return None
    from signoff.fleet import ProbeError  # fleet raises it for every measurement: imports this
    what = what or during(doc)
    return ProbeError(f"{host}: not judged: another process used a GPU during the {what}, so its "
                      f"figures are not the hardware's alone: measure again with the GPUs idle; "
                      f"likely cause: {text(doc, what)}")


def guard(check, host, doc, what: str | None = None, measured=None, expected: str = "",
          unit: str = "", source: str = "", details: dict | None = None) -> None:
    """error() raised, what the check measured kept in its record first."""
    exc = error(host, doc, what)
    if exc is not None:
        check.record(measured, expected, unit, source, {**(details or {}), "cotenants": seen(doc)})
        raise exc


def merged(best, tries: list):
    """A retried measurement's judged attempt with the foreign processes of every attempt: one
    beside any attempt explains their spread too."""
    sampled = [d for d in tries if isinstance(d, dict) and d.get("cotenants") is not None]
    if not isinstance(best, dict) or not sampled:
        return best
    return {**best, "cotenants": [e for d in sampled for e in d["cotenants"]]}
