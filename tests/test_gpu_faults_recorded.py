"""GPU health criteria FAIL on a broken node. No GPU exists here, so the host's sysinfo
answer is the one recorded on a real 2x H200 (reports/examples/h200-2x) with one fault
injected per GPU field; everything else (transport, probe shipping, judging) runs for real."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_cli import LOCK_WAIT

from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "reports" / "examples" / "h200-2x" / "results.json"


def every_fault(g0: dict, g1: dict) -> None:
    """One fault per GPU field, spread over the two GPUs."""
    g1["ecc_current"] = False
    g1["ecc_volatile_uncorrectable"] = 3
    g1["row_remap"]["pending"] = 1
    g0["pcie"].update(gen=4, width=8)
    g1["persistence_mode"] = 0
    g1["mig_current"] = 1
    g0["nvlink"]["up"] = 12
    g1["power"]["enforced_w"] = g1["power"]["limit_w"] = 500.0


def faulty_h200(tmp_path: Path, inject=every_fault) -> Path:
    """An inventory of one local host whose Python answers sysinfo with a faulty H200 pair."""
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    g0, g1 = facts["nvidia"]["gpus"]
    for g in (g0, g1):
        # recorded before sysinfo read power limits: the 700 W enforced limit read through NVML
        # on H200 (docs/h200.md, reports/examples/h200-1x), default and range assumed the same
        g["power"] = {"enforced_w": 700.0, "limit_w": 700.0, "default_w": 700.0,
                      "min_w": 200.0, "max_w": 700.0}
        g["nvlink"].setdefault("unreadable", {})
    inject(g0, g1)
    return recorded_inventory(tmp_path, facts)


def recorded_inventory(tmp_path: Path, facts: dict) -> Path:
    """One local host whose Python answers the sysinfo probe with `facts`."""
    doc = tmp_path / "sysinfo.json"
    doc.write_text(json.dumps(facts))
    py = tmp_path / "recordedpython"
    py.write_text(f'#!/bin/bash\n[ "$1" = sysinfo.py ] && exec cat {doc}\nexec {sys.executable} "$@"\n')
    py.chmod(0o755)
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - {{name: gpunode, address: local, python: {py}}}\n")
    return inv


def run(tmp_path: Path, inv: Path, *args: str, profile="h200-8x-nvlink@2") -> dict:
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", *(args or ["acceptance/test_gpu_health.py"]),
                        "--partial", "--inventory", str(inv), "--profile", profile,
                        "--report-dir", str(rd), "-p", "no:cacheprovider", *LOCK_WAIT],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    res = {r["criterion"]: r for r in load_results(rd / "results.json")["results"]}
    # 1 where a check FAILed, else 2: ERROR without FAIL (README: Exit codes)
    assert p.returncode == (1 if any(r["status"] == "FAIL" for r in res.values()) else 2), p.stdout
    return res


@pytest.mark.parametrize("criterion, text", [
    ("ecc_enabled", "gpunode: GPU 1 ECC off"),
    ("ecc_uncorrectable", "GPU 1 has 3 uncorrectable ECC errors since driver load"),
    ("row_remap", "GPU 1 has a row remap pending (reset the GPU)"),
    ("pcie_link", "GPU 0 PCIe Gen4 x8 < Gen5 x16"),
    ("persistence_mode", "GPU 1 persistence mode off"),
    ("mig_mode", "GPU 1 MIG on"),
    ("nvlink_up", "GPU 0 has 12/18 NVLinks up"),
    ("power_limit", "GPU 1 enforced power limit 500 W < 700 W"),
])
def test_recorded_h200_with_a_fault_fails_by_name(tmp_path, criterion, text):
    res = run(tmp_path, faulty_h200(tmp_path))
    assert res[criterion]["status"] == "FAIL", res[criterion]
    assert text in res[criterion]["message"]
    assert res["gpu_model"]["status"] == "PASS"  # the rest of the node is judged as measured


def slot_gen4(g0, g1):
    g1["pcie"].update(gen=4, max_gen=4)  # NVML's max is the slot's: Gen4; the GPU's own is Gen5


def links_17(g0, g1):
    g1["nvlink"].update(links=17, up=17)  # every link NVML reports is up, one is missing


def link_unreadable(g0, g1):
    g1["nvlink"].update(up=17, unreadable={"5": "NVMLError_Unknown: Unknown Error"})


def admin_cap(g0, g1):
    g0["power"].update(enforced_w=700.0, default_w=750.0)  # above the class's 700, below its own


@pytest.mark.parametrize("inject, criterion, text", [
    (slot_gen4, "pcie_link", "GPU 1 PCIe Gen4 x16 < Gen5 x16 (slot/system max Gen4 x16)"),
    (links_17, "nvlink_up", "GPU 1 has 17/17 NVLinks up, 18 expected"),
    (link_unreadable, "nvlink_up", "GPU 1 NVLink state unreadable on link(s) 5 (NVMLError_Unknown"),
    (admin_cap, "power_limit", "GPU 0 capped at 700 W, below its default 750 W"),
], ids=["gen5-gpu-in-gen4-slot", "17-of-17-links-on-18-link-class", "one-unreadable-link",
        "cap-below-the-gpu-default"])
def test_recorded_h200_with_one_fault_fails(tmp_path, inject, criterion, text):
    res = run(tmp_path, faulty_h200(tmp_path, inject))
    assert res[criterion]["status"] == "FAIL", res[criterion]
    assert text in res[criterion]["message"]
    others = {c: r["status"] for c, r in res.items() if c != criterion}
    assert set(others.values()) <= {"PASS", "N.A."}, others  # only the injected fault fails


def test_missing_gemm_figure_is_an_error_not_na(tmp_path):
    """A class without a sustained GEMM figure ERRORs, saying which figure is missing."""
    prof = tmp_path / "nogemm.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  soak_gemm_tflops: null\n")
    res = run(tmp_path, faulty_h200(tmp_path, lambda g0, g1: None),
              "acceptance/test_soak.py", "-k", "gemm_tflops", profile=str(prof))
    r = res["soak_gemm_tflops"]
    assert r["status"] == "ERROR", r
    assert "has no threshold for 'soak_gemm_tflops'" in r["message"]


def test_sysinfo_keeps_unreadable_links_and_reads_power_limits():
    """The probe's NVML reads, against a stand-in for pynvml (no GPU here): a link whose state
    query errors is counted and named, a link that does not exist is not."""
    spec = importlib.util.spec_from_file_location("sysinfo", ROOT / "signoff/gpu/probe_sysinfo.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)

    class NotSupported(Exception):
        pass

    class Unknown(Exception):
        pass

    def state(h, link):
        if link >= 12:
            raise NotSupported()
        if link == 5:
            raise Unknown("Unknown Error")
        return 1

    nv = SimpleNamespace(NVML_NVLINK_MAX_LINKS=18, NVMLError_NotSupported=NotSupported,
                         NVMLError_InvalidArgument=NotSupported, nvmlDeviceGetNvLinkState=state,
                         nvmlDeviceGetEnforcedPowerLimit=lambda h: 350000,
                         nvmlDeviceGetPowerManagementLimit=lambda h: 350000,
                         nvmlDeviceGetPowerManagementDefaultLimit=lambda h: 400000,
                         nvmlDeviceGetPowerManagementLimitConstraints=lambda h: (100000, 400000))
    assert probe.nvlinks(nv, None) == {"links": 12, "up": 11, "unreadable": {"5": "Unknown: Unknown Error"}}
    nv.nvmlDeviceGetNvLinkState = lambda h, link: state(h, 5)  # no link readable at all
    assert probe.nvlinks(nv, None)["links"] == 0 and len(probe.nvlinks(nv, None)["unreadable"]) == 18
    assert probe.power_limits(nv, None) == {"enforced_w": 350.0, "limit_w": 350.0, "default_w": 400.0,
                                            "min_w": 100.0, "max_w": 400.0}


def probe_module(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sysinfo_reads_nvlink5_through_the_36_slot_table():
    """NVLink5 (B200, B300, GB200, GB300): 18 links per GPU, while nvidia-ml-py >= 13's link table
    has 36 slots (NVML_NVLINK_MAX_LINKS) and NVML answers InvalidArgument past the GPU's 18
    (NVIDIA/TensorRT-LLM PR 17060): those slots are absent links, never unreadable ones, so the
    class's 18 are all up. A fake NVML: no such GPU here."""
    probe = probe_module("signoff/gpu/probe_sysinfo.py", "sysinfo")

    class NotSupported(Exception):
        pass

    class InvalidArgument(Exception):
        pass

    def state(h, link):
        if link >= 18:
            raise InvalidArgument()
        return 1

    nv = SimpleNamespace(NVML_NVLINK_MAX_LINKS=36, NVMLError_NotSupported=NotSupported,
                         NVMLError_InvalidArgument=InvalidArgument, nvmlDeviceGetNvLinkState=state)
    assert probe.nvlinks(nv, None) == {"links": 18, "up": 18, "unreadable": {}}
    nv.nvmlDeviceGetNvLinkState = lambda h, link: 0 if link == 7 else state(h, link)  # one link down
    assert probe.nvlinks(nv, None) == {"links": 18, "up": 17, "unreadable": {}}


