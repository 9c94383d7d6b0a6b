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

from signoff import cotenants
from signoff.fleet import ProbeError
from signoff.results import load as load_results

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
    assert str(e.value).startswith("n1: not judged: another process used a GPU during the soak, so its "
                                   "figures are not the hardware's alone: measure again with the GPUs idle")
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
sys.path[:0] = [os.getcwd(), {tests!r}]  # the shipped dir first, as for a probe run as a script
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
    prof.write_text("extends: h200-8x-nvlink@2\nsoak: {interval: 0.5}\n")
    try:
        p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_soak.py",
                            "acceptance/test_health.py::test_thermal_margin", "--partial",
                            "--inventory", str(inv), "--profile", str(prof), "--soak-duration", "10s",
                            "--report-dir", str(rd), "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT,
                           capture_output=True, text=True, timeout=900, env={**clean, "HOG_PID": str(hog)})
    finally:
        kill(hog)
    doc = load_results(rd / "results.json")
    res = {r["criterion"]: r for r in doc["results"]}
    lines = [json.loads(x) for x in (rd / "soak" / "gpunode.jsonl").read_text().splitlines()]
    final = next(x for x in lines if x.get("type") == "result")
    [e] = final["cotenants"]  # the probe's JSON: the foreign pid, its name, GPU and when
    assert (e["gpu"], e["pid"], e["name"], e["used_mib"]) == (0, hog, "gemm_hog", 30000), e
    assert 3.5 <= e["t_first"] <= 6.5 and e["t_last"] >= 9, e
    assert any(x.get("event") == "cotenant" and x["pid"] == hog for x in doc["soak"]["gpunode"]["events"])
    # the same samples judged alone blame the clocks on the heat (the old verdict)
    s = soak.Series.from_samples([x for x in lines if x.get("type") == "sample"])
    # (r -0.64 here alone, -0.49 in a loaded fresh clone, 9099be8: the fake's samples shift with
    # the hog's start, so the contrast is judged at a looser correlation than the profile's)
    assert soak.judge_clock(s, 10 / 3, 5.0, -0.3).failures
    cause = (f"likely cause: another process on GPU 0: pid {hog} (gemm_hog) from {e['first_seen'][11:19]} "
             f"to {e['last_seen'][11:19]} UTC ({e['t_first']:g}-{e['t_last']:g} s into the soak) ran "
             f"beside the soak")
    for c in ("soak_gpu_temp", "soak_mem_temp", "soak_throttle", "soak_clock_stability",
              "soak_gemm_tflops", "soak_gemm_straggler", "soak_errors", "thermal_margin"):
        r = res[c]
        assert r["status"] == "ERROR" and r["message"].endswith(cause), (c, r["status"], r["message"])
        assert "cooling" not in r["message"]
        if c != "soak_gemm_straggler":  # on the CPU it has no rate to compare: unjudgeable anyway
            assert r["details"]["cotenants"][0]["pid"] == hog
    assert res["soak_gemm_tflops"]["measured"] < 635  # the figure is kept, not judged
    assert p.returncode == 2, p.stdout  # ERROR only: not signed off, the hardware not blamed
    cover = (rd / "report.md").read_text()
    assert "7 checks (soak_gpu_temp" in cover and cause.replace("likely cause: ", "") in cover, cover[:3000]


