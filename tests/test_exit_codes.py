"""CI that means something (README: Exit codes): the exit code is the verdict's, the same in
results.json and junit.xml; pytest's closing words are signoff's statuses; --baseline's
regressions and warnings in the terminal, failing the run with --fail-on-regression; the partial
note on every output. The runs here judge a small file of made-up checks (about a second each)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from signoff import baseline, calibrate, profiles, report
from signoff.results import Results, rebuild
from signoff.results import load as load_results

CHECKS = '''
import os, signal
import pytest
from signoff.check import not_applicable
from signoff.fleet import ProbeError

def test_ok():
    pass

def test_bad():
    assert False, "busbw 12 GB/s, expected >= 300"

def test_err():
    raise ProbeError("h1: unreachable")

def test_na():
    not_applicable("no GPU")

def test_stop():
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C mid-run

@pytest.mark.parametrize("i", range(22))
def test_figure(check, i):
    check.record(50, ">= 10 GB/s", "GB/s", "test")
'''


def judge(tmp_path, *args):
    """pytest on the made-up checks as an acceptance run (--report-dir): (exit code, output,
    results.json, junit.xml's suite)."""
    f = tmp_path / "test_made_up.py"
    f.write_text(CHECKS)
    rd = tmp_path / "r"
    p = subprocess.run([sys.executable, "-m", "pytest", str(f), "-p", "signoff.plugin", "-p", "no:html",
                        "-p", "no:cacheprovider", "--report-dir", str(rd), "--profile", "local", *args],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    suite = ET.parse(rd / "junit.xml").getroot().find("testsuite")
    return p.returncode, p.stdout + p.stderr, load_results(rd / "results.json"), suite


def props(el) -> dict:
    return {p.get("name"): p.get("value") for p in el.find("properties")}


def rec(status, criterion="c", host="h"):
    return {"test": f"acceptance/t.py::test_{criterion}[{host}]", "criterion": criterion, "host": host,
            "status": status}


@pytest.mark.parametrize("statuses, kw, code", [
    (("PASS", "N.A."), {}, 0),
    (("PASS", "FAIL", "ERROR"), {}, 1),  # a judgement: fix the hardware
    (("PASS", "ERROR", "NOT RUN"), {}, 2),  # could not measure: fix the run
    (("PASS", "NOT RUN"), {}, 2),
    (("PASS", "FAIL"), {"interrupted": True}, 1),  # a FAIL found before Ctrl-C stands
    (("PASS", "ERROR"), {"interrupted": True}, 3),
    (("PASS",), {"partial": "1 check not judged"}, 3),
    (("PASS", "NOT RUN"), {"partial": "1 check not judged"}, 3),
    (("PASS",), {"partial": "1 check not judged", "allow_partial": True}, 0),
    (("N.A.",), {"partial": "1 check not judged", "allow_partial": True}, 3),  # nothing judged
    ((), {}, 3),
    (("PASS",), {"usage_error": True}, 4),  # e.g. a -k pytest refused during collection
])
def test_the_exit_code_is_the_verdicts_and_results_json_says_it(tmp_path, statuses, kw, code):
    res = Results(tmp_path / "results.json", {})
    for i, s in enumerate(statuses):
        res.add(rec(s, host=f"h{i}"))
    res.finish(**kw)
    meta = load_results(tmp_path / "results.json")["meta"]
    assert meta["exit_code"] == code, meta
    assert meta["exit_reason"].startswith({0: "PASS", 1: "FAIL", 2: ("ERROR", "NOT RUN"),
                                           3: "INCOMPLETE", 4: "usage"}[code]), meta


def test_a_regression_fails_a_pass_only_when_asked_and_a_killed_run_is_incomplete(tmp_path):
    regressed = {"regressions": [{"criterion": "c", "host": "h0", "status": "PASS", "measured": 80,
                                  "baseline": 100, "change_pct": -20.0}]}
    for flag, code in ((False, 0), (True, 1)):
        (tmp_path / f"{flag}").mkdir()
        res = Results(tmp_path / f"{flag}" / "results.json", {})
        res.add(rec("PASS", host="h0"))
        res.set_meta(baseline=regressed)
        res.finish(fail_on_regression=flag)
        assert (res.doc["meta"]["exit_code"], res.doc["verdict"]) == (code, "PASS")
    said = res.doc["meta"]["exit_reason"]
    assert said == "PASS, but 1 regression against the baseline (--fail-on-regression)"
    (tmp_path / "True" / "results.json").unlink()
    log = tmp_path / "True" / "results.jsonl"  # killed before its end: no finish line
    log.write_text("".join(ln + "\n" for ln in log.read_text().splitlines() if '"finish"' not in ln))
    assert rebuild(tmp_path / "True")["meta"]["exit_code"] == 3


def test_a_killed_run_with_a_judged_fail_rebuilds_to_fail_exit_1(tmp_path):
    """A FAIL judged before the controller was killed stands, as one judged before Ctrl-C
    (README: Exit codes, 1); the rebuild had made it INCOMPLETE, exit 3 (issue 32 item 12)."""
    res = Results(tmp_path / "results.json", {})
    res.select([f"acceptance/t.py::test_c[h{i}]" for i in range(3)])
    res.add(rec("PASS", host="h0"))
    res.add(rec("FAIL", host="h1"))  # h2's check never reported: the kill
    (tmp_path / "results.json").unlink()
    p = subprocess.run([sys.executable, "-m", "signoff.results", "rebuild", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert (doc["verdict"], doc["meta"]["exit_code"], doc["meta"]["killed"]) == ("FAIL", 1, True), doc["meta"]
    assert doc["meta"]["exit_reason"] == "FAIL: 1 FAIL, 1 NOT RUN"
    assert "verdict FAIL (the run was killed: rebuilt from its log); the run's exit code 1: FAIL" in p.stdout
    assert props(ET.parse(tmp_path / "junit.xml").getroot().find("testsuite"))["exit_code"] == "1"
    assert (tmp_path / "report.md").read_text().startswith("# GPU cluster sign-off: FAIL")


def test_an_error_only_run_exits_2_in_signoffs_words(tmp_path):
    """pytest said '1 failed, 1 passed, 1 skipped' and exit 1 for this run; -r lines name the
    check's status, and --tb still shows pytest's sections. Its verdict is ERROR, not FAIL (a
    provider reads FAIL as "the hardware failed"), in every output."""
    rc, out, doc, suite = judge(tmp_path, "--partial", "-k", "ok or err or na", "-rfEs", "--tb=short")
    assert rc == 2 and doc["verdict"] == "ERROR" and doc["meta"]["exit_code"] == 2, out
    assert doc["meta"]["profile_sha256"] == profiles.digest(profiles.load("local"))  # what calibrate checks
    assert props(suite)["exit_code"] == "2" and "exit code 2: ERROR: no FAIL, but 1 ERROR" in out
    assert "verdict: ERROR (not signed off: could not measure)  (profile local; " in out
    assert props(suite)["verdict"] == "ERROR" and suite.get("failures") == "0" and suite.get("errors") == "2"
    error = suite.find("testcase[@name='verdict']/error")  # an <error> as its checks, not a <failure>
    assert error.get("type") == "ERROR" and error.get("message").startswith(
        "sign-off verdict ERROR (not signed off: could not measure): ")
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith("# GPU cluster sign-off: ERROR (not signed off: could not measure)\n"), md[:200]
    assert "<span class='so-verdict so-ERROR'>ERROR</span> (not signed off: could not measure)</h2>" \
        in report.cover(doc["verdict"], doc)
    assert re.search(r"test_made_up\.py \.E- +\[100%\]", out), out  # one letter per check
    closing = out.strip().splitlines()[-1]
    assert re.fullmatch(r"=+ 24 deselected, 1 PASS, 1 ERROR, 1 N\.A\. in [\d.]+s =+", closing), closing
    assert "ERROR test_made_up.py::test_err - h1: unreachable" in out  # -rE, not 'FAILED'
    assert "N.A. [1] " in out and "FAILED" not in out and "= FAILURES =" in out  # --tb's section


def test_a_fail_outranks_errors_in_every_output(tmp_path):
    rc, out, doc, suite = judge(tmp_path, "--partial", "-k", "ok or bad or err")
    assert rc == 1 and doc["verdict"] == "FAIL" and props(suite)["verdict"] == "FAIL", out
    assert "verdict: FAIL  (profile local; ERROR 1, FAIL 1, PASS 1)" in out and "could not measure" not in out
    failure = suite.find("testcase[@name='verdict']/failure")
    assert failure.get("message").startswith("sign-off verdict FAIL: ")
    assert (tmp_path / "r" / "report.md").read_text().startswith("# GPU cluster sign-off: FAIL\n")
    assert "<span class='so-verdict so-FAIL'>FAIL</span></h2>" in report.cover(doc["verdict"], doc)


def test_an_error_run_is_no_known_good_run_and_a_baseline_of_one_is_flagged():
    then = {"meta": {"run": "r0"}, "verdict": "ERROR", "hosts": {},
            "results": [rec("PASS"), rec("ERROR", "d"), rec("ERROR", "e")]}
    assert calibrate.refusal(then, 0.9) == ("its verdict is ERROR: 2 ERROR (d[h], e[h]): checks that could "
                                            "not measure; fix the run (or the profile) and run again")
    now = {"meta": {"run": "r1"}, "verdict": "PASS", "results": [rec("PASS")]}
    got = baseline.compare(now, then, 0.05, "r0")["warnings"]
    said = "its verdict was ERROR (not signed off: could not measure): 2 checks could not measure then"
    assert got == [said]


def test_an_interrupted_run_exits_3_not_pytests_2(tmp_path):
    rc, out, doc, suite = judge(tmp_path, "--partial", "-k", "ok or stop")
    assert rc == 3 and doc["verdict"] == "INCOMPLETE" and props(suite)["exit_code"] == "3", out
    assert "exit code 3: INCOMPLETE: the run was interrupted" in out


@pytest.mark.parametrize("args, said", [
    (["--fail-on-regression"], "--fail-on-regression without --baseline: no earlier run to find regressions"),
    (["--fail-on-regression", "--baseline", ""], "--baseline is empty (an unset variable?)"),
    (["--baseline", " "], "--baseline is empty (an unset variable?)"),
])
def test_a_regression_gate_without_a_baseline_is_refused(tmp_path, args, said):
    """--fail-on-regression with no baseline (or --baseline "" of an unset variable) judged
    nothing against anything and exited 0 without a word (issue 32 item 12): a usage error."""
    f = tmp_path / "test_made_up.py"
    f.write_text(CHECKS)
    p = subprocess.run([sys.executable, "-m", "pytest", str(f), "-p", "signoff.plugin", "-p", "no:html",
                        "-p", "no:cacheprovider", "--report-dir", str(tmp_path / "r"), "--profile", "local",
                        "-k", "ok", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == 4 and said in p.stdout + p.stderr, p.stdout + p.stderr
    assert (p.stdout + p.stderr).count(said) == 1


def test_fail_on_regression_fails_a_partial_pass_and_every_output_says_so(tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({
        "meta": {"run": "night1", "profile": "h100-8x-nvlink", "profile_class": "8 x NVIDIA H100"},
        "verdict": "INCOMPLETE", "hosts": {},
        "results": [{"criterion": "figure", "host": str(i), "measured": 100 + i, "expected": ">= 10 GB/s",
                     "unit": "GB/s", "status": "PASS"} for i in range(22)]}))
    rc, out, doc, suite = judge(tmp_path, "--partial", "-k", "figure", "--baseline", str(base),
                                "--fail-on-regression")
    meta = doc["meta"]
    assert doc["verdict"] == "PASS" and rc == 1 and meta["exit_code"] == 1 and meta["fail_on_regression"], out
    # the terminal: 20 regressions, the worst first, the rest in report.md; the baseline's warnings
    shown = re.findall(r"(?m)^  REGRESSED figure on (\d+): 50 GB/s vs (\d+) before \(-", out)
    assert len(shown) == 20 and shown[0] == ("21", "121") and "  and 2 more: " in out, out
    # local's measured tolerances (thresholds/local.yaml) beside the 5 % of a figure without one
    assert f"compared with run night1 ({tmp_path.name}) (tolerance 5 %; allgather_busbw 95 %; " in out
    assert "; allreduce_busbw 95 %; " in out
    assert "; train_throughput 95 % from profile local): 22 regressions" in out
    assert "baseline warning: its hardware class is 8 x NVIDIA H100, this run's " in out
    assert "baseline warning: it was not a complete run (verdict INCOMPLETE)" in out
    said = "Failed on regression: verdict PASS, but 22 regressions against the baseline fail this run"
    assert said in out and said in report.cover("PASS", doc) and "exit code 1: PASS, but 22 " in out
    # report.md's head, the cover, the terminal and junit carry the partial note
    md = (tmp_path / "r" / "report.md").read_text().splitlines()
    assert md[0] == "# GPU cluster sign-off: PASS", md[:5]
    assert md[2].startswith("**Partial run (accepted by --partial: the verdict judges these checks, not "
                            "the whole sign-off sheet): ") and said in md[4], md[:6]
    assert "Partial run (accepted by --partial" in report.cover("PASS", doc)
    assert "  Partial run (accepted by --partial" in out
    assert props(suite)["partial"] == meta["partial"] and props(suite)["exit_code"] == "1"
    case = suite.find("testcase[@name='baseline']")
    failed = case.find("failure").get("message")
    assert failed.startswith("22 regressions against run night1") and "--fail-on-regression" in failed
    assert suite.get("failures") == "1"  # the baseline's; the verdict's testcase passes
