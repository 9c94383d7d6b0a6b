#!/usr/bin/env python3
"""Fidelity of signoff's built-in storage reader against fio, on the same files in one run.

Needs only python3 and fio (no venv): it runs signoff/storage/probe_storage.py as the suite does
(claim, prepare, then reads), alternating fio and the built-in reader over the same files
(ABBA order, so a drifting disk favours neither), for the sequential and the small-file
workload, and prints per-round figures and the median ratio built-in / fio (aim >= 0.95).
Every file it writes is under <path>/.signoff-<run>-bench/ and is removed at the end.

    python3 bench/storage_fidelity.py --path /mnt/nvme --size 16G --iodepth 32 --runtime 10
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "signoff" / "storage" / "probe_storage.py"


def probe(state, *args):
    p = subprocess.run([sys.executable, str(PROBE), *args], cwd=state, capture_output=True,
                       text=True)
    try:
        doc = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SystemExit(f"probe failed (exit {p.returncode}): {p.stderr.strip()[-500:]}") from None
    if "error" in doc:
        raise SystemExit(f"probe: {doc['error']}")
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default=tempfile.gettempdir(), help="directory on the disk to test")
    ap.add_argument("--size", default="2G", help="sequential: bytes in all (one file per job)")
    ap.add_argument("--bs", default="1M")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--iodepth", type=int, default=16)
    ap.add_argument("--files", type=int, default=4096, help="small files: how many")
    ap.add_argument("--file-size", default="128K")
    ap.add_argument("--small-jobs", type=int, default=8)
    ap.add_argument("--runtime", type=int, default=5, help="seconds per read")
    ap.add_argument("--rounds", type=int, default=3, help="fio/built-in pairs per workload")
    ap.add_argument("--workloads", default="seq,small")
    ap.add_argument("--min-free", default="10%")
    ap.add_argument("--out", help="write every figure as JSON here too")
    a = ap.parse_args()
    if not shutil.which("fio"):
        raise SystemExit("fio is not installed: nothing to compare with (apt-get install fio)")
    runid = time.strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid()
    state = tempfile.mkdtemp(prefix="signoff-bench.")
    common = ["--path", a.path, "--runid", runid, "--host", "bench", "--min-free", a.min_free]
    knobs = {"seq": ["--size", a.size, "--bs", a.bs, "--jobs", str(a.jobs),
                     "--iodepth", str(a.iodepth)],
             "small": ["--files", str(a.files), "--file-size", a.file_size, "--bs", a.bs,
                       "--jobs", str(a.small_jobs)]}
    workloads = a.workloads.split(",")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = {"path": a.path, "runid": runid, "args": vars(a), "rounds": {}}
    try:
        need = sum(_bytes(w, a) for w in workloads)
        out["claim"] = probe(state, "claim", *common, "--need", str(need))
        for w in workloads:
            prep = probe(state, "prepare", *common, "--workload", w, *knobs[w])
            print(f"# {w}: {prep['files']} files, {prep['bytes'] / 2**20:.0f} MiB written in "
                  f"{prep.get('write_seconds', 0):.1f} s", flush=True)
            rows = []
            for r in range(a.rounds):
                order = ("fio", "builtin") if r % 2 == 0 else ("builtin", "fio")
                got = {}
                for tool in order:
                    got[tool] = probe(state, "read", "--runid", runid, "--workload", w, "--tool",
                                      tool, "--runtime", str(a.runtime), *knobs[w])
                rows.append(got)
                f, b = got["fio"], got["builtin"]
                print(f"{w} round {r + 1}: fio {f['gbps']:.3f} GB/s, built-in {b['gbps']:.3f} GB/s, "
                      f"ratio {b['gbps'] / f['gbps']:.3f}", flush=True)
            out["rounds"][w] = [{t: _slim(d) for t, d in row.items()} for row in rows]
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        probe(state, "clean", *common)
        shutil.rmtree(state, ignore_errors=True)
    report(out, a)
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))


def _bytes(workload, a):
    def size(text):
        k = {"K": 10, "M": 20, "G": 30, "T": 40}.get(text[-1].upper())
        return int(text[:-1]) << k if k else int(text)
    return size(a.size) if workload == "seq" else a.files * (size(a.file_size) + 4096)


def _slim(doc):
    return {k: doc.get(k) for k in ("tool", "tool_version", "gbps", "bytes", "seconds", "params",
                                    "cache", "files_per_s", "fs")}


def report(out, a):
    fs = out["claim"]["fs"]
    print(f"\n# {out['path']}: {fs['fstype']} from {fs['source']} (device {fs['device']}, "
          f"rotational {fs['rotational']}); {os.cpu_count()} CPUs; Python {sys.version.split()[0]}")
    print("| workload | tool parameters | fio GB/s (median) | built-in GB/s (median) "
          "| ratio (median of rounds) |")
    print("|---|---|---|---|---|")
    out["ratio"] = {}
    for w, rows in out["rounds"].items():
        f = statistics.median(r["fio"]["gbps"] for r in rows)
        b = statistics.median(r["builtin"]["gbps"] for r in rows)
        ratio = statistics.median(r["builtin"]["gbps"] / r["fio"]["gbps"] for r in rows)
        out["ratio"][w] = round(ratio, 3)
        out.setdefault("ratio_of_medians", {})[w] = round(b / f, 3)
        pf, pb = rows[0]["fio"]["params"], rows[0]["builtin"]["params"]
        how = (f"bs {pf['bs'] >> 10}K, {pf['numjobs']} jobs x iodepth {pf['iodepth']}, "
               f"{pf['ioengine']} / {pb['ioengine']}, O_DIRECT {pf['direct']}, {a.runtime} s")
        print(f"| {w} | {how} | {f:.3f} | {b:.3f} | {ratio:.3f} |")
    print("ratio built-in / fio (median of rounds): "
          + ", ".join(f"{w} {r:.3f}" for w, r in out["ratio"].items())
          + "; of the medians: " + ", ".join(f"{w} {r:.3f}" for w, r in out["ratio_of_medians"].items()))


if __name__ == "__main__":
    main()
