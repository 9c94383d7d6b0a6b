"""A GPU already in use by someone else is said before measuring, per host, on the terminal
and in the report. No GPU exists here: the host's sysinfo is the one recorded on a real
2x H200 with another process injected on GPU 1 (the probe's side runs on the H200 machine:
tests/test_gpu_processes_device.py); transport, plugin and report run for real."""

from __future__ import annotations

import json
import subprocess
import sys

from test_cli import LOCK_WAIT
from test_gpu_faults_recorded import RECORDED, ROOT, recorded_inventory


def test_recorded_h200_with_another_process_on_gpu1_is_reported(tmp_path):
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    for g in facts["nvidia"]["gpus"]:
        g["processes"] = []
    facts["nvidia"]["gpus"][1]["processes"] = [{"pid": 4242, "name": "python3", "used_mib": 30000}]
    inv = recorded_inventory(tmp_path, facts)
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_gpu_health.py", "--partial",
                        "--inventory", str(inv), "--profile", "h200-8x-nvlink@2", "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    line = ("GPUs in use on gpunode before measuring: GPU 1: pid 4242 (python3, 30000 MiB): its GPU "
            "measurements are suspect")
    assert line in p.stdout, p.stdout
    assert line in (rd / "report.html").read_text()
    assert json.loads((rd / "results.json").read_text())["hosts"]["gpunode"]["nvidia"]["gpus"][1][
        "processes"][0]["pid"] == 4242
