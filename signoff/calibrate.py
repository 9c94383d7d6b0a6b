"""A site profile from runs on nodes you trust ("golden" runs):

    signoff calibrate reports/<run1>/ reports/<run2>/ reports/<run3>/ --out thresholds/site-a100.yaml

writes a profile that `extends` the runs' profile, with every figure they measured as a
threshold: the slowest host, GPU or pair of any run times the margin (the hottest over the
margin for a maximum, such as a temperature), never looser than a cited threshold of the class.
Each criterion's margin is the loosest of --margin (default 0.9), 1 - the run-to-run tolerance
the profile records for it (its `baseline:`: how far healthy runs of the class move) and, with two
runs or more, 1 - baseline.MULTIPLE x their own run-to-run spread (the largest wrong-way move of
one host's figure between them, as `python -m signoff.baseline spread` measures it), so the next
run of the same healthy hosts, moving as far again, still passes: runs that agree by chance, or
one run alone, never set a tighter floor. Each `source:` names the runs (run ids, UTC times,
hosts, GPU serials, suite version, profile) and the rule with the spread or tolerance it used.
A run whose verdict is not PASS (a FAIL, an ERROR, a run that was not complete), a run with any
check ERROR whatever its verdict, a record of a status signoff does not write, a rerun's figures
carried over from the run it reran (which did not pass), runs judged by other profiles, and a
margin outside (0, 1] are refused (exit code 4); the criteria it could not calibrate are listed
with why, and the `--profile` that names the file it wrote."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import yaml

from signoff import InputError, baseline, catalog, hostlist, profiles, results, safefile, slices

# The figures a calibration sets: what a known-good node measures (rates, bandwidths,
# efficiencies, temperatures and their margins). Counts, versions and states are not figures.
FIGURES = ("allreduce_busbw", "allgather_busbw", "reduce_scatter_busbw", "alltoall_busbw", "sendrecv_busbw",
           "p2p_bandwidth", "hbm_bandwidth", "host_link_bandwidth",
           "soak_gemm_tflops", "soak_gpu_temp", "soak_mem_temp", "thermal_margin",
           "train_throughput", "train_scaling_host", "train_scaling_nodes", "train_input_headroom",
           "storage_read_seq", "storage_read_small", "storage_read_aggregate",
           "net_pair_bandwidth", "multinode_allreduce_busbw", "multinode_alltoall_busbw",
           "rail_alltoall_busbw",
           "multinode_allgather_busbw", "multinode_reduce_scatter_busbw", "multinode_sendrecv_busbw",
           "mnnvl_allreduce_busbw")
MARGIN = 0.9


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _round(v: float) -> float:
    return float(f"{v:.4g}")


def refusal(doc: dict, margin: float) -> str | None:
    """Why this run cannot calibrate a profile, or None."""
    if not 0 < margin <= 1:
        return f"--margin {margin:g}: expected a fraction in (0, 1] (0.9 keeps 10 % headroom)"
    meta = doc.get("meta") or {}
    if not doc.get("verdict") or meta.get("partial") or meta.get("interrupted") or meta.get("killed"):
        why = meta.get("partial") or ("interrupted" if meta.get("interrupted") else "its verdict is "
                                      f"{doc.get('verdict') or 'INCOMPLETE'}")
        return f"the run was not complete ({why}): calibrate from a whole sign-off sheet"
    failed = sorted({f"{r['criterion']}[{r['host']}]" for r in doc["results"] if r["status"] == "FAIL"})
    if failed:
        more = " ..." if len(failed) > 6 else ""
        return (f"the run has {len(failed)} FAIL ({', '.join(failed[:6])}{more}): nodes that fail "
                f"are not known-good; fix them (or the class) and run again")
    guarded = sorted({r["criterion"] for r in doc["results"] if r["status"] == "NOT RUN"})
    if guarded:
        return f"checks NOT RUN ({', '.join(guarded)}): a hardware-class mismatch or an unfinished run"
    # any ERROR, whatever the verdict says (a results.json edited, or of another version): a
    # node whose checks could not measure is not known-good, and its figures are not all there
    errored = sorted({f"{r['criterion']}[{r['host']}]" for r in doc["results"] if r["status"] == "ERROR"})
    if doc["verdict"] != "PASS" or errored:
        more = " ..." if len(errored) > 6 else ""
        return ((f"its verdict is {doc['verdict']}" if doc["verdict"] != "PASS" else "the run")
                + (f"{':' if doc['verdict'] != 'PASS' else ' has'} {len(errored)} ERROR "
                   f"({', '.join(errored[:6])}{more}): checks that could not measure; fix the run (or "
                   f"the profile) and run again" if errored else ""))
    odd = sorted({f"{r.get('criterion')}[{r.get('host')}]: {r.get('status')!r}" for r in doc["results"]
                  if r.get("status") not in results.STATUSES})
    if odd:  # an edited or foreign results.json: no status signoff writes is a PASS to learn from
        return (f"{len(odd)} record{'s' * (len(odd) > 1)} of a status signoff does not write ("
                f"{', '.join(odd[:6])}{' ...' if len(odd) > 6 else ''}): calibrate from a run's own "
                "results.json")
    return carried(doc)


def carried(doc: dict) -> str | None:
    """Why a rerun cannot calibrate, or None: the figures it would learn from that it carried over
    from an earlier run (rerun.carry() stamps each with its run). A run is rerun only where it did
    not pass, so they were measured on nodes that were not known-good then (a fault that slowed
    them without failing them sets a floor that lets it through), and the rerun's PASS, the whole
    sheet's, is not theirs. A rerun that measured every figure itself is its own run."""
    run, then = doc["meta"].get("run"), doc["meta"].get("rerun") or {}
    old = [r for r in doc["results"] if r.get("run") not in (None, run) and r.get("status") == "PASS"
           and catalog.criterion_of(r["criterion"]) in FIGURES and _number(r.get("measured"))]
    if not old:
        return None
    runs = ", ".join(dict.fromkeys(str(r["run"]) for r in old))
    named = sorted({f"{r['criterion']}[{r['host']}]" for r in old})
    statuses = ", ".join(f"{n} {s}" for s, n in (then.get("statuses") or {}).items())
    return (f"a rerun of run {then.get('run') or runs}" + (f" ({statuses})" if statuses else "")
            + f": {len(named)} of the figures it would calibrate were carried over from run {runs}, which "
            f"did not pass ({', '.join(named[:10])}{' ...' if len(named) > 10 else ''}): measured on nodes "
            "that were not known-good; calibrate from whole runs that passed (signoff run, without --rerun)")


