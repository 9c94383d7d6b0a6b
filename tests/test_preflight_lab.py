"""`signoff plan`'s preflight against lab hosts (real sshd in network namespaces): what each
host's sysinfo found, and the checks a run would ERROR or make N.A. for it, in those checks'
own words; asked beside a run that holds the hosts' run lock. Nothing is measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lab import Lab

from signoff import inventory
from signoff.fleet import Fleet

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

# The checks' own messages (signoff/network/judge.py data_address, the storage family's):
# the preflight must say the very thing the run would
NO_IFACE = ("no data interface named: set data_iface for this host in the inventory (the network "
            "is measured only on an interface you name)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=3) as lab:
        yield lab


def plan(tmp_path, *args):
    return subprocess.run([sys.executable, "-m", "signoff", "plan", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)


def test_plan_warns_of_no_data_iface_and_no_storage_path_beside_a_run_holding_the_lock(lab, tmp_path):
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)  # no data_iface, storage_path
    run = Fleet(inventory.load(inv), lock_wait=300)  # another run: it holds every host's lock
    try:
        assert all(isinstance(f, dict) for f in run.all_facts().values())
        assert all(s.lock_dir for s in run.sessions.values())
        p = plan(tmp_path, "--inventory", str(inv), "--profile", "local")
    finally:
        run.close()
    out = p.stdout
    assert p.returncode == 0, out + p.stderr
    assert "asked the hosts for their sysinfo: every host answered" in out, out[:3000]  # no lock taken
    rows = out.split("preflight (what each host's sysinfo found; nothing measured):\n", 1)[1].splitlines()
    # identical hosts fold into one line: python, torch, storage, interface, tools
    assert rows[0].startswith(f"  lab[1-3]: python {sys.executable} ({sys.version.split()[0]}), "
                              f"torch {torch.__version__} ("), rows[0]
    assert "; data_iface none;" in rows[0] and "; storage /tmp (" in rows[0] and "tools: " in rows[0]
    assert "the temp dir: no storage_path" in rows[0]
    warned = rows[rows.index("will ERROR or be N.A. in a run, or judge less than you may think "
                             "(fix before it):") + 1:]
    warned = warned[:next(i for i, r in enumerate(warned) if not r.startswith("  lab"))]
    assert (f"  lab[1-3]: nic_link, net_pair_bandwidth, multinode_allreduce, multinode_transport, "
            f"train_scaling_nodes ERROR: {NO_IFACE}") in warned, warned
    assert ("  lab[1-3]: storage_read_seq, storage_read_small, storage_read_aggregate read the temp "
            "dir /tmp (") in "\n".join(warned), warned
    assert not any("controller itself" in w for w in warned)  # hosts were given
    # the run's own judgement of the same hosts, without a run: the network family's
    from signoff.fleet import ProbeError
    from signoff.network import judge
    with pytest.raises(ProbeError) as said:
        judge.data_address("lab1", {"ethernet": []}, None)
    assert str(said.value) == f"lab1: {NO_IFACE}"
    assert list(tmp_path.iterdir()) == [tmp_path / "inv.yaml"]  # no report written


def test_plan_names_each_hosts_interface_and_only_the_hosts_without_one(lab, tmp_path):
    """lab1 names its veth (an address, no line rate): only lab[2-3] are warned, and --only
    storage leaves the network's checks out of the warnings."""
    iface = subprocess.run(["ip", "-n", lab.hosts[0].netns, "-o", "-4", "addr", "show"], capture_output=True,
                           text=True).stdout.split()[1]
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={"lab1": {"data_iface": iface}})
    out = plan(tmp_path, "--inventory", str(inv), "--profile", "local").stdout
    assert f"; data_iface {iface} (" in out and "lab[2-3]: nic_link, net_pair_bandwidth" in out, out
    assert "lab1: nic_link" not in out and "lab[1-3]: nic_link" not in out
    out = plan(tmp_path, "--inventory", str(inv), "--profile", "local", "--only", "storage").stdout
    assert "net_pair_bandwidth" not in out.split("per host")[0] and "storage_read_seq, " in out, out
