"""Lab tests (marked `lab`) need root and Debian's sshd; elsewhere they skip with the reason,
except where the lab is required (SIGNOFF_REQUIRE_LAB=1, or CI set, as .ci/run does): there
a lab test that cannot run FAILS with the reason, so CI never passes without its lab."""

import os

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


# The slowest files first (measured: `make test ARGS=--durations=60`, docs/measurements.md): under
# xdist's --dist loadfile a file is one unit, and one long file started last is the run's tail
# (the Makefile's --no-loadscope-reorder keeps this order: by default xdist sorts by test count).
SLOW_FIRST = ("test_lab_acceptance", "test_network_lab", "test_slurm_lab", "test_storage_lab",
              "test_cli", "test_interrupted_lab", "test_interconnect_lab", "test_training_lab",
              "test_verdict_files", "test_local_lock", "test_hosts_lab")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: file order kept within
    for item in items:
        why = lab_missing(item)
        if why and not lab_required() and item.get_closest_marker("lab"):
            item.add_marker(pytest.mark.skip(reason=why))


def pytest_runtest_setup(item):
    why = lab_missing(item)
    if why and lab_required() and item.get_closest_marker("lab"):
        pytest.fail(f"lab test required here (SIGNOFF_REQUIRE_LAB=1 or CI set) but {why}",
                    pytrace=False)