def provenance(docs: dict | list[dict]) -> str:
    docs = [docs] if isinstance(docs, dict) else docs
    meta, hosts = docs[0]["meta"], {h: f for d in docs for h, f in (d.get("hosts") or {}).items()}
    serials = sorted({str(g.get("serial")) for f in hosts.values() if isinstance(f, dict)
                      for g in (f.get("nvidia") or {}).get("gpus") or [] if g.get("serial")})
    names = sorted({h for d in docs for h in (d["meta"].get("hosts") or d.get("hosts") or [])})
    runs = [f"{d['meta'].get('run')} ({str(d['meta'].get('started', '?'))[:19].replace('T', ' ')} UTC"
            for d in docs]
    versions = ", ".join(dict.fromkeys(results.version_text(d["meta"].get("suite_version")) for d in docs))
    rest = (f"hosts {hostlist.fold(names)}; GPU serials {', '.join(serials) or 'none'}; {versions}; "
            f"profile {meta.get('profile')}")
    if len(runs) == 1:
        return f"calibrated from run {runs[0]}; {rest})"
    return f"calibrated from runs {', '.join(r + ')' for r in runs)}; {rest}"


def margins(docs: list[dict], margin: float | None, base: profiles.Profile | None = None) -> dict[str, dict]:
    """Per criterion, the margin its threshold keeps and why: the loosest of `margin` (MARGIN
    where not given), 1 - the run-to-run tolerance `base` records for it (its `baseline:`, what
    `signoff.baseline spread` measured over more runs of the class, else its default) and, from two
    runs on, 1 - MULTIPLE x these runs' own spread (baseline.spreads: the largest wrong-way move of
    a host's figure between them, the tolerance within [baseline.TOLERANCE, baseline.CEILING]).
    These runs' spread only ever widens a margin: runs that agree by chance, or one run alone,
    never set a floor tighter than the class's healthy runs are known to move, nor than `margin`
    (issue 51 item 18). Keys: margin, why, spread (where these runs measured one)."""
    cap = MARGIN if margin is None else margin
    asked = f"--margin {margin:g}" if margin is not None else "the default margin"
    spread = baseline.spreads(docs) if len(docs) > 1 else {}
    tol = baseline.tolerances(None, base) if base is not None else {
        "default": baseline.TOLERANCE, "criteria": {}, "from": "default"}
    own = base is not None and tol["from"] != "default"  # else no baseline: in the profile's chain
    whose = f"the profile {base.name}'s recorded" if own else "signoff's default"
    alone = ("one run measures no spread of its own" if len(docs) < 2 else "no host measured it in two runs")
    out = {}
    for name in FIGURES:
        s, kept = spread.get(name), tol["criteria"].get(name, tol["default"])
        recorded = f"{whose} run-to-run tolerance {100 * kept:g} %" + (" (its baseline:)" if own else "")
        # (margin, rank, rule): the loosest wins; on a tie the measured spread, then the record
        took = [(round(1 - kept, 4), 1, f"1 - {recorded}"), (cap, 2, asked)]
        if s:
            runs = (f"the run-to-run spread {100 * s['spread']:.1f} % ({s['low']:g}-{s['high']:g}"
                    f"{' ' + s['unit'] if s['unit'] else ''} over {s['runs']} runs)")
            within = f"{100 * baseline.TOLERANCE:g}-{100 * baseline.CEILING:g} %"
            measured = (round(1 - s["tolerance"], 4), 0,
                        f"1 - {baseline.MULTIPLE} x {runs}, the tolerance within {within}")
            took.append(measured)
        m, rank, rule = min(took)
        if rank == 0:
            why = f"margin {m:g}: {rule}"
        elif rank == 1:
            why = (f"margin {m:g}: {rule}"
                   + (f", wider than {baseline.MULTIPLE} x {runs}" if s else f": {alone}")
                   + (f" ({asked} is tighter than it)" if margin is not None and margin > m else ""))
        elif s:
            why = f"margin {m:g} ({asked}; the spread's margin {measured[0]:g}: {measured[2]})"
        else:
            why = f"margin {m:g} ({asked}; {recorded} is narrower; {alone})"
        out[name] = {"margin": m, "why": why, **({"spread": s} if s else {})}
    return out


