"""The retry policy for noisy bandwidth (signoff/interconnect/run.py best_of): a miss is
measured again up to `attempts` in all, every attempt kept, the best judged; a pass is never
measured again, and a wrong sum in any attempt stays wrong."""

from __future__ import annotations

import pytest

from signoff import InputError, profiles, retry
from signoff.fleet import ProbeError
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


class Recorded:
    """A host view whose probes return recorded documents (the 1x H200 anchors' shapes; no GPU
    here): the first from the cache, each later one measured again."""

    def __init__(self, docs: list[dict], gpus: int):
        self.docs, self.gpus, self.asked = list(docs), [{"index": i} for i in range(gpus)], 0

    def cached_probe(self, name, *args, **kw):
        return self.probe(name)

    def probe(self, name, *args, **kw):
        self.asked += 1
        return self.docs.pop(0)

    def __str__(self):
        return "n1"


def profile_with(tmp_path, criteria: str):
    p = tmp_path / "p.yaml"
    p.write_text(f"extends: local\ncriteria:\n{criteria}")
    return profiles.load(str(p))


def p2p(slowest: float) -> dict:
    return {"gpus": 2, "unidirectional": {"0-1": slowest, "1-0": slowest + 10}, "bidirectional": {}}


def test_p2p_is_measured_again_after_its_slowest_pair_misses(tmp_path):
    from signoff.interconnect.run import p2p_doc
    prof = profile_with(tmp_path, "  p2p_bandwidth: {min: 300, unit: GB/s, attempts: 3, source: 'test'}\n")
    host = Recorded([p2p(250), p2p(310), p2p(999)], gpus=2)
    got = p2p_doc(host, host.gpus, prof)
    assert host.asked == 2 and got["attempts"] == [250, 310] and got["unidirectional"]["0-1"] == 310
    host = Recorded([p2p(320)], gpus=2)
    assert "attempts" not in p2p_doc(host, host.gpus, prof) and host.asked == 1


def step(tflops: float, losses: list[float], equal: bool = True) -> dict:
    return {"local_ranks": 2, "widths": [
        {"ranks": n, "tflops_per_gpu": tflops, "losses": losses, "replicas_equal": equal}
        for n in (1, 2)]}


def test_training_step_retried_for_throughput_never_for_its_loss_or_replicas(tmp_path):
    """The faster second attempt is judged for TFLOP/s, but the first attempt's non-finite loss
    and unequal replicas stay: learning is not measured again into a pass."""
    from signoff.training.run import train_doc
    prof = profile_with(tmp_path, "  train_throughput: {min: 400, unit: TFLOP/s, attempts: 2, "
                                  "source: 'test'}\n")
    host = Recorded([step(380, [5.0, float("nan")], equal=False), step(430, [5.0, 1.0])], gpus=2)
    got = train_doc(host, prof)
    assert got["attempts"] == [380, 430] and got["spread_pct"] == round(100 * 50 / 430, 1)
    w = got["widths"][0]
    assert w["tflops_per_gpu"] == 430 and w["replicas_equal"] is False and w["losses"][1] != w["losses"][1]
    assert retry.said(got, "TFLOP/s") == ", best of 2 attempts (380, 430 TFLOP/s; spread 11.6 %)"


def test_host_link_retried_after_its_slowest_copy_misses(tmp_path):
    from signoff.training.run import hostlink_doc
    prof = profile_with(tmp_path, "  host_link_bandwidth: {min: 50, unit: GB/s, attempts: 2, "
                                  "source: 'test'}\n")
    link = [{"process_cpus": "0-15", "gpus": [{"index": 0, "h2d_pinned": v, "d2h_pinned": 55.2}]}
            for v in (40.1, 45.3)]
    host = Recorded(link, gpus=1)
    got = hostlink_doc(host, prof)
    assert host.asked == 2 and got["attempts"] == [40.1, 45.3] and got["gpus"][0]["h2d_pinned"] == 45.3


def test_only_retried_criteria_take_attempts(tmp_path):
    with pytest.raises(InputError, match=r"criteria.train_loss_falls.attempts: unknown key"):
        profile_with(tmp_path, "  train_loss_falls: {max: 0.9, unit: x, attempts: 2, source: 'test'}\n")
    assert retry.spread_pct([None, None]) is None and retry.said({"attempts": [None, 0]}, "GB/s") == \
        ", best of 2 attempts (none, 0 GB/s)"
    # each attempt rounded as the report rounds the judged figure (units.figure), not as %g
    assert retry.said({"attempts": [451.658521, 103674.2], "spread_pct": 99.6}, "GB/s") == \
        ", best of 2 attempts (451.7, 103674 GB/s; spread 99.6 %)"


def read(gbps: float, defeated: bool = True) -> dict:
    return {"gbps": gbps, "cache": {"defeated": defeated}}


