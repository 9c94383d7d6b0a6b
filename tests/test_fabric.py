"""The NVLink fabric (issue 43 part 2): each GPU's fabric registration, the NVLink domain of the
run's trays, IMEX.

No NVSwitch, NVL72 rack or IMEX daemon exists here: the fabric read is the real sysinfo probe's
fabric_info() on a fake NVML (tests/fake_nvml.py), IMEX the document nvidia-imex-ctl prints
(tests/fabric_fake.py). The recorded runs are real `pytest acceptance/` runs over recorded hosts
answered in the controller's process (tests/recorded/recorded_hosts.py): 18 GB200 trays of one
rack, HGX H100 nodes; everything but the host's side (inventory, fleet, --profile auto, judging,
results.json) runs for real."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import fabric_fake as ff
import pytest
from fake_nvml import FakeGPU, FakeNV
from test_classes_recorded import kernel_log, measurements, recorded, sysinfo

from signoff.fabric import judge
from signoff.fleet import ProbeError
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
TRAYS = [f"tray{k:02d}" for k in range(1, 19)]
CHECKS = "nvlink_fabric or nvlink_domain or imex"


# ------------------------------------------------------------------ the read (fake NVML)


def test_fabric_read_of_each_struct_version_the_driver_knows():
    """The probe asks for the newest struct (v3) and steps down to what the driver knows (v2:
    a version mismatch; v1: nvmlDeviceGetGpuFabricInfoV missing), keeping every field it has."""
    f = ff.fabric(mask=ff.DEGRADED_BW)
    for api, mask in (("v3", ff.DEGRADED_BW), ("v2", ff.DEGRADED_BW), ("v1", None)):
        got = ff.read([f], api=api)[0]
        assert got["api"] == api and got["state"] == 3 and got["status"] == 0 and got["clique_id"] == 1
        assert got["cluster_uuid"] == "5c3a1e2f-9b7d-4c8a-a1b2-c3d4e5f60718" and got["health_mask"] == mask
    assert judge.gpu_fault(ff.read([f])[0]) == "fabric health: degraded bandwidth"
    assert judge.gpu_fault(ff.read([f], api="v1")[0]) is None  # v1 has no health mask to judge


def test_fabric_read_tolerates_a_gpu_without_fabric_and_a_library_without_driver():
    """NotSupported (a PCIe GPU, a driver without the call on that GPU) is kept with its reason,
    never a crash; so is the real nvidia-ml-py without a driver (this machine); so is a
    nvidia-ml-py too old to have the call."""
    got = ff.read([None])[0]
    assert got["supported"] is False and got["state"] is None and "NVMLError_NotSupported" in got["error"]
    assert judge.unread(got) and "NotSupported" in judge.unread(got)
    pynvml = pytest.importorskip("pynvml")
    real = ff.sysinfo_probe.fabric_info(pynvml, None)  # no nvmlInit: every call raises
    assert real["state"] is None and real["error"] and judge.unread(real)
    old = ff.sysinfo_probe.fabric_info(object(), None)
    assert old["state"] is None and "has no GPU fabric info call" in old["error"]


def test_fabric_state_status_and_health_mask_judged():
    """Not started (an HGX fabric manager down), in progress, a failed status once completed, each
    health fault and an incorrect configuration are named; a clean v3 mask and a completed HGX
    registration pass; the global fabric manager's connection is reported."""
    cases = [(ff.FM_DOWN, "fabric state not started (registration not completed)"),
             (ff.fabric(state=2), "fabric state in progress (registration not completed)"),
             (ff.fabric(status=5), "fabric registration completed with status"),
             (ff.fabric(mask=ff.CLEAN & ~(0x3 << 4) | 1 << 4), "fabric health: route unhealthy"),
             (ff.fabric(mask=ff.CLEAN & ~(0xF << 8) | 5 << 8),
              "fabric health: incorrect configuration: insufficient NVLinks")]
    for fab, text in cases:
        assert text in judge.gpu_fault(ff.read([fab])[0]), (fab, text)
    assert judge.gpu_fault(ff.read([ff.fabric()])[0]) is None
    assert judge.gpu_fault(ff.read([ff.HGX])[0]) is None
    assert judge.gfm(ff.CLEAN) == "connected"


