"""Lab tests (marked `lab`) need root and Debian's sshd; elsewhere they skip with the reason,
except where the lab is required (SIGNOFF_REQUIRE_LAB=1, or CI set, as .ci/run does): there
a lab test that cannot run FAILS with the reason, so CI never passes without its lab."""

import fcntl
import os
import tempfile
from pathlib import Path

import pytest
from lab import SSHD
from slurmlab import slurm_missing


def lab_missing(item=None) -> str | None:
    return ("lab needs root (network namespaces, sshd, mount)" if os.geteuid() != 0 else
            f"{SSHD} missing: install openssh-server (make system)" if not os.path.exists(SSHD) else
            slurm_missing() if item is not None and item.get_closest_marker("slurm") else None)


def lab_required() -> bool:
    return os.environ.get("SIGNOFF_REQUIRE_LAB") == "1" or \
        os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


@pytest.fixture
def clone_reports():
    """The clone's reports/, where a run without --report-dir writes: a test that writes there or
    watches it for new runs holds this lock, since the workers run such tests side by side (a
    plan test saw test_cli's run appear and called it its own: fresh clone 2dffc49)."""
    top = Path(__file__).resolve().parent.parent / "reports"
    lock = Path(tempfile.gettempdir()) / ("signoff-tests-%d.lock" % os.stat(top.parent).st_ino)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield top


# `make test` hands whole files to 3 workers in this order (--no-loadscope-reorder): the longest
# first, so that no long file starts last beside an idle worker. xdist's own order (most tests
# first) left the one-test walk-through (110-160 s) to the end: 74 s of one idle worker in a
# 927 s run (docs/measurements.md, fresh clones of 2026-12-03). Seconds: the sum of each file's
# tests in that run.
LONGEST_FIRST = ("test_walkthrough.py",  # 140, one test
                 "test_network_lab.py",  # 246
                 "test_slurm_lab.py",  # 159
                 "test_hostile_host_lab.py",  # 113 (70 alone), one run of the whole sheet (2026-12-07)
                 "test_lab_acceptance.py",  # 139
                 "test_storage_lab.py",  # 114
                 "test_cli.py")  # 86


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as collected
    for item in items:
        why = lab_missing(item)
        if why and not lab_required() and item.get_closest_marker("lab"):
            item.add_marker(pytest.mark.skip(reason=why))


def pytest_runtest_setup(item):
    why = lab_missing(item)
    if why and lab_required() and item.get_closest_marker("lab"):
        pytest.fail(f"lab test required here (SIGNOFF_REQUIRE_LAB=1 or CI set) but {why}",
                    pytrace=False)


# Tests that kill a controller on purpose (SIGKILL, a dying host) leave its probe temp dirs in
# this machine's /tmp, which the lab hosts share: the suite removes those of its own session
# whose run is gone (its lock keeper dead), so a later run here reports no leftover of ours.
_TMP_BEFORE = pytest.StashKey[set]()


def _probe_dirs() -> set:
    import glob
    return set(glob.glob("/tmp/signoff.????????"))


OUTER = "SIGNOFF_TEST_SESSION"  # set by the outermost test session, inherited by the ones it starts


def pytest_configure(config):
    # Only the outermost session (the xdist controller, or a plain run) removes dirs: a test
    # that runs pytest on a test file (test_lab_required) starts a session of its own, whose
    # end must not remove a dir another test left on purpose meanwhile (a killed run's)
    if not hasattr(config, "workerinput") and OUTER not in os.environ:
        os.environ[OUTER] = str(os.getpid())


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput") and os.environ.get(OUTER) == str(os.getpid()):
        session.config.stash[_TMP_BEFORE] = _probe_dirs()


def pytest_sessionfinish(session):
    import shutil
    before = session.config.stash.get(_TMP_BEFORE, None)
    if before is None:
        return
    for d in _probe_dirs() - before:
        try:
            keeper = (open(f"{d}/.keeper").read().split() or [""])[0]
        except OSError:
            continue
        if keeper.isdigit() and not os.path.exists(f"/proc/{keeper}"):
            shutil.rmtree(d, ignore_errors=True)
