"""train_scaling_nodes' step_bound rule (issue 45 item 6): its t_ar comes from the multi-node
all-reduce's threshold, not from the run's own all-reduce, which a slowed network slows too: a
slowed all-reduce once lowered the bound with it, and the step PASSed."""

from __future__ import annotations

import pytest

from signoff.training import judge


def rows(busbw: float) -> list[dict]:
    """A 3-host all-reduce's sweep at `busbw` GB/s: time = bytes x 2(n-1)/n / busbw."""
    return [{"bytes": b, "busbw": busbw, "time_us": b * 4 / 3 / (busbw * 1e9) * 1e6}
            for b in (1 << 20, 32 << 20)]


def test_the_bound_is_the_thresholds_whatever_the_run_measured():
    healthy, slowed = rows(0.12), rows(0.03)  # a host's link slowed to a quarter
    floor = 0.1125  # 0.9 x the lowest node's 0.125 GB/s
    got = [judge.step_bound(0.2, 1_000_000, r, floor) for r in (healthy, slowed)]
    assert got[0][:2] == pytest.approx(got[1][:2]), got  # the same bound, from the floor alone
    t_ar = (32 << 20) * 4 / 3 / (floor * 1e9)  # 4 MB of gradients: the sweep's 32 MiB at the floor
    assert got[0][1] == pytest.approx(t_ar) and got[0][0] == round(0.2 / (0.2 + t_ar), 4)
    assert "at its threshold's 0.1125 GB/s busbw" in got[0][2], got[0][2]
    # the run's own figure would have lowered the bound of the slowed run: what PASSed it
    assert judge.step_bound(0.2, 1_000_000, slowed)[0] < got[1][0]
