"""--baseline PATH/results.json: this run against an earlier one, per host and criterion. A
figure regressed when it moved the wrong way (lower where the threshold is a minimum,
higher where it is a maximum) by more than the tolerance; a check that passed then and does
not now regressed whatever its figure; hosts that appeared or vanished are named."""

from __future__ import annotations

import json
import re
from pathlib import Path

from signoff import InputError
from signoff.results import ALL
from signoff.units import parse_fraction

TOLERANCE = 0.05  # 5 %: the example; CI against staging nodes sets its own


def load(path: str) -> dict:
    p = Path(path)
    if p.is_dir():
        p = p / "results.json"
    try:
        doc = json.loads(p.read_text())
    except OSError as exc:
        raise InputError(f"--baseline {path}: cannot read it ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"--baseline {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise InputError(f"--baseline {path}: not a signoff results.json (no 'results' list)")
    return doc


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
    version, a run that was not complete."""
    now, then = doc.get("meta") or {}, base.get("meta") or {}
    out = []
    for key, what in (("profile_class", "hardware class"), ("profile", "profile"),
                      ("suite_version", "suite version")):
        if now.get(key) and then.get(key) and now[key] != then[key]:
            out.append(f"its {what} is {then[key]}, this run's {now[key]}")
    if base.get("verdict") in (None, "INCOMPLETE") or then.get("partial"):
        out.append(f"it was not a complete run (verdict {base.get('verdict') or 'none'}"
                   + (f"; partial: {then['partial']}" if then.get("partial") else "") + ")")
    return out


def _hosts(doc: dict) -> set[str]:
    return set(doc.get("hosts") or {}) or {r["host"] for r in doc["results"]} - {ALL}


def compare(doc: dict, base: dict, tolerance, name: str) -> dict:
    """What results.json's meta.baseline records and the cover lists; `tolerance` a fraction
    for every criterion or tolerances()' dict."""
    tol = tolerance if isinstance(tolerance, dict) else {"default": tolerance, "criteria": {}}
    before = {(r["criterion"], r["host"]): r for r in base["results"]}
    regressions, unlike = [], []
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
            if sign * change < -tol["criteria"].get(r["criterion"], tol["default"]):
                regressions.append({**x, "change_pct": round(100 * change, 1)})
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
            "appeared": sorted(now - then), "vanished": sorted(then - now)}
