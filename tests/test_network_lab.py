"""Inter-node checks for real between lab hosts: iperf3 and the built-in probe over veth,
one link shaped with tc, a gloo all-reduce across hosts, a hung, a dying and a dead host;
ib_write_bw through a fake (no InfiniBand card here)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, _only, accept, by_key, leftovers

from signoff import calibrate, profiles
from signoff import inventory as inv_mod
from signoff.fleet import Fleet, ProbeError
from signoff.network import route
from signoff.results import load as load_results
from signoff.units import figure

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
        assert v["measured"] == v["details"]["gbps"] and v["unit"] == "Gb/s"  # veth: no real line rate
        assert v["details"]["fraction"] is None  # of a nominal speed: not shown
    assert r[("multinode_allreduce", "all hosts")]["status"] == "PASS"
    # the same run's transport: gloo's connections, read from each rank's sockets, leave by the
    # inventory's data interface (network/route.py)
    tr = r[("multinode_transport", "all hosts")]
    assert tr["status"] == "PASS" and tr["measured"] == "gloo/TCP over the data interface", tr
    used = tr["details"]["used"]["the run: " + route.EXPECTED["data_iface"]]
    for h in lab.hosts:
        peers = {p.address for p in lab.hosts if p is not h}
        assert set(used[h.name][f"gloo/TCP over {h.veth_host}"]) == peers, used  # a connection to each
    # the collectives across the hosts in the all-reduce's run (one rendezvous): the all-to-all over
    # every host and each rail's (one gloo rank a host: rail 0 holds them all), each exact
    a2a = r[("multinode_alltoall_busbw", "all hosts")]
    assert a2a["status"] == "PASS" and a2a["measured"] > 0.02 and a2a["unit"] == "GB/s", a2a
    assert [x["bytes"] for x in a2a["details"]["rows"]] == [256 << 10, 512 << 10, 1 << 20], a2a
    rail = r[("rail_alltoall_busbw", "all hosts")]
    assert rail["status"] == "PASS" and list(rail["details"]["rails"]) == ["0"], rail
    # and every other collective over every host in that run (issue 44: each inside and across hosts)
    for c in ("multinode_allgather_busbw", "multinode_reduce_scatter_busbw", "multinode_sendrecv_busbw"):
        v = r[(c, "all hosts")]
        assert v["status"] == "PASS" and v["measured"] > 0.015 and v["unit"] == "GB/s", v
        # at the size judged alone (--op-size): the all-to-all is the one swept across nodes
        assert [x["bytes"] for x in v["details"]["rows"]] == [1 << 20], v
    ok = r[("multinode_collectives_correct", "all hosts")]
    assert ok["status"] == "PASS" and set(ok["details"]["ops"]) == {"allgather", "reduce_scatter", "alltoall",
                                                                     "sendrecv"}, ok
    assert ok["measured"] == "9/9 sizes exact across 3 hosts", ok  # all-to-all and its rail 3 sizes each
    # calibrate reads the check's records as its criterion's (signoff.catalog.criterion_of)
    crit, skipped = calibrate.calibrate(res, profiles.load(LAB), 0.9)
    multi = r[("multinode_allreduce", "all hosts")]["measured"]
    assert "multinode_allreduce_busbw" not in skipped and "net_pair_bandwidth" in crit, skipped
    src = crit["multinode_allreduce_busbw"]["source"]
    assert f"the slowest {multi:g} GB/s on all hosts x margin 0.9" in src, src


def test_gloo_routed_off_the_data_interface_fails_naming_it(lab, tmp_path):
    """The data interface holds the address gloo binds, but a route sends the traffic to the peers'
    data addresses out another interface (here: the data addresses on an interface of their own,
    /32 routes to them over the lab's veth): the all-reduce runs, and multinode_transport FAILs
    naming the host, the interface the connection left by and the data interface."""
    data = {h.name: f"198.18.{lab.hosts.index(h)}.1" for h in lab.hosts}  # RFC 2544 test range
    for h in lab.hosts:
        ns = ["ip", "-n", h.netns]
        # a veth pair inside the host (no dummy module here): dat0 holds the data address
        subprocess.run([*ns, "link", "add", "dat0", "type", "veth", "peer", "name", "dat0p"], check=True)
        subprocess.run([*ns, "addr", "add", f"{data[h.name]}/32", "dev", "dat0"], check=True)
        for end in ("dat0", "dat0p"):
            subprocess.run([*ns, "link", "set", end, "up"], check=True)
        for p in lab.hosts:
            if p is not h:
                subprocess.run([*ns, "route", "add", f"{data[p.name]}/32", "dev", h.veth_host], check=True)
    try:
        inv = inventory(lab, tmp_path, **{h.name: {"data_iface": "dat0"} for h in lab.hosts})
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode_transport",
                              "--inventory", inv, "--profile", LAB)
    finally:
        for h in lab.hosts:  # the lab's other tests use the veths alone
            subprocess.run(["ip", "-n", h.netns, "link", "del", "dat0"], check=False)
            for p in lab.hosts:
                subprocess.run(["ip", "-n", h.netns, "route", "del", f"{data[p.name]}/32"], check=False,
                               capture_output=True)
    assert rc != 0, out
    m = by_key(res)[("multinode_transport", "all hosts")]
    assert m["status"] == "FAIL", m
    for h in lab.hosts:
        # a peer's connection comes from its veth's address (it binds none), its own from dat0's
        assert re.search(rf"{h.name}: gloo's connection to \S+ leaves by {h.veth_host}"
                         rf"( \(its address \S+ is \S+'s\))?, not the data interface dat0", m["message"]), m
    assert f"(its address {data['lab1']} is dat0's)" in m["message"], m["message"]
    assert "a route sends the traffic" in m["message"], m["message"]


def test_a_host_corrupting_its_all_gather_fails_exactness_naming_it_injected(lab, tmp_path):
    """No NIC here corrupts data: INJECTED, lab2's Python is a wrapper that sets the probe's
    SIGNOFF_WRONG_OP=allgather for the collective's probe alone, so lab2's rank leaves its
    all-gather output off by one after every run. multinode_collectives_correct FAILs naming the
    all-gather's size and lab2 (rank 1 of 3), the other collectives exact."""
    py = script(tmp_path, "corrupting-python",
                f'[ "$1" = allreduce.py ] && export SIGNOFF_WRONG_OP=allgather\nexec {sys.executable} "$@"')
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode_collectives_correct",
                          "--inventory", inventory(lab, tmp_path, lab2={"python": py}), "--profile", LAB)
    assert rc == 1, out
    c = by_key(res)[("multinode_collectives_correct", "all hosts")]
    assert c["status"] == "FAIL" and c["measured"] == "8/9 sizes exact across 3 hosts", c
    assert "wrong all-gather at 1M on lab2 (rank 1)" in c["message"], c["message"]
    assert "reduce-scatter at" not in c["message"] and "all-to-all at" not in c["message"], c["message"]
    assert "likely cause: host lab2: its NIC, link or GPU corrupting data" in c["message"], c["message"]
    assert c["details"]["wrong_hosts"] == ["lab2"]


