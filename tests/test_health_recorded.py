"""The health checks of acceptance/test_health.py on a recorded 2x H200 (reports/examples/h200-2x:
no GPU here): its sysinfo answer is recorded; the health probes' other modes run for real on this
machine (its own kernel log, counters, CPU), and each negative case injects one fault into a
recorded reading, named as such."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

from test_cli import LOCK_WAIT
from test_gpu_faults_recorded import faulty_h200

from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent


def recorded_host(tmp_path: Path, env: dict | None = None, inject=lambda g0, g1: None) -> Path:
    """The recorded healthy H200 pair as one local host: its Python answers the plain sysinfo
    probe with the recording and runs every other probe (and sysinfo's modes) for real."""
    inv = faulty_h200(tmp_path, inject)
    py = tmp_path / "recordedpython"
    doc = tmp_path / "sysinfo.json"
    py.write_text(f'#!/bin/bash\n[ "$1" = sysinfo.py ] && [ "$2" != counters ] && [ "$2" != xids ] '
                  f'&& exec cat {doc}\nexec {sys.executable} "$@"\n')
    envs = "".join(f"\n      {k}: {json.dumps(str(v))}" for k, v in (env or {}).items())
    inv.write_text(f"hosts:\n  - name: gpunode\n    address: local\n    python: {py}\n"
                   + (f"    env:{envs}\n" if envs else ""))
    return inv


def judged(tmp_path: Path, inv: Path, *args: str, profile="h200-8x-nvlink@2") -> dict:
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_health.py", *args, "--partial",
                        "--inventory", str(inv), "--profile", profile, "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert (rd / "results.json").exists(), p.stdout + p.stderr
    return {r["criterion"]: r for r in load_results(rd / "results.json")["results"]}


# A recorded machine up for ten days: its log carries its own boot time, so the result never
# depends on how long this machine has been up (a CI machine is minutes old).
RECORDED_UPTIME = 10 * 86400
XID_LOG = ((RECORDED_UPTIME, "Linux version 6.1.0 (recorded)"),  # [0.000000]: the log holds its boot
           (7200, "usb 1-1: new device"),
           (3600, "NVRM: Xid (PCI:0000:00:07): 13, pid=4242, Graphics Exception"),
           (60, "NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', GPU has fallen off"))


def recorded_log(path: Path, now: float, lines=XID_LOG) -> Path:
    """A dmesg capture (`[seconds since boot] text`) with its machine's `btime` line, the
    lines `ago` seconds before `now`."""
    btime = int(now) - RECORDED_UPTIME
    path.write_text(f"btime {btime}\n" + "".join(f"[{now - btime - ago:12.6f}] {text}\n"
                                                  for ago, text in lines))
    return path


def boot_window(tmp_path: Path) -> str:
    """h200-8x-nvlink@2 judging XIDs over this boot: a machine's uptime is not the test's to choose."""
    prof = tmp_path / "boot.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  xid_fatal: {max: 0, window: boot, "
                    "codes: [48, 63, 64, 74, 79, 92, 94, 95], unit: XIDs, source: 'as nvidia-base'}\n")
    return str(prof)


def test_xid_history_of_this_machines_kernel_log_over_this_boot(tmp_path):
    """This machine's own kernel log (journal, else dmesg), read for real since its boot: no
    XID; a PASS exactly when the log still holds the boot (a ring buffer the lab's bridge
    messages wrapped does not: ERROR, saying from when it covers)."""
    r = judged(tmp_path, recorded_host(tmp_path), "-k", "xid_history",
               profile=boot_window(tmp_path))["xid_history"]
    d = r["details"]
    assert d["source"] in ("journal", "dmesg (this boot)") and d["since"] == d["boot"], d
    covered = d["covers_from"] is not None and d["covers_from"] <= d["since"] + 60
    assert r["status"] == ("PASS" if covered else "ERROR"), r
    assert covered or "covers the last" in r["message"] and "not this boot" in r["message"], r


