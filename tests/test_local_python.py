"""The local host is judged in the training environment (--python, default the python3 on
PATH), never in the controller's venv; the controller itself needs no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_cli import LOCK_WAIT

from signoff.results import load as load_results

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
    res = load_results(rd / "results.json") if (rd / "results.json").exists() else None
    return p, res


def test_default_is_the_python3_on_path_when_it_has_torch(tmp_path):
    """A python3 on PATH with torch is this machine's training environment: it is judged."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_ / "python3").chmod(0o755)
    p, res = accept_locally(tmp_path, path=f"{bin_}:/usr/bin:/bin")
    assert res["meta"]["probe_python"] == {"localhost": str(bin_ / "python3")}, p.stdout
    assert "probe_env" not in res["meta"] and "signoff's own" not in p.stdout
    assert res["hosts"]["localhost"]["torch"]["version"]


def test_no_torch_on_path_runs_in_signoffs_own_env_said_everywhere(tmp_path):
    """Debian's python3 (no torch) first on PATH, no --python: the probes run in signoff's own
    environment (this venv, with the [probe] extra), and every page says so."""
    p, res = accept_locally(tmp_path)
    facts = res["hosts"]["localhost"]
    assert facts["python_executable"] == sys.executable and facts["torch"]["version"], p.stdout
    own = f"signoff's own (torch {facts['torch']['version'].split('+')[0]}"
    env = res["meta"]["probe_env"]
    assert env.startswith(own) and env.endswith("), not a training environment")
    assert res["meta"]["probe_python"] == {"localhost": sys.executable}
    assert f"python3 on PATH ({SYSTEM_PYTHON}) has no torch" in res["meta"]["inventory"]
    said = "Probe environment: " + res["meta"]["probe_env"]
    assert said in p.stdout  # the terminal (header and summary)
    assert said in (tmp_path / "report" / "report.md").read_text()
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.count(said.replace("'", "&#x27;")) >= 2  # the cover and the versions section
    assert "Environment judged: the probes' interpreter on each host" in html


def test_interpreter_without_torch_errors_naming_it_and_what_it_lacks(tmp_path):
    p, res = accept_locally(tmp_path, "-k", "torch_cuda_build or allreduce_busbw",
                            "--python", SYSTEM_PYTHON)
    facts = res["hosts"]["localhost"]
    assert facts["python_executable"] == SYSTEM_PYTHON and "probe_env" not in res["meta"], p.stdout
    assert facts["torch"]["version"] is None  # that environment's torch (none), not the venv's
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"probe Python {facts['python']} {SYSTEM_PYTHON}" in html  # the inventory's software column
    r = {x["criterion"]: x for x in res["results"]}
    assert r["allreduce_busbw"]["status"] == "ERROR", r
    msg = r["allreduce_busbw"]["message"]
    assert "torch not importable" in msg
    assert f"interpreter {SYSTEM_PYTHON} lacks torch and nvidia-ml-py" in msg
    assert "--python PATH or the inventory's python: for localhost" in msg


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
