"""--baseline: figures that moved the wrong way beyond the tolerance, per host and criterion;
a pass turned FAIL/ERROR; hosts that appeared or vanished; bad baseline files named."""

from __future__ import annotations

import json

import pytest

from signoff import InputError, baseline


def rec(criterion, host, measured, expected, status="PASS"):
    return {"criterion": criterion, "host": host, "measured": measured, "expected": expected,
            "unit": "GB/s", "status": status}


def doc(hosts, *recs):
    return {"meta": {"run": "r1"}, "hosts": {h: {} for h in hosts}, "results": list(recs)}


def test_regressions_beyond_the_tolerance_in_the_threshold_direction():
    before = doc(["a", "b", "c"], rec("busbw", "a", 100, ">= 50"), rec("busbw", "b", 100, ">= 50"),
                 rec("temp", "a", 70, "<= 85"), rec("temp", "b", 70, "<= 85"),
                 rec("ecc", "a", "8/8", "every GPU"), rec("busbw", "c", 100, ">= 50"))
    after = doc(["a", "b", "d"], rec("busbw", "a", 94, ">= 50"), rec("busbw", "b", 96, ">= 50"),
                rec("temp", "a", 80, "<= 85"), rec("temp", "b", 60, "<= 85"),
                rec("ecc", "a", "7/8", "every GPU", "FAIL"), rec("busbw", "d", 10, ">= 50"))
    got = baseline.compare(after, before, 0.05, "run r1")
    reg = {(x["criterion"], x["host"]): x for x in got["regressions"]}
    assert set(reg) == {("busbw", "a"), ("temp", "a"), ("ecc", "a")}  # b within 5 %, temp b better
    assert reg[("busbw", "a")]["change_pct"] == -6.0 and reg[("temp", "a")]["change_pct"] == 14.3
    assert reg[("ecc", "a")]["was_status"] == "PASS" and "was_expected" not in reg[("ecc", "a")]
    from signoff.report import regression_text
    assert regression_text(reg[("ecc", "a")]) == "PASS before, FAIL now"
    raised = baseline.compare(doc(["a"], rec("busbw", "a", 94, ">= 100", "FAIL")),
                              doc(["a"], rec("busbw", "a", 94, ">= 50")), 0.05, "r1")["regressions"][0]
    assert regression_text(raised) == "PASS before, FAIL now (the threshold changed: >= 50 then, >= 100 now)"
    assert got["appeared"] == ["d"] and got["vanished"] == ["c"] and got["compared"] == 5
    assert [x["host"] for x in baseline.compare(after, before, 0.07, "r1")["regressions"]] == ["a", "a"]


def test_bad_baseline_and_tolerance_are_named(tmp_path):
    with pytest.raises(InputError, match="--baseline .*nope.json: cannot read it"):
        baseline.load(str(tmp_path / "nope.json"))
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(InputError, match="x.json: not JSON"):
        baseline.load(str(tmp_path / "x.json"))
    (tmp_path / "results.json").write_text(json.dumps({"meta": {}}))
    with pytest.raises(InputError, match="not a signoff results.json"):
        baseline.load(str(tmp_path))  # a report directory is accepted: its results.json
    assert baseline.tolerance_arg("5%") == 0.05 and baseline.tolerance_arg("0.1") == 0.1
    with pytest.raises(InputError, match="--baseline-tolerance 'five': expected a percentage"):
        baseline.tolerance_arg("five")
    assert baseline.tolerance_arg(None) is None  # not given: the profile's


def test_the_profile_sets_tolerances_per_criterion_and_the_option_overrides_them(tmp_path):
    from signoff import profiles
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\nbaseline: {tolerance: 3%, criteria: {storage_read_seq: 12%}}\n")
    child = tmp_path / "c.yaml"
    child.write_text(f"extends: {p}\nbaseline: {{criteria: {{allreduce_busbw: 0.04}}}}\n")
    prof = profiles.load(str(child))
    tol = baseline.tolerances(None, prof)
    assert (tol["default"], tol["from"]) == (0.03, "profile c")
    # its own over its parents', the measured ones of local.yaml and nvidia-base.yaml kept
    want = {"storage_read_seq": 0.12, "allreduce_busbw": 0.04, "storage_read_small": 0.78,
            "soak_gpu_temp": 0.54}
    assert {k: tol["criteria"][k] for k in want} == want
    before = doc(["a"], rec("storage_read_seq", "a", 100, ">= 1"), rec("p2p_bandwidth", "a", 100, ">= 1"))
    after = doc(["a"], rec("storage_read_seq", "a", 90, ">= 1"), rec("p2p_bandwidth", "a", 96, ">= 1"))
    got = baseline.compare(after, before, tol, "r1")  # storage -10 % within its 12 %; p2p -4 % beyond 3 %
    assert [x["criterion"] for x in got["regressions"]] == ["p2p_bandwidth"]
    assert got["tolerance"] == 0.03 and got["tolerances"]["storage_read_seq"] == 0.12
    assert got["tolerance_from"] == "profile c"
    from signoff.report import tolerance_text  # the cover's and report.md's heading
    said = tolerance_text(got)
    assert said.startswith("tolerance 3 %; allgather_busbw 95 %; allreduce_busbw 4 %; ") \
        and said.endswith(" from profile c"), said
    assert "; storage_read_seq 12 %; " in said
    flat = baseline.tolerances(0.2, prof)  # the option, where given, for every criterion
    assert flat["criteria"] == {} and not baseline.compare(after, before, flat, "r1")["regressions"]
    assert baseline.tolerances(None, profiles.load("local"))["default"] == baseline.TOLERANCE
    for bad, match in (("baseline: 5%", "p.yaml: baseline: expected a mapping"),
                       ("baseline: {tolerance: lots}", "p.yaml: baseline: 'lots': expected a percentage"),
                       ("baseline: {criteria: {busbw: 5%}}", "baseline.criteria.busbw: unknown criterion"),
                       ("baseline: {criteria: [storage_read_seq]}", "p.yaml: baseline: expected a mapping")):
        p.write_text(f"extends: local\n{bad}\n")
        with pytest.raises(InputError, match=match):
            profiles.load(str(p))