def test_xid_history_with_a_fatal_xid_injected_fails_naming_it(tmp_path):
    """A recorded kernel log with XID 79 (fatal) and XID 13 (reported only) injected."""
    log = recorded_log(tmp_path / "kern.log", time.time())
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    r = judged(tmp_path, inv, "-k", "xid_history")["xid_history"]
    assert r["status"] == "FAIL", r
    assert "XID 79 x1 on PCI:0000:00:06" in r["message"] and "others: XID 13 x1" in r["message"]
    assert r["details"]["counts"] == {"13": 1, "79": 1}


def test_recorded_xid_log_reads_alike_whatever_this_machines_uptime(tmp_path, monkeypatch):
    """The same recorded log, the probe on a machine up 10 minutes and up 10 days: one answer."""
    now = 1_764_633_600.0  # a fixed clock: nothing here reads the real one
    probe = sysinfo_probe(monkeypatch, tmp_path)
    monkeypatch.setenv("SIGNOFF_KERNEL_LOG", str(recorded_log(tmp_path / "kern.log", now)))
    seen = []
    for uptime in (600, 10 * 86400):
        monkeypatch.setattr(probe, "_boot_time", lambda up=uptime: (int(now - up), None))
        monkeypatch.setattr(probe.time, "time", lambda: now)
        seen.append(probe.kernel_xids(now - 168 * 3600))
    assert seen[0] == seen[1]
    assert seen[0]["counts"] == {"13": 1, "79": 1} and seen[0]["error"] is None
    assert seen[0]["covers_from"] == now - 168 * 3600  # it holds its boot, 10 days back: all of it
    short = probe.kernel_xids(now - 11 * 86400)  # a window older than its boot: from its boot only
    assert short["covers_from"] == now - RECORDED_UPTIME and short["counts"] == {"13": 1, "79": 1}
    boot = probe.kernel_xids("boot")  # its own boot, never this machine's
    assert boot["since"] == boot["covers_from"] == boot["boot"] == int(now) - RECORDED_UPTIME


def test_recorded_dmesg_without_its_boot_time_is_an_error(tmp_path, monkeypatch):
    log = tmp_path / "kern.log"
    log.write_text("".join(ln for ln in recorded_log(log, 1e9).read_text().splitlines(True)
                           if not ln.startswith("btime")))
    monkeypatch.setenv("SIGNOFF_KERNEL_LOG", str(log))
    doc = sysinfo_probe(monkeypatch, tmp_path).kernel_xids(0)
    assert doc["error"] and "no 'btime <epoch>' line" in doc["error"] and not doc["counts"]


def test_xid_history_unreadable_log_is_an_error(tmp_path):
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": tmp_path / "missing.log"})
    r = judged(tmp_path, inv, "-k", "xid_history")["xid_history"]
    assert r["status"] == "ERROR", r
    assert "kernel log unreadable" in r["message"] and "missing.log" in r["message"]


def recorded_facts(tmp_path: Path, change) -> None:
    """Change the recorded sysinfo answer of recorded_host() in place."""
    doc = tmp_path / "sysinfo.json"
    facts = json.loads(doc.read_text())
    change(facts)
    doc.write_text(json.dumps(facts))


def answer(tmp_path: Path, probe_args: str, doc: dict) -> None:
    """The recorded host's Python answers `probe_args` (e.g. 'sysinfo.py counters') with `doc`."""
    py = tmp_path / "recordedpython"
    f = tmp_path / (probe_args.replace(" ", "_") + ".json")
    f.write_text(json.dumps(doc))
    head, rest = py.read_text().split("\n", 1)
    py.write_text(f'{head}\n[ "$*" = "{probe_args}" ] && exec cat {f}\n{rest}')


# Counters at the start as sysinfo records them; the recording predates them: these are injected
IB = {"symbol_error": 0, "link_downed": 1, "link_error_recovery": 0, "port_rcv_errors": 0}
START = {"t": 0, "infiniband": {"mlx5_0/1": IB, "mlx5_1/1": IB}, "net": {},
         "pcie_replay": {"0": 0, "1": 7}}


