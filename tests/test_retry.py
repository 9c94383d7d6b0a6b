"""The retry policy for noisy bandwidth (signoff/interconnect/run.py best_of): a miss is
measured again up to `attempts` in all, every attempt kept, the best judged; a pass is never
measured again, and a wrong sum in any attempt stays wrong."""

from __future__ import annotations

import pytest

from signoff import InputError, profiles
from signoff.interconnect.run import best_of

M = 1 << 20


def sweep(busbw: float, correct: bool = True) -> dict:
    return {"rows": [{"bytes": M, "busbw": busbw, "algbw": busbw, "correct": correct},
                     {"bytes": 2 * M, "busbw": busbw, "algbw": busbw, "correct": True}]}


def threshold(tmp_path, extra: str = ""):
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\ncriteria:\n  allreduce_busbw: {min: 10, unit: GB/s, size: 1M, "
                 f"sweep: [1M, 2M], {extra}source: 'test'}}\n")
    return profiles.load(str(p)).threshold("allreduce_busbw")


def test_a_pass_is_not_measured_again(tmp_path):
    again = iter(())  # any further sweep would raise StopIteration
    doc = sweep(12)
    assert best_of(doc, lambda: next(again), threshold(tmp_path)) is doc


def test_a_miss_is_measured_again_until_it_passes_keeping_every_attempt(tmp_path):
    later = iter([sweep(9), sweep(11), sweep(50)])
    got = best_of(sweep(8), lambda: next(later), threshold(tmp_path))
    assert got["attempts"] == [8, 9, 11] and got["rows"][0]["busbw"] == 11  # stopped at the pass
    assert got["spread_pct"] == round(100 * 3 / 11, 1)


def test_attempts_are_bounded_by_the_profile_and_a_wrong_sum_stays_wrong(tmp_path):
    later = iter([sweep(30, correct=True), sweep(1)])
    got = best_of(sweep(5, correct=False), lambda: next(later), threshold(tmp_path, "attempts: 2, "))
    assert got["attempts"] == [5, 30] and got["rows"][0]["busbw"] == 30
    assert got["rows"][0]["correct"] is False and got["rows"][1]["correct"] is True
    one = best_of(sweep(5), lambda: pytest.fail("measured again"), threshold(tmp_path, "attempts: 1, "))
    assert "attempts" not in one
    with pytest.raises(InputError, match=r"criteria.allreduce_busbw.attempts: 9: expected 1-5"):
        threshold(tmp_path, "attempts: 9, ")
