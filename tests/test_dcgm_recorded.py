"""dcgm_diag (issue 44 part 1) on recorded hosts with a stand-in `dcgmi`: no GPU and no DCGM
exist here, so each host is the recorded 8x H200 (tests/test_classes_recorded.py's recording,
answered in the controller's process: tests/recorded/recorded_hosts.py), and its dcgm probe
runs for real (signoff/dcgm/probe_dcgm.py) with `dcgmi` the stand-in tests/recorded/dcgmi/dcgmi
printing a recorded output valid against DCGM's JSON schema (tests/dcgm_fake.py): all Pass; one
GPU Fail with ISOLATE (and one with RESET); Warn; Skip; Not Run; a GPU left out of one test; a
test failed in its test_summary alone; r3 without most of its tests; nvbandwidth Skip on every
GPU; no test categories; a hang past its timeout; not JSON; no host engine; no dcgmi. One run of
fourteen hosts gives every verdict, a second (the profile making dcgm_diag optional) the N.A."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import dcgm_fake
import pytest
from test_classes_recorded import kernel_log, measurements, recorded, sysinfo
from test_cli import LOCK_WAIT

from signoff import dcgm as dcgm_family
from signoff import profiles
from signoff.dcgm import judge
from signoff.dcgm import plugin as dcgm_plugin
from signoff.inventory import Host
from signoff.preflight import Context
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = ROOT / "tests" / "recorded" / "dcgmi"
PROBE = ROOT / "signoff" / "dcgm" / "probe_dcgm.py"
CLASS = "h200-8x-nvlink"
TIMEOUT_S = 4  # the test profile's dcgm_diag timeout: the hang is killed after it
CASES = ("pass", "fail_isolate", "warn", "skip", "not_run", "gpu_missing", "summary_fail", "missing_tests",
         "nvbandwidth_skip", "no_categories", "hang", "not_json", "no_hostengine", "absent")
PROFILE = f"""extends: {CLASS}
criteria:
  dcgm_diag: {{timeout: {TIMEOUT_S}}}
"""
OPTIONAL = f"""extends: {CLASS}
criteria:
  dcgm_diag: {{optional: true}}