def test_builtin_probe_measures_when_asked(lab, tmp_path):
    prof = tmp_path / "builtin.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 1, unit: Gb/s, "
                    "streams: 4, duration: 2, tool: builtin, source: 'as lab.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "pair", "--inventory",
                          inventory(lab, tmp_path), "--profile", str(prof))
    assert rc == 0, out
    assert {v["details"]["tool"] for k, v in by_key(res).items()} == {"builtin"}


def test_shaped_link_fails_that_pair_after_its_attempts_and_bisection_names_the_host(lab, tmp_path):
    """The retry policy (issue 51 item 16): the slow pair (0.1 of its floor) and the all-reduce
    (a third of its floor) are not measured again: their figures are far beyond max_spread of the
    floor, so no attempt that agrees could pass; each FAILs saying why, and the bisection still
    names the host. A pair that passes is measured once."""
    prof = tmp_path / "twice.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n"
                    "  net_pair_bandwidth: {min: 1, unit: Gb/s, streams: 4, duration: 2, attempts: 2, "
                    "source: 'as lab.yaml'}\n"
                    "  multinode_allreduce_busbw: {min: 0.04, unit: GB/s, size: 256K, sweep: [256K, 256K], "
                    "attempts: 2, source: 'as lab.yaml'}\n")
    h3 = lab.host("lab3")
    tc = ["ip", "netns", "exec", h3.netns, "tc", "qdisc"]
    # lab3's sending side only: lab3->lab1 is slow, lab2->lab3 is not
    subprocess.run([*tc, "add", "dev", h3.veth_host, "root", "tbf", "rate", "100mbit",
                    "burst", "64kb", "latency", "50ms"], check=True)
    try:
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "--inventory",
                              inventory(lab, tmp_path), "--profile", str(prof))
    finally:
        subprocess.run([*tc, "del", "dev", h3.veth_host, "root"], check=True)
    assert rc == 1
    r = by_key(res)
    for p in ("lab1->lab2", "lab2->lab3"):
        ok = r[("net_pair_bandwidth", p)]
        assert ok["status"] == "PASS" and "attempts" not in ok["details"], ok  # measured once
    slow = r[("net_pair_bandwidth", "lab3->lab1")]
    assert slow["status"] == "FAIL" and "attempts" not in slow["details"] and slow["measured"] < 0.5, slow
    assert re.search(r"lab3->lab1: iperf3 throughput \(4 streams, measured once: [\d.]+ % below the floor 1 "
                     r"Gb/s, beyond max_spread 10 %: no attempt that agrees with it could pass\)",
                     slow["message"]), slow["message"]
    once = f"not measured again: attempt 1 read {figure(slow['measured'])} Gb/s, "
    assert slow["details"]["retry"][0].startswith(once), slow
    assert "expected >= 1 Gb/s" in slow["message"]
    multi = r[("multinode_allreduce", "all hosts")]
    assert multi["status"] == "FAIL" and multi["details"]["attempts"] is None, multi
    assert "measured once: " in multi["message"] and "below the floor 0.04 GB/s" in multi["message"], multi
    assert multi["details"]["retry"][0].startswith("not measured again: attempt 1 read "), multi
    assert "likely cause: slow host lab3 (pairwise busbw GB/s: lab1->lab2" in multi["message"]
    assert multi["details"]["bisection"]["slow_hosts"] == ["lab3"]
    # the all-to-all over every host and the rail split name the slowed host from the same pairs
    a2a = r[("multinode_alltoall_busbw", "all hosts")]
    assert a2a["status"] == "FAIL" and a2a["measured"] < 0.02, a2a
    assert "likely cause: slow host lab3 (pairwise all-to-all busbw GB/s: lab1->lab2" in a2a["message"], a2a
    rail = r[("rail_alltoall_busbw", "all hosts")]
    assert rail["status"] == "FAIL" and rail["details"]["bisection"]["0"]["slow_hosts"] == ["lab3"], rail
    assert "rail 0 (local rank 0 of every node): " in rail["message"], rail["message"]
    assert "slow host lab3 (pairwise rail busbw GB/s:" in rail["message"], rail["message"]
    # all-gather, reduce-scatter and send/recv over every host, from the same run and pairs
    for c, what in (("multinode_allgather_busbw", "all-gather"), ("multinode_sendrecv_busbw", "send/recv"),
                    ("multinode_reduce_scatter_busbw", "reduce-scatter")):
        v = r[(c, "all hosts")]
        assert v["status"] == "FAIL" and v["measured"] < 0.04, v
        assert f"3-host {what} busbw at 256K (3 ranks, gloo)" in v["message"], v["message"]
        # named by the all-reduce's bisection (the pairs' 2-host all-reduces, cached: no run more)
        assert "likely cause: slow host lab3 (pairwise all-reduce busbw GB/s: lab1->lab2" in v["message"], v
    assert r[("multinode_collectives_correct", "all hosts")]["status"] == "PASS"  # slow, still exact
    html = (tmp_path / "report" / "report.html").read_text()
    assert "lab3-&gt;lab1" in html and "slow host lab3" in html
    assert "collectives across nodes beside the all-reduce" in html  # the all-to-all's curves drawn
    assert "<td>reduce-scatter</td><td><b>FAIL</b></td>" in html  # each collective's verdict in the section
    assert "% of line rate" in html
    assert "Bisection (2-host all-reduce per ring pair): slow <b>lab3</b>" in html
    assert "measured again after the first pass, in disjoint rounds, up to 2 attempts in all" in html
    # the provider's page (issue 45 item 6): the cover's per-host section names lab3 and what to do,
    # the ring's slow pair its side at fault (the bisection names lab3), the exclude list lab3 alone
    md = (tmp_path / "report" / "report.md").read_text()
    assert re.search(r"- lab3: transmit side slow on every pair it sends \(lab3->lab1 0\.\d+ Gb/s; expected "
                     r">= 1 Gb/s\): check its NIC, cable or switch port", md), md
    assert "By host</h3>" in html and "lab3: transmit side slow on every pair it sends" in html
    assert "the side at fault: lab3's transmit" in md, md
    assert (tmp_path / "report" / "exclude.hostlist").read_text() == "lab3\n"
    assert 'scontrol update nodename="lab3" state=drain reason="signoff ' in \
        (tmp_path / "report" / "drain.sh").read_text()


