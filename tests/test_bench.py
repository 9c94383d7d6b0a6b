"""The benchmarks under bench/ still find what they run (a probe moved into its family once left
bench/allreduce_fidelity.py pointing at nothing), and the fidelity bench's probe side runs."""

from __future__ import annotations

import importlib.util
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