"""


def serials(name: str) -> list[str]:
    """The host's GPU serials as its recorded sysinfo gives them (recorded_hosts.Recording.host):
    DCGM reads the same serials as NVML."""
    tag = hashlib.sha1(name.encode()).hexdigest()
    return [str(int(tag[:10], 16) * 16 + i) for i in range(8)]


def spec(case: str, name: str) -> dict:
    return {"absent": True} if case == "absent" else dcgm_fake.cases(serials(name))[case]


def stand_in_env(doc: dict) -> dict:
    path = os.environ.get("PATH", "")
    return {**os.environ, "SIGNOFF_FAKE_DCGMI": json.dumps(doc),
            "PATH": path if doc.get("absent") else f"{STAND_IN}{os.pathsep}{path}"}


def real_preflight(doc: dict) -> dict:
    """probe_dcgm's preflight() (what the sysinfo probe's preflight records) with the stand-in."""
    code = (f"import importlib.util, json; s = importlib.util.spec_from_file_location('d', {str(PROBE)!r}); "
            f"m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            f"print(json.dumps(m.preflight()))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=stand_in_env(doc),
                       timeout=60)
    return json.loads(p.stdout)


def accept(tmp: Path, hosts: dict[str, str], profile_text: str, *args: str, own: dict | None = None,
           sheet: tuple = ("acceptance/test_dcgm.py",)) -> tuple:
    """`pytest acceptance/test_dcgm.py` (or `sheet`) on recorded hosts {name: case}, each with its
    `own` recorded keys ({name: {"sysinfo": {...}, "kernel_log": path}}): (process, report dir,
    results)."""
    one, two = recorded()
    rec = measurements(CLASS, sysinfo(CLASS, one), one, two)
    log = tmp / "kern.log"
    log.write_text(kernel_log(rec["sysinfo"]))
    per = {}
    for name, case in hosts.items():
        doc = spec(case, name)
        per[name] = {"dcgm": doc, "sysinfo": {"preflight": {"dcgm": real_preflight(doc)}}}
        mine = (own or {}).get(name, {})  # its own sysinfo keys (the form) over the preflight's dcgm
        facts = mine.get("sysinfo", {})
        pf = {**per[name]["sysinfo"]["preflight"], **facts.get("preflight", {})}
        per[name] = {**per[name], **mine, "sysinfo": {**facts, "preflight": pf}}
    (tmp / "hosts.json").write_text(json.dumps({"record": {**rec, "kernel_log": str(log)}, "hosts": per}))
    inv = tmp / "inv.yaml"
    inv.write_text("hosts:\n" + "".join(f"  - {{name: {h}, address: {h}.recorded}}\n" for h in hosts))
    prof = tmp / "dcgm.yaml"
    prof.write_text(profile_text)
    rd = tmp / "report"
    env = {**os.environ, "SIGNOFF_RECORDED_HOSTS": str(tmp / "hosts.json"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "recorded"),
                                          str(ROOT / "tests" / "recorded" / "classes"), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "pytest", *sheet, "-q", "-p",
                        "recorded_hosts", "-p", "no:cacheprovider", "--partial", "--inventory", str(inv),
                        "--profile", str(prof), "--report-dir", str(rd), *LOCK_WAIT, *args], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert (rd / "results.json").exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return p, rd, load_results(rd / "results.json")


# The recorded H200 was a VM in a container (its sysinfo's form): the hosts without DCGM read as
# bare metal here, where a missing DCGM is the run's to fix (ERROR); on a VM it is UNSEEN
# (tests/test_unseen.py)
METAL = {"sysinfo": {"preflight": {"form": {"kinds": []}}}}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return accept(tmp_path_factory.mktemp("dcgm"), {f"{c.replace('_', '-')}-node": c for c in CASES}, PROFILE,
                  own={"absent-node": METAL, "no-hostengine-node": METAL})


def rec_of(doc: dict, case: str) -> dict:
    return next(r for r in doc["results"] if r["host"] == f"{case.replace('_', '-')}-node")


def extra_of(name: str = CLASS, **keys) -> dict:
    """The class's dcgm_diag keys (level, its tests, allow_skip) as the profile sets them."""
    return {**profiles.load(name).threshold("dcgm_diag").extra, **keys}


def judged(case_or_doc, extra: dict | None = None, gpus: int = 8) -> tuple[dict, list[str]]:
    """One recorded output (a case's or a document crafted from one) judged on a host of `gpus`
    GPUs whose NVML serials are DCGM's."""
    s = serials("n")[:gpus]
    if isinstance(case_or_doc, str):
        doc, why = judge.parse(dcgm_fake.cases(s)[case_or_doc]["diag"]["stdout"])
        assert why is None
    else:
        doc = case_or_doc
    return judge.judge(doc, [{"index": i, "serial": x} for i, x in enumerate(s)], extra or extra_of()), s


# ------------------------------------------------------------------ the stand-in's outputs


