"""Shipped profiles: every criterion of the sign-off sheet has a threshold (cited, provisional
with its rule) or says why it has none; every source a provider can open."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from signoff import InputError, families, profiles

ROOT = Path(__file__).resolve().parent.parent
# Judged without a threshold by design: GPUDirect RDMA always, rail alignment only where a profile
# sets gpu_nic_affinity (acceptance/test_health.py); error counters may grow only where a profile
# sets error_counter_growth (none by default); the all-reduce over MNNVL only on a class with an NVLink
# domain, which sets its figure (tests/test_fabric.py asserts each does); the training step's
# transport by multinode_transport's where a profile sets no train_transport of its own; RoCE's pause
# frames and CNPs only where a site bounds them (roce_congestion: no public bound).
OPTIONAL = {"gpu_nic_affinity", "error_counter_growth", "mnnvl_allreduce_busbw", "train_transport",
            "roce_congestion"}
CONCRETE = [n for n in profiles.available() if not profiles.load(n).abstract]
# a repo-relative path: a known top-level folder, then a file with an extension
PATH = re.compile(r"\b((?:docs|thresholds|signoff|acceptance|tests|reports|bench)/[\w./-]*\w)")


def sheet_criteria() -> set[str]:
    return set(families.criteria()) - OPTIONAL


def test_concrete_profiles_are_the_shipped_classes():
    assert {"a100-80gb-8x-nvlink", "a100-40gb-8x-nvlink", "a100-80gb-8x-pcie", "a100-40gb-8x-pcie",
            "h100-8x-nvlink", "l40s-8x-pcie", "h200-8x-nvlink", "local", "b200-8x-nvlink", "b300-8x-nvlink",
            "gb200-nvl72", "gb300-nvl72", *EXPORT} <= set(CONCRETE)


@pytest.mark.parametrize("name", CONCRETE)
def test_every_criterion_has_a_threshold_or_says_why_not(name):
    p = profiles.load(name)
    missing = sorted(sheet_criteria() - set(p.criteria) - set(p.uncalibrated))
    assert not missing, f"profile {name} has no threshold (nor uncalibrated: reason) for {missing}"
    for c, why in p.uncalibrated.items():
        with pytest.raises(InputError, match=re.escape(f"has no threshold for {c!r} ({why})")):
            p.threshold(c)


def test_the_class_criteria_are_set_where_figures_exist():
    """The figures that are public are set, not left uncalibrated."""
    for name in ("a100-80gb-8x-nvlink", "a100-40gb-8x-nvlink", "h100-8x-nvlink", "h200-8x-nvlink"):
        assert not profiles.load(name).uncalibrated, name
    h100 = profiles.load("h100-8x-nvlink")
    assert h100.threshold("thermal_slowdown").extra["shutdown"] == 95  # T.Limit 87 - (-8)
    assert h100.threshold("host_link_bandwidth").value == 48  # nvbandwidth mark, not 52
    a40, a80 = profiles.load("a100-40gb-8x-nvlink"), profiles.load("a100-80gb-8x-nvlink")
    assert a40.threshold("allreduce_busbw").extra["size"] == "8G"
    assert a80.threshold("allreduce_busbw").extra["size"] == "16G"
    assert a40.threshold("host_link_bandwidth").value == a80.threshold("host_link_bandwidth").value == 21
    assert "mem_max" not in profiles.load("l40s-8x-pcie").threshold("thermal_slowdown").extra


BLACKWELL = ("b200-8x-nvlink", "b300-8x-nvlink", "gb200-nvl72", "gb300-nvl72")


@pytest.mark.parametrize("name", BLACKWELL)
def test_blackwell_classes_cite_or_derive_every_figure(name):
    """Issue 43: every criterion of the Blackwell classes has a figure with its source or a
    derived rule under provisional:, none uncalibrated; no class temperature figure where none is
    published (each GPU's own NVML thresholds against its siblings'); the Grace trays judge the
    NVLink-C2C host link (~200 GB/s), not PCIe; NVLink5's 18 links."""
    p = profiles.load(name)
    assert not p.uncalibrated, p.uncalibrated
    assert set(p.criteria) >= sheet_criteria(), sorted(sheet_criteria() - set(p.criteria))
    for t in p.criteria.values():
        assert t.source and "shared/" not in t.source + t.provisional, t
    assert p.threshold("thermal_slowdown").extra["derived"] == "same_model"
    assert p.hardware["nvlinks"] == 18 and p.hardware["pci_ids"]
    c2c = name.startswith("gb")
    assert (p.hardware["host_link"], p.hardware.get("nvlink_domain"), p.hardware["gpu_count"]) == \
        (("c2c", 72, 4) if c2c else ("pcie", None, 8))
    assert ("pcie_gen" in p.hardware) is not c2c
    link = p.threshold("host_link_bandwidth")
    assert (link.value == 174) if c2c else (link.value == 48 and link.provisional)


