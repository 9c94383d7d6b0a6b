"""The run lock beside another local user, for real: a second unprivileged account of this machine
(tests/second_user.py) plants what it can in the /tmp that every lab host shares (names holding
line breaks that spell the lock keeper's answers, the lock names older versions used, links,
fifos, dead-run-shaped temp dirs naming root's processes), and root's runs on lab hosts take their
locks, measure, signal no process of its naming and say none of its words (issue 51 items 1, 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from lab import Lab
from second_user import as_user, run_as, second_user
from test_lab_acceptance import _lock_dir, _only, accept, by_key

from signoff import inventory
from signoff.fleet import Fleet

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=2) as lab:
        yield lab


@pytest.fixture
def victims():
    """Processes of root's that another user names: each must be alive after the run."""
    procs: list[subprocess.Popen] = []

    def make() -> tuple[int, str]:
        p = subprocess.Popen(["sleep", "600"], start_new_session=True)
        procs.append(p)
        return p.pid, Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    yield make
    assert [p.pid for p in procs if p.poll() is not None] == [], "a victim was signalled"
    for p in procs:
        p.kill()
        p.wait()


def ns_ino(lab, name: str) -> int:
    return os.stat(f"/run/netns/{lab.host(name).netns}").st_ino


def plant(pw, paths: list[str], script: str, *args: str) -> None:
    """Run `script` (sh, "$@" = args) as the other user; every path it makes is removed at the end."""
    run_as(pw, "sh", "-c", script, "sh", *args)
    for p in paths:
        assert os.lstat(p).st_uid == pw.pw_uid, p


def stat(path: str) -> tuple:
    st = os.lstat(path)
    return st.st_mode, st.st_ino, st.st_mtime_ns


def remove(paths: list[str]) -> None:
    subprocess.run(["rm", "-rf", "--", *paths], timeout=60)


def fleet_on(lab, tmp_path, name: str) -> Fleet:
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), [name])
    return Fleet(inventory.load(inv))


def test_a_tmp_name_that_spells_the_keepers_locked_answer_gets_no_process_signalled(lab, tmp_path, victims):
    """A directory of another user in /tmp whose name holds line breaks and the keeper's `locked`
    answer naming a root process (the older answer's shape and this one's): the run took that pid
    for its keeper's and SIGTERMed it at its cleanup. The run takes its own lock, and the process
    lives."""
    pw = second_user()
    pid, start = victims()
    base = f"/tmp/signoff-lock.{ns_ino(lab, 'lab1')}"
    # a name holds no '/': the lock dir the forged answer names is a word ("lock"), the pid is what counts
    names = [f"{base}.a\nlocked lock {pid}\n", f"{base}.b\nkeeper {pid} {start}\nlocked {pid} lock\n"]
    try:
        plant(pw, names, 'for d; do mkdir -m 755 -- "$d"; done', *names)
        f = fleet_on(lab, tmp_path, "lab1")
        try:
            assert f.facts("lab1")["python"]
            s = f.sessions["lab1"]
            assert s.lock_dir == str(_lock_dir(lab, "lab1")) and int(s.keeper) != pid, (s.lock_dir, s.keeper)
            assert Path(s.lock_dir).is_dir() and Path(s.lock_dir, "pid").read_text().split()[0] == s.keeper
        finally:
            f.close()
        assert not _lock_dir(lab, "lab1").exists()  # released: its keeper, not the victim, was TERMed
        assert f.notes == {} or "mallory" not in json.dumps(f.notes), f.notes
    finally:
        remove(names)


def test_a_tmp_name_that_spells_busy_does_not_error_the_run(lab, tmp_path):
    """A name spelling the keeper's `busy` answer ERRORed every check of the host, quoting the
    planter's words as the owner of a run. Now the run measures, and says none of it."""
    pw = second_user()
    base = f"/tmp/signoff-lock.{ns_ino(lab, 'lab1')}"
    names = [f"{base}.c\nbusy lock run 20991231T000000Z-forged-1 by mallory@elsewhere\n"]
    try:
        plant(pw, names, 'mkdir -m 755 -- "$1"', *names)
        f = fleet_on(lab, tmp_path, "lab1")
        try:
            assert f.facts("lab1")["python"]  # raised "in use by another signoff run: run 2099... by mallory"
        finally:
            f.close()
        assert "mallory" not in json.dumps(f.notes), f.notes
    finally:
        remove(names)