def test_the_direction_is_the_thresholds_wherever_the_expected_text_states_it():
    """The review's misses: P2P -30 %, soak GEMM -16 %, GPU temperature +42 % (their expected
    texts start with words, so the sign was never read)."""
    def three(p2p, gemm, temp):
        return doc(["a"], rec("p2p_bandwidth", "a", p2p, "every GPU pair >= 300 GB/s"),
                   rec("soak_gemm_tflops", "a", gemm, "bf16 GEMM rate per GPU (mean after the 60 s "
                       "warm-up) >= 500 TFLOP/s"),
                   rec("soak_gpu_temp", "a", temp, "sustained GPU temperature on every GPU <= 85 C"))
    got = baseline.compare(three(350, 551, 71), three(500, 656, 50), 0.05, "r1")
    changes = {x["criterion"]: x["change_pct"] for x in got["regressions"]}
    assert changes == {"p2p_bandwidth": -30.0, "soak_gemm_tflops": -16.0, "soak_gpu_temp": 42.0}
    assert baseline.compare(three(500, 656, 40), three(500, 656, 50), 0.05, "r1")["regressions"] == []


def test_unlike_units_are_never_compared_and_an_unlike_baseline_is_flagged():
    now = doc(["a"], {**rec("net_pair_bandwidth", "a", 0.95, ">= 0.8 x line rate"), "unit": "x line rate"})
    then = doc(["a"], rec("net_pair_bandwidth", "a", 370, ">= 300 Gb/s"))
    now["meta"].update(profile="h100-8x-nvlink", profile_class="8 x NVIDIA H100", suite_version="2")
    then["meta"].update(profile="a100-80gb-8x-nvlink", profile_class="8 x NVIDIA A100", suite_version="1",
                        partial="-k network")
    then["verdict"] = "INCOMPLETE"
    got = baseline.compare(now, then, 0.05, "r1")
    assert got["regressions"] == []  # not "-99.7 %"
    u = got["unlike_units"][0]
    assert (u["unit"], u["baseline_unit"]) == ("x line rate", "GB/s")
    w = " | ".join(got["warnings"])
    assert "its hardware class is 8 x NVIDIA A100, this run's 8 x NVIDIA H100" in w
    assert "its suite version is 1, this run's 2" in w
    assert "it was not a complete run (verdict INCOMPLETE" in w
    from signoff.report import baseline_notes
    assert any("not compared, unlike units: net_pair_bandwidth on a" in n for n in baseline_notes(got))


def test_a_pass_the_machine_cannot_show_now_is_said_no_longer_shown_not_a_regression():
    from signoff import report
    before = doc(["a"], rec("nvlink_fabric", "a", 0, "== 0"), rec("gpu_temp", "a", 60, "<= 85"))
    after = doc(["a"], rec("nvlink_fabric", "a", None, "", "UNSEEN"), rec("gpu_temp", "a", 60, "<= 85"))
    got = baseline.compare(after, before, 0.05, "r1")
    assert got["regressions"] == [] and [x["criterion"] for x in got["no_longer_shown"]] == ["nvlink_fabric"]
    assert report.baseline_notes(got)[-1] == ("no longer shown (PASS in the baseline, UNSEEN now: this "
                                              "machine cannot show it): nvlink_fabric on a")
    # --unseen-error makes it an ERROR: a pass turned ERROR, a regression as any
    strict = doc(["a"], rec("nvlink_fabric", "a", None, "", "ERROR"), rec("gpu_temp", "a", 60, "<= 85"))
    assert [x["was_status"] for x in baseline.compare(strict, before, 0.05, "r1")["regressions"]] == ["PASS"]
