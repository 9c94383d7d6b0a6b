"""The aggregate storage read on three lab hosts (real sshd, real reads of this machine's
filesystem) with one fault injected: lab3's Python fails the timed read of the aggregate (and
only that), so the check ERRORs and must still record what lab1 and lab2 read."""

from __future__ import annotations

import sys

import pytest
from lab import Lab
from test_lab_acceptance import accept, by_key

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py


def test_aggregate_error_keeps_what_the_other_hosts_read(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    failing = tmp_path / "failingpython"
    failing.write_text('#!/bin/bash\ncase " $* " in *" --start-at "*) echo "injected fault" >&2; '
                       f'exit 3;; esac\nexec {sys.executable} "$@"\n')
    failing.chmod(0o755)
    with Lab(tmp_path / "lab", n_hosts=3) as lab:
        inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                                  overrides={"lab3": {"python": str(failing)}})
        rc, res, out = accept(tmp_path, "-k", "storage_read_aggregate", "--partial", "--inventory", str(inv),
                              "--profile", "local", "--storage-path", str(shared), "--storage-tool", "fio")
    agg = next(v for (c, _), v in by_key(res).items() if c == "storage_read_aggregate")
    assert agg["status"] == "ERROR", out
    assert "lab3" in agg["message"], agg["message"]
    det = agg["details"]
    assert list(det["errors"]) == ["lab3"], det
    assert sorted(det["per_host"]) == ["lab1", "lab2"], det
    assert all(det["per_host"][h]["gbps"] > 0 for h in ("lab1", "lab2")), det
