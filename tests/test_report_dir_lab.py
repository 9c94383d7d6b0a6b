"""A second local user and a shared report dir (issue 51 item 3), for real: signoff-mallory, an
unprivileged account of this machine (tests/second_user.py), plants with its own rights what it
can (links to files of root's, directories of its own) in a report dir it made under /tmp, in
one of ours it can write to, and as a link at the name of a report dir. Each run as root
refuses the dir, naming it and why, or writes only files it made fresh; the files the links
point at are untouched. The run is dcgm_diag on a lab host (a real sshd host in a network
namespace, tests/lab.py) with the stand-in dcgmi and a fake NVML (tests/test_dcgm_lab.py: no
GPU, no DCGM here), so it writes dcgm/<host>.json as well as every other file of a run."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import dcgm_fake
import pytest
from lab import Lab
from second_user import run_as, second_user
from test_dcgm_lab import FAKE_PYNVML, STAND_IN, serials

from signoff import plugin, safefile

ROOT = Path(__file__).resolve().parent.parent
VICTIMS = ("results.json", "results.jsonl", "report.md", "report.html", "junit.xml", "drain.sh",
           "lab1.json")

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py


@pytest.fixture(scope="module")
def mallory():
    return second_user()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One lab host whose dcgm_diag passes: (the run's arguments, the lab)."""
    tmp = tmp_path_factory.mktemp("rdlab")
    (tmp / "fakenvml").mkdir()
    (tmp / "fakenvml" / "pynvml.py").write_text(FAKE_PYNVML)
    with Lab(tmp / "lab", n_hosts=1) as lab:
        h = lab.hosts[0].name
        env = {"PYTHONPATH": str(tmp / "fakenvml"), "PATH": f"{STAND_IN}{os.pathsep}{os.environ['PATH']}",
               "SIGNOFF_FAKE_SERIALS": json.dumps(serials(h)),
               "SIGNOFF_FAKE_DCGMI": json.dumps(dcgm_fake.cases(serials(h))["pass"])}
        inv = lab.write_inventory(tmp / "inv.yaml", python=sys.executable, overrides={h: {"env": env}})
        prof = tmp / "dcgm.yaml"
        prof.write_text("extends: local\ncriteria:\n  dcgm_diag: {optional: false, timeout: 30}\n")
        yield ("acceptance/test_dcgm.py", "--inventory", str(inv), "--profile", str(prof), "--partial"), h