def _aggregate(doc: dict, passed: list[dict], t: profiles.Threshold, margin: float | str):
    """storage_read_aggregate in its own scope: the run measured the fleet's sum, the profile's
    minimum is per cluster, node or GPU (`per`, scaled by the fleet when judged) and node_min is
    every host's own share. (its min, the rule, (node_min, its rule) or None)."""
    per = t.extra.get("per") or "cluster"  # storage's default (signoff/storage/judge.py KNOBS)
    hosts_of = doc.get("hosts") or {}

    def scope(r) -> int:
        hosts = sorted((r.get("details") or {}).get("per_host_in_window") or {}) or doc["meta"]["hosts"]
        if per == "node":
            return len(hosts)
        return sum(len(((hosts_of.get(h) or {}).get("nvidia") or {}).get("gpus") or []) for h in hosts)
    if per == "cluster":
        worst, n = min(passed, key=lambda r: r["measured"]), 1
        rule = f"the slowest {worst['measured']:g} {t.unit} of all hosts at once x margin {margin:g}"
    else:
        counted = [(r, scope(r)) for r in passed]
        if any(k < 1 for _, k in counted):
            raise InputError(f"storage_read_aggregate: per {per}, but the run's record names no "
                             f"{'GPU' if per == 'gpu' else 'host'}: cannot calibrate a figure per {per}")
        worst, n = min(counted, key=lambda rk: rk[0]["measured"] / rk[1])
        word = "nodes" if per == "node" else "GPUs"
        rule = (f"the slowest {worst['measured']:g} {t.unit} of all hosts at once / {n} {word} = "
                f"{worst['measured'] / n:.4g} {t.unit} per {per} x margin {margin:g}")
    value = _round(worst["measured"] / n * margin)
    cited = t.extra.get("node_min")
    shares = [v for r in passed for v in ((r.get("details") or {}).get("per_host_in_window") or {}).values()
              if _number(v)]
    if cited is None or not shares:
        return value, rule, None
    low = min(shares)
    node_min = _round(low * margin)
    note = f"the lowest share {low:g} {t.unit} x margin {margin:g}"
    if not t.provisional and node_min < cited:
        node_min, note = cited, f"{note} is below the class's cited {cited:g}: kept"
    return value, rule, (node_min, note)


