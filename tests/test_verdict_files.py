"""results.json, junit.xml and report.html say the same status for every check, and a run
that leaves part of the sign-off sheet unjudged is never a PASS, whatever flag trimmed it."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter

from test_cli import QUICK, ROOT, run
from test_gpu_faults_recorded import RECORDED, recorded_inventory

from signoff import recorder
from signoff.results import load as load_results

JUNIT = {"failure": "FAIL", "error": None, "skipped": "N.A."}  # error: ERROR or NOT RUN, by type


def junit_statuses(path) -> tuple[dict, ET.Element]:
    suite = ET.parse(path).getroot().find("testsuite")
    out = {}
    for case in suite.iter("testcase"):
        outcome = [c for c in case if c.tag in JUNIT]
        assert len(outcome) <= 1, case.get("name")  # said once: by the element (and its type)
        status = "PASS" if not outcome else JUNIT[outcome[0].tag] or outcome[0].get("type")
        assert status == "PASS" or outcome[0].get("type") == status, (case.get("name"), status)
        out[f"{case.get('classname')}::{case.get('name')}"] = status
    return out, suite


def html_statuses(path) -> dict:
    blob = re.search(r'data-jsonblob="([^"]*)"', path.read_text()).group(1)
    tests = json.loads(html.unescape(blob))["tests"]
    out = {}
    for nodeid, rows in tests.items():
        for row in rows:
            out[nodeid] = re.sub(r"<[^>]+>", "", row["resultsTableRow"][1])  # our Status column
    return out


def test_results_junit_and_report_agree(tmp_path):
    prof = tmp_path / "p.yaml"
    prof.write_text("extends: local\ncriteria:\n  allreduce_busbw: {min: 100000, unit: GB/s, size: 1M, "
                    "sweep: [1M, 1M], attempts: 1, "
                    "source: 'a limit no CPU reaches, to make this check FAIL'}\n")
    p = run("--report-dir", str(tmp_path / "r"), "--profile", str(prof), "--storage-path", "/nonexistent",
            "-k", "allreduce_busbw or allreduce_correct or storage_read_seq or ecc_enabled", "--partial")
    doc = load_results(tmp_path / "r" / "results.json")
    ours = {r["test"]: r["status"] for r in doc["results"]}
    assert set(ours.values()) == {"PASS", "FAIL", "ERROR", "N.A."}, (ours, p.stdout)
    junit, suite = junit_statuses(tmp_path / "r" / "junit.xml")
    verdict = junit.pop("signoff::verdict")
    assert {k.replace(".", "/", 1).replace("::", ".py::", 1): v for k, v in junit.items()} == ours
    assert verdict == "FAIL" and doc["verdict"] == "FAIL" and p.returncode == 1
    assert suite.get("errors") == "1" and suite.get("failures") == "2" and suite.get("skipped") == "1"
    page = (tmp_path / "r" / "report.html").read_text()
    assert html_statuses(tmp_path / "r" / "report.html") == ours
    # the page's counts are ours; pytest-html's (2 Failed, 1 Skipped here) are hidden
    shown = {s: int(n) for s, n in re.findall(r"data-status='([^']+)'>(\d+) ", page)}
    assert shown == dict(Counter(ours.values())), shown
    # pytest-html's outcome column (its filter's) and its show/hide-all buttons hidden, no Links column
    assert "td.col-result,#show_all_details,#hide_all_details{display:none}" in page
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="([^"]*)"', page).group(1)))
    cells = [c for rows in blob["tests"].values() for row in rows for c in row["resultsTableRow"]]
    assert "<th>Links</th>" not in page and cells and not any("col-links" in c for c in cells)
    # one check is one row named by its id (pytest-html names a check that ended in its setup,
    # the ERROR and the N.A. here, "<id>::setup"), timed by all its phases as results.json says
    took = {r["test"]: r["duration_s"] for r in doc["results"]}
    for nodeid, rows in blob["tests"].items():
        (row,) = rows
        shown_id = re.sub(r"<[^>]+>", "", next(c for c in row["resultsTableRow"] if "col-testId" in c))
        assert shown_id == nodeid, shown_id
        d = re.sub(r"<[^>]+>", "", next(c for c in row["resultsTableRow"] if "col-duration" in c))
        assert d == recorder.html_duration(took[nodeid]), (nodeid, d, took[nodeid])


def _judged(tmp_path, *args):
    p = run("--report-dir", str(tmp_path), "--profile", QUICK, *args)  # the flags under test, not the sweep
    doc = load_results(tmp_path / "results.json")
    junit, _ = junit_statuses(tmp_path / "junit.xml")
    return p, doc, junit


def test_subsets_by_any_flag_are_incomplete(tmp_path):
    # sdc passes on any machine (a CPU's matmuls agree with themselves; 1.6 s, where a 2-rank
    # all-reduce took 7): each run below judged only PASSes.
    for i, flags in enumerate([["--ignore-glob=*/test_[!h]*.py", "-k", "sdc"],
                               ["-o", "python_functions=test_sd*"],
                               ["--deselect", "acceptance/test_versions.py", "-k", "sdc"]]):
        p, doc, junit = _judged(tmp_path / str(i), *flags)
        assert {r["status"] for r in doc["results"]} == {"PASS"}, (flags, p.stdout)
        assert doc["verdict"] == "INCOMPLETE" and p.returncode == 3, (flags, p.stdout)
        assert "of the sign-off sheet not judged" in doc["meta"]["partial"]
        assert "version_parity[localhost]" in doc["meta"]["not_judged"]
        assert junit["signoff::verdict"] == "FAIL"
    # the same subset, accepted as one
    p, doc, junit = _judged(tmp_path / "ok", "-o", "python_functions=test_sd*", "--partial")
    assert doc["verdict"] == "PASS" and p.returncode == 0, p.stdout
    assert junit["signoff::verdict"] == "PASS"


def test_a_fail_then_a_teardown_error_keeps_both_reasons(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "@pytest.fixture\n"
        "def broken_cleanup():\n"
        "    yield\n"
        "    raise RuntimeError('cleanup could not reach the host')\n"
        "def test_judged(broken_cleanup):\n"
        "    assert False, 'busbw 12 GB/s, expected >= 300'\n")
    subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_x.py"), "-p", "signoff.plugin",
                    "--report-dir", str(tmp_path / "r"), "--profile", "local", "-p", "no:cacheprovider"],
                   cwd=ROOT, capture_output=True, text=True, timeout=120)
    (rec,) = load_results(tmp_path / "r" / "results.json")["results"]
    assert rec["status"] == "ERROR"
    assert "cleanup could not reach the host" in rec["message"] and "busbw 12 GB/s" in rec["message"]


def test_a_reused_report_dir_holds_this_run_alone(tmp_path):
    """An earlier run's files in --report-dir (its hosts/*.json above all) never join this run."""
    rd = tmp_path / "r"
    (rd / "hosts").mkdir(parents=True)
    (rd / "hosts" / "ghost017.json").write_text(json.dumps({"python": "3.9", "hostname": "ghost017"}))
    (rd / "soak").mkdir()
    (rd / "soak" / "ghost017.jsonl").write_text("{}\n")
    (rd / "notes.txt").write_text("the user's own file")
    run("--report-dir", str(rd), "--profile", "local", "-k", "torch_cuda_build", "--partial")
    doc = load_results(rd / "results.json")
    assert list(doc["hosts"]) == ["localhost"] and doc["meta"]["hosts"] == ["localhost"]
    assert not (rd / "hosts" / "ghost017.json").exists() and not (rd / "soak").exists()
    assert "ghost017" not in (rd / "report.html").read_text()
    assert (rd / "notes.txt").read_text() == "the user's own file"  # only the run's own files go


