"""The checkpoint family's option and its measuring fixture (every host at once); the storage
family's --storage-path, --storage-readonly and --storage-min-free say where it writes."""

from __future__ import annotations

import pytest

from signoff import InputError
from signoff.checkpoint import report
from signoff.checkpoint.run import TESTS, CheckpointRun
from signoff.fixtures import HostView, selected_hosts


def interval_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not v > 0:
        raise InputError(f"--checkpoint-interval {text!r}: expected minutes > 0, e.g. 30")
    return v


def pytest_addoption(parser):
    parser.getgroup("signoff").addoption(
        "--checkpoint-interval", default=None,
        help="minutes between a training run's checkpoints, for the cost the report states "
             "(default: the profile's checkpoint.interval_min, else 30)")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    if config.getoption("checkpoint_interval") is not None:
        interval_arg(config.getoption("checkpoint_interval"))


@pytest.fixture(scope="module")
def checkpoint(request, fleet, profile):
    """checkpoint(host): the host's document, measured on every host with a selected checkpoint
    check at once; the files left by a probe killed on its host are removed when the module ends."""
    config = request.config
    run = CheckpointRun(fleet, profile, config.getoption("storage_path"),
                        config.getoption("storage_readonly"), config.getoption("storage_min_free"))
    hosts = selected_hosts(request.session, TESTS)
    try:
        yield lambda host: fleet.measured(
            "checkpoint", host.name, lambda n: run.measure(HostView(n, fleet.facts(n), fleet.sessions[n])),
            hosts)
    finally:
        run.close()


@pytest.fixture
def checkpoint_interval(request, profile) -> float:
    """Minutes between checkpoints: --checkpoint-interval, else the profile's interval_min."""
    from signoff.checkpoint import section
    given = request.config.getoption("checkpoint_interval")
    return interval_arg(given) if given is not None else float(section(profile)["interval_min"])


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.checkpoint_section(doc["results"], profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
