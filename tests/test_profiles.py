"""signoff.profiles: threshold profiles, inheritance, validation, hardware matching."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from signoff import InputError, picking, profiles, slices
from signoff.profiles import Threshold

ROOT = Path(__file__).resolve().parent.parent
H200 = {"gpu_model": "NVIDIA H200", "nvlink": True}

BASE = """
abstract: true
hardware: {interconnect: any, mig: false}
criteria:
  nvidia_driver_version: {min: "525", unit: "(driver)", source: "docs A"}
  row_remap_uncorrectable: {max: 512, unit: rows, source: "docs B"}
"""
CHILD = """
extends: base
hardware: {gpu_model: "NVIDIA X", gpu_count: 8, interconnect: nvlink}
criteria:
  nvidia_driver_version: {min: "580", unit: "(driver)", source: "docs C"}
"""


@pytest.fixture
def write_profile(tmp_path):
    def write(name: str, text: str) -> Path:
        p = tmp_path / f"{name}.yaml"
        p.write_text(textwrap.dedent(text))
        return p
    return write


def used_criteria() -> set[str]:
    """Criteria the acceptance tests ask a profile for."""
    text = "".join(p.read_text() for p in (ROOT / "acceptance").glob("*.py"))
    return set(re.findall(r"\.threshold\(\"(\w+)\"\)", text))


@pytest.mark.parametrize("name", profiles.available())
def test_shipped_profile_loads_and_is_complete(name):
    p = profiles.load(name)
    assert p.name == name and p.chain[-1] == name
    for t in p.criteria.values():
        assert t.unit.strip() and t.source.strip(), t
    if not p.abstract:
        assert used_criteria(), "acceptance/ asks for no threshold: regex out of date?"
        # A criterion may be left out only where no source exists; the file says why
        # (the check then ERRORs: a missing threshold is never a pass).
        text = "".join(open(f).read() for f in profiles_chain_files(p))
        missing = {c for c in used_criteria() - set(p.criteria) if c not in text}
        assert not missing, f"{name} lacks {missing} without saying why"


def profiles_chain_files(p):
    return [profiles.PROFILE_DIR / f"{n}.yaml" for n in p.chain]


def test_shipped_profiles_exist():
    assert {"local", "nvidia-base", "h200-8x-nvlink", "a100-80gb-8x-nvlink"} <= set(
        profiles.available())


def test_extends_overrides_and_inherits(write_profile, tmp_path):
    write_profile("base", BASE)
    write_profile("child", CHILD)
    p = profiles.load("child", base_dir=tmp_path)
    assert not p.abstract and p.chain == ["base", "child"]
    assert p.hardware == {"interconnect": "nvlink", "mig": False,
                          "gpu_model": "NVIDIA X", "gpu_count": 8}
    drv = p.threshold("nvidia_driver_version")
    assert (drv.value, drv.source) == ("580", "docs C")
    rr = p.threshold("row_remap_uncorrectable")
    assert (rr.op, rr.value, rr.unit, rr.source, rr.profile) == ("max", 512, "rows", "docs B",
                                                                 "child")


def test_load_by_path(write_profile, tmp_path):
    path = write_profile("solo", "criteria: {}\n")
    assert profiles.load(str(path), base_dir=tmp_path).name == "solo"


def test_extends_cycle_is_an_error(write_profile, tmp_path):
    write_profile("a", "extends: b\n")
    write_profile("b", "extends: a\n")
    with pytest.raises(InputError, match="extends itself"):
        profiles.load("a", base_dir=tmp_path)


def test_unknown_profile_lists_the_available(write_profile, tmp_path):
    write_profile("real", "criteria: {}\n")
    with pytest.raises(InputError, match=r"no such file.*real"):
        profiles.load("nope", base_dir=tmp_path)


def test_a_typo_offers_no_class_base(write_profile, tmp_path):
    """An abstract profile is refused by --profile: the typo's list must not offer it."""
    write_profile("base", BASE)
    write_profile("child", CHILD)
    with pytest.raises(InputError, match=r"\(profiles here: child\)$"):
        profiles.load("chld", base_dir=tmp_path)
    with pytest.raises(InputError) as exc:
        profiles.load("h200-4x-nvlnk")
    offered = str(exc.value).rsplit("profiles here: ", 1)[1].rstrip(")").split(", ")
    assert "h200-8x-nvlink" in offered and "local" in offered
    assert not {"nvidia-base", "a100-8x-nvlink", "a100-8x-pcie"} & set(offered)
    assert offered == [n for n in profiles.available() if not profiles.load(n).abstract]


def crit(name: str, body: str) -> str:
    return f"criteria:\n  {name}: {body}\n"