def test_baseline_names_the_pair_shaped_since_as_regressed(lab, tmp_path):
    """Judged under a floor the shaped pair still clears, the run PASSes, yet its regression is
    in the terminal and --fail-on-regression fails the run (README: CI recipe)."""
    inv = inventory(lab, tmp_path)
    rc, before, out = accept(tmp_path / "before", "acceptance/test_network.py", "-k", "pair",
                             "--inventory", inv, "--profile", LAB)
    assert by_key(before)[("net_pair_bandwidth", "lab3->lab1")]["measured"] > 1, out
    low = tmp_path / "low.yaml"
    low.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 0.01, unit: Gb/s, streams: 4, "
                   "duration: 2, source: 'test: below a 100 Mbit/s link'}\n")
    h3 = lab.host("lab3")
    tc = ["ip", "netns", "exec", h3.netns, "tc", "qdisc"]
    subprocess.run([*tc, "add", "dev", h3.veth_host, "root", "tbf", "rate", "100mbit",
                    "burst", "64kb", "latency", "50ms"], check=True)
    try:
        rc, res, out = accept(tmp_path / "after", "acceptance/test_network.py", "-k", "pair",
                              "--inventory", inv, "--profile", str(low), "--baseline",
                              str(tmp_path / "before" / "report" / "results.json"), "--fail-on-regression")
    finally:
        subprocess.run([*tc, "del", "dev", h3.veth_host, "root"], check=True)
    assert res["verdict"] == "PASS" and rc == 1 and res["meta"]["exit_code"] == 1, out
    said = r"(?m)^  REGRESSED net_pair_bandwidth on lab3->lab1: [\d.]+ Gb/s vs [\d.]+ before"
    assert re.search(said, out), out  # in the terminal, not only report.md
    assert "baseline warning: its profile is lab, this run's low" in out
    assert "Failed on regression: verdict PASS, but " in out
    base = res["meta"]["baseline"]
    assert base["run"] == before["meta"]["run"] and base["tolerance"] == 0.05 and base["compared"] == 3
    reg = {(x["criterion"], x["host"]): x for x in base["regressions"]}
    slow = reg[("net_pair_bandwidth", "lab3->lab1")]
    assert slow["change_pct"] < -50 and slow["baseline"] > 1 > slow["measured"], slow
    assert base["regressions"][0]["host"] == "lab3->lab1"  # the worst first
    assert base["appeared"] == [] and base["vanished"] == []
    html = (tmp_path / "after" / "report" / "report.html").read_text()
    assert "<b>REGRESSED</b> <b>net_pair_bandwidth</b> on lab3-&gt;lab1: " in html
    md = (tmp_path / "after" / "report" / "report.md").read_text()
    assert "- **REGRESSED** `net_pair_bandwidth` on lab3->lab1: " in md


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


def _running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def test_ctrl_c_during_a_hung_multinode_allreduce_ends_the_run_within_seconds(lab, tmp_path):
    """The collective runs in threads; leaving their pool on Ctrl-C joined the ranks still
    running: a hung rank held the run until --collective-timeout + 30 s (630 s by default)."""
    marker = f"signoff-ctrlc-{os.getpid()}"
    hang = script(tmp_path, "hangpython", f'[ "$1" = allreduce.py ] && exec -a {marker} sleep 600; '
                  f'exec {sys.executable} "$@"')
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/test_network.py", "-k", "multinode",
                          "--partial", "--report-dir", str(rd), "-p", "no:cacheprovider", "--inventory",
                          inventory(lab, tmp_path, lab2={"python": hang}), "--profile", LAB],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:  # never leave the run going: the lab's teardown would SIGKILL its SSH sessions
        deadline = time.time() + 240  # a loaded CI machine
        while time.time() < deadline and p.poll() is None and not _running(marker):
            time.sleep(0.2)
        if not _running(marker):
            p.kill()
            raise AssertionError(f"the all-reduce never started\n{p.communicate()[0]}")
        time.sleep(1)  # the other ranks wait for lab2 at the rendezvous
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)  # people press it again
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            out = ""
        took = time.monotonic() - t0
    finally:
        p.kill()
        p.wait()
    assert took < 20, f"exited {took:.0f} s after Ctrl-C\n{out}"
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"], out
    assert (rd / "report.html").exists() and (rd / "junit.xml").exists(), out
    left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
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


