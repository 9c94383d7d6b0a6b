#!/usr/bin/env python3
"""Cost of writing results as they arrive: 1,000 hosts x 32 records of ~1 KB (a sign-off of
a 1,000-node cluster), the old way (results.json rewritten whole on every record) against
signoff.results (one appended line of results.jsonl per record, results.json at the end).

The old way is timed at a few document sizes and summed over all records (running it for
real takes hours: that is the point); the new way is run for real. Times are this process's
CPU time, so other jobs on a shared machine do not inflate them (the writes land in the page
cache; neither way fsyncs).

    python bench/results_write.py [--hosts 1000] [--per-host 32]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from signoff.results import Results  # noqa: E402


def record(host: int, check: int) -> dict:
    """About the size of a real record (message, measured value, threshold, source, details)."""
    return {"test": f"acceptance/test_gpu_health.py::test_check{check:02d}[node{host:04d}]",
            "criterion": f"check{check:02d}", "host": f"node{host:04d}", "status": "PASS",
            "message": "", "duration_s": 0.123, "measured": 812.5, "expected": ">= 700",
            "unit": "GB/s", "source": "NVIDIA H200 SXM datasheet",
            "details": {"per_gpu": [812.5 + g for g in range(8)], "notes": ["x" * 400],
                        "env": {"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": "0"}}}


def old_rewrite(path: Path, doc: dict) -> float:
    """What Results.write did after every record: the whole document, json.dumps(indent=1)."""
    t = time.process_time()
    path.write_text(json.dumps(doc, indent=1, default=str))
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--per-host", type=int, default=32)
    a = ap.parse_args()
    n = a.hosts * a.per_host
    recs = [record(h, c) for h in range(a.hosts) for c in range(a.per_host)]
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        # old: a rewrite at k records costs ~k/n of the rewrite at n (linear in size): time
        # it at 5 sizes and integrate, so sum over k of t(k) ~ n/2 * t(n)
        points = []
        for frac in (0.2, 0.4, 0.6, 0.8, 1.0):
            k = int(n * frac)
            doc = {"meta": {}, "verdict": None, "hosts": {}, "results": recs[:k]}
            points.append((k, old_rewrite(d / "old.json", doc)))
        per_rec = sum(t / k for k, t in points) / len(points)  # s per record in the document
        old_total = per_rec * n * (n + 1) / 2
        size_mb = (d / "old.json").stat().st_size / 1e6
        # new: for real
        res = Results(d / "results.json", {"profile": "bench"})
        worst, t0 = 0.0, time.process_time()
        for r in recs:
            t = time.process_time()
            res.add(r)
            worst = max(worst, time.process_time() - t)
        adds = time.process_time() - t0
        t = time.process_time()
        res.finish()
        final = time.process_time() - t
        log_mb = (d / "results.jsonl").stat().st_size / 1e6
    print(f"{a.hosts} hosts x {a.per_host} records = {n} records; results.json {size_mb:.1f} MB")
    print(f"old (rewrite whole per record): last rewrite {points[-1][1]:.2f} s, "
          f"mean {old_total / n:.2f} s per record, total ~{old_total / 3600:.1f} h (estimated)")
    print(f"new (append a line per record): mean {adds / n * 1e6:.0f} us per record, worst "
          f"{worst * 1e3:.1f} ms, all adds {adds:.2f} s; results.json at the end {final:.2f} s; "
          f"results.jsonl {log_mb:.1f} MB")


if __name__ == "__main__":
    main()