@pytest.mark.parametrize("text, where", [
    ("colour: red\n", ": colour: unknown key"),
    ("hardware: {gpus: 8}\n", "hardware.gpus: unknown key"),
    ("hardware: {gpu_model: 'NVIDIA (H200'}\n", "hardware.gpu_model: not a valid regular"),
    ("hardware: {interconnect: infiniband}\n", "hardware.interconnect: expected one of"),
    ("hardware: {gpu_count: 0}\n", "hardware.gpu_count: expected a positive integer"),
    ("hardware: {nvlinks: eighteen}\n", "hardware.nvlinks: expected a positive integer"),
    ("hardware: {pcie_gen: true}\n", "hardware.pcie_gen: expected a positive integer"),
    (crit("fan_speed", "{max: 1, unit: rpm, source: s}"), "criteria.fan_speed: unknown criterion"),
    (crit("row_remap_uncorrectable", "{unit: rows, source: s}"), "criteria.row_remap_uncorrectable: needs "
                                                           "exactly one threshold"),
    (crit("row_remap_uncorrectable", "{max: null, unit: rows, source: s}"), "needs exactly one"),
    (crit("row_remap_uncorrectable", "{min: 0, max: 1, unit: rows, source: s}"),
     "criteria.row_remap_uncorrectable: needs exactly one threshold"),
    (crit("row_remap_uncorrectable", "{max: 0, source: s}"),
     "criteria.row_remap_uncorrectable.unit: missing"),
    (crit("row_remap_uncorrectable", "{max: 0, unit: rows}"),
     "criteria.row_remap_uncorrectable.source: miss"),
    (crit("row_remap_uncorrectable", "{max: 0, unit: ' ', source: s}"), "row_remap_uncorrectable.unit"),
    (crit("row_remap_uncorrectable", "{max: lots, unit: rows, source: s}"),
     "criteria.row_remap_uncorrectable.max: expected a number"),
    (crit("row_remap_uncorrectable", "{max: true, unit: rows, source: s}"), "expected a number"),
    (crit("nvidia_driver_version", "{min: new, unit: v, source: s}"),
     "criteria.nvidia_driver_version.min: expected a version"),
    (crit("row_remap_uncorrectable", "{max: 0, unit: rows, source: s, note: x}"),
     "criteria.row_remap_uncorrectable.note: unknown key"),
])
def test_validation_names_file_and_key(write_profile, tmp_path, text, where):
    """A missing threshold must never mean pass: every malformed criterion is an error."""
    path = write_profile("bad", text)
    with pytest.raises(InputError) as exc:
        profiles.load("bad", base_dir=tmp_path)
    assert f"profile {path}" in str(exc.value)
    assert where in str(exc.value)


def test_error_in_parent_names_the_parent_file(write_profile, tmp_path):
    parent = write_profile("base", "hardware: {gpus: 8}\n")
    write_profile("child", "extends: base\n")
    with pytest.raises(InputError, match=re.escape(f"profile {parent}: hardware.gpus")):
        profiles.load("child", base_dir=tmp_path)


def test_absent_criterion_is_an_error_not_a_pass(write_profile, tmp_path):
    write_profile("thin", "criteria: {}\n")
    p = profiles.load("thin", base_dir=tmp_path)
    with pytest.raises(InputError, match=r"thin.*'cuda_driver_version'"):
        p.threshold("cuda_driver_version")


def th(criterion: str, op: str, value) -> Threshold:
    return Threshold(criterion, op, value, "u", "src", "prof")


def test_threshold_ok_numbers():
    assert th("row_remap_uncorrectable", "max", 512).ok(512)
    assert not th("row_remap_uncorrectable", "max", 512).ok(513)
    assert th("row_remap_uncorrectable", "min", 1).ok(1)
    assert not th("row_remap_uncorrectable", "min", 1).ok(0)
    assert th("row_remap_uncorrectable", "equals", 0).ok(0)
    assert not th("row_remap_uncorrectable", "equals", 0).ok(1)


def test_threshold_ok_versions_compare_numerically():
    t = th("nvidia_driver_version", "min", "525")
    assert t.ok("580.159.04")
    assert not t.ok("470.1")
    assert th("cuda_driver_version", "min", "11.8").ok("11.10")  # not a string compare
    assert th("cuda_driver_version", "max", "12.4").ok("12.4")
    assert str(t) == "expected >= 525 u (prof, source: src)"


def test_matches_explains_a_class_mismatch():
    h100 = profiles.load("h100-8x-nvlink")
    why = profiles.matches(h100, {**H200, "gpu_count": 8})
    assert why == ["GPU model NVIDIA H200 is not NVIDIA H100 80GB HBM3"]
    pcie = profiles.load("l40s-8x-pcie")
    why = profiles.matches(pcie, {"gpu_model": "NVIDIA L40S", "gpu_count": 4, "nvlink": True})
    assert why == ["4 GPUs where 8 are expected",
                   "NVLink present where a PCIe-only class is expected"]
    assert profiles.matches(profiles.load("h200-8x-nvlink@4"), {**H200, "gpu_count": 4}) == []
    assert "no NVLink where NVLink is required" in profiles.matches(
        profiles.load("h200-8x-nvlink@4"), {**H200, "gpu_count": 4, "nvlink": False})


