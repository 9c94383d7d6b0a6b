"""test_error_counters' GPU counters (issue 44 part 3): each active NVLink's error counters and
each GPU's volatile ECC counts, read by sysinfo's own error_counters() from a fake NVML (no GPU
here: tests/fake_nvml.py with NVLinks), compared by the check on the recorded 2x H200 host."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from fake_nvml import FakeGPU, FakeNV, NVMLError, NVMLError_NotSupported
from test_health_recorded import answer, judged, recorded_facts, recorded_host, sysinfo_probe

from signoff import InputError, profiles
from signoff.gpu import judge


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801 - pynvml's name
    pass


class LinkNV(FakeNV):
    """FakeNV with NVLinks: nvidia-ml-py 13's 36-slot link table on a GPU of `links` (past them
    InvalidArgument, as NVML says); `legacy` False: Blackwell, where NVML removed the per-link
    error counter call and NVLink5's field values carry the counters (`nvlink5` False: neither)."""

    NVMLError_InvalidArgument = NVMLError_InvalidArgument
    NVML_NVLINK_MAX_LINKS = 36

    def __init__(self, n=2, links=18, down=(), legacy=True, nvlink5=True, unsupported=()):
        super().__init__([FakeGPU(i) for i in range(n)])
        self.links, self.down, self.legacy, self.nvlink5 = links, set(down), legacy, nvlink5
        self.unsupported = set(unsupported)  # nvmlNvLinkErrorCounter_t values NotSupported
        self.errors: dict[tuple, int] = {}  # (gpu, link, counter or field id) -> count

    def nvmlDeviceGetNvLinkState(self, h, link):
        if link >= self.links:
            raise NVMLError_InvalidArgument(2)
        return 0 if (h.index, link) in self.down else 1

    def nvmlDeviceGetNvLinkErrorCounter(self, h, link, counter):
        if link >= self.links:
            raise NVMLError_InvalidArgument(2)
        if not self.legacy or counter in self.unsupported:
            raise NVMLError_NotSupported(3)
        return self.errors.get((h.index, link, counter), 0)

    def nvmlDeviceGetPcieReplayCounter(self, h):
        return 0

    def nvmlDeviceGetFieldValues(self, h, ids):
        if not all(isinstance(i, tuple) for i in ids):  # the memory temperature
            return super().nvmlDeviceGetFieldValues(h, ids)
        ok = not self.legacy and self.nvlink5
        return [SimpleNamespace(nvmlReturn=0 if ok else 3, valueType=3,
                                value=SimpleNamespace(ullVal=self.errors.get((h.index, link, fid), 0)))
                for fid, link in ids]


def snapshot(probe, nv) -> dict:
    """sysinfo's counters, this machine's interfaces left out (an empty sysfs)."""
    return json.loads(json.dumps(probe.error_counters(nv)))


def test_fake_nvml_counters_read_per_active_link_up_to_the_gpus_own_links(tmp_path, monkeypatch):
    """18 links of a 36-slot table read (InvalidArgument past them: absent, not unreadable);
    a link down at the start is recorded without counters; CRC data NotSupported is recorded
    as not read with NVML's reason."""
    probe = sysinfo_probe(monkeypatch, tmp_path)
    doc = snapshot(probe, LinkNV(down={(1, 5)}, unsupported={3}))
    assert sorted(doc["nvlink"]["0"], key=int) == [str(i) for i in range(18)]
    assert doc["nvlink"]["1"]["5"] == {"active": False}
    assert doc["nvlink"]["0"]["3"] == {"active": True, "replay": 0, "recovery": 0, "crc_flit": 0,
                                       "crc_data": None}
    assert doc["not_read"]["GPU 0 NVLink 3 crc_data"].startswith("NVMLError_NotSupported")
    assert "GPU 1 NVLink 5 replay" not in doc["not_read"]
    assert doc["ecc"] == {"0": {"corrected": 0, "uncorrected": 0}, "1": {"corrected": 0, "uncorrected": 0}}


def test_fake_nvml_blackwell_reads_nvlink5_field_counters(tmp_path, monkeypatch):
    """The per-link call NotSupported (Blackwell): NVLink5's field values read per link."""
    probe = sysinfo_probe(monkeypatch, tmp_path)
    nv = LinkNV(legacy=False)
    nv.errors[(1, 17, 208)] = 9
    doc = snapshot(probe, nv)
    link = doc["nvlink"]["1"]["17"]
    assert link == {"active": True, "rcv_errors": 9, "link_integrity": 0, "recovery_events": 0}
    assert doc["not_read"]["GPU 1 NVLink DL counters"].startswith("NVMLError_NotSupported")
    assert not [k for k in doc["not_read"] if "NVLink 17" in k]  # said once a GPU, not per link


