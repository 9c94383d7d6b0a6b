"""The training checks run for real: a DDP step between gloo processes on each lab host over
SSH and over both hosts at once, a DataLoader, and what fails them (a minimum above what the
machine reaches, measured again before it FAILs; learning rate 0, a loader slowed on purpose)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from lab import Lab
from test_lab_acceptance import accept, by_key
from test_network_lab import inventory

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
HOSTS = ("lab1", "lab2")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=2) as lab:
        yield lab


@pytest.fixture
def inv(lab, tmp_path):
    return inventory(lab, tmp_path)  # the step over nodes runs on each host's data_iface


def test_step_per_host_and_over_nodes_passes(lab, inv, tmp_path):
    rc, res, out = accept(tmp_path, "acceptance/test_training.py", "--inventory", str(inv),
                          "--profile", str(ROOT / "tests/profiles/lab.yaml"))
    assert rc == 0, out
    r = by_key(res)
    for h in HOSTS:
        tp = r[("train_throughput", h)]
        assert tp["status"] == "PASS" and tp["measured"] > 0, tp
        d = tp["details"]
        assert [w["ranks"] for w in d["widths"]] == [1, 2] and d["backend"] == "gloo"
        assert d["params"] == 66944 and d["formula"].startswith("6 * params * batch * seq")
        assert d["settings"]["amp_dtype"] == "none (fp32)" and d["settings"]["cpu_threads_per_rank"] == 1
        loss = r[("train_loss_falls", h)]
        assert loss["status"] == "PASS" and loss["measured"] < 0.9, loss
        sc = r[("train_scaling_host", h)]
        assert sc["status"] == "PASS" and set(sc["details"]["efficiency"]) == {"1", "2"}, sc
        head = r[("train_input_headroom", h)]
        assert head["status"] == "PASS" and head["details"]["saturates_at_workers"] in (0, 1, 2), head
        assert [x["workers"] for x in head["details"]["loader"]] == [0, 1, 2]
        link = r[("host_link_bandwidth", h)]
        assert link["status"] == "N.A." and "no NVIDIA GPU" in link["message"], link
        # the model-parallel step over the host's 2 gloo ranks (probe_parallel)
        for c in ("tp_step_tflops", "tp_comm_share", "pipeline_step_tflops", "pipeline_bubble"):
            assert r[(c, h)]["status"] == "PASS", r[(c, h)]
        tp = r[("tp_step_tflops", h)]["details"]["tensor_parallel"]
        assert tp["ranks"] == 2 and tp["allreduces_per_step"] == 4 and tp["params"] == 2 * 2 * 64 * 128, tp
        assert r[("tp_comm_share", h)]["measured"] == tp["comm_share"]
        pp = r[("pipeline_bubble", h)]["details"]["pipeline"]
        assert pp["schedule"] == "GPipe" and pp["micro_batches"] == 8 and pp["ideal_bubble"] == 0.1111, pp
        assert [s["stage"] for s in pp["stages"]] == [0, 1] and pp["delay"] is None, pp
        assert r[("pipeline_bubble", h)]["measured"] == max(s["bubble"] for s in pp["stages"])
    nodes = r[("train_scaling_nodes", "all hosts")]
    assert nodes["status"] == "PASS", nodes
    assert set(nodes["details"]["efficiency"]) == {"2"} and nodes["details"]["ranks_per_node"] == 1
    assert nodes["details"]["slowest_node"] in (*HOSTS, None)  # None: no node's own step stands out
    # the same step's transport (its run, cached): gloo's connections, read from each node's rank,
    # leave by the inventory's data interface (network/route.py, as multinode_transport)
    tr = r[("train_transport", "all hosts")]
    assert tr["status"] == "PASS" and tr["measured"] == "gloo/TCP over the data interface", tr
    for h in lab.hosts:
        peers = [p.address for p in lab.hosts if p is not h]  # one connection to the other node
        assert tr["details"]["used"][h.name] == {f"gloo/TCP over {h.veth_host}": peers}, tr


def test_unreachable_minimum_lr_zero_slow_loader_and_fake_slow_stage_fail(inv, tmp_path):
    """A FAKE slow pipeline stage: the profile's training.parallel.delay_ms sleeps 150 ms per
    micro-batch on stage 1 (signoff cannot slow one rank's process of a host for real), 20x the
    small step's own work per micro-batch: stage 0 waits on it nearly the whole step."""
    prof = tmp_path / "bad.yaml"
    prof.write_text(
        f"extends: {ROOT}/tests/profiles/lab.yaml\n"
        "training: {lr: 0, warmup: 1, steps: 2, loader: {delay_ms: 100, workers: [0], samples: 32},\n"
        "           parallel: {delay_ms: 150, delay_stage: 1}}\n"
        "criteria:\n"
        "  tp_step_tflops: {min: 1000, unit: TFLOP/s, source: 'test: beyond reach'}\n"
        "  tp_comm_share: {max: 0.0001, unit: share of the step, source: 'test: below any step'}\n"
        "  pipeline_step_tflops: {min: 1000, unit: TFLOP/s, source: 'test: beyond reach'}\n"
        "  pipeline_bubble: {max: 0.8, unit: over the ideal bubble, source: 'test: the fake stall'}\n"
        "  train_throughput: {min: 1000, unit: TFLOP/s, attempts: 2, source: 'test: beyond reach'}\n"
        "  train_scaling_host: {min: 100, unit: x linear, source: 'test: beyond linear'}\n"
        "  train_scaling_nodes: {min: 100, unit: x linear, source: 'test: beyond linear'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_training.py", "--inventory", str(inv),
                          "--profile", str(prof))
    assert rc == 1, out
    r = by_key(res)
    for h in HOSTS:
        loss = r[("train_loss_falls", h)]
        assert loss["status"] == "FAIL" and loss["measured"] == 1.0, loss
        assert f"{h}: 1 ranks: loss " in loss["message"] and "1 x the first" in loss["message"]
        assert "likely cause: the step does not learn: learning rate 0" in loss["message"]
        sc = r[("train_scaling_host", h)]
        eff = sc["details"]["efficiency"]["2"]
        assert sc["status"] == "FAIL" and sc["measured"] == eff, sc
        shown = re.search(r"= ([\d.]+) x linear, expected >= 100 x linear "
                          r"\(bad, source: test: beyond linear\)", sc["message"])
        # the figure as the message rounds it (4 significant digits: 1.0374 is 1.037)
        assert sc["message"].startswith(f"{h}: scaling efficiency at 2 ranks (") and shown, sc["message"]
        assert abs(float(shown[1]) - eff) <= 5e-4 * max(1, eff), (shown[1], eff)
        head = r[("train_input_headroom", h)]
        assert head["status"] == "FAIL" and head["measured"] < 1, head
        assert "saturating at 0 workers of" in head["message"]
        assert "likely cause: too few CPU" in head["message"]
        tp = r[("train_throughput", h)]  # far below its floor: final at once, saying why (retry policy)
        assert tp["status"] == "FAIL" and not tp["details"].get("attempts"), tp
        assert ", measured once: " in tp["message"] and "expected >= 1000 TFLOP/s" in tp["message"]
        for c, what in (("tp_step_tflops", "model TFLOP/s per rank of the tensor-parallel step"),
                        ("tp_comm_share", "share of the tensor-parallel step over 2 ranks in its"),
                        ("pipeline_step_tflops", "model TFLOP/s per rank of the GPipe pipeline over 2")):
            m = r[(c, h)]
            assert m["status"] == "FAIL" and m["message"].startswith(f"{h}: {what}"), m
        bub = r[("pipeline_bubble", h)]  # stage 0 idles while the slowed stage 1 works
        pp = bub["details"]["pipeline"]
        assert bub["status"] == "FAIL" and bub["details"]["slowest_stage"] == 1, bub
        assert pp["delay"] == {"stage": 1, "ms": 150} and bub["measured"] == pp["stages"][0]["bubble"], pp
        assert re.match(rf"{h}: bubble of the GPipe pipeline over 2 stages, 8 micro-batches: stage 0 idle "
                        r"[\d.]+ ms of [\d.]+ ms per step \(slowest stage 1\) = [\d.]+ share of the step, "
                        r"expected <= 0.9111 share of the step", bub["message"]), bub["message"]
        assert "likely cause: stage 1 is busy" in bub["message"], bub["message"]
    nodes = r[("train_scaling_nodes", "all hosts")]
    assert nodes["status"] == "FAIL" and nodes["measured"] == nodes["details"]["efficiency"]["2"], nodes
    slow = nodes["details"]["slowest_node"]
    assert (f"slowest node {slow}" if slow else "no node stands out") in nodes["message"], nodes["message"]
    assert "expected >= 100 x linear" in nodes["message"]


def test_step_routed_off_the_data_interface_fails_its_transport_naming_host_and_interface(lab, tmp_path):
    """The data interface (dat0, a veth pair inside each host) holds the address gloo binds, but
    /32 routes send the traffic to the peer's data address out the lab's veth (as
    test_network_lab's all-reduce negative): the step across nodes runs, and train_transport FAILs
    naming each host, the interface its connection left by and the data interface."""
    data = {h.name: f"198.18.{lab.hosts.index(h)}.1" for h in lab.hosts}  # RFC 2544 test range
    try:
        for h in lab.hosts:
            ns = ["ip", "-n", h.netns]
            subprocess.run([*ns, "link", "add", "dat0", "type", "veth", "peer", "name", "dat0p"], check=True)
            subprocess.run([*ns, "addr", "add", f"{data[h.name]}/32", "dev", "dat0"], check=True)
            for end in ("dat0", "dat0p"):
                subprocess.run([*ns, "link", "set", end, "up"], check=True)
            for p in (p for p in lab.hosts if p is not h):
                subprocess.run([*ns, "route", "add", f"{data[p.name]}/32", "dev", h.veth_host], check=True)
        inv = inventory(lab, tmp_path, **{h.name: {"data_iface": "dat0"} for h in lab.hosts})
        rc, res, out = accept(tmp_path, "acceptance/test_training.py", "-k", "train_transport",
                              "--inventory", str(inv), "--profile", str(ROOT / "tests/profiles/lab.yaml"))
    finally:
        for h in lab.hosts:  # the module's other tests use the veths alone
            subprocess.run(["ip", "-n", h.netns, "link", "del", "dat0"], check=False, capture_output=True)
            for p in lab.hosts:
                subprocess.run(["ip", "-n", h.netns, "route", "del", f"{data[p.name]}/32"], check=False,
                               capture_output=True)
    assert rc != 0, out
    m = by_key(res)[("train_transport", "all hosts")]
    assert m["status"] == "FAIL", (m["message"], m.get("details"))
    for h in lab.hosts:
        assert re.search(rf"{h.name}: gloo's connection to \S+ leaves by {h.veth_host}"
                         rf"( \(its address \S+ is \S+'s\))?, not the data interface dat0", m["message"]), m
    assert "expected the training step across nodes: the inventory's data interface" in m["message"], m
    assert "a route sends the traffic" in m["message"], m["message"]
