"""The local host is judged in the training environment (--python, default the python3 on
PATH), never in the controller's venv; the controller itself needs no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_cli import LOCK_WAIT

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: another interpreter, without torch
# The controller with torch made unimportable: signing off hosts must not need it.
NO_TORCH = ("import sys; sys.modules['torch'] = None; import pytest; "
            "sys.exit(pytest.main(sys.argv[1:]))")


def accept_locally(tmp_path: Path, *args: str, path: str = "/usr/bin:/bin"):
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-c", NO_TORCH, "acceptance/", "-k", "torch_cuda_build",
                        "--partial", "--profile", "local", "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT, *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": path, "HOME": str(tmp_path)})
    res = json.loads((rd / "results.json").read_text()) if (rd / "results.json").exists() else None
    return p, res


def test_default_is_the_python3_on_path_not_the_controller_venv(tmp_path):
    p, res = accept_locally(tmp_path)
    facts = res["hosts"]["localhost"]
    assert facts["python_executable"] == SYSTEM_PYTHON, p.stdout
    assert facts["torch"]["version"] is None  # that environment's torch (none), not the venv's
    assert res["meta"]["probe_python"] == {"localhost": SYSTEM_PYTHON}
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"probe Python {facts['python']} {SYSTEM_PYTHON}" in html  # the inventory's software column


def test_python_option_reaches_the_local_host(tmp_path):
    p, res = accept_locally(tmp_path, "--python", sys.executable)
    facts = res["hosts"]["localhost"]
    assert facts["python_executable"] == sys.executable, p.stdout
    assert facts["torch"]["version"]  # the venv's torch, importable there, unused by the controller
    assert res["meta"]["probe_python"] == {"localhost": sys.executable}


def test_missing_interpreter_is_one_clear_message(tmp_path):
    p, res = accept_locally(tmp_path, "--python", "python9.99")
    assert p.returncode == 4 and res is None
    assert "--python python9.99: not found on PATH (/usr/bin:/bin)" in p.stderr
