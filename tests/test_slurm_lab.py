"""signoff inside a real Slurm allocation (tests/slurmlab.py on a tests/lab.py lab): probes
and the multi-node all-reduce launched by srun, nodes down or dying, Ctrl-C."""

from __future__ import annotations

import json
import sys

import pytest
from lab import Lab
from slurmlab import SlurmLab
from test_lab_acceptance import ROOT, accept, by_key

pytestmark = [pytest.mark.lab, pytest.mark.slurm]  # skipped without root, sshd, Slurm: conftest.py


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("slurmlab"), n_hosts=3) as lab:
        s = SlurmLab(lab)
        with s:
            yield s
        left = s.daemons()
        assert not left, f"Slurm daemons left running after the lab: {left}"


def test_tasks_run_inside_each_hosts_namespace(slurm):
    r = slurm.run("srun", "-N3", "--label", "hostname", "-I")
    assert r.returncode == 0, r.stderr
    got = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in r.stdout.splitlines()}
    assert sorted(got.values()) == sorted(h.address for h in slurm.lab.hosts), r.stdout


LAB = str(ROOT / "tests" / "profiles" / "lab.yaml")


def inventory(slurm, tmp_path, **overrides):
    """The lab hosts' settings (data interface, Python); Slurm names the hosts and runs the commands."""
    lab = slurm.lab
    per_host = {h.name: {"data_iface": h.veth_host, **overrides.get(h.name, {})} for h in lab.hosts}
    return str(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides=per_host))


def in_allocation(slurm, tmp_path, *args, nodes=3, timeout=300, first=":"):
    """`pytest acceptance/ --launcher slurm` inside `salloc -N nodes` (--no-kill: a node set DOWN
    or dying does not end the allocation), after the shell command `first`."""
    return accept(tmp_path, "--launcher", "slurm", *args, timeout=timeout, env=slurm.env,
                  prefix=("salloc", f"-N{nodes}", "--no-kill", "--quiet", "sh", "-c", f'{first} && exec "$@"',
                          "sh"))


def test_acceptance_suite_passes_over_srun(slurm, tmp_path):
    rc, res, out = in_allocation(slurm, tmp_path, "--inventory", inventory(slurm, tmp_path), "--profile", LAB)
    assert rc == 0, out
    assert res["verdict"] == "PASS"
    launcher = res["meta"]["launcher"]
    assert launcher["launcher"] == "slurm" and launcher["job"].isdigit() and launcher["nodes"] == "lab[1-3]"
    # one step per probe and phase across the nodes, not one per host and command
    assert launcher["steps"] and all(s.startswith(launcher["job"] + ".") for s in launcher["steps"])
    assert len(launcher["steps"]) < 40, launcher["steps"]
    assert {r["launcher"] for r in res["results"]} == {"srun"}
    multi = by_key(res)[("multinode_allreduce", "all hosts")]
    assert multi["status"] == "PASS" and multi["details"]["launched"] == "srun: 3 nodes x 1 tasks in one step"
    html = (tmp_path / "report" / "report.html").read_text()
    assert f"Slurm job {launcher['job']}" in html


def test_node_down_errors_by_name_with_slurms_reason(slurm, tmp_path):
    try:  # DOWN once the allocation has it (an idle DOWN node would not be allocated)
        rc, res, out = in_allocation(slurm, tmp_path, "acceptance/test_versions.py", "--inventory",
                                     inventory(slurm, tmp_path), "--profile", LAB,
                                     first="scontrol update nodename=lab3 state=down "
                                           "reason=signoff-test-broken-psu")
    finally:
        slurm.run("scontrol", "update", "nodename=lab3", "state=resume")
    assert rc == 1, out
    r = by_key(res)
    for h in ("lab1", "lab2"):
        assert r[("version_parity", h)]["status"] == "PASS", r[("version_parity", h)]
    down = [v for (c, h), v in r.items() if h == "lab3"]
    assert down and all(v["status"] == "ERROR" for v in down)
    assert all("Slurm reports node lab3 DOWN" in v["message"] and "signoff-test-broken-psu" in v["message"]
               for v in down), down[0]["message"]
    assert "signoff-test-broken-psu" in json.dumps(res["slurm"])  # named before the run
    assert "Slurm reports node lab3 DOWN" in (tmp_path / "report" / "report.html").read_text()
    slurm.wait_idle(["lab3"])
