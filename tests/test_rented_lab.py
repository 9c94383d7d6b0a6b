"""A rented container, for real (issue 52, "Done when"): lab1's sshd runs in a mount namespace of
its own with Docker's default 64 MB /dev/shm and podman's /run/.containerenv marker (tests/lab.py,
Lab(containers=...)), and the run logs in as signoff-renter, a user who is not root and so cannot
read the kernel log (kernel.dmesg_restrict on this machine). Its one GPU is a fake NVML's (no GPU
here), so the XID checks apply. lab2 is the same machine as root, its /dev/shm the machine's.
The run reads lab1 as a container, FAILs its shm check naming the size and the cause, and lists
its XID log and a DCGM run under what this machine cannot show; `signoff plan` says the same first."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from lab import Lab
from second_user import renter
from test_dcgm_lab import FAKE_PYNVML
from test_lab_acceptance import ROOT, accept, by_key

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

CHECKS = "shm_size or xid_history or dcgm_diag"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: stdlib probes (form, sysinfo) need nothing more


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rented")
    pw = renter()
    # the fake NVML, whole, where the renter can read it: pytest's tmp and a clone's directory
    # (a mktemp -d, a home) may be root's alone
    fake = Path(tempfile.mkdtemp(prefix="signoff-fakenvml-"))
    try:
        fake.chmod(0o755)
        shutil.copy(ROOT / "tests" / "fake_nvml.py", fake / "fake_nvml.py")
        (fake / "pynvml.py").write_text(FAKE_PYNVML.replace(repr(str(ROOT / "tests")), repr(str(fake))))
        for f in fake.iterdir():
            f.chmod(0o644)
        env = {"PYTHONPATH": str(fake), "SIGNOFF_FAKE_SERIALS": json.dumps(["1650000000"])}
        prof = tmp / "rented.yaml"  # a site that wants DCGM: not optional as under local
        prof.write_text("extends: local\ncriteria:\n  dcgm_diag: {optional: false}\n")
        with Lab(tmp / "lab", n_hosts=2, containers=("lab1",)) as lab:
            # the renter's interpreter is the system's: this venv's lives under root's 0700 home
            inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides={
                "lab1": {"user": pw.pw_name, "env": env, "python": SYSTEM_PYTHON}, "lab2": {"env": env}})
            plan = subprocess.run([sys.executable, "-m", "signoff", "plan", "--inventory", str(inv),
                                   "--profile", str(prof)], cwd=ROOT, capture_output=True, text=True,
                                  timeout=300)
            rc, res, out = accept(tmp, "acceptance/test_form.py", "acceptance/test_health.py",
                                  "acceptance/test_dcgm.py", "-k", CHECKS, "--inventory", str(inv),
                                  "--profile", str(prof))
    finally:
        shutil.rmtree(fake, ignore_errors=True)
    return rc, res, out, plan, tmp / "report"


def test_a_rented_container_reads_as_one_and_fails_its_shm(run):
    rc, res, out, plan, rd = run
    assert res is not None, out[-4000:]
    form = res["hosts"]["lab1"]["preflight"]["form"]
    assert "container" in form["kinds"] and form["root"] is False, form
    assert form["kernel_log"]["readable"] is False and form["shm"]["bytes"] == 64 * 2**20, form
    r = by_key(res)
    shm = r[("shm_size", "lab1")]
    assert shm["status"] == "FAIL" and "64" in shm["message"] and "--shm-size" in shm["message"], shm
    assert r[("shm_size", "lab2")]["status"] == "PASS", r[("shm_size", "lab2")]
    assert res["verdict"] == "FAIL" and rc == 1, out[-3000:]


def test_what_the_container_cannot_show_is_listed_never_pass_never_error(run):
    rc, res, out, plan, rd = run
    r = by_key(res)
    xid, dcgm = r[("xid_history", "lab1")], r[("dcgm_diag", "lab1")]
    assert xid["status"] == "UNSEEN" and "XID log" in xid["ask"] and "not root" in xid["why"], xid
    assert dcgm["status"] == "UNSEEN" and "DCGM" in dcgm["ask"], dcgm
    # lab2 is root: its kernel log is read (judged, or an ERROR where this machine's log is short)
    assert r[("xid_history", "lab2")]["status"] != "UNSEEN", r[("xid_history", "lab2")]
    said = "cannot show: ask the provider for"
    verdict_line = out[out.index("= signoff ="):].splitlines()[1]
    assert verdict_line.startswith("verdict: FAIL") and said in verdict_line, verdict_line
    md = (rd / "report.md").read_text()
    assert "XID log" in md and "cannot show" in md, md[:3000]


def test_plan_says_the_form_and_the_fail_before_anything_runs(run):
    rc, res, out, plan, rd = run
    text = plan.stdout + plan.stderr
    assert plan.returncode == 6, text[-3000:]
    lab1 = [ln for ln in text.splitlines() if "lab1" in ln or "container" in ln]
    assert any("container" in ln for ln in lab1), text[-3000:]
    assert "shm_size FAILs" in text and "UNSEEN" in text, text[-3000:]
    assert not any(os.path.exists(f["workdir"]) for f in res["hosts"].values() if "workdir" in f)
