"""--rerun DIR (and pytest's --lf, which it stands for): the checks that did not pass in an
earlier run measured again, on that run's hosts (its --hosts or --inventory) and profile unless
told otherwise (defaults()); its verdict is the whole sheet's: the earlier run's results with
this run's over the checks it measured again, each record stamped with the run it comes from
(carry()). So "did my fix work?" ends 0 when it did, without --partial."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from signoff import InputError, baseline, hostlist, paths, report, unseen
from signoff.results import ALL

# what a rerun takes up again; N.A. is the profile's verdict on that host, not a fault to fix
AGAIN = ("FAIL", "ERROR", "NOT RUN")
# --unseen-error: what the form could not show is no pass either (signoff/unseen.py), so taken up too
UNSEEN_AGAIN = (*AGAIN, unseen.STATUS)
# why --lf is not pytest's: a check that could not measure (NOT RUN) is no pytest failure, and
# signoff keeps no pytest cache (none in an installed sheet's site-packages)
LF = "--lf: signoff keeps no pytest cache, so it reruns the newest run's checks that did not pass"
# what load() keeps for the run but results.json's meta.rerun leaves out (meta()): the node ids,
# and the earlier run's document the verdict is merged with
PRIVATE = ("tests", "earlier")
_LOADED = pytest.StashKey[dict]()  # one read of the earlier results.json a run (defaults(), of())


def newest(reports: Path | None = None) -> Path:
    """The newest finished run under reports/ (its stamps sort by time): what --lf reruns."""
    top = reports or paths.reports_dir()
    runs = sorted(d for d in top.glob("2*") if (d / "results.json").is_file()) if top.is_dir() else []
    if not runs:
        raise InputError(f"--lf: no earlier run in {report.shown_path(top)}/ to rerun: name a run's "
                         "report directory with --rerun DIR")
    return runs[-1]


def of(config, acceptance: bool = True) -> dict | None:
    """--rerun DIR, or pytest's --lf (an option of the clone's pytest, whose cache signoff turns
    off: it would rerun nothing signoff did not run, silently) as the newest run's rerun; --lf
    only in an acceptance run (`pytest tests/ --lf` is pytest's own)."""
    if _LOADED in config.stash:
        return config.stash[_LOADED]
    arg = config.getoption("rerun")
    strict = bool(config.getoption("unseen_error", False))
    if arg is None and acceptance and config.getoption("lf", False):
        got = load(str(newest()), via=LF, unseen_error=strict)
    elif arg is not None:
        got = load(arg, unseen_error=strict)
    else:
        return None
    config.stash[_LOADED] = got
    return got


def meta(again: dict) -> dict:
    """What results.json's meta.rerun holds of load()'s answer."""
    return {k: v for k, v in again.items() if k not in PRIVATE}


def defaults(config, acceptance: bool) -> None:
    """A rerun takes the earlier run's hosts (its --hosts, its inventory file narrowed to the
    hosts it ran, or its Slurm allocation's nodes) and profile where the command names none:
    the same sheet on the same hosts, so its verdict can be the whole sheet's. Set as options,
    before the plugin reads them (meta.inventory then says them, meta.rerun.hosts_from whose)."""
    again = of(config, acceptance)
    if again is None:
        return
    then = again["earlier"].get("meta") or {}
    opt, run = config.option, again["run"]
    if opt.profile == "auto" and then.get("profile_requested") not in (None, "auto"):
        path = then.get("profile_path")
        opt.profile = path if path and Path(path).is_file() else then["profile_requested"]
    names, source = then.get("hosts") or [], str(then.get("inventory") or "")
    if opt.hosts is not None or opt.inventory is not None or not names or source.startswith("default"):
        return  # told otherwise, or the earlier run was of this machine (the default still)
    folded = hostlist.fold(names)
    if (then.get("launcher") or {}).get("launcher") == "slurm":
        if opt.launcher == "auto":
            opt.launcher = "slurm"
        inside = source.split(", --inventory ", 1)[1] if ", --inventory " in source else ""
        path = _file(inside)
        if inside and path is None:
            raise InputError(f"--rerun {again['dir']}: run {run}'s inventory {inside} is not here: name "
                             f"--inventory (or --hosts) for the rerun")
        opt.inventory, opt.hosts = path, folded
    elif source.startswith("--hosts "):
        opt.hosts = folded
        pythons = set((then.get("probe_python") or {}).values())
        if opt.python is None and len(pythons) == 1 and pythons != {"python3"}:
            opt.python = pythons.pop()
        if opt.ssh_user is None and then.get("ssh_user"):
            opt.ssh_user = then["ssh_user"]
    else:
        path = _file(source)
        if path is None:
            raise InputError(f"--rerun {again['dir']}: run {run}'s inventory {source} is not here: name "
                             f"--inventory (or --hosts) for the rerun")
        opt.inventory, opt.hosts = path, folded
    again["hosts_from"] = f"run {run}'s hosts ({folded})"


def _file(source: str) -> str | None:
    """The inventory file a run's meta.inventory names ('cluster.yaml', 'cluster.yaml: --tags a'),
    where it is a file here."""
    for cand in (source, source.split(": ", 1)[0]):
        if cand and Path(cand).is_file():
            return cand
    return None


def load(arg: str, via: str = "", unseen_error: bool = False) -> dict:
    """What `--rerun arg` reruns: meta.rerun (the earlier run, its checks that did not pass by
    status, its fleets) and, under "tests", their node ids; under "earlier", its document (the
    results a rerun's verdict is merged with: carry()). With --unseen-error an UNSEEN did not
    pass either: it is rerun (and, where not measured again, carried as the ERROR it is now)."""
    statuses = UNSEEN_AGAIN if unseen_error else AGAIN
    if not arg.strip():
        raise InputError("--rerun is empty (an unset variable?): name an earlier run's report "
                         "directory or leave --rerun out")
    doc = baseline.load(arg, "--rerun")
    run = (doc.get("meta") or {}).get("run") or "?"
    if doc.get("verdict") is None:
        raise InputError(f"--rerun {arg}: run {run} did not finish (killed?): `signoff rebuild {arg}` "
                         "judges what it measured first")
    again = [r for r in doc["results"] if r.get("status") in statuses and r.get("test")]
    if not again:
        raise InputError(f"--rerun {arg}: every check of run {run} passed or was N.A."
                         + (" or UNSEEN" if not unseen_error else "") + ": nothing to rerun")
    counts = Counter(r["status"] for r in again)
    crits = {r.get("criterion") for r in again} - {None}
    return {"run": run, "dir": report.shown_path(Path(arg).resolve()), "checks": len(again),
            "statuses": {s: counts[s] for s in statuses if counts[s]}, **({"via": via} if via else {}),
            **({"unseen_error": True} if unseen_error else {}),
            **_fleets(doc, crits), "tests": sorted({r["test"] for r in again}), "earlier": doc}


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


def _counted(records: list[dict]) -> str:
    n = Counter(r.get("status") for r in records)
    return ", ".join(f"{n[s]} {s}" for s in ("PASS", "FAIL", "ERROR", "N.A.", "UNSEEN", "NOT RUN") if n[s])


def _named(records: list[dict], most: int = 6) -> str:
    """'net_pair_bandwidth on lab2->lab1, multinode_allreduce on all hosts': the checks measured."""
    by: dict[str, list[str]] = {}
    for r in records:
        by.setdefault(str(r.get("criterion")), []).append(str(r.get("host")))
    said = [f"{c} on " + (", ".join(h) if any("->" in x for x in h) or ALL in h else hostlist.fold(h))
            for c, h in by.items()]
    return "; ".join(said[:most]) + (f" and {len(said) - most} more" if len(said) > most else "")


def _strict(r: dict, unseen_error) -> dict:
    """A carried UNSEEN under --unseen-error: the ERROR this run makes of every one."""
    if not unseen_error or r.get("status") != unseen.STATUS:
        return r
    ask, why = r.get("ask") or r.get("criterion"), r.get("why") or "this machine cannot show it"
    return {**r, "status": "ERROR", "message": unseen.error_message(str(ask), str(why))}


def carry(again: dict, doc: dict, ids: set[str]) -> tuple[list[dict], dict, str]:
    """(the earlier run's records this run did not measure again, each stamped with its run;
    the earlier run's host facts this run lacks; what meta.rerun says of the merge). `doc` is
    this run's document, `ids` the hosts and pairs it parametrizes: an earlier record of a host
    this run leaves out (--exclude-hosts) is not carried. Nothing is carried where this run is
    judged by another profile than the earlier one (its verdicts are not this profile's)."""
    then, now = again["earlier"], doc["meta"]
    was, name = (then.get("meta") or {}).get("profile_sha256"), (then.get("meta") or {}).get("profile")
    mine = doc["results"]
    if was != now.get("profile_sha256") or name != now.get("profile"):
        return [], {}, (f"not merged with run {again['run']}'s results: it was judged by profile {name}, "
                        f"this rerun by {now.get('profile')}"
                        + (" (the same name, other thresholds: a file of it changed since)"
                           if name == now.get("profile") else "")
                        + ": the verdict is of the checks measured again alone")
    measured = {r.get("test") or (r.get("criterion"), r.get("host")) for r in mine}
    kept = [_strict({**r, "run": r.get("run") or again["run"]}, again.get("unseen_error"))
            for r in then["results"]
            if (r.get("test") or (r.get("criterion"), r.get("host"))) not in measured
            and (r.get("host") == ALL or r.get("host") in ids)]
    facts = {h: f for h, f in (then.get("hosts") or {}).items() if h in ids and h not in doc["hosts"]}
    said = (f"results carried from run {again['run']}: {len(kept)}" + (f" ({_counted(kept)})" if kept else "")
            + f"; measured in this rerun: {len(mine)}"
            + (f" ({_counted(mine)}: {_named(mine)})" if mine else "")
            + (f"; on {again['hosts_from']}" if again.get("hosts_from") else ""))
    return kept, facts, said