def test_fake_dcgmi_outputs_are_valid_against_dcgms_schema():
    for case, doc in dcgm_fake.cases(serials("x")).items():
        out = (doc.get("diag") or {}).get("stdout")
        if out and case != "not_json":
            assert dcgm_fake.valid(json.loads(out)) == [], case
    assert dcgm_fake.valid({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware"}]}}) == \
        ["category 0: no 'tests'"]  # the check itself can fail


@pytest.mark.parametrize("case, failed, faults, not_run, actions", [
    ("pass", [], 0, 0, 0), ("fail_isolate", [1, 2], 2, 0, 2), ("warn", [0], 1, 0, 0),
    ("skip", [], 0, 1, 0), ("not_run", [], 0, 1, 0)])
def test_recorded_outputs_judged_per_gpu(case, failed, faults, not_run, actions):
    s = serials("n")
    doc, why = judge.parse(dcgm_fake.cases(s)[case]["diag"]["stdout"])
    assert why is None
    gpus = [{"index": i, "serial": "nvml-" + x} for i, x in enumerate(s)]
    res = judge.judge(doc, gpus, extra_of())
    assert (res["failed"], len(res["faults"]), len(res["not_run"]), len(res["actions"])) == \
        (failed, faults, not_run, actions), res
    if case == "skip":  # allowed by the profile: said apart, never an ERROR
        res = judge.judge(doc, gpus, extra_of(allow_skip=["targeted_power"]))
        assert not res["not_run"] and res["allowed"] == [
            f"GPU 3 (serial {s[3]}): test targeted_power Skip (Test skipped: EUD is not installed)"]
    # a GPU NVML sees and DCGM did not test FAILs closed
    res = judge.judge(doc, gpus + [{"index": 8, "serial": "S8"}], extra_of())
    assert 8 in res["failed"] and "GPU 8 (serial S8): in no DCGM test result" in res["faults"][-1]


def test_recorded_gpu_left_out_of_one_test_is_not_a_pass():
    """Issue 51 item 6: dcgmi prints no result for a GPU a test did not run on (dcgmi/Diag.cpp
    HelperJsonAddResult), so GPU 5 in every test but memory is not judged by memory: said with its
    GPU and test, an ERROR (acceptance: not_run), never a PASS; a test no GPU has a result in and no
    test_summary (a test Not Run) is said once."""
    res, s = judged("gpu_missing")
    assert res["failed"] == [] and res["faults"] == []
    assert res["not_run"] == [f"GPU 5 (serial {s[5]}): test memory: no result (dcgmi prints none for a GPU "
                              f"the test did not run on: Not Run)"]
    doc = json.loads(dcgm_fake.cases(s)["pass"]["diag"]["stdout"])
    tests = doc["DCGM Diagnostic"]["test_categories"][1]["tests"]
    tests[2] = {"name": "nvbandwidth"}  # run on no GPU: no results, no test_summary
    res, _ = judged(doc)
    assert res["not_run"] == ["test nvbandwidth: no GPU's result and no test_summary (dcgmi prints none for "
                              "a test or a GPU it did not run: Not Run)"], res["not_run"]
    # a test outside the level (the EUD, where installed) is judged where it ran: every GPU owes it a result
    tests.append({"name": "eud", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                                              "status": "Pass"}], "test_summary": {"status": "Pass"}})
    res, _ = judged(doc)
    assert len([t for t in res["not_run"] if ": test eud: no result" in t]) == 7, res["not_run"]
    # the CPU EUD tests no GPU: none owes it a result
    tests[-1] = {"name": "cpu_eud", "results": [{"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0,
                                                 "status": "Pass"}], "test_summary": {"status": "Pass"}}
    res, _ = judged(doc)
    assert not [t for t in res["not_run"] if "cpu_eud" in t]


def test_recorded_test_failed_only_in_its_summary_fails():
    """Issue 51 item 7: nvbandwidth's test_summary says Fail with an error on no GPU (DCGM_FR_INTERNAL:
    dcgmi puts it in the summary alone), every GPU's result Pass: the test failed on the host, so
    no GPU passed it (all 8 counted), none blamed, no ISOLATE / RESET action."""
    res, s = judged("summary_fail")
    assert res["faults"] == [
        "Hardware test nvbandwidth Fail in its test_summary, on no GPU: error id 44, category "
        "INTERNAL_OTHER, severity TRIAGE: There was an internal error during the test: 'Couldn't "
        "find the nvbandwidth executable which is required; the install may have failed.'"]
    assert res["failed"] == list(range(8)) and res["actions"] == [] and res["not_run"] == []
    # beside a GPU's own Fail, the summary's error that no GPU carries is said too; the GPU's is not repeated
    ok = json.loads(dcgm_fake.cases(s)["pass"]["diag"]["stdout"])
    doc = dcgm_fake.with_summary(dcgm_fake.with_result(ok, "memory", 1, "Fail", [dcgm_fake.DBE]),
                                 "memory", "Fail", [dcgm_fake.DBE, dcgm_fake.NO_GPU_ERROR])
    res, _ = judged(doc)
    assert res["failed"] == list(range(8)) and len(res["faults"]) == 2
    assert res["faults"][0].startswith("Hardware test memory Fail in its test_summary, on no GPU: error "
                                       "id 44")
    assert "error id 4," not in res["faults"][0]
    assert res["faults"][1].startswith(f"GPU 1 (serial {s[1]}): Hardware test memory Fail: error id 4,")
    # a summary that only repeats its GPU's error adds nothing: that GPU alone failed
    res, _ = judged(dcgm_fake.with_summary(doc, "memory", "Fail", [dcgm_fake.DBE]))
    assert res["failed"] == [1] and len(res["faults"]) == 1
    # a CPU's Fail (the CPU EUD) is the host's: on no GPU, never a pass
    doc["DCGM Diagnostic"]["test_categories"][1]["tests"].append(
        {"name": "cpu_eud", "results": [{"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0,
                                         "status": "Fail", "warnings": [dcgm_fake.NO_GPU_ERROR]}],
         "test_summary": {"status": "Fail", "warnings": [dcgm_fake.NO_GPU_ERROR]}})
    res, _ = judged(dcgm_fake.with_summary(doc, "memory", "Fail", [dcgm_fake.DBE]))
    assert res["failed"] == list(range(8)) and res["faults"][0].startswith(
        "Hardware test cpu_eud Fail in its test_summary, on no GPU: error id 44"), res["faults"]