def run_check(tmp_path, monkeypatch, nv, grow, profile="h200-8x-nvlink@2") -> dict:
    """The recorded H200 pair, its start and end snapshots the fake NVML's, `grow(nv)` between."""
    probe = sysinfo_probe(monkeypatch, tmp_path / "sys")
    start = snapshot(probe, nv)
    grow(nv)
    end = snapshot(probe, nv)
    inv = recorded_host(tmp_path)
    recorded_facts(tmp_path, lambda f: f.update(counters=start))
    answer(tmp_path, "sysinfo.py counters", {**end, "probe": "counters", "nvml": True})
    return judged(tmp_path, inv, "-k", "error_counters", profile=profile)["error_counters"]


def test_error_counters_fake_nvlink_replay_and_ecc_growth_fail_naming_gpu_and_link(tmp_path, monkeypatch):
    def grow(nv):
        nv.errors[(1, 3, 0)] = 2  # NVML_NVLINK_ERROR_DL_REPLAY on GPU 1's link 3
        nv.gpus[0].ecc_corr = 4

    r = run_check(tmp_path, monkeypatch, LinkNV(unsupported={3}), grow)
    assert r["status"] == "FAIL", r
    grew = r["message"].split(" (expected")[0]
    assert "GPU 1 NVLink 3 replay +2 (0 -> 2)" in grew and "GPU 0 volatile ECC corrected +4 (0 -> 4)" in grew
    assert "GPU 0 NVLink" not in grew and "NVLink 4" not in grew
    assert "36 active NVLink(s)" in r["expected"]
    # CRC data NotSupported: said, not silently passed over
    assert "NVLink crc_data on GPU 0, 1 (NVMLError_NotSupported" in r["note"], r


def test_error_counters_fake_ecc_growth_within_the_profiles_allowance_passes_saying_so(tmp_path, monkeypatch):
    prof = tmp_path / "allow.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  error_counter_growth: {max: 5, unit: errors, "
                    "counters: [ecc_corrected], source: 'test: a site that tolerates corrected ECC'}\n")

    def grow(nv):
        nv.gpus[0].ecc_corr = 4

    r = run_check(tmp_path, monkeypatch, LinkNV(), grow, profile=str(prof))
    assert r["status"] == "PASS", r
    assert "GPU 0 volatile ECC corrected +4 (0 -> 4)" in r["note"] and "<= 5 errors" in r["note"], r
    assert "a site that tolerates corrected ECC" in r["source"]


def test_error_counters_fake_links_without_readable_counters_error_naming_the_gpu(tmp_path, monkeypatch):
    """Links up, but NVML reads none of their counters (neither call): never a silent PASS."""
    r = run_check(tmp_path, monkeypatch, LinkNV(legacy=False, nvlink5=False), lambda nv: None)
    assert r["status"] == "ERROR", r
    assert "GPU 0 NVLink error counters: none read on its 18 active link(s)" in r["message"], r
    assert "GPU 1 NVLink error counters" in r["message"]


LINK = {"active": True, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}


def test_gpu_counter_growth_judges_each_link_and_the_allowance():
    before = {"nvlink": {"0": {"0": LINK, "1": LINK}}, "ecc": {"0": {"corrected": 1, "uncorrected": 0}},
              "not_read": {}}
    after = json.loads(json.dumps(before))
    after["nvlink"]["0"]["1"] = {"active": False}  # went down under load
    after["nvlink"]["0"]["0"]["crc_flit"] = 3
    after["ecc"]["0"].update(corrected=8, uncorrected=1)
    g = judge.gpu_counter_growth(before, after, {"ecc_corrected": 5, "nvlink_crc_flit": 3})
    assert g["grew"] == ["GPU 0 NVLink 1 went down during the run (active at the start)",
                         "GPU 0 volatile ECC corrected +7 (1 -> 8)",
                         "GPU 0 volatile ECC uncorrected +1 (0 -> 1)"]
    assert g["allowed"] == ["GPU 0 NVLink 0 crc_flit +3 (0 -> 3)"] and not g["unread"]
    old = judge.gpu_counter_growth({"pcie_replay": {"0": 0}}, after)  # a sysinfo before these counters
    assert old == {"grew": [], "allowed": [], "unread": [], "unsupported": []}


@pytest.mark.parametrize("counters", [["ecc_uncorrected"], ["nvlink_bogus"], []])
def test_error_counter_growth_refuses_uncorrected_ecc_and_unknown_counters(tmp_path, counters):
    prof = tmp_path / "bad.yaml"
    prof.write_text("extends: h200-8x-nvlink@2\ncriteria:\n  error_counter_growth: {max: 5, unit: errors, "
                    f"counters: {json.dumps(counters)}, source: test}}\n")
    with pytest.raises(InputError, match="uncorrected ECC error is never allowed"):
        profiles.load(str(prof))