def signoff(args, rd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider",
                           "--report-dir", str(rd)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture
def ours():
    """A directory of root's that everyone can read (mallory reaches what is in it) holding the
    victims: root's files that mallory's links point at, and a directory of them."""
    top = Path(tempfile.mkdtemp(prefix="signoff-ours-"))
    top.chmod(0o755)
    (top / "victim").mkdir()
    for name in VICTIMS:
        (top / "victim" / name).write_text(f"root's {name}\n")
    yield top
    shutil.rmtree(top)


def victims_untouched(top: Path) -> None:
    d = top / "victim"
    assert sorted(os.listdir(d)) == sorted(VICTIMS)  # nothing added beside them (hosts/ -> here)
    for name in VICTIMS:
        assert (d / name).read_text() == f"root's {name}\n", name


def plant(pw, rd: Path, victim: Path, host: str) -> None:
    """What mallory plants in a report dir it can write to: links at the run's names (a raw dir of
    its own holding links too), all pointing at root's files."""
    script = (f"set -e; cd {rd}; mkdir dcgm; ln -s {victim}/lab1.json dcgm/{host}.json; chmod 0777 dcgm; "
              f"ln -s {victim} hosts; ln -s {victim} soak; "
              + "".join(f"ln -s {victim}/{n} {n}; " for n in VICTIMS if n != "lab1.json"))
    run_as(pw, "sh", "-c", script)


def refused(p: subprocess.CompletedProcess, rd: Path, why: str) -> None:
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    line = next(ln for ln in p.stderr.splitlines() if "--report-dir" in ln)
    assert f"--report-dir {rd}: refused: {why}" in line, p.stderr


def test_a_report_dir_another_user_made_under_tmp_is_refused(lab, mallory, ours):
    args, host = lab
    made = run_as(mallory, "mktemp", "-d", "/tmp/signoff-shared-XXXXXX").stdout.strip()
    rd = Path(made)
    try:
        run_as(mallory, "chmod", "0755", str(rd))  # mallory's alone, writable by no one else
        plant(mallory, rd, ours / "victim", host)
        before = sorted(os.listdir(rd))
        refused(signoff(args, rd), rd, f"{rd} is owned by {safefile.user(mallory.pw_uid)}, not by "
                                       f"{safefile.user(0)} who runs signoff")
        # a report dir to be made inside it: refused too, and not made
        refused(signoff(args, rd / "run1"), rd / "run1", f"{rd} is owned by {safefile.user(mallory.pw_uid)}")
        assert sorted(os.listdir(rd)) == before and not (rd / "run1").exists()
        # a link mallory put in /tmp at the name of a report dir, leading to a directory of ours
        link = Path(run_as(mallory, "mktemp", "-u", "/tmp/signoff-link-XXXXXX").stdout.strip())
        run_as(mallory, "ln", "-s", str(ours), str(link))
        try:
            refused(signoff(args, link), link, f"{link} is owned by {safefile.user(mallory.pw_uid)}")
        finally:
            link.unlink()
        victims_untouched(ours)
        assert sorted(os.listdir(ours)) == ["victim"]
    finally:
        shutil.rmtree(rd)


def test_a_shared_report_dir_of_ours_is_refused_then_written_fresh_once_only_we_can_write(
        lab, mallory, ours):
    args, host = lab
    rd = ours / "shared"
    rd.mkdir()
    rd.chmod(0o777)  # "anyone can drop their reports here"
    plant(mallory, rd, ours / "victim", host)
    refused(signoff(args, rd), rd, f"{rd} is writable by group and others (mode 0777)")
    victims_untouched(ours)
    # as the message says: a directory no one else can write to. mallory's plants are still there
    rd.chmod(0o755)
    p = signoff(args, rd)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    victims_untouched(ours)
    doc = json.loads((rd / "results.json").read_text())
    assert [(r["criterion"], r["status"]) for r in doc["results"]] == [("dcgm_diag", "PASS")], doc["results"]
    # every name the run wrote is a file or directory of root's, made by this run
    for name in os.listdir(rd):
        st = os.lstat(rd / name)
        assert name in {*plugin.RUN_FILES, *plugin.RUN_DIRS, "earlier"}, name
        if name != "earlier":
            assert not stat.S_ISLNK(st.st_mode) and st.st_uid == 0, name
    assert (rd / "dcgm" / f"{host}.json").read_text() == \
        dcgm_fake.cases(serials(host))["pass"]["diag"]["stdout"]
    assert os.lstat(rd / "dcgm").st_uid == 0 and stat.S_IMODE(os.lstat(rd / "dcgm").st_mode) == 0o755
    # mallory's links (its results.json made them "an earlier run") moved aside as links
    (moved,) = (rd / "earlier").iterdir()
    assert (moved / "dcgm").is_dir() and (moved / "results.json").is_symlink()
    # and now it can plant nothing more
    assert run_as(mallory, "ln", "-s", str(ours / "victim" / "report.md"), str(rd / "x"),
                  check=False).returncode != 0


def test_an_earlier_dir_another_user_planted_is_refused(lab, mallory, ours):
    """mallory made earlier/ while the dir was open to all: a run refuses to move anything into
    it (a directory of another's), naming it."""
    args, host = lab
    rd = ours / "shared"
    rd.mkdir()
    rd.chmod(0o777)
    plant(mallory, rd, ours / "victim", host)
    run_as(mallory, "mkdir", str(rd / "earlier"))
    rd.chmod(0o755)
    p = signoff(args, rd)
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    assert (f"--report-dir {rd}: cannot write into it: {rd / 'earlier'} is owned by "
            f"{safefile.user(mallory.pw_uid)}") in p.stderr, p.stderr
    victims_untouched(ours)
    assert os.listdir(rd / "earlier") == []
