"""`signoff plan`'s preflight against lab hosts (real sshd in network namespaces): what each
host's sysinfo found, and the checks a run would ERROR or make N.A. for it, in those checks'
own words; asked beside a run that holds the hosts' run lock. Nothing is measured."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from lab import Lab

from signoff import inventory
from signoff.fleet import Fleet
from signoff.plan import PREDICTS_ERROR

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
    # the network's checks will ERROR (no data_iface): the plan's CI gate says so (issue 45)
    assert p.returncode == PREDICTS_ERROR, out + p.stderr
    gate = f"exit code {PREDICTS_ERROR}: the run would ERROR or FAIL its class guard ("
    assert out.splitlines()[-1].startswith(gate), out[-2000:]
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
    # every check whose ranks rendezvous on it: each collective across nodes, the training step's
    assert (f"  lab[1-3]: nic_link, net_pair_bandwidth, multinode_allreduce, multinode_transport, "
            f"multinode_alltoall_busbw, rail_alltoall_busbw, multinode_allgather_busbw, "
            f"multinode_reduce_scatter_busbw, multinode_sendrecv_busbw, multinode_collectives_correct, "
            f"train_scaling_nodes, train_transport ERROR: {NO_IFACE}") in warned, warned
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


def warned(out: str) -> list[str]:
    """The plan's lines under "will ERROR or be N.A.", unindented."""
    rows = out.split("will ERROR or be N.A. in a run, or judge less than you may think (fix before it):\n", 1)
    assert len(rows) == 2, out[-3000:]
    return [r[2:] for r in rows[1].splitlines() if r.startswith("  ") and not r.startswith("    ")][:20]


def test_plan_predicts_an_unreachable_host_a_missing_tool_and_a_sweep_longer_than_its_timeout(lab, tmp_path):
    """Issue 45 item 3 and item 1's estimate: each ERROR the run would give, under "will ERROR or be
    N.A.", and the plan's exit code for CI. The veths report 10 Gb/s: the sweep to 1G of 3 hosts
    takes at least 153 s of all-reduces there (network/plan.py sweep_seconds), more than a 60 s timeout."""
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={h.name: {"data_iface": h.veth_host} for h in lab.hosts},
                              extra_hosts=[{"name": "gone", "address": "127.0.0.1", "port": 1}])
    prof = tmp_path / "site.yaml"
    prof.write_text("extends: local\ndescription: ib_write_bw named, local's old sweep\ncriteria:\n"
                    "  net_pair_bandwidth: {tool: ib_write_bw}\n"
                    "  multinode_allreduce_busbw: {size: 1G, sweep: [1M, 1G]}\n")
    p = plan(tmp_path, "--inventory", str(inv), "--profile", str(prof), "--collective-timeout", "60",
             "--connect-timeout", "5")
    out = p.stdout
    assert p.returncode == PREDICTS_ERROR, out[-3000:] + p.stderr
    w = warned(out)
    assert any(re.fullmatch(r"gone: every check ERROR \(its own, its pairs', those over all hosts\): "
                            r"unreachable: .*refused.*", x) for x in w), w
    assert ("lab[1-3]: net_pair_bandwidth ERROR on its pairs: ib_write_bw is not installed here (the "
            "profile's net_pair_bandwidth.tool)") in w, w
    late = next(x for x in w if x.startswith("all hosts: multinode_allreduce, multinode_transport, "))
    # the all-to-all (and the other collectives of the run, where the sheet has their checks) too
    m = re.search(r" ERROR: the 1M-1G sweep \(and [a-z_, ]*alltoall[a-z_, ]*\) over 3 hosts \(3 ranks\) at "
                  r"10 Gb/s \(lab\d's line rate, the slowest\) takes at least (\d+) s, more than "
                  r"--collective-timeout 60 s: the run is killed at it; raise it or shorten "
                  r"multinode_allreduce_busbw.sweep$", late)
    assert m and int(m[1]) > 153, late
    assert re.search(r"(?m)^  multi-node all-reduce: the 1M-1G sweep .* at least \d+ s of "
                     r"--collective-timeout 60 s \(67 collectives a size at the full line rate\)$", out)
    n = len([x for x in w if re.search(r"ERROR|FAIL", x)])
    assert out.splitlines()[-1] == (f"exit code {PREDICTS_ERROR}: the run would ERROR or FAIL its class "
                                    f"guard ({n} lines under \"will ERROR or be N.A.\"); fix them first "
                                    f"(README: Exit codes)"), out[-800:]
    # local's own sweep fits the default timeout at these rates, and every host answers: exit 0
    inv = lab.write_inventory(tmp_path / "ok.yaml", python=sys.executable,
                              overrides={h.name: {"data_iface": h.veth_host, "storage_path": str(tmp_path)}
                                         for h in lab.hosts})
    p = plan(tmp_path, "--inventory", str(inv), "--profile", "local")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    fits = (r"(?m)^  multi-node all-reduce: the 1M-4M sweep \(and .*\) over 3 hosts \(3 ranks\) at 10 Gb/s "
            r".*: at least \d+ s of --collective-timeout 600 s")
    assert re.search(fits, p.stdout), p.stdout[-2000:]