def test_sysinfo_reads_pci_device_id_c2c_and_an_arm_cpu(tmp_path):
    """What tells a Blackwell class apart (a fake NVML): the PCI device id from NVML's
    pciDeviceId (device << 16 | NVIDIA's 0x10de), so a GB200 named "NVIDIA Graphics Device" is
    still known by 2941; NVML's C2C mode (a Grace tray's GPUs reach the CPU over NVLink-C2C),
    None where NVML has no such call or cannot say; and an aarch64 /proc/cpuinfo, which has no
    "model name", gives its core (Grace: Neoverse-V2)."""
    probe = probe_module("signoff/gpu/probe_sysinfo.py", "sysinfo")
    assert probe.pci_device_id(SimpleNamespace(pciDeviceId=0x294110DE)) == "2941"
    assert probe.pci_device_id(SimpleNamespace(pciDeviceId=0x31C210DE)) == "31c2"
    assert probe.pci_device_id(None) is None
    nv = SimpleNamespace(nvmlDeviceGetC2cModeInfoV=lambda h: SimpleNamespace(isC2cEnabled=1))
    assert probe.c2c_mode(nv, None) is True
    nv.nvmlDeviceGetC2cModeInfoV = lambda h: SimpleNamespace(isC2cEnabled=0)
    assert probe.c2c_mode(nv, None) is False

    def unsupported(h):
        raise RuntimeError("Not Supported")
    nv.nvmlDeviceGetC2cModeInfoV = unsupported
    assert probe.c2c_mode(nv, None) is None and probe.c2c_mode(SimpleNamespace(), None) is None
    arm = tmp_path / "cpuinfo"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\n"
                   "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
                   "CPU part\t: 0xd4f\nCPU revision\t: 0\n\nprocessor\t: 1\nCPU implementer\t: 0x41\n")
    assert probe.cpu_model(str(arm)) == "Neoverse-V2"
    arm.write_text("CPU implementer\t: 0x4e\nCPU part\t: 0x004\n")
    assert probe.cpu_model(str(arm)) == "Arm CPU implementer 0x4e part 0x004"
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\n")
    assert probe.cpu_model(str(x86)) == "Intel(R) Xeon(R) Processor"
    assert probe.cpu_model(str(tmp_path / "none")) is None


