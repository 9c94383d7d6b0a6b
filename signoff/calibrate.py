"""A site profile from a run on nodes you trust (a "golden" run):

    python -m signoff.calibrate reports/<run>/ --out thresholds/site-a100.yaml [--margin 0.9]

writes a profile that `extends` the run's profile, with every figure the run measured as a
threshold: the slowest host, GPU or pair times the margin (the hottest over the margin for a
maximum, such as a temperature), never looser than a cited threshold of the class. Each
`source:` names the run (UTC time, hosts, GPU serials, suite version, profile). A run whose
verdict is not PASS (a FAIL, an ERROR, a run that was not complete), a run with any check ERROR
whatever its verdict, and a margin outside (0, 1] are refused (exit code 4); the criteria it
could not calibrate are listed with why, and the `--profile` that names the file it wrote."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import yaml

from signoff import InputError, catalog, hostlist, profiles, results

# The figures a calibration sets: what a known-good node measures (rates, bandwidths,
# efficiencies, temperatures and their margins). Counts, versions and states are not figures.
FIGURES = ("allreduce_busbw", "p2p_bandwidth", "hbm_bandwidth", "host_link_bandwidth",
           "soak_gemm_tflops", "soak_gpu_temp", "soak_mem_temp", "thermal_margin",
           "train_throughput", "train_scaling_host", "train_scaling_nodes", "train_input_headroom",
           "storage_read_seq", "storage_read_small", "storage_read_aggregate",
           "net_pair_bandwidth", "multinode_allreduce_busbw")
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
    return None


def provenance(doc: dict) -> str:
    meta, hosts = doc["meta"], doc.get("hosts") or {}
    serials = sorted({str(g.get("serial")) for f in hosts.values() if isinstance(f, dict)
                      for g in (f.get("nvidia") or {}).get("gpus") or [] if g.get("serial")})
    return (f"calibrated from run {meta.get('run')} ({str(meta.get('started', '?'))[:19].replace('T', ' ')} "
            f"UTC; hosts {hostlist.fold(meta.get('hosts') or sorted(hosts))}; GPU serials "
            f"{', '.join(serials) or 'none'}; {results.version_text(meta.get('suite_version'))}; profile "
            f"{meta.get('profile')})")


def _aggregate(doc: dict, passed: list[dict], t: profiles.Threshold, margin: float):
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


def calibrate(doc: dict, base: profiles.Profile, margin: float = MARGIN) -> tuple[dict, dict[str, str]]:
    """(criteria section of the site profile, criterion -> why it was not calibrated)."""
    out, skipped = {}, {}
    prov = provenance(doc)
    for name in FIGURES:
        # records carry the check's name: multinode_allreduce is judged by multinode_allreduce_busbw
        recs = [r for r in doc["results"] if catalog.criterion_of(r["criterion"]) == name]
        t = base.criteria.get(name)
        if not recs:
            skipped[name] = "not in this run"
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
            value, rule, node_min = _aggregate(doc, passed, t, margin)
            if not t.provisional and value < t.value:
                value, rule = t.value, f"{rule} is below the class's cited {t.value:g}: kept"
        elif t.op == "min":
            worst = min(passed, key=lambda r: r["measured"])
            value = _round(worst["measured"] * margin)
            rule = f"the slowest {worst['measured']:g} {unit} on {worst['host']} x margin {margin:g}"
            if not t.provisional and value < t.value:  # never looser than a cited figure
                value, rule = t.value, f"{rule} is below the class's cited {t.value:g}: kept"
        elif t.op == "max":
            worst = max(passed, key=lambda r: r["measured"])
            value = _round(worst["measured"] / margin)
            rule = f"the highest {worst['measured']:g} {t.unit} on {worst['host']} / margin {margin:g}"
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
    return out, skipped


def run_profile(meta: dict) -> profiles.Profile:
    """The profile the run was judged by: the very file it recorded (meta.profile_path), whatever
    its folder and name; where that file is not on this machine (a run of another checkout or
    machine), the shipped profile of its name only if its bytes are the run's (profile_sha256;
    a run recorded before the digest: a shipped path's name, as before)."""
    recorded, name, digest = meta.get("profile_path"), meta.get("profile"), meta.get("profile_sha256")
    if recorded and Path(recorded).is_file():
        base = profiles.load(str(Path(recorded).resolve()))
        if digest and profiles.digest(base) != digest:
            raise InputError(f"not calibrated: the run's profile {recorded} (or a file it extends) "
                             f"has changed since the run: its thresholds are not the ones the run "
                             f"was judged by; calibrate from a run under the profile as it is now")
        return base
    path = Path(recorded or "")
    shipped = profiles.PROFILE_DIR / f"{name}.yaml"
    if recorded and shipped.exists() and (
            digest == profiles.digest(profiles.load(name)) if digest
            else path.parent.name == "thresholds" and path.stem == name):
        return profiles.load(name)  # the same shipped profile, in another checkout (or machine)
    if not recorded and name and shipped.exists():
        return profiles.load(name)
    raise InputError(f"not calibrated: the run's profile {recorded or name} is not on this machine"
                     + (f", and the shipped {name} is not the file the run used (its sha256 differs)"
                        if shipped.exists() else "")
                     + ": calibrate where that file is (a site profile extends it)")


