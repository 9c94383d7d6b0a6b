#!/usr/bin/env python3
"""Issue 23's 200-lab-host run, with a /tmp full of dead runs' dirs (needs root: tests/lab.py).

N lab hosts (network namespaces with a real sshd each; they share this machine's /tmp, so each
host's sweep sees every stale dir) and STALE dead runs' temp dirs in /tmp, each with a dead
keeper: every host's sweep stops at its bound. Then the issue's command:
`pytest acceptance/ -k "version or host_unique or gpu_count or nvidia_driver or error_counters"
--partial --profile tests/profiles/lab.yaml`. Prints the wall time, the checks per status, the
cover's lines (report.md), the hosts that noted leftovers, and the run's own temp dirs left in
/tmp afterwards (none expected); removes the stale dirs it made.

    sudo .venv/bin/python bench/sweep_lab.py --hosts 200 --stale 1000
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab import Lab  # noqa: E402

EXPR = "version or host_unique or gpu_count or nvidia_driver or error_counters"
DEAD = 4_194_304 + 1  # above any pid_max: no process has it


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--stale", type=int, default=1000)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    before = {p.name for p in Path("/tmp").glob("signoff.????????")}
    stale = []
    for _ in range(a.stale):
        d = Path(tempfile.mkdtemp(prefix="signoff.", dir="/tmp"))
        (d / ".keeper").write_text(f"{DEAD} 1\n")
        stale.append(d)
    try:
        with tempfile.TemporaryDirectory() as tmp, Lab(Path(tmp) / "lab", n_hosts=a.hosts) as lab:
            # Debian's python3 (no torch), as bench/scale.py: 200 sysinfo probes importing torch
            # at once load this 2-core machine, not the sweep (a try with the venv's was SIGKILLed)
            inv = lab.write_inventory(Path(tmp) / "inv.yaml", python="/usr/bin/python3")
            rd = Path(tmp) / "report"
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "-q", "-k", EXPR, "--partial",
                                "--inventory", str(inv), "--profile", "tests/profiles/lab.yaml",
                                "--report-dir", str(rd), "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True, timeout=3600)
            wall = time.monotonic() - t0
            if not (rd / "report.md").exists():
                sys.exit(f"no report (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
            doc = json.loads((rd / "results.json").read_text())
            md = (rd / "report.md").read_text()
            fix = md.split("## To fix", 1)[1].split("\n## ", 1)[0] if "## To fix" in md else ""
            left = {p.name for p in Path("/tmp").glob("signoff.????????")} - before - {d.name for d in stale}
            out = {"hosts": a.hosts, "stale": a.stale, "rc": p.returncode, "verdict": doc["verdict"],
                   "wall_s": round(wall, 1), "status": dict(Counter(r["status"] for r in doc["results"])),
                   "cover": [ln for ln in fix.splitlines() if ln.startswith("- ")],
                   "hosts_noting_leftovers": len(doc.get("leftovers") or {}),
                   "run_dirs_left": sorted(left)}
    finally:
        for d in stale:
            shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(out, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
