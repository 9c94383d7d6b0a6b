"""Derived thresholds (issue 29 item 3): where the class fixes no NIC, nic_rate, net_pair_bandwidth,
multinode_allreduce_busbw and train_scaling_nodes are judged against what the hosts report in the
run (`derived:` rules, docs/thresholds.md). The profile syntax and the rules on recorded/fake netinfo
documents (no InfiniBand card here); the pair as a fraction of a real link: tests/test_network_lab.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml

from signoff import InputError, calibrate, profiles
from signoff.fleet import ProbeError
from signoff.network import judge as net
from signoff.network.run import Network
from signoff.training import judge as train

DERIVED = ("nic_rate", "net_pair_bandwidth", "multinode_allreduce_busbw", "train_scaling_nodes")
NO_NIC = ("a100-40gb-8x-pcie", "a100-80gb-8x-pcie", "l40s-8x-pcie", "h200-8x-nvlink@1", "h200-8x-nvlink@2",
          "h200-8x-nvlink@4", "local")


@pytest.mark.parametrize("name", NO_NIC)
def test_the_classes_without_a_nic_derive_their_network_figures(name):
    """No `uncalibrated:` left: each criterion a fraction of what the hosts report, its rule said."""
    p = profiles.load(name)
    for c in DERIVED:
        t = p.threshold(c)
        assert t.extra["derived"] and t.provisional.startswith("derived: ") and 0 < t.value <= 1, (c, t)
    assert "fabric" not in p.threshold("nic_rate").extra  # not the 8x H200 class's 8 NDR ports
    assert p.threshold("net_pair_bandwidth").extra["tool"] == "auto"  # not the 8x class's ib_write_bw


def test_a_class_with_a_nic_and_the_lab_keep_their_own_figures():
    h200, lab = profiles.load("h200-8x-nvlink"), profiles.load("tests/profiles/lab.yaml")
    assert h200.threshold("nic_rate").value == 400 and "derived" not in h200.threshold("nic_rate").extra
    for c in DERIVED:  # a child's own figure drops the parent's rule with the parent's limit
        assert "derived" not in lab.threshold(c).extra and not lab.threshold(c).provisional, c


@pytest.mark.parametrize("body, err", [
    ("net_pair_bandwidth: {min: 0.9, unit: x line rate, derived: fleet_rate, source: s, "
     "provisional: 'derived: r'}",
     "net_pair_bandwidth.derived: expected one of line_rate, got 'fleet_rate'"),
    ("net_pair_bandwidth: {min: 0.9, unit: Gb/s, derived: line_rate, source: s, "
     "provisional: 'derived: r'}",
     "net_pair_bandwidth.unit: derived: line_rate judges a fraction: unit 'x line rate', got 'Gb/s'"),
    ("multinode_allreduce_busbw: {min: 40, unit: x node bound, derived: node_bound, size: 1M, "
     "sweep: [1M, 1M], source: s, provisional: 'derived: r'}",
     "multinode_allreduce_busbw.min: derived: node_bound takes a fraction in (0, 1]"),
    ("nic_rate: {min: 1.0, unit: x the fleet's rate, derived: fleet_rate, source: s}",
     "nic_rate.provisional: derived: fleet_rate needs its rule said"),
    ("nic_rate: {min: 1.0, unit: x the fleet's rate, derived: fleet_rate, fabric: fddi, source: s, "
     "provisional: 'derived: r'}", "nic_rate.fabric: expected ethernet or infiniband (or none"),
    ("storage_read_seq: {min: 0.9, unit: x, derived: line_rate, source: s}",
     "storage_read_seq.derived: unknown key"),  # a criterion whose family offers no rule
])
def test_a_bad_derived_rule_names_file_and_key(tmp_path, body, err):
    p = tmp_path / "bad.yaml"
    p.write_text(f"criteria:\n  {body}\n")
    with pytest.raises(InputError, match=f"profile {p}: criteria.") as e:
        profiles.load(str(p))
    assert err in str(e.value), str(e.value)


# ------------------------------------------------------------------ nic_rate: fleet_rate


def ib(*rates, down=()):
    """A FAKE netinfo document: the data interface ib0 on mlx5_0, one RDMA port per rate."""
    return {"ethernet": [{"name": "ib0", "operstate": "up", "speed_mbps": int(rates[0] * 1000), "mtu": 2044,
                          "addresses": ["10.0.0.1"], "virtual": False, "ib_device": "mlx5_0", "ib_port": 1}],
            "infiniband": [{"device": f"mlx5_{i}", "port": 1, "rate": f"{r:g} Gb/sec (4X NDR)",
                            "rate_gbps": r, "state": "1: DOWN" if i in down else "4: ACTIVE",
                            "link_layer": "InfiniBand"}
                           for i, r in enumerate(rates)],
            "tools": {"iperf3": True, "ib_write_bw": True}}


def eth(mbps, state="up"):
    """A FAKE netinfo document: the data interface eth0, no RDMA."""
    return {"ethernet": [{"name": "eth0", "operstate": state, "speed_mbps": mbps, "mtu": 1500,
                          "addresses": ["10.0.0.1"], "virtual": False, "ib_device": None, "ib_port": None}],
            "infiniband": [], "tools": {"iperf3": True, "ib_write_bw": False}}


def fleet_rate(docs: dict, name: str, profile="h200-8x-nvlink@1", iface=None):
    t = profiles.load(profile).threshold("nic_rate")
    ports = {h: net.nic_ports(d, iface or d["ethernet"][0]["name"], t.extra.get("fabric"))
             for h, d in docs.items()}
    return net.fleet_rate(name, ports, t)


def test_fake_ib_fleet_at_one_rate_passes_and_a_port_at_half_rate_fails_naming_it():
    docs = {f"n{i}": ib(*[400] * 8) for i in range(1, 4)}
    ok = fleet_rate(docs, "n1")
    assert ok["bad"] == [] and ok["measured"] == 400 and ok["fabric"] == "infiniband"
    assert ok["expected"] == ("8 infiniband port(s) up at >= 400 Gb/s (1 x 400 Gb/s, the rate 24 of the "
                              "run's 24 up infiniband ports run at)")
    docs["n2"] = ib(*[400] * 7, 200)  # one link trained down to half rate
    bad = fleet_rate(docs, "n2")
    assert bad["bad"] == ["mlx5_7 port 1 at 200 Gb/s"] and bad["measured"] == 200
    assert fleet_rate(docs, "n1")["bad"] == []


def test_fake_ib_port_down_fails_as_fewer_ports_up_than_most_hosts_have():
    docs = {"n1": ib(*[400] * 8), "n2": ib(*[400] * 8, down=(3,)), "n3": ib(*[400] * 8)}
    assert fleet_rate(docs, "n2")["bad"] == ["7 of 8 infiniband ports up (as most of the 3 host(s) have); "
                                             "down: mlx5_3 port 1"]
    assert fleet_rate(docs, "n1")["bad"] == []


def test_fake_single_host_is_judged_against_its_own_ports():
    assert fleet_rate({"n1": ib(*[400] * 8)}, "n1")["bad"] == []
    assert fleet_rate({"n1": ib(*[400] * 7, 100)}, "n1")["bad"] == ["mlx5_7 port 1 at 100 Gb/s"]


def test_fake_ethernet_data_interface_at_half_rate_or_down_fails():
    docs = {"a": eth(100000), "b": eth(50000), "c": eth(100000), "d": eth(100000, "down")}
    assert fleet_rate(docs, "a")["bad"] == [] and fleet_rate(docs, "a")["fabric"] == "ethernet"
    assert fleet_rate(docs, "b")["bad"] == ["eth0 at 50 Gb/s"]
    assert fleet_rate(docs, "d")["bad"] == ["0 of 1 ethernet ports up (as most of the 4 host(s) have); "
                                            "down: eth0"]
    with pytest.raises(ProbeError, match="no ethernet port of the 1 host"):
        fleet_rate({"x": eth(None)}, "x")


def test_most_common_rate_ties_go_to_the_higher():
    assert net.most_common([200, 400, 400, 200]) == 400 and net.most_common([100, 100, 400]) == 100
    assert net.most_common([None]) is None


# ------------------------------------------------------------------ multinode: node_bound


def test_fake_node_bound_is_the_lowest_nodes_min_of_intra_and_nics():
    t = profiles.load("h200-8x-nvlink@2").threshold("multinode_allreduce_busbw")
    bounds = {"n1": {"nics": net.node_nics(ib(400, 400), "ib0", nccl=True), "intra": 344.7},
              "n2": {"nics": net.node_nics(ib(400, 200), "ib0", nccl=True), "intra": 344.7}}
    got = net.node_bound_threshold(t, bounds)
    assert (got.value, got.unit) == (67.5, "GB/s")  # 0.9 x n2's 600 Gb/s / 8 = 75 GB/s
    assert got.source.startswith("derived: 0.9 x 75 GB/s, the lowest node's bound (n2: min(intra-node "
                                 "all-reduce 344.7 GB/s, 2 RDMA port(s) x 200/400 Gb/s / 8 = 75 GB/s))")
    assert got.ok(70) and not got.ok(60)
    slow_intra = {**bounds, "n3": {"nics": net.node_nics(ib(400, 400), "ib0", nccl=True), "intra": 50.0}}
    assert net.node_bound_threshold(t, slow_intra).value == 45.0
    one_gpu = {"n1": {"nics": net.node_nics(eth(100000), "eth0", nccl=True), "intra": None}}
    got = net.node_bound_threshold(t, one_gpu)
    assert got.value == 11.25 and "no intra-node all-reduce (one rank)" in got.source
    with pytest.raises(ProbeError, match="n9: no NIC rate reported"):
        net.node_bound_threshold(t, {"n9": {"nics": net.node_nics(eth(None), "eth0", nccl=True), "intra": 9}})


def test_fake_gloo_leaves_by_the_data_interface_not_the_rdma_ports():
    assert net.node_nics(ib(400, 400), "ib0", nccl=False) == {
        "nics": 1, "gbps": 400, "what": "data interface ib0 at 400 Gb/s"}


# ------------------------------------------------------------------ train_scaling_nodes: step_bound


def test_step_bound_takes_the_all_reduce_time_of_ddps_bucket_from_the_run():
    rows = [{"bytes": 16 << 20, "time_us": 1000.0}, {"bytes": 32 << 20, "time_us": 1500.0}]
    eff, t_ar, how = train.step_bound(0.1576, 604_300_000, rows)  # the H200 anchor's step
    buckets = 604_300_000 * 4 / (25 << 20)
    assert t_ar == pytest.approx(buckets * 1.5e-3) and eff == round(0.1576 / (0.1576 + t_ar), 4)
    assert "in 92.2 bucket(s) of 25 MiB at 1.5 ms each (the multi-node all-reduce of 32 MiB" in how
    small, t_small, _ = train.step_bound(0.01, 1000, rows)  # 4 KB of gradients: one message, latency
    assert t_small == pytest.approx(1e-3) and small == round(0.01 / 0.011, 4)
    top, t_top, _ = train.step_bound(0.1, 604_300_000, rows[:1])  # above the sweep: scaled by bytes
    assert t_top == pytest.approx(1e-3 * (25 / 16) * buckets)


# ------------------------------------------------------------------ net_pair: tool auto


def network(docs: dict, ifaces: dict) -> Network:
    """A Network over FAKE sessions answering netinfo from `docs`."""
    sessions = {h: SimpleNamespace(cached_probe=lambda name, timeout, d=d: d,
                                   host=SimpleNamespace(data_iface=ifaces[h])) for h, d in docs.items()}
    return Network(SimpleNamespace(sessions=sessions))


def test_fake_auto_measures_rdma_ports_with_ib_write_bw_else_iperf3():
    both = network({"a": ib(400), "b": ib(400)}, {"a": "ib0", "b": "ib0"})
    assert both.tool("a", "b", "auto") == "ib_write_bw" and both.line_rate_gbps("a", "ib_write_bw") == 400
    assert both.tool("a", "b", "iperf3") == "iperf3"  # a named tool is kept
    mixed = network({"a": ib(400), "b": eth(100000)}, {"a": "ib0", "b": "eth0"})
    assert mixed.tool("a", "b", "auto") == "iperf3"
    no_tool = ib(400)
    no_tool["tools"]["ib_write_bw"] = False
    assert network({"a": ib(400), "b": no_tool}, {"a": "ib0", "b": "ib0"}).tool("a", "b", "auto") == "iperf3"


def test_calibrate_turns_a_derived_threshold_into_the_measured_figure(tmp_path):
    """A known-good run judged by derived rules calibrates to its own figures, in the unit they were
    judged in (GB/s), the rule dropped: the written profile loads."""
    multi = {"criterion": "multinode_allreduce_busbw", "host": "all hosts", "status": "PASS",
             "measured": 44.0, "unit": "GB/s"}
    pair = {"criterion": "net_pair_bandwidth", "host": "n1->n2", "status": "PASS", "measured": 0.97,
            "unit": "x line rate"}
    doc = {"meta": {"run": "r", "started": "2026-12-03T05:00:00", "hosts": ["n1", "n2"],
                    "profile": "h200-8x-nvlink@1"}, "hosts": {}, "results": [multi, pair]}
    crit, _ = calibrate.calibrate(doc, profiles.load("h200-8x-nvlink@1"), 0.9)
    got = crit["multinode_allreduce_busbw"]
    assert (got["min"], got["unit"]) == (39.6, "GB/s") and "the slowest 44 GB/s on all hosts" in got["source"]
    assert "derived" not in got and "derived" not in crit["net_pair_bandwidth"]
    p = tmp_path / "site.yaml"
    p.write_text(yaml.safe_dump({"extends": "h200-8x-nvlink@1", "criteria": crit}))
    site = profiles.load(str(p))
    assert site.threshold("multinode_allreduce_busbw").value == 39.6
    assert not site.threshold("net_pair_bandwidth").provisional
