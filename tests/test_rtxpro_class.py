"""Issue 52, item 5: the RTX PRO 6000 Blackwell Server Edition 8x PCIe class and the two host
setups it breaks without (BAR1 as large as the GPU's memory, nvidia_uvm's uvm_disable_hmm=1):
the profile's figures, the sysinfo probe's readings (a recorded sysfs; NVML faked: no GPU here)
and their judgements. The class's recorded host, healthy and faulted, is in
tests/test_classes_recorded.py (test_recorded_rtxpro6000_judges_bar1_and_uvm_hmm)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from signoff import InputError, profiles
from signoff.gpu import judge

ROOT = Path(__file__).resolve().parent.parent
NAME = "rtxpro6000-8x-pcie"


def probe():
    """The sysinfo probe as it is shipped: a standalone script."""
    spec = importlib.util.spec_from_file_location("probe_sysinfo", ROOT / "signoff/gpu/probe_sysinfo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rtxpro6000_class_cites_or_derives_every_figure():
    """Every criterion the other PCIe classes set has a figure with a source or a derived rule,
    none uncalibrated, none citing the private notebook; --profile auto picks it from its NVML
    name (the Max-Q Workstation Edition, 2bb4, is not of it); the two host setups are its traits."""
    p = profiles.load(NAME)
    assert not p.uncalibrated, p.uncalibrated
    assert set(p.criteria) >= set(profiles.load("l40s-8x-pcie").criteria)
    for t in p.criteria.values():
        assert t.source and "shared/" not in t.source + t.provisional, t
        assert not t.provisional or t.provisional.startswith("derived: "), t
    hw = p.hardware
    assert (hw["pci_ids"], hw["interconnect"], hw["pcie_gen"], hw["large_bar"], hw["uvm_disable_hmm"]) == \
        (["2bb5"], "pcie", 5, True, True)
    assert "peer_access" not in hw and "ecc" not in hw  # both required, as on every datacenter class
    host = {"gpu_model": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "gpu_count": 8, "nvlink": False}
    assert profiles.auto_select(host).name == NAME
    maxq = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    assert profiles.matches(p, {**host, "gpu_model": maxq})
    figures = {c: p.threshold(c).value for c in ("power_limit", "hbm_bandwidth", "allreduce_busbw",
                                                 "p2p_bandwidth", "bar1_size", "uvm_hmm")}
    assert figures == {"power_limit": 600, "hbm_bandwidth": 1.33, "allreduce_busbw": 33.8,
                       "p2p_bandwidth": 35, "bar1_size": 1.0, "uvm_hmm": "Y"}
    assert p.threshold("allreduce_busbw").extra["size"] == "2G"
    assert "diag-skus.yaml.in" in p.threshold("hbm_bandwidth").source
    for c in ("bar1_size", "uvm_hmm"):
        assert "local-inference-lab/rtx6kpro hardware/pcie-bandwidth.md" in p.threshold(c).source


@pytest.mark.parametrize("key", ["large_bar", "uvm_disable_hmm"])
def test_the_host_setup_trait_keys_take_a_boolean(tmp_path, key):
    path = tmp_path / "bad.yaml"
    path.write_text(f"hardware: {{{key}: 'yes'}}\n")
    with pytest.raises(InputError, match=re.escape(f"profile {path}: hardware.{key}: expected true, false")):
        profiles.load("bad", base_dir=tmp_path)


class FakeNVML:
    """NVML's BAR1 and memory calls (no GPU here): sizes in bytes, as NVML gives them."""

    def __init__(self, bar1_mib, memory_mib):
        self.bar1, self.memory = bar1_mib, memory_mib

    def nvmlDeviceGetBAR1MemoryInfo(self, h):
        if self.bar1 is None:
            raise RuntimeError("NotSupported")
        return type("Bar1", (), {"bar1Total": self.bar1 << 20})()

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("Memory", (), {"total": self.memory << 20})()


def test_sysinfo_reads_bar1_and_memory_in_mib_fake_nvml():
    sysinfo = probe()
    assert sysinfo.bar1(FakeNVML(98304, 97887), None) == \
        {"total_mib": 98304, "memory_mib": 97887, "error": None}
    got = sysinfo.bar1(FakeNVML(None, 97887), None)
    assert got["total_mib"] is None and "NotSupported" in got["error"], got


def test_bar1_below_the_memory_fails_naming_gpu_sizes_and_unread():
    """A GPU whose BAR1 maps less than its memory is named with both sizes; one NVML gave none
    is unread (the check ERRORs on it alone), never passed."""
    gpus = [{"index": 0, "bar1": {"total_mib": 98304, "memory_mib": 97887}},
            {"index": 1, "bar1": {"total_mib": 256, "memory_mib": 97887}},
            {"index": 2, "bar1": {"total_mib": None, "memory_mib": None, "error": "NVMLError_NotSupported"}},
            {"index": 3}]
    bad, unread, ratio = judge.bar1_short(gpus, 1.0)
    assert bad == ["GPU 1 BAR1 256 MiB < 1 x its memory 97887 MiB"]
    assert unread == ["GPU 2 (NVMLError_NotSupported)", "GPU 3 (not read: a sysinfo without BAR1)"]
    assert ratio == 0.003
    assert judge.bar1_short(gpus[:1], 1.0) == ([], [], 1.004)


@pytest.mark.parametrize("written, value", [("Y\n", "Y"), ("N\n", "N")])
def test_uvm_disable_hmm_read_from_sysfs(tmp_path, monkeypatch, written, value):
    """The probe reads nvidia_uvm's parameter from a sysfs tree (here a recorded one), as the
    kernel prints a bool parameter; the judge hands on what it read."""
    sysinfo = probe()
    params = tmp_path / "module" / "nvidia_uvm" / "parameters"
    params.mkdir(parents=True)
    (params / "uvm_disable_hmm").write_text(written)
    monkeypatch.setattr(sysinfo, "SYS", str(tmp_path))
    doc = sysinfo.uvm()
    assert doc == {"path": str(params / "uvm_disable_hmm"), "disable_hmm": value, "error": None}
    assert judge.uvm_hmm({"nvidia": {"uvm": doc}}) == (value, None)


def test_uvm_hmm_unreadable_names_the_file(tmp_path, monkeypatch):
    """nvidia_uvm not loaded (or a driver without the parameter, or a sysinfo older than the
    check): unread, an ERROR naming the file and why, never a PASS."""
    sysinfo = probe()
    monkeypatch.setattr(sysinfo, "SYS", str(tmp_path))
    value, why = judge.uvm_hmm({"nvidia": {"uvm": sysinfo.uvm()}})
    assert value is None
    assert why == (f"nvidia_uvm's uvm_disable_hmm unreadable: {tmp_path}/module/nvidia_uvm/parameters/"
                   f"uvm_disable_hmm: nvidia_uvm not loaded")
    (tmp_path / "module" / "nvidia_uvm" / "parameters").mkdir(parents=True)
    assert sysinfo.uvm()["error"] == "no such parameter in this driver's nvidia_uvm"
    assert judge.uvm_hmm({"nvidia": {}})[1] == \
        "sysinfo read no nvidia_uvm parameter (a probe older than this check)"
