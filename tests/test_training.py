"""The training family without a lab: the profile's `training:` section, the pure judgement,
and the probes' helpers; the step itself runs for real in tests/test_training_lab.py."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import InputError, profiles
from signoff.training import DEFAULTS, judge, section

ROOT = Path(__file__).resolve().parent.parent


def probe(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "signoff" / "training" / f"probe_{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write(tmp_path, text: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\n" + text)
    return p


def test_section_defaults_to_the_h200_anchor_and_local_overrides_it():
    assert section(profiles.load("h200-8x-nvlink@1"))["d_model"] == 2048 == DEFAULTS["d_model"]
    assert section(profiles.load("h200-8x-nvlink@1"))["loader"]["crop"] == 224
    loc = section(profiles.load("local"))
    assert loc["d_model"] == 64 and loc["loader"]["workers"] == [0, 1, 2] and loc["heads"] == 4


def test_section_inherits_and_overrides_keys(tmp_path):
    p = profiles.load(str(write(tmp_path, "training: {lr: 0, loader: {delay_ms: 50}}\n")))
    sec = section(p)
    assert sec["lr"] == 0 and sec["d_model"] == 64  # the rest from local
    assert sec["loader"]["delay_ms"] == 50 and sec["loader"]["workers"] == [0, 1, 2]


@pytest.mark.parametrize("text, msg", [
    ("training: {layer: 2}\n", "training.layer: unknown key"),
    ("training: {d_model: 0}\n", "training.d_model: expected an integer >= 1, got 0"),
    ("training: {lr: -1}\n", "training.lr: expected a number >= 0, got -1"),
    ("training: {heads: 5}\n", "d_model 64 is not a multiple of heads 5"),
    ("training: {loader: {workers: [0, -1]}}\n", "training.loader.workers: expected a list"),
    ("training: {loader: {crop: 64}}\n", "training.loader.crop: 64 is larger than size 32"),
    ("training: {loader: {decode: 1}}\n", "training.loader.decode: unknown key"),
    ("training: [1]\n", "training: expected a mapping"),
])
def test_bad_section_names_file_and_key(tmp_path, text, msg):
    p = write(tmp_path, text)
    with pytest.raises(InputError, match=f"profile {p}: .*") as e:
        profiles.load(str(p))
    assert msg in str(e.value)


def test_loss_ratio_efficiency_and_saturation():
    assert judge.loss_ratio([2.0, 1.5, 1.0, 0.5]) == 0.25
    assert judge.loss_ratio([2.0] * 8) == 1.0  # learning rate 0
    assert judge.loss_ratio([2.0, float("nan"), 1.0]) is None
    rows = [{"ranks": 1, "tokens_per_s": 100.0}, {"ranks": 2, "tokens_per_s": 150.0},
            {"ranks": 4, "tokens_per_s": 360.0}]
    assert judge.efficiency(rows) == {1: 1.0, 2: 0.75, 4: 0.9}
    loader = [{"workers": 0, "samples_per_s": 750.0}, {"workers": 4, "samples_per_s": 886.0},
              {"workers": 8, "samples_per_s": 1515.0}, {"workers": 15, "samples_per_s": 1420.0}]
    assert judge.saturation(loader) == (1515.0, 8)  # the H200 anchor's figures
    assert judge.node_efficiency({"tokens_per_s": 150.0}, {"a": {"tokens_per_s": 100.0},
                                                           "b": {"tokens_per_s": 50.0}}) == 1.0


def test_scaling_cause_names_comm_and_a_slow_rank():
    full = {"ranks": 4, "step_s": 0.2, "comm_share": 0.35, "compute_s": [0.1, 0.1, 0.1, 0.13]}
    cause = judge.scaling_cause(full, {"step_s": 0.1}, [])
    assert "35% of the step waits on the gradient all-reduce" in cause
    assert "rank 3 steps in 130.0 ms alone vs the median 100.0 ms" in cause
    assert "at 4 ranks vs 100.0 ms as the only rank" in cause


def test_host_link_judged_on_a_recorded_h200_doc():
    """A recorded probe_hostlink document (the 1x H200 anchor's figures; no GPU here), one GPU
    made slow and placed off the process's NUMA node."""
    doc = {"process_cpus": "0-15", "gpus": [
        {"index": 0, "h2d_pinned": 55.5, "d2h_pinned": 55.3, "h2d_pageable": 21.3, "numa_node": 0,
         "local_cpus": "0-15", "process_on_gpu_node": True},
        {"index": 1, "h2d_pinned": 26.1, "d2h_pinned": 50.2, "h2d_pageable": 12.0, "numa_node": 1,
         "local_cpus": "16-31", "process_on_gpu_node": False}]}
    assert judge.slowest_link(doc["gpus"]) == (26.1, "GPU 1 H2D pinned")
    assert judge.placement(doc) == ["GPU 1 is on NUMA node 1 (CPUs 16-31) but the process ran on CPUs 0-15"]


def test_hostlink_cpu_lists_and_gpu_less_host():
    hl = probe("hostlink")
    assert hl.cpulist("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert hl.fmt({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    out = subprocess.run([sys.executable, str(ROOT / "signoff/training/probe_hostlink.py")],
                         capture_output=True, text=True, timeout=120)
    doc = json.loads(out.stdout)
    assert out.returncode == 0 and doc["gpus"] == [] and doc["cuda"] is False, out.stderr


def test_widths_and_worker_counts():
    assert probe("train").widths_for(8, "") == [1, 2, 4, 8]
    assert probe("train").widths_for(6, "") == [1, 2, 4, 6]
    assert probe("train").widths_for(1, "") == [1]
    assert probe("loader").worker_counts("", 16) == [0, 1, 2, 4, 8, 15]
    assert probe("loader").worker_counts("", 2) == [0, 1]


def test_node_counts_and_step_arguments():
    from signoff.training.run import node_counts, step_args
    assert node_counts(2) == [2] and node_counts(5) == [2, 4, 5] and node_counts(8) == [2, 4, 8]
    args = step_args(section(profiles.load("local")))
    assert args[:4] == ["--layers", "2", "--d-model", "64"]
    assert args[-4:] == ["--lr", "0.001", "--threads", "1"]


def test_report_section_lists_widths_and_the_slowest_node():
    from signoff.training.report import training_section
    widths = [{"ranks": 1, "step_s": 0.157, "tokens_per_s": 104000.0, "tflops_per_gpu": 441.0,
               "comm_share": 0.0},
              {"ranks": 2, "step_s": 0.16, "tokens_per_s": 204000.0, "tflops_per_gpu": 432.0,
               "comm_share": 0.02}]
    recs = [{"criterion": "train_throughput", "host": "n1", "status": "PASS", "details": {"widths": widths}},
            {"criterion": "train_scaling_host", "host": "n1", "status": "FAIL",
             "details": {"efficiency": {1: 1.0, 2: 0.98}}},
            {"criterion": "train_scaling_nodes", "host": "all hosts", "status": "PASS",
             "details": {"efficiency": {"2": 0.97}, "slowest_node": "n2"}}]
    html = training_section(recs)
    assert "<td>n1</td><td>2</td><td>160.0</td><td>204000</td><td>432</td><td>2%</td><td>0.98</td>" in html
    assert "efficiency 2 nodes 0.97; slowest node <b>n2</b>" in html and "so-FAIL" in html
    assert training_section([]) == ""


def test_methodology_states_the_model_formula_and_loader():
    from signoff.training.report import methodology
    rows = methodology({"results": []}, profiles.load("h200-8x-nvlink@1"))
    assert "12 x nn.TransformerEncoderLayer(2048, 16 heads, ffn 8192" in rows[0]["how"]
    assert "6 x params x batch x seq + 12 x layers x batch x seq^2 x d_model" in rows[0]["how"]
    assert "uint8 3x256x256 -> bilinear 224x224" in rows[1]["how"] and "1 GiB per GPU" in rows[2]["how"]


@pytest.mark.parametrize("probe", ["training/probe_train.py", "interconnect/probe_allreduce.py"])
def test_a_rank_that_raises_leaves_no_error_file_in_the_hosts_temp_dir(tmp_path, probe):
    """A node whose peers never come (node 1 of 2, node 0's store on a port nobody serves): each
    rank raises, and torch.multiprocessing writes its error file to the temp dir and never
    removes it. The probe's own dir takes it, and goes: the host's temp dir and the cwd stay
    as they were (18 pytorch-errorfile-*.pickle in /tmp after 5 runs of this suite, before)."""
    import os
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    path = Path(__file__).resolve().parent.parent / "signoff" / probe
    r = subprocess.run([sys.executable, str(path), "--backend", "gloo", "--nnodes", "2", "--node-rank", "1",
                        "--master-addr", "127.0.0.1", "--master-port", "1", "--timeout", "2"], cwd=cwd,
                       env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=120)
    doc = json.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 1 and "ProcessRaisedException" in doc["error"], doc
    assert list(tmp.iterdir()) == [] and list(cwd.iterdir()) == []


@pytest.mark.parametrize("backend, gpus, method",
                         [("gloo", 0, "fork"), ("gloo", 1, "spawn"), ("nccl", 8, "spawn")])
def test_ranks_fork_only_where_no_cuda_was_initialised(backend, gpus, method):
    """gloo's ranks by hand on an H200 forked after the GPU count had initialised CUDA: the
    training rank's AdamW then failed "CUDA error: initialization error" (docs/h200.md)."""
    from signoff import probelib
    assert probelib.start_method(backend, gpus) == method


def test_a_spawned_rank_makes_its_temp_files_in_the_probes_own_dir(tmp_path):
    """NCCL's ranks spawn (a fresh interpreter: no copy of tempfile.tempdir), and on an H200 one
    made torch's inductor cache dir in the host's /tmp. After probelib.own_temp, the probe's
    temp dir is its own dir in itself, in a forked rank and in a spawned one."""
    script = tmp_path / "where.py"
    script.write_text(
        "import multiprocessing as mp, sys, tempfile\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "import probelib\n"
        "def where(q):\n    q.put(tempfile.gettempdir())\n"
        "if __name__ == '__main__':\n"
        "    probelib.own_temp(sys.argv[2])\n"
        "    seen = [tempfile.gettempdir()]\n"
        "    for ctx in (mp.get_context('fork'), mp.get_context('spawn')):\n"
        "        q = ctx.Queue()\n        p = ctx.Process(target=where, args=(q,))\n"
        "        p.start()\n        seen.append(q.get(timeout=120))\n        p.join()\n"
        "    print(*seen)\n")
    own = tmp_path / "allreduce.x"
    own.mkdir()
    lib = Path(__file__).resolve().parent.parent / "signoff"
    r = subprocess.run([sys.executable, str(script), str(lib), "allreduce.x"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(own)] * 3


@pytest.mark.parametrize("probe, args", [
    ("training/probe_train.py", None),  # local's training step
    ("interconnect/probe_allreduce.py", ["--min-bytes", "1M", "--max-bytes", "1M"]),
])
def test_a_gloo_rank_that_aborts_once_is_run_again_and_said(tmp_path, probe, args):
    """The training and all-reduce probes for real on this CPU, rank 1 aborting (SIGABRT) in
    its first run: the probe runs once more (gloo's own crash, pytorch/gloo#514, seen under
    srun on the lab) and says so in its document; a second abort would be its error."""
    import os

    from signoff import profiles
    from signoff.training import section
    from signoff.training.run import step_args
    path = Path(__file__).resolve().parent.parent / "signoff" / probe
    argv = args or step_args(section(profiles.load("local")))
    env = {**os.environ, "SIGNOFF_ABORT_ONCE": str(tmp_path / "aborted")}
    r = subprocess.run([sys.executable, str(path), *argv], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    doc = json.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 0 and "error" not in doc, r.stderr[-2000:]
    assert doc["restarted"].startswith("rank 1 aborted (SIGABRT) in the first run"), doc
    assert (tmp_path / "aborted").exists() and (doc.get("widths") or doc.get("rows")), doc


def test_the_slowest_node_is_the_one_its_figures_show_not_the_noise_of_its_own_step():
    """Issue 51 item 19: lab3's link slowed, train_scaling_nodes named lab2, whose own step (no
    gradient sync) was 4 % above the others' by noise: a slow link never slows a node's own
    step. The efficiency fell when lab3 joined (0.93 over lab[1-2], 0.31 over all three): lab3.
    A node whose own step stands out is named by it; where nothing stands out, none is named."""
    own = {2: {"lab1": 0.100, "lab2": 0.104}, 3: {"lab1": 0.101, "lab2": 0.105, "lab3": 0.100}}
    who, why = judge.slowest_node(own, {2: 0.93, 3: 0.31})
    assert who == "lab3", why
    assert why == ("slowest node lab3: the scaling efficiency fell from 0.93 over 2 nodes to 0.31 over 3 "
                   "when it joined: its link or NIC (its own step within 1.25 x the others')")
    slow = {**own, 3: {**own[3], "lab2": 0.160}}  # a straggler: lab2's own step 1.6 x the others'
    assert judge.slowest_node(slow, {2: 0.93, 3: 0.31}) == (
        "lab2", "slowest node lab2: 160.0 ms per step without gradient sync, 1.59 x the other nodes' median")
    who, why = judge.slowest_node(own, {2: 0.93, 3: 0.9})
    assert who is None and why.startswith("no node stands out"), why
    # four nodes, two joining at once: not one of them is named
    four = {2: {"a": 0.1, "b": 0.1}, 4: {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.1}}
    assert judge.slowest_node(four, {2: 0.95, 4: 0.4}) == (None, (
        "slowest node one of c, d: the scaling efficiency fell from 0.95 over 2 nodes to 0.4 over 4 when it "
        "joined: its link or NIC (its own step within 1.25 x the others')"))
