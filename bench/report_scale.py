#!/usr/bin/env python3
"""The report at 1,000 hosts x the whole sign-off sheet (issue 23's bound: report.html <= 10 MB).

1,000 recorded 1x H200 hosts (tests/test_report_scale_recorded.py: each the recorded host of
reports/examples/h200-1x answered in the controller's process, its own machine identity), the
first 300 on an older driver branch; `pytest acceptance/ --profile h200-8x-nvlink@1` (h200-1x before
issue 52) over all of them.
Prints the wall time, the checks per status, the size of every file the run writes, the cover's
and the terminal's line counts; writes them as JSON (--out). Then reads the bounded output back
(issue 30: results.json <= 30 MB, junit.xml <= 10 MB): signoff.results.load() against the
document the run's results.jsonl gives (`read_back`), `signoff rebuild` writing the same
results.json, --baseline's load and compare of the run with itself; and the size results.json
would have if every float of every record differed from host to host (recorded hosts measure
alike, a real fleet does not: `results_json_distinct_floats`).

    .venv/bin/python bench/report_scale.py --hosts 1000 --bad 300 --out /tmp/report_scale.json
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import zlib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_report_scale_recorded import accept_recorded, recorded_fleet  # noqa: E402

from signoff import baseline, results  # noqa: E402


def distinct(value, host: str):
    """value with every float moved by a fraction of a per mille that is the host's own."""
    if isinstance(value, float):
        return value * (1 + (zlib.crc32(host.encode()) % 1000) / 1e6)
    if isinstance(value, dict):
        return {k: distinct(v, host) for k, v in value.items()}
    if isinstance(value, list):
        return [distinct(v, host) for v in value]
    return value


def read_back(rd: Path) -> dict:
    """The bounded files read back: load() is the run's document (from its results.jsonl),
    rebuild writes the same results.json, the run compared with itself as its own baseline."""
    logged = results._empty({})
    for line in (rd / results.LOG).read_text().splitlines():
        results._apply(logged, json.loads(line))
    logged = json.loads(results.dumps(logged))
    loaded = results.load(rd)
    written = (rd / "results.json").read_bytes()
    rebuilt = results.rebuild(rd)
    base = baseline.load(str(rd))
    cmp = baseline.compare(loaded, base, 0.05, "itself")
    series = sum(len(v.get("series") or []) for v in (loaded.get("soak") or {}).values())
    doc = {**logged, "results": [{**r, "measured": distinct(r.get("measured"), r["host"]),
                                  "details": distinct(r.get("details"), r["host"])}
                                 for r in logged["results"]]}
    return {"load_equals_log": loaded == logged, "records": len(loaded["results"]),
            "soak_samples_read_back": series,
            "rebuild_same_results_json": (rd / "results.json").read_bytes() == written
                                         and json.loads(results.dumps(rebuilt)) == logged,
            "baseline_compared": cmp["compared"], "baseline_regressions": len(cmp["regressions"]),
            "results_json_distinct_floats": len(results.text(results.bounded(doc)).encode())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--bad", type=int, default=300)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        inv, env = recorded_fleet(tmp, a.hosts, a.bad)
        rd = tmp / "report"
        t0 = time.monotonic()
        p = accept_recorded(inv, env, rd, "acceptance/", timeout=3600)
        wall = time.monotonic() - t0
        doc = json.loads((rd / "results.json").read_text())
        md = (rd / "report.md").read_text()
        fix = md.split("## To fix", 1)[1].split("\n## ", 1)[0] if "## To fix" in md else ""
        html = (rd / "report.html").read_text()
        rows = len(re.findall(r"&#34;testId&#34;|&quot;testId&quot;", html))
        out = {"hosts": a.hosts, "bad": a.bad, "rc": p.returncode, "verdict": doc["verdict"],
               "wall_s": round(wall, 1), "checks": len(doc["results"]),
               "status": dict(Counter(r["status"] for r in doc["results"])),
               "bytes": {f.name: f.stat().st_size for f in sorted(rd.iterdir()) if f.is_file()},
               "html_rows": rows, "cover_lines": sum(ln.startswith("- ") for ln in fix.splitlines()),
               "terminal_lines": len(p.stdout.splitlines())}
        out["read_back"] = read_back(rd)
    print(json.dumps(out, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