def test_dead_host_is_the_only_cause_and_nothing_waits_for_it(tmp_path):
    # its own lab: lab2's sshd stays down for the whole run
    with Lab(tmp_path / "lab", n_hosts=3) as dead_lab:
        dead_lab.stop_sshd("lab2")
        t0 = time.time()
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "--inventory",
                              inventory(dead_lab, tmp_path), "--profile", LAB,
                              "--collective-timeout", "120", "--connect-timeout", "5")
        took = time.time() - t0
    assert took < 100, f"the run waited for the dead host: {took:.0f} s"
    r = by_key(res)
    m = r[("multinode_allreduce", "all hosts")]
    assert m["status"] == "ERROR"
    assert m["message"].startswith("multi-node all-reduce not started; caused by lab2: lab2: unreachable: "
                                   "connection refused"), m["message"]
    assert m["message"].endswith("; not run because of it: lab1, lab3"), m["message"]
    assert m["details"]["culprits"] == ["lab2"] and m["details"]["not_run"] == ["lab1", "lab3"]
    assert m["details"]["states"]["lab1"] == "not run because of lab2"
    pairs = {k[1]: v for k, v in r.items() if k[0] == "net_pair_bandwidth"}
    for p in ("lab1->lab2", "lab2->lab3"):
        assert pairs[p]["status"] == "ERROR" and pairs[p]["message"].startswith("lab2: unreachable"), pairs[p]
    assert pairs["lab3->lab1"]["status"] == "PASS"


def test_probe_json_error_is_the_message_on_a_lab_host(lab, tmp_path):
    # allreduce.py as rank 0 on an address the host lacks: its JSON says why, stderr says "started"
    fleet = Fleet(inv_mod.load(inventory(lab, tmp_path)))
    try:
        with pytest.raises(ProbeError) as e:
            fleet.sessions["lab1"].probe("allreduce", "--nnodes", "2", "--master-addr", "192.0.2.1",
                                         "--master-port", "29999", "--nprocs", "1", timeout=120)
    finally:
        fleet.close()
    assert str(e.value).startswith("lab1: probe allreduce failed (exit 1): OSError: "), str(e.value)
    assert "Cannot assign requested address" in str(e.value)
    assert "signoff-event started node 0" in e.value.stderr


FAKE_IB = r"""# A FAKE perftest ib_write_bw: this machine has no InfiniBand card. It logs its arguments;
# the server "listens" (a marker file) only after the client has tried once, as a real
# server that starts late; the client prints perftest's table at $FAKE_IB_GBPS.
d=$FAKE_IB_DIR; last=${@: -1}
if [[ $last =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "client $*" >> $d/log
  if [ ! -e $d/listening ]; then touch $d/tried; echo "Couldn't connect to $last:29400" >&2; exit 1; fi
  echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
  echo " 65536      10000          $FAKE_IB_GBPS             $FAKE_IB_GBPS                  0.18"
  touch $d/done
else
  echo "server $*" >> $d/log
  for i in $(seq 100); do [ -e $d/tried ] && break; sleep 0.1; done; touch $d/listening
  for i in $(seq 100); do [ -e $d/done ] && break; sleep 0.1; done; rm -f $d/listening $d/tried $d/done
fi"""


