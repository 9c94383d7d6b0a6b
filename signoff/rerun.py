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
    return {"run": run, "dir": report.shown_path(Path(arg).resolve()), "checks": len(again),
            "statuses": {s: counts[s] for s in AGAIN if counts[s]}, **({"via": via} if via else {}),
            "tests": sorted({r["test"] for r in again})}

