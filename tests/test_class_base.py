"""`--profile BASE` where BASE is a class base (`abstract: true`, e.g. a100-8x-nvlink): the
variant that extends it is picked from the hosts' NVML, as --profile auto picks among every
profile (#29 item 1): said on the terminal, the cover, report.md and results.json; a host of
none of its variants is never passed. Recorded hosts: tests/recorded/classes (README.md)."""

from __future__ import annotations

import re
import sys

import pytest
from test_classes_recorded import by_criterion, host, isolation, measurements, recorded, run, sysinfo
from test_command import LOCK_WAIT, signoff

from signoff import InputError, profiles

A100 = {"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 8, "nvlink": True}
A100_40 = {**A100, "gpu_model": "NVIDIA A100-SXM4-40GB"}
H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "nvlink": True}


def recorded_host(tmp_path, name: str):
    one, two = recorded()
    return host(tmp_path / name, f"{name}-node", measurements(name, sysinfo(name, one), one, two))


def test_a_class_base_has_its_variants_and_a_generic_base_every_profile():
    kids = lambda n: [p.name for p in profiles.variants(profiles.load(n))]  # noqa: E731
    assert kids("a100-8x-nvlink") == ["a100-40gb-8x-nvlink", "a100-80gb-8x-nvlink"]
    assert kids("a100-8x-pcie") == ["a100-40gb-8x-pcie", "a100-80gb-8x-pcie"]
    assert set(kids("nvidia-base")) == set(profiles.concrete()) - {"nvidia-base"}


def test_the_majority_of_the_class_picks_the_variant_and_outsiders_do_not_vote():
    base = profiles.load("a100-8x-nvlink")
    prof, line = profiles.pick_variant(base, {"n1": A100, "n2": A100})
    assert prof.name == "a100-80gb-8x-nvlink"
    assert line == "a100-8x-nvlink: picked a100-80gb-8x-nvlink from the hosts' NVML (NVIDIA A100-SXM4-80GB)"
    # three H100s do not outvote the class: they are judged by its pick, and FAIL its class checks
    prof, line = profiles.pick_variant(base, {"n1": A100_40, "n2": H100, "n3": H100, "n4": H100,
                                              "n5": A100_40, "n6": A100})
    assert prof.name == "a100-40gb-8x-nvlink"
    assert line.endswith("(NVIDIA A100-SXM4-40GB) on 2 of 6 hosts; n[2-4,6]: not of it "
                         "(FAIL its class checks)")
    with pytest.raises(InputError, match=r"^--profile a100-8x-nvlink: no host is of a variant of this class "
                                         r"\(a100-40gb-8x-nvlink: 8 x NVIDIA A100-SXM4-40GB.*\): "
                                         r"n1: 8 x NVIDIA H100 80GB HBM3 \(NVLink\); n2: no GPU"):
        profiles.pick_variant(base, {"n1": H100, "n2": {"gpu_count": 0}})
    pcie = profiles.pick_variant(profiles.load("a100-8x-pcie"),
                                 {"n1": {"gpu_model": "NVIDIA A100 80GB PCIe", "gpu_count": 8}})[0]
    assert pcie.name == "a100-80gb-8x-pcie"


def test_a_class_base_without_a_variant_is_refused(tmp_path):
    (tmp_path / "lonely.yaml").write_text("abstract: true\nextends: nvidia-base\n")
    p = signoff("plan", "--no-contact", "--profile", str(tmp_path / "lonely.yaml"), cwd=tmp_path)
    assert p.returncode == 4 and "lonely is a class base (abstract: true) that no profile beside it " \
        "extends" in p.stderr, p.stderr