def test_hostlink_placement_ignores_a_cpu_less_numa_node(tmp_path, monkeypatch):
    """A Grace tray shows each GPU's memory as a NUMA node of its own, without CPUs: a GPU whose
    node has no local CPUs is not blamed for where the process ran (None: nothing to say)."""
    probe = probe_module("signoff/training/probe_hostlink.py", "hostlink")
    dev = tmp_path / "0009:01:00.0"
    dev.mkdir()
    (dev / "numa_node").write_text("2\n")
    (dev / "local_cpulist").write_text("\n")
    real_open = open

    def fake_open(path, *a, **kw):
        return real_open(str(path).replace("/sys/bus/pci/devices", str(tmp_path)), *a, **kw)
    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(probe.os, "listdir", lambda p: ["node0", "node1", "node2", "possible"])
    monkeypatch.setattr(probe.os.path, "isdir", lambda p: True)
    got = probe.placement("0009:01:00.0", {0, 1})
    assert got["numa_node"] == 2 and got["local_cpus"] == "" and got["process_on_gpu_node"] is None
    (dev / "local_cpulist").write_text("72-143\n")  # a CPU node: judged as before
    assert probe.placement("0009:01:00.0", {0, 1})["process_on_gpu_node"] is False


def test_gpu_host_of_another_class_is_not_measured_at_its_sizes(tmp_path):
    """The recorded (healthy) 2x H200 under the 8-GPU profile: the class checks FAIL and the
    heavy measurements (soak, all-reduce, P2P) are NOT RUN, naming the class guard."""
    res = run(tmp_path, faulty_h200(tmp_path, lambda g0, g1: None), "acceptance/test_soak.py",
              "acceptance/test_interconnect.py", "acceptance/test_gpu_health.py", "-k",
              "gpu_count or soak_gemm_tflops or soak_throttle or allreduce_busbw or p2p_bandwidth",
              profile="h200-8x-nvlink")
    assert res["gpu_count"]["status"] == "FAIL"
    for crit in ("soak_gemm_tflops", "soak_throttle", "allreduce_busbw", "p2p_bandwidth"):
        assert res[crit]["status"] == "NOT RUN", res[crit]
        assert res[crit]["message"].startswith("not run: class guard of profile h200-8x-nvlink")
        assert "gpunode: 2 GPUs where 8 are expected" in res[crit]["message"]


