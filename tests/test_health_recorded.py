"""The health checks of acceptance/test_health.py on a recorded 2x H200 (reports/examples/h200-2x:
no GPU here): its sysinfo answer is recorded; the health probes' other modes run for real on this
machine (its own kernel log, counters, CPU), and each negative case injects one fault into a
recorded reading, named as such."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from test_cli import LOCK_WAIT
from test_gpu_faults_recorded import faulty_h200

ROOT = Path(__file__).resolve().parent.parent


def recorded_host(tmp_path: Path, env: dict | None = None, inject=lambda g0, g1: None) -> Path:
    """The recorded healthy H200 pair as one local host: its Python answers the plain sysinfo
    probe with the recording and runs every other probe (and sysinfo's modes) for real."""
    inv = faulty_h200(tmp_path, inject)
    py = tmp_path / "recordedpython"
    doc = tmp_path / "sysinfo.json"
    py.write_text(f'#!/bin/bash\n[ "$1" = sysinfo.py ] && [ $# = 1 ] && exec cat {doc}\n'
                  f'exec {sys.executable} "$@"\n')
    envs = "".join(f"\n      {k}: {json.dumps(str(v))}" for k, v in (env or {}).items())
    inv.write_text(f"hosts:\n  - name: gpunode\n    address: local\n    python: {py}\n"
                   + (f"    env:{envs}\n" if envs else ""))
    return inv


def judged(tmp_path: Path, inv: Path, *args: str, profile="h200-2x-nvlink") -> dict:
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_health.py", *args, "--partial",
                        "--inventory", str(inv), "--profile", profile, "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert (rd / "results.json").exists(), p.stdout + p.stderr
    return {r["criterion"]: r for r in json.loads((rd / "results.json").read_text())["results"]}


def dmesg_line(ago_s: float, text: str) -> str:
    """A kernel log line `ago_s` seconds ago, in dmesg's seconds-since-boot form."""
    btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                 if ln.startswith("btime"))
    return f"[{time.time() - btime - ago_s:12.6f}] {text}\n"


def test_xid_history_of_this_machines_kernel_log_passes(tmp_path):
    """This machine's own kernel log (journal, else dmesg), read for real: no XID."""
    r = judged(tmp_path, recorded_host(tmp_path), "-k", "xid_history")["xid_history"]
    assert r["status"] == "PASS", r
    assert r["details"]["source"] in ("journal", "dmesg (this boot)") and r["measured"] == 0


def test_xid_history_with_a_fatal_xid_injected_fails_naming_it(tmp_path):
    """A recorded kernel log with XID 79 (fatal) and XID 13 (reported only) injected."""
    log = tmp_path / "kern.log"
    log.write_text(dmesg_line(7200, "usb 1-1: new device") +
                   dmesg_line(3600, "NVRM: Xid (PCI:0000:00:07): 13, pid=4242, Graphics Exception") +
                   dmesg_line(60, "NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', GPU has fallen off"))
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    r = judged(tmp_path, inv, "-k", "xid_history")["xid_history"]
    assert r["status"] == "FAIL", r
    assert "XID 79 x1 on PCI:0000:00:06" in r["message"] and "others: XID 13 x1" in r["message"]
    assert r["details"]["counts"] == {"13": 1, "79": 1}


def test_xid_history_unreadable_log_is_an_error(tmp_path):
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": tmp_path / "missing.log"})
    r = judged(tmp_path, inv, "-k", "xid_history")["xid_history"]
    assert r["status"] == "ERROR", r
    assert "kernel log unreadable" in r["message"] and "missing.log" in r["message"]