def test_a_storage_attempt_that_breaks_or_hits_the_page_cache_is_the_result_never_outvoted(tmp_path):
    """A reread that raised, or read through the page cache, ends the host's attempts and is
    judged as it is (ERROR), never replaced by a later attempt's figure."""
    from signoff.storage.run import StorageRun
    run = object.__new__(StorageRun)  # only the retry loop: no hosts (recorded reads)
    run.profile = profile_with(tmp_path, "  storage_read_seq: {min: 2, unit: GB/s, attempts: 3, "
                                         "source: 'test'}\n")
    later = {"a": iter([ProbeError("a: read failed"), read(2.5)]), "b": iter([read(50, defeated=False),
                                                                         read(2.5)]),
             "c": iter([read(1.5), read(2.2)]), "d": iter([])}
    got = run._again({"a": read(1.0), "b": read(1.0), "c": read(1.0), "d": read(3.0)},
                     lambda hs: {h: next(later[h]) for h in hs}, "seq")
    assert isinstance(got["a"], ProbeError) and next(later["a"])["gbps"] == 2.5  # not read again
    assert got["b"]["cache"]["defeated"] is False and got["b"]["attempts"] == [1.0, None]
    assert got["c"]["gbps"] == 2.2 and got["c"]["attempts"] == [1.0, 1.5, 2.2]
    assert got["d"] == read(3.0)  # passed: read once


def test_a_transport_fallback_in_any_all_reduce_attempt_stays(tmp_path):
    def attempt(busbw, transports):
        return {**sweep(busbw), "transports": transports}
    later = iter([attempt(11, {"P2P/CUMEM": [[0, 1]]})])
    first = attempt(5, {"SHM": [[0, 1]], "P2P/CUMEM": [[1, 0]]})
    got = best_of(first, lambda: next(later), threshold(tmp_path))
    assert got["transports"] == {"SHM": [(0, 1)], "P2P/CUMEM": [(0, 1), (1, 0)]}


def test_attempts_that_disagree_fail_as_unstable_naming_each_even_when_the_best_passes(tmp_path):
    """The review's case: 90 / 150 / 470 GB/s against >= 431: the best clears it, the part
    does not give the same figure twice (spread 80.9 %): FAIL, never best-of-3 PASS."""
    from types import SimpleNamespace

    from signoff.check import Check
    p = tmp_path / "p.yaml"
    p.write_text("extends: local\ncriteria:\n  allreduce_busbw: {min: 431, unit: GB/s, size: 1M, "
                 "sweep: [1M, 2M], source: 'test'}\n")
    t = profiles.load(str(p)).threshold("allreduce_busbw")
    c = Check(SimpleNamespace(user_properties=[]), "node7")
    flaky = {"attempts": [90, 150, 470], "spread_pct": retry.spread_pct([90, 150, 470])}
    with pytest.raises(pytest.fail.Exception) as exc:
        c.expect(470, t, "all-reduce busbw", details=flaky)
    assert str(exc.value).startswith("node7: all-reduce busbw = 470 GB/s, unstable: 3 attempts gave 90, "
                                     "150, 470 GB/s, a spread of 80.9 % > max_spread 10 % (p)"), exc.value
    c.expect(440, t, details={"attempts": [425, 440], "spread_pct": 3.4})  # they agree: PASS
    loose = tmp_path / "loose.yaml"
    loose.write_text(f"extends: {p}\ncriteria:\n  allreduce_busbw: {{min: 431, unit: GB/s, size: 1M, "
                     "sweep: [1M, 2M], max_spread: 90%, source: 'test'}\n")
    c.expect(470, profiles.load(str(loose)).threshold("allreduce_busbw"), details=flaky)  # its own key


@pytest.mark.parametrize("value", ["0%", "x", "100%"])
def test_max_spread_outside_0_to_100_percent_is_refused(tmp_path, value):
    with pytest.raises(InputError, match=r"criteria.allreduce_busbw.max_spread: "):
        threshold(tmp_path, f"max_spread: '{value}', ")


def test_an_attempt_that_breaks_keeps_the_figures_measured_before_it(tmp_path):
    """The broken attempt is the result (ERROR), and the attempts before it stay in its details."""
    from signoff.network.judge import judged
    from signoff.training.run import train_doc
    prof = profile_with(tmp_path, "  train_throughput: {min: 400, unit: TFLOP/s, attempts: 3, "
                                  "source: 'test'}\n")

    class Breaks(Recorded):
        def probe(self, name, *args, **kw):
            if self.asked:
                raise ProbeError("n1: training probe failed (exit 137): killed")
            return super().probe(name)
    host = Breaks([step(380, [5.0, 1.0])], gpus=2)
    with pytest.raises(ProbeError) as exc:
        train_doc(host, prof)
    assert exc.value.attempts == [380, None]
    net = profile_with(tmp_path, "  net_pair_bandwidth: {min: 10, unit: Gb/s, source: 'test'}\n")
    got = judged([{"gbps": 4.0}, ProbeError("a->b: iperf3 exit 1")], net.threshold("net_pair_bandwidth"))
    assert isinstance(got, ProbeError) and got.attempts == [4.0, None]
