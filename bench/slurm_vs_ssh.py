#!/usr/bin/env python3
"""The same lab checks over SSH and over srun, side by side: wall time of `pytest acceptance/`
on 3 lab hosts (tests/lab.py: a network namespace with a real sshd each) with --launcher ssh,
then inside `salloc -N 3` with --launcher slurm (tests/slurmlab.py: slurmctld, a slurmd per
namespace). Needs root and Debian's slurmctld, slurmd, slurm-client, munge (make system).

Lab hosts share this machine's CPU: say its load beside the figures (printed here).

    sudo .venv/bin/python bench/slurm_vs_ssh.py [--repeat 2] [--checks acceptance/test_versions.py]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab import Lab  # noqa: E402
from slurmlab import SlurmLab  # noqa: E402

from signoff.results import load as load_results  # noqa: E402

PROFILE = str(ROOT / "tests" / "profiles" / "lab.yaml")


def run(slurm: SlurmLab, inv: Path, rd: Path, launcher: str, checks: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "pytest", *checks, "--profile", PROFILE, "--inventory", str(inv),
           "--launcher", launcher, "--report-dir", str(rd), "-p", "no:cacheprovider", "-q"]
    if checks != ["acceptance/"]:
        cmd.append("--partial")
    if launcher == "slurm":
        cmd = ["salloc", f"-N{len(slurm.lab.hosts)}", "--no-kill", "--quiet", *cmd]
    t0 = time.monotonic()
    subprocess.run(cmd, cwd=ROOT, env=slurm.env, capture_output=True, text=True, timeout=1200)
    wall = time.monotonic() - t0
    return wall, load_results(rd / "results.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--checks", nargs="+", default=["acceptance/"])
    ap.add_argument("--out", default="slurm_vs_ssh.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Lab(Path(tmp), n_hosts=3) as lab, SlurmLab(lab) as slurm:
        per_host = {h.name: {"data_iface": h.veth_host} for h in lab.hosts}
        inv = lab.write_inventory(Path(tmp) / "inv.yaml", python=sys.executable, overrides=per_host)
        for i in range(args.repeat):
            for launcher in ("ssh", "slurm"):
                load = os.getloadavg()[0]
                wall, res = run(slurm, inv, Path(tmp) / f"{launcher}{i}", launcher, args.checks)
                counts = {}
                for r in res["results"]:
                    counts[r["status"]] = counts.get(r["status"], 0) + 1
                steps = len((res["meta"].get("launcher") or {}).get("steps") or [])
                rows.append({"launcher": launcher, "wall_s": round(wall, 1), "verdict": res["verdict"],
                             "statuses": counts, "steps": steps, "load_before": round(load, 1)})
                print(f"{launcher:6} run {i + 1}: {wall:6.1f} s  verdict {res['verdict']}  {counts}"
                      + (f"  {steps} srun steps" if steps else "") + f"  (load average {load:.1f})",
                      flush=True)
    Path(args.out).write_text(json.dumps({"checks": args.checks, "hosts": 3, "cpus": os.cpu_count(),
                                          "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