def test_an_error_only_local_run_reads_error_in_every_output(tmp_path):
    """The probes' interpreter lacks torch (issue 29: `--python /usr/bin/python3`): nothing is
    judged outside a threshold, so the verdict is ERROR ("not signed off: could not measure"),
    not FAIL, in the terminal, report.md, results.json, junit.xml and the cover; exit 2."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    rd = tmp_path / "r"
    bare = str(tmp_path / "bare" / "bin" / "python")
    p = run("--report-dir", str(rd), "--profile", QUICK, "--python", bare,
            "-k", "allreduce_correct or allreduce_busbw or ecc_enabled", "--partial")
    assert (rd / "results.json").exists(), (p.stdout, p.stderr)
    doc = load_results(rd / "results.json")
    assert {r["status"] for r in doc["results"]} == {"ERROR", "N.A."}, p.stdout
    assert doc["verdict"] == "ERROR" and p.returncode == 2 and doc["meta"]["exit_code"] == 2, p.stdout
    said = "ERROR (not signed off: could not measure)"
    assert f"verdict: {said}  (profile " in p.stdout
    assert "exit code 2: ERROR: no FAIL, but 2 ERROR" in p.stdout
    assert (rd / "report.md").read_text().startswith(f"# GPU cluster sign-off: {said}\n")
    junit, suite = junit_statuses(rd / "junit.xml")
    assert junit["signoff::verdict"] == "ERROR" and suite.find("properties/property[@name='verdict']").get(
        "value") == "ERROR" and suite.get("failures") == "0"
    assert f"sign-off verdict {said}: " in (rd / "junit.xml").read_text()
    assert "<span class='so-verdict so-ERROR'>ERROR</span> (not signed off: could not measure)" in (
        rd / "report.html").read_text()


def test_a_gpu_less_host_under_a_gpu_profile_is_one_fail_line_in_every_output(tmp_path):
    """Issue 31 item 4: a host with no GPU FAILs every GPU check with one cause; the terminal,
    report.md and the cover said it once per check. Folded by cause as the ERRORs are: one
    line, the checks counted."""
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]  # a real H200's, its GPU gone
    facts["nvidia"] = {"available": False, "error": "NVML Shared Library Not Found", "pci_devices": 0}
    rd = tmp_path / "r"
    p = run("acceptance/test_gpu_health.py", "--report-dir", str(rd), "--profile", "h200-8x-nvlink@2",
            "--partial", "--inventory", str(recorded_inventory(tmp_path, facts)), command=("pytest",))
    doc = json.loads((rd / "results.json").read_text())
    fails = [r for r in doc["results"] if r["status"] == "FAIL"]
    assert len(fails) > 5 and all("no NVIDIA GPU" in r["message"] for r in fails), p.stdout
    n = len(fails)
    terminal = [ln for ln in p.stdout.splitlines() if ln.startswith("  FAIL ")]
    assert len(terminal) == 1 and terminal[0].startswith(f"  FAIL  {n} checks (") \
        and ") on gpunode: no NVIDIA GPU (" in terminal[0], p.stdout
    fix = (rd / "report.md").read_text().split("## To fix\n\n")[1].split("\n\n")[0].splitlines()
    assert len(fix) == 1 and fix[0].startswith(f"- **FAIL** `{n} checks (") and "no NVIDIA GPU" in fix[0], fix
    assert (rd / "report.html").read_text().count("<li class='so-problem'>") == 1
