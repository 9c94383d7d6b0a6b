#!/usr/bin/env python3
"""How the suite's wall time grows with the number of hosts, on lab hosts (tests/lab.py:
network namespaces with a real sshd each, on this machine; needs root).

Three parts, each optional (--parts):
  accept  `pytest acceptance/ -k EXPR --partial` on 1, 8, 32, 64 lab hosts; wall time of each
          run and its ratio to the 1-host run (targets of issue 10: <= 1.5 at 32, <= 2 at 64).
  sleep   signoff.fleet.Fleet against the same sizes: the fleet start (run lock + sysinfo on
          every host), then HostSession.run("sleep S") on every host at once. The probe
          sleeps instead of computing, so the time above S is the controller's SSH fan-out
          alone; the machine's CPU use in the phase (/proc/stat) says whether the CPU is the limit.
  peak    the controller at --hosts-peak lab hosts: fleet start + one sleep per host at once;
          peak RSS (VmHWM), threads and open fds of this process, sampled every 0.1 s.

Lab hosts share this machine's CPU: on a 2-core machine the hosts' own probes (a Python
start, torch import, gloo) compete with each other and with the controller, which is why
the sleeping variant exists. Prints a table and writes a JSON document (--out).

    sudo .venv/bin/python bench/scale.py --sizes 1,8,32,64 --hosts-peak 250
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from lab import Lab  # noqa: E402

from signoff import inventory  # noqa: E402
from signoff.fleet import Fleet  # noqa: E402

EXPR = "allreduce_busbw or version_parity or storage_read_seq"  # the measured subset
HOST_PYTHON = "/usr/bin/python3"  # Debian's, no torch: sysinfo of the sleep/peak parts stays cheap


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = f[3] + f[4]  # idle + iowait
    return sum(f) - idle, sum(f)


class Phase:
    """Wall time and the machine's CPU use (in cores) of a `with` block."""

    def __enter__(self):
        self.t0, self.c0, self.own0 = time.monotonic(), cpu_times(), os.times()
        return self

    def __exit__(self, *exc):
        self.wall = time.monotonic() - self.t0
        busy, total = (b - a for a, b in zip(self.c0, cpu_times()))
        self.cores_busy = os.cpu_count() * busy / total if total else 0.0
        own = os.times()  # this process (the controller) and the children it has reaped
        self.own_cpu = sum(b - a for a, b in zip(self.own0[:4], own[:4]))


def accept_run(n: int, work: Path, expr: str, profile: str, timeout: float) -> dict:
    with Lab(work / f"lab{n}", n_hosts=n) as lab:
        inv = lab.write_inventory(work / f"inv{n}.yaml", python=sys.executable)
        rd = work / f"report{n}"
        cmd = [sys.executable, "-m", "pytest", "acceptance/", "-k", expr, "--partial", "--profile",
               profile, "--inventory", str(inv), "--report-dir", str(rd), "-p", "no:cacheprovider", "-q"]
        with Phase() as ph:
            try:
                p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
    res = rd / "results.json"
    records = json.loads(res.read_text())["results"] if res.exists() else []
    counts = Counter(f"{r['criterion']} {r['status']}" for r in records)
    problems = [f"{r['status']} {r['criterion']}[{r['host']}]: {r['message'][:300]}"
                for r in records if r["status"] not in ("PASS", "N.A.")]
    return {"hosts": n, "wall_s": round(ph.wall, 1), "cores_busy": round(ph.cores_busy, 2),
            "pytest_cpu_s": round(ph.own_cpu, 1), "rc": rc,
            "statuses": dict(counts), "problems": problems}


def fleet_of(lab: Lab, path: Path) -> Fleet:
    return Fleet(inventory.load(lab.write_inventory(path, python=HOST_PYTHON)), connect_timeout=30)