def test_error_counters_recorded_snapshots_unchanged_pass(tmp_path):
    inv = recorded_host(tmp_path)
    recorded_facts(tmp_path, lambda f: f.update(counters=START))
    answer(tmp_path, "sysinfo.py counters", {**START, "probe": "counters"})
    r = judged(tmp_path, inv, "-k", "error_counters")["error_counters"]
    assert r["status"] == "PASS", r
    assert "InfiniBand mlx5_0/1" in r["expected"] and "GPU 1" in r["expected"]


def test_error_counters_with_growth_injected_fail_naming_the_port(tmp_path):
    """Recorded start and end snapshots, growth injected: a link flap on mlx5_1 port 1 and
    PCIe replays on GPU 1."""
    inv = recorded_host(tmp_path)
    recorded_facts(tmp_path, lambda f: f.update(counters=START))
    end = json.loads(json.dumps(START))
    end["infiniband"]["mlx5_1/1"]["link_downed"] = 3
    end["pcie_replay"]["1"] = 9
    answer(tmp_path, "sysinfo.py counters", end)
    r = judged(tmp_path, inv, "-k", "error_counters")["error_counters"]
    assert r["status"] == "FAIL", r
    assert "InfiniBand mlx5_1/1 link_downed +2 (1 -> 3)" in r["message"]
    grew = r["message"].split(" (expected")[0]
    assert "GPU 1 PCIe replay counter +2 (7 -> 9)" in grew and "mlx5_0" not in grew and "GPU 0" not in grew


def test_error_counters_run_after_every_other_check(tmp_path):
    """The end snapshot is taken last: test_error_counters is moved behind every check."""
    inv = recorded_host(tmp_path)
    rd = tmp_path / "report"
    subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "--partial", "--inventory", str(inv),
                    "--profile", "h200-8x-nvlink@2", "--report-dir", str(rd), "-p", "no:cacheprovider",
                    "-k", "error_counters or gpu_model or version_parity", *LOCK_WAIT],
                   cwd=ROOT, capture_output=True, text=True, timeout=300)
    order = [r["criterion"] for r in load_results(rd / "results.json")["results"]]
    assert order[-1] == "error_counters" and {"gpu_model", "version_parity"} <= set(order), order


HBM = {"probe": "hbm", "bytes": 1 << 30, "iters": 20, "errors": {}}


def test_hbm_recorded_at_the_anchor_passes(tmp_path):
    """4.24 TB/s on both GPUs: the anchor measured on one H200 (docs/h200.md)."""
    inv = recorded_host(tmp_path)
    answer(tmp_path, "hbm.py", {**HBM, "gpus": {"0": 4.24, "1": 4.24}})
    res = judged(tmp_path, inv, "-k", "hbm")
    assert res["hbm_bandwidth"]["status"] == res["hbm_uniformity"]["status"] == "PASS", res


def test_hbm_with_one_slow_gpu_injected_fails_by_name(tmp_path):
    inv = recorded_host(tmp_path)
    answer(tmp_path, "hbm.py", {**HBM, "gpus": {"0": 4.24, "1": 3.1}})
    res = judged(tmp_path, inv, "-k", "hbm")
    assert res["hbm_bandwidth"]["status"] == "FAIL"
    assert "GPU 1 (the slowest) device-to-device copy" in res["hbm_bandwidth"]["message"]
    assert res["hbm_uniformity"]["status"] == "FAIL", res["hbm_uniformity"]
    assert "GPU 1 3.1 TB/s = 0.84 x the host's median 3.67 TB/s" in res["hbm_uniformity"]["message"]


def test_hbm_probe_without_cuda_errors(tmp_path):
    """The real probe on this machine (CPU torch): no CUDA, an ERROR naming why, never a pass."""
    r = judged(tmp_path, recorded_host(tmp_path), "-k", "hbm_bandwidth")["hbm_bandwidth"]
    assert r["status"] == "ERROR" and "torch.cuda.is_available() is False" in r["message"], r