def test_recorded_h200_with_a_driver_below_its_branch_minimum_fails(tmp_path):
    """Recorded 2x H200, one fault injected: driver 570.86, above the oldest branch's minimum
    (535.309.01) yet below its own branch's 570.211.01 (clustermax table)."""
    inv = faulty_h200(tmp_path, lambda g0, g1: None)
    doc = tmp_path / "sysinfo.json"
    facts = json.loads(doc.read_text())
    facts["nvidia"]["driver"] = "570.86"
    doc.write_text(json.dumps(facts))
    r = run(tmp_path, inv, "acceptance/test_versions.py", "-k", "nvidia_driver_version",
            "--lock-wait", "300")["nvidia_driver_version"]
    assert r["status"] == "FAIL", r["message"]
    assert "NVIDIA driver = 570.86" in r["message"]
    assert "below branch 570's minimum 570.211.01" in r["message"]


def test_recorded_h200_under_a_profile_without_a_power_figure_errors_naming_it(tmp_path):
    """The recorded (healthy) 2x H200 judged by a profile whose power figure is dropped
    (`power_limit: null`): power_limit ERRORs naming the missing threshold, never a pass."""
    prof = tmp_path / "nopower.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria: {power_limit: null}\n")
    res = run(tmp_path, faulty_h200(tmp_path, lambda g0, g1: None), "acceptance/test_gpu_health.py",
              "-k", "power_limit", "--lock-wait", "300", profile=str(prof))
    assert res["power_limit"]["status"] == "ERROR", res["power_limit"]
    assert "has no threshold for 'power_limit'" in res["power_limit"]["message"]


def test_recorded_h200_whose_soak_probe_saw_no_gpu_errors_every_soak_check(tmp_path):
    """Recorded 2x H200, one fault injected: NVML inside the soak probe sees no GPU (its header
    lists none, its samples are empty) while sysinfo saw two. Before, soak_gemm_tflops and the
    straggler check PASSed having measured nothing."""
    inv = faulty_h200(tmp_path, lambda g0, g1: None)
    stream = tmp_path / "soak.jsonl"
    empty = {f: [] for f in ("temp", "mem_temp", "power", "sm_clock", "reasons", "util", "tflops",
                             "ecc_corr", "ecc_unc")}
    stream.write_text("\n".join(json.dumps(x) for x in [
        {"type": "header", "gpus": [], "duration_s": 10, "interval_s": 1, "gpu_errors": {}},
        *({"type": "sample", "t": float(k), **empty} for k in range(12)),
        {"probe": "soak", "samples": 12, "gpus": [], "ecc_before": [], "ecc_after": [], "xid": [],
         "xid_readable": True, "xid_note": "read from NVML events", "gpu_errors": {}}]) + "\n")
    py = tmp_path / "recordedpython"
    rest = py.read_text().split("\n", 1)[1]
    py.write_text(f'#!/bin/bash\n[ "$1" = soak.py ] && exec cat {stream}\n{rest}')
    res = run(tmp_path, inv, "acceptance/test_soak.py", "--soak-duration", "10s", "--lock-wait", "300")
    soaks = {c: r for c, r in res.items() if c.startswith("soak_")}
    assert len(soaks) == 7, sorted(soaks)
    for crit, r in soaks.items():
        assert r["status"] == "ERROR", (crit, r)
        assert "the soak probe's NVML saw 0 GPU(s) where sysinfo reports 2" in r["message"], r