def test_every_lock_like_thing_another_user_plants_in_tmp_changes_nothing(lab, tmp_path, victims):
    """The same run on lab1 and lab2, without and then with what the other user planted in /tmp
    for both hosts: the lock names of every version (its own, root's; a dir with owner and pid
    files naming a root process, a link to root's lock, a fifo, a file), names whose line breaks
    spell every answer the keeper ever gave, and temp-dir-shaped dirs, a link and a fifo naming
    root's processes. Both runs PASS with the same checks, messages and notes; no root process is
    signalled, nothing planted is removed or changed, and no planted word is said anywhere."""
    pw = second_user()
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab1", "lab2"])
    run = ("acceptance/test_versions.py", "--inventory", str(inv), "--profile", "local")
    (tmp_path / "clean").mkdir()
    rc0, res0, out0 = accept(tmp_path / "clean", *run)
    assert rc0 == 0 and res0["verdict"] == "PASS", out0
    said = "run 20991231T000000Z-forged-1 by mallory@elsewhere since 2099-12-31T00:00:00Z"
    paths, script = [], ["set -e"]
    for n, host in enumerate(("lab1", "lab2")):
        pid, start = victims()
        base = f"/tmp/signoff-lock.{ns_ino(lab, host)}"
        lock = _lock_dir(lab, host)
        mine = f"{base}.{pw.pw_uid}"
        old_root = f"{base}.0"  # the name root's lock had before
        forged = [f"{base}.{w}\n{line}\n" for w, line in enumerate((  # no '/' in a name: "lock" for a path
            f"locked lock {pid}", f"keeper {pid} {start}\nlocked {pid} lock", f"shared lock {pid}",
            f"shared {pid}", f"busy lock {said}", f"busy {said}", "planted lock root",
            "nolock lock", f"foreign lock root\nlocked lock {pid}"))]
        tmpdir = f"/tmp/signoff.mallor{n}a"  # the shape of a run's temp dir, naming a root process
        link, fifo = f"/tmp/signoff.mallor{n}b", f"/tmp/signoff.mallor{n}c"
        paths += [base, old_root, mine, *forged, tmpdir, link, fifo]
        script += [f"mkfifo {base}" if n == 0 else f"echo {pid} > {base}",
                   f"mkdir -m 755 {old_root} && echo '{said}' > {old_root}/owner && "
                   f"echo {pid} {start} > {old_root}/pid" if n == 0 else f"ln -s {lock} {old_root}",
                   f"mkdir -m 700 {mine} && echo '{said}' > {mine}/owner && echo {pid} {start} > {mine}/pid",
                   *(f"mkdir -m 755 -- '{d}'" for d in forged),
                   f"mkdir -m 700 {tmpdir} && echo {pid} {start} > {tmpdir}/.keeper && "
                   f"echo {start} > {tmpdir}/.pid.{pid}",
                   f"ln -s /run/signoff {link}", f"mkfifo {fifo}"]
    try:
        plant(pw, paths, "\n".join(script))
        before = {p: stat(p) for p in paths}
        rc, res, out = accept(tmp_path, *run)
        assert rc == 0 and res["verdict"] == "PASS", out
        assert {k: (v["status"], v["message"]) for k, v in by_key(res).items()} == \
               {k: (v["status"], v["message"]) for k, v in by_key(res0).items()}
        for section in ("foreign_locks", "left_behind"):
            assert res.get(section) == res0.get(section), (section, res.get(section))
        assert "mallor" not in json.dumps(res.get("leftovers")), res.get("leftovers")
        rd = tmp_path / "report"
        for text in (out, json.dumps(res), *((rd / f).read_text() for f in ("report.html", "report.md",
                                                                             "junit.xml"))):
            assert "mallory" not in text and "forged" not in text and "in use by another" not in text
        assert {p: stat(p) for p in paths} == before  # nothing planted followed, changed or removed
        assert not [h for h in ("lab1", "lab2") if _lock_dir(lab, h).exists()]  # released
    finally:
        remove(paths)


