"""multinode_transport on recorded NCCL logs: the parser (probe_allreduce.parse_nccl_log) on real
NCCL_DEBUG=INFO text published in GitHub issues (each line's issue cited beside it), and the
judgement (signoff/network/route.py) of what the classes promise: NET between HGX nodes (NET/Socket
FAILs, naming it), MNNVL inside an NVL72 domain (NET/IB there FAILs), NET with MNNVL off, and gloo's
connections on the data interface. Recorded: there is no GPU, InfiniBand card or NVLink domain here;
the lab's real gloo run is in tests/test_network_lab.py."""

from __future__ import annotations

import importlib.util

import pytest

from signoff import InputError, profiles
from signoff.network import route
from signoff.paths import PKG

_spec = importlib.util.spec_from_file_location(
    "probe_allreduce_t", PKG / "interconnect" / "probe_allreduce.py")
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)

# NVIDIA/nccl-tests issue 252: 2 nodes x 4 GPUs, InfiniBand through the IBext plugin
IB_4x2 = ("kolyoz1:27225:27907 [3] NCCL INFO comm 0x558b580881d0 rank 3 nRanks 8 nNodes 2 localRanks 4 "
          "localRank 3 MNNVL 0\n") + """\
kolyoz1:27223:27908 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/CUMEM
kolyoz1:27224:27909 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via P2P/CUMEM
kolyoz2:25172:25828 [1] NCCL INFO Channel 00/0 : 5[1] -> 6[2] via P2P/CUMEM
kolyoz2:25146:25827 [0] NCCL INFO Channel 00/0 : 3[3] -> 4[0] [receive] via NET/IBext_v8/0/GDRDMA
"""
# NVIDIA/nccl issue 952 ("NET/IB : No device found"): 2 nodes x 8 GPUs, NCCL on TCP sockets
SOCKET_8x2 = """\
<cluster_name>:919:1150 [0] NCCL INFO Channel 01/0 : 8[0] -> 15[7] via P2P/IPC/read
<cluster_name>:926:1151 [7] NCCL INFO Channel 03/0 : 15[7] -> 6[6] [send] via NET/Socket/3
<cluster_name>:926:1151 [7] NCCL INFO Channel 07/0 : 15[7] -> 6[6] [send] via NET/Socket/3
<cluster_name>:921:1146 [2] NCCL INFO Channel 00/0 : 10[2] -> 9[1] via P2P/IPC/read
"""
# NVIDIA/nccl-tests issue 179: the socket transport's interface and the network NCCL loaded
SOCKET_IFACE = """\
manolinux1:12260:12268 [0] NCCL INFO NET/IB : No device found.
manolinux1:12260:12268 [0] NCCL INFO NET/Socket : Using [0]enp1s0:10.39.42.196<0>
manolinux1:12260:12268 [0] NCCL INFO Using network Socket
"""
# Older formats: NVIDIA/nccl issue 707 (bus ids, no connection index), issue 229 (NCCL 2.4's
# "Ring", no device, EFA's plugin named with a space), issue 1814 (IBext_v8 on NCCL 2.2x)
OLD = """\
10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA
ip-192-168-29-243:26465:26533 [0] NCCL INFO Ring 00 : 7 -> 8 [receive] via NET/AWS Libfabric/0
ip-192-168-29-243:26465:26533 [0] NCCL INFO Ring 00 : 8[0] -> 9[1] via P2P/IPC
hostname-test:987:1260 [7] NCCL INFO Channel 03/0 : 47[7] -> 39[7] [receive] via NET/IBext_v8/2
"""
# NVIDIA/nccl issue 1769: a GB200 tray's fabric as NCCL reads it (one line per GPU)
MNNVL_FABRIC = ("gb200a-04:2101743:2101803 [1] NCCL INFO MNNVL busId 0x901000 fabric UUID "
                "3143b15bc2cd192b.28cc9b5473fb5b93 cliqueId 0x7ffe state 3 healthMask 0xaa\n")
