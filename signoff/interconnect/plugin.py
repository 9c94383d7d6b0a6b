"""The interconnect family's measuring fixture."""

from __future__ import annotations

import pytest

from signoff.fixtures import measurer, selected_hosts
from signoff.interconnect import report
from signoff.interconnect.run import COLLECTIVES, CORRECT_TEST, with_ops


@pytest.fixture(scope="session")
def measure(request, fleet, profile):
    """measure(what, host, every=()): the host's document of MEASURES[what] (fixtures.measurer);
    the all-reduce's probe run measures the other collectives whose checks are selected too."""
    every = bool(selected_hosts(request.session, (CORRECT_TEST,)))
    ops = [op for op in COLLECTIVES if every or selected_hosts(request.session, (f"test_{op}_busbw",))]
    return measurer(request, fleet, profile, with_ops(ops))


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.interconnect_section(doc["results"], profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