def fake_sysfs(root, iface):
    """A FAKE sysfs: iface on mlx5_1 port 1, 100 Gb/s ACTIVE; mlx5_0 (perftest's default
    card) DOWN. netinfo reads it through SIGNOFF_SYSFS."""
    files = {f"class/net/{iface}/speed": "100000", f"class/net/{iface}/operstate": "up",
             f"class/net/{iface}/mtu": "2044", f"class/net/{iface}/dev_port": "0",
             "class/infiniband/mlx5_0/ports/1/rate": "100 Gb/sec (4X EDR)",
             "class/infiniband/mlx5_0/ports/1/state": "1: DOWN",
             "class/infiniband/mlx5_1/ports/1/rate": "100 Gb/sec (4X EDR)",
             "class/infiniband/mlx5_1/ports/1/state": "4: ACTIVE"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    for dev in ("mlx5_0", "mlx5_1"):
        (root / f"class/infiniband/{dev}/ports/1/link_layer").write_text("InfiniBand\n")
    (root / f"class/net/{iface}/device/infiniband/mlx5_1").mkdir(parents=True)
    return str(root)


def test_ib_write_bw_fake_measures_the_data_iface_card_and_errors_above_line_rate(lab, tmp_path):
    bindir, logdir = tmp_path / "bin", tmp_path / "ib"
    bindir.mkdir()
    logdir.mkdir()
    script(bindir, "ib_write_bw", FAKE_IB)
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_IB_DIR": str(logdir)}
    per_host = {h.name: {"env": {**env, "SIGNOFF_SYSFS": fake_sysfs(tmp_path / f"sys-{h.name}", h.veth_host),
                                 "FAKE_IB_GBPS": "250.00" if h.name == "lab3" else "95.00"}}
                for h in lab.hosts}  # lab3's client reads 2.5 x its line rate: a measuring error
    prof = tmp_path / "ib.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n"
                    "  nic_rate: {min: 100, unit: Gb/s, fabric: infiniband, ports: 2, "
                    "source: 'the fake card of this test'}\n"
                    "  net_pair_bandwidth: {min: 0.9, unit: x line rate, tool: ib_write_bw, streams: 2, "
                    "duration: 1, source: 'as h200-8x-nvlink.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "nic_link or pair", "--inventory",
                          inventory(lab, tmp_path, **per_host), "--profile", str(prof))
    r = by_key(res)
    nic = r[("nic_link", "lab1")]
    assert nic["status"] == "FAIL" and "1 of 2 expected infiniband ports up at >= 100 Gb/s" in nic["message"]
    for p in ("lab1->lab2", "lab2->lab3"):
        v = r[("net_pair_bandwidth", p)]
        assert v["status"] == "PASS", v
        assert v["measured"] == 0.95 and v["details"]["tool"] == "ib_write_bw"
        assert v["details"]["line_rate_gbps"] == 100.0
        assert set(v["details"]["rdma"].values()) == {"mlx5_1 port 1"}
    log = (logdir / "log").read_text().splitlines()
    assert log and all(" -d mlx5_1 -i 1" in ln for ln in log), log
    clients = [ln for ln in log if ln.startswith("client")]
    assert len(clients) >= 6, f"the client did not retry while its server started: {log}"
    over = r[("net_pair_bandwidth", "lab3->lab1")]
    assert over["status"] == "ERROR", over
    assert "250 Gb/s (ib_write_bw, 2 streams) is 2.5 x the 100 Gb/s line rate" in over["message"]
    assert "allowed 1.05 x" in over["message"]
    assert over["measured"] == 2.5 and over["details"]["gbps"] == 250.0  # measured, kept on an ERROR


def fake_ib_ports(root, state: str, n: int = 8):
    """A FAKE sysfs of n NDR InfiniBand cards, one port each, every one in `state` (e.g.
    "1: DOWN": cables out), and no network interface. netinfo reads it through SIGNOFF_SYSFS."""
    (root / "class/net").mkdir(parents=True)
    for i in range(n):
        port = root / f"class/infiniband/mlx5_{i}/ports/1"
        port.mkdir(parents=True)
        for f, text in (("rate", "400 Gb/sec (4X NDR)"), ("state", state), ("link_layer", "InfiniBand")):
            (port / f).write_text(text + "\n")
    return str(root)


def test_single_host_without_data_iface_judges_the_class_infiniband_ports(lab, tmp_path):
    """One host, no data_iface: an InfiniBand class's own ports (`fabric: infiniband, ports: 8`)
    are read from sysfs, not from an interface, so 0 of 8 up FAILs (it was N.A., never judged)
    and 8 of 8 up PASSes."""
    prof = tmp_path / "ib8.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n"
                    "  nic_rate: {min: 400, unit: Gb/s, fabric: infiniband, ports: 8, "
                    "source: 'the fake cards of this test'}\n")
    got = {}
    for state in ("1: DOWN", "4: ACTIVE"):
        where = tmp_path / state[3:].lower()
        where.mkdir()
        env = {"SIGNOFF_SYSFS": fake_ib_ports(where / "sys", state)}
        inv = _only(lab.write_inventory(where / "inv.yaml", python=sys.executable,
                                        overrides={"lab1": {"env": env}}), ["lab1"])
        rc, res, out = accept(where, "acceptance/test_network.py", "-k", "nic_link", "--inventory",
                              str(inv), "--profile", str(prof))
        got[state] = rc, by_key(res)[("nic_link", "lab1")], out
    rc, down, out = got["1: DOWN"]
    assert rc == 1 and down["status"] == "FAIL", out
    assert down["message"].startswith(
        "lab1: mlx5_0 port 1 1: DOWN at 400 Gb/sec (4X NDR); mlx5_1 port 1 1: DOWN at 400 Gb/sec "), down
    assert "0 of 8 expected infiniband ports up at >= 400 Gb/s" in down["message"], down
    assert len(down["details"]["infiniband"]) == 8
    assert "no data_iface" not in out
    rc, up, out = got["4: ACTIVE"]
    assert rc == 0 and up["status"] == "PASS" and up["measured"] == 400.0, out
    assert up["expected"] == "8 x infiniband port(s) up at >= 400 Gb/s", up


def test_ib_write_bw_named_by_the_profile_is_never_swapped_for_tcp(lab, tmp_path):
    # no ib_write_bw on these hosts (no fake on PATH): ERROR naming them, not a TCP figure
    prof = tmp_path / "ib.yaml"
    prof.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 0.9, unit: x line rate, "
                    "tool: ib_write_bw, streams: 2, duration: 1, source: 'as h200-8x-nvlink.yaml'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "pair", "--inventory",
                          inventory(lab, tmp_path), "--profile", str(prof))
    pairs = {k[1]: v for k, v in by_key(res).items() if k[0] == "net_pair_bandwidth"}
    assert pairs["lab1->lab2"]["message"] == ("lab1->lab2: ib_write_bw is not installed on lab1, lab2 "
                                              "(the profile's net_pair_bandwidth.tool)")
    assert {v["status"] for v in pairs.values()} == {"ERROR"}


