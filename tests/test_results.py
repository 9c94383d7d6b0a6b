"""signoff.results: node ids, status ranking, verdict and results.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from signoff.results import ALL, Results, rebuild, split_nodeid, verdict, worse

ROOT = Path(__file__).resolve().parent.parent


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
    (("PASS", "ERROR"), "ERROR"),  # could not measure: not a FAIL of the hardware
    (("ERROR", "FAIL", "ERROR"), "FAIL"),  # a FAIL outranks the rest
    (("ERROR", "NOT RUN"), "ERROR"),
    (("NOT RUN", "FAIL"), "FAIL"),
    (("PASS", "NOT RUN"), "INCOMPLETE"),
    (("N.A.", "N.A."), "INCOMPLETE"),
    ((), "INCOMPLETE"),
    (("PASS", "N.A."), "PASS"),
])
def test_verdict(statuses, want):
    assert verdict(recs(*statuses)) == want


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_each_change_is_one_appended_line_and_results_json_is_written_at_start_and_end(tmp_path):
    path, log = tmp_path / "results.json", tmp_path / "results.jsonl"
    log.write_text('{"type":"result","record":{"test":"of an earlier run"}}\n')  # a reused --report-dir
    res = Results(path, {"profile": "local"})
    start = path.read_text()
    doc = json.loads(start)
    assert doc["results"] == [] and doc["verdict"] is None and "finished" not in doc["meta"]
    assert doc["meta"]["profile"] == "local" and doc["meta"]["started"]
    assert doc["meta"]["log"] == "results.jsonl"
    res.select(["a.py::test_t1", "a.py::test_t2"])
    for i in range(1, 2001):  # each add writes its own line, whatever came before
        size = log.stat().st_size
        res.add({"test": f"t{i}", "status": "PASS", "message": "x" * (i % 7)})
        line = json.dumps({"type": "result", "record": res.doc["results"][-1]}, separators=(",", ":"))
        assert log.stat().st_size - size == len(line) + 1
    res.set_host("n1", {"python": "3.11"})
    res.set_live("soak", "n1", {"state": "running"})
    assert path.read_text() == start  # never rewritten while the run goes on: O(run) each time
    assert [c["type"] for c in lines(log)][-3:] == ["result", "host", "live"]
    assert res.finish() == "PASS"
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "PASS" and doc["meta"]["interrupted"] is False and doc["meta"]["finished"]
    assert len(doc["results"]) == 2000 and doc["hosts"] == {"n1": {"python": "3.11"}}
    assert lines(log)[0]["type"] == "meta" and "earlier run" not in log.read_text()
    assert doc["soak"] == {"n1": {"state": "running"}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json", "results.jsonl"]  # no temp file


def test_rebuild_after_a_kill_keeps_every_record_and_marks_the_rest_not_run(tmp_path):
    res = Results(tmp_path / "results.json", {"profile": "local"})
    res.select(["acceptance/t.py::test_a[n1]", "acceptance/t.py::test_a[n2]"])
    res.set_host("n1", {"python": "3.11"})
    res.add({"test": "acceptance/t.py::test_a[n1]", "criterion": "a", "host": "n1", "status": "PASS"})
    with (tmp_path / "results.jsonl").open("a") as f:
        f.write('{"type":"result","record":{"te')  # the line SIGKILL cut short
    doc = rebuild(tmp_path)  # what `python -m signoff.results rebuild DIR` does
    assert json.loads((tmp_path / "results.json").read_text()) == doc
    assert doc["verdict"] == "INCOMPLETE" and doc["meta"]["killed"] and doc["meta"]["interrupted"]
    assert doc["meta"]["profile"] == "local" and doc["hosts"] == {"n1": {"python": "3.11"}}
    assert [(r["host"], r["status"]) for r in doc["results"]] == [("n1", "PASS"), ("n2", "NOT RUN")]
    assert "killed before this check reported" in doc["results"][1]["message"]
    assert 'tests="3"' in (tmp_path / "junit.xml").read_text()  # 2 checks + the verdict
    md = (tmp_path / "report.md").read_text()
    assert md.startswith("# GPU cluster sign-off: INCOMPLETE") and "- **NOT RUN** `a` on n2: " in md


def test_rebuild_of_a_finished_run_gives_its_results_json(tmp_path):
    res = Results(tmp_path / "results.json", {})
    res.add({"test": "t.py::test_a", "criterion": "a", "host": "all hosts", "status": "FAIL"})
    res.finish(partial="1 check not judged")
    written = (tmp_path / "results.json").read_text()
    assert rebuild(tmp_path) == json.loads(written)


def test_rebuild_cli_names_a_directory_without_the_log(tmp_path):
    p = subprocess.run([sys.executable, "-m", "signoff.results", "rebuild", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2
    assert p.stderr.startswith(f"signoff: {tmp_path / 'results.jsonl'}: cannot read it"), p.stderr
    Results(tmp_path / "results.json", {}).add({"test": "t.py::test_a", "criterion": "a",
                                                "host": "all hosts", "status": "PASS"})
    p = subprocess.run([sys.executable, "-m", "signoff.results", "rebuild", str(tmp_path)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and "1 records, verdict INCOMPLETE (the run was killed" in p.stdout


def test_interrupted_run_is_incomplete(tmp_path):
    res = Results(tmp_path / "results.json", {})
    res.add({"status": "PASS"})
    assert res.finish(interrupted=True) == "INCOMPLETE"
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["verdict"] == "INCOMPLETE" and doc["meta"]["interrupted"] is True


def test_interrupted_run_with_a_fail_already_found_fails(tmp_path):
    res = Results(tmp_path / "results.json", {})
    res.add({"status": "PASS"})
    res.add({"status": "FAIL"})
    assert res.finish(interrupted=True) == "FAIL"
    res2 = Results(tmp_path / "r2.json", {})
    res2.add({"status": "ERROR"})  # could not measure, then Ctrl-C: nothing proves it broken
    assert res2.finish(interrupted=True) == "INCOMPLETE"


def strict(text: str):
    """json.loads as a strict parser reads it: NaN and Infinity are not JSON."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_a_nan_loss_is_written_as_strict_json_in_every_file(tmp_path):
    """A NaN loss is what train_loss_falls catches: results.json, its log and junit.xml stay
    valid for strict parsers, the value written as a string."""
    res = Results(tmp_path / "results.json", {"profile": "local"})
    res.add({"test": "acceptance/test_training.py::test_train_loss_falls[n1]",
             "criterion": "train_loss_falls",
             "host": "n1", "status": "FAIL", "measured": float("nan"), "message": "n1: loss NaN",
             "details": {"losses": [2.1, float("inf"), float("-inf")]}})
    res.finish()
    doc = strict((tmp_path / "results.json").read_text())
    assert doc["results"][0]["measured"] == "NaN"
    assert doc["results"][0]["details"]["losses"] == [2.1, "Infinity", "-Infinity"]
    assert [strict(ln) for ln in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert strict(json.dumps(rebuild(tmp_path), allow_nan=False))["results"][0]["measured"] == "NaN"


def test_junit_holds_ansi_colours_and_control_characters_as_valid_xml(tmp_path):
    """fio's stderr with colours (ESC [ 31 m) and a stray bell: CI's parser must read the file."""
    import xml.etree.ElementTree as ET

    from signoff import junit
    msg = "n1: fio failed: \x1b[31merror\x1b[0m: bad \x07 file"
    doc = {"meta": {"profile": "local"}, "verdict": "FAIL",
           "results": [{"test": "acceptance/test_storage.py::test_storage_read_seq[n1]", "host": "n1",
                        "status": "ERROR", "message": msg, "duration_s": 1.0,
                        "expected": ">= 1 \x1b[1mGB/s"}]}
    junit.write(tmp_path / "junit.xml", doc)
    root = ET.parse(tmp_path / "junit.xml").getroot()  # raised "not well-formed" before
    err = root.find(".//error")
    assert err.text == "n1: fio failed: error: bad \ufffd file" and err.get("message") == err.text
    assert {p.get("name"): p.get("value") for p in root.iter("property")}["expected"] == ">= 1 GB/s"
