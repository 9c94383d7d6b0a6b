#!/usr/bin/env python3
"""The multi-node training step (train_scaling_nodes) over srun, N times on one Slurm lab: the
2-node step then the 3-node step, back to back on the same master port, as the suite runs
them (signoff/training/run.py over_nodes, signoff/network/run.py Network.collective: one gloo
rank per node, GLOO_SOCKET_IFNAME the data interface). Counts the rounds where a step failed
and keeps each failing node's stderr (the rank's gloo error) and any core file.

    sudo .venv/bin/python bench/gloo_abort_repro.py --rounds 30 [--cores /tmp/cores]

Needs root and Debian's slurmctld, slurmd, slurm-client, munge (make system). Lab hosts share
this machine's CPU: the load is printed beside the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
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

# thresholds/local.yaml's small training step, as lab.yaml inherits it
STEP = ["--layers", "2", "--d-model", "64", "--heads", "4", "--ffn", "128", "--seq", "32", "--batch", "4",
        "--warmup", "2", "--steps", "8", "--lr", "0.001", "--threads", "1"]
PORT = 29401  # Network.collective: --net-port (29400) + 1, every step


def step(slurm: SlurmLab, hosts, work: Path, k: int, timeout: int, env: dict) -> subprocess.CompletedProcess:
    """One srun step of the training probe on the first k hosts, each node its own command."""
    master = hosts[0].address
    cases = []
    for rank, h in enumerate(hosts[:k]):
        wd = work / h.name
        wd.mkdir(exist_ok=True)
        envs = " ".join(f"{a}={shlex.quote(b)}"
                        for a, b in {"GLOO_SOCKET_IFNAME": h.veth_host, **env}.items())
        cmd = (f"cd {shlex.quote(str(wd))} && env {envs} {shlex.quote(sys.executable)} "
               f"{ROOT / 'signoff/training/probe_train.py'} {' '.join(STEP)} --nnodes {k} --node-rank {rank} "
               f"--master-addr {master} --master-port {PORT} --timeout {timeout} --nprocs 1 "
               f"> out.json 2> err.txt; echo rc $?")  # srun splits lines past 1 KiB: files
        cases.append(f"{h.name}) {cmd};;")
    script = f"ulimit -c unlimited; case \"$SLURMD_NODENAME\" in {' '.join(cases)} esac"
    names = ",".join(h.name for h in hosts[:k])
    return slurm.run("srun", f"--nodelist={names}", f"-N{k}", f"--ntasks={k}", "--ntasks-per-node=1",
                     "--kill-on-bad-exit=0", "--label", "--input=none", "sh", "-c", script,
                     timeout=timeout + 60)


def suite(slurm: SlurmLab, tmp: Path, i: int, checks: list[str]) -> dict:
    """`pytest acceptance/test_training.py --launcher slurm` inside `salloc -N3`, as
    tests/test_slurm_lab.py runs the suite: the training checks' statuses and failures."""
    lab = slurm.lab
    per_host = {h.name: {"data_iface": h.veth_host} for h in lab.hosts}
    inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides=per_host)
    rd = tmp / f"report{i}"
    cmd = ["salloc", f"-N{len(lab.hosts)}", "--no-kill", "--quiet", sys.executable, "-m", "pytest", *checks,
           "--profile", str(ROOT / "tests/profiles/lab.yaml"), "--inventory", str(inv), "--launcher", "slurm",
           "--report-dir", str(rd), "-p", "no:cacheprovider", "-q", "--partial"]
    p = subprocess.run(cmd, cwd=ROOT, env=slurm.env, capture_output=True, text=True, timeout=900)
    try:
        res = load_results(rd / "results.json")
    except (OSError, ValueError):
        return {"rc": p.returncode, "errors": {"run": (p.stdout + p.stderr)[-3000:]}}
    bad = {f"{r['check']} {r.get('host') or ''}": (r.get("message") or "")[:600] + " "
           + json.dumps(r.get("details") or {})[:2000]
           for r in res["results"] if r["status"] in ("ERROR", "NOT RUN")}
    return {"rc": p.returncode, "errors": bad, "restarted": [r["details"]["restarted"] for r in res["results"]
                                                             if (r.get("details") or {}).get("restarted")]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--timeout", type=int, default=120, help="the probe's --timeout, s")
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for every rank")
    ap.add_argument("--out", default="", help="JSON of every round's outcome")
    ap.add_argument("--suite", nargs="*", help="run these acceptance checks under salloc instead "
                    "(default acceptance/test_training.py)")
    args = ap.parse_args()
    env = dict(e.split("=", 1) for e in args.env)
    rows, fails = [], 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, Lab(Path(tmp), n_hosts=3) as lab, SlurmLab(lab) as slurm:
        work = Path(tmp) / "work"
        work.mkdir()
        for i in range(args.rounds):
            load = os.getloadavg()[0]
            row = {"round": i, "load": round(load, 2)}
            if args.suite is not None:
                row["suite"] = suite(slurm, Path(tmp), i, args.suite or ["acceptance/test_training.py"])
                failed = bool(row["suite"]["errors"]) or row["suite"]["rc"] not in (0, 1)
                fails += failed
                rows.append(row)
                print(f"round {i}: {'FAILED' if failed else 'ok'} (load {load:.1f}) rc {row['suite']['rc']} "
                      f"restarted {row['suite']['restarted']} {json.dumps(row['suite']['errors'])[:3000]}",
                      flush=True)
                continue
            for k in (2, 3):
                r = step(slurm, lab.hosts, work, k, args.timeout, env)
                docs, errs = {}, {}
                for h in lab.hosts[:k]:
                    try:
                        docs[h.name] = json.loads((work / h.name / "out.json").read_text())
                    except (OSError, ValueError) as exc:
                        docs[h.name] = {"error": f"no JSON: {exc}"}
                    errs[h.name] = (work / h.name / "err.txt").read_text(errors="replace")[-3000:]
                bad = {n: d for n, d in docs.items() if "error" in d}
                row[k] = {"rc": r.returncode, "errors": {n: d["error"] for n, d in bad.items()},
                          "restarted": [d["restarted"] for d in docs.values() if d.get("restarted")]}
                if r.returncode or bad:
                    row[k]["stderr"] = "\n".join(f"--- {n}\n{e}" for n, e in errs.items()) + r.stderr[-1000:]
                    row[k]["stdout"] = r.stdout[-2000:]
            failed = any(row[k]["rc"] or row[k]["errors"] or "stderr" in row[k] for k in (2, 3))
            fails += failed
            rows.append(row)
            print(f"round {i}: {'FAILED' if failed else 'ok'} (load {load:.1f}) "
                  + "; ".join(f"{k}: rc {row[k]['rc']} {row[k]['errors']}" for k in (2, 3)), flush=True)
            if failed:
                for k in (2, 3):
                    if "stderr" in row[k]:
                        print(row[k]["stderr"], flush=True)
    wall = time.monotonic() - t0
    print(f"{fails} of {args.rounds} rounds failed; {wall:.0f} s")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
