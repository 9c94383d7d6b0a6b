#!/usr/bin/env python3
"""Fidelity of signoff's all-reduce busbw against NVIDIA nccl-tests, side by side.

Builds nothing: give it an `all_reduce_perf` binary (--all-reduce-perf PATH, or on PATH).
Runs, on the same GPUs in one go: all_reduce_perf (one process, -g N), the signoff probe
(one process per GPU, CUDA graphs) and the probe in eager mode; prints busbw per size and
the ratio probe / nccl-tests (out-of-place).

    python bench/allreduce_fidelity.py --all-reduce-perf ./all_reduce_perf --out fid.json
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "signoff" / "interconnect" / "probe_allreduce.py"


def nccl_tests(binary, gpus, lo, hi, warmup, iters):
    cmd = [binary, "-b", lo, "-e", hi, "-f", "2", "-g", str(gpus), "-w", str(warmup),
           "-n", str(iters)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rows = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():  # size count type redop root time algbw busbw ...
            rows[int(f[0])] = {"oop_busbw": float(f[7]), "ip_busbw": float(f[11])}
    return rows, " ".join(cmd), out


def probe(lo, hi, warmup, iters, eager):
    args = [sys.executable, str(PROBE), "--min-bytes", lo, "--max-bytes", hi,
            "--warmup", str(warmup), "--iters", str(iters)] + (["--no-graph"] if eager else [])
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(args, capture_output=True, text=True, cwd=d).stdout
        doc = json.loads(out.strip().splitlines()[-1])  # after the sweep's progress lines
    if "error" in doc:
        raise SystemExit(f"probe failed: {doc['error']}")
    return {r["bytes"]: r["busbw"] for r in doc["rows"]}, doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--all-reduce-perf", default=shutil.which("all_reduce_perf"))
    ap.add_argument("--min", default="1M")
    ap.add_argument("--max", default="8G")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", help="write the table as JSON here too")
    ap.add_argument("--no-eager", action="store_true", help="skip the eager-loop comparison")
    a = ap.parse_args()
    if not a.all_reduce_perf:
        raise SystemExit("no all_reduce_perf: pass --all-reduce-perf PATH (build nccl-tests)")
    import torch

    gpus = torch.cuda.device_count()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    ref, cmd, raw = nccl_tests(a.all_reduce_perf, gpus, a.min, a.max, a.warmup, a.iters)
    ours, doc = probe(a.min, a.max, a.warmup, a.iters, eager=False)
    eager = {} if a.no_eager else probe(a.min, a.max, a.warmup, a.iters, eager=True)[0]
    print(f"# {gpus} GPUs, NCCL {doc.get('nccl')}, torch {doc.get('torch')}, graphs={doc.get('graphs')}")
    print(f"# nccl-tests: {cmd}")
    print("| size | nccl-tests busbw | signoff busbw | ratio | eager busbw | eager ratio |")
    print("|---|---|---|---|---|---|")
    table = []
    for size in sorted(ref):
        r, o, e = ref[size]["oop_busbw"], ours.get(size), eager.get(size)
        # one GPU: busbw is 0 by definition, so no ratio
        row = {"bytes": size, "nccl_tests": r, "signoff": o, "ratio": round(o / r, 4) if o and r else None,
               "eager": e, "eager_ratio": round(e / r, 4) if e and r else None}
        table.append(row)
        label = re.sub(r"^(\d+)$", lambda m: human(int(m.group(1))), str(size))
        eag = f"{e:.2f} | {row['eager_ratio']:.3f}" if row["eager_ratio"] else "- | -"
        ratio = f"{row['ratio']:.3f}" if row["ratio"] else "-"
        print(f"| {label} | {r:.2f} | {o or 0:.2f} | {ratio} | {eag} |")
    if a.out:
        Path(a.out).write_text(json.dumps({"gpus": gpus, "nccl": doc.get("nccl"), "cmd": cmd,
                                           "rows": table, "nccl_tests_output": raw}, indent=1))


def human(n):
    for unit, k in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}iB"
    return str(n)


if __name__ == "__main__":
    main()