# Issue 46: the export and consumer classes, and their NVLinks per GPU (None: PCIe, no NVLink)
EXPORT = {"h20-8x-nvlink": 18, "h20-3e-8x-nvlink": 18, "h800-8x-nvlink": 8, "a800-80gb-8x-nvlink": 8,
          "rtx4090-8x-pcie": None, "l20-8x-pcie": None}


@pytest.mark.parametrize("name", EXPORT)
def test_export_and_consumer_classes_cite_or_derive_every_figure(name):
    """Every criterion a shipped class sets has a figure with its source or a derived rule under
    provisional:, none uncalibrated, none citing the private notebook; H800 and A800 count 8
    NVLinks (a count copied from H100's 18 or A100's 12 fails every healthy one); --profile auto
    picks the class from its NVML name alone (H20 and H20-3e apart)."""
    p = profiles.load(name)
    assert not p.uncalibrated, p.uncalibrated
    assert set(p.criteria) >= set(profiles.load("l40s-8x-pcie").criteria), sorted(
        set(profiles.load("l40s-8x-pcie").criteria) - set(p.criteria))
    for t in p.criteria.values():
        assert t.source and "shared/" not in t.source + t.provisional, t
        assert not t.provisional or t.provisional.startswith("derived: "), t
    assert p.hardware.get("nvlinks") == EXPORT[name]
    assert p.hardware["interconnect"] == ("nvlink" if EXPORT[name] else "pcie")
    hw = {"gpu_model": p.hardware["gpu_model"], "gpu_count": 8, "nvlink": bool(EXPORT[name])}
    assert profiles.auto_select(hw).name == name


def test_rtx4090_class_has_no_peer_access_nor_ecc_and_fits_its_memory():
    """The GeForce class's normal state: no GPU peer access (copies and NCCL through host memory),
    ECC off; the other classes leave both unset (required). Its all-reduce is judged at 1 GiB and
    its training step at batch 2 (24 GB cards); the keys take booleans only."""
    p = profiles.load("rtx4090-8x-pcie")
    assert (p.hardware["peer_access"], p.hardware["ecc"]) == (False, False)
    assert p.threshold("allreduce_busbw").extra["size"] == "1G" and p.section("training")["batch"] == 2
    assert "shutdown" in p.threshold("thermal_slowdown").extra and "mem_max" not in p.threshold(
        "thermal_slowdown").extra
    for n in set(EXPORT) - {"rtx4090-8x-pcie"}:
        assert "peer_access" not in profiles.load(n).hardware and "ecc" not in profiles.load(n).hardware


@pytest.mark.parametrize("key", ["peer_access", "ecc"])
def test_the_trait_keys_take_a_boolean(tmp_path, key):
    path = tmp_path / "bad.yaml"
    path.write_text(f"hardware: {{{key}: 'no'}}\n")
    with pytest.raises(InputError, match=re.escape(f"profile {path}: hardware.{key}: expected true, false")):
        profiles.load("bad", base_dir=tmp_path)


def test_b200_power_limit_says_which_set_point_it_judges():
    t = profiles.load("b200-8x-nvlink").threshold("power_limit")
    assert t.value == 700 and "700 W" in t.source and "1000 W" in t.source
    assert "capped to 700 W FAILs" in t.source


def test_no_gpu_criterion_is_left_uncalibrated():
    """Issue 29: every class's (and local's) GPU criteria have a figure or a derived rule, so a
    healthy host of any shipped class can PASS."""
    gpu_side = {c for f in ("gpu", "interconnect", "soak", "training") for c in families.criteria()
                if families.family(c).__name__ == f"signoff.{f}"}
    left = {n: sorted(set(profiles.load(n).uncalibrated) & gpu_side) for n in profiles.available()}
    assert not any(left.values()), left


def sources():
    for name in profiles.available():
        p = profiles.load(name)
        for t in p.criteria.values():
            yield name, t.criterion, " ".join((t.source, t.provisional))
        for c, why in p.uncalibrated.items():
            yield name, c, why


def test_every_cited_file_exists():
    bad = [f"{n}.{c}: {m}" for n, c, text in sources() for m in PATH.findall(text)
           if not (ROOT / m).exists()]
    assert not bad, bad


def test_a_source_citing_a_suite_file_says_its_figure_or_rule_itself():
    """The repository has no public address a report could link a recorded run to at its commit,
    so a source that cites one of the suite's files must also say, in its own words, the figure it
    took from there (a number beside the path: the measured run) or the rule it applies (a policy,
    a definition): a provider reads it on the page, and the report names the suite's version
    (tests/test_report_readable.py). Dates and the paths themselves do not count as a figure."""
    bad = []
    for n, c, text in sources():
        if not PATH.search(text):
            continue
        own = re.sub(r"\b20\d\d-\d\d-\d\d\b", "", PATH.sub("", text))
        if not (re.search(r"\d", own) or re.search(r"\b(policy|rule|definition|defined)\b", own)) \
                or len(own.strip(" ()[];,.:")) < 40:
            bad.append(f"{n}.{c}: {text}")
    assert not bad, bad