def test_recorded_level_without_its_tests_is_not_a_pass():
    """Issue 51 item 8: an -r 3 document holding only the Deployment and Integration categories:
    the six other tests of r3 (NVIDIA/DCGM NvidiaValidationSuite.cpp, the profile's `tests:`)
    are named as not run, an ERROR; each level's own list judges its own document."""
    res, _ = judged("missing_tests")
    assert res["faults"] == [] and res["not_run"] == [
        "tests memory, diagnostic, nvbandwidth, memory_bandwidth, targeted_stress, targeted_power of dcgmi "
        "diag -r 3: not in DCGM's output (run on no GPU)"]
    ok = json.loads(dcgm_fake.cases(serials("n"))["pass"]["diag"]["stdout"])
    r2 = dcgm_fake.only_categories(ok, "Deployment", "Hardware", "Integration")
    for t in r2["DCGM Diagnostic"]["test_categories"]:
        t["tests"] = [x for x in t["tests"] if x["name"] in ("software", "memory", "pcie")]
    assert judged(r2, extra_of(level=2))[0]["not_run"] == []
    assert judged(dcgm_fake.only_categories(ok, "Deployment"), extra_of(level=1))[0]["not_run"] == []
    assert judged(ok, extra_of(level=4))[0]["not_run"] == [
        "tests memtest, pulse_test of dcgmi diag -r 4: not in DCGM's output (run on no GPU)"]
    # a profile that names no tests for its level cannot say the level ran: not a pass either
    assert judged(ok, extra_of(tests={3: ["software"]}, level=2))[0]["not_run"] == [
        "the profile names no tests for dcgmi diag -r 2 (dcgm_diag tests: 2): the level's tests cannot be "
        "checked"]


def test_recorded_skip_by_design_is_said_apart_only_where_dcgm_skips_it_on_that_class():
    """A test DCGM's SKU file disables for a class (nvbandwidth on A100: nvvs/diag-skus.yaml.in) is
    a Skip on every GPU, no reason in the JSON: on an A100 class said apart with the class's why
    (not judged, no ERROR); on H200, which runs it, an ERROR per GPU. A Skip is allowed only where
    DCGM printed it: the same test absent, or a GPU left out of it, is not a pass on A100 either."""
    a100 = extra_of("a100-80gb-8x-nvlink")
    res, _ = judged("nvbandwidth_skip", a100)
    assert res["not_run"] == [] and res["faults"] == [] and res["allowed"] == [
        "every GPU: test nvbandwidth Skip (no reason given); DCGM's SKU file disables it on A100 SXM4 "
        "(NVIDIA/DCGM 4.6.0 nvvs/diag-skus.yaml.in: 20b0, 20b2 allow no nvbandwidth)"]
    res, s = judged("nvbandwidth_skip")  # H200 runs nvbandwidth
    assert res["allowed"] == [] and res["not_run"] == [
        f"GPU {i} (serial {s[i]}): test nvbandwidth Skip (no reason given)" for i in range(8)]
    ok = json.loads(dcgm_fake.cases(s)["pass"]["diag"]["stdout"])
    gone = copy.deepcopy(ok)
    gone["DCGM Diagnostic"]["test_categories"][1]["tests"].pop(2)
    assert judged(gone, a100)[0]["not_run"] == [
        "test nvbandwidth of dcgmi diag -r 3: not in DCGM's output (run on no GPU)"]
    part = dcgm_fake.without_result(dcgm_fake.skipped(ok, "nvbandwidth"), "nvbandwidth", 7)
    res, _ = judged(part, a100)
    assert res["not_run"] == [f"GPU 7 (serial {s[7]}): test nvbandwidth: no result (dcgmi prints none for a "
                              f"GPU the test did not run on: Not Run)"]
    assert res["allowed"][0].startswith(f"GPU 0 (serial {s[0]}), GPU 1")