def test_the_keeper_as_an_unprivileged_user_locks_in_its_own_places_and_leaves_nothing():
    """The keeper as the other user (a host's account that is not root): its lock is in its runtime
    dir (/run/user/<uid>) when that is its own, else in its home; nothing is left after it ends."""
    from signoff.fleet import KEEPER, KEEPER_S
    pw = second_user()
    top = Path(tempfile.mkdtemp(prefix="signoff-home-", dir="/tmp"))  # pytest's tmp_path is root's 0700
    top.chmod(0o755)
    home = top / "home"
    home.mkdir(mode=0o700)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    script = KEEPER.format(wait=0, owner="'run r by test'", run="r", keep=KEEPER_S)
    runtime = Path(f"/run/user/{pw.pw_uid}")
    made = not runtime.exists()
    try:
        for place in (home / ".signoff-lock", runtime / "signoff"):
            if place.parent == runtime:
                runtime.mkdir(mode=0o700, parents=True, exist_ok=True)  # as logind makes it at login
                os.chown(runtime, pw.pw_uid, pw.pw_gid)
            p = subprocess.Popen(as_user(pw, "sh", "-c", script, home=str(home)), stdout=subprocess.PIPE,
                                 text=True, start_new_session=True)
            try:
                keeper, locked = p.stdout.readline().split(), p.stdout.readline().split()
                assert keeper[:2] == ["keeper", str(p.pid)], keeper
                assert locked[:2] == ["locked", str(p.pid)], locked
                lock = Path(locked[2])
                assert lock.parent == place and lock.is_dir() and lock.stat().st_uid == pw.pw_uid, lock
                assert place.stat().st_mode & 0o777 == 0o700
            finally:
                p.terminate()
                p.wait(30)
            assert not place.exists(), "the keeper left its lock place behind"
    finally:
        remove([str(top), *([str(runtime)] if made else [])])


def test_the_keeper_takes_no_lock_in_a_place_not_its_users_alone():
    """The other user's keeper, where its lock's place is not its own alone: a home writable by
    others, a link (to /tmp) or another user's dir where the lock's dir would be. It says so
    (`nolock` and the place: the run ERRORs naming it), and makes nothing through the link."""
    from signoff.fleet import KEEPER, KEEPER_S
    pw = second_user()
    top = Path(tempfile.mkdtemp(prefix="signoff-home-", dir="/tmp"))
    top.chmod(0o755)
    home, target = top / "home", top / "target"
    target.mkdir(mode=0o777)
    script = KEEPER.format(wait=0, owner="'run r by test'", run="r", keep=KEEPER_S)
    try:
        for case in ("writable home", "link", "another user's"):
            remove([str(home)])
            home.mkdir(mode=0o700)
            os.chown(home, pw.pw_uid, pw.pw_gid)
            place = home / ".signoff-lock"
            if case == "writable home":
                home.chmod(0o777)
            elif case == "link":
                place.symlink_to(target)
                os.lchown(place, pw.pw_uid, pw.pw_gid)
            else:
                place.mkdir(mode=0o700)  # root's
            r = subprocess.run(as_user(pw, "sh", "-c", script, home=str(home)), capture_output=True,
                               text=True, timeout=60)
            said, bad = r.stdout.splitlines(), home if case == "writable home" else place
            assert said[0].startswith("keeper ") and said[1:] == [f"nolock {bad}"], (case, said, r.stderr)
            assert r.returncode == 3 and list(target.iterdir()) == [], case
    finally:
        remove([str(top)])
