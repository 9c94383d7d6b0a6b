"""dcgm_diag over SSH on lab hosts (real sshd hosts in network namespaces, tests/lab.py) with a
STAND-IN dcgmi: no GPU and no DCGM exist here, so each lab host's probes see a fake NVML (a
`pynvml` on its PYTHONPATH: tests/fake_nvml.py's GPUs, 4 a host, serials its own) and the stand-in
tests/recorded/dcgmi/dcgmi first on its PATH, printing a recorded output valid against DCGM's JSON
schema (tests/dcgm_fake.py): all Pass; one GPU Fail with ISOLATE (and one with RESET); Warn; Skip;
Not Run; no test categories; a hang past its timeout; not JSON. The controller, SSH, the sysinfo
and dcgm probes, the report are real: one `pytest acceptance/test_dcgm.py` over the 8 hosts."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import dcgm_fake
import pytest
from lab import Lab
from test_lab_acceptance import accept, by_key

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = ROOT / "tests" / "recorded" / "dcgmi"
CASES = ("pass", "fail_isolate", "warn", "skip", "not_run", "no_categories", "hang", "not_json")
GPUS = 4  # the recorded outputs' GPUs 0-3 (dcgm_fake: Fail on 1 and 2, Skip on 3, Not Run on 2)
TIMEOUT_S = 4  # the profile's dcgm_diag timeout: the hang is killed after it

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

# a pynvml whose GPUs are tests/fake_nvml.py's, their serials SIGNOFF_FAKE_SERIALS (the host's own);
# an NVML call the fake lacks answers NotSupported, as a driver without it does
FAKE_PYNVML = f"""import json, os, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from fake_nvml import FakeGPU, FakeNV, NVMLError_NotSupported
_serials = json.loads(os.environ["SIGNOFF_FAKE_SERIALS"])
_nv = FakeNV([FakeGPU(i) for i in range(len(_serials))])
globals().update({{k: getattr(_nv, k) for k in dir(_nv) if not k.startswith("_")}})


def nvmlDeviceGetSerial(h):
    return _serials[h.index]


def __getattr__(name):
    if name.startswith("nvml"):
        def unsupported(*args):
            raise NVMLError_NotSupported(3)
        return unsupported
    raise AttributeError(name)
