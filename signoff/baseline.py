"""--baseline PATH/results.json: this run against an earlier one, per host and criterion. A
figure regressed when it moved the wrong way (lower where the threshold is a minimum,
higher where it is a maximum) by more than the tolerance; a check that passed then and does
not now regressed whatever its figure; hosts that appeared or vanished are named."""

from __future__ import annotations

import json
import re
from pathlib import Path

from signoff import InputError, catalog
from signoff.results import ALL, expanded
from signoff.units import parse_fraction

UNSEEN = "UNSEEN"  # signoff/unseen.py's STATUS (not imported: unseen imports pytest)
TOLERANCE = 0.05  # 5 %: the example; CI against staging nodes sets its own
# A criterion's tolerance from its run-to-run spread (spreads() below; thresholds/nvidia-base.yaml,
# local.yaml): twice the largest wrong-way move between healthy runs, never below TOLERANCE.
# Twice: 3-10 runs per figure span 2-3 standard deviations, so a healthy rerun moving past twice
# that is a < 1 % chance, while a lost GPU, HBM stack or link (-20 % and worse) still shows.
MULTIPLE = 2
CEILING = 0.95  # a profile's tolerance is below 100 % (units.parse_fraction)


def load(path: str, option: str = "--baseline") -> dict:
    """An earlier run's results.json (or its report directory's), for `option` (--baseline,
    --rerun): one message naming the option and path where it is not one."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        doc = json.loads(p.read_text())
    except OSError as exc:
        what = "it" if p == Path(path) else "its results.json"
        raise InputError(f"{option} {path}: cannot read {what} ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{option} {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InputError(f"{option} {path}: not a signoff results.json (no 'results' list)")
    return expanded(doc, p.parent)  # each record whole: its threshold may be stated once in `common`


def tolerance_arg(text: str | None) -> float | None:
    """'5%' or '0.05' -> 0.05; None where the option is not given (the profile's then)."""
    if text is None:
        return None
    try:
        return parse_fraction(text)
    except ValueError as exc:
        raise InputError(f"--baseline-tolerance {exc}") from None


def tolerances(option: float | None, profile) -> dict:
    """The tolerance per criterion: --baseline-tolerance for all where given, else the
    profile's `baseline:` (its tolerance and per-criterion ones), else TOLERANCE."""
    if option is not None:
        return {"default": option, "criteria": {}, "from": "--baseline-tolerance"}
    sec = profile.baseline if profile else {}
    return {"default": sec.get("tolerance", TOLERANCE), "criteria": dict(sec.get("criteria", {})),
            "from": f"profile {profile.name}" if sec else "default"}


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _direction(expected) -> int:
    """+1 where higher is better, -1 where lower is: the threshold's own sign wherever the
    expected text states it ("every GPU pair >= 300 GB/s", "... on every GPU <= 85 C")."""
    m = re.search(r"(>=|<=)\s*-?\d", str(expected or ""))
    return {">=": 1, "<=": -1}[m.group(1)] if m else 0


def warnings(doc: dict, base: dict) -> list[str]:
    """Why a baseline may not compare with this run: another class or profile, another suite
    version, a run that was not complete, or one whose checks could not measure (ERROR)."""
    now, then = doc.get("meta") or {}, base.get("meta") or {}
    out = []
    for key, what in (("profile_class", "hardware class"), ("profile", "profile"),
                      ("suite_version", "suite version")):
        if now.get(key) and then.get(key) and now[key] != then[key]:
            out.append(f"its {what} is {then[key]}, this run's {now[key]}")
    if base.get("verdict") in (None, "INCOMPLETE") or then.get("partial"):
        out.append(f"it was not a complete run (verdict {base.get('verdict') or 'none'}"
                   + (f"; partial: {then['partial']}" if then.get("partial") else "") + ")")
    elif base.get("verdict") == "ERROR":  # its checks that could not measure compare with nothing
        n = sum(r.get("status") == "ERROR" for r in base.get("results") or [])
        out.append(f"its verdict was ERROR (not signed off: could not measure): {n} check"
                   f"{'s' * (n != 1)} could not measure then")
    return out


def _hosts(doc: dict) -> set[str]:
    return set(doc.get("hosts") or {}) or {r["host"] for r in doc["results"]} - {ALL}


def _tolerance(tol: dict, check: str) -> float:
    own = tol["criteria"]
    if check not in own and own:  # a check named other than its criterion (multinode_allreduce)
        check = catalog.criterion_of(check)
    return own.get(check, tol["default"])


def compare(doc: dict, base: dict, tolerance, name: str) -> dict:
    """What results.json's meta.baseline records and the cover lists; `tolerance` a fraction
    for every criterion or tolerances()' dict."""
    tol = tolerance if isinstance(tolerance, dict) else {"default": tolerance, "criteria": {}}
    before = {(r["criterion"], r["host"]): r for r in base["results"]}
    regressions, unlike, unshown = [], [], []
    for r in doc["results"]:
        b = before.get((r["criterion"], r["host"]))
        if b is None:
            continue
        x = {"criterion": r["criterion"], "host": r["host"], "status": r["status"],
             "unit": r.get("unit") or "", "measured": r.get("measured"), "baseline": b.get("measured")}
        sign = _direction(r.get("expected") or b.get("expected"))
        numbers = _number(x["measured"]) and _number(x["baseline"])
        if numbers and (r.get("unit") or "") != (b.get("unit") or ""):
            # 0.95 x line rate against 370 Gb/s is no -99.7 %: figures of unlike units never compared
            unlike.append({**x, "baseline_unit": b.get("unit") or ""})
            sign = 0
        if sign and _number(x["measured"]) and _number(x["baseline"]) and x["baseline"]:
            change = (x["measured"] - x["baseline"]) / abs(x["baseline"])
            if sign * change < -_tolerance(tol, r["criterion"]):
                regressions.append({**x, "change_pct": round(100 * change, 1)})
                continue
        if b["status"] == "PASS" and r["status"] == UNSEEN:  # no regression: no longer judged (ERROR
            unshown.append(x)                                # under --unseen-error: one)
            continue
        if b["status"] == "PASS" and r["status"] in ("FAIL", "ERROR"):
            moved = {"was_expected": b.get("expected"), "expected": r.get("expected")} \
                if b.get("expected") and r.get("expected") and b["expected"] != r["expected"] else {}
            regressions.append({**x, "was_status": b["status"], **moved})
    now, then = _hosts(doc), _hosts(base)
    return {"name": name, "run": (base.get("meta") or {}).get("run"),
            "started": (base.get("meta") or {}).get("started"), "tolerance": tol["default"],
            **({"tolerances": tol["criteria"]} if tol["criteria"] else {}),
            **({"tolerance_from": tol["from"]} if "from" in tol else {}),
            "compared": sum((r["criterion"], r["host"]) in before for r in doc["results"]),
            # worst first: a pass turned FAIL/ERROR, then the largest move (a temperature's +42 %
            # is worse than a bandwidth's -6 %), so a cut list keeps what matters
            "regressions": sorted(regressions, key=lambda x: -abs(x.get("change_pct", 1000))),
            "unlike_units": unlike, "warnings": warnings(doc, base),
            **({"no_longer_shown": unshown} if unshown else {}),
            "appeared": sorted(now - then), "vanished": sorted(then - now)}


def unshown_lines(base: dict, most: int = 5) -> list[str]:
    """The checks that PASSed in the baseline and this machine cannot show now (UNSEEN): said
    beside the regressions, never one (a VM slice's fabric is the provider's to show)."""
    got = base.get("no_longer_shown") or []
    if not got:
        return []
    said = "; ".join(f"{x['criterion']} on {x['host']}" for x in got[:most])
    more = f" and {len(got) - most} more" if len(got) > most else ""
    return [f"no longer shown (PASS in the baseline, UNSEEN now: this machine cannot show it): {said}{more}"]


def spreads(docs: list[dict]) -> dict[str, dict]:
    """The run-to-run spread of every figure in healthy runs of one class: per criterion, the
    largest wrong-way move between any two runs of a host (1 - low/high where higher is
    better, high/low - 1 where lower is), and the tolerance MULTIPLE x that gives."""
    seen: dict[tuple, list] = {}
    for d in docs:
        for r in d["results"]:
            sign = _direction(r.get("expected"))
            if sign and _number(r.get("measured")):
                seen.setdefault((r["criterion"], r["host"]), []).append((r["measured"], sign, r.get("unit")))
    out: dict[str, dict] = {}
    for (check, _host), got in seen.items():
        crit = catalog.criterion_of(check)  # thermal_thresholds: thermal_slowdown's figure
        sign, unit = got[0][1], next((u for _, _, u in got if u), "")
        # an older run's figure without its unit is the same figure; another unit is another one
        vals = [v for v, _, u in got if not u or u == unit]
        lo, hi = min(vals), max(vals)
        if len(vals) < 2 or lo <= 0:
            continue  # one run has no spread; a zero (no XID, no throttle) moves by no fraction
        move = 1 - lo / hi if sign > 0 else hi / lo - 1
        if crit not in out or move > out[crit]["spread"]:
            out[crit] = {"runs": len(vals), "low": lo, "high": hi, "unit": unit, "spread": round(move, 4),
                         "tolerance": derived(move)}
    return out


def derived(spread: float) -> float:
    """MULTIPLE x the spread, up to a whole percent, within [TOLERANCE, CEILING]."""
    return min(CEILING, max(TOLERANCE, -(-round(MULTIPLE * spread * 1000) // 10) / 100))


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    ap = argparse.ArgumentParser(prog="python -m signoff.baseline")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("spread", help="the run-to-run spread of healthy runs of one class, and "
                                       "the `baseline:` tolerances it gives (docs/measurements.md)")
    sp.add_argument("runs", nargs="+", help="two or more results.json (or their report directories)")
    args = ap.parse_args(argv)
    try:
        got = spreads([load(p) for p in args.runs])
    except InputError as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    print(f"# {len(args.runs)} runs; tolerance = {MULTIPLE} x the spread, "
          f"{100 * TOLERANCE:g}-{100 * CEILING:g} % (signoff/baseline.py)")
    print(f"baseline:\n  tolerance: {100 * TOLERANCE:g}%\n  criteria:")
    for crit, s in sorted(got.items()):
        line = f"{crit}: {100 * s['tolerance']:g}%"
        print(f"    {line:<36}# {s['runs']} runs: {s['low']:g}-{s['high']:g} {s['unit']}, "
              f"spread {100 * s['spread']:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
