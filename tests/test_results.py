"""signoff.results: node ids, status ranking, verdict and results.json."""

from __future__ import annotations

import json

import pytest

from signoff.results import ALL, Results, split_nodeid, verdict, worse


@pytest.mark.parametrize("nodeid, want", [
    ("acceptance/test_gpu_health.py::test_ecc_enabled[node01]", ("ecc_enabled", "node01")),
    ("acceptance/test_versions.py::test_version_parity", ("version_parity", ALL)),
    ("acceptance/test_gpu_health.py::test_row_remap[gpu-3.example]@node",
     ("row_remap", "gpu-3.example")),
    ("acceptance/test_x.py::test_plain@grp", ("plain", ALL)),
    ("acceptance/test_x.py::TestC::test_m[h1]", ("m", "h1")),
])
def test_split_nodeid(nodeid, want):
    assert split_nodeid(nodeid) == want


def test_split_nodeid_host_with_at_sign():
    assert split_nodeid("acceptance/t.py::test_x[root@node01]@grp") == ("x", "root@node01")


def test_worse_ranks_statuses():
    assert worse(None, "PASS") == "PASS"
    assert worse("PASS", "N.A.") == "N.A."
    assert worse("N.A.", "NOT RUN") == "NOT RUN"
    assert worse("NOT RUN", "FAIL") == "FAIL"
    assert worse("FAIL", "ERROR") == "ERROR"
    assert worse("ERROR", "PASS") == "ERROR"
    assert worse("FAIL", "N.A.") == "FAIL"


def recs(*statuses: str) -> list[dict]:
    return [{"status": s} for s in statuses]


@pytest.mark.parametrize("statuses, want", [
    (("PASS", "PASS"), "PASS"),
    (("PASS", "FAIL"), "FAIL"),
    (("PASS", "ERROR"), "FAIL"),
    (("NOT RUN", "FAIL"), "FAIL"),
    (("PASS", "NOT RUN"), "INCOMPLETE"),
    (("N.A.", "N.A."), "INCOMPLETE"),
    ((), "INCOMPLETE"),
    (("PASS", "N.A."), "PASS"),
])
def test_verdict(statuses, want):
    assert verdict(recs(*statuses)) == want


def test_results_json_is_rewritten_after_every_add(tmp_path):
    path = tmp_path / "results.json"
    res = Results(path, {"profile": "local"})
    doc = json.loads(path.read_text())
    assert doc["results"] == [] and doc["verdict"] is None
    assert doc["meta"]["profile"] == "local" and doc["meta"]["started"]
    for i, status in enumerate(["PASS", "N.A.", "FAIL"], 1):
        res.add({"test": f"t{i}", "status": status})
        doc = json.loads(path.read_text())
        assert [r["status"] for r in doc["results"]] == ["PASS", "N.A.", "FAIL"][:i]
    res.set_host("n1", {"python": "3.11"})
    assert json.loads(path.read_text())["hosts"] == {"n1": {"python": "3.11"}}
    assert res.finish() == "FAIL"
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "FAIL" and doc["meta"]["interrupted"] is False
    assert doc["meta"]["finished"]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temp file left


def test_interrupted_run_is_incomplete(tmp_path):
    res = Results(tmp_path / "results.json", {})
    res.add({"status": "PASS"})
    assert res.finish(interrupted=True) == "INCOMPLETE"
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["verdict"] == "INCOMPLETE" and doc["meta"]["interrupted"] is True
