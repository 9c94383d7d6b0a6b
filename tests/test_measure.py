"""Fleet.measured without SSH (tests/test_measure_lab.py runs it on lab hosts): each host's
error is its own, measured once; families never overlap; the progress line."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from signoff import inventory
from signoff.fleet import Fleet, ProbeError

NAMES = [f"n{i}" for i in range(1, 17)]


@pytest.fixture
def fleet():
    f = Fleet(inventory.local_inventory())
    yield f
    f.close()


def test_errors_stay_with_their_host_and_nothing_is_measured_twice(fleet):
    calls = Counter()
    lines = []
    fleet.progress = lambda line, final: lines.append((line, final))

    together = threading.Barrier(len(NAMES), timeout=120)  # all 16 at once, or it breaks

    def measure(name):
        calls[name] += 1
        if name in NAMES:
            together.wait()  # proof of the overlap that needs no clock: one after another breaks it
        if name == "n3":
            raise ProbeError("n3: probe failed")
        return name.upper()

    got = {}
    for n in NAMES + NAMES:  # two checks per host
        try:
            got[n] = fleet.measured("fam", n, measure, NAMES)
        except ProbeError as exc:
            got[n] = str(exc)
    assert not together.broken
    assert got == {**{n: n.upper() for n in NAMES}, "n3": "n3: probe failed"}
    assert set(calls.values()) == {1} and len(calls) == 16
    assert [x for x in lines if x[1]] == [("fam: 16/16 hosts measured, 1 error", True)]
    # a host without a selected check of the family is measured on demand, alone
    assert fleet.measured("fam", "extra", measure, NAMES) == "EXTRA" and calls["extra"] == 1


def test_a_family_starts_when_the_one_before_has_ended_on_every_host(fleet):
    running = set()
    overlap = []
    lock = threading.Lock()

    def measure(family, seconds):
        def one(name):
            with lock:
                overlap.extend((family, other) for other in running if other != family)
                running.add(family)
            time.sleep(seconds(name))
            with lock:
                running.discard(family)
            return name
        return one

    # n1's check returns first; n16 is still measuring when family B is asked for
    assert fleet.measured("A", "n1", measure("A", lambda n: 1.5 if n == "n16" else 0.1), NAMES) == "n1"
    assert fleet.measured("B", "n1", measure("B", lambda n: 0.1), NAMES) == "n1"
    assert overlap == []
    a_end = max(e for _, e in fleet.windows["A"].values())
    assert min(s for s, _ in fleet.windows["B"].values()) >= a_end


def test_settle_waits_for_the_running_family(fleet):
    fleet.measured("A", "n1", lambda n: time.sleep(1 if n == "n2" else 0), ["n1", "n2"])
    fleet.settle()
    assert all(f.done() for f in fleet._families["A"].values())


def test_a_family_waits_for_a_soak_no_check_waited_for(fleet):
    """The soak starts at the first soak check; if that check ERRORs before waiting for it (a
    missing threshold), the next family must still not measure beside the load."""
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(1)
    soak_end = []
    fleet.register("soak", {"n1": pool.submit(lambda: (time.sleep(1.0), soak_end.append(time.monotonic())))})
    started = []
    fleet.measured("interconnect", "n1", lambda n: started.append(time.monotonic()), ["n1"])
    pool.shutdown()
    assert soak_end and started[0] >= soak_end[0]  # after the soak, never beside it


def test_a_family_of_no_host_says_no_progress_line(fleet):
    """A soak on CPU-only hosts starts on none: `make accept` here printed "soak: 0/0 hosts
    measured, 0 errors" among the interconnect's checks."""
    lines = []
    fleet.progress = lambda line, final: lines.append(line)
    fleet.register("soak", {})
    fleet.measured("interconnect", "n1", lambda n: n, ["n1"])
    fleet.settle()
    assert lines == ["interconnect: 1/1 hosts measured, 0 errors"]
