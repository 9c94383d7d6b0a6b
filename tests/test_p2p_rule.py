"""signoff.interconnect.judge: each GPU pair judged against its own link (`derived: link_rate`) and
its peer access; fake NVML/topology readings (no GPU here)."""

from __future__ import annotations

import textwrap

import pytest

from signoff import InputError, profiles
from signoff.interconnect import judge

TOPO_NV6 = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
            "GPU0\t X \tNV6\tNV6\t0-15\n"
            "GPU1\tNV6\t X \tSYS\t0-15\n"
            "GPU2\tNV6\tSYS\t X \t0-15\n")


def gpu(i, gen=4, width=16, max_gen=None, max_width=None):
    return {"index": i, "pcie": {"gen": gen, "width": width, "max_gen": max_gen or gen,
                                 "max_width": max_width or width}}


def doc(uni, topo="", peer=None):
    return {"unidirectional": uni, "topology": {"topo_m": topo}, "peer_access": peer or {}}


def threshold(text, tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(textwrap.dedent(text))
    return profiles.load(str(p)).threshold("p2p_bandwidth")


RULE = """
criteria:
  p2p_bandwidth: {min: 0.62, derived: link_rate, unit: "x link rate", source: "a test",
                  provisional: "derived: a test"}
"""


def test_nvlinks_between_reads_topo_m_cells():
    assert judge.nvlinks_between(TOPO_NV6) == {"0-1": 6, "0-2": 6, "1-0": 6, "2-0": 6}
    assert judge.nvlinks_between(None) == {}


def test_fake_pairs_are_judged_against_their_own_link(tmp_path):
    """NV6 pairs against 6 x 25 GB/s, the SYS pair against the slower GPU's PCIe link (the max
    it and its slot support: GPU 2's Gen4 x8, 15.75 GB/s), never one figure for all."""
    t = threshold(RULE, tmp_path)
    d = doc({"0-1": 100.0, "1-0": 90.0, "1-2": 12.0, "2-1": 9.0}, TOPO_NV6)
    floors, expected = judge.floors(t, d, [gpu(0), gpu(1), gpu(2, width=8, max_width=8)])
    assert floors["0-1"] == (93.0, " (0.62 x NV6: 6 x 25 GB/s = 150 GB/s)")
    assert floors["1-2"] == (9.77, " (0.62 x PCIe Gen4 x8 = 15.75 GB/s)")
    assert "NV6: 6 x 25 GB/s: >= 93 GB/s" in expected and "PCIe Gen4 x8: >= 9.77 GB/s" in expected
    low = sorted(k for k, v in d["unidirectional"].items() if v < floors[k][0])
    assert low == ["1-0", "2-1"]  # 90 < 93 on NVLink, 9 < 9.77 on PCIe
    assert judge.worst_ratio(d, [gpu(0), gpu(1), gpu(2, width=8, max_width=8)]) == round(9.0 / 15.75, 3)


def test_fake_link_trained_down_is_judged_against_what_it_supports(tmp_path):
    """A GPU running Gen1 x16 in a Gen4 x16 slot: its pair is judged against Gen4 x16."""
    t = threshold(RULE, tmp_path)
    floors, _ = judge.floors(t, doc({"0-1": 5.0}), [gpu(0, gen=1, max_gen=4), gpu(1)])
    assert floors["0-1"][0] == round(0.62 * 31.5, 2)


def test_fake_unreadable_pcie_link_gives_no_floor(tmp_path):
    t = threshold(RULE, tmp_path)
    bad = {"index": 1, "pcie": {"gen": None, "width": None}}
    floors, _ = judge.floors(t, doc({"0-1": 20.0}), [gpu(0), bad])
    assert floors["0-1"][0] is None and "GPU 1 PCIe link unreadable" in floors["0-1"][1]


def test_a_class_figure_is_the_floor_of_every_pair(tmp_path):
    t = threshold('criteria: {p2p_bandwidth: {min: 19.6, unit: GB/s, source: "a test"}}', tmp_path)
    floors, expected = judge.floors(t, doc({"0-1": 20.0, "1-0": 19.0}), [gpu(0), gpu(1)])
    assert floors == {"0-1": (19.6, ""), "1-0": (19.6, "")} and expected == ">= 19.6 GB/s"


def test_peer_access_off_is_named():
    assert judge.peer_access_off(doc({}, peer={"0-1": True, "1-0": False, "2-0": None})) == ["1-0"]


@pytest.mark.parametrize("body, err", [
    ("{min: 0.62, derived: nvlink, unit: x link rate, source: s, provisional: 'derived: r'}",
     "derived: expected one of link_rate"),
    ("{min: 19.6, derived: link_rate, unit: x link rate, source: s, provisional: 'derived: r'}",
     "derived: link_rate takes a fraction"),
    ("{min: 0.62, derived: link_rate, unit: GB/s, source: s, provisional: 'derived: r'}",
     "unit: derived: link_rate judges a fraction"),
])
def test_a_bad_link_rate_rule_names_file_and_key(tmp_path, body, err):
    with pytest.raises(InputError, match=f"criteria.p2p_bandwidth.*{err}"):
        threshold(f"criteria: {{p2p_bandwidth: {body}}}", tmp_path)