def test_every_class_skips_by_design_only_tests_of_its_level_with_dcgms_word():
    for name in profiles.available():
        p = profiles.load(name)
        if p.abstract:
            continue
        extra = p.threshold("dcgm_diag").extra
        assert judge.expected_tests(extra)[0] == "software", name
        for test, why in judge.allowed_skips(extra).items():
            assert test in extra["tests"][4], (name, test)
            assert "NVIDIA/DCGM 4.6.0 nvvs/diag-skus.yaml.in" in why, (name, test)
    assert set(judge.allowed_skips(extra_of("a100-40gb-8x-pcie"))) == {"nvbandwidth", "pulse_test"}
    assert judge.allowed_skips(extra_of("h100-8x-nvlink")) == {}


@pytest.mark.parametrize("text, why", [
    ("", "dcgmi printed nothing"), ("Successfully ran diagnostic", "not JSON"),
    ('{"DCGM Diagnostic": {"test_categories": []}}', "no test categories"),
    ('{"DCGM Diagnostic": {"runtime_error": "Unable to load nvvs"}}',
     "DCGM runtime error: Unable to load nvvs"),
    ('{"metadata": {}}', 'no "DCGM Diagnostic"')])
def test_unjudgeable_outputs_are_named(text, why):
    doc, said = judge.parse(text)
    assert doc is None and why in said


def test_stand_in_probe_preflight_and_a_hang_killed_at_its_timeout(tmp_path):
    """The real probe against the stand-in: the host engine that does not answer and the absent
    dcgmi are told apart; the level asked reaches dcgmi; a hung diagnostic is killed at the timeout."""
    cases = dcgm_fake.cases(serials("p"))
    assert real_preflight(cases["pass"]) == {"dcgmi": str(STAND_IN / "dcgmi"), "hostengine": True}
    pf = real_preflight(cases["no_hostengine"])
    assert pf["hostengine"] is False and pf["error"].startswith("DCGM host engine not running (dcgmi "
                                                                "discovery -l exit 255: Error: unable")
    assert real_preflight({"absent": True})["error"].startswith("dcgmi not installed")

    def probe(doc, *args):
        p = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True,
                           env=stand_in_env(doc), cwd=tmp_path, timeout=60)
        return json.loads(p.stdout)
    got = probe(cases["pass"], "--level", "3", "--timeout", "30")
    assert got["rc"] == 0 and got["command"] == "diag -r 3 -j" and json.loads(got["stdout"])
    wrong = probe(cases["pass"], "--level", "4", "--timeout", "30")  # the stand-in recorded r3 only
    assert wrong["rc"] == 2 and "not recorded: dcgmi diag -r 4 -j" in wrong["stderr"]
    hung = probe(cases["hang"], "--level", "3", "--timeout", "1")
    assert hung["timed_out"] is True and hung["elapsed_s"] < 10 and hung["stdout"] == ""


# ------------------------------------------------------------------ the family's parts


def test_dcgm_diag_goes_before_every_other_check():
    items = [SimpleNamespace(name=n, originalname=n) for n in
             ("test_gpu_model", "test_soak_gpu_temp", "test_dcgm_diag", "test_error_counters")]
    dcgm_plugin.pytest_collection_modifyitems(None, None, items)
    assert [i.name for i in items] == ["test_dcgm_diag", "test_gpu_model", "test_soak_gpu_temp",
                                       "test_error_counters"]


