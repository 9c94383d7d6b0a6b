"""sysinfo reads a CPU build of torch from its version file on a host without an NVIDIA GPU:
what an import would report, without the import's ~2 s of CPU on every host of every run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

PROBE = Path(__file__).resolve().parent.parent / "signoff" / "gpu" / "probe_sysinfo.py"
# the probe's interpreter says, as it ends, whether torch was imported
SITE = ("import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('torch imported: %s\\n' % ('torch' in sys.modules)))\n")


def test_a_cpu_build_on_a_gpu_less_host_is_read_not_imported(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SITE)
    p = subprocess.run([sys.executable, str(PROBE)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    doc = json.loads(p.stdout)
    if doc["nvidia"]["pci_devices"] or torch.version.cuda:  # the import's own case, not this test's
        assert "torch imported: True" in p.stderr
        return
    assert "torch imported: False" in p.stderr, p.stderr
    t = doc["torch"]
    assert (t["version"], t["cuda"], t["nccl"], t["arch_list"], t["cuda_available"]) == (
        torch.__version__, torch.version.cuda, None, torch.cuda.get_arch_list(), torch.cuda.is_available())
    assert "not imported" in t["read_from"]


def test_no_torch_is_said_as_an_import_says_it(tmp_path):
    p = subprocess.run(["/usr/bin/python3", "-S", str(PROBE)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    t = json.loads(p.stdout)["torch"]
    assert t["version"] is None and t["error"].startswith("torch not importable: No module named 'torch'"), t
