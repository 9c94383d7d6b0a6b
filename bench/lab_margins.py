"""How far every measured lab figure that PASSed cleared its floor: the smallest measured /
threshold ratio per criterion and profile over every results.json a test run left.

    .venv/bin/python -m pytest tests/ -n 2 --dist loadfile --basetemp /tmp/mt
    .venv/bin/python bench/lab_margins.py /tmp/mt

The lab floors (thresholds/local.yaml, tests/profiles/lab.yaml) are set so that a loaded
2-core CI machine clears them by 3x or more (docs/measurements.md, "Lab floors"): a ratio
below 3 here is a floor to lower, or a test to give an injected fault instead."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

BOUND = re.compile(r"(>=|<=)\s*(-?[0-9.]+(?:e-?[0-9]+)?)")


def margins(root: Path) -> dict[tuple[str, str], list[tuple[float, float, str]]]:
    """(criterion, profile) -> [(ratio, measured, the test dir)], smallest ratio first."""
    out: dict[tuple[str, str], list] = {}
    for f in root.rglob("results.json"):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        for r in doc.get("results") or []:
            m = BOUND.match(str(r.get("expected") or ""))
            v = r.get("measured")
            if r.get("status") != "PASS" or not m or not isinstance(v, (int, float)) or not float(m[2]):
                continue
            lim = float(m[2])
            ratio = v / lim if m[1] == ">=" else (lim / v if v else float("inf"))
            test = next((p.name for p in f.parents if p.name.startswith("test_")), str(f.parent))
            out.setdefault((r["criterion"], doc["meta"].get("profile", "?")), []).append((ratio, v, test))
    return {k: sorted(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", type=Path, help="a pytest --basetemp (or any tree of report dirs)")
    ap.add_argument("--below", type=float, default=float("inf"), help="only ratios below this")
    a = ap.parse_args()
    rows = sorted(margins(a.root).items(), key=lambda kv: kv[1][0][0])
    print(f"{'criterion':28} {'profile':10} {'n':>3} {'min x':>7} {'measured':>10} {'median x':>8}  test")
    for (crit, prof), v in rows:
        if v[0][0] < a.below:
            print(f"{crit:28} {Path(prof).stem[:10]:10} {len(v):3} {v[0][0]:7.2f} {v[0][1]:10.4g} "
                  f"{v[len(v) // 2][0]:8.2f}  {v[0][2]}")


if __name__ == "__main__":
    main()
