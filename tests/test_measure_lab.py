"""Measure on every host at once (Fleet.measured), for real over SSH on 16 lab hosts: a
5 s probe on each finishes in about 5 s, not 80; a hung host costs its own timeout once,
in parallel; families never overlap; --max-parallel bounds the fan-out."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, _only, accept, by_key

from signoff import inventory
from signoff.fleet import Fleet, ProbeError

lab = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
N = 16


@pytest.fixture(scope="module")
def inv_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lab")
    with Lab(tmp, n_hosts=N) as lab:
        yield lab.write_inventory(tmp / "inv.yaml", python=sys.executable)


@pytest.fixture(scope="module")
def inv(inv_file):
    return inventory.load(inv_file)


@pytest.fixture(scope="module")
def fleet(inv):
    f = Fleet(inv)
    yield f
    f.close()


def command(fleet, seconds: dict, timeout: float):
    """A measure: `sleep` on the host for seconds[host] s; an overrun is a ProbeError."""
    def measure(name: str) -> str:
        r = fleet.sessions[name].run(f"sleep {seconds[name]}; echo done", timeout)
        if r.timed_out:
            raise ProbeError(f"{name}: sleep overran its {timeout:g} s timeout")
        return r.stdout.strip()
    return measure


def phase(fleet, family: str, measure, names: list[str]) -> dict:
    """What a run's checks do: each host's check asks for its own host's result, in turn."""
    out = {}
    for n in names:
        try:
            out[n] = fleet.measured(family, n, measure, names)
        except ProbeError as exc:
            out[n] = exc
    return out


@lab
def test_sixteen_sleeping_hosts_take_one_sleep(fleet):
    names = fleet.names
    lines = []
    fleet.progress = lambda line, final: lines.append((line, final))
    phase(fleet, "connect", command(fleet, dict.fromkeys(names, 0), 30), names)  # SSH handshakes
    t0 = time.monotonic()
    got = phase(fleet, "sleep", command(fleet, dict.fromkeys(names, 5), 30), names)
    took = time.monotonic() - t0
    fleet.progress = None
    assert got == dict.fromkeys(names, "done")
    print(f"16 hosts x sleep 5: {took:.1f} s")
    assert took < 30, f"16 x 5 s took {took:.1f} s: the hosts were measured one after another"
    lines = [x for x in lines if x[0].startswith("sleep")]
    assert lines[-1] == ("sleep: 16/16 hosts measured, 0 errors", True)
    assert [ln for ln, final in lines if final] == ["sleep: 16/16 hosts measured, 0 errors"]
    assert all(not final for _, final in lines[:-1]) and len(lines) > 1  # updated while waiting


@lab
def test_hung_host_costs_one_timeout_and_families_never_overlap(fleet):
    names = fleet.names[:8]
    seconds = {**dict.fromkeys(names, 2), "lab3": 600}  # lab3's probe hangs
    lines = []
    fleet.progress = lambda line, final: lines.append((line, final))
    t0 = time.monotonic()
    first = fleet.measured("hang", "lab1", command(fleet, seconds, 6), names)
    # the next family waits for the first to end everywhere (lab3's kill), then runs
    after = phase(fleet, "after", command(fleet, dict.fromkeys(names, 0), 30), names)
    took = time.monotonic() - t0
    got = phase(fleet, "hang", None, names)  # all measured already: no second timeout
    fleet.progress = None
    assert first == "done" and after == dict.fromkeys(names, "done")
    assert isinstance(got["lab3"], ProbeError) and "lab3: sleep overran its 6 s timeout" in str(got["lab3"])
    assert all(got[n] == "done" for n in names if n != "lab3")
    # serial: 7 x 2 s + 6 s; in parallel one timeout (+ its kill) and the short second family
    assert took < 14, f"took {took:.1f} s: a hung host cost more than its own timeout"
    assert time.monotonic() - t0 - took < 1
    hang_end = max(end for _, end in fleet.windows["hang"].values())
    assert min(start for start, _ in fleet.windows["after"].values()) >= hang_end
    assert ("hang: 8/8 hosts measured, 1 error", True) in lines


@lab
def test_max_parallel_bounds_the_fan_out(inv):
    fleet = Fleet(inv, max_parallel=2)
    names = fleet.names[:6]
    try:
        phase(fleet, "bounded", command(fleet, dict.fromkeys(names, 1), 30), names)
    finally:
        fleet.close()
    w = sorted(fleet.windows["bounded"].values())
    most = max(sum(s <= t < e for s, e in w) for t, _ in w)  # hosts running at each start
    assert most == 2, w


@lab
def test_acceptance_run_measures_the_allreduce_on_every_host_at_once(inv_file, tmp_path):
    hosts = ["lab1", "lab2", "lab3", "lab4"]
    # one 1 MiB size, and a floor any CPU meets: the lab's hosts share this machine's 2 cores,
    # so four all-reduces at once each get a quarter of them (real hosts have their own GPUs)
    prof = tmp_path / "small.yaml"
    prof.write_text("extends: local\ncriteria:\n  allreduce_busbw: {min: 0.001, unit: GB/s, size: 1M, "
                    "sweep: [1M, 1M], source: 'test: any CPU; the overlap is what is judged'}\n")
    rc, res, out = accept(tmp_path, "-k", "allreduce_busbw or version_parity", "--inventory",
                          str(_only(inv_file, hosts)), "--profile", str(prof))
    assert rc == 0, out
    w = {h: by_key(res)[("allreduce_busbw", h)]["details"]["measured_utc"] for h in hosts}
    assert max(s for s, _ in w.values()) < min(e for _, e in w.values()), \
        f"the all-reduce probes did not all run at one moment: {w}"
    assert "interconnect: 4/4 hosts measured, 0 errors" in out


@pytest.mark.parametrize("args, says", [
    (["-n", "2"], "-n 2: pytest-xdist is not supported for acceptance runs"),
    (["--dist", "load"], "--dist load: pytest-xdist is not supported for acceptance runs"),
    (["--max-parallel", "0"], "--max-parallel 0: expected hosts > 0"),
])
def test_xdist_and_bad_max_parallel_are_refused_before_any_host(args, says, tmp_path):
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "--report-dir", str(tmp_path),
                        "--hosts", "node1", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 4 and says in p.stderr, p.stdout + p.stderr
    assert not (tmp_path / "results.json").exists()
