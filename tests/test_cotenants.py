"""Another process on a GPU during a measurement (issue 29 item 5): the sampler shipped beside
every probe (signoff/gpu/probe_cotenants.py) against a fake NVML whose process lists name real
processes of this machine, and the judgement that names it (signoff/gpu/cotenants.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_nvml import FakeGPU, FakeNV

from signoff.fleet import ProbeError
from signoff.gpu import cotenants

ROOT = Path(__file__).resolve().parent.parent


def load_sampler():
    spec = importlib.util.spec_from_file_location("cotenants", ROOT / "signoff/gpu/probe_cotenants.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def detached(tmp_path: Path, name: str, env: dict) -> int:
    """A process of `name` that is not our descendant (its parent shell exits at once)."""
    exe = tmp_path / name
    exe.symlink_to("/bin/sleep")
    out = subprocess.run(["sh", "-c", f"{exe} 600 >/dev/null 2>&1 & echo $!"], env=env,
                         capture_output=True, text=True, check=True).stdout
    return int(out)


@pytest.fixture
def token(monkeypatch):
    monkeypatch.setenv("SIGNOFF_PROBE_OWNER", f"test:{os.getpid()}:{time.monotonic()}")
    return os.environ["SIGNOFF_PROBE_OWNER"]


def kill(*pids):
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def test_fake_nvml_foreign_pid_is_named_and_the_probes_own_are_not(tmp_path, token):
    """The probe itself, its child, and a rank it did not start but that carries its mark (a
    task of its srun step) are its own; a detached process without the mark is another's,
    named from /proc with when it was seen."""
    mod = load_sampler()
    child = subprocess.Popen(["sleep", "60"])  # a descendant (mp.spawn's ranks)
    rank = detached(tmp_path, "rank", dict(os.environ))  # carries the mark, not a descendant
    clean = {k: v for k, v in os.environ.items() if k != "SIGNOFF_PROBE_OWNER"}
    hog = detached(tmp_path, "gemm_hog", clean)
    t0 = time.monotonic()

    def procs():
        t = time.monotonic() - t0
        return [(os.getpid(), 1 << 30), (child.pid, 1 << 30), (rank, 1 << 30)] + \
            ([(hog, 30000 << 20)] if 0.25 <= t < 0.65 else [])
    try:
        nv = FakeNV([FakeGPU(0, procs=procs), FakeGPU(1)])
        s = mod.Sampler(nv, nv.gpus, interval=0.1).start()
        time.sleep(1.0)
        out = s.stop()
    finally:
        kill(rank, hog)
        child.kill()
        child.wait()
    [e] = out["cotenants"]
    assert (e["gpu"], e["pid"], e["name"], e["type"], e["used_mib"], e["visible"]) == \
        (0, hog, "gemm_hog", "compute", 30000, True)
    assert 0.2 <= e["t_first"] <= 0.4 and 0.5 <= e["t_last"] <= 0.7, e
    assert e["first_seen"].endswith("Z") and e["last_seen"] >= e["first_seen"]
    assert "sampled every 0.1 s" in out["cotenants_note"]


def test_fake_nvml_no_foreign_process_is_an_empty_list_unreadable_is_none(token):
    mod = load_sampler()
    nv = FakeNV([FakeGPU(0)])
    s = mod.Sampler(nv, nv.gpus, interval=0.05).start()
    time.sleep(0.2)
    assert s.stop()["cotenants"] == []

    class NoLists(FakeNV):
        def nvmlDeviceGetComputeRunningProcesses(self, h):
            raise self.NVMLError_NotSupported(3)
        nvmlDeviceGetGraphicsRunningProcesses = nvmlDeviceGetComputeRunningProcesses
    nv = NoLists([FakeGPU(0)])
    s = mod.Sampler(nv, nv.gpus, interval=0.05).start()
    out = s.stop()
    assert out["cotenants"] is None and "compute processes unreadable (NVMLError_NotSupported" in \
        out["cotenants_note"]


def test_fake_nvml_other_pid_namespace_takes_the_longest_listed_pid_as_the_probes_own(token):
    """In a container NVML gives the host's pids (NVIDIA/nvidia-docker#1483): none is ours by
    pid, so the one listed all along is the probe's, the one that came later another's."""
    mod = load_sampler()
    t0 = time.monotonic()
    nv = FakeNV([FakeGPU(0, procs=lambda: [(4999999, 1 << 30)] + (
        [(4999998, 1 << 30)] if time.monotonic() - t0 > 0.3 else []))])
    s = mod.Sampler(nv, nv.gpus, interval=0.05).start()
    time.sleep(0.6)
    out = s.stop()
    assert [(e["pid"], e["visible"]) for e in out["cotenants"]] == [(4999998, False)]
    assert "another pid namespace's" in out["cotenants_note"]


def entry(**kw):
    e = {"gpu": 0, "pid": 4711, "name": "python3", "type": "compute",
         "first_seen": "2026-12-03T12:00:40Z", "last_seen": "2026-12-03T12:02:00Z",
         "t_first": 40.2, "t_last": 120.0, "used_mib": 30000, "samples": 80, "visible": True}
    e.update(kw)
    return e


def test_the_cause_names_pid_name_gpu_and_when():
    assert cotenants.text({"cotenants": [entry()]}, "soak") == (
        "another process on GPU 0: pid 4711 (python3) from 12:00:40 to 12:02:00 UTC "
        "(40.2-120 s into the soak) ran beside the soak")
    two = {"cotenants": [entry(), entry(gpu=1), entry(pid=5000, name=None, visible=False,
                                                       last_seen="2026-12-03T12:00:40Z", t_last=40.2)]}
    assert cotenants.text(two, "all-reduce") == (
        "2 other processes ran beside the all-reduce: GPUs 0, 1: pid 4711 (python3) from 12:00:40 "
        "to 12:02:00 UTC (40.2-120 s into the all-reduce); GPU 0: pid 5000 (outside this pid "
        "namespace) at 12:00:40 UTC (40.2 s into the all-reduce)")
    assert cotenants.text({"cotenants": []}, "soak") == cotenants.text({}, "soak") == ""


def test_a_check_that_saw_a_cotenant_errors_naming_it_with_its_figure_kept():
    recorded = []
    check = type("C", (), {"record": lambda self, *a: recorded.append(a)})()
    cotenants.guard(check, "n1", {"cotenants": []}, "soak", 700.0)  # none: judged as usual
    with pytest.raises(ProbeError) as e:
        cotenants.guard(check, "n1", {"cotenants": [entry()]}, "soak", 490.5, ">= 635", "TFLOP/s")
    assert str(e.value).startswith("n1: not judged: the soak's figures are not the hardware's alone")
    assert str(e.value).endswith("; likely cause: another process on GPU 0: pid 4711 (python3) from "
                                 "12:00:40 to 12:02:00 UTC (40.2-120 s into the soak) ran beside the soak")
    assert recorded[0][:3] == (490.5, ">= 635", "TFLOP/s") and recorded[0][4]["cotenants"][0]["pid"] == 4711


def test_run_alone_it_prints_one_json_document(tmp_path):
    """As shipped (cotenants.py): without NVML here it says so, as one JSON document."""
    import json
    p = subprocess.run([sys.executable, str(ROOT / "signoff/gpu/probe_cotenants.py"), "--seconds", "0"],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    doc = json.loads(p.stdout)
    assert doc["probe"] == "cotenants" and ("error" in doc or "cotenants" in doc), doc


# The soak probe, shipped and run for real by an acceptance run on a recorded 2x H200 host;
# only NVML (tests/fake_nvml.py) and the GPUs (torch on the CPU, n = 64) are stand-ins. From
# 40 % of the load on, NVML lists a real process of this machine on GPU 0 and GPU 0's SM clock
# falls while it heats: the curves issue 29 item 5 measured, which read as cooling before.
DRIVER = """\
import importlib.util, os, sys, time
sys.path.insert(0, {tests!r})
import torch
from fake_nvml import FakeGPU, FakeNV
spec = importlib.util.spec_from_file_location("soak", "soak.py")  # as shipped, cotenants.py beside it
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)
a = dict(zip(sys.argv[2::2], sys.argv[3::2]))
hog, t0, dur = int(os.environ["HOG_PID"]), time.monotonic(), float(a["--duration"])
def hogging():
    return time.monotonic() - t0 >= 0.4 * dur + 0.5