"""


def serials(host: str) -> list[str]:
    return [f"1650{int(hashlib.sha1(host.encode()).hexdigest()[:5], 16):07d}{i}" for i in range(GPUS)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dcgmlab")
    fake = tmp / "fakenvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_PYNVML)
    with Lab(tmp / "lab", n_hosts=len(CASES)) as lab:
        case = {h.name: c for h, c in zip(lab.hosts, CASES)}
        env = {h: {"PYTHONPATH": str(fake), "PATH": f"{STAND_IN}{os.pathsep}{os.environ['PATH']}",
                   "SIGNOFF_FAKE_SERIALS": json.dumps(serials(h)),
                   "SIGNOFF_FAKE_DCGMI": json.dumps(dcgm_fake.cases(serials(h))[c])} for h, c in case.items()}
        inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable,
                                  overrides={h: {"env": e} for h, e in env.items()})
        prof = tmp / "dcgm.yaml"  # local makes dcgm_diag optional; a site that requires it
        prof.write_text(f"extends: local\ncriteria:\n"
                        f"  dcgm_diag: {{optional: false, timeout: {TIMEOUT_S}}}\n")
        rc, res, out = accept(tmp, "acceptance/test_dcgm.py", "--inventory", str(inv), "--profile", str(prof))
    return rc, res, out, case, tmp / "report"


def test_stand_in_dcgmi_on_lab_hosts_gives_each_verdict_over_ssh(run):
    rc, res, out, case, rd = run
    assert res is not None, out[-3000:]
    r = {case[h]: v for (c, h), v in by_key(res).items() if c == "dcgm_diag"}
    assert {c: v["status"] for c, v in r.items()} == {
        "pass": "PASS", "fail_isolate": "FAIL", "warn": "FAIL", "skip": "ERROR", "not_run": "ERROR",
        "no_categories": "FAIL", "hang": "FAIL", "not_json": "FAIL"}, out[-3000:]
    assert rc == 1, out[-3000:]
    host = {c: h for h, c in case.items()}
    s = serials(host["fail_isolate"])
    msg = r["fail_isolate"]["message"]
    assert (f"GPU 1 (serial {s[1]}): Hardware test memory Fail: error id 4, category HARDWARE_MEMORY, "
            f"severity ISOLATE") in msg, msg
    assert f"GPU 2 (serial {s[2]}): Deployment test software Fail: error id 85" in msg, msg
    assert r["fail_isolate"]["measured"] == 2
    assert r["fail_isolate"]["note"] == (f"DCGM: isolate GPU 1 (serial {s[1]}); "
                                         f"DCGM: reset GPU 2 (serial {s[2]})")
    assert "test pcie Warn: error id 3, category HARDWARE_PCIE, severity MONITOR" in r["warn"]["message"]
    assert "test targeted_power Skip (Test skipped: EUD is not installed)" in r["skip"]["message"]
    assert "test memory_bandwidth Not Run (no reason given)" in r["not_run"]["message"]
    assert "no test categories (no test ran)" in r["no_categories"]["message"]
    assert "dcgmi's output is not JSON" in r["not_json"]["message"]
    # the hung host, named by its own row, killed at its timeout
    assert r["hang"]["host"] == host["hang"], r["hang"]
    assert f"dcgmi diag -r 3 did not finish in {TIMEOUT_S} s (killed)" in r["hang"]["message"]
    # it stalled no other host: every host's diagnostic started before the first one ended (at once),
    # and every other host's ended before the hung one's (no host waited for it)
    win = {c: v["details"]["measured_utc"] for c, v in r.items()}
    assert max(w[0] for w in win.values()) < min(w[1] for w in win.values()), win
    assert all(w[1] < win["hang"][1] for c, w in win.items() if c != "hang"), win
    # every host's raw JSON kept verbatim in the report dir, linked from its row of report.html
    html = (rd / "report.html").read_text()
    for c in ("pass", "fail_isolate", "warn", "skip", "not_run", "no_categories", "not_json"):
        raw = r[c]["details"]["raw"]
        assert raw == f"dcgm/{host[c]}.json", r[c]
        assert (rd / raw).read_text() == dcgm_fake.cases(serials(host[c]))[c]["diag"]["stdout"]
        # pytest-html keeps a row's extras in its JSON blob, HTML-escaped: the link as the browser gets it
        assert f"&lt;a href=&#39;{raw}&#39;&gt;{raw}&lt;/a&gt;" in html, raw
    assert r["hang"]["details"]["raw"] is None  # it printed nothing: nothing to keep
    # the ISOLATE / RESET actions on the cover, the GPU and its serial named
    md = (rd / "report.md").read_text()
    assert f"isolate GPU 1 (serial {s[1]})" in md and f"reset GPU 2 (serial {s[2]})" in md, md[:3000]


def test_each_failed_hosts_evidence_holds_its_rma_pages_and_dcgms_json(run):
    """Issue 54 item 1: every host exclude.hostlist names (all but the passing one) gets its folder and
    archive; the Fail host's holds an RMA page for exactly the GPUs DCGM failed (1 and 2: serial, PCI
    slot, model, what failed) and dcgmi's JSON verbatim; the passing host gets nothing."""
    rc, res, out, case, rd = run
    host = {c: h for h, c in case.items()}
    ev = rd / "evidence"
    sick = sorted(h for h, c in case.items() if c != "pass")
    assert (rd / "exclude.hostlist").read_text().strip() == "lab[2-8]" and host["pass"] == "lab1", case
    assert sorted(os.listdir(ev)) == sorted([*sick, *(f"{h}.tar.gz" for h in sick)])
    h, s = host["fail_isolate"], serials(host["fail_isolate"])
    mine = ev / h
    assert sorted(p.name for p in mine.glob("rma-*.html")) == [f"rma-{s[1]}.html", f"rma-{s[2]}.html"]
    page = (mine / f"rma-{s[1]}.html").read_text()
    for want in (f"<td>{s[1]}</td>", "<td>00000000:28:00.0</td>", "<td>NVIDIA H200</td>",
                 "Hardware test memory Fail: error id 4", "<li>raw/dcgm.json</li>", f"evidence/{h}.tar.gz"):
        assert want in page, want
    assert s[2] not in page.split("<h2>What failed</h2>")[0]  # GPU 2's serial: its own page
    assert (mine / "raw" / "dcgm.json").read_text() == (rd / "dcgm" / f"{h}.json").read_text()
    assert all(x in (mine / "sysinfo.json").read_text() for x in s)  # every board's serial, as read
    assert not (ev / host["hang"] / "raw").exists()  # it printed nothing: no raw JSON to keep
    assert res["meta"]["evidence"]["hosts"][h]["gpus"] == [f"rma-{s[1]}.html", f"rma-{s[2]}.html"]