def test_a_second_attempt_that_disagrees_fails_and_one_that_breaks_keeps_the_first(lab, tmp_path):
    """Two pairs miss their first attempt (lab2's and lab3's sending sides shaped to 100 Mbit/s),
    for real, in one run (attempts: 2). lab3->lab1 flaps: lab3's Python lifts its shaping
    before the second attempt, the best clears the floor, the two disagree: FAIL as unstable
    naming both, never a best-of PASS. lab2->lab3's second iperf3 client breaks: ERROR, the
    first attempt's figure kept in its details."""
    prof = tmp_path / "twice.yaml"
    # a floor just above the shaped 0.09-0.096 Gb/s, max_spread 30 %: the first attempt may be noise
    # (retry policy: a figure far below its floor is final, issue 51 item 16), the second is measured
    prof.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 0.1, unit: Gb/s, streams: 4, "
                    "duration: 2, attempts: 2, max_spread: 30%, source: 'as lab.yaml'}\n")
    then = {"lab3": f"tc qdisc del dev {lab.host('lab3').veth_host} root",
            "lab2": 'echo "iperf3: interrupt - the client has terminated" >&2; exit 1'}
    pythons = {}
    for name, shell in then.items():
        h = lab.host(name)
        subprocess.run(["ip", "netns", "exec", h.netns, "tc", "qdisc", "add", "dev", h.veth_host, "root",
                        "tbf", "rate", "100mbit", "burst", "64kb", "latency", "50ms"], check=True)
        done = tmp_path / f"{name}-first-attempt-done"
        body = (f'case "$1 $2" in *netpair.py\\ client)\n  if [ -e {done} ]; then {shell}; '
                f'else touch {done}; fi;;\nesac\nexec {sys.executable} "$@"')
        pythons[name] = {"python": script(tmp_path, f"{name}-python", body)}
    try:
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "pair", "--inventory",
                              inventory(lab, tmp_path, **pythons), "--profile", str(prof))
    finally:
        for name in then:
            h = lab.host(name)
            subprocess.run(["ip", "netns", "exec", h.netns, "tc", "qdisc", "del", "dev", h.veth_host, "root"],
                           capture_output=True)
    r = by_key(res)
    flap = r[("net_pair_bandwidth", "lab3->lab1")]
    first, second = flap["details"]["attempts"]
    assert first < 0.2 and second > 1, flap  # shaped, then not: the best clears the floor
    assert flap["status"] == "FAIL" and "unstable: 2 attempts gave" in flap["message"], flap
    assert "> max_spread 30 %" in flap["message"], flap["message"]
    assert flap["details"]["retry"][0].startswith("attempt 2 of 2: attempt 1 read "), flap
    broke = r[("net_pair_bandwidth", "lab2->lab3")]
    assert broke["status"] == "ERROR", broke
    first, second = broke["details"]["attempts"]
    assert 0 < first < 0.2 and second is None, broke
    assert "lab2->lab3" in (tmp_path / "report" / "report.md").read_text().split("## Measured again")[1]
    fine = r[("net_pair_bandwidth", "lab1->lab2")]
    assert fine["status"] == "PASS" and "attempts" not in fine["details"], fine


def test_a_link_flap_during_the_run_fails_that_host(lab, tmp_path):
    """lab2's data link goes down and up (for real, in its namespace) between the counters'
    first and last snapshot: its carrier_changes grew, so error_counters FAILs lab2 alone."""
    h2 = lab.host("lab2")
    link = f"ip link set dev {h2.veth_host}"
    py = script(tmp_path, "flap", f'case "$1 $2" in *sysinfo.py\\ counters)\n'
                f'  {link} down; sleep 0.3; {link} up; sleep 1;;\nesac\nexec {sys.executable} "$@"')
    rc, res, out = accept(tmp_path, "acceptance/test_health.py", "-k", "error_counters", "--inventory",
                          inventory(lab, tmp_path, lab2={"python": py}), "--profile", LAB)
    r = by_key(res)
    flap = r[("error_counters", "lab2")]
    assert flap["status"] == "FAIL", flap
    # down and up: +2, or +1 where the kernel had not counted the carrier's return yet when the
    # end snapshot read it (seen once on a loaded fresh-clone run): a flap either way
    assert re.search(rf"{h2.veth_host} carrier_changes \+[12] ", flap["message"]), flap["message"]
    assert "the link flapped" in flap["message"]
    assert r[("error_counters", "lab1")]["status"] == "PASS", r[("error_counters", "lab1")]


def speed_sysfs(root, iface, mbps):
    """A FAKE sysfs of one Ethernet port: iface up at `mbps` Mb/s (a veth reports a nominal 10000,
    not a line rate: iperf3 beats it). netinfo reads it through SIGNOFF_SYSFS."""
    for name, text in (("speed", str(mbps)), ("operstate", "up"), ("mtu", "1500")):
        (root / "class/net" / iface).mkdir(parents=True, exist_ok=True)
        (root / "class/net" / iface / name).write_text(text + "\n")
    return str(root)


def shaped(lab, rates: dict):
    """Each host's sending side limited to its rate (tc tbf on its veth), lifted on exit."""
    class Shaped:
        def __enter__(self):
            for name, rate in rates.items():
                h = lab.host(name)
                subprocess.run(["ip", "netns", "exec", h.netns, "tc", "qdisc", "add", "dev", h.veth_host,
                                "root", "tbf", "rate", rate, "burst", "512kb", "latency", "50ms"], check=True)

        def __exit__(self, *exc):
            for name in rates:
                h = lab.host(name)
                subprocess.run(["ip", "netns", "exec", h.netns, "tc", "qdisc", "del", "dev", h.veth_host,
                                "root"], capture_output=True)
    return Shaped()