# Between trays over MNNVL: NCCL's own format strings (NVIDIA/nccl at 5067397c, src/transport/p2p.cc
# "Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s" with "MNNVL"; src/init.cc "comm %p rank %d
# nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"), filled in for 2 trays of 4 GPUs: the
# published reports quote them cut short ("channels `via P2P/MNNVL`", "MNNVL 1 cliqueSize 8":
# vllm-project/vime pull 103), no issue prints a whole multi-tray log
MNNVL_2x4 = """\
tray01:5001:5101 [3] NCCL INFO comm 0xa1b2c3 rank 3 nRanks 8 nNodes 1 localRanks 8 localRank 3 MNNVL 1
tray01:5001:5101 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[0] via P2P/MNNVL/read
tray01:5001:5101 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/MNNVL/read
"""


def doc(text: str, local_ranks: int, **kw) -> dict:
    transports, net, _ = probe.parse_nccl_log(text.splitlines())
    return {"backend": "nccl", "local_ranks": local_ranks, "transports": transports, "nccl_net": net, **kw}


def threshold(profile: str):
    return profiles.load(profile).threshold("multinode_transport")


def test_the_parser_reads_every_published_format():
    text = IB_4x2 + SOCKET_8x2 + SOCKET_IFACE + OLD + MNNVL_FABRIC
    t, net, kept = probe.parse_nccl_log(text.splitlines())
    assert t["NET/IBext_v8/0/GDRDMA"] == [(3, 4)]
    assert t["NET/Socket/3"] == [(15, 6)]
    assert t["NET/IB/5/GDRDMA"] == [(2, 0)] and t["NET/AWS Libfabric/0"] == [(7, 8)]
    assert t["NET/IBext_v8/2"] == [(47, 39)] and t["P2P/IPC"] == [(8, 9)]
    assert t["P2P/CUMEM"] == [(1, 2), (2, 3), (5, 6)] and t["P2P/IPC/read"] == [(8, 15), (10, 9)]
    assert net == {"network": ["Socket"], "socket_ifaces": ["enp1s0"], "mnnvl": [0]}
    assert any("healthMask 0xaa" in ln for ln in kept)  # the fabric's line is kept as evidence
    assert {route.kind(v) for v in t} == {"NET/IBext_v8", "NET/Socket", "NET/IB", "NET/AWS Libfabric", "P2P"}
    m, mnet, _ = probe.parse_nccl_log(MNNVL_2x4.splitlines())
    assert route.kind(next(iter(m))) == "MNNVL" and mnet["mnnvl"] == [1]


def test_h100_nodes_over_nccl_sockets_fail_naming_the_transport():
    """An H100 class promises NET: NET/Socket between nodes is a FAIL naming it, the ranks and the
    host, not a slow number; the same class over the IB plugin passes."""
    t = threshold("h100-8x-nvlink")
    assert (t.value, t.op) == ("NET", "equals") and "NCCL_IB_DISABLE" in t.source
    v = route.judge(t.value, {"node1": doc(SOCKET_8x2 + SOCKET_IFACE, 8)}, {"node1": "eth0"})
    assert v["bad"] == ["node1: NET/Socket between nodes, ranks 15->6 (NCCL loaded network Socket)"], v
    assert v["measured"] == "NET/Socket" and "fell back to TCP sockets" in v["cause"]
    ok = route.judge(t.value, {"kolyoz2": doc(IB_4x2, 4)}, {"kolyoz2": "eth0"})
    assert ok["bad"] == [] and ok["measured"] == "NET/IBext_v8" and not ok["error"]
    # a user's setting that steers NCCL off its RDMA transport is named in the cause
    env = route.judge(t.value, {"n": doc(SOCKET_8x2, 8, nccl_env={"NCCL_IB_DISABLE": "1"})}, {})
    assert "set here: NCCL_IB_DISABLE=1" in env["cause"]


