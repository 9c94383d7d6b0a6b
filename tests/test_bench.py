"""The benchmarks under bench/ still find what they run (a probe moved into its family once left
bench/allreduce_fidelity.py pointing at nothing), and the fidelity bench's probe side runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("path", sorted(BENCH.glob("*.py")), ids=lambda p: p.stem)
def test_a_bench_names_probes_that_exist(path):
    mod = load(path)
    probe = getattr(mod, "PROBE", None)
    assert probe is None or Path(probe).is_file(), f"{path.name}: PROBE {probe} does not exist"


def test_fidelity_bench_measures_the_probe_side_on_cpu():
    """No GPU here: the probe's gloo all-reduce, as the bench runs it beside nccl-tests."""
    busbw, doc = load(BENCH / "allreduce_fidelity.py").probe("1M", "2M", 1, 2, eager=True)
    assert set(busbw) == {1 << 20, 2 << 20} and all(v > 0 for v in busbw.values()), doc
    assert doc["backend"] == "gloo" and doc["world_size"] == 2


def test_lab_margins_finds_the_closest_pass_to_its_floor(tmp_path):
    recs = [{"criterion": "allreduce_busbw", "status": "PASS", "measured": 0.12, "expected": ">= 0.05 GB/s"},
            {"criterion": "allreduce_busbw", "status": "PASS", "measured": 0.5, "expected": ">= 0.05 GB/s"},
            {"criterion": "allreduce_busbw", "status": "FAIL", "measured": 0.01, "expected": ">= 0.05 GB/s"},
            {"criterion": "gpu_temp", "status": "PASS", "measured": 40, "expected": "<= 80 C"}]
    for i, rs in enumerate((recs[:2], recs[2:])):
        d = tmp_path / f"test_case{i}" / "report"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps({"meta": {"profile": "local"}, "results": rs}))
    got = load(BENCH / "lab_margins.py").margins(tmp_path)
    assert got[("allreduce_busbw", "local")] == [(pytest.approx(2.4), 0.12, "test_case0"),
                                                 (pytest.approx(10.0), 0.5, "test_case0")]
    assert got[("gpu_temp", "local")] == [(2.0, 40, "test_case1")]  # a maximum: threshold / measured
