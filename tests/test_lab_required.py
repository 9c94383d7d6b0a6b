"""Where the lab is required (CI), a lab test that cannot run FAILS: CI never passes on a
run whose lab tests were all skipped (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ONE = "tests/test_interconnect_lab.py::test_hung_collective_is_killed_with_all_ranks"


def unprivileged(**env) -> subprocess.CompletedProcess:
    """pytest on one lab test as a non-root user: `unshare --user` runs it with euid 65534
    (unmapped) while the files stay readable."""
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "SIGNOFF_REQUIRE_LAB")}
    return subprocess.run(["unshare", "--user", sys.executable, "-m", "pytest", ONE, "-q", "-rs",
                           "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**base, "PYTHONDONTWRITEBYTECODE": "1", **env})


@pytest.mark.skipif(not shutil.which("unshare"), reason="unshare (util-linux) not installed")
def test_a_lab_test_that_cannot_run_skips_here_and_fails_where_the_lab_is_required():
    if "65534" not in subprocess.run(["unshare", "--user", "id", "-u"], capture_output=True,
                                     text=True).stdout:
        pytest.skip("user namespaces are not available here")
    p = unprivileged()
    assert p.returncode == 0 and "1 skipped" in p.stdout, p.stdout + p.stderr
    assert "lab needs root (network namespaces, sshd, mount)" in p.stdout
    for env in ({"SIGNOFF_REQUIRE_LAB": "1"}, {"CI": "true"}):
        p = unprivileged(**env)
        assert p.returncode == 1 and "1 error" in p.stdout, (env, p.stdout + p.stderr)
        assert "lab test required here (SIGNOFF_REQUIRE_LAB=1 or CI set) but lab needs root " \
               "(network namespaces, sshd, mount)" in p.stdout, p.stdout