def test_nvl72_trays_over_infiniband_inside_the_domain_fail():
    """gb200-nvl72 promises MNNVL between the trays of its domain: NET/IB there FAILs with NCCL's
    own MNNVL 0; across more GPUs than the domain holds, NET between domains passes."""
    t = threshold("gb200-nvl72")
    assert t.value == "MNNVL" and t.extra["without_mnnvl"] == "NET" and "issue 1159" in t.source
    assert threshold("gb300-nvl72").value == "MNNVL"
    v = route.judge("MNNVL", {"tray02": doc(IB_4x2, 4)}, {})
    assert v["bad"] == ["tray02: NET/IBext_v8 between nodes, ranks 3->4 (MNNVL 0)"], v
    assert "IMEX" in v["cause"] and "NCCL_CUMEM_ENABLE=0" in v["cause"]
    across = route.judge("MNNVL", {"tray02": doc(IB_4x2, 4)}, {}, one_domain=False)
    assert across["bad"] == []
    good = route.judge("MNNVL", {"tray01": doc(MNNVL_2x4, 4)}, {})
    assert good["bad"] == [] and good["measured"] == "MNNVL"
    # the second run, MNNVL and NVLS off: the NICs' RDMA plugin, never sockets
    assert route.judge(t.extra["without_mnnvl"], {"tray02": doc(IB_4x2, 4)}, {})["bad"] == []
    assert route.judge("NET", {"tray02": doc(SOCKET_8x2, 8)}, {})["bad"]


def test_no_channel_line_between_nodes_is_an_error_never_a_pass():
    v = route.judge("NET", {"node1": doc("x NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n", 8)}, {})
    assert v["error"] == "node1: NCCL printed no channel line between nodes (NCCL_DEBUG output missing)"


def gloo(*links) -> dict:
    return {"backend": "gloo", "local_ranks": 1,
            "links": [{"local": lo, "remote": r, "holds": h, "iface": i} for lo, r, h, i in links]}


def test_gloo_is_judged_by_the_interface_its_connections_leave_by():
    t = threshold("local")
    assert t.value == "data_iface"
    ok = route.judge(t.value, {"a": gloo(("10.0.0.2", "10.0.0.3", "eth1", "eth1"))}, {"a": "eth1"})
    assert ok["bad"] == [] and ok["measured"] == "gloo/TCP over the data interface"
    bad = route.judge(t.value, {"a": gloo(("10.9.0.2", "10.9.0.3", "dum0", "eth0"))}, {"a": "dum0"})
    assert bad["bad"] == ["a: gloo's connection to 10.9.0.3 leaves by eth0 (its address 10.9.0.2 is dum0's), "
                          "not the data interface dum0"]
    none = route.judge(t.value, {"a": gloo()}, {"a": "eth1"})
    assert none["error"] == "a: gloo held no connection to another host"
    # gloo where the class promises NCCL's RDMA plugin: a FAIL naming it
    assert route.judge("NET", {"a": gloo(("10.0.0.2", "10.0.0.3", "eth1", "eth1"))}, {})["bad"] == [
        "a: gloo over TCP sockets (eth1), not NET"]


def test_nccl_sockets_on_local_must_be_the_data_interface():
    d = doc(SOCKET_8x2 + SOCKET_IFACE, 8)
    assert route.judge("data_iface", {"n": d}, {"n": "enp1s0"})["bad"] == []
    assert route.judge("data_iface", {"n": d}, {"n": "eth9"})["bad"] == [
        "n: NCCL's sockets (ranks 15->6) on enp1s0, not the data interface eth9"]


def test_a_profile_may_set_the_training_steps_own_transport_and_a_wrong_one_is_refused(tmp_path):
    """train_transport defaults to the class's multinode_transport (the check reads it); a site
    profile may set the step's own, of the same values."""
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\ncriteria:\n  train_transport: {equals: NET, unit: x, source: y}\n")
    assert profiles.load(str(p)).criteria["train_transport"].value == "NET"
    assert "train_transport" not in profiles.load("local").criteria
    p.write_text("extends: local\ncriteria:\n  train_transport: {equals: IB, unit: x, source: y}\n")
    with pytest.raises(InputError, match="train_transport.equals: expected one of NET, MNNVL, data_iface"):
        profiles.load(str(p))