def test_domain_judgement_names_the_tray_out_of_place():
    """The pure fleet judgement: 18 trays in one domain pass; 17 trays (one missing from the run)
    leave a domain of 68 GPUs, said with the 4 missing; a tray of another cluster is named as
    such; a tray split over two partitions is named with its GPUs."""
    def rack(n=18, **odd):
        return {t: [dict(ff.read([odd.get(t, ff.fabric())])[0]) for _ in range(4)] for t in TRAYS[:n]}
    ok = judge.domains(rack(), 72, [])
    assert ok["figure"] == 0 and not ok["faults"] and not ok["short"] and ok["groups"][0]["gpus"] == 72
    short = judge.domains(rack(17), 72, [])
    assert short["figure"] == 1 and not short["faults"]
    assert "clique 1 holds 68 GPUs of the run (17 trays: tray[01-17]), 72 declared " \
           "(hardware.nvlink_domain): 4 GPUs missing" in short["short"][0]
    other = judge.domains(rack(tray05=ff.fabric(uuid=ff.OTHER_RACK)), 72, [])
    assert other["figure"] == 2
    assert other["faults"][0].startswith("tray05: in another NVLink domain (cluster UUID) than the run's "
                                         "other trays: cluster 9e8d7c6b-"), other["faults"]
    hosts = rack()
    hosts["tray09"][3] = ff.read([ff.fabric(clique=2)])[0]
    split = judge.domains(hosts, 72, [])
    assert "tray09: its GPUs in 2 NVLink domains: GPU 0, 1, 2 in cluster" in split["faults"][0]
    assert judge.domains(rack(), 8, [])["faults"][0].endswith("a larger partition than the profile says")


def test_imex_judgement():
    """From a tray's own view: a disconnected peer is named by address and tray, a domain not UP,
    fewer nodes than trays and a missing channel device each said; a healthy view has none."""
    names = {f"10.0.0.{k + 1}": t for k, t in enumerate(TRAYS)}
    assert judge.imex_faults(ff.imex(TRAYS, 10), 18, names) == []
    bad = judge.imex_faults(ff.imex(TRAYS, 10, down={(10, 11): "DISCONNECTED"}, status="DEGRADED",
                                    channels=()), 18, names)
    assert bad[0] == "IMEX domain status DEGRADED, not UP"
    assert "IMEX peer 10.0.0.12 (tray12) DISCONNECTED" in bad
    assert bad[-1].startswith("no IMEX channel device in /dev/nvidia-caps-imex-channels")
    assert "the IMEX domain lists 17 nodes, the NVLink domain has 18 trays" in \
        judge.imex_faults(ff.imex(TRAYS[:17], 0), 18, names)[0]


