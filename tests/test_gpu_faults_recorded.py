"""GPU health criteria FAIL on a broken node. No GPU exists here, so the host's sysinfo
answer is the one recorded on a real 2x H200 (reports/examples/h200-2x) with one fault
injected per GPU field; everything else (transport, probe shipping, judging) runs for real."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "reports" / "examples" / "h200-2x" / "results.json"


def faulty_h200(tmp_path: Path) -> Path:
    """An inventory of one local host whose Python answers sysinfo with a faulty H200 pair."""
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    g0, g1 = facts["nvidia"]["gpus"]
    g1["ecc_current"] = False
    g1["ecc_volatile_uncorrectable"] = 3
    g1["row_remap"]["pending"] = 1
    g0["pcie"].update(gen=4, width=8)
    g1["persistence_mode"] = 0
    g1["mig_current"] = 1
    g0["nvlink"]["up"] = 12
    doc = tmp_path / "sysinfo.json"
    doc.write_text(json.dumps(facts))
    py = tmp_path / "recordedpython"
    py.write_text(f'#!/bin/bash\n[ "$1" = sysinfo.py ] && exec cat {doc}\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - {{name: gpunode, address: local, python: {py}}}\n")
    return inv


@pytest.mark.parametrize("criterion, text", [
    ("ecc_enabled", "gpunode: GPU 1 ECC off"),
    ("ecc_uncorrectable", "GPU 1 has 3 uncorrectable ECC errors since driver load"),
    ("row_remap", "GPU 1 has a row remap pending (reset the GPU)"),
    ("pcie_link", "GPU 0 PCIe Gen4 x8 < Gen5 x16"),
    ("persistence_mode", "GPU 1 persistence mode off"),
    ("mig_mode", "GPU 1 MIG on"),
    ("nvlink_up", "GPU 0 has 12/18 NVLinks up"),
])
def test_recorded_h200_with_a_fault_fails_by_name(tmp_path, criterion, text):
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_gpu_health.py", "--partial",
                        "--inventory", str(faulty_h200(tmp_path)), "--profile", "h200-2x-nvlink",
                        "--report-dir", str(rd), "-p", "no:cacheprovider"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    res = {r["criterion"]: r for r in json.loads((rd / "results.json").read_text())["results"]}
    assert p.returncode == 1 and res[criterion]["status"] == "FAIL", p.stdout
    assert text in res[criterion]["message"]
    assert res["gpu_model"]["status"] == "PASS"  # the rest of the node is judged as measured
