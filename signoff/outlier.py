"""Judgement against the fleet: a host's (or pair's) figure beside the median of the others of
its class measured in the same run. An absolute floor is set for the whole class, so the one
degraded node of 64 that still clears it passes; below `fleet_min` x the run's median it is
an outlier and FAILs (docs/thresholds.md, "Judged against the fleet")."""

from __future__ import annotations

import statistics

from signoff.hostlist import fold

FLEET_MIN = 0.9  # the default: a host 10 % below its class's median in this run is degraded
MIN_HOSTS = 3  # a median of two says nothing about which of them is slow
RULE = "signoff fleet rule (docs/thresholds.md, judged against the fleet)"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def compare(name: str, figures: dict[str, float], fleet_min: float | None, profile: str = "") -> dict:
    """`name`'s figure against the median of `figures` (every measured host or pair of the class
    in this run, `name`'s own among them; higher is better): status outlier, within or N.A.
    No fleet_min: the profile names no hardware class (its hosts may differ) and sets none."""
    vals = {k: v for k, v in figures.items() if _number(v)}
    out = {"fleet_min": fleet_min, "n": len(vals), "compared": _names(vals)}
    if fleet_min is None:
        return {**out, "status": "N.A.", "why": f"profile {profile} names no hardware class, so its hosts "
                f"may differ: set fleet_min in the profile to compare them"}
    if len(vals) < MIN_HOSTS:
        return {**out, "status": "N.A."}
    med = statistics.median(vals.values())
    floor = fleet_min * med
    own = vals.get(name)
    status = "N.A." if own is None else "outlier" if own < floor else "within"
    return {**out, "status": status, "median": _round(med), "floor": _round(floor), "figure": own}


def describe(res: dict, unit: str, what: str = "hosts") -> str:
    """'below 0.9 x the median 191 Gb/s (172) of 8 hosts of its class in this run (lab[1-8])';
    in a rerun (res["rerun"]: signoff/rerun.py fleet()) '... against the fleet of run R (DIR): ...'."""
    if res["status"] == "N.A." and res.get("why"):
        return f"fleet comparison N.A.: {res['why']}"
    if res["status"] == "N.A.":
        return f"fleet comparison N.A.: {res['n']} {what} of its class {_where(res)} (needs {MIN_HOSTS})"
    return (f"{'below' if res['status'] == 'outlier' else 'within'} {res['fleet_min']:g} x the median "
            f"{res['median']:g} {unit} ({res['floor']:g}) of {res['n']} {what} of its class {_where(res)} "
            f"({res['compared']})")


def _where(res: dict) -> str:
    """Whose fleet the median is of: this run's, or in a rerun the earlier run's with the figures
    measured again over its own (a rerun alone measures only the hosts that did not pass)."""
    r = res.get("rerun")
    if not r:
        return "in this run"
    return (f"against the fleet of run {r['run']} ({r['dir']}): {r['earlier']} of its figures, "
            f"{r['again']} measured again in this rerun")


def _names(vals: dict) -> str:
    names = list(vals)
    if any("->" in n for n in names):  # pair ids (a->b) do not fold as host names
        return ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return fold(names)


def _round(v: float) -> float:
    return float(f"{v:.4g}")