class NV(FakeNV):
    def nvmlDeviceGetClockInfo(self, h, which):
        return 1500 if h.index == 0 and hogging() else 1980
def procs():
    return [(os.getpid(), 1 << 30)] + ([(hog, 30000 << 20)] if hogging() else [])
gpu0 = FakeGPU(0, tau=6.0, procs=procs)
nvml = probe.Nvml(NV([gpu0, FakeGPU(1, tau=6.0)]))
args = probe.argparse.Namespace(duration=dur, interval=float(a["--interval"]), matrix=64)
probe.emit(probe.run(args, nvml, torch, [torch.device("cpu")] * 2))
"""


def test_soak_fake_nvml_cotenant_mid_soak_is_named_not_blamed_on_cooling(tmp_path):
    import json

    from test_cli import LOCK_WAIT
    from test_gpu_faults_recorded import RECORDED, recorded_inventory

    from signoff.soak import judge as soak
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    inv = recorded_inventory(tmp_path, facts)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(tests=str(ROOT / "tests")))
    py = tmp_path / "recordedpython"  # sysinfo recorded; the soak probe on the fake NVML
    py.write_text(py.read_text().replace('\nexec ', f'\n[ "$1" = soak.py ] && exec {sys.executable} '
                                                    f'{driver} "$@"\nexec ', 1))
    clean = {k: v for k, v in os.environ.items() if k != "SIGNOFF_PROBE_OWNER"}
    hog = detached(tmp_path, "gemm_hog", clean)
    rd = tmp_path / "report"
    prof = tmp_path / "h200-2x-fast.yaml"  # samples every 0.5 s: enough of 10 s to judge clocks
    prof.write_text("extends: h200-2x-nvlink\nsoak: {interval: 0.5}\n")
    try:
        p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_soak.py", "--partial",
                            "--inventory", str(inv), "--profile", str(prof), "--soak-duration", "10s",
                            "--report-dir", str(rd), "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env={**clean, "HOG_PID": str(hog)})
    finally:
        kill(hog)
    doc = json.loads((rd / "results.json").read_text())
    res = {r["criterion"]: r for r in doc["results"]}
    lines = [json.loads(x) for x in (rd / "soak" / "gpunode.jsonl").read_text().splitlines()]
    final = next(x for x in lines if x.get("type") == "result")
    [e] = final["cotenants"]  # the probe's JSON: the foreign pid, its name, GPU and when
    assert (e["gpu"], e["pid"], e["name"], e["used_mib"]) == (0, hog, "gemm_hog", 30000), e
    assert 3.5 <= e["t_first"] <= 6.5 and e["t_last"] >= 9, e
    assert any(x.get("event") == "cotenant" and x["pid"] == hog for x in doc["soak"]["gpunode"]["events"])
    # the same samples judged alone blame the clocks on the heat (the old verdict)
    s = soak.Series.from_samples([x for x in lines if x.get("type") == "sample"])
    assert soak.judge_clock(s, 10 / 3, 5.0, -0.5).failures
    cause = (f"likely cause: another process on GPU 0: pid {hog} (gemm_hog) from {e['first_seen'][11:19]} "
             f"to {e['last_seen'][11:19]} UTC ({e['t_first']:g}-{e['t_last']:g} s into the soak) ran "
             f"beside the soak")
    for c in ("soak_gpu_temp", "soak_mem_temp", "soak_throttle", "soak_clock_stability",
              "soak_gemm_tflops", "soak_gemm_straggler", "soak_errors"):
        r = res[c]
        assert r["status"] == "ERROR" and r["message"].endswith(cause), (c, r["status"], r["message"])
        assert "cooling" not in r["message"]
        if c != "soak_gemm_straggler":  # on the CPU it has no rate to compare: unjudgeable anyway
            assert r["details"]["cotenants"][0]["pid"] == hog
    assert res["soak_gemm_tflops"]["measured"] < 635  # the figure is kept, not judged
    assert p.returncode == 2, p.stdout  # ERROR only: not signed off, the hardware not blamed
    cover = (rd / "report.md").read_text()
    assert "6 checks (soak_gpu_temp" in cover and cause.replace("likely cause: ", "") in cover, cover[:3000]