# nvidia-smi -q's offsets below T.Limit, as the 1x H200's capture and the H100 SXM's
# (thamada/nvidia-smi nvsim/H100SXMx8_smi.py: T.Limit 87 C -> 95 / 89 / 87 C) print them
TLIMIT_OFFSETS = {"GPU Shutdown T.Limit Temp": -8, "GPU Slowdown T.Limit Temp": -2,
                  "GPU Max Operating T.Limit Temp": 0}


def h200_thermal(tlimit_form=False):
    """NVML's thresholds on H200 (reports/examples/h200-1x); in the T.Limit form of newer
    drivers instead (injected): no absolute value from NVML, nvidia-smi's offsets below
    T.Limit = 35 C now + NVML's 52 C margin = 87 C: the same thresholds, written as offsets."""
    if tlimit_form:
        return {"shutdown": None, "slowdown": None, "gpu_max": None, "mem_max": 95, "temp": 35,
                "tlimit_margin": 52, "smi": {"GPU T.Limit Temp": 52, **TLIMIT_OFFSETS}}
    return {"shutdown": 95, "slowdown": 89, "gpu_max": 87, "mem_max": 95, "temp": 35,
            "tlimit_margin": 54, "smi": {}}


def l40s_thermal():
    """An L40S as nvidia-smi -q prints it (thamada/nvidia-smi gls/L40S_smi.py): only offsets
    below T.Limit 87 C (shutdown -5, slowdown -2, GPU max 0 -> 92 / 89 / 87 C), and no memory
    threshold (N/A)."""
    return {"shutdown": None, "slowdown": None, "gpu_max": None, "mem_max": None, "temp": 30,
            "tlimit_margin": 57, "smi": {"GPU T.Limit Temp": 57, "GPU Shutdown T.Limit Temp": -5,
                                         "GPU Slowdown T.Limit Temp": -2,
                                         "GPU Max Operating T.Limit Temp": 0}}


def with_thermal(g0, g1, form=False):
    g0["thermal"], g1["thermal"] = h200_thermal(form), h200_thermal(form)


def test_thermal_thresholds_recorded_h200_pass_in_both_forms(tmp_path):
    r = judged(tmp_path, recorded_host(tmp_path, inject=with_thermal), "-k", "thermal_thresholds")
    assert r["thermal_thresholds"]["status"] == "PASS", r
    inv = recorded_host(tmp_path, inject=lambda g0, g1: with_thermal(g0, g1, True))
    r = judged(tmp_path, inv, "-k", "thermal_thresholds")["thermal_thresholds"]
    assert r["status"] == "PASS", r
    assert r["details"]["1"]["slowdown"] == [89, "T.Limit 87 C minus offset -2 C"]
    assert r["details"]["1"]["shutdown"] == [95, "T.Limit 87 C minus offset -8 C"]
    assert r["details"]["1"]["gpu_max"] == [87, "T.Limit 87 C minus offset +0 C"]


def test_thermal_thresholds_of_an_l40s_judge_what_it_reports(tmp_path):
    """No memory threshold on an L40S: a profile asking none judges the other three (PASS); one
    asking a memory maximum ERRORs naming it, never a pass."""
    def l40s(g0, g1):
        g0["thermal"], g1["thermal"] = l40s_thermal(), l40s_thermal()
    prof = tmp_path / "l40s-like.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  thermal_slowdown: {min: 89, shutdown: 92, "
                    "gpu_max: 87, mem_max: null, unit: C, source: 'thamada/nvidia-smi gls/L40S_smi.py'}\n")
    r = judged(tmp_path, recorded_host(tmp_path, inject=l40s), "-k", "thermal_thresholds",
               profile=str(prof))["thermal_thresholds"]
    assert r["status"] == "PASS", r
    assert r["details"]["0"]["shutdown"] == [92, "T.Limit 87 C minus offset -5 C"]
    assert r["details"]["0"]["mem_max"] == [None, "unreadable"]
    r = judged(tmp_path, recorded_host(tmp_path, inject=l40s), "-k", "thermal_thresholds")
    r = r["thermal_thresholds"]  # h200-8x-nvlink@2 asks mem_max 95: unreadable, so never a pass
    assert r["status"] == "ERROR"
    assert "no temperature threshold for GPU 0 mem_max, GPU 1 mem_max" in r["message"]


