"""The hand-off files of real `pytest acceptance/` runs on recorded hosts (issue 51 item 12): a
check across hosts that FAILs naming a host (NCCL on sockets on one node, a tray of another NVLink
domain, trays whose all-reduce fell back from MNNVL to the NICs) makes it that host's finding: By
host names it, exclude.hostlist holds it, drain.sh drains it. No GPU, NVL72 rack or InfiniBand
card exists here: the hosts' answers are recorded (tests/test_fabric.py's recorded_run: fake NVML,
NCCL logs published in GitHub issues); the checks, results.json and the report's data are real."""

from __future__ import annotations

import fabric_fake as ff
from test_fabric import rack, recorded_run, rows, statuses, two_trays
from test_multinode_transport_recorded import OLD, SOCKET_IFACE, IB_4x2, MNNVL_2x4, SOCKET_8x2, probe

from signoff import report


def hand_off(tmp_path, doc: dict) -> tuple[list[str], str, str]:
    """(the By host entries' names, exclude.hostlist, drain.sh) as the run's report dir gets them."""
    report.write_exclude(tmp_path, doc)
    entries, _, _ = report.by_host(doc)
    return ([e["who"] for e in entries], (tmp_path / report.EXCLUDE_FILE).read_text(),
            (tmp_path / report.DRAIN_FILE).read_text())


def test_nccl_on_sockets_on_one_of_two_nodes_drains_that_node(tmp_path):
    """Two recorded HGX H100 nodes: node1's all-reduce between the nodes over the IB plugin
    (NVIDIA/nccl issue 1814's line), node2's over NCCL's sockets (issue 952's): multinode_transport
    FAILs naming node2, and node2 alone is drained (nothing was, on 83b76b7)."""
    def allreduce(k, text):
        transports, net, kept = probe.parse_nccl_log(text.splitlines())
        return {"probe": "allreduce", "backend": "nccl", "world_size": 16, "local_ranks": 8, "gpus": 8,
                "nnodes": 2, "node_rank": k, "rows": rows(300.0), "graphs": True, "transports": transports,
                "nccl_net": net, "nccl_log": kept}
    docs = {}
    for k, (name, text) in enumerate((("node1", OLD.splitlines()[-1]), ("node2", SOCKET_8x2 + SOCKET_IFACE))):
        eth = {"name": "eth0", "addresses": [f"10.0.0.{k + 1}"], "operstate": "up", "speed_mbps": 400000}
        docs[name] = {"allreduce": allreduce(k, text),
                      "netinfo": {"probe": "netinfo", "ethernet": [eth], "infiniband": [],
                                  "tools": {"iperf3": False, "ib_write_bw": False}}}
    rc, doc, out = recorded_run(tmp_path, "h100-8x-nvlink", dict.fromkeys(docs, {}), probes=docs,
                                checks="multinode_transport", sheet="acceptance/test_network.py",
                                data_iface="eth0")
    r = statuses(doc)[("multinode_transport", "all hosts")]
    assert r["status"] == "FAIL" and "node2: NET/Socket between nodes" in r["message"], (r, out)
    assert list(r["details"]["at_fault"]) == ["node2"], r["details"]
    who, hostlist, drain = hand_off(tmp_path, doc)
    assert who == ["node2"] and hostlist == "node2\n", who
    assert 'scontrol update nodename="node2" state=drain reason="signoff ' in drain, drain
    assert "multinode_transport FAIL: NET/Socket between nodes" in drain, drain


def test_a_tray_of_another_rack_and_a_gpu_in_no_domain_drain_their_trays(tmp_path):
    """18 recorded GB200 trays (fake NVML): tray05 registered with another rack's domain, tray03
    GPU 2 with none: nvlink_domain FAILs naming both; they are drained, the domain short of GPUs
    (a tray missing, named by no line of its own) is no tray's."""
    odd = {"tray03": [ff.fabric(), ff.fabric(), ff.fabric(state=2), ff.fabric()],
           "tray05": [ff.fabric(uuid=ff.OTHER_RACK)] * 4}
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", rack("gb200-nvl72", odd), checks="nvlink_domain")
    r = statuses(doc)[("nvlink_domain", "all hosts")]
    assert r["status"] == "FAIL" and sorted(r["details"]["at_fault"]) == ["tray03", "tray05"], (r, out)
    who, hostlist, drain = hand_off(tmp_path, doc)
    assert sorted(who) == ["tray03", "tray05"] and hostlist == "tray[03,05]\n", who
    assert 'nodename="tray03" state=drain reason="signoff ' in drain, drain
    assert "nvlink_domain FAIL: GPU 2: in no NVLink domain (fab" in drain, drain
    # a drain reason holds no quote: the run's becomes run_s
    assert "nvlink_domain FAIL: in another NVLink domain (cluster UUID) than the run_s other" in drain
    entries, _, _ = report.by_host(doc)
    assert all("check its NVSwitch fabric" in e["lines"][0] for e in entries), entries


def test_trays_whose_all_reduce_fell_back_to_the_nics_are_drained_not_the_slow_domains(tmp_path):
    """Two domains of two trays each: tray01-02's all-reduce over MNNVL at NIC speed (below the
    NVLink floor: no tray named), tray03-04's fallen back to NET/IB (issue 252's log): the two
    trays the check names are drained."""
    hosts, docs = two_trays(85.0, MNNVL_2x4, other=(84.0, IB_4x2))
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", hosts, checks="mnnvl_allreduce", data_iface="eth0",
                                probes=docs)
    r = statuses(doc)[("mnnvl_allreduce", "all hosts")]
    assert r["status"] == "FAIL" and sorted(r["details"]["at_fault"]) == ["tray03", "tray04"], (r, out)
    who, hostlist, _ = hand_off(tmp_path, doc)
    assert who == ["tray[03-04]"] and hostlist == "tray[03-04]\n", who