def test_every_check_of_a_measurement_that_saw_a_cotenant_errors_naming_it():
    """Fleet.measured: an all-reduce document with another process on GPU 1 is an ERROR for every
    check of that host's all-reduce (the same message: one cover line), and the host is left out
    of the fleet's median; a host with `cotenants: []` is judged as measured."""
    from signoff import inventory
    from signoff.fleet import Fleet
    fleet = Fleet(inventory.local_inventory())
    docs = {"n1": {"probe": "allreduce", "busbw": 360.0, "cotenants": [], "cotenants_during": "all-reduce"},
            "n2": {"probe": "allreduce", "busbw": 210.0, "cotenants_during": "all-reduce",
                   "cotenants": [entry(gpu=1, t_first=3.0, t_last=9.5)]}}
    try:
        assert fleet.measured("interconnect", "n1", docs.get, ["n1", "n2"]) is docs["n1"]
        msgs = set()
        for _ in range(2):  # two checks of n2
            with pytest.raises(ProbeError) as e:
                fleet.measured("interconnect", "n2", docs.get, ["n1", "n2"])
            msgs.add(str(e.value))
        assert msgs == {"n2: not judged: another process used a GPU during the all-reduce, so its figures "
                        "are not the hardware's alone: measure again with the GPUs idle; likely cause: "
                        "another process on GPU 1: pid 4711 (python3) from 12:00:40 to 12:02:00 UTC "
                        "(3-9.5 s into the all-reduce) ran beside the all-reduce"}
        assert fleet.peers("interconnect", lambda d: d["busbw"]) == {"n1": 360.0}
    finally:
        fleet.close()


def test_a_retried_measurement_names_a_cotenant_of_any_attempt():
    """The best attempt judged, clean itself, still carries the process that ran beside the
    first (its low figure is why the spread is wide)."""
    from types import SimpleNamespace

    from signoff import retry
    t = SimpleNamespace(op="min", value=300.0, unit="GB/s", ok=lambda v: v >= 300.0, extra={})
    tries = [{"busbw": 210.0, "cotenants": [entry()]}, {"busbw": 360.0, "cotenants": []}]
    best, figures = retry.best(tries, lambda d: d["busbw"], t)
    assert best["busbw"] == 360.0 and figures == [210.0, 360.0] and best["cotenants"] == [entry()]
    unsampled = [{"busbw": 210.0}, {"busbw": 360.0}]
    assert "cotenants" not in retry.best(unsampled, lambda d: d["busbw"], t)[0]


def test_fake_nvml_as_shipped_every_gpu_probe_finds_its_sampler(tmp_path, monkeypatch):
    """The probes as a host gets them (each probe_<name>.py as <name>.py in one dir): every GPU
    measurement loads cotenants.py beside it; run alone with a pynvml that lists a foreign
    process (a real one) it names it, the probe's own process left out."""
    import json

    from signoff import families
    for name, f in families.shipped().items():
        (tmp_path / name).write_text(f.read_text())
    for name in ("soak", "hbm", "allreduce", "p2p", "train", "hostlink"):  # as a host imports them
        code = f"import {name}; print({name}.probelib.load_cotenants().__file__)"
        p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert p.stdout.strip() == str(tmp_path / "cotenants.py"), (name, p.stdout, p.stderr)
    # run from the source tree (by hand, bench/): the sampler, not the controller's signoff/cotenants.py
    for name in ("soak/probe_soak.py", "interconnect/probe_allreduce.py"):
        code = (f"import runpy; g = runpy.run_path({str(ROOT / 'signoff' / name)!r}); "
                "print(g['probelib'].load_cotenants().__file__)")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert p.stdout.strip() == str(ROOT / "signoff/gpu/probe_cotenants.py"), (name, p.stdout, p.stderr)
    hog = detached(tmp_path, "gemm_hog", {k: v for k, v in os.environ.items() if k != "SIGNOFF_PROBE_OWNER"})
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "pynvml.py").write_text(
        f"import os, sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        f"from fake_nvml import FakeGPU, FakeNV\n"
        f"_nv = FakeNV([FakeGPU(0), FakeGPU(1, procs=lambda: [(os.getpid(), 1 << 30), ({hog}, 1 << 30)])])\n"
        f"globals().update({{k: getattr(_nv, k) for k in dir(_nv) if not k.startswith('_')}})\n")
    try:
        p = subprocess.run([sys.executable, "cotenants.py", "--seconds", "0.3", "--interval", "0.1"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(fake)})
    finally:
        kill(hog)
    doc = json.loads(p.stdout)
    assert [(e["gpu"], e["pid"], e["name"]) for e in doc["cotenants"]] == [(1, hog, "gemm_hog")], doc