def calibrate(docs: dict | list[dict], base: profiles.Profile, margin: float | None = None,
              said: dict | None = None) -> tuple[dict, dict[str, str]]:
    """(criteria section of the site profile, criterion -> why it was not calibrated), from one
    run's document or several (margins(): each criterion's margin, widened to the recorded
    tolerance and their spread); `said`, where given, gets each calibrated criterion's margin and
    where it came from."""
    docs = [docs] if isinstance(docs, dict) else docs
    out, skipped = {}, {}
    prov, kept = provenance(docs), margins(docs, margin, base)
    several = len(docs) > 1

    def of(r):  # where the worst figure was: its host, and its run where there are several
        return f"{r['host']}" + (f" in run {r['_run']}" if several else "")
    for name in FIGURES:
        margin, why = kept[name]["margin"], kept[name]["why"]
        # records carry the check's name: multinode_allreduce is judged by multinode_allreduce_busbw;
        # each record knows its run (`_run`, `_doc`: the worst of several runs names its run)
        recs = [{**r, "_run": d["meta"].get("run"), "_doc": d} for d in docs for r in d["results"]
                if catalog.criterion_of(r["criterion"]) == name]
        t = base.criteria.get(name)
        if not recs:
            skipped[name] = f"not in {'these runs' if several else 'this run'}"
            continue
        passed = [r for r in recs if r["status"] == "PASS" and _number(r.get("measured"))]
        if not passed:
            skipped[name] = "no figure: " + ", ".join(sorted({r["status"] for r in recs}))
            continue
        if t is None:
            skipped[name] = f"profile {base.name} has no threshold to take its direction and unit from"
            continue
        # a derived threshold (a fraction of what the hosts report) gives way to the figure the
        # run measured, in the unit it was judged in (GB/s, not "x node bound")
        unit = passed[0].get("unit") or t.unit if t.extra.get("derived") else t.unit
        node_min = None
        if t.op == "min" and name == "storage_read_aggregate":
            # each run's fleet on its own (its hosts, its shares), the lowest of them kept
            value, rule, node_min = min((_aggregate(d, [r for r in passed if r["_doc"] is d], t, margin)
                                         for d in docs if any(r["_doc"] is d for r in passed)),
                                        key=lambda got: (got[0], (got[2] or (0,))[0]))
            rule = rule.replace(f"margin {margin:g}", why)
            if not t.provisional and value < t.value:
                value, rule = t.value, f"{rule} is below the class's cited {t.value:g}: kept"
        elif t.op == "min":
            worst = min(passed, key=lambda r: r["measured"])
            value = _round(worst["measured"] * margin)
            rule = f"the slowest {worst['measured']:g} {unit} on {of(worst)} x {why}"
            if not t.provisional and value < t.value:  # never looser than a cited figure
                value, rule = t.value, f"{rule} is below the class's cited {t.value:g}: kept"
        elif t.op == "max":
            worst = max(passed, key=lambda r: r["measured"])
            value = _round(worst["measured"] / margin)
            rule = f"the highest {worst['measured']:g} {t.unit} on {of(worst)} / {why}"
            if not t.provisional and value > t.value:
                value, rule = t.value, f"{rule} is above the class's cited {t.value:g}: kept"
        else:
            skipped[name] = f"an equality ({t.op}), not a figure"
            continue
        extra = {k: v for k, v in t.extra.items() if k != "derived"}
        if node_min:
            extra["node_min"], note = node_min
            rule = f"{rule}; node_min {note}"
        out[name] = {t.op: value, "unit": unit, **extra,
                     "source": f"{prov}: {rule} ({len(passed)} measured)"}
        if said is not None:
            said[name] = why
    return out, skipped


