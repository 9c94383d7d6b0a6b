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