def test_plan_estimates_the_level_and_preflight_says_a_missing_dcgm():
    prof = profiles.load(CLASS)
    assert dcgm_family.estimate(None, prof, {"dcgm_diag"}, []) == [
        "dcgm: dcgmi diag -r 3 on every GPU host at once: about 15 min (NVIDIA's figure for r3; "
        "timeout 30 min)"]
    assert dcgm_family.estimate(None, prof, {"gpu_model"}, []) == []
    facts = {"nvidia": {"gpus": [{"index": 0}]},
             "preflight": {"dcgm": {"dcgmi": None, "hostengine": None, "error": "dcgmi not installed"}}}
    for name, verdict in ((CLASS, "ERROR"), ("local", "N.A. (optional in the profile)")):
        ctx = Context(config=None, profile=profiles.load(name), picked=frozenset({"dcgm_diag"}), hosts=1)
        assert dcgm_family.preflight(ctx, Host(name="n1"), facts) == (
            ["dcgm: dcgmi not installed"], [f"dcgm_diag {verdict}: dcgmi not installed"])
    ok = {**facts, "preflight": {"dcgm": {"dcgmi": "/usr/bin/dcgmi", "hostengine": True}}}
    assert dcgm_family.preflight(ctx, Host(name="n1"), ok)[1] == []


@pytest.mark.parametrize("extra, why", [({"level": 5}, "level: expected one of 1, 2, 3, 4"),
                                        ({"timeout": 0}, "timeout: expected seconds > 0"),
                                        ({"optional": "yes"}, "optional: expected true or false"),
                                        ({"allow_skip": "eud"}, "allow_skip: expected a list"),
                                        ({"allow_skip": {"eud": ""}}, "allow_skip: expected a list"),
                                        ({"tests": ["software"]}, "tests: expected {level: "),
                                        ({"tests": {5: ["software"]}}, "tests.5: expected a level"),
                                        ({"tests": {3: []}}, "tests.3: expected a list of DCGM test names")])
def test_bad_dcgm_diag_keys_are_refused(extra, why):
    with pytest.raises(Exception, match=why):
        dcgm_family.check_extra("dcgm_diag", 0, extra, "p.criteria.dcgm_diag")


def test_every_gpu_class_has_level_3_and_local_makes_it_optional():
    for name in profiles.available():
        p = profiles.load(name)
        if p.abstract:
            continue
        t = p.threshold("dcgm_diag")
        assert t.value == 0 and judge.level_of(t.extra) == 3, name
        assert "docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html" in t.source
        assert bool(t.extra.get("optional")) == (name == "local"), name


# ------------------------------------------------------------------ the recorded run