def test_thermal_thresholds_with_a_low_slowdown_injected_fail_in_both_forms(tmp_path):
    def low(g0, g1):
        with_thermal(g0, g1)
        g1["thermal"]["slowdown"] = 84
    r = judged(tmp_path, recorded_host(tmp_path, inject=low), "-k", "thermal")["thermal_thresholds"]
    assert r["status"] == "FAIL" and "GPU 1 slowdown 84 C < 89 C (NVML)" in r["message"], r

    def low_offset(g0, g1):
        with_thermal(g0, g1, True)
        g0["thermal"]["smi"]["GPU Slowdown T.Limit Temp"] = 3  # 87 - 3 = 84 C
    r = judged(tmp_path, recorded_host(tmp_path, inject=low_offset), "-k", "thermal_thresholds")
    assert r["thermal_thresholds"]["status"] == "FAIL", r
    assert "GPU 0 slowdown 84 C < 89 C (T.Limit 87 C minus offset +3 C)" in r["thermal_thresholds"]["message"]


def test_thermal_thresholds_unreadable_error(tmp_path):
    """The recording predates the thresholds: nothing to judge, an ERROR."""
    r = judged(tmp_path, recorded_host(tmp_path), "-k", "thermal_thresholds")["thermal_thresholds"]
    assert r["status"] == "ERROR" and "no temperature threshold for GPU 0 shutdown" in r["message"], r


def soak_stream(tmp_path: Path, temps: tuple) -> None:
    """The recorded host's soak answered by a recorded-format stream: 12 samples, the GPUs held
    at `temps` (injected; the rest as the 1x H200 soak: ~690 W, SW power cap only)."""
    n = len(temps)
    lines = [{"type": "header", "gpus": [{"index": i, "name": "NVIDIA H200"} for i in range(n)],
              "duration_s": 10, "interval_s": 1, "gpu_errors": {}},
             *({"type": "sample", "t": float(k), "temp": list(temps), "mem_temp": [50] * n,
                "power": [690.0] * n, "sm_clock": [1980] * n, "reasons": [4] * n, "util": [100] * n,
                "tflops": [660.0] * n, "ecc_corr": [0] * n, "ecc_unc": [0] * n} for k in range(12)),
             {"probe": "soak", "samples": 12, "xid": [], "xid_readable": True,
              "xid_note": "read from NVML events", "gpu_errors": {}}]
    f = tmp_path / "soak.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    py = tmp_path / "recordedpython"
    head, rest = py.read_text().split("\n", 1)
    py.write_text(f'{head}\n[ "$1" = soak.py ] && exec cat {f}\n{rest}')


def test_thermal_margin_after_the_soak(tmp_path):
    """Sustained 62 C (the 1x H200 soak's max, measured-h200.md) leaves 27 C to slowdown;
    GPU 1 held at 82 C (injected) leaves 7 C: FAIL, named."""
    inv = recorded_host(tmp_path, inject=with_thermal)
    soak_stream(tmp_path, (62, 62))
    r = judged(tmp_path, inv, "-k", "thermal_margin", "--soak-duration", "10s")["thermal_margin"]
    assert r["status"] == "PASS" and r["measured"] == 27, r["message"]
    soak_stream(tmp_path, (62, 82))
    r = judged(tmp_path, inv, "-k", "thermal_margin", "--soak-duration", "10s")["thermal_margin"]
    assert r["status"] == "FAIL", r
    assert "GPU 1's margin: slowdown 89 C - sustained 82 C" in r["message"] and "= 7 °C" in r["message"]


