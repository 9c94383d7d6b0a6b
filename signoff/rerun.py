"""--rerun DIR (and pytest's --lf, which it stands for): only the checks that did not pass in an
earlier run, as a partial run of the sheet (INCOMPLETE unless --partial, like --only)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from signoff import InputError, baseline, paths, report

# what a rerun takes up again; N.A. is the profile's verdict on that host, not a fault to fix
AGAIN = ("FAIL", "ERROR", "NOT RUN")
# why --lf is not pytest's: a check that could not measure (NOT RUN) is no pytest failure, and
# signoff keeps no pytest cache (none in an installed sheet's site-packages)
LF = "--lf: signoff keeps no pytest cache, so it reruns the newest run's checks that did not pass"


def newest(reports: Path | None = None) -> Path:
    """The newest finished run under reports/ (its stamps sort by time): what --lf reruns."""
    top = reports or paths.reports_dir()
    runs = sorted(d for d in top.glob("2*") if (d / "results.json").is_file()) if top.is_dir() else []
    if not runs:
        raise InputError(f"--lf: no earlier run in {report.shown_path(top)}/ to rerun: name a run's "
                         "report directory with --rerun DIR")
    return runs[-1]


def of(config) -> dict | None:
    """--rerun DIR, or pytest's --lf (an option of the clone's pytest, whose cache signoff turns
    off: it would rerun nothing signoff did not run, silently) as the newest run's rerun."""
    arg = config.getoption("rerun")
    if arg is None and config.getoption("lf", False):
        return load(str(newest()), via=LF)
    return load(arg) if arg is not None else None


def load(arg: str, via: str = "") -> dict:
    """What `--rerun arg` reruns: meta.rerun (the earlier run, its checks that did not pass by
    status) and, under "tests", their node ids."""
    if not arg.strip():
        raise InputError("--rerun is empty (an unset variable?): name an earlier run's report "
                         "directory or leave --rerun out")
    doc = baseline.load(arg, "--rerun")
    run = (doc.get("meta") or {}).get("run") or "?"
    if doc.get("verdict") is None:
        raise InputError(f"--rerun {arg}: run {run} did not finish (killed?): `signoff rebuild {arg}` "
                         "judges what it measured first")
    again = [r for r in doc["results"] if r.get("status") in AGAIN and r.get("test")]
    if not again:
        raise InputError(f"--rerun {arg}: every check of run {run} passed or was N.A.: nothing to rerun")
    counts = Counter(r["status"] for r in again)
    crits = {r.get("criterion") for r in again} - {None}
    return {"run": run, "dir": report.shown_path(Path(arg).resolve()), "checks": len(again),
            "statuses": {s: counts[s] for s in AGAIN if counts[s]}, **({"via": via} if via else {}),
            **_fleets(doc, crits), "tests": sorted({r["test"] for r in again})}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _fleets(doc: dict, crits: set[str]) -> dict:
    """The earlier run's fleet, per criterion rerun: `fleets` (host or pair -> its figure in the
    judgement against the fleet: details.fleet.figure) and `pools` (host -> [[GPU model, rate]]:
    the soak's per-GPU model_median pool). A rerun measures only the hosts that did not pass, so
    its own median would be theirs alone (or N.A.: too few); it judges them against these instead
    (Check.judge, acceptance/test_soak.py). An earlier rerun's (meta.rerun) lie beneath its own
    figures, so a rerun of a rerun still has the whole fleet."""
    then = (doc.get("meta") or {}).get("rerun") or {}
    fleets = {c: dict((then.get("fleets") or {}).get(c) or {}) for c in crits}
    pools = {c: dict((then.get("pools") or {}).get(c) or {}) for c in crits}
    hosts = doc.get("hosts") or {}
    for r in doc["results"]:
        c, d = r.get("criterion"), r.get("details") or {}
        if c not in crits or "host" not in r:
            continue
        fig = (d.get("fleet") or {}).get("figure") if isinstance(d.get("fleet"), dict) else None
        if _number(fig):
            fleets[c][r["host"]] = fig
        if "model_median" in d and isinstance(d.get("tflops"), dict):
            gpus = ((hosts.get(r["host"]) or {}).get("nvidia") or {}).get("gpus") or []
            pools[c][r["host"]] = [[gpus[int(g)].get("name"), v] for g, v in d["tflops"].items()
                                   if _number(v) and str(g).isdigit() and int(g) < len(gpus)]
    return {"fleets": {c: f for c, f in fleets.items() if f}, "pools": {c: p for c, p in pools.items() if p}}


def fleet(again: dict | None, criterion: str, figures: dict) -> tuple[dict, dict | None]:
    """(figures to judge against the fleet, where they came from): in a rerun, the earlier run's
    figures of `criterion` with this run's own over them (the hosts measured again); else
    `figures` as they are. `where`: the earlier run, and the hosts or pairs measured again."""
    if again is None:
        return figures, None
    merged = {**((again.get("fleets") or {}).get(criterion) or {}), **figures}
    if len(merged) == len(figures):  # every host of the earlier fleet measured again (the ring's pairs)
        return figures, None
    return merged, {"run": again["run"], "dir": again["dir"], "earlier": len(merged) - len(figures),
                    "again": len(figures)}


def pool(again: dict | None, criterion: str, model: str, skip) -> list[float]:
    """In a rerun, the earlier run's per-GPU figures of `model` on every host not in `skip` (the
    hosts this run measured again): the rest of the soak's model_median pool."""
    hosts = (((again or {}).get("pools") or {}).get(criterion) or {})
    return [v for h, gpus in hosts.items() if h not in skip for m, v in gpus if m == model]