def test_derived_pairs_are_judged_as_a_fraction_of_their_own_line_rate(lab, tmp_path):
    """local's derived rules (thresholds/nvidia-base.yaml) between lab hosts, for real: every host's
    data interface says 100 Mb/s (a FAKE sysfs) and sends at 100 Mbit/s (tc), lab3 at 50 Mbit/s
    (a slow path the sysfs does not show). Each pair is judged as a fraction of its own line rate,
    expected >= 0.9: lab1->lab2 and lab2->lab3 PASS near 0.95; lab3->lab1 FAILs at about half of
    it, after its attempts. nic_rate: every port at the fleet's 1 Gb/s, PASS; then lab2's port
    negotiated at 10 Mb/s FAILs lab2 alone. 100 Mbit/s, not 1 Gbit/s: a loaded 2-core machine's
    iperf3 keeps up with it (at 1 Gbit/s it measured 0.87-0.89 of the line rate under load)."""
    prof = tmp_path / "derived.yaml"
    prof.write_text("extends: local\ncriteria:\n"
                    "  net_pair_bandwidth: {streams: 4, duration: 2, attempts: 2}\n")
    fake = {h.name: {"env": {"SIGNOFF_SYSFS": speed_sysfs(tmp_path / f"sys-{h.name}", h.veth_host, 100)}}
            for h in lab.hosts}
    with shaped(lab, {"lab1": "100mbit", "lab2": "100mbit", "lab3": "50mbit"}):
        rc, res, out = accept(tmp_path / "pairs", "acceptance/test_network.py", "-k", "nic_link or pair",
                              "--inventory", inventory(lab, tmp_path, **fake), "--profile", str(prof))
    r = by_key(res)
    for h in ("lab1", "lab2", "lab3"):
        nic = r[("nic_link", h)]
        assert nic["status"] == "PASS" and nic["measured"] == 0.1, nic
        assert nic["expected"].startswith("1 ethernet port(s) up at >= 0.1 Gb/s (1 x 0.1 Gb/s, the rate 3 "
                                          "of the run's 3 up ethernet ports run at)"), nic
    for p in ("lab1->lab2", "lab2->lab3"):
        v = r[("net_pair_bandwidth", p)]
        assert v["status"] == "PASS" and v["unit"] == "x line rate", v
        assert 0.9 <= v["measured"] <= 1.0 and v["details"]["line_rate_gbps"] == 0.1, v
    slow = r[("net_pair_bandwidth", "lab3->lab1")]
    assert slow["status"] == "FAIL" and 0.3 < slow["measured"] < 0.6, slow
    assert "of its own 0.1 Gb/s line rate, fraction = " in slow["message"], slow["message"]
    assert "expected >= 0.9 x line rate (provisional threshold" in slow["message"], slow["message"]
    # a third of its floor: final at once (retry policy, issue 51 item 16)
    assert "azure_ib_write_bw_gdr.nhc" in slow["message"] and "attempts" not in slow["details"], slow
    assert "likely cause: " in slow["message"]
    iface = lab.host("lab2").veth_host
    fake["lab2"]["env"]["SIGNOFF_SYSFS"] = speed_sysfs(tmp_path / "sys-lab2-slow", iface, 10)
    rc, res, out = accept(tmp_path / "nic", "acceptance/test_network.py", "-k", "nic_link", "--partial",
                          "--inventory", inventory(lab, tmp_path, **fake), "--profile", str(prof))
    r = by_key(res)
    bad = r[("nic_link", "lab2")]
    assert bad["status"] == "FAIL" and bad["measured"] == 0.01, bad
    assert f"lab2: {iface} at 0.01 Gb/s (expected 1 ethernet port(s) up at >= 0.1 Gb/s (1 x 0.1 Gb/s, the " \
           "rate 2 of the run's 3 up ethernet ports run at)" in bad["message"], bad["message"]
    assert [r[("nic_link", h)]["status"] for h in ("lab1", "lab3")] == ["PASS", "PASS"]


