"""The hand-off files (exclude.hostlist, drain.sh, report.md's By host) of real runs on the lab's
hosts (issue 51 items 12 and 15): a run's own ERROR (a profile of another class, a run lock another
run holds) drains no host and is one line; a check across hosts that FAILs naming one host
(gloo leaving by another interface than its data interface) drains that host."""

from __future__ import annotations

import subprocess
import sys

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key

from signoff import fleet, inventory

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
LAB = str(ROOT / "tests" / "profiles" / "lab.yaml")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=4) as lab:
        yield lab


def hand_off(tmp_path) -> tuple[str, str, str]:
    rd = tmp_path / "report"
    return tuple((rd / name).read_text() for name in ("exclude.hostlist", "drain.sh", "report.md"))


def fixes(md: str) -> list[str]:
    """report.md's To fix lines."""
    part = md.split("## To fix", 1)[-1].split("\n## ", 1)[0]
    return [ln for ln in part.splitlines() if ln.startswith("- ")]


def test_a_profile_of_another_class_drains_no_host_and_is_one_line(lab, tmp_path):
    """`--profile a100-8x-nvlink` on the lab's GPU-less hosts: every check ERRORs for the profile
    (no host of its class); lab[1-4] were drained with 50 lines of 'reseat or replace the GPU' each,
    under 6 cover lines, on 83b76b7."""
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "a100-8x-nvlink")
    assert rc == 2 and res["verdict"] == "ERROR", out
    hostlist, drain, md = hand_off(tmp_path)
    assert hostlist == "" and "scontrol" not in drain, drain
    assert "reseat or replace" not in md and "exclude or drain" not in md and "No host to exclude." in md, md
    lines = fixes(md)
    assert len(lines) == 1 and "on 4 hosts lab\\[1-4\\]: --profile a100-8x-nvlink: no host is of a variant" \
        in lines[0], lines
    assert "ERROR on every host alike (lab\\[1-4\\]): --profile a100-8x-nvlink" in md, md
    term = [ln for ln in out.splitlines() if ln.startswith("  ERROR ")]
    assert len(term) == 1, term


def test_a_lock_another_run_holds_on_every_host_drains_no_host(lab, tmp_path):
    """Another run (a fleet of this process) holds every host's run lock: no host answered, each
    naming its own lock; one line, no host drained (lab[1-4] 'did not answer' and 9 lines before)."""
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
    other = fleet.Fleet(inventory.load(inv), run="20261207T000000Z-other-1")
    try:
        for s in other.sessions.values():
            s.take_lock(other.run, other.owner)
        rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "local")
    finally:
        other.close()
    assert rc == 2 and res["verdict"] == "ERROR", out
    assert all("in use by another signoff run" in f["error"] for f in res["hosts"].values()), res["hosts"]
    hostlist, drain, md = hand_off(tmp_path)
    assert hostlist == "" and "scontrol" not in drain, drain
    by_host = md.split("## By host", 1)[1]
    assert "did not answer" not in by_host and "No host to exclude." in by_host, md
    lines = fixes(md)
    assert len(lines) == 1 and "on 4 hosts lab\\[1-4\\]: in use by another signoff run: run " \
        "20261207T000000Z-other-1" in lines[0], lines


def test_gloo_leaving_one_host_by_another_interface_drains_that_host(lab, tmp_path):
    """lab2's data interface dat0 holds the address gloo binds there, but its connections to the
    peers leave by its veth: multinode_transport FAILs naming lab2, which is drained (no By host
    section, nothing drained, on 83b76b7); the others' connections are on their data interfaces."""
    h = lab.host("lab2")
    ns = ["ip", "-n", h.netns]
    subprocess.run([*ns, "link", "add", "dat0", "type", "veth", "peer", "name", "dat0p"], check=True)
    try:
        subprocess.run([*ns, "addr", "add", "198.18.1.1/32", "dev", "dat0"], check=True)
        for end in ("dat0", "dat0p"):
            subprocess.run([*ns, "link", "set", end, "up"], check=True)
        for p in lab.hosts:  # the peers reach lab2's data address over the lab's bridge
            if p is not h:
                subprocess.run(["ip", "-n", p.netns, "route", "add", "198.18.1.1/32", "dev", p.veth_host],
                               check=True)
        ifaces = {p.name: {"data_iface": "dat0" if p is h else p.veth_host} for p in lab.hosts}
        inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides=ifaces)
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode_transport",
                              "--inventory", str(inv), "--profile", LAB)
    finally:
        subprocess.run([*ns, "link", "del", "dat0"], check=False)
        for p in lab.hosts:
            subprocess.run(["ip", "-n", p.netns, "route", "del", "198.18.1.1/32"], check=False,
                           capture_output=True)
    m = by_key(res)[("multinode_transport", "all hosts")]
    assert rc == 1 and m["status"] == "FAIL", out
    assert list(m["details"]["at_fault"]) == ["lab2"], m
    hostlist, drain, md = hand_off(tmp_path)
    assert hostlist == "lab2\n", (hostlist, m["message"])
    assert 'scontrol update nodename="lab2" state=drain reason="signoff ' in drain, drain
    assert "- lab2: gloo's connection to " in md and "not the data interface dat0" in md, md
