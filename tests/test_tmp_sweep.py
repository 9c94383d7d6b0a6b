"""The run's temp dir and the sweep of dead runs' dirs are apart (signoff/fleet.py MKTEMP, SWEEP):
a host with hundreds of stale dirs (a /tmp of its own here, SIGNOFF_TMPDIR) runs its checks,
the sweep is bounded and says so, and the run's own dir is gone at the end."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_cli import LOCK_WAIT, ROOT

from signoff.fleet import SWEEP_MAX, HostSession, ProbeError
from signoff.inventory import LOCAL, Host
from signoff.results import load as load_results
from signoff.transport import LocalTransport

DEAD = 4_194_304 + 1  # above any pid_max: no process has it


def test_a_host_with_more_stale_dirs_than_the_sweep_lists_runs_its_checks(tmp_path):
    tmp = tmp_path / "tmp"
    for i in range(SWEEP_MAX + 50):  # dead runs' dirs, each with its dead keeper
        d = tmp / f"signoff.{i:08x}"
        d.mkdir(mode=0o700, parents=True)  # as mktemp makes it
        (d / ".keeper").write_text(f"{DEAD} 1\n")
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "--partial",
                        "-k", "version_parity or host_unique", "--report-dir", str(rd), "-p",
                        "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "SIGNOFF_TMPDIR": str(tmp)})
    doc = load_results(rd / "results.json")
    assert {r["status"] for r in doc["results"]} <= {"PASS", "N.A."}, p.stdout  # it ran its checks
    said = doc["leftovers"]["localhost"]
    assert len(said) == SWEEP_MAX + 1, said
    assert f"listing stopped (more than {SWEEP_MAX}); more are left" in said[-1]
    assert all(s.startswith(f"probe temp dir {tmp}/signoff.") for s in said[:-1])
    assert len(list(tmp.iterdir())) == SWEEP_MAX + 50  # its own dir removed, the dead runs' kept


def test_a_temp_dir_that_cannot_be_made_names_its_own_cause(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    rd = tmp_path / "report"
    subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "--partial",
                    "-k", "version_parity", "--report-dir", str(rd), "-p", "no:cacheprovider", *LOCK_WAIT],
                   cwd=ROOT, capture_output=True, text=True, timeout=300,
                   env={**os.environ, "SIGNOFF_TMPDIR": str(ro / "missing")})
    r = load_results(rd / "results.json")["results"][0]
    assert r["status"] == "ERROR" and "cannot create a temp dir in /tmp (exit 1): mktemp: " in r["message"], r
    assert "No such file or directory" in r["message"], r["message"]


def test_a_temp_dir_made_but_not_written_keeps_its_first_cause_and_is_removed(tmp_path, monkeypatch):
    """A full /tmp (a real tmpfs, filled): mktemp makes the dir (no data block) but the run's
    .keeper write fails. Every probe says that first cause, none runs from the half-made dir,
    and the cleanup removes it."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        subprocess.run(["dd", "if=/dev/zero", f"of={full}/fill", "bs=4k"], capture_output=True)
        monkeypatch.setenv("SIGNOFF_TMPDIR", str(full))
        s = HostSession(Host(name="localhost", address=LOCAL, python=sys.executable),
                        LocalTransport(Host(name="localhost", address=LOCAL)))
        why = r"cannot create a temp dir in /tmp \(exit 1\): .*error"
        with pytest.raises(ProbeError, match=why) as first:
            s.probe("sysinfo")
        made = list(full.glob("signoff.*"))
        assert len(made) == 1 and s.workdir == str(made[0])
        with pytest.raises(ProbeError) as again:
            s.probe("sysinfo")
        assert str(again.value) == str(first.value)  # not a confusing later cause
        s.cleanup()
        assert not list(full.glob("signoff.*"))
    finally:
        subprocess.run(["umount", str(full)])


def test_dead_runs_dirs_are_listed_newest_first(tmp_path, monkeypatch):
    """The terminal and the cover name a few leftovers: the run the user just lost (a killed
    job, Ctrl-C twice) first, not whichever name sorts first."""
    ages = {"signoff.aaaaaaaa": 300, "signoff.bbbbbbbb": 100, "signoff.cccccccc": 200}  # s old
    for name, age in ages.items():
        d = tmp_path / name
        d.mkdir(mode=0o700)
        (d / ".keeper").write_text(f"{DEAD} 1\n")
        os.utime(d, (d.stat().st_atime - age, d.stat().st_mtime - age))
    monkeypatch.setenv("SIGNOFF_TMPDIR", str(tmp_path))
    s = HostSession(Host(name="localhost", address=LOCAL, python=sys.executable),
                    LocalTransport(Host(name="localhost", address=LOCAL)))
    s.workdir = str(tmp_path / "signoff.ownownow")  # the run's own: none here
    said = s._sweep()
    assert [w.split()[3] for w in said] == [str(tmp_path / n) for n in sorted(ages, key=ages.get)], said


def test_a_session_without_a_lock_keeps_its_dir_from_other_runs_sweeps(tmp_path, monkeypatch):
    """A session that holds no run lock (`signoff plan`, a HostSession alone) has no keeper: its
    live dir is not a dead run's to another run's sweep, `signoff clean` or the suite's own
    cleanup (tests/conftest.py). Its .keeper once named "keeper" 0, never alive: the dir was
    removed under a running probe (torch's import said ENOENT; MKL "Cannot load libtorch_cpu.so")."""
    from signoff.clean import clean_host
    monkeypatch.setenv("SIGNOFF_TMPDIR", str(tmp_path))
    host = Host(name="localhost", address=LOCAL, python=sys.executable)
    s = HostSession(host, LocalTransport(host))
    try:
        s.probe_result("sysinfo", "--help")  # makes the run's dir, as any first probe
        mine = s.workdir
        other = HostSession(host, LocalTransport(host))
        other.workdir = str(tmp_path / "signoff.ownownow")  # another run's sweep, on this host
        assert not [w for w in other._sweep() if mine in w]
        lines, ok = clean_host(LocalTransport(host))
        assert os.path.isdir(mine) and not [w for w in lines if mine in w], lines
        keeper = (open(f"{mine}/.keeper").read().split() or [""])[0]
        assert not keeper.isdigit(), keeper  # the suite's own cleanup reads it so
    finally:
        s.cleanup()
