"""The model-parallel step without a lab: the schedule's arithmetic, the judgement of
signoff/training/parallel.py against the profiles, the probe run for real on this machine's
CPU (2 gloo ranks) with a fake slow stage, and the plan's line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import InputError, profiles
from signoff.training import estimate, parallel, section

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "signoff" / "training" / "probe_parallel.py"


def test_ideal_bubble_is_gpipes_share_of_the_step():
    assert parallel.ideal_bubble(2, 8) == pytest.approx(1 / 9)
    assert parallel.ideal_bubble(8, 32) == pytest.approx(7 / 39)
    assert parallel.ideal_bubble(4, 1) == pytest.approx(0.75)  # one micro-batch: no overlap at all


def test_derived_floor_is_a_fraction_of_the_class_step_and_errors_without_one(tmp_path):
    h200 = profiles.load("h200-8x-nvlink")
    t = parallel.floor(h200.threshold("tp_step_tflops"), h200)
    assert t.value == round(0.5 * 419, 6) and t.unit == "TFLOP/s"
    assert t.source.startswith("derived: 0.5 x train_throughput 419 TFLOP/s (train_throughput: 0.95 x 441")
    pp = parallel.floor(h200.threshold("pipeline_step_tflops"), h200, parallel.ideal_bubble(8, 32))
    assert pp.value == round(0.5 * 419 * (1 - 7 / 39), 6) and "x (1 - the ideal bubble 0.1795)" in pp.source
    a100 = profiles.load("a100-8x-nvlink")  # no train_throughput figure for the class: ERROR, said so
    with pytest.raises(InputError, match="tp_step_tflops is derived from the class's train_throughput .* "
                                         "has no threshold for it: no figure to judge the step by"):
        parallel.floor(a100.threshold("tp_step_tflops"), a100)
    lab = profiles.load(str(ROOT / "tests/profiles/lab.yaml"))  # a plain floor stands as it is
    assert parallel.floor(lab.threshold("tp_step_tflops"), lab) is lab.threshold("tp_step_tflops")


def test_bubble_limit_is_the_ideal_plus_the_margin_and_a_slow_stage_is_named():
    h200 = profiles.load("h200-8x-nvlink")
    t = parallel.bubble_limit(h200.threshold("pipeline_bubble"), 1 / 9)
    assert t.value == 0.2111 and t.op == "max" and t.ok(0.2) and not t.ok(0.25)
    assert t.source.startswith("the schedule's ideal bubble (p-1)/(m+p-1) = 0.1111 + 0.1 (GPipe's")
    stages = [{"stage": 0, "busy_s": 0.010, "bubble": 0.9}, {"stage": 1, "busy_s": 0.400, "bubble": 0.02},
              {"stage": 2, "busy_s": 0.011, "bubble": 0.88}]
    assert parallel.slow_stage(stages) == (1, "stage 1 is busy 400.0 ms per step, 38.1 x the other stages' "
                                              "median 10.5 ms: the others wait on it")
    assert parallel.idlest(stages)["stage"] == 0
    even = [{"stage": i, "busy_s": 0.010 + i * 1e-3, "bubble": 0.2} for i in range(3)]
    assert parallel.slow_stage(even)[0] is None


def test_tensor_parallel_is_na_without_nvlink_and_judged_inside_it():
    nvl, bare = [{"nvlink": {"links": 18}}] * 2, [{"nvlink": {"links": 0}}] * 2
    for name in ("l40s-8x-pcie", "a100-80gb-8x-pcie", "rtx4090-8x-pcie"):  # PCIe classes: N.A., said why
        why = parallel.tp_not_laid(profiles.load(name), bare)
        assert why.startswith(f"profile {name}'s GPUs talk over PCIE only (hardware.interconnect pcie): "
                              "tensor parallelism is laid inside an NVLink domain (Megatron-LM: "
                              "arXiv:2104.04473, section 3.2); the pipeline steps are judged"), why
    h200 = profiles.load("h200-8x-nvlink")  # an NVLink class is judged, its NVLink down too (a FAIL)
    assert parallel.tp_not_laid(h200, nvl) is None and parallel.tp_not_laid(h200, bare) is None
    lab = profiles.load(str(ROOT / "tests/profiles/lab.yaml"))  # interconnect any
    assert parallel.tp_not_laid(lab, []) is None  # gloo ranks: the lab's own floors
    assert parallel.tp_not_laid(lab, nvl) is None
    assert parallel.tp_not_laid(lab, bare).startswith("no NVLink between this host's GPUs")


def test_probelib_starts_the_collective_probes_ranks_and_says_when_torch_is_missing(monkeypatch):
    import argparse
    import importlib.util
    spec = importlib.util.spec_from_file_location("probelib_t", ROOT / "signoff" / "probelib.py")
    lib = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lib)
    args, doc = argparse.Namespace(backend="gloo", nprocs=0), {}
    torch, mp, gpus, ranks = lib.torch_ranks(doc, args)
    assert (args.backend, ranks, doc) == ("gloo", 2, {}) and mp.__name__ == "torch.multiprocessing"
    args.nprocs = 3
    assert lib.torch_ranks(doc, args)[3] == 3
    monkeypatch.setitem(sys.modules, "torch", None)  # a host without torch: the document says so
    assert lib.torch_ranks(doc, argparse.Namespace(backend="auto", nprocs=0)) is None
    assert doc["error"].startswith("torch not importable: ")


@pytest.mark.parametrize("text, msg", [
    ("training: {parallel: {micro_batches: 0}}\n", "parallel.micro_batches: expected an integer >= 1"),
    ("training: {parallel: {stage: 1}}\n", "training.parallel.stage: unknown key"),
    ("training: {parallel: {delay_ms: -1}}\n", "training.parallel.delay_ms: expected a number >= 0"),
])
def test_bad_parallel_section_names_the_key(tmp_path, text, msg):
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\n" + text)
    with pytest.raises(InputError, match=msg):
        profiles.load(str(p))


def test_plan_lists_the_steps_and_their_time():
    class Cfg:
        pass
    picked = {"tp_step_tflops", "pipeline_bubble"}
    (line,) = estimate(Cfg(), profiles.load("h200-8x-nvlink"), picked, [])
    assert line.startswith("model-parallel steps (tensor-parallel, then a GPipe pipeline over 8 ranks; at "
                           "train_throughput's 419 TFLOP/s): ") and line.endswith(" s"), line
    sec = section(profiles.load("h200-8x-nvlink"))
    assert parallel.plan_seconds(sec, 8, 419) > 0
    assert estimate(Cfg(), profiles.load("h200-8x-nvlink@1"), picked, []) == [
        "model-parallel steps: N.A. on these hosts (one GPU each): no time"]
    assert estimate(Cfg(), profiles.load("a100-8x-nvlink"), picked, []) == [
        "model-parallel steps (tp_step_tflops, pipeline_bubble): time unknown (no train_throughput figure)"]
    assert estimate(Cfg(), profiles.load("h200-8x-nvlink"), {"train_throughput"}, []) == []


def run_probe(tmp_path, *args) -> dict:
    p = subprocess.run([sys.executable, str(PROBE), "--layers", "2", "--d-model", "32", "--ffn", "64",
                        "--seq", "8", "--batch", "2", "--warmup", "1", "--steps", "2", *args],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert not list(tmp_path.iterdir())  # nothing left in its cwd
    return json.loads(p.stdout)


def test_probe_runs_both_steps_on_gloo_ranks_and_a_fake_slow_stage_idles_the_other(tmp_path):
    doc = run_probe(tmp_path, "--micro-batches", "4", "--delay-ms", "30", "--delay-stage", "1")
    tp, pp = doc["tensor_parallel"], doc["pipeline"]
    assert doc["backend"] == "gloo" and doc["local_ranks"] == 2
    assert tp["ranks"] == 2 and tp["ffn_per_rank"] == 32 and tp["params"] == 2 * 2 * 32 * 64
    assert tp["flop_per_step_per_gpu"] == 6 * tp["params"] * 2 * 8 / 2 and tp["allreduces_per_step"] == 4
    assert 0 <= tp["comm_share"] <= 1 and len(tp["compute_s"]) == 2
    assert pp["schedule"] == "GPipe" and pp["micro_batches"] == 4 and pp["ideal_bubble"] == 0.2
    assert pp["flop_per_step_per_gpu"] == 6 * pp["params"] * 4 * 2 * 8 / 2
    slow, fast = pp["stages"][1], pp["stages"][0]
    assert slow["busy_s"] >= 4 * 0.030  # 4 micro-batches of 30 ms on stage 1
    assert parallel.slow_stage(pp["stages"])[0] == 1 and parallel.idlest(pp["stages"]) is fast
    assert pp["delay"] == {"stage": 1, "ms": 30}


def test_probe_on_one_rank_says_not_applicable(tmp_path):
    doc = run_probe(tmp_path, "--nprocs", "1")
    assert doc["not_applicable"] == "one rank: no model to split over ranks" and "pipeline" not in doc


def test_report_section_shows_both_steps_escaped():
    from signoff.training.report import training_section
    tp = {"ranks": 2, "step_s": 0.0068, "tflops_per_gpu": 0.0019, "comm_share": 0.83}
    pp = {"ranks": 2, "step_s": 0.83, "tflops_per_gpu": 0.0001, "comm_share": 0.01, "bubble": 0.97,
          "ideal_bubble": 0.1111, "schedule": "GPipe", "micro_batches": 8}
    recs = [{"criterion": "tp_step_tflops", "host": "<b>h1", "status": "PASS",
             "details": {"tensor_parallel": tp}},
            {"criterion": "tp_comm_share", "host": "<b>h1", "status": "FAIL", "details": {}},
            {"criterion": "pipeline_step_tflops", "host": "<b>h1", "status": "PASS",
             "details": {"pipeline": pp}},
            {"criterion": "pipeline_bubble", "host": "<b>h1", "status": "FAIL", "details": {}}]
    html = training_section(recs)
    assert "<h3>Model-parallel steps</h3>" in html and "&lt;b&gt;h1" in html and "<b>h1" not in html
    assert "tensor parallel (Megatron MLP)" in html and "pipeline (GPipe, 8 micro-batches)" in html
    assert "97% (ideal 11%)" in html and "83%" in html and html.count("class='so-FAIL'") == 2, html