def test_recorded_h200_allreduce_on_fewer_gpus_errors_keeping_its_rows(tmp_path):
    """Recorded 2x H200 with its recorded all-reduce rows, one fault injected: the probe ran on
    1 of the 2 GPUs (CUDA_VISIBLE_DEVICES). The check ERRORs and keeps the rows it measured."""
    inv = faulty_h200(tmp_path, lambda g0, g1: None)
    rec = next(r for r in json.loads(RECORDED.read_text())["results"] if r["criterion"] == "allreduce_busbw")
    doc = tmp_path / "allreduce.json"
    doc.write_text(json.dumps({"rows": rec["details"]["rows"], "backend": "nccl", "world_size": 1,
                               "local_ranks": 1}))
    py = tmp_path / "recordedpython"
    rest = py.read_text().split("\n", 1)[1]
    py.write_text(f'#!/bin/bash\n[ "$1" = allreduce.py ] && exec cat {doc}\n{rest}')
    r = run(tmp_path, inv, "acceptance/test_interconnect.py", "-k", "allreduce_busbw", "--lock-wait", "300",
            profile="h200-8x-nvlink@2")["allreduce_busbw"]
    assert r["status"] == "ERROR", r
    assert "all-reduce ran on 1 of the 2 GPUs" in r["message"]
    assert r["details"]["rows"] == rec["details"]["rows"] and r["details"]["local_ranks"] == 1


def test_an_interpreter_without_nvidia_ml_py_is_named_not_blamed_on_nvml(tmp_path):
    """The recorded H200 as its sysinfo reads in an interpreter lacking nvidia-ml-py and torch
    (injected: the GPUs stay on the PCI bus): the checks ERROR naming that interpreter and
    what it lacks; under --profile auto too, never 'fix NVML'."""
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    facts["nvidia"] = {"available": False, "error": "nvidia-ml-py (pynvml) not importable: No module "
                       "named 'pynvml'", "pci_devices": 2, "driver_loaded": True}
    facts["torch"] = {"version": None, "error": "torch not importable: No module named 'torch'"}
    facts["python_executable"] = "/usr/bin/python3"
    inv = recorded_inventory(tmp_path, facts)
    lacks = ("2 NVIDIA GPU(s) on the PCI bus, but the probes' interpreter /usr/bin/python3 lacks "
             "nvidia-ml-py (and torch), so NVML cannot be read")
    res = run(tmp_path, inv, "acceptance/test_gpu_health.py", "-k", "ecc_enabled or gpu_count")
    for r in res.values():
        assert r["status"] == "ERROR" and lacks in r["message"], r
        assert "--python PATH or the inventory's python: for gpunode" in r["message"]
    res = run(tmp_path, inv, "acceptance/test_gpu_health.py", "-k", "ecc_enabled", profile="auto")
    msg = res["ecc_enabled"]["message"]
    assert res["ecc_enabled"]["status"] == "ERROR" and f"--profile auto: gpunode: {lacks}" in msg, msg
    assert "fix NVML" not in msg and msg.endswith("; pass --profile")


def test_sdc_run_on_fewer_devices_than_nvml_reports_errors_never_passes(tmp_path):
    """The recorded H200 pair's NVML reports 2 GPUs; the real SDC probe here sees no GPU and
    computes on the CPU: one CPU device is no proof about two GPUs (it passed before)."""
    res = run(tmp_path, faulty_h200(tmp_path, lambda g0, g1: None), "acceptance/test_health.py", "-k", "sdc")
    r = res["sdc"]
    assert r["status"] == "ERROR", r
    assert "probe ran on 1 device(s) (cpu) of the 2 GPUs NVML reports" in r["message"], r["message"]