def test_plan_and_run_agree_on_a_class_base_none_of_the_hosts_belongs_to_and_on_another_class(lab, tmp_path):
    """The run ERRORs every check when --profile's class base has no variant on the hosts (pytest
    acceptance/ wrote 171 ERRORs) and FAILs the class checks of hosts of another class: the plan
    said neither (it refused the first, exit 4; passed the second, exit 0)."""
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
    p = plan(tmp_path, "--inventory", str(inv), "--profile", "a100-8x-nvlink")
    out = p.stdout
    assert p.returncode == PREDICTS_ERROR, out[-3000:] + p.stderr
    assert "--profile a100-8x-nvlink picks no profile on these hosts (asked for their sysinfo)" in out, out
    assert any(x.startswith("all hosts: every check ERROR: --profile a100-8x-nvlink: no host is of a variant "
                            "of this class (") and "lab1: no GPU" in x for x in warned(out)), warned(out)
    p = plan(tmp_path, "--inventory", str(inv), "--profile", "h200-8x-nvlink", "--only", "gpu_health")
    assert p.returncode == PREDICTS_ERROR, p.stdout[-3000:] + p.stderr
    assert any(re.fullmatch(r"lab\[1-3\]: the class checks FAIL: GPU model none is not .*H200.*; 0 GPUs "
                            r"where 8 are expected.* \(profile h200-8x-nvlink: .*\); its measurements at "
                            r"that class's sizes NOT RUN", x) for x in warned(p.stdout)), warned(p.stdout)


def test_a_sweep_longer_than_the_collective_timeout_says_how_far_it_got_and_blames_no_host(lab, tmp_path):
    """Issue 45 item 1: the all-reduce's progress on the terminal while it runs (the size reached,
    the time against --collective-timeout), and a sweep that every rank was still running at the
    timeout ERRORs saying so: not "caused by lab1, lab2, lab3" (each host then read as broken)."""
    from test_lab_acceptance import accept, by_key, leftovers
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={h.name: {"data_iface": h.veth_host} for h in lab.hosts})
    prof = tmp_path / "long.yaml"  # the lab's floor, a sweep the veths cannot finish in 10 s
    prof.write_text(f"extends: {ROOT / 'tests/profiles/lab.yaml'}\ncriteria:\n  multinode_allreduce_busbw: "
                    "{min: 0.04, unit: GB/s, size: 1M, sweep: [1M, 4G], source: 'as lab.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "test_multinode_allreduce",
                          "--inventory", str(inv), "--profile", str(prof), "--collective-timeout", "10")
    m = by_key(res)[("multinode_allreduce", "all hosts")]
    assert m["status"] == "ERROR" and m["details"]["culprits"] == [], m
    said = re.fullmatch(r"multi-node all-reduce did not finish the 1M-4G sweep within --collective-timeout "
                        r"10 s, reached (\d+[KMG]): raise it or shorten multinode_allreduce_busbw.sweep",
                        m["message"])
    assert said, m["message"]
    assert "caused by" not in m["message"]
    # while it ran: its progress lines (a log gets one at each new size, at most every 5 s)
    assert re.search(r"(?m)^all-reduce over lab\[1-3\]: 1M-4G sweep, (reached \d+[KMG]|no size finished), "
                     r"\d+ s of --collective-timeout 10 s$", out), out[-3000:]
    assert leftovers(res) == [], "ranks left running"