def test_plan_of_a_class_base_without_contact_names_its_variants_and_their_thresholds(tmp_path):
    p = signoff("plan", "--profile", "a100-8x-nvlink", "--no-contact", "--hosts", "node[1-2]", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "--profile a100-8x-nvlink: a class base: the variant is picked at the start of the run from " \
           "the hosts' NVML (the majority of its hosts) among a100-40gb-8x-nvlink (8 x NVIDIA " \
           "A100-SXM4-40GB, interconnect nvlink), a100-80gb-8x-nvlink (8 x NVIDIA A100-SXM4-80GB" in out, out
    rows = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    # where the variants differ, each one's; where they agree, once
    assert "a100-40gb-8x-nvlink: hardware.gpu_model: NVIDIA A100-SXM4-40GB | a100-80gb-8x-nvlink: " \
           "hardware.gpu_model: NVIDIA A100-SXM4-80GB" in rows["gpu_model"]
    hbm = [profiles.load(f"a100-{m}-8x-nvlink").criteria["hbm_bandwidth"].value for m in ("40gb", "80gb")]
    assert re.search(rf"a100-40gb-8x-nvlink: hbm_bandwidth >= {hbm[0]} TB/s.* \| "
                     rf"a100-80gb-8x-nvlink: hbm_bandwidth >= {hbm[1]} TB/s", rows["hbm_bandwidth"])
    assert rows["gpu_count"].endswith("hardware.gpu_count: 8")
    assert "power_limit >= 400 W [thresholds/a100-8x-nvlink.yaml]" in rows["power_limit"]
    assert "uncalibrated" not in out and "no threshold in profile" not in out


def test_plan_of_a_class_base_asks_the_hosts_and_names_the_pick(tmp_path):
    """With contact, the plan asks the recorded 8x A100 80GB host for its sysinfo and names the
    variant, and its thresholds are that variant's alone."""
    inv = recorded_host(tmp_path, "a100-80gb-8x-nvlink")
    p = signoff("plan", "--profile", "a100-8x-nvlink", "--inventory", str(inv), *LOCK_WAIT, cwd=tmp_path,
                exe=(*isolation(), sys.executable, "-m", "signoff"))  # its own host lock, as the runs
    assert p.returncode == 0, p.stderr
    said = ("--profile a100-8x-nvlink picks a100-80gb-8x-nvlink on these hosts (asked for their sysinfo)\n"
            "  a100-8x-nvlink: picked a100-80gb-8x-nvlink from the hosts' NVML (NVIDIA A100-SXM4-80GB)\n")
    assert said in p.stdout, p.stdout
    assert "profile: a100-80gb-8x-nvlink: " in p.stdout and "a100-40gb" not in p.stdout, p.stdout


def test_recorded_a100_80gb_host_under_the_class_base_passes_naming_the_variant(tmp_path):
    """The user's own command, `pytest acceptance/ --profile a100-8x-nvlink`, on the recorded
    healthy 8x A100 SXM4 80GB host: a100-80gb-8x-nvlink is picked from its NVML and said on the
    terminal, report.md and results.json; every check PASSes or is N.A.: verdict PASS."""
    rc, doc, out = run(recorded_host(tmp_path, "a100-80gb-8x-nvlink"), profile="a100-8x-nvlink")
    meta = doc["meta"]
    said = "a100-8x-nvlink: picked a100-80gb-8x-nvlink from the hosts' NVML (NVIDIA A100-SXM4-80GB)"
    assert meta["profile"] == "a100-80gb-8x-nvlink" and meta["profile_requested"] == "a100-8x-nvlink", meta
    assert meta["profile_pick"] == said and meta["profile_class"].startswith("8 x NVIDIA A100-SXM4-80GB")
    assert meta["profile_path"].endswith("thresholds/a100-80gb-8x-nvlink.yaml")
    assert f"profile {said}" in out, out
    md = (tmp_path / "a100-80gb-8x-nvlink" / "report" / "report.md").read_text()
    assert "Profile **a100-80gb-8x-nvlink** (8 x NVIDIA A100-SXM4-80GB" in md and f"Profile {said}" in md
    bad = [(r["criterion"], r["status"], r["message"]) for r in doc["results"]
           if r["status"] not in ("PASS", "N.A.")]
    assert not bad, bad
    assert by_criterion(doc)["gpu_model"]["status"] == "PASS"
    assert doc["verdict"] == "PASS" and rc == 0, out


def test_recorded_h100_host_under_the_a100_class_base_is_refused_naming_it(tmp_path):
    """A host outside the class (the recorded 8x H100) under --profile a100-8x-nvlink: no variant
    to pick, as --profile auto with no profile of the hosts' class: every check judged by a profile
    ERRORs saying why, naming the host and its hardware; the verdict is not PASS. (The checks that
    read no profile, the SDC checksums and the error counters, are judged as under any.)"""
    rc, doc, out = run(recorded_host(tmp_path, "h100-8x-nvlink"), profile="a100-8x-nvlink")
    why = "--profile a100-8x-nvlink: no host is of a variant of this class"
    assert doc["verdict"] != "PASS" and rc == 2, out  # ERROR only (its word: signoff/results.py)
    res = by_criterion(doc)
    assert {c for c, r in res.items() if r["status"] == "PASS"} <= {"sdc", "error_counters"}
    for c in ("gpu_model", "gpu_count", "nvlink_up", "hbm_bandwidth", "p2p_bandwidth", "soak_gemm_tflops"):
        assert res[c]["status"] == "ERROR", res[c]
    assert all(why in r["message"] and "h100-8x-nvlink-node: 8 x NVIDIA H100 80GB HBM3 (NVLink)"
               in r["message"] for r in doc["results"] if r["status"] == "ERROR"), doc["results"][0]
    assert doc["meta"]["profile"] == "a100-8x-nvlink" and "profile_pick" not in doc["meta"]
    md = (tmp_path / "h100-8x-nvlink" / "report" / "report.md").read_text()
    assert "Profile **a100-8x-nvlink** (a class base: none of its variants a100-40gb-8x-nvlink, " \
           "a100-80gb-8x-nvlink picked from the hosts' NVML)" in md, md[:800]


GB200 = {"gpu_model": "NVIDIA GB200", "gpu_count": 4, "nvlink": True, "pci_device_id": "2941"}
GENERIC = {**GB200, "gpu_model": "NVIDIA Graphics Device"}


def test_the_blackwell_class_bases_pick_their_variants():
    """Issue 43: blackwell-8x-nvlink (B200, B300 HGX) and blackwell-nvl72 (GB200, GB300 trays)
    are class bases; a GB200 whose driver names it "NVIDIA Graphics Device" is told by its PCI
    device id, under the base as under --profile auto, and said so."""
    kids = lambda n: [p.name for p in profiles.variants(profiles.load(n))]  # noqa: E731
    assert kids("blackwell-8x-nvlink") == ["b200-8x-nvlink", "b300-8x-nvlink"]
    assert kids("blackwell-nvl72") == ["gb200-nvl72", "gb300-nvl72"]
    base = profiles.load("blackwell-nvl72")
    prof, line = profiles.pick_variant(base, {"t1": GENERIC, "t2": GB200})
    assert prof.name == "gb200-nvl72"
    assert line == "blackwell-nvl72: picked gb200-nvl72 from the hosts' NVML (NVIDIA GB200, " \
                   "NVIDIA Graphics Device (PCI device 2941))"
    assert profiles.auto_select(GENERIC).name == "gb200-nvl72"
    b300 = {"gpu_model": "NVIDIA B300 SXM6 AC", "gpu_count": 8, "nvlink": True, "pci_device_id": "3182"}
    pick = profiles.pick_variant(profiles.load("blackwell-8x-nvlink"), {"n": b300})[0]
    assert pick.name == "b300-8x-nvlink"


def test_a_generic_name_is_judged_by_pci_id_alone():
    """The generic name matches no class by itself: a PCI id of none (here B200's 2901 on a
    4-GPU host) or an unread one is refused, naming the id; a product name is judged by name."""
    gb200 = profiles.load("gb200-nvl72")
    assert profiles.matches(gb200, GENERIC) == []
    assert profiles.matches(gb200, {**GENERIC, "pci_device_id": "2901"}) == [
        "GPU model NVIDIA Graphics Device (PCI device 2901) is not NVIDIA GB200 (PCI device 2941)"]
    assert "(PCI device unread)" in profiles.matches(gb200, {**GENERIC, "pci_device_id": None})[0]
    assert profiles.matches(gb200, {**GB200, "gpu_model": "NVIDIA GB300"}) == [
        "GPU model NVIDIA GB300 is not NVIDIA GB200"]
    assert profiles.matches(profiles.load("h100-8x-nvlink"), {**GENERIC, "gpu_count": 8})  # no pci_ids
    # 4 GPUs of B200's PCI id: no 4-GPU class of it, so 4 of b200-8x-nvlink's 8 (a slice)
    rented = {**GENERIC, "pci_device_id": "2901", "rented": True}  # a VM's or container's
    assert profiles.auto_select(rented).name == "b200-8x-nvlink@4"
    with pytest.raises(InputError, match=r"no profile in .* matches 16 x NVIDIA Graphics Device "
                                         r"\(PCI device 2901\) \(NVLink\)"):
        profiles.auto_select({**GENERIC, "pci_device_id": "2901", "gpu_count": 16})


@pytest.mark.parametrize("hw, err", [
    ("{pci_ids: ['0x2941']}", "hardware.pci_ids: expected a list of PCI device ids"),
    ("{pci_ids: '2941'}", "hardware.pci_ids: expected a list of PCI device ids"),
    ("{host_link: nvlink}", "hardware.host_link: expected one of ['c2c', 'pcie']"),
    ("{gpu_count: 4, nvlink_domain: 70}", "hardware.nvlink_domain: expected the GPUs of one NVLink domain"),
    ("{nvlink_domain: 0}", "hardware.nvlink_domain: expected the GPUs of one NVLink domain"),
])
def test_the_blackwell_hardware_keys_are_checked_at_load(tmp_path, hw, err):
    path = tmp_path / "bad.yaml"
    path.write_text(f"hardware: {hw}\n")
    with pytest.raises(InputError, match=re.escape(f"profile {path}: {err}")):
        profiles.load("bad", base_dir=tmp_path)


def test_a_site_declares_a_smaller_nvlink_partition(tmp_path):
    """A site running partitions of 8 trays declares them in a profile extending the class's."""
    (tmp_path / "site.yaml").write_text(f"extends: {profiles.PROFILE_DIR / 'gb200-nvl72.yaml'}\n"
                                        "hardware: {nvlink_domain: 32}\n")
    site = profiles.load("site", base_dir=tmp_path)
    assert site.hardware["nvlink_domain"] == 32 and site.hardware["host_link"] == "c2c"
    assert site.describe_class().endswith("host link NVLink-C2C, NVLink domain 32 GPUs")