def run_profile(meta: dict) -> profiles.Profile:
    """The profile the run was judged by: the very file it recorded (meta.profile_path), whatever
    its folder and name; where that file is not on this machine (a run of another checkout or
    machine), the shipped profile of its name only if its bytes are the run's (profile_sha256;
    a run recorded before the digest: a shipped path's name, as before)."""
    recorded, name, digest = meta.get("profile_path"), meta.get("profile"), meta.get("profile_sha256")
    whole = slices.split(name or "")[0]  # a slice "<class>@<N>" is its class's file, cut (slices.py)
    if recorded and Path(slices.split(recorded)[0]).is_file():
        base = profiles.load(str(Path(recorded).resolve()))
        if digest and profiles.digest(base) != digest:
            raise InputError(f"not calibrated: the run's profile {recorded} (or a file it extends) "
                             f"has changed since the run: its thresholds are not the ones the run "
                             f"was judged by; calibrate from a run under the profile as it is now")
        return base
    path = Path(slices.split(recorded or "")[0])
    shipped = profiles.PROFILE_DIR / f"{whole}.yaml"
    if recorded and shipped.exists() and (
            digest == profiles.digest(profiles.load(name)) if digest
            else path.parent.name == "thresholds" and path.stem == whole):
        return profiles.load(name)  # the same shipped profile, in another checkout (or machine)
    if not recorded and name and shipped.exists():
        return profiles.load(name)
    raise InputError(f"not calibrated: the run's profile {recorded or name} is not on this machine"
                     + (f", and the shipped {name} is not the file the run used (its sha256 differs)"
                        if shipped.exists() else "")
                     + ": calibrate where that file is (a site profile extends it)")


def _read(report_dir: Path) -> dict:
    path = Path(report_dir) / "results.json"
    try:
        return results.load(path)  # each record whole (`common` merged back)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read a run's results ({exc})") from None