def site_profile(report_dir: Path, margin: float = MARGIN,
                 out: Path | None = None) -> tuple[dict, dict[str, str]]:
    path = Path(report_dir) / "results.json"
    try:
        doc = results.load(path)  # each record whole (`common` merged back)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read a run's results ({exc})") from None
    why = refusal(doc, margin)
    if why:
        raise InputError(f"{report_dir}: not calibrated: {why}")
    meta = doc["meta"]
    base = run_profile(meta)
    shipped = profiles.PROFILE_DIR / f"{base.name}.yaml"
    if shipped.exists() and (shipped.resolve() == Path(base.path).resolve()
                             or profiles.digest(profiles.load(str(shipped))) == profiles.digest(base)):
        extends = base.name  # a shipped profile by name: the site profile moves with the checkout
    elif out is None:
        extends = str(Path(base.path).resolve())
    else:  # another file: relative to the site profile (extends resolves there)
        extends = os.path.relpath(Path(base.path).resolve(), Path(out).resolve().parent)
    criteria, skipped = calibrate(doc, base, margin)
    return ({"extends": extends,
             "description": f"{base.description or base.name}, calibrated on {hostlist.fold(meta['hosts'])} "
                            f"(run {meta.get('run')}, margin {margin:g})",
             "criteria": criteria}, skipped)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m signoff.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("report_dir", type=Path, help="a run's report directory (results.json)")
    ap.add_argument("--out", type=Path, required=True, help="the site profile to write (YAML)")
    ap.add_argument("--margin", type=float, default=MARGIN,
                    help=f"a threshold is the slowest measured figure times this (default {MARGIN:g})")
    a = ap.parse_args(argv)
    try:
        prof, skipped = site_profile(a.report_dir, a.margin, a.out)
    except InputError as exc:
        print(f"signoff calibrate: {exc}", file=sys.stderr)
        return results.EXIT_USAGE  # refused, as the command refuses bad options: nothing written
    a.out.parent.mkdir(parents=True, exist_ok=True)  # --out thresholds/site.yaml in a fresh directory
    head = (f"# Written by python -m signoff.calibrate {a.report_dir} --margin {a.margin:g}\n"
            + "".join(f"# not calibrated: {n}: {why}\n" for n, why in skipped.items()))
    a.out.write_text(head + yaml.safe_dump(prof, sort_keys=False, width=200))
    profiles.load(str(a.out.resolve()))  # what it wrote loads (a bad value would be ours)
    print(f"{a.out}: {len(prof['criteria'])} criteria calibrated"
          + (f"; not calibrated: {', '.join(skipped)}" if skipped else ""))
    print(f"sign off with it: --profile {profiles.naming(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