def test_imex_read_runs_nvidia_imex_ctl(tmp_path, monkeypatch):
    """The probe runs `nvidia-imex-ctl -N -j` where it is installed (here a script printing a
    recorded view) and lists the channel devices; without it, says so; a daemon that does not
    answer is its error."""
    doc = ff.imex(TRAYS, 0)["domain"]
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    view = tmp_path / "view.json"
    (bin_ / "nvidia-imex-ctl").write_text(f"#!/bin/sh\n[ \"$*\" = '-N -j' ] && cat {view}\n")
    (bin_ / "nvidia-imex-ctl").chmod(0o755)
    view.write_text(json.dumps(doc))
    (tmp_path / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    (tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel0").write_text("")
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    monkeypatch.setenv("SIGNOFF_DEVFS", str(tmp_path / "dev"))
    got = ff.sysinfo_probe.imex()
    assert got["domain"] == doc and got["channels"] == ["channel0"] and got["error"] is None
    view.unlink()  # the daemon down: imex-ctl fails
    assert "nvidia-imex-ctl exit" in ff.sysinfo_probe.imex()["error"]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert ff.sysinfo_probe.imex()["ctl"] is None


def test_fabric_health_summary_unhealthy_or_limited_capacity_is_a_fault():
    """issue 51 item 10: NVML's health summary (v3: NVML_GPU_FABRIC_HEALTH_SUMMARY_* of
    nvmlFabricDefs) was read and never judged: UNHEALTHY or LIMITED_CAPACITY under a clean mask
    passed. Now each is named; HEALTHY, NOT_SUPPORTED (0) and a struct without it (v2) leave the
    mask to judge; a value NVML does not define is a fault, never a pass."""
    for summary, text in ((ff.UNHEALTHY, "UNHEALTHY"), (ff.LIMITED_CAPACITY, "LIMITED_CAPACITY")):
        got = ff.read([ff.fabric(summary=summary)])[0]
        assert got["health_summary"] == summary, got
        assert judge.gpu_fault(got) == f"fabric health: health summary {text}", got
    both = ff.read([ff.fabric(summary=ff.UNHEALTHY, mask=ff.DEGRADED_BW)])[0]
    assert judge.gpu_fault(both) == "fabric health: health summary UNHEALTHY, degraded bandwidth"
    for fab, api in ((ff.fabric(), "v3"), (ff.fabric(summary=0), "v3"),
                     (ff.fabric(summary=ff.UNHEALTHY), "v2")):
        assert judge.gpu_fault(ff.read([fab], api=api)[0]) is None, (fab, api)
    assert judge.gpu_fault(ff.read([ff.fabric(summary=9)])[0]) == \
        "fabric health: health summary 9 (not an NVML value)"
    pynvml = pytest.importorskip("pynvml")  # the enum's values as nvidia-ml-py defines them
    assert (pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY, pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY,
            pynvml.NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY) == (ff.HEALTHY, ff.UNHEALTHY,
                                                                       ff.LIMITED_CAPACITY)


@pytest.mark.parametrize("printed, said", [
    ("[]", "nvidia-imex-ctl -N -j printed JSON that is not an object: a list, []"),
    ('"IMEX daemon is not running"', 'that is not an object: a string, "IMEX daemon is not running"'),
    ("null", "that is not an object: null, null"),
    ("7", "that is not an object: a number, 7"),
    ('{"status": "UP", "nodes": ["10.0.0.1"]}', 'JSON whose nodes are not an object: a list, ["10.0.0.1"]'),
    ('{"status": "UP", "nodes": {"0": {"status": "READY", "host": "10.0.0.1", "connections": [1]}}}',
     "whose node \"0\"'s connections are not an object: a list, [1]"),
])
def test_imex_ctl_printing_json_that_is_not_an_object_errors_naming_it(tmp_path, monkeypatch, printed, said):
    """issue 51 item 14: `nvidia-imex-ctl -N -j` (here a script) printing JSON that is not an
    object where the IMEX guide's view has one ERRORed with "AttributeError: 'list' object has
    no attribute 'get'"; now the ERROR names the tool and what it printed, as JSON (inert) and
    at most 120 characters of it."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-imex-ctl").write_text(f"#!/bin/sh\ncat {tmp_path / 'view.json'}\n")
    (bin_ / "nvidia-imex-ctl").chmod(0o755)
    (tmp_path / "view.json").write_text(printed)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    got = ff.sysinfo_probe.imex()
    assert got["error"] is None, got
    with pytest.raises(ProbeError) as exc:
        judge.imex_faults(dict(got, hostname="tray01", addresses=[]), 18, {})
    assert said in str(exc.value), str(exc.value)
    long = ["<script>alert(1)</script>\n" * 40]
    with pytest.raises(ProbeError) as exc:
        judge.imex_faults(dict(got, domain=long), 18, {})
    text = str(exc.value)
    assert "\n" not in text and len(text) < 260, text
    assert text.endswith(f"... ({len(json.dumps(long))} characters)"), text


def test_fake_nvml_fabric_matches_nvidia_ml_py():
    """The fake's structs are nvidia-ml-py's, field for field (so the probe reads them alike)."""
    pynvml = pytest.importorskip("pynvml")
    for name in ("c_nvmlGpuFabricInfo_t", "c_nvmlGpuFabricInfoV_t", "c_nvmlGpuFabricInfo_v3_t"):
        if hasattr(pynvml, name):
            fields = [f[0] for f in getattr(pynvml, name)._fields_]
            assert [f[0] for f in getattr(FakeNV, name)._fields_] == fields, name
    assert FakeGPU(0).fabric is None


# ------------------------------------------------------------------ recorded runs


def recorded_run(tmp: Path, cls: str, hosts: dict[str, dict], profile: str = "auto", checks: str = CHECKS,
                 sheet: str = "acceptance/test_fabric.py", data_iface: str | None = None,
                 probes: dict[str, dict] | None = None) -> tuple[int, dict, str]:
    """`pytest <sheet> -k <checks>` (the fabric's by default) on recorded hosts of class `cls`, each
    host's sysinfo with its own keys put over the class's; probes: host -> its own documents of
    other probes (train, allreduce, netinfo) in place of the class's; data_iface: every host's."""
    one, two = recorded()
    rec = measurements(cls, sysinfo(cls, one), one, two)
    log = tmp / "kern.log"
    log.write_text(kernel_log(rec["sysinfo"]))
    (tmp / "hosts.json").write_text(json.dumps({"record": {**rec, "kernel_log": str(log)},
                                                "hosts": {h: {"sysinfo": s, **(probes or {}).get(h, {})}
                                                          for h, s in hosts.items()}}))
    inv = tmp / "inv.yaml"
    iface = f", data_iface: {data_iface}" if data_iface else ""
    inv.write_text("hosts:\n" + "".join(f"  - {{name: {h}, address: {h}.recorded{iface}}}\n" for h in hosts))
    env = {**os.environ, "SIGNOFF_RECORDED_HOSTS": str(tmp / "hosts.json"),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests" / "recorded"),
                                          str(ROOT / "tests" / "recorded" / "classes"), str(ROOT)])}
    rd = tmp / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", sheet, "-q", "-p",
                        "recorded_hosts", "-p", "no:cacheprovider", "-p", "no:html", "--partial", "-k",
                        checks, "--inventory", str(inv), "--profile", profile, "--report-dir", str(rd)],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert (rd / "results.json").exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return p.returncode, load_results(rd / "results.json"), p.stdout[-3000:]


def rack(cls: str, odd: dict | None = None, imex: dict | None = None) -> dict[str, dict]:
    """18 trays of one rack (cluster ff.RACK, clique 1): tray -> its sysinfo keys; odd: tray ->
    its 4 GPUs' fabric (fake NVML); imex: tray -> its IMEX record."""
    one = recorded()[0]
    gpus = sysinfo(cls, one)["nvidia"]["gpus"]
    out = {}
    for k, t in enumerate(TRAYS):
        mine = copy.deepcopy(gpus)
        for g, fab in zip(mine, ff.read((odd or {}).get(t, [ff.fabric()] * 4))):
            g["fabric"] = fab
        out[t] = {"nvidia": {"gpus": mine}, "imex": (imex or {}).get(t, ff.imex(TRAYS, k))}
    return out


def statuses(doc: dict) -> dict:
    return {(r["criterion"], r["host"]): r for r in doc["results"]}


def test_recorded_gb200_rack_of_18_trays_passes(tmp_path):
    """18 healthy GB200 trays of one rack under --profile auto (fake NVML: the rack does not
    exist here): every GPU's fabric, the domain of 72 GPUs and every tray's IMEX PASS."""
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", rack("gb200-nvl72"))
    assert doc["meta"]["profile"] == "gb200-nvl72", out
    res = statuses(doc)
    assert len(res) == 18 + 1 + 18, sorted(res)
    assert {r["status"] for r in res.values()} == {"PASS"}, {k: r["message"] for k, r in res.items()
                                                            if r["status"] != "PASS"}
    assert res[("nvlink_domain", "all hosts")]["details"]["groups"][0]["gpus"] == 72
    assert rc == 0


def test_recorded_gb200_rack_faults_fail_naming_tray_gpu_and_cause(tmp_path):
    """The same rack (fake NVML) with one fault each: tray03 GPU 2's registration in progress,
    tray07 GPU 1's degraded-bandwidth bit, tray05 registered with another rack's cluster UUID,
    tray11's IMEX peer tray12 disconnected. Each FAILs naming tray, GPU (or peer) and cause; the
    other trays PASS."""
    odd = {"tray03": [ff.fabric(), ff.fabric(), ff.fabric(state=2), ff.fabric()],
           "tray07": [ff.fabric(), ff.fabric(mask=ff.DEGRADED_BW), ff.fabric(), ff.fabric()],
           "tray05": [ff.fabric(uuid=ff.OTHER_RACK)] * 4}
    imex = {"tray11": ff.imex(TRAYS, 10, down={(10, 11): "DISCONNECTED"})}
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", rack("gb200-nvl72", odd, imex))
    res = statuses(doc)
    r = res[("nvlink_fabric", "tray03")]
    assert r["status"] == "FAIL" and "tray03: GPU 2 fabric state in progress (registration not completed)" \
        in r["message"], r
    assert "likely cause: the rack's NVLink fabric" in r["message"]
    r = res[("nvlink_fabric", "tray07")]
    assert r["status"] == "FAIL" and "tray07: GPU 1 fabric health: degraded bandwidth" in r["message"], r
    assert not any(f"GPU {i} fabric" in r["message"] for i in (0, 2, 3)), r["message"]
    r = res[("nvlink_domain", "all hosts")]
    assert r["status"] == "FAIL", r
    assert "tray03 GPU 2: in no NVLink domain (fabric state in progress" in r["message"], r["message"]
    assert "tray05: in another NVLink domain (cluster UUID) than the run's other trays: cluster 9e8d7c6b-" \
           "5a49-3827-1605-f4e3d2c1b0a9 clique 1 holds 4 GPUs of the run, 72 declared" in r["message"]
    assert "holds 67 GPUs of the run (17 trays: tray[01-04,06-18]), 72 declared" in r["message"]
    r = res[("imex", "tray11")]
    assert r["status"] == "FAIL" and "tray11: IMEX peer 10.0.0.12 (tray12) DISCONNECTED" in r["message"], r
    bad = {k for k, r in res.items() if r["status"] != "PASS"}
    assert bad == {("nvlink_fabric", "tray03"), ("nvlink_fabric", "tray07"), ("nvlink_domain", "all hosts"),
                   ("imex", "tray11")}, bad
    assert rc == 1 and doc["verdict"] == "FAIL"


def test_recorded_gb200_rack_health_summary_fails_and_a_list_from_imex_ctl_errors(tmp_path):
    """issue 51 items 10 and 14 on the recorded rack (fake NVML): tray07 GPU 1's health summary
    LIMITED_CAPACITY and tray09 GPU 3's UNHEALTHY under clean masks FAIL naming tray, GPU and
    state (before: PASS); tray11's nvidia-imex-ctl printing a list ERRORs naming the tool and
    what it printed (before: AttributeError); the other trays PASS."""
    summary = ff.fabric(summary=ff.LIMITED_CAPACITY)
    odd = {"tray07": [ff.fabric(), summary, ff.fabric(), ff.fabric()],
           "tray09": [ff.fabric()] * 3 + [ff.fabric(summary=ff.UNHEALTHY)]}
    imex = {"tray11": dict(ff.imex(TRAYS, 10), domain=[{"host": "10.0.0.11", "status": "READY"}])}
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", rack("gb200-nvl72", odd, imex))
    res = statuses(doc)
    r = res[("nvlink_fabric", "tray07")]
    assert r["status"] == "FAIL" and "tray07: GPU 1 fabric health: health summary LIMITED_CAPACITY" \
        in r["message"], r
    r = res[("nvlink_fabric", "tray09")]
    assert r["status"] == "FAIL" and "GPU 3 fabric health: health summary UNHEALTHY" in r["message"], r
    r = res[("imex", "tray11")]
    assert r["status"] == "ERROR" and "nvidia-imex-ctl -N -j printed JSON that is not an object: a list, " \
        '[{"host": "10.0.0.11", "status": "READY"}]' in r["message"], r
    assert "AttributeError" not in r["message"], r
    bad = {k for k, r in res.items() if r["status"] != "PASS"}
    assert bad == {("nvlink_fabric", "tray07"), ("nvlink_fabric", "tray09"), ("imex", "tray11")}, bad
    assert rc != 0 and doc["verdict"] != "PASS"


PER_JOB = """extends: gb200-nvl72
criteria:
  imex: {max: 0, per_job: true, unit: "IMEX faults", source: "this site starts IMEX per job (a test profile)"}
"""


def test_recorded_gb200_partition_of_68_fails_and_per_job_imex_is_not_judged_idle(tmp_path):
    """18 trays (fake NVML), tray18's GPUs in clique 2 of the same cluster: the partition of the
    other 17 holds 68 GPUs, 72 declared: nvlink_domain FAILs naming tray18 and the 68. The site
    starts IMEX per job and no daemon runs at idle: imex is N.A. on every tray saying what it did
    not judge, never a PASS and never a FAIL of an idle rack."""
    site = tmp_path / "site.yaml"
    site.write_text(PER_JOB)
    hosts = rack("gb200-nvl72", {"tray18": [ff.fabric(clique=2)] * 4},
                 {t: dict(ff.NO_IMEX, hostname=t) for t in TRAYS})
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", hosts, profile=str(site))
    res = statuses(doc)
    r = res[("nvlink_domain", "all hosts")]
    assert r["status"] == "FAIL", r
    assert "tray18: in another partition (clique) than the run's other trays: cluster 5c3a1e2f-" \
           "9b7d-4c8a-a1b2-c3d4e5f60718 clique 2 holds 4 GPUs of the run, 72 declared" in r["message"]
    assert "clique 1 holds 68 GPUs of the run (17 trays: tray[01-17]), 72 declared " \
           "(hardware.nvlink_domain): 4 GPUs missing" in r["message"], r["message"]
    imex = [r for (c, _), r in res.items() if c == "imex"]
    assert len(imex) == 18 and {r["status"] for r in imex} == {"N.A."}
    assert "IMEX is started per job on this site" in imex[0]["message"]
    assert "nvidia-imex-ctl not installed" in imex[0]["message"] and "not judged here" in imex[0]["message"]


def test_recorded_h100_with_fabric_manager_down_fails_and_unreadable_fabric_errors(tmp_path):
    """Two recorded HGX H100 nodes (fake NVML) under --profile auto: on h100a the fabric manager
    is down (every GPU NOT_STARTED): nvlink_fabric FAILs naming every GPU and the fabric manager;
    on h100b NVML gives no fabric state (NotSupported, an older driver): ERROR, never a PASS,
    on a class whose GPUs sit on a fabric. The domain and IMEX checks are N.A. (no rack)."""
    one = recorded()[0]
    gpus = sysinfo("h100-8x-nvlink", one)["nvidia"]["gpus"]
    hosts = {}
    for name, fab in (("h100a", ff.FM_DOWN), ("h100b", None)):
        mine = copy.deepcopy(gpus)
        for g, f in zip(mine, ff.read([fab] * 8)):
            g["fabric"] = f
        hosts[name] = {"nvidia": {"gpus": mine}}
    rc, doc, out = recorded_run(tmp_path, "h100-8x-nvlink", hosts)
    assert doc["meta"]["profile"] == "h100-8x-nvlink", out
    res = statuses(doc)
    r = res[("nvlink_fabric", "h100a")]
    assert r["status"] == "FAIL", r
    for i in range(8):
        assert f"GPU {i} fabric state not started (registration not completed)" in r["message"]
    assert "likely cause: the fabric manager (nvidia-fabricmanager) not running" in r["message"]
    r = res[("nvlink_fabric", "h100b")]
    assert r["status"] == "ERROR" and "h100b: no GPU fabric state for GPU 0 (nvmlDeviceGetGpuFabricInfoV " \
        "v3: NVMLError_NotSupported" in r["message"], r
    assert res[("nvlink_domain", "all hosts")]["status"] == "N.A."
    assert {res[("imex", h)]["status"] for h in hosts} == {"N.A."}


def test_recorded_host_under_local_is_not_judged_for_a_fabric(tmp_path):
    """An HGX H100 whose GPUs report a completed fabric, under --profile local (no class, so no
    fabric it must have): N.A. with the reason, saying what NVML reports."""
    one = recorded()[0]
    gpus = sysinfo("h100-8x-nvlink", one)["nvidia"]["gpus"]
    rc, doc, out = recorded_run(tmp_path, "h100-8x-nvlink", {"node": {"nvidia": {"gpus": gpus}}},
                                profile="local")
    r = statuses(doc)[("nvlink_fabric", "node")]
    assert r["status"] == "N.A." and "profile local's class declares no NVLink fabric" in r["message"], r
    assert "NVML reports fabric state completed (not judged)" in r["message"]


# ------------------------------------------------------------------ the all-reduce over MNNVL (recorded)


def rows(busbw: float, n: int = 8) -> list[dict]:
    """A sweep of 1M..8G (gb200-nvl72's) flat at `busbw` GB/s from 1G, lower below (a fake run)."""
    out, b = [], 1 << 20
    while b <= 8 << 30:
        bw = busbw * min(1.0, b / (1 << 30)) ** 0.3
        algbw = bw * n / (2 * (n - 1))
        out.append({"bytes": b, "time_us": round(b / algbw / 1e3, 3), "algbw": round(algbw, 3),
                    "busbw": round(bw, 3), "correct": True})
        b *= 2
    return out


def two_trays(busbw: float, log: str, off: tuple[float, str] | None = None,
              other: tuple[float, str] | None = None) -> tuple[dict, dict]:
    """Two GB200 trays of rack ff.RACK (fake NVML): their sysinfo keys, and their documents of a
    fake all-reduce across them (busbw GB/s at 8G, the NCCL channel lines of `log` parsed by
    probe_allreduce's own parser); off: (busbw, log) of their run with MNNVL off (the NICs');
    other: (busbw, log) of two more trays, of another rack (ff.OTHER_RACK), run on their own."""
    from test_multinode_transport_recorded import probe

    def run(k, bw, text):
        transports, net, kept = probe.parse_nccl_log(text.splitlines())
        return {"probe": "allreduce", "backend": "nccl", "world_size": 8, "local_ranks": 4, "gpus": 4,
                "nnodes": 2, "node_rank": k % 2, "rows": rows(bw), "graphs": True, "transports": transports,
                "nccl_net": net, "nccl_log": kept}
    n = 4 if other else 2
    odd = {t: [ff.fabric(uuid=ff.OTHER_RACK)] * 4 for t in TRAYS[2:4]}
    hosts = dict(list(rack("gb200-nvl72", odd).items())[:n])
    docs = {}
    for k, t in enumerate(hosts):
        eth = {"name": "eth0", "addresses": [f"10.0.0.{k + 1}"], "operstate": "up", "speed_mbps": 400000}
        docs[t] = {"allreduce": run(k, *((busbw, log) if k < 2 else other)),
                   **({"allreduce_mnnvl_off": run(k, *off)} if off else {}),
                   "netinfo": {"probe": "netinfo", "ethernet": [eth], "infiniband": [],
                               "tools": {"iperf3": False, "ib_write_bw": False}}}
    return hosts, docs


def mnnvl_run(tmp: Path, busbw: float, log: str, other: tuple[float, str] | None = None) -> dict:
    """`-k mnnvl_allreduce` under --profile auto on two_trays()."""
    hosts, docs = two_trays(busbw, log, other=other)
    tmp.mkdir()
    rc, doc, out = recorded_run(tmp, "gb200-nvl72", hosts, checks="mnnvl_allreduce", data_iface="eth0",
                                probes=docs)
    assert doc["meta"]["profile"] == "gb200-nvl72", out
    return statuses(doc)[("mnnvl_allreduce", "all hosts")]


NIC_FIGURE = """extends: gb200-nvl72
criteria:
  multinode_allreduce_busbw: {min: 150, unit: GB/s, size: 8G, sweep: [1M, 8G], algo: Ring, source: "a test"}
"""


def test_recorded_gb200_trays_multinode_allreduce_is_the_nics_run_with_mnnvl_off(tmp_path):
    """Two GB200 trays (fake NVML and NCCL runs) answering MNNVL at 850 GB/s, and NET/IB at 190
    (NVIDIA/nccl-tests issue 252's log) when NCCL_MNNVL_ENABLE=0: multinode_allreduce judges the
    NICs' run (190 against the NICs' figure, never 850 over NVLink), and multinode_transport finds
    MNNVL in its run and NET/IB in the same NICs' run (one run, shared)."""
    from test_multinode_transport_recorded import IB_4x2, MNNVL_2x4
    site = tmp_path / "site.yaml"
    site.write_text(NIC_FIGURE)
    hosts, docs = two_trays(850.0, MNNVL_2x4, off=(190.0, IB_4x2))
    rc, doc, out = recorded_run(tmp_path, "gb200-nvl72", hosts, profile=str(site), data_iface="eth0",
                                checks="multinode_allreduce or multinode_transport",
                                sheet="acceptance/test_network.py", probes=docs)
    res = statuses(doc)
    m = res[("multinode_allreduce", "all hosts")]
    assert m["status"] == "PASS" and m["measured"] == 190.0, m
    tr = res[("multinode_transport", "all hosts")]
    assert tr["status"] == "PASS" and tr["measured"] == "MNNVL; with MNNVL and NVLS off: NET/IBext_v8", tr


def test_recorded_gb200_trays_all_reduce_over_mnnvl_judged_against_the_nvlink_floor(tmp_path):
    """Two trays of one GB200 domain (fake NVML and NCCL runs: no NVL72 rack here): an all-reduce
    over MNNVL at NVLink speed PASSes against the NVLink floor (730 GB/s at 8G, not the NICs'
    rule); at NIC speed over MNNVL it FAILs that floor, measured again first; a domain whose NCCL
    fell back to NET/IB (NVIDIA/nccl-tests issue 252's log, MNNVL 0) FAILs naming the tray, the
    transport and NCCL's MNNVL flag."""
    from test_multinode_transport_recorded import IB_4x2, MNNVL_2x4
    ok = mnnvl_run(tmp_path / "nvlink", 850.0, MNNVL_2x4)
    assert ok["status"] == "PASS" and ok["measured"] == 850.0 and ok["unit"] == "GB/s", ok
    assert ok["expected"].startswith("every NVLink domain's all-reduce over MNNVL at 8G >= 730 GB/s"), ok
    assert ok["details"]["domains"]["tray[01-02]"]["transport"] == "MNNVL", ok
    assert "lixueduan.com" in ok["source"] and "node bound" not in ok["expected"], ok
    # two domains in one run, each its own all-reduce: tray01-02 of one rack at NIC speed over MNNVL,
    # tray03-04 of another whose NCCL fell back to NET/IB; the slowest domain is the figure
    bad = mnnvl_run(tmp_path / "nic", 85.0, MNNVL_2x4, other=(84.0, IB_4x2))
    assert bad["status"] == "FAIL" and bad["measured"] == 84.0, bad
    assert set(bad["details"]["domains"]) == {"tray[01-02]", "tray[03-04]"}, bad
    # 88 % below the floor: final at once, never three identical attempts (issue 51 item 16)
    assert "tray[01-02]: all-reduce busbw 85 GB/s at 8G over MNNVL, measured once: 88.4 % below the floor " \
        "730 GB/s, beyond max_spread 10 %: no attempt that agrees with it could pass, below 730 GB/s" \
        in bad["message"], bad["message"]
    for t in ("tray03", "tray04"):
        assert f"{t}: NET/IBext_v8 between nodes, ranks 3->4 (MNNVL 0)" in bad["message"], bad["message"]
    assert "tray[03-04]: all-reduce busbw 84 GB/s at 8G over NET/IBext_v8" in bad["message"]
    assert "(expected every NVLink domain's all-reduce over MNNVL at 8G >= 730 GB/s" in bad["message"]
    cause = bad["message"].split("; likely cause: ")[1]
    assert "a degraded NVLink or NVLink switch path" in cause, cause
    assert "NCCL did not enable multi-node NVLink (its log says MNNVL 0)" in cause, cause


def test_mnnvl_allreduce_is_not_applicable_without_a_domain_and_names_a_tray_outside_one(tmp_path):
    """Two recorded HGX H100 nodes (no NVLink domain across nodes): N.A. saying so, never a PASS;
    the pure grouping puts a tray whose GPUs registered with no one domain outside, named with its
    GPU and cause, and a tray of another rack in a domain of its own."""
    one = recorded()[0]
    gpus = sysinfo("h100-8x-nvlink", one)["nvidia"]["gpus"]
    hosts = {h: {"nvidia": {"gpus": gpus}} for h in ("a", "b")}
    rc, doc, out = recorded_run(tmp_path, "h100-8x-nvlink", hosts, checks="mnnvl_allreduce")
    r = statuses(doc)[("mnnvl_allreduce", "all hosts")]
    assert r["status"] == "N.A." and "has no multi-node NVLink domain" in r["message"], r
    hosts = {t: ff.read([ff.fabric()] * 4) for t in TRAYS[:3]}
    hosts["tray03"][1] = ff.read([ff.fabric(state=2)])[0]
    hosts["tray04"] = ff.read([ff.fabric(uuid=ff.OTHER_RACK)] * 4)
    groups, outside = judge.tray_domains(hosts)
    assert sorted(map(sorted, groups.values())) == [["tray01", "tray02"], ["tray04"]]
    assert outside == {"tray03": "GPU 1: fabric state in progress (registration not completed)"}


def test_every_class_with_an_nvlink_domain_sets_the_mnnvl_floor_with_its_source():
    """mnnvl_allreduce_busbw is judged where the class has an NVLink domain (N.A. elsewhere, before
    any threshold): every such shipped class sets it in GB/s, cited, at a size of its sweep."""
    from signoff import profiles
    domains = [n for n in profiles.available() if not profiles.load(n).abstract
               and profiles.load(n).hardware.get("nvlink_domain")]
    assert {"gb200-nvl72", "gb300-nvl72"} <= set(domains)
    for n in domains:
        t = profiles.load(n).threshold("mnnvl_allreduce_busbw")
        assert t.op == "min" and t.unit == "GB/s" and t.value >= 700 and t.extra["size"] in ("8G", "16G"), t
        assert "oracle-quickstart/oci-gpu-quickstarts" in t.source and "x" in (t.provisional or t.source), t


def test_plan_of_a_gb200_rack_lists_the_fabric_checks_with_thresholds():
    """`signoff plan --profile gb200-nvl72 --hosts 'tray[01-18]' --no-contact` (issue 43): the
    fabric and IMEX checks per tray, the domain, the all-reduce over MNNVL and the transport of the
    all-reduce and the training step once over all trays, each with its threshold and the profile
    file it comes from (`signoff show-profile` prints the source text)."""
    p = subprocess.run([sys.executable, "-m", "signoff", "plan", "--profile", "gb200-nvl72", "--hosts",
                        "tray[01-18]", "--no-contact"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    out = p.stdout
    per_host, once = out.split("per host, on each of tray[01-18]:")[1].split("once, over all hosts at once:")
    assert "nvlink_fabric <= 0 GPUs [thresholds/nvidia-base.yaml]" in per_host
    assert "hardware.nvlink_fabric: True" in per_host
    assert "imex <= 0 IMEX faults [thresholds/nvidia-base.yaml]" in per_host
    assert "hardware.nvlink_domain: 72; hardware.gpu_count: 4; nvlink_domain <= 0 domains not whole " \
           "[thresholds/nvidia-base.yaml]" in once
    # the transport and the all-reduce over MNNVL, once over every tray (issue 43 parts 2-3): the
    # domain's floor in GB/s from the class, the transport the class promises, the training step's too
    assert "mnnvl_allreduce_busbw >= 730 GB/s (provisional threshold: calibrate on a known-good node) " \
           "[thresholds/gb200-nvl72.yaml]" in once, once
    for check in ("multinode_transport", "train_transport"):
        assert any(ln.split()[:1] == [check] and "multinode_transport == MNNVL (NCCL transport) "
                   "[thresholds/blackwell-nvl72.yaml]" in ln for ln in once.splitlines()), (check, once)
    assert "multinode_allreduce_busbw >= 0.9 x node bound" in once  # the NICs' run: the NIC rule
    shown = subprocess.run([sys.executable, "-m", "signoff", "show-profile", "gb200-nvl72"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120).stdout
    for text in ("docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html", "mnnvl-user-guide",
                 "docs.nvidia.com/multi-node-nvlink-systems/imex-guide",
                 "www.lixueduan.com/posts/ai/13-gb200-mnnvl-nccl-test", "NVIDIA/nccl issue 1159"):
        assert text in shown, text