@pytest.mark.parametrize("hw, name", [
    ({**H200, "gpu_count": 4, "rented": True}, "h200-8x-nvlink@4"),  # a VM's or container's slice
    ({**H200, "gpu_count": 2, "rented": True}, "h200-8x-nvlink@2"),
    ({**H200, "gpu_count": 8}, "h200-8x-nvlink"),
    ({"gpu_model": "NVIDIA A100-SXM4-80GB", "gpu_count": 8, "nvlink": True}, "a100-80gb-8x-nvlink"),
    ({"gpu_model": "NVIDIA A100-SXM4-40GB", "gpu_count": 8, "nvlink": True}, "a100-40gb-8x-nvlink"),
    ({"gpu_model": "NVIDIA A100-PCIE-40GB", "gpu_count": 8, "nvlink": False}, "a100-40gb-8x-pcie"),
    ({"gpu_model": "NVIDIA A100 80GB PCIe", "gpu_count": 8, "nvlink": False}, "a100-80gb-8x-pcie"),
    ({"gpu_model": "NVIDIA L40S", "gpu_count": 8, "nvlink": False}, "l40s-8x-pcie"),
    ({"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "nvlink": True}, "h100-8x-nvlink"),
    ({"gpu_model": None, "gpu_count": 0, "nvlink": False}, "local"),
    ({}, "local"),
])
def test_auto_select(hw, name):
    assert profiles.auto_select(hw).name == name


def test_auto_select_no_match_is_an_error():
    with pytest.raises(InputError, match=r"no profile in .* matches 16 x NVIDIA H200 \(NVLink\); pass"):
        profiles.auto_select({**H200, "gpu_count": 16})  # more GPUs than a class: no slice either


def test_auto_select_ambiguous_and_synthetic(write_profile, tmp_path):
    write_profile("local", "criteria: {}\n")
    write_profile("one", "hardware: {gpu_model: 'G.*', gpu_count: 2}\n")
    assert profiles.auto_select({"gpu_model": "G1", "gpu_count": 2}, tmp_path).name == "one"
    assert profiles.auto_select({"gpu_count": 0}, tmp_path).name == "local"
    write_profile("two", "hardware: {gpu_model: 'G1', gpu_count: 2}\n")
    with pytest.raises(InputError, match="several profiles match.*one, two"):
        profiles.auto_select({"gpu_model": "G1", "gpu_count": 2}, tmp_path)


def test_a_class_base_picks_among_its_own_variants_whatever_their_names(write_profile, tmp_path):
    """Any abstract profile: its variants are the concrete profiles beside it that extend it
    (through another base too), not profiles of another chain, not itself; the hosts' vote picks."""
    write_profile("base", BASE)
    write_profile("mid", "abstract: true\nextends: base\nhardware: {gpu_count: 2, interconnect: nvlink}\n")
    write_profile("small", "extends: mid\nhardware: {gpu_model: 'G-S'}\n")
    write_profile("large", "extends: mid\nhardware: {gpu_model: 'G-L'}\n")
    write_profile("other", "hardware: {gpu_model: 'G-L', gpu_count: 2}\n")
    base, mid = (profiles.load(str(tmp_path / f"{n}.yaml")) for n in ("base", "mid"))
    assert [p.name for p in profiles.variants(base)] == ["large", "small"]
    assert [p.name for p in profiles.variants(mid)] == ["large", "small"]
    large = {"gpu_model": "G-L", "gpu_count": 2, "nvlink": True}
    prof, line = profiles.pick_variant(mid, {"a": large, "b": {**large, "gpu_model": "G-S"}, "c": large})
    assert prof.name == "large" and line == "mid: picked large from the hosts' NVML (G-L) on 2 of 3 hosts; " \
                                            "b: not of it (FAIL its class checks)"
    with pytest.raises(InputError, match=r"^--profile mid: no host is of a variant .*: a: 2 x G-L \(no NVL"):
        profiles.pick_variant(mid, {"a": {**large, "nvlink": False}})


def test_direction_and_quoted_versions_are_enforced(write_profile):
    bad = write_profile("bw.yaml", """
        criteria:
          allreduce_busbw: {max: 327.5, unit: GB/s, size: 8G, source: s}
    """)
    with pytest.raises(InputError, match=r"criteria.allreduce_busbw.max: allreduce_busbw takes min"):
        profiles.load(str(bad))
    ver = write_profile("ver.yaml", """
        criteria:
          nvidia_driver_version: {min: 525.60, unit: x, source: s}
    """)
    with pytest.raises(InputError, match=r"quote a version \('525.6'\)"):
        profiles.load(str(ver))


@pytest.mark.parametrize("name", ["h100-8x-nvlink", "h200-8x-nvlink", "h200-8x-nvlink@2", "h200-8x-nvlink@1"])
def test_hopper_profiles_reject_an_old_driver(name):
    """Driver 470 (CUDA 11.4) cannot run an H100/H200 well, and passed the 450.80.02 floor."""
    p = profiles.load(name)
    assert not p.threshold("nvidia_driver_version").ok("470.256.02")
    assert not p.threshold("nvidia_driver_version").ok("535.104.05")  # below the branch's minimum
    assert not p.threshold("nvidia_driver_version").ok("570.86")  # above 535.309.01, below 570.211.01
    assert p.threshold("nvidia_driver_version").ok("580.159.04")  # the recorded H200 machines
    assert not p.threshold("cuda_driver_version").ok("11.8")
    assert p.threshold("cuda_driver_version").ok("13.0")
    assert (p.hardware["nvlinks"], p.hardware["pcie_gen"]) == (None if name.endswith("@1") else 18, 5)
    assert p.threshold("power_limit").value == 700
    assert "8.5x" in (profiles.PROFILE_DIR / "nvidia-base.yaml").read_text()  # the aggregate's why


@pytest.mark.parametrize("version, ok, own", [
    ("570.86", False, "570.211.01"),  # a patch below its own branch's minimum
    ("570.211.01", True, "570.211.01"), ("580.159.04", True, "580.159.03"),
    ("535.309.01", True, "535.309.01"),
    ("590.44.01", True, "580.159.03"),  # a branch newer than the table's: >= the newest minimum
    ("550.144.03", False, None),  # an older branch the table does not list
])
def test_driver_is_judged_against_its_own_branch(version, ok, own):
    """The clustermax table's minimum per branch (clustermax.ai/minimum-versions.json)."""
    t = profiles.load("h200-8x-nvlink@1").threshold("nvidia_driver_version")
    assert t.extra["branches"] == ["535.309.01", "570.211.01", "580.159.03"]
    assert t.ok(version) is ok
    assert t.branch_minimum(version) == own
    assert "its branch's minimum (535.309.01 / 570.211.01 / 580.159.03" in t.expected


@pytest.mark.parametrize("body, err", [
    ("{min: '535', branches: '535.309.01', unit: x, source: s}", "branches: expected a list"),
    ("{min: '535', branches: [570.2], unit: x, source: s}", "branches: expected a list"),
    ("{min: '535', branches: ['570.1', '570.2'], unit: x, source: s}", "repeats one"),
    ("{min: '535', branches: ['470.1'], unit: x, source: s}", "470.1 is below the threshold's min 535"),
])
def test_driver_branches_are_validated(write_profile, tmp_path, body, err):
    path = write_profile("br", crit("nvidia_driver_version", body))
    with pytest.raises(InputError, match=re.escape(f"profile {path}: criteria.nvidia_driver_version")
                       + ".*" + re.escape(err)):
        profiles.load("br", base_dir=tmp_path)


@pytest.mark.parametrize("name, watts", [
    ("a100-80gb-8x-nvlink", 400), ("a100-40gb-8x-nvlink", 400), ("a100-80gb-8x-pcie", 300),
    ("a100-40gb-8x-pcie", 250), ("l40s-8x-pcie", 350), ("h100-8x-nvlink", 700)])
def test_power_limit_is_the_class_rated_one(name, watts):
    """The datasheet TDP or a capture's default limit (docs/reference-figures.md)."""
    t = profiles.load(name).threshold("power_limit")
    assert (t.value, t.unit) == (watts, "W") and not t.provisional


@pytest.mark.parametrize("spec, why", [
    ("allreduce_busbw: {min: -1, unit: GB/s, source: x}", r"criteria\.allreduce_busbw\.min: -1 can never"),
    ("hbm_bandwidth: {min: 0, unit: TB/s, source: x}", r"criteria\.hbm_bandwidth\.min: 0 can never fail"),
    ("soak_gpu_temp: {max: -5, unit: C, source: x}", r"criteria\.soak_gpu_temp\.max: -5 can never pass"),
    ("storage_read_aggregate: {min: 1, unit: GB/s, per: cluster, node_min: 0, source: x}",
     r"criteria\.storage_read_aggregate\.node_min: expected a number of GB/s above 0"),
    ("storage_read_aggregate: {min: 1, unit: GB/s, per: gpu, node_min: null, source: x}",
     r"criteria\.storage_read_aggregate\.per: gpu in a profile that expects no GPU"),
])
def test_a_threshold_that_cannot_fail_is_refused_naming_file_and_key(write_profile, spec, why):
    p = write_profile("weak", f"extends: local\ncriteria:\n  {spec}\n")
    with pytest.raises(InputError, match=f"weak.yaml: {why}"):
        profiles.load(str(p))


def test_an_aggregate_per_gpu_over_hosts_without_gpus_errors_naming_the_key(write_profile):
    from signoff.storage.judge import scaled
    p = write_profile("pergpu", 'extends: h200-8x-nvlink@1\ncriteria:\n  storage_read_aggregate: '
                      '{min: 1, unit: GB/s, per: gpu, node_min: null, source: x}\n')
    t = profiles.load(str(p)).threshold("storage_read_aggregate")
    assert scaled(t, hosts=2, gpus=2).value == 2
    with pytest.raises(InputError, match=r"pergpu: criteria\.storage_read_aggregate\.per: gpu, but no host "
                                         r"of this run reports a GPU: the minimum would be 0 GB/s"):
        scaled(t, hosts=2, gpus=0)


# ------------------------------------------------------------------ slices (issue 52)

H100 = {"gpu_model": "NVIDIA H100 80GB HBM3"}


def test_a_slice_is_n_gpus_of_its_class_with_their_hardware_and_figures():
    """h100-8x-nvlink@N: N of the class's 8 GPUs, no NVLS nor fabric state; one GPU has no NVLink
    to require; the all-reduce floor scaled by this project's ring figures (460 x 344.7 / 480.0 at
    2, x 364.8 / 480.0 at 4), the training step's scaling bound recomputed at N, P2P as the
    class's, the network judged by nvidia-base's derived rules, never the server's 8 NDR ports."""
    full = profiles.load("h100-8x-nvlink")
    one, two, four = (profiles.load(f"h100-8x-nvlink@{n}") for n in (1, 2, 4))
    assert (full.slice_of, full.full_count) == ("", None)
    for n, p in ((1, one), (2, two), (4, four)):
        assert (p.name, p.slice_of, p.full_count, p.hardware["gpu_count"]) == (f"h100-8x-nvlink@{n}",
                                                                               "h100-8x-nvlink", 8, n)
        assert p.hardware["nvls"] is False and p.hardware["nvlink_fabric"] is False
        assert p.description == f"{n} of the 8 GPUs of {full.description} (a slice)"
        assert p.threshold("p2p_bandwidth").value == full.threshold("p2p_bandwidth").value
        nic = p.threshold("nic_rate")
        assert nic.extra.get("derived") == "fleet_rate" and "ports" not in nic.extra, nic
        assert p.origins["nic_rate"]["min"].endswith("nvidia-base.yaml")
        assert p.threshold("multinode_allreduce_busbw").extra["derived"] == "node_bound"
    assert (one.hardware["interconnect"], one.hardware["nvlinks"]) == ("any", None)
    assert (two.hardware["interconnect"], two.hardware["nvlinks"]) == ("nvlink", 18)
    assert two.threshold("allreduce_busbw").value == 330.3 == round(460 * 344.7 / 480.0, 1)
    assert four.threshold("allreduce_busbw").value == 349.6 == round(460 * 364.8 / 480.0, 1)
    assert two.threshold("allreduce_busbw").extra == full.threshold("allreduce_busbw").extra  # size, sweep
    rule = two.threshold("allreduce_busbw").provisional
    assert "460 GB/s (the class's 8-GPU figure, NVLS on) x 344.7 / 480.0" in rule, rule
    # F = 0.85 at M = 8: r = 0.9444; at 2: 0.9 / (1 + 0.0588 x (1 / 1.75) x (460 / 330.3)) = 0.86
    t = two.threshold("train_scaling_host")
    assert t.value == 0.86 and "B_M = 460, B_N = 330.3 GB/s" in t.provisional, t
    assert two.origins["train_scaling_host"]["min"] == "signoff/slices.py rule"
    # PCIe: the same all-reduce figure (a ring is bounded by its slowest link)
    l40s = profiles.load("l40s-8x-pcie")
    assert profiles.load("l40s-8x-pcie@4").threshold("allreduce_busbw").value == \
        l40s.threshold("allreduce_busbw").value
    digests = {profiles.digest(p) for p in (full, one, two, four)}
    assert len(digests) == 4  # the thresholds differ, so do the digests


def test_the_h200_slices_keep_their_measured_figures_from_the_class_file():
    """The measured 2x and 4x H200 figures live in h200-8x-nvlink.yaml's slices: section and win
    over the rule; show-profile names that section as their origin."""
    two, four = profiles.load("h200-8x-nvlink@2"), profiles.load("h200-8x-nvlink@4")
    assert (two.threshold("allreduce_busbw").value, two.threshold("p2p_bandwidth").value,
            two.threshold("train_scaling_host").value) == (327.5, 372.7, 0.86)
    assert (four.threshold("allreduce_busbw").value, four.threshold("train_scaling_host").value) == \
        (346.5, 0.844)
    assert four.threshold("p2p_bandwidth").extra["derived"] == "link_rate"
    assert two.origins["allreduce_busbw"]["min"].endswith("thresholds/h200-8x-nvlink.yaml slices.2")
    three = profiles.load("h200-8x-nvlink@3")  # not measured: the rule, 431 x 344.7 / 480.0
    assert three.threshold("allreduce_busbw").value == 309.5


@pytest.mark.parametrize("name, why", [
    ("h100-8x-nvlink@8", r"profile h100-8x-nvlink@8: a slice of h100-8x-nvlink has 1 to 7 of its 8 GPUs"),
    ("h100-8x-nvlink@0", r"a slice of h100-8x-nvlink has 1 to 7 of its 8 GPUs \(--profile h100-8x-nvlink@1"),
    ("h100-8x-nvlink@two", r"profile 'h100-8x-nvlink@two': a slice is <class>@<N>"),
    ("nvidia-base@2", r"profile nvidia-base@2: nvidia-base is a class base"),
    ("local@1", r"profile local@1: local is of no GPU count to cut from"),
    ("h100-8x-nvlink@2@1", r"profile h100-8x-nvlink@2@1: h100-8x-nvlink@2 is a slice already"),
])
def test_a_slice_of_no_gpus_the_class_has_is_refused(name, why):
    with pytest.raises(InputError, match=why):
        profiles.load(name)


def test_a_site_profile_of_a_class_inherits_its_slices_and_a_path_takes_n(write_profile, tmp_path):
    """A site's profile extending h200-8x-nvlink keeps the class's measured slices (path@N), may
    set its own per N; `slices:` is validated as criteria are; a profile extending a slice is
    one (slice_of, full_count)."""
    site = write_profile("site", "extends: h200-8x-nvlink\nslices:\n  4:\n    criteria:\n"
                                 "      allreduce_busbw: {min: 350, unit: GB/s, size: 8G, source: our run}\n")
    two, four = profiles.load(f"{site}@2"), profiles.load(f"{site}@4")
    assert (two.name, two.slice_of, two.threshold("allreduce_busbw").value) == ("site@2", "site", 327.5)
    assert four.threshold("allreduce_busbw").value == 350 and four.path == f"{site}@4"
    assert four.origins["allreduce_busbw"]["min"] == f"{site} slices.4"
    bad = write_profile("bad", "extends: h200-8x-nvlink\nslices:\n  8:\n    criteria: {}\n")
    with pytest.raises(InputError, match=r"bad.yaml: slices.8: expected a GPU count from 1 to 7"):
        profiles.load(str(bad))
    bad = write_profile("bad2", "extends: h200-8x-nvlink\nslices:\n  2:\n    criteria:\n"
                                "      allreduce_busbw: {min: 350}\n")
    with pytest.raises(InputError, match=r"bad2.yaml slices.2: criteria.allreduce_busbw.unit: missing"):
        profiles.load(str(bad))
    kid = write_profile("kid", "extends: h200-8x-nvlink@2\ncriteria: {power_limit: null}\n")
    p = profiles.load(str(kid))
    assert (p.slice_of, p.full_count, p.hardware["gpu_count"]) == ("h200-8x-nvlink", 8, 2)


@pytest.mark.parametrize("n, nvlink, name", [(1, False, "h100-8x-nvlink@1"), (2, True, "h100-8x-nvlink@2"),
                                             (4, True, "h100-8x-nvlink@4")])
def test_auto_picks_the_slice_of_the_class_of_its_model(n, nvlink, name):
    """A rented 1x H100 (no NVLink: one GPU) and 2 or 4 NVLinked H100s: no class of that count,
    so --profile auto picks that many GPUs of h100-8x-nvlink."""
    assert profiles.auto_select({**H100, "gpu_count": n, "nvlink": nvlink, "rented": True}).name == name


def test_auto_prefers_the_exact_class_and_says_the_slices_it_tried(write_profile, tmp_path):
    write_profile("local", "criteria: {}\n")
    write_profile("big", "hardware: {gpu_model: 'G1', gpu_count: 8, interconnect: nvlink}\n")
    g1 = {"gpu_model": "G1", "nvlink": True, "rented": True}
    assert profiles.auto_select({**g1, "gpu_count": 2}, tmp_path).name == "big@2"
    write_profile("two", "hardware: {gpu_model: 'G1', gpu_count: 2}\n")  # an exact class wins
    assert profiles.auto_select({**g1, "gpu_count": 2, "rented": False}, tmp_path).name == "two"
    with pytest.raises(InputError, match=r"matches 4 x G1 \(no NVLink\) \(slices tried: big@4 \(no NVLink "
                                         r"where NVLink is required\)\); pass --profile NAME"):
        profiles.auto_select({**g1, "gpu_count": 4, "nvlink": False}, tmp_path)
    write_profile("other", "hardware: {gpu_model: 'G.*', gpu_count: 8}\n")
    with pytest.raises(InputError, match="several profiles match 4 x G1 .*: big@4, other@4"):
        profiles.auto_select({**g1, "gpu_count": 4}, tmp_path)


def test_a_class_base_picks_a_variants_slice(write_profile, tmp_path):
    write_profile("base", "abstract: true\nhardware: {interconnect: nvlink}\n")
    write_profile("v40", "extends: base\nhardware: {gpu_model: 'A40', gpu_count: 8}\n")
    write_profile("v80", "extends: base\nhardware: {gpu_model: 'A80', gpu_count: 8}\n")
    prof, line = profiles.pick_variant(profiles.load("base", tmp_path),
                                       {"n1": {"gpu_model": "A80", "gpu_count": 2, "nvlink": True,
                                               "rented": True}})
    assert prof.name == "v80@2" and prof.slice_of == "v80" and "picked v80@2" in line


def test_list_and_show_profile_show_the_slices(capsys):
    """`signoff list profiles`' line of a class's slices (the whole listing: test_command.py), and
    show-profile of a slice naming where each threshold comes from."""
    from signoff import cli, slices
    assert slices.listed(profiles.load("h100-8x-nvlink")) == \
        "slices: h100-8x-nvlink@1 .. @7 (1 to 7 of its 8 GPUs; --profile auto picks one for fewer GPUs)"
    assert slices.listed(profiles.load("h200-8x-nvlink")).endswith("; measured figures at @2, @4)")
    assert slices.listed(profiles.load("gb200-nvl72")).startswith("slices: gb200-nvl72@1 .. @3 ")
    assert slices.listed(profiles.load("local")) is None
    assert cli.main(["show-profile", "h100-8x-nvlink@2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("profile h100-8x-nvlink@2: 2 of the 8 GPUs of 8x NVIDIA H100 SXM5"), out
    assert "gpu_count 2, nvls False" in out and "nvlink_fabric False" in out
    assert re.search(r"(?m)^  allreduce_busbw: >= 330.3 GB/s .*\[signoff/slices.py rule\]$", out), out
    assert cli.main(["show-profile", "h200-8x-nvlink@2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"(?m)^  allreduce_busbw: >= 327.5 GB/s +\[thresholds/h200-8x-nvlink.yaml slices.2\]$",
                     out), out


# A rented slice vs a broken server (issue 52 review): fewer GPUs than the class is a slice only
# where the form says rented, and never where the PCI bus shows GPUs NVML does not list
BARE7 = {**H100, "gpu_count": 7, "nvlink": True, "rented": False, "pci_gpus": 8}


def test_auto_refuses_a_slice_on_bare_metal_a_gpu_fell_off():
    """7 of an HGX H100's 8 on bare metal: a GPU off the bus, never a 7-GPU slice that PASSes;
    in a VM whose PCI bus shows the 8th, refused too; a form not read is not a rented one; an
    explicit <class>@N is still the user's to pass anywhere."""
    with pytest.raises(InputError, match=re.escape(
            "--profile auto: 7 x NVIDIA H100 80GB HBM3 (NVLink) on bare metal is 7 of h100-8x-nvlink's 8 "
            "GPUs: a GPU missing (fallen off the bus, disabled)? A slice is a VM's or a container's; to "
            "judge this host as one anyway pass --profile h100-8x-nvlink@7")):
        profiles.auto_select(BARE7)
    with pytest.raises(InputError, match=r"in a VM is 7 of h100-8x-nvlink's 8 GPUs, but its PCI bus shows "
                                         r"8 NVIDIA GPUs where NVML lists 7: a GPU missing .*--profile h100"):
        profiles.auto_select({**BARE7, "rented": True})
    seven = profiles.load("h100-8x-nvlink@7")  # the user's to pass
    assert seven.hardware["gpu_count"] == 7
    assert picking.not_a_slice({**H100, "gpu_count": 7, "nvlink": True}, [seven]).startswith(
        "7 x NVIDIA H100 80GB HBM3 (NVLink) on a host whose form was not read (bare metal, a VM or a "
        "container?) is 7 of h100-8x-nvlink's 8 GPUs: a GPU missing")
    assert picking.not_a_slice({**BARE7, "rented": True, "pci_gpus": 7}, [seven]) is None


def test_a_class_base_refuses_a_bare_metal_tray_short_of_a_gpu():
    """A GB200 tray with 3 of its 4 GPUs on bare metal under --profile blackwell-nvl72: refused,
    not a gb200-nvl72@3 that PASSes; a host of the whole class still votes beside it."""
    tray = {"gpu_model": "NVIDIA GB200", "gpu_count": 3, "nvlink": True, "pci_device_id": "2941",
            "rented": False, "pci_gpus": 3}
    base = profiles.load("blackwell-nvl72")
    with pytest.raises(InputError, match=re.escape(
            "--profile blackwell-nvl72: t1's 3 x NVIDIA GB200 (NVLink) on bare metal is 3 of gb200-nvl72's 4 "
            "GPUs: a GPU missing (fallen off the bus, disabled)? A slice is a VM's or a container's; to "
            "judge this host as one anyway pass --profile gb200-nvl72@3")):
        profiles.pick_variant(base, {"t1": tray})
    prof, line = profiles.pick_variant(base, {"t1": tray, "t2": {**tray, "gpu_count": 4}})
    assert prof.name == "gb200-nvl72" and line.endswith("t1: not of it (FAIL its class checks)"), line
    assert profiles.pick_variant(base, {"t1": {**tray, "rented": True}})[0].name == "gb200-nvl72@3"


def fake_facts(gpus: int, pci: int | None, kinds: list | None) -> dict:
    """A sysinfo document's NVML and form parts, as HostView reads them (a fake: no GPU here)."""
    gpu = {"name": H100["gpu_model"], "nvlink": {"links": 18}, "pci_device_id": "2330"}
    facts = {"nvidia": {"available": True, "gpus": [gpu] * gpus, "pci_devices": pci}}
    if kinds is not None:
        facts["preflight"] = {"form": {"kinds": kinds}}
    return facts


@pytest.mark.parametrize("gpus, pci, kinds, rented, pci_gpus, pick", [
    (7, 8, [], False, 8, None),  # bare metal, a GPU off the bus: refused
    (7, 8, ["vm"], True, 8, None),  # a VM that has the 8th on its bus but not in NVML: refused
    (1, 1, ["vm"], True, 1, "h100-8x-nvlink@1"),
    (2, 8, ["container"], True, None, "h100-8x-nvlink@2"),  # a container sees the host's whole bus
    (2, 8, ["vm", "container"], True, None, "h100-8x-nvlink@2"),
    (2, 2, None, None, 2, None),  # an older host document: no form, not known to be rented
])
def test_the_fake_hosts_hardware_carries_its_form_and_pci_gpus_to_the_vote(gpus, pci, kinds, rented, pci_gpus,
                                                                           pick):
    """What HostView.hardware gives the vote: the form's rented, the PCI bus's GPUs outside a
    container; auto's slice step (candidates, then not_a_slice) on it."""
    from collections import Counter

    from signoff.fixtures import HostView
    hw = HostView("n1", fake_facts(gpus, pci, kinds), None).hardware
    assert (hw["gpu_count"], hw["rented"], hw["pci_gpus"]) == (gpus, rented, pci_gpus)
    key, _ = Counter([tuple(sorted(hw.items()))]).most_common(1)[0]  # the vote's key is hashable
    found = slices.candidates(dict(key), [profiles.load("h100-8x-nvlink")])[0]  # auto's slice step
    assert [s.name for s in found] == [f"h100-8x-nvlink@{gpus}"]
    why = picking.not_a_slice(dict(key), found)
    assert why is None if pick else "a GPU missing" in why, why
    assert profiles.hardware_text(hw) == f"{gpus} x NVIDIA H100 80GB HBM3 (NVLink)"


@pytest.mark.parametrize("old, new", [("h200-1x", "h200-8x-nvlink@1"), ("h200-2x-nvlink", "h200-8x-nvlink@2"),
                                      ("h200-4x-nvlink", "h200-8x-nvlink@4")])
def test_a_removed_h200_profile_name_says_its_slice(old, new):
    with pytest.raises(InputError, match=rf"profile '{old}': no such file .*; {old} is now {new} "
                                         rf"\({new[-1]} of h200-8x-nvlink's 8 GPUs, a slice\); a profile "):
        profiles.load(old)
    assert profiles.load(new).hardware["gpu_count"] == int(new[-1])


def test_a_4_gpu_class_scales_its_slices_all_reduce_by_the_ring_at_4_gpus(write_profile):
    """gb200-nvl72 and gb300-nvl72 (4 GPUs, NVLS off): f(N) = ring(N') / ring(4) = 344.7 / 364.8,
    not over 8x H200's 367.2. Where no ring figure at the class's own M is measured, or the class's
    figure is NVLS at M != 8 (the NVLS gain at M unknown), the slice's all-reduce is uncalibrated,
    saying why, and so is the training step's scaling that is worked out from it."""
    for name, full in (("gb200-nvl72", 597), ("gb300-nvl72", 617)):
        assert profiles.load(name).hardware["nvls"] is False
        for n in (2, 3):
            t = profiles.load(f"{name}@{n}").threshold("allreduce_busbw")
            assert t.value == round(full * 344.7 / 364.8, 1), t
            assert f"{full} GB/s (the class's 4-GPU figure, NVLS off) x 344.7 / 364.8 (ring busbw of 2x " \
                   f"H200, NVLS off, over 4x H200's, NVLS off)" in t.provisional, t.provisional
    assert profiles.load("gb200-nvl72@2").threshold("allreduce_busbw").value == 564.1
    nvls4 = write_profile("nvls4", "extends: gb200-nvl72\nhardware: {nvls: true}\n")
    six = write_profile("six", "extends: h100-8x-nvlink\nhardware: {gpu_count: 6, nvls: false}\n")
    for path, why in ((nvls4, "the class's 4-GPU figure is NVLS on, and no NVLS figure at 4 GPUs"),
                      (six, "no ring busbw measured at 6 GPUs")):
        s = profiles.load(f"{path}@2")
        assert "allreduce_busbw" not in s.criteria and why in s.uncalibrated["allreduce_busbw"], s
        assert "train_scaling_host" not in s.criteria
        assert "allreduce_busbw, uncalibrated: " in s.uncalibrated["train_scaling_host"]


def test_a_key_written_twice_is_refused_naming_the_file_key_and_lines(tmp_path):
    """safe_load keeps the last of two equal keys: a threshold's second `source:` once replaced
    its first (and the rule in it) unseen. Profiles, inventories and intent files refuse it."""
    from signoff import inventory
    prof = tmp_path / "dup.yaml"
    prof.write_text("extends: local\ncriteria:\n  storage_read_seq:\n    min: 0.5\n    unit: GB/s\n"
                    "    source: first\n    source: second\n")
    with pytest.raises(InputError, match=r"(?s)profile .*dup\.yaml: not valid YAML: .*found the key 'source' "
                                         r"twice \(first at line 6\)\n  in \".*dup\.yaml\", line 7") as exc:
        profiles.load(str(prof))
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - name: a\n    name: b\n")
    with pytest.raises(InputError, match=r"(?s)inventory .*inv\.yaml: not valid YAML: .*key 'name' twice"):
        inventory.load(inv)
    assert "second" not in str(exc.value)
