"""dcgm_diag (issue 44 part 1) on recorded hosts with a stand-in `dcgmi`: no GPU and no DCGM
exist here, so each host is the recorded 8x H200 (tests/test_classes_recorded.py's recording,
answered in the controller's process: tests/recorded/recorded_hosts.py), and its dcgm probe
runs for real (signoff/dcgm/probe_dcgm.py) with `dcgmi` the stand-in tests/recorded/dcgmi/dcgmi
printing a recorded output valid against DCGM's JSON schema (tests/dcgm_fake.py): all Pass; one
GPU Fail with ISOLATE (and one with RESET); Warn; Skip; Not Run; no test categories; a hang past
its timeout; not JSON; no host engine; no dcgmi. One run of ten hosts gives every verdict, a
second (the profile making dcgm_diag optional) the N.A."""

from __future__ import annotations

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
CASES = ("pass", "fail_isolate", "warn", "skip", "not_run", "no_categories", "hang", "not_json",
         "no_hostengine", "absent")
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


def accept(tmp: Path, hosts: dict[str, str], profile_text: str, *args: str) -> tuple:
    """`pytest acceptance/test_dcgm.py` on recorded hosts {name: case}: (process, report dir, results)."""
    one, two = recorded()
    rec = measurements(CLASS, sysinfo(CLASS, one), one, two)
    log = tmp / "kern.log"
    log.write_text(kernel_log(rec["sysinfo"]))
    per = {}
    for name, case in hosts.items():
        doc = spec(case, name)
        per[name] = {"dcgm": doc, "sysinfo": {"preflight": {"dcgm": real_preflight(doc)}}}
    (tmp / "hosts.json").write_text(json.dumps({"record": {**rec, "kernel_log": str(log)}, "hosts": per}))
    inv = tmp / "inv.yaml"
    inv.write_text("hosts:\n" + "".join(f"  - {{name: {h}, address: {h}.recorded}}\n" for h in hosts))
    prof = tmp / "dcgm.yaml"
    prof.write_text(profile_text)
    rd = tmp / "report"
    env = {**os.environ, "SIGNOFF_RECORDED_HOSTS": str(tmp / "hosts.json"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "recorded"),
                                          str(ROOT / "tests" / "recorded" / "classes"), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_dcgm.py", "-q", "-p",
                        "recorded_hosts", "-p", "no:cacheprovider", "--partial", "--inventory", str(inv),
                        "--profile", str(prof), "--report-dir", str(rd), *LOCK_WAIT, *args], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert (rd / "results.json").exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return p, rd, load_results(rd / "results.json")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return accept(tmp_path_factory.mktemp("dcgm"), {f"{c.replace('_', '-')}-node": c for c in CASES}, PROFILE)


def rec_of(doc: dict, case: str) -> dict:
    return next(r for r in doc["results"] if r["host"] == f"{case.replace('_', '-')}-node")


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
    res = judge.judge(doc, gpus)
    assert (res["failed"], len(res["faults"]), len(res["not_run"]), len(res["actions"])) == \
        (failed, faults, not_run, actions), res
    if case == "skip":  # allowed by the profile: said apart, never an ERROR
        res = judge.judge(doc, gpus, allow_skip=["targeted_power"])
        assert not res["not_run"] and res["allowed"] == [
            f"GPU 3 (serial {s[3]}): test targeted_power Skip (Test skipped: EUD is not installed)"]
    # a GPU NVML sees and DCGM did not test FAILs closed
    res = judge.judge(doc, gpus + [{"index": 8, "serial": "S8"}])
    assert 8 in res["failed"] and "GPU 8 (serial S8): in no DCGM test result" in res["faults"][-1]


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
                                        ({"allow_skip": "eud"}, "allow_skip: expected a list")])
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
    assert "no test categories (no test ran)" in by["no_categories"]["message"]
    assert f"dcgmi diag -r 3 did not finish in {TIMEOUT_S} s (killed)" in by["hang"]["message"]
    assert "dcgmi's output is not JSON" in by["not_json"]["message"]
    assert "DCGM host engine not running" in by["no_hostengine"]["message"]
    assert "dcgmi not installed" in by["absent"]["message"]
    # the raw JSON of every host that printed any, verbatim, linked from its row (RMA evidence)
    for c in ("pass", "fail_isolate", "warn", "skip", "not_run", "no_categories", "not_json"):
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