@pytest.mark.parametrize("spec, said", [
    ("{equals: IB, unit: x, source: y}", "expected one of NET, MNNVL, data_iface, got 'IB'"),
    ("{equals: NET, without_mnnvl: NET, unit: x, source: y}", "only beside equals: MNNVL"),
    ("{min: 1, unit: x, source: y}", "multinode_transport takes equals, not min"),
])
def test_a_wrong_transport_threshold_is_refused(tmp_path, spec, said):
    p = tmp_path / "p.yaml"
    p.write_text(f"extends: local\ncriteria:\n  multinode_transport: {spec}\n")
    with pytest.raises(InputError, match=said):
        profiles.load(str(p))


# ------------------------------------------------------------------ the training step across nodes


def nodes(cls: str, text: str, names=("node1", "node2")) -> dict[str, dict]:
    """Recorded hosts of class `cls` (tests/test_classes_recorded.py's record), each answering
    the training step across nodes with the document probe_train prints there: its NCCL channel
    lines parsed from `text` (published log text: the lines of ranks whose node printed them, the
    same on every node here), an address on eth0 for the step's rendezvous."""
    from test_classes_recorded import measurements, recorded, sysinfo
    one, two = recorded()
    step = measurements(cls, sysinfo(cls, one), one, two)["train"]
    transports, net, kept = probe.parse_nccl_log(text.splitlines())
    out = {}
    for k, name in enumerate(names):
        eth = {"name": "eth0", "addresses": [f"10.0.0.{k + 1}"], "operstate": "up", "speed_mbps": 100000}
        out[name] = {"train": {**step, "nnodes": len(names), "node_rank": k, "transports": transports,
                               "nccl_net": net, "nccl_log": kept},
                     "netinfo": {"probe": "netinfo", "ethernet": [eth], "infiniband": [],
                                 "tools": {"iperf3": False, "ib_write_bw": False}}}
    return out


def test_recorded_h100_training_step_over_nccl_sockets_fails_naming_the_transport(tmp_path):
    """Two recorded HGX H100 nodes (no GPU here) under --profile auto: the training step across
    them runs its gradient all-reduce over NCCL's sockets (NVIDIA/nccl issue 952's log, NCCL
    finding no IB device): train_transport FAILs naming NET/Socket, the ranks and the network NCCL
    loaded; over the IB plugin (NVIDIA/nccl issue 1814's IBext_v8 line) it PASSes."""
    from test_fabric import recorded_run

    def run(name: str, text: str):
        (tmp_path / name).mkdir()
        docs = nodes("h100-8x-nvlink", text)
        return recorded_run(tmp_path / name, "h100-8x-nvlink", dict.fromkeys(docs, {}), probes=docs,
                            checks="train_transport", sheet="acceptance/test_training.py", data_iface="eth0")
    rc, doc, out = run("socket", SOCKET_8x2 + SOCKET_IFACE)
    assert doc["meta"]["profile"] == "h100-8x-nvlink", out
    r = {(x["criterion"], x["host"]): x for x in doc["results"]}[("train_transport", "all hosts")]
    assert r["status"] == "FAIL", r
    for h in ("node1", "node2"):
        assert f"{h}: NET/Socket between nodes, ranks 15->6 (NCCL loaded network Socket)" in r["message"], r
    assert "expected the training step across nodes: NCCL's network plugin over RDMA" in r["message"]
    assert "likely cause: NCCL found no RDMA device or plugin it could use" in r["message"]
    assert r["measured"] == "NET/Socket" and rc == 1
    rc, doc, out = run("ib", OLD.splitlines()[-1])
    r = {(x["criterion"], x["host"]): x for x in doc["results"]}[("train_transport", "all hosts")]
    assert r["status"] == "PASS" and r["measured"] == "NET/IBext_v8", r
    assert r["details"]["used"]["node1"] == {"NET/IBext_v8": [[47, 39]]}, r
