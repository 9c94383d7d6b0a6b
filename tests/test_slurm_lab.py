"""signoff inside a real Slurm allocation (tests/slurmlab.py on a tests/lab.py lab): probes
and the multi-node all-reduce launched by srun, nodes down or dying, Ctrl-C."""

from __future__ import annotations

import pytest
from lab import Lab
from slurmlab import SlurmLab

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
