"""The suite's own tests that run acceptance/ against localhost share this machine's run lock
(signoff.fleet.KEEPER) with every other local run, e.g. other test processes on a shared CI
machine: their helpers wait for it (--lock-wait), never ERROR "in use by another signoff run"."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager

import test_cli
import test_gpu_faults_recorded
import test_gpu_in_use_recorded
import test_local_python

from signoff.fleet import Fleet
from signoff.inventory import local_inventory
from signoff.results import load as load_results

HOLD_S = 5


@contextmanager
def local_lock_held():
    """Another run holds localhost's lock for HOLD_S s from now, then releases it."""
    other = Fleet(local_inventory(sys.executable), lock_wait=300)
    other.facts("localhost")  # its lock is taken before its sysinfo runs
    release = threading.Timer(HOLD_S, other.close)
    release.start()
    t0 = time.monotonic()
    try:
        yield
    finally:
        release.join()
    assert time.monotonic() - t0 >= HOLD_S  # the run overlapped the other's lock


def refused(results: list[dict]) -> list[str]:
    return [r["message"] for r in results if "in use by another signoff run" in (r.get("message") or "")]


def test_cli_run_waits_for_the_local_lock(tmp_path):
    with local_lock_held():
        p = test_cli.run("-k", "version", "--partial", "--profile", "local", "--report-dir", str(tmp_path))
    res = load_results(tmp_path / "results.json")
    assert res["results"] and refused(res["results"]) == [], p.stdout


def test_local_python_run_waits_for_the_local_lock(tmp_path):
    with local_lock_held():
        p, res = test_local_python.accept_locally(tmp_path, "--python", sys.executable)
    assert res["results"] and refused(res["results"]) == [], p.stdout


def test_recorded_gpu_runs_wait_for_the_local_lock(tmp_path):
    with local_lock_held():
        res = test_gpu_faults_recorded.run(tmp_path, test_gpu_faults_recorded.faulty_h200(tmp_path))
    assert res and refused(list(res.values())) == []
    (tmp_path / "in_use").mkdir()
    with local_lock_held():  # its run is inline: the test itself must pass
        test_gpu_in_use_recorded.test_recorded_h200_with_another_process_on_gpu1_is_reported(
            tmp_path / "in_use")


def test_a_locked_host_under_profile_auto_names_the_lock_holder_in_every_check(tmp_path):
    """Another run holds this machine's lock: every check of a second run (--profile auto,
    --lock-wait 0) names that run, its owner and --lock-wait, not 'no host answered' alone."""
    other = Fleet(local_inventory(sys.executable), run="20261201T000000Z-other-1", lock_wait=300)
    other.facts("localhost")  # holds the lock until closed
    try:
        test_cli.run("-k", "version or gpu_count", "--partial", "--profile", "auto", "--lock-wait", "0",
                     "--report-dir", str(tmp_path))
    finally:
        other.close()
    msgs = [r["message"] for r in load_results(tmp_path / "results.json")["results"]]
    assert msgs and all("in use by another signoff run: run 20261201T000000Z-other-1 by " in m
                        and "--lock-wait waits for it" in m for m in msgs), msgs


def test_a_dead_runs_temp_dir_is_a_leftover_even_when_its_keepers_pid_is_reused():
    """Pids wrap on a busy host (pid_max 32768 here): a killed run's keeper pid may belong to
    another process by the next run. Its start time tells them apart."""
    import subprocess
    import tempfile
    from pathlib import Path

    from signoff.fleet import KEEPER_LINE, MKTEMP, SWEEP
    live = subprocess.Popen(["sleep", "60"])  # the process that now holds the dead keeper's pid
    start = Path(f"/proc/{live.pid}/stat").read_text().split()[21]
    reused = Path(tempfile.mkdtemp(prefix="signoff.", dir="/tmp"))
    alive = Path(tempfile.mkdtemp(prefix="signoff.", dir="/tmp"))
    out: list[str] = []
    try:
        (reused / ".keeper").write_text(f"{live.pid} {int(start) - 1}\n")  # another process's pid now
        (alive / ".keeper").write_text(f"{live.pid} {start}\n")  # its own keeper, alive
        made_by = MKTEMP.format(keeper=KEEPER_LINE.format(pid=live.pid))
        out = subprocess.run(["sh", "-c", made_by], capture_output=True, text=True,
                             timeout=30).stdout.splitlines()
        made = Path(out[0])
        assert (made / ".keeper").read_text().split() == [str(live.pid), start]
        swept = subprocess.run(["sh", "-c", SWEEP.format(own=made)], capture_output=True, text=True,
                               timeout=60).stdout.splitlines()
        said = {ln.split()[1] for ln in swept if ln.startswith("leftover ")}
        assert str(reused) in said and str(alive) not in said and str(made) not in said, out
    finally:
        live.kill()
        subprocess.run(["rm", "-rf", str(reused), str(alive), *out[:1]])


