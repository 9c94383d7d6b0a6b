"""The retry policy (signoff/retry.py) on host pairs: which pairs are measured again, in which
disjoint rounds, and which attempt is judged; errors are never measured again."""

from __future__ import annotations

import pytest

from signoff import InputError, profiles
from signoff.fleet import ProbeError
from signoff.network.judge import again_rounds, judged
from signoff.profiles import Threshold
from signoff.transport import HostUnreachable


def t(unit="Gb/s", value=3, **extra):
    return Threshold("net_pair_bandwidth", "min", value, unit, "test", "p", extra)


def run(gbps, fraction=None):
    return {"gbps": gbps, "fraction": fraction}


def test_a_pass_is_measured_once_and_the_misses_again_in_disjoint_rounds():
    ab, bc, cd, da = ("a", "b"), ("b", "c"), ("c", "d"), ("d", "a")
    first = {ab: [run(9)], bc: [run(2.9)], cd: [run(2.8)], da: [run(8)]}
    assert again_rounds(first, t()) == [[bc], [cd]]  # b-c and c-d share c: one at a time
    assert judged(first[ab], t()) is first[ab][0] and "attempts" not in judged(first[ab], t())
    first = {ab: [run(2.9)], bc: [run(9)], cd: [run(2.8)], da: [run(8)]}
    assert again_rounds(first, t()) == [[ab, cd]]  # no host in common: at once


def test_a_miss_stops_at_its_pass_or_its_attempts_the_best_judged_every_figure_kept():
    assert again_rounds({("a", "b"): [run(2.9), run(3.1)]}, t()) == []  # passed on the 2nd
    assert judged([run(2.9), run(3.1)], t()) == {**run(3.1), "attempts": [2.9, 3.1], "spread_pct": 6.5,
                                                 "retry": ["attempt 2 of 3: attempt 1 read 2.9 Gb/s, within "
                                                           "3.3 % of the floor 3 Gb/s"]}
    assert again_rounds({("a", "b"): [run(2.9), run(2.8)]}, t()) == [[("a", "b")]]  # 3 by default
    assert again_rounds({("a", "b"): [run(2.9), run(2.8)]}, t(attempts=2)) == []
    assert judged([run(2.8), run(2.9)], t(attempts=2))["attempts"] == [2.8, 2.9]
    assert judged([run(2.9)], t(attempts=1))["gbps"] == 2.9
    assert judged([run(2.9)], t()) is None  # not judged while it wants another attempt


def test_a_pair_far_below_its_floor_is_measured_once_saying_why():
    """Issue 51 item 16: the slow link's pair at 0.098 of line rate, against >= 0.9: no attempt
    that agrees with it could pass; judged now, not after two more rounds."""
    slow = {("a", "b"): [run(0.98, fraction=0.098)]}
    assert again_rounds(slow, t("x line rate", 0.9)) == []
    got = judged(slow[("a", "b")], t("x line rate", 0.9))
    assert got["retry"] == ["not measured again: attempt 1 read 0.098 x line rate, 89.1 % below the floor "
                            "0.9 x line rate, beyond max_spread 10 %: no attempt that agrees with it "
                            "could pass"]


def test_x_line_rate_is_judged_on_the_fraction_not_the_gbps():
    miss = {("a", "b"): [run(90, fraction=0.9)]}
    assert again_rounds(miss, t("x line rate", 0.95)) == [[("a", "b")]]  # within 5.3 %: noise
    got = judged([run(90, 0.9), run(97, 0.97)], t("x line rate", 0.95))
    assert got["attempts"] == [0.9, 0.97] and got["gbps"] == 97
    unknown = run(90)  # no line rate: no fraction to judge, not noise (the check ERRORs)
    assert again_rounds({("a", "b"): [unknown]}, t("x line rate", 0.95)) == []
    assert judged([unknown], t("x line rate", 0.95)) is unknown


def test_an_error_is_never_measured_again_and_ends_a_pairs_attempts():
    dead = HostUnreachable("b", "connection refused")
    broke = ProbeError("a->b: iperf3: connection reset")
    tries = {("a", "b"): [dead], ("c", "d"): [run(2.9), broke]}
    assert again_rounds(tries, t()) == []
    assert judged(tries[("a", "b")], t()) is dead and judged(tries[("c", "d")], t()) is broke


def test_attempts_allowed_on_the_network_criteria_and_bounded(tmp_path):
    p = tmp_path / "p.yaml"
    for name in ("net_pair_bandwidth", "multinode_allreduce_busbw"):
        size = "size: 1M, sweep: [1M, 1M], " if name.startswith("multi") else ""
        p.write_text(f"extends: local\ncriteria:\n  {name}: {{min: 3, unit: Gb/s, {size}attempts: 2, "
                     "source: 'test'}\n")
        assert profiles.load(str(p)).threshold(name).extra["attempts"] == 2
        p.write_text(p.read_text().replace("attempts: 2", "attempts: 0"))
        with pytest.raises(InputError, match=rf"criteria.{name}.attempts: 0: expected 1-5"):
            profiles.load(str(p))