def test_the_path_pattern_finds_repo_paths():
    assert PATH.findall("see docs/h200.md and signoff/interconnect/probe_p2p.py; conf/x.conf") == [
        "docs/h200.md", "signoff/interconnect/probe_p2p.py"]


# docs/h200.md's measurement log is not a threshold source (docs/reference-figures.md is)
@pytest.mark.parametrize("where", ["thresholds", "docs/thresholds.md", "docs/reference-figures.md"])
def test_no_source_points_outside_the_repository(where):
    """A provider must be able to open every source: nothing points into ../shared/."""
    top = ROOT / where
    files = sorted(top.rglob("*")) if top.is_dir() else [top]
    hits = [f"{f.relative_to(ROOT)}:{i}" for f in files if f.is_file() and f.suffix in (".yaml", ".md")
            for i, line in enumerate(f.read_text().splitlines(), 1) if "shared/" in line]
    assert not hits, hits
    assert not [(n, c) for n, c, text in sources() if "shared/" in text]


def test_provisional_thresholds_state_their_rule():
    loaded = {n: profiles.load(n) for n in CONCRETE}  # once each: a load reads its whole chain
    seen = [(n, t.criterion) for n in CONCRETE for t in loaded[n].criteria.values() if t.provisional]
    assert seen  # e.g. the training step of every class but H200
    for n, c in seen:
        t = loaded[n].criteria[c]
        assert t.provisional.startswith("derived: ") and len(t.provisional) > 20, (n, c)
        assert t.expected.endswith("(provisional threshold: calibrate on a known-good node)")


@pytest.fixture
def write_profile(tmp_path):
    def write(name: str, text: str) -> Path:
        p = tmp_path / f"{name}.yaml"
        p.write_text(textwrap.dedent(text))
        return p
    return write


def test_provisional_reaches_the_threshold_and_is_judged_as_any(write_profile, tmp_path):
    write_profile("p", """
        criteria:
          hbm_bandwidth: {min: 1.0, unit: TB/s, source: s, provisional: "derived: 2 x 0.5"}
          power_limit: {min: 400, unit: W, source: s}
    """)
    p = profiles.load("p", base_dir=tmp_path)
    t = p.threshold("hbm_bandwidth")
    assert t.provisional == "derived: 2 x 0.5"
    assert t.expected == ">= 1.0 TB/s (provisional threshold: calibrate on a known-good node)"
    assert not t.ok(0.99) and t.ok(1.0)  # never hides a FAIL
    assert p.threshold("power_limit").provisional == ""
    write_profile("child", "extends: p\n")
    inherited = profiles.load("child", base_dir=tmp_path).threshold("hbm_bandwidth")
    assert (inherited.provisional, inherited.profile) == ("derived: 2 x 0.5", "child")


@pytest.mark.parametrize("value", ["'guessed'", "''", "'derived:'", "'derived:  '", "3", "[derived: x]"])
def test_a_bad_provisional_names_file_and_key(write_profile, tmp_path, value):
    path = write_profile("bad", f"""
        criteria:
          hbm_bandwidth: {{min: 1.0, unit: TB/s, source: s, provisional: {value}}}
    """)
    with pytest.raises(InputError, match=re.escape(f"profile {path}: criteria.hbm_bandwidth.provisional")):
        profiles.load("bad", base_dir=tmp_path)


@pytest.mark.parametrize("body, err", [
    ("{uncalibrated: ''}", "uncalibrated: expected the reason"),
    ("{uncalibrated: 3}", "uncalibrated: expected the reason"),
    ("{uncalibrated: why, min: 1, unit: x, source: s}", "uncalibrated: stands alone"),
])
def test_a_bad_uncalibrated_names_file_and_key(write_profile, tmp_path, body, err):
    path = write_profile("bad", f"criteria:\n  hbm_bandwidth: {body}\n")
    with pytest.raises(InputError, match=re.escape(f"profile {path}: criteria.hbm_bandwidth.{err}")):
        profiles.load("bad", base_dir=tmp_path)


def test_uncalibrated_errors_with_its_reason_and_a_child_may_set_it(write_profile, tmp_path):
    write_profile("cls", "criteria:\n  p2p_bandwidth: {uncalibrated: 'calibrate on a good node'}\n")
    p = profiles.load("cls", base_dir=tmp_path)
    assert "p2p_bandwidth" not in p.criteria
    with pytest.raises(InputError, match=r"has no threshold for 'p2p_bandwidth' \(calibrate on a good"):
        p.threshold("p2p_bandwidth")
    write_profile("site", "extends: cls\ncriteria:\n  p2p_bandwidth: {min: 20, unit: GB/s, source: run}\n")
    site = profiles.load("site", base_dir=tmp_path)
    assert site.threshold("p2p_bandwidth").value == 20 and not site.uncalibrated
