"""Inter-node checks for real between lab hosts: iperf3 and the built-in probe over veth,
one link shaped with tc, a gloo all-reduce across hosts, a hung and a dying host."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key, leftovers

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
LAB = str(ROOT / "tests" / "profiles" / "lab.yaml")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=3) as lab:
        yield lab


def inventory(lab, tmp_path, **overrides):
    per_host = {h.name: {"data_iface": h.veth_host, **overrides.get(h.name, {})} for h in lab.hosts}
    return str(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides=per_host))


def script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/bash\n" + body + "\n")
    p.chmod(0o755)
    return str(p)


def test_healthy_lab_passes_with_iperf3(lab, tmp_path):
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "--inventory", inventory(lab, tmp_path),
                          "--profile", LAB)
    assert rc == 0, out
    r = by_key(res)
    for h in ("lab1", "lab2", "lab3"):
        assert r[("nic_link", h)]["status"] == "PASS" and r[("nic_link", h)]["measured"] == 10.0
    pairs = {k[1]: v for k, v in r.items() if k[0] == "net_pair_bandwidth"}
    assert set(pairs) == {"lab1->lab2", "lab2->lab3", "lab3->lab1"}  # a ring
    for v in pairs.values():
        assert v["details"]["tool"] == "iperf3" and v["details"]["line_rate_gbps"] == 10.0
        assert v["measured"] == pytest.approx(v["details"]["gbps"] / 10, abs=1e-3)
    assert r[("multinode_allreduce", "all hosts")]["status"] == "PASS"


def test_builtin_probe_measures_when_asked(lab, tmp_path):
    prof = tmp_path / "builtin.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 0.3, unit: x line rate, "
                    "streams: 4, duration: 2, tool: builtin, source: 'as lab.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "pair", "--inventory",
                          inventory(lab, tmp_path), "--profile", str(prof))
    assert rc == 0, out
    assert {v["details"]["tool"] for k, v in by_key(res).items()} == {"builtin"}


def test_shaped_link_fails_that_pair_and_bisection_names_the_host(lab, tmp_path):
    h3 = lab.host("lab3")
    tc = ["ip", "netns", "exec", h3.netns, "tc", "qdisc"]
    # lab3's sending side only: lab3->lab1 is slow, lab2->lab3 is not
    subprocess.run([*tc, "add", "dev", h3.veth_host, "root", "tbf", "rate", "400mbit",
                    "burst", "64kb", "latency", "50ms"], check=True)
    try:
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "--inventory",
                              inventory(lab, tmp_path), "--profile", LAB)
    finally:
        subprocess.run([*tc, "del", "dev", h3.veth_host, "root"], check=True)
    assert rc == 1
    r = by_key(res)
    assert r[("net_pair_bandwidth", "lab1->lab2")]["status"] == "PASS"
    assert r[("net_pair_bandwidth", "lab2->lab3")]["status"] == "PASS"
    slow = r[("net_pair_bandwidth", "lab3->lab1")]
    assert slow["status"] == "FAIL" and slow["measured"] < 0.05
    assert "of 10 Gb/s line rate, fraction = 0.0" in slow["message"]
    assert "expected >= 0.3 x line rate" in slow["message"]
    multi = r[("multinode_allreduce", "all hosts")]
    assert multi["status"] == "FAIL"
    assert "likely cause: slow host lab3 (pairwise busbw GB/s: lab1->lab2" in multi["message"]
    assert multi["details"]["bisection"]["slow_hosts"] == ["lab3"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "lab3-&gt;lab1" in html and "slow host lab3" in html
    assert "% of line rate" in html
    assert "Bisection (2-host all-reduce per ring pair): slow <b>lab3</b>" in html


def test_hung_host_is_named_and_nothing_hangs(lab, tmp_path):
    # sysinfo runs; the all-reduce hangs before it starts
    hang = script(tmp_path, "hangpython", f'[ "$1" = allreduce.py ] && exec -a signoff-nethang-{os.getpid()} '
                  f'sleep 600; exec {sys.executable} "$@"')
    t0 = time.time()
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode", "--inventory",
                          inventory(lab, tmp_path, lab2={"python": hang}), "--profile", LAB,
                          "--collective-timeout", "10")
    assert time.time() - t0 < 120
    m = by_key(res)[("multinode_allreduce", "all hosts")]
    assert m["status"] == "ERROR"
    assert "caused by lab2:" in m["message"] and "lab2: the probe never started" in m["message"]
    left = subprocess.run(["pgrep", "-f", f"signoff-nethang-{os.getpid()}"],
                          capture_output=True, text=True).stdout
    assert left == "" and leftovers(res) == [], f"ranks left running: {left} {leftovers(res)}"


def test_host_dying_mid_collective_is_named(lab, tmp_path):
    # lab3's ranks die (SIGKILL) 4 s into the all-reduce, after joining
    die = script(tmp_path, "diepython", f'[ "$1" = allreduce.py ] && exec timeout -s KILL 4 '
                 f'{sys.executable} "$@"; exec {sys.executable} "$@"')
    prof = tmp_path / "long.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n  multinode_allreduce_busbw: {{min: 0.1, unit: GB/s, "
                    "size: 64M, sweep: [1M, 256M], source: 'as lab.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode", "--inventory",
                          inventory(lab, tmp_path, lab3={"python": die}), "--profile", str(prof),
                          "--collective-timeout", "60")
    m = by_key(res)[("multinode_allreduce", "all hosts")]
    assert m["status"] == "ERROR"
    assert "caused by lab3:" in m["message"], m["message"]
    assert leftovers(res) == [], "ranks left running"
