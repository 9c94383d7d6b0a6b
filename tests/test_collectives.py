"""The collectives beyond all-reduce (issue 44, part 2): probe_allreduce --op / --rail-split for real
on this CPU (gloo ranks in processes, two "nodes" of two ranks each on this machine: one real
rendezvous, the rails real groups), nccl-tests' sizes and busbw factors, exactness with a rank that
corrupts its output (SIGNOFF_WRONG_OP), the derived thresholds' arithmetic, and the intra-node
checks through acceptance/ on localhost. The lab run across hosts (a slowed host named by the
all-to-all and by the rail split) is in tests/test_network_lab.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from test_lab_acceptance import accept, by_key

from signoff import profiles
from signoff.fleet import ProbeError
from signoff.interconnect import judge as ic
from signoff.interconnect.plots import OP_NAMES
from signoff.network import judge as net
from signoff.paths import PKG

PROBE = PKG / "interconnect" / "probe_allreduce.py"
ALL = "allreduce,allgather,reduce_scatter,alltoall,sendrecv"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def two_nodes(tmp_path, wrong_on_node1: str = "") -> list[dict]:
    """Two probe processes as nodes 0 and 1 of one rendezvous on 127.0.0.1, two gloo ranks each."""
    port = str(free_port())
    procs = []
    for node in (0, 1):
        env = {**os.environ, **({"SIGNOFF_WRONG_OP": wrong_on_node1} if node and wrong_on_node1 else {})}
        d = tmp_path / f"node{node}"
        d.mkdir()
        procs.append(subprocess.Popen(
            [sys.executable, str(PROBE), "--backend", "gloo", "--nprocs", "2", "--nnodes", "2",
             "--node-rank", str(node), "--master-addr", "127.0.0.1", "--master-port", port,
             "--min-bytes", "64K", "--max-bytes", "128K", "--warmup", "1", "--iters", "2", "--repeats", "1",
             "--timeout", "60", "--op", ALL, "--rail-split", "alltoall"],
            cwd=d, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        doc = json.loads(out.splitlines()[-1])
        assert p.returncode == 0 and "error" not in doc, err[-2000:]
        docs.append(doc)
    return docs


def test_probe_measures_every_collective_and_each_rail_in_one_rendezvous(tmp_path):
    doc = two_nodes(tmp_path)[0]
    assert doc["world_size"] == 4 and doc["local_ranks"] == 2
    assert [r["bytes"] for r in doc["rows"]] == [64 << 10, 128 << 10]  # the all-reduce as before
    assert set(doc["ops"]) == {"allgather", "reduce_scatter", "alltoall", "sendrecv"}
    assert not doc.get("op_errors"), doc.get("op_errors")  # gloo in this torch runs every one
    for op, rows in doc["ops"].items():
        assert [r["bytes"] for r in rows] == [64 << 10, 128 << 10], op
        for r in rows:
            assert r["correct"], (op, r)
            # nccl-tests' factors (doc/PERFORMANCE.md): (n-1)/n of 4 ranks, send/recv 1
            f = 1.0 if op == "sendrecv" else 3 / 4
            assert r["busbw"] == pytest.approx(r["algbw"] * f, rel=0.01, abs=0.002), (op, r)
    # the rails: local index 0 and 1, each of one rank per node (2 ranks: factor 1/2)
    rails = doc["rails"]["alltoall"]
    assert set(rails) == {"0", "1"}
    for rows in rails.values():
        assert all(r["correct"] and r["busbw"] == pytest.approx(r["algbw"] / 2, rel=0.01, abs=0.002)
                   for r in rows), rows
    assert ic.wrong_results(doc, OP_NAMES) == []


def test_a_rank_that_corrupts_its_all_to_all_fails_exactness_naming_op_size_and_rail(tmp_path):
    """Node 1's ranks add one to their all-to-all output after each run: every all-to-all size is
    wrong, across all ranks and in each rail; the other collectives stay exact."""
    doc = two_nodes(tmp_path, wrong_on_node1="alltoall")[0]
    assert all(not r["correct"] for r in doc["ops"]["alltoall"])
    assert all(r["correct"] for op, rows in doc["ops"].items() if op != "alltoall" for r in rows)
    wrong = ic.wrong_results(doc, OP_NAMES)
    assert wrong == ["wrong all-to-all at 64K", "wrong all-to-all at 128K",
                     "wrong all-to-all at 64K in rail 0", "wrong all-to-all at 128K in rail 0",
                     "wrong all-to-all at 64K in rail 1", "wrong all-to-all at 128K in rail 1"], wrong
    # which ranks: node 1's (2 and 3), so the check across nodes names that host, in each rail its own rank
    assert all(r["wrong_ranks"] == [2, 3] for r in doc["ops"]["alltoall"]), doc["ops"]["alltoall"]
    assert all("wrong_ranks" not in r for op, rows in doc["ops"].items() if op != "alltoall" for r in rows)
    hosts = {"n0": {"node_rank": 0, "local_ranks": 2}, "n1": {"node_rank": 1, "local_ranks": 2}}
    said = net.wrong_across(doc, hosts, OP_NAMES)
    assert said[0] == "wrong all-to-all at 64K on n1 (ranks 2, 3)", said
    assert "wrong all-to-all at 64K in rail 0 on n1 (rank 2)" in said and \
        "wrong all-to-all at 128K in rail 1 on n1 (rank 3)" in said, said
    assert net.wrong_hosts(doc, hosts) == ["n1"]


def test_alltoall_bound_is_nccl_tests_arithmetic():
    nics = {"gbps": 8 * 400, "what": "8 RDMA port(s) x 400 Gb/s"}
    # one rank per node (a rail): the NIC share of a rank, 50 GB/s
    assert net.alltoall_bound(nics, 8, 2, 2) == 50.0
    # 2 nodes x 8 GPUs: N/(N-1) = 2 x 50, x (16-1)/16
    assert net.alltoall_bound(nics, 8, 2, 16) == pytest.approx(93.75)
    assert net.alltoall_bound({"gbps": None}, 8, 2, 16) is None
    t = profiles.load("nvidia-base").criteria["multinode_alltoall_busbw"]
    slow = {"a": nics, "b": {"gbps": 4 * 400, "what": "4 RDMA port(s) x 400 Gb/s"}}
    g = net.nic_bound_threshold(t, slow, 8, 8, "all-to-all across nodes")
    assert g.unit == "GB/s" and g.value == round(0.83 * 46.875, 3), g  # b's 4 NICs: 25 GB/s a rank
    assert g.source.startswith("derived: 0.83 x 46.875 GB/s, the lowest node's bound (b: 4 RDMA port(s)")
    with pytest.raises(ProbeError, match="b: no NIC rate reported"):
        net.nic_bound_threshold(t, {"a": nics, "b": {"gbps": None, "what": "data interface x: no rate"}},
                                8, 8, "all-to-all across nodes")
    # send/recv across nodes: a rank's share of its node's NICs (busbw factor 1), the lowest node's
    s = profiles.load("nvidia-base").criteria["multinode_sendrecv_busbw"]
    g = net.nic_share_threshold(s, slow, 8, "send/recv")
    assert g.unit == "GB/s" and g.value == round(0.85 * 25, 3), g
    assert g.source.startswith("derived: 0.85 x 25 GB/s, the lowest node's NIC share per rank (b: 4 RDMA")


def test_every_class_and_local_has_a_threshold_with_a_source_for_every_new_collective():
    from signoff.paths import thresholds_dir
    names = ("allgather_busbw", "reduce_scatter_busbw", "alltoall_busbw", "sendrecv_busbw",
             "multinode_alltoall_busbw", "rail_alltoall_busbw", "multinode_allgather_busbw",
             "multinode_reduce_scatter_busbw", "multinode_sendrecv_busbw")
    for f in sorted(thresholds_dir().glob("*.yaml")):
        p = profiles.load(f.stem)
        for n in names:
            t = p.criteria.get(n)
            assert t is not None and t.source, (f.stem, n)
    base = profiles.load("h100-8x-nvlink").criteria["alltoall_busbw"]
    assert base.extra.get("derived") == "allreduce" and base.value == 0.72 and "issue 212" in base.source
    g = ic.allreduce_threshold(base, 460.0, "16G", "h1")
    assert g.value == round(0.72 * 460, 3) and g.unit == "GB/s"
    assert g.source.startswith("derived: 0.72 x 460 GB/s, this host's all-reduce busbw at 16G")
    with pytest.raises(ProbeError, match="h1: no all-reduce busbw at 16G"):
        ic.allreduce_threshold(base, None, "16G", "h1")


def test_intra_node_collectives_judged_and_a_wrong_all_to_all_fails_exactness(tmp_path):
    """localhost through acceptance/: every collective beside the all-reduce in one probe run; an
    all-to-all whose last rank's output is off by one FAILs collectives_correct naming it and each
    size (the all-reduce stays correct); a floor the machine cannot reach FAILs alltoall_busbw; the
    all-reduce, far below its own floor, is final at once (retry policy: issue 51 item 16)."""
    prof = tmp_path / "a2a.yaml"
    prof.write_text("extends: local\ncriteria:\n  alltoall_busbw: {min: 10000, unit: GB/s, "
                    "source: 'test: beyond any CPU'}\n  allreduce_busbw: {min: 10000, unit: GB/s, size: 1M, "
                    "sweep: [512K, 1M], attempts: 2, source: 'test: beyond any CPU'}\n")
    rc, res, out = accept(tmp_path, "acceptance/test_interconnect.py", "-k",
                          "correct or busbw and not p2p", "--profile", str(prof),
                          env={"SIGNOFF_WRONG_OP": "alltoall"})
    assert rc == 1, out
    r = {k[0]: v for k, v in by_key(res).items()}
    c = r["collectives_correct"]
    assert c["status"] == "FAIL" and "wrong all-to-all at 1M" in c["message"], c
    assert "wrong all-gather" not in c["message"] and "every collective returns exactly" in c["message"]
    assert r["allreduce_correct"]["status"] == "PASS"
    # the all-reduce missed far below its floor: not measured again, saying why (retry policy)
    b = r["allreduce_busbw"]
    assert b["status"] == "FAIL" and not b["details"].get("attempts") and "measured once: " in b["message"], b
    assert b["details"]["retry"][0].startswith("not measured again: attempt 1 read "), b
    a = r["alltoall_busbw"]
    assert a["status"] == "FAIL" and "all-to-all busbw at 1M (2 ranks, gloo)" in a["message"], a
    assert "expected >= 10000 GB/s" in a["message"]
    for op in ("allgather", "reduce_scatter", "sendrecv"):
        v = r[f"{op}_busbw"]
        assert v["status"] == "PASS" and v["measured"] > 0, v
        assert [x["bytes"] for x in v["details"]["rows"]] == [512 << 10, 1 << 20]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "collectives busbw beside the all-reduce" in html  # each host's curves on one chart


def test_a_floor_the_machine_cannot_reach_fails_allgather_reduce_scatter_and_sendrecv(tmp_path):
    """The negative of each other intra-node collective: a floor no CPU reaches FAILs it, naming the
    collective, its figure and the floor (one probe run for the three)."""
    prof = tmp_path / "beyond.yaml"
    prof.write_text("extends: local\ncriteria:\n" + "".join(
        f"  {op}_busbw: {{min: 10000, unit: GB/s, source: 'test: beyond any CPU'}}\n"
        for op in ("allgather", "reduce_scatter", "sendrecv")))
    rc, res, out = accept(tmp_path, "acceptance/test_interconnect.py", "-k",
                          "allgather_busbw or reduce_scatter_busbw or sendrecv_busbw", "--profile", str(prof))
    assert rc == 1, out
    r = {k[0]: v for k, v in by_key(res).items()}
    for op in ("allgather", "reduce_scatter", "sendrecv"):
        v = r[f"{op}_busbw"]
        assert v["status"] == "FAIL" and v["measured"] > 0, v
        assert "expected >= 10000 GB/s" in v["message"], v
        # gloo's cause is the CPU's, never NCCL's algorithm or protocol
        assert "runs on the host's CPU cores: other processes on them, or too few cores for its 2 ranks" \
            in v["message"] and "NCCL" not in v["message"], v["message"]