def test_recorded_dcgm_outputs_give_their_verdicts_per_gpu(run):
    p, rd, doc = run
    by = {c: rec_of(doc, c) for c in CASES}
    assert {c: r["status"] for c, r in by.items()} == {
        "pass": "PASS", "fail_isolate": "FAIL", "warn": "FAIL", "skip": "ERROR", "not_run": "ERROR",
        "gpu_missing": "ERROR", "summary_fail": "FAIL", "missing_tests": "ERROR", "nvbandwidth_skip": "ERROR",
        "no_categories": "FAIL", "hang": "FAIL", "not_json": "FAIL", "no_hostengine": "ERROR",
        "absent": "ERROR"}, p.stdout[-3000:]
    s = serials("fail-isolate-node")
    msg = by["fail_isolate"]["message"]
    for text in (f"GPU 1 (serial {s[1]}): Hardware test memory Fail: error id 4, category HARDWARE_MEMORY, "
                 f"severity ISOLATE: Detected 1 volatile double-bit ECC error(s) in GPU 1.",
                 f"GPU 2 (serial {s[2]}): Deployment test software Fail: error id 85, "
                 f"category HARDWARE_MEMORY, severity RESET", "raw output: dcgm/fail-isolate-node.json",
                 "(expected GPUs failed or warned <= 0 GPUs: every GPU passes every test of dcgmi diag -r 3"):
        assert text in msg, msg
    assert msg.index("GPU 1 (serial") < msg.index("GPU 2 (serial")  # GPU by GPU
    assert by["fail_isolate"]["measured"] == 2
    assert by["fail_isolate"]["note"] == (f"DCGM: isolate GPU 1 (serial {s[1]}); "
                                          f"DCGM: reset GPU 2 (serial {s[2]})")
    assert "test pcie Warn: error id 3, category HARDWARE_PCIE, severity MONITOR" in by["warn"]["message"]
    assert "test targeted_power Skip (Test skipped: EUD is not installed)" in by["skip"]["message"]
    assert "test memory_bandwidth Not Run (no reason given)" in by["not_run"]["message"]
    assert "not judged" in by["not_run"]["message"]
    # issue 51 items 6-8: the host, the GPU and the test named; a failed summary FAILs every GPU of its test
    gm = serials("gpu-missing-node")
    assert by["gpu_missing"]["message"].startswith("gpu-missing-node: DCGM did not run every test of r3"), \
        by["gpu_missing"]["message"]
    assert f"GPU 5 (serial {gm[5]}): test memory: no result" in by["gpu_missing"]["message"]
    assert by["summary_fail"]["measured"] == 8
    assert ("Hardware test nvbandwidth Fail in its test_summary, on no GPU: error id 44"
            in by["summary_fail"]["message"])
    assert ("tests memory, diagnostic, nvbandwidth, memory_bandwidth, targeted_stress, targeted_power of "
            "dcgmi diag -r 3: not in DCGM's output") in by["missing_tests"]["message"]
    assert "test nvbandwidth Skip (no reason given)" in by["nvbandwidth_skip"]["message"]  # H200 runs it
    assert "no test categories (no test ran)" in by["no_categories"]["message"]
    assert f"dcgmi diag -r 3 did not finish in {TIMEOUT_S} s (killed)" in by["hang"]["message"]
    assert "dcgmi's output is not JSON" in by["not_json"]["message"]
    assert "DCGM host engine not running" in by["no_hostengine"]["message"]
    assert "dcgmi not installed" in by["absent"]["message"]
    # the raw JSON of every host that printed any, verbatim, linked from its row (RMA evidence)
    for c in ("pass", "fail_isolate", "warn", "skip", "not_run", "gpu_missing", "summary_fail",
              "missing_tests", "no_categories", "not_json"):
        raw = by[c]["details"]["raw"]
        assert raw == f"dcgm/{c.replace('_', '-')}-node.json"
        assert (rd / raw).read_text() == spec(c, f"{c.replace('_', '-')}-node")["diag"]["stdout"]
    assert by["pass"]["details"]["dcgm_version"] == "4.6.0" and by["pass"]["details"]["level"] == 3
    assert set(by["pass"]["details"]["gpus"]) == {str(i) for i in range(8)}
    # the action beside the GPU on the cover; the preflight said the missing DCGM before the run
    md = (rd / "report.md").read_text()
    assert f"isolate GPU 1 (serial {s[1]})" in md and f"reset GPU 2 (serial {s[2]})" in md
    assert "dcgm_diag ERROR: dcgmi not installed" in p.stdout
    assert "dcgm_diag ERROR: DCGM host engine not running" in p.stdout
    assert "dcgmi diag -r 3 -j" in (rd / "report.html").read_text()  # the methodology row


def test_recorded_host_without_dcgm_is_na_where_the_profile_makes_it_optional(tmp_path):
    p, _, doc = accept(tmp_path, {"absent-node": "absent", "no-hostengine-node": "no_hostengine"}, OPTIONAL)
    by = {r["host"]: r for r in doc["results"]}
    for h, why in (("absent-node", "dcgmi not installed"),
                   ("no-hostengine-node", "DCGM host engine not running")):
        assert by[h]["status"] == "N.A." and why in by[h]["message"], by[h]
        assert "makes dcgm_diag optional: DCGM's diagnostic (r3) not run on this host" in by[h]["message"]
    assert "dcgm_diag N.A. (optional in the profile): dcgmi not installed" in p.stdout
