"""sysinfo lists the other processes using a GPU (NVML compute processes), not its own.
Needs an NVIDIA GPU with torch (CUDA) and nvidia-ml-py: run on the GPU machine; skipped here."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _cuda() -> bool:
    try:
        import pynvml
        import torch
        pynvml.nvmlInit()
        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - no GPU, no driver, no pynvml: nothing to test here
        return False


@pytest.mark.skipif(not _cuda(), reason="needs an NVIDIA GPU, torch with CUDA and nvidia-ml-py")
def test_sysinfo_names_another_process_on_the_gpu(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import torch, time; x = torch.empty(1 << 28, "
                              "device='cuda:0'); print('ready', flush=True); time.sleep(120)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "ready"
        time.sleep(1)
        shutil.copy(ROOT / "signoff" / "probes" / "sysinfo.py", tmp_path)
        probe = subprocess.Popen([sys.executable, "sysinfo.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                                 text=True)
        out, _ = probe.communicate(timeout=300)
        gpu0 = json.loads(out.splitlines()[-1])["nvidia"]["gpus"][0]
        seen = {x["pid"]: x for x in gpu0["processes"]}
        assert other.pid in seen, gpu0["processes"]
        assert "python" in seen[other.pid]["name"]
        assert seen[other.pid]["used_mib"] >= 1024  # the 1 GiB it holds
        assert probe.pid not in seen  # the probe's own CUDA context (it keeps the GPUs busy)
    finally:
        other.kill()
        other.wait()