def test_recorded_h200_hbm_copies_beside_another_process_error_naming_it(tmp_path):
    """The HBM probe's answer as on a 2x H200 where a process of someone else's copied on GPU 1
    from 2 s into the copies: GPU 1 reads 3.1 TB/s, a uniformity FAIL ('one GPU's HBM
    degraded') before; now both HBM checks ERROR naming the process, on the cover too."""
    import json

    from test_cli import LOCK_WAIT
    from test_gpu_faults_recorded import RECORDED, recorded_inventory
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    inv = recorded_inventory(tmp_path, facts)
    hbm = tmp_path / "hbm.json"
    hbm.write_text(json.dumps({
        "probe": "hbm", "bytes": 1 << 30, "iters": 20, "gpus": {"0": 4.24, "1": 3.1}, "errors": {},
        "cotenants_during": "HBM copies", "cotenants_note": "NVML processes sampled every 0.5 s",
        "cotenants": [entry(gpu=1, pid=4242, name="python3", first_seen="2026-12-03T12:00:02Z",
                            last_seen="2026-12-03T12:00:03Z", t_first=2.0, t_last=2.5)]}))
    py = tmp_path / "recordedpython"
    py.write_text(py.read_text().replace("\nexec ", f'\n[ "$1" = hbm.py ] && exec cat {hbm}\nexec ', 1))
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_health.py", "-k", "hbm", "--partial",
                        "--inventory", str(inv), "--profile", "h200-8x-nvlink@2", "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    res = {r["criterion"]: r for r in load_results(rd / "results.json")["results"]}
    cause = ("another process on GPU 1: pid 4242 (python3) from 12:00:02 to 12:00:03 UTC (2-2.5 s into "
             "the HBM copies) ran beside the HBM copies")
    for c in ("hbm_bandwidth", "hbm_uniformity"):
        assert res[c]["status"] == "ERROR" and res[c]["message"] == (
            "gpunode: not judged: another process used a GPU during the HBM copies, so its figures are "
            "not the hardware's alone: measure again with the GPUs idle; likely cause: " + cause), res[c]
    assert p.returncode == 2, p.stdout
    assert "2 checks (hbm_bandwidth, hbm_uniformity)" in (rd / "report.md").read_text()


def test_a_collective_across_nodes_names_each_nodes_cotenant_with_its_host():
    """The multi-node all-reduce (and the step across nodes): every node's probe samples its own
    GPUs; the collective's result keeps each node's processes with its name, and the check's
    ERROR names the node too."""
    import json

    from signoff.network.judge import summarise
    from signoff.transport import CommandResult

    def ran(cot):
        doc = {"probe": "allreduce", "rows": [{"bytes": 1, "busbw": 40.0}], "cotenants": cot}
        return CommandResult("allreduce.py", 0, json.dumps(doc) + "\n", "signoff-event started node 0\n"
                             "signoff-event joined rank 0\n", 60)
    res = summarise({"a": ran([]), "b": ran([entry(gpu=3)])}, ["a", "b"])
    assert res["ok"] and res["cotenants"] == [{**entry(gpu=3), "host": "b"}]
    assert cotenants.text(res, "multi-node all-reduce") == (
        "another process on b GPU 3: pid 4711 (python3) from 12:00:40 to 12:02:00 UTC (40.2-120 s into "
        "the multi-node all-reduce) ran beside the multi-node all-reduce")
    assert summarise({"a": ran([]), "b": ran([])}, ["a", "b"])["cotenants"] == []  # sampled: none
    assert "cotenants" not in summarise({"a": ran(None)}, ["a"])  # not sampled (gloo)