def test_derived_multinode_bound_and_step_bound_state_their_figures(lab, tmp_path):
    """local's node_bound and step_bound rules between lab hosts, for real: every data interface
    says 1000 Mb/s (a FAKE sysfs), lab3 sends at 300 Mbit/s (tc). The all-reduce is judged against
    0.82 (local's, gloo over TCP) x the lowest node's min(its gloo intra-node all-reduce, 1 Gb/s / 8
    = 0.125 GB/s): FAIL, the bisection naming lab3. In the same run the step over nodes is judged
    against 0.9 x t_c / (t_c + t_ar) of its own steps and that all-reduce (cached, not run again),
    its figures stated."""
    prof = tmp_path / "derived.yaml"
    prof.write_text("extends: local\ncriteria:\n"
                    # 2 MiB: at 512 KiB a healthy pair's gloo all-reduce read 0.111 GB/s on the
                    # loaded CPU against the then 0.9 x 0.125 bound and was blamed beside lab3 (1a63379)
                    "  multinode_allreduce_busbw: {size: 2M, sweep: [2M, 2M], attempts: 1}\n"
                    # the intra-node all-reduce the bound reads, at 4 MiB: 0.25-0.47 GB/s with 4 lab
                    # hosts on 2 cores (the walk-through), 0.12 at worst beside four other workers
                    "  allreduce_busbw: {size: 4M, sweep: [1M, 4M]}\n")
    fake = {h.name: {"env": {"SIGNOFF_SYSFS": speed_sysfs(tmp_path / f"sys-{h.name}", h.veth_host, 1000)}}
            for h in lab.hosts}
    inv = inventory(lab, tmp_path, **fake)
    with shaped(lab, {"lab3": "300mbit"}):  # one run: the step's bound reuses the all-reduce
        rc, res, out = accept(tmp_path / "multi", "acceptance/test_network.py", "acceptance/test_training.py",
                              "-k", "multinode or train_scaling_nodes", "--partial", "--inventory", inv,
                              "--profile", str(prof), timeout=600)
    m = by_key(res)[("multinode_allreduce", "all hosts")]
    assert m["status"] == "FAIL" and m["unit"] == "GB/s" and m["measured"] < 0.1, m
    # the bound is the lower of the two figures the source states (the NIC's, unless the loaded
    # CPU's gloo all-reduce inside a host read less), the floor 0.82 (local's) of it
    said = re.search(r"expected >= ([\d.]+) GB/s \(provisional threshold.*source: derived: 0\.82 x "
                     r"([\d.]+) GB/s, the lowest node's bound \(lab\d: min\(intra-node all-reduce ([\d.]+) "
                     r"GB/s, data interface \w+ at 1 Gb/s / 8 = 0\.125 GB/s\)\)", m["message"])
    assert said, m["message"]
    floor, bound, intra = map(float, said.groups())
    assert bound == pytest.approx(min(intra, 0.125), abs=1e-3), m["message"]
    assert floor == pytest.approx(0.82 * bound, abs=1e-3), m["message"]
    assert "likely cause: slow host lab3" in m["message"], m["message"]
    # the all-to-all of the same run by local's nic_bound rule (gloo: 0.59), its figures stated
    a = by_key(res)[("multinode_alltoall_busbw", "all hosts")]
    assert a["status"] == "FAIL" and a["unit"] == "GB/s", a
    assert re.search(r"source: derived: 0\.59 x 0\.125 GB/s, the lowest node's bound \(lab\d: data interface "
                     r"\w+ at 1 Gb/s / 8 / 1 rank\(s\) x 3/2 nodes x \(3-1\)/3 ranks\)", a["message"]), \
        a["message"]
    assert "likely cause: slow host lab3 (pairwise all-to-all busbw" in a["message"], a["message"]
    s = by_key(res)[("train_scaling_nodes", "all hosts")]
    assert s["status"] in ("PASS", "FAIL"), s  # judged, by a figure worked out from this run
    assert re.match(r"derived: 0\.9 x [\d.]+ = t_c / \(t_c \+ t_ar\), a step that cannot overlap its "
                    r"all-reduce: t_c [\d.]+ ms, the slowest node's own step; t_ar [\d.]+ ms: [\d.]+ MB fp32 "
                    r"gradients in 1 bucket\(s\)", s["details"]["derived"]), s["details"]["derived"]


def test_derived_bound_waits_for_no_dead_host(tmp_path):
    """Under local's node_bound rule a dead host is named as under a figure: the all-reduce is not
    started, lab2 its cause, the others not run; no bound is worked out without it."""
    with Lab(tmp_path / "lab", n_hosts=3) as dead_lab:
        dead_lab.stop_sshd("lab2")
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "multinode", "--partial",
                              "--inventory", inventory(dead_lab, tmp_path), "--profile", "local",
                              "--connect-timeout", "5")
    m = by_key(res)[("multinode_allreduce", "all hosts")]
    assert m["status"] == "ERROR" and m["message"].startswith(
        "multi-node all-reduce not started; caused by lab2: lab2: unreachable: connection refused"), m
    assert m["message"].endswith("; not run because of it: lab1, lab3"), m["message"]


def test_a_half_rate_nic_at_3_hosts_fails_its_pairs_by_the_hosts_median(lab, tmp_path):
    """lab3's NIC negotiated 500 Mb/s (its FAKE sysfs) and carries that (tc both ways), the others
    1000: its two pairs reach ~0.95 of their own line rate, and 2 of the 3 pairs' figures are
    lab3's, so the pairs' median was the half rate and every pair PASSed (issue 32 item 12). The
    line rates are compared per host: lab3's pairs FAIL naming its NIC; lab1->lab2 PASSes."""
    prof = tmp_path / "derived.yaml"
    prof.write_text("extends: local\nfleet_min: 0.9  # one class of host: the fleet rule on\ncriteria:\n"
                    "  net_pair_bandwidth: {streams: 4, duration: 2, attempts: 1}\n")
    fake = {h.name: {"env": {"SIGNOFF_SYSFS": speed_sysfs(tmp_path / f"sys-{h.name}", h.veth_host,
                                                          500 if h.name == "lab3" else 1000)}}
            for h in lab.hosts}
    h3 = lab.host("lab3")
    toward = ["tc", "qdisc", "add", "dev", h3.veth_controller, "root", "tbf", "rate", "500mbit",
              "burst", "512kb", "latency", "50ms"]  # into lab3: the bridge's side of its veth
    subprocess.run(toward, check=True)
    try:
        with shaped(lab, {"lab1": "1gbit", "lab2": "1gbit", "lab3": "500mbit"}):
            rc, res, out = accept(tmp_path / "pairs", "acceptance/test_network.py", "-k", "pair",
                                  "--partial", "--inventory", inventory(lab, tmp_path, **fake),
                                  "--profile", str(prof))
    finally:
        subprocess.run(["tc", "qdisc", "del", "dev", h3.veth_controller, "root"], capture_output=True)
    r = by_key(res)
    assert "NIC line rate" not in r[("net_pair_bandwidth", "lab1->lab2")]["message"]  # (its own fraction
    # is judged as before: near 0.95, below 0.9 on a loaded machine)
    for p in ("lab2->lab3", "lab3->lab1"):
        v = r[("net_pair_bandwidth", p)]
        rates = {"lab1": 1.0, "lab2": 1.0, "lab3": 0.5}
        assert v["status"] == "FAIL" and v["details"]["nic_rates"] == rates, v
        said = "lab3's NIC line rate 0.5 Gb/s is below 0.9 x the median 1 Gb/s (0.9) of 3 hosts"
        assert said in v["message"], v["message"]
    assert rc == 1, out[-3000:]