def race_for_a_stale_lock(root, n: int, dead_taker: bool = False) -> list[str]:
    """`n` runs take a stale run lock (its keeper dead) at the same moment: each run's KEEPER,
    its lock under `root` (not this machine's /tmp lock, which other local runs use), is held at
    a FIFO until all have started, then all are let go at once. What each said first: locked or
    busy (--lock-wait 0); the holder keeps the lock until the end, so a second `locked` is two
    runs holding it at once."""
    import os
    import subprocess

    from signoff.fleet import KEEPER, KEEPER_S
    lock = root / "signoff-lock.1"
    lock.mkdir()
    (lock / "owner").write_text("run 20261201T000000Z-dead-1 by a run that was killed\n")
    (lock / "pid").write_text("4194305 1\n")  # above any pid_max: its keeper is gone
    if dead_taker:  # a run that began to take it over was killed: its token is left
        (lock / "take").symlink_to("4194306 1")
    fifo = root / "go"
    os.mkfifo(fifo)
    go = os.open(fifo, os.O_RDWR)  # a reader's open never blocks; its read waits for a line
    procs = []
    try:
        for i in range(n):
            script = KEEPER.format(wait=0, owner=f"'run r{i} by test'", run=f"r{i}", keep=KEEPER_S)
            mine = script.replace(
                "L=$B/lock.$(tr -cd 0-9a-f- </proc/sys/kernel/random/boot_id).$(readlink /proc/self/ns/net "
                "| tr -cd 0-9)", f"B={root} L={lock}")
            assert mine != script
            procs.append(subprocess.Popen(["sh", "-c", f"echo ready; read _ <{fifo}\n{mine}"],
                                          stdout=subprocess.PIPE, text=True, start_new_session=True))
        assert [p.stdout.readline() for p in procs] == ["ready\n"] * n
        os.write(go, b"\n" * n)  # one line each (sh reads a pipe a byte at a time): all go at once
        assert [p.stdout.readline().split(" ")[:2] for p in procs] == [["keeper", str(p.pid)] for p in procs]
        return [p.stdout.readline().split(" ")[0] for p in procs]  # the holder's comes at once too
    finally:
        for p in procs:
            p.terminate()  # the holder's trap removes the lock
            p.wait(30)
        os.close(go)


def test_runs_racing_for_a_stale_lock_never_both_hold_it(tmp_path):
    """The takeover of a stale lock is atomic (KEEPER: only the run whose takeover token is
    in the stale lock removes it): 8 runs at once, 20 times, one holds it each time, also
    where a run killed while taking it over left its token. Before, two runs could both
    remove it and both make a new one (10 of 30 such races on a host)."""
    for trial in range(20):
        root = tmp_path / str(trial)
        root.mkdir()
        said = race_for_a_stale_lock(root, 8, dead_taker=trial % 2 == 1)
        assert sorted(said) == ["busy"] * 7 + ["locked"], (trial, said)
        assert not (root / "signoff-lock.1").exists()  # the holder, TERMed, removed it


def _victim():
    """A process the run must never signal, and its start time (/proc/<pid>/stat field 22)."""
    import subprocess
    from pathlib import Path
    p = subprocess.Popen(["sleep", "300"], start_new_session=True)
    return p, Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def _lives(p) -> bool:
    import subprocess
    try:
        p.wait(1)  # a signal sent by the cleanup's shell has landed by then
    except subprocess.TimeoutExpired:
        return True
    return False


def test_cleanup_terms_the_keepers_pid_only_while_it_is_the_keepers_process():
    """The cleanup TERMs the keeper by its pid only while that pid's start time is the one the
    keeper said in its first line: a pid that is another process's by then (the keeper gone, the
    pid reused) is not signalled. Before, `kill -TERM <pid>` signalled whatever held it."""
    from signoff.fleet import HostSession
    from signoff.inventory import LOCAL, Host
    from signoff.transport import LocalTransport
    host = Host(name="localhost", address=LOCAL, python=sys.executable)
    victim, start = _victim()
    try:
        s = HostSession(host, LocalTransport(host))
        s.keeper, s.keeper_start = str(victim.pid), str(int(start) - 1)  # the keeper's pid, reused
        s.cleanup()
        assert _lives(victim) and s.keeper is None
        s = HostSession(host, LocalTransport(host))
        s.keeper, s.keeper_start = str(victim.pid), start  # the keeper itself: TERMed
        s.cleanup()
        assert not _lives(victim) and victim.returncode == -15
    finally:
        victim.kill()
        victim.wait()


def test_a_lock_answer_not_of_the_keepers_own_pid_and_lock_path_is_refused_and_signals_nothing(monkeypatch):
    """Everything a host prints is untrusted: the lock is taken only from the keeper's first line
    (its pid and start time) and then `locked <that pid> <the lock's path>`. Another pid, another
    path, or the older answer without the first line ERRORs the host, and its cleanup signals
    nothing. Before, `locked <dir> <pid>` anywhere first made <pid> the keeper, TERMed at cleanup."""
    import pytest

    from signoff import fleet
    from signoff.inventory import LOCAL, Host
    from signoff.transport import LocalTransport
    host = Host(name="localhost", address=LOCAL, python=sys.executable)
    victim, _ = _victim()
    me = "echo keeper $$ $(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)"
    try:
        for answer in (f"echo locked /tmp/signoff-lock.1 {victim.pid}",  # the older keeper's answer
                       f"{me}; echo locked {victim.pid} /run/signoff/lock.0.1",
                       f"{me}; echo locked $$ /tmp/signoff-lock.1",
                       f"echo; {me}; echo locked $$ /run/signoff/lock.0.1"):  # the first line, or nothing
            monkeypatch.setattr(fleet, "KEEPER", answer)
            s = fleet.HostSession(host, LocalTransport(host))
            with pytest.raises(fleet.ProbeError, match="cannot take the run lock: its keeper answered "):
                s.take_lock("r", "run r by test", timeout=30)
            s.cleanup()
            assert _lives(victim), answer
        monkeypatch.setattr(fleet, "KEEPER", f"{me}; echo nolock /home/u/.signoff-lock; exit 3")
        why = "localhost: cannot take the run lock: /home/u/.signoff-lock is not a directory of this user's"
        with pytest.raises(fleet.ProbeError, match=why):
            fleet.HostSession(host, LocalTransport(host)).take_lock("r", "run r by test", timeout=30)
    finally:
        victim.kill()
        victim.wait()