def site_profile(report_dirs: Path | list[Path], margin: float | None = None, out: Path | None = None,
                 said: dict | None = None) -> tuple[dict, dict[str, str]]:
    """(the site profile, criterion -> why it was not calibrated) from one run's report
    directory or several; `margin` None: MARGIN, widened where margins() says."""
    dirs = [report_dirs] if isinstance(report_dirs, (str, Path)) else list(report_dirs)
    docs = [_read(d) for d in dirs]
    for d, doc in zip(dirs, docs):
        why = refusal(doc, MARGIN if margin is None else margin)
        if why:
            raise InputError(f"{d}: not calibrated: {why}")
    seen = {doc["meta"].get("run"): d for d, doc in zip(dirs, docs)}
    if len(seen) < len(docs):  # one run twice has no spread: it would read as a steady figure
        raise InputError(f"not calibrated: the same run given twice ({', '.join(map(str, dirs))}): "
                         "name each known-good run once")
    base = run_profile(docs[0]["meta"])
    for d, doc in zip(dirs[1:], docs[1:]):
        other = run_profile(doc["meta"])
        if profiles.digest(other) != profiles.digest(base):
            raise InputError(f"not calibrated: {d} was judged by profile {other.name}, {dirs[0]} by "
                             f"{base.name} (other thresholds): calibrate from runs of one profile")
    whole, n = slices.split(base.name)
    shipped = profiles.PROFILE_DIR / f"{whole}.yaml"
    cut = "" if n is None else f"{slices.SEP}{n}"  # a slice: the shipped class's, cut the same
    if shipped.exists() and (Path(f"{shipped.resolve()}{cut}") == Path(base.path).resolve()
                             or profiles.digest(profiles.load(f"{shipped}{cut}")) == profiles.digest(base)):
        extends = base.name  # a shipped profile by name: the site profile moves with the checkout
    elif out is None:
        extends = str(Path(base.path).resolve())
    else:  # another file: relative to the site profile (extends resolves there)
        extends = os.path.relpath(Path(base.path).resolve(), Path(out).resolve().parent)
    criteria, skipped = calibrate(docs, base, margin, said)
    hosts = sorted({h for doc in docs for h in doc["meta"]["hosts"]})
    runs = ", ".join(str(doc["meta"].get("run")) for doc in docs)
    how = (f"margins at most {MARGIN if margin is None else margin:g}, wider where the profile's recorded "
           "run-to-run tolerance" + (" or the runs' spread" if len(docs) > 1 else "") + " is")
    return ({"extends": extends,
             "description": f"{base.description or base.name}, calibrated on {hostlist.fold(hosts)} "
                            f"(run{'s' * (len(docs) > 1)} {runs}, {how})",
             "criteria": criteria}, skipped)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="signoff calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("report_dirs", type=Path, nargs="+", metavar="RUN",
                    help="known-good runs' report directories (results.json): two or more widen each "
                         "criterion's margin to their run-to-run spread")
    ap.add_argument("--out", type=Path, required=True, help="the site profile to write (YAML)")
    ap.add_argument("--margin", type=float, default=None,
                    help=f"a threshold is the slowest measured figure times this (default {MARGIN:g}), "
                         "or less where the profile's recorded run-to-run tolerance or the runs' spread "
                         "is wider")
    a = ap.parse_args(argv)
    try:
        margins_said: dict[str, str] = {}
        prof, skipped = site_profile(a.report_dirs, a.margin, a.out, margins_said)
    except InputError as exc:
        print(f"signoff calibrate: {exc}", file=sys.stderr)
        return results.EXIT_USAGE  # refused, as the command refuses bad options: nothing written
    a.out.parent.mkdir(parents=True, exist_ok=True)  # --out thresholds/site.yaml in a fresh directory
    said = [f"{name}: {why}" for name, why in margins_said.items()]
    if len(a.report_dirs) == 1:  # said first: the floors of one run are the loosest it may set
        said.insert(0, f"one run: no run-to-run spread of its own: each margin is "
                       f"{MARGIN if a.margin is None else a.margin:g}, or 1 - the run-to-run tolerance the "
                       "profile records where that is wider; two known-good runs or more also measure "
                       "their spread (docs/profiles.md, Calibration)")
    head = (f"# Written by signoff calibrate {' '.join(map(str, a.report_dirs))}"
            + (f" --margin {a.margin:g}" if a.margin is not None else "") + "\n"
            + "".join(f"# {line}\n" for line in said)
            + "".join(f"# not calibrated: {n}: {why}\n" for n, why in skipped.items()))
    # a new file renamed over --out: a link another user left at the name is replaced, not followed
    safefile.write(a.out, head + yaml.safe_dump(prof, sort_keys=False, width=200))
    profiles.load(str(a.out.resolve()))  # what it wrote loads (a bad value would be ours)
    print(f"{a.out}: {len(prof['criteria'])} criteria calibrated"
          + (f"; not calibrated: {', '.join(skipped)}" if skipped else ""))
    for line in said:
        print(f"  {line}")
    print(f"sign off with it: --profile {profiles.naming(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