def sleep_all(fleet: Fleet, seconds: float) -> list[str]:
    """`sleep` on every host at once, a thread each (no pool: nothing waits its turn);
    the hosts where it did not succeed."""
    bad: list[str] = []

    def one(s):
        try:
            r = s.run(f"sleep {seconds}", seconds + 60)
            if not r.ok:
                bad.append(f"{s.host.name}: exit {r.rc} {r.stderr.strip()[-200:]}")
        except Exception as exc:  # noqa: BLE001 - counted, named in the result
            bad.append(f"{s.host.name}: {exc}")
    threads = [threading.Thread(target=one, args=(s,)) for s in fleet.sessions.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return bad


def sleep_run(n: int, work: Path, seconds: float) -> dict:
    with Lab(work / f"slab{n}", n_hosts=n) as lab:
        fleet = fleet_of(lab, work / f"sinv{n}.yaml")
        try:
            with Phase() as start:
                errors = [str(f) for f in fleet.all_facts().values() if isinstance(f, Exception)]
            with Phase() as ph:
                bad = sleep_all(fleet, seconds)
        finally:
            fleet.close()
    return {"hosts": n, "start_s": round(start.wall, 1), "start_cores_busy": round(start.cores_busy, 2),
            "sleep_s": seconds, "wall_s": round(ph.wall, 2), "overhead_s": round(ph.wall - seconds, 2),
            "cores_busy": round(ph.cores_busy, 2), "controller_cpu_s": round(ph.own_cpu, 2),
            "start_controller_cpu_s": round(start.own_cpu, 2), "errors": errors + bad}


def proc_status() -> dict:
    st = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return {"rss_peak_mib": int(st["VmHWM"].split()[0]) / 1024, "threads": int(st["Threads"]),
            "fds": len(os.listdir("/proc/self/fd"))}


def peak_run(row: dict, n: int, work: Path, seconds: float) -> None:
    """Fills `row` as it goes: the peaks sampled so far survive an interrupt."""
    peak = {"rss_peak_mib": 0.0, "threads": 0, "fds": 0}
    done = threading.Event()

    def sample():
        while not done.wait(0.1):
            for k, v in proc_status().items():
                peak[k] = max(peak[k], v)
            row.update(rss_peak_mib=round(peak["rss_peak_mib"], 1), threads_peak=peak["threads"],
                       fds_peak=peak["fds"])
    row.update(hosts=n, fd_limit=resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    t0 = time.monotonic()
    with Lab(work / f"plab{n}", n_hosts=n) as lab:
        row.update(lab_s=round(time.monotonic() - t0, 1),
                   rss_before_mib=round(proc_status()["rss_peak_mib"], 1))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        fleet = fleet_of(lab, work / f"pinv{n}.yaml")
        try:
            with Phase() as start:
                errors = [str(f) for f in fleet.all_facts().values() if isinstance(f, Exception)]
            row.update(start_s=round(start.wall, 1), errors=errors)
            with Phase() as ph:
                row["errors"] += sleep_all(fleet, seconds)
            row.update(wall_s=round(ph.wall, 2), controller_cpu_s=round(start.own_cpu + ph.own_cpu, 1))
        finally:
            fleet.close()
            done.set()
            sampler.join()


def load1() -> float:
    """The 1-minute load average just after a run: other users of a shared machine show here."""
    return round(os.getloadavg()[0], 1)


def ratios(rows: list[dict]) -> None:
    base = next((r["wall_s"] for r in rows if r["hosts"] == 1), None)
    for r in rows:
        r["ratio"] = round(r["wall_s"] / base, 2) if base else None


def table(title: str, rows: list[dict], cols: list[str]) -> str:
    lines = [title, "  " + " | ".join(f"{c:>12}" for c in cols)]
    lines += ["  " + " | ".join(f"{str(r.get(c, '')):>12}" for c in cols) for r in rows]
    return "\n".join(lines)


def measure(doc: dict, parts: set, sizes: list[int], args, work: Path) -> None:
    if "accept" in parts:
        doc["accept"] = []
        for n in sizes:
            row = accept_run(n, work, args.expr, args.profile, args.timeout)
            doc["accept"].append({**row, "load1": load1()})
            ratios(doc["accept"])
            print(json.dumps(doc["accept"][-1]), flush=True)
    if "sleep" in parts:
        doc["sleep"] = []
        for n in sizes:
            doc["sleep"].append({**sleep_run(n, work, args.sleep), "load1": load1()})
            ratios(doc["sleep"])
            print(json.dumps(doc["sleep"][-1]), flush=True)
    if "peak" in parts:
        doc["peak"] = {}
        peak_run(doc["peak"], args.hosts_peak, work, args.sleep)
        doc["peak"]["load1"] = load1()
        print(json.dumps(doc["peak"]), flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,8,32,64", help="lab host counts, comma-separated (1 is the base)")
    ap.add_argument("--hosts-peak", type=int, default=250, help="lab hosts of the peak part (<= 250)")
    ap.add_argument("--parts", default="accept,sleep,peak", help="which parts: accept,sleep,peak")
    ap.add_argument("-k", dest="expr", default=EXPR, help=f"checks of the accept part (default {EXPR!r})")
    ap.add_argument("--profile", default=str(ROOT / "tests" / "profiles" / "lab.yaml"))
    ap.add_argument("--sleep", type=float, default=5, help="seconds the sleeping probe sleeps")
    ap.add_argument("--timeout", type=float, default=900, help="limit of one accept run, s")
    ap.add_argument("--out", default="scale.json", help="JSON result file")
    args = ap.parse_args()
    sizes = sorted({int(x) for x in args.sizes.split(",")})
    parts = set(args.parts.split(","))
    if unknown := parts - {"accept", "sleep", "peak"}:
        ap.error(f"--parts: unknown {sorted(unknown)}")
    doc = {"date": f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}", "machine": {
        "host": socket.gethostname(), "cpus": os.cpu_count(), "kernel": platform.release(),
        "python": platform.python_version(), "loadavg_start": os.getloadavg()},
        "args": vars(args), "git": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT,
                                                  capture_output=True, text=True).stdout.strip()}
    with tempfile.TemporaryDirectory(prefix="signoff-scale-") as tmp:
        try:
            measure(doc, parts, sizes, args, Path(tmp))
        except KeyboardInterrupt:  # Ctrl-C or `timeout -s INT`: keep the rows measured so far
            doc["interrupted"] = True
    doc["machine"]["loadavg_end"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\n{doc['date']}  {doc['machine']['host']}, {doc['machine']['cpus']} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in doc['machine']['loadavg_start'])} at start")
    if "accept" in doc:
        print(table(f"accept: pytest -k {args.expr!r} (wall s, ratio to 1 host; target <= 1.5 at 32, "
                    "<= 2 at 64)", doc["accept"],
                    ["hosts", "wall_s", "ratio", "cores_busy", "pytest_cpu_s", "rc", "load1"]))
    if "sleep" in doc:
        print(table(f"sleep: fleet start, then `sleep {args.sleep:g}` on every host at once",
                    doc["sleep"],
                    ["hosts", "start_s", "wall_s", "overhead_s", "ratio", "controller_cpu_s", "load1"]))
    if "peak" in doc:
        p = doc["peak"]
        print(f"peak at {p.get('hosts')} hosts: RSS {p.get('rss_peak_mib')} MiB (target <= 1024), threads "
              f"{p.get('threads_peak')}, fds {p.get('fds_peak')} of {p.get('fd_limit')}; "
              f"lab {p.get('lab_s')} s, fleet start {p.get('start_s')} s, sleep phase {p.get('wall_s')} s; "
              f"errors: {len(p.get('errors', []))}")
    print(f"written: {args.out}" + (" (interrupted: the rows before it)" if doc.get("interrupted") else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