def fake_sysfs(root: Path) -> Path:
    """A recorded topology as a sysfs tree (no RDMA card here): GPU 0 (0000:00:06.0, NVML's
    bus id of the recorded GPU 0) and mlx5_0 under one PCIe switch on NUMA node 0; GPU 1
    (0000:00:07.0) behind another host bridge on node 1; mlx5_1 on node 0's root port."""
    def dev(path: str, numa: int) -> Path:
        d = root / "devices" / path
        d.mkdir(parents=True)
        (d / "numa_node").write_text(f"{numa}\n")
        return d
    sw = "pci0000:00/0000:00:01.0/0000:01:00.0"
    pci = root / "bus/pci/devices"
    pci.mkdir(parents=True)
    (pci / "0000:00:06.0").symlink_to(dev(f"{sw}/0000:02:00.0/0000:00:06.0", 0))
    (pci / "0000:00:07.0").symlink_to(dev("pci0000:80/0000:80:01.0/0000:00:07.0", 1))
    for name, path in (("mlx5_0", f"{sw}/0000:02:01.0/0000:04:00.0"),
                       ("mlx5_1", "pci0000:00/0000:00:02.0/0000:05:00.0")):
        ib = root / "class/infiniband" / name
        (ib / "ports/1").mkdir(parents=True)
        (ib / "ports/1/link_layer").write_text("InfiniBand\n")
        (ib / "device").symlink_to(dev(path, 0))
    return root


def sysinfo_probe(monkeypatch, sysfs: Path):
    monkeypatch.setenv("SIGNOFF_SYSFS", str(sysfs))
    spec = importlib.util.spec_from_file_location("sysinfo", ROOT / "signoff/gpu/probe_sysinfo.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe


GPUS = [{"index": 0, "pci_bus_id": "00000000:00:06.0"}, {"index": 1, "pci_bus_id": "00000000:00:07.0"}]


def test_gpu_nic_relations_read_from_a_recorded_sysfs(tmp_path, monkeypatch):
    probe = sysinfo_probe(monkeypatch, fake_sysfs(tmp_path / "sys"))
    topo = probe.gpu_nic(GPUS)
    assert topo["gpus"] == {"0": {"mlx5_0": "PIX", "mlx5_1": "PHB"}, "1": {"mlx5_0": "SYS", "mlx5_1": "SYS"}}
    assert topo["nics"][0] == {"name": "mlx5_0", "numa": 0, "link_layer": "InfiniBand"}
    assert topo["peermem"] is False


def affinity(tmp_path, monkeypatch, peermem: bool, profile="h200-8x-nvlink@2") -> dict:
    topo = sysinfo_probe(monkeypatch, fake_sysfs(tmp_path / "sys")).gpu_nic(GPUS)
    monkeypatch.delenv("SIGNOFF_SYSFS")
    inv = recorded_host(tmp_path)
    recorded_facts(tmp_path, lambda f: f.update(gpu_nic={**topo, "peermem": peermem}))
    return judged(tmp_path, inv, "-k", "gpu_nic_affinity", profile=profile)["gpu_nic_affinity"]


def test_gpu_nic_affinity_reports_the_map_with_gpudirect(tmp_path, monkeypatch):
    r = affinity(tmp_path, monkeypatch, peermem=True)
    assert r["status"] == "PASS", r["message"]
    assert r["details"]["map"] == {"0": ["PIX", ["mlx5_0"]], "1": ["SYS", ["mlx5_0", "mlx5_1"]]}
    assert "rail alignment not required by the profile" in r["expected"]


def test_gpu_nic_affinity_without_gpudirect_fails(tmp_path, monkeypatch):
    r = affinity(tmp_path, monkeypatch, peermem=False)
    assert r["status"] == "FAIL"
    assert "no GPUDirect RDMA: nvidia_peermem not loaded and dma-buf unreadable" in r["message"]


def test_gpu_nic_affinity_rail_alignment_fails_the_gpu_without_a_near_nic(tmp_path, monkeypatch):
    prof = tmp_path / "rails.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  gpu_nic_affinity: {max: 2, unit: 'level (PXB)', "
                    "source: 'this test: every GPU a NIC on its PCIe switch'}\n")
    r = affinity(tmp_path, monkeypatch, peermem=True, profile=str(prof))
    assert r["status"] == "FAIL", r["message"]
    assert "GPU 1's closest NIC is SYS (mlx5_0, mlx5_1)" in r["message"] and "GPU 0's" not in r["message"]
