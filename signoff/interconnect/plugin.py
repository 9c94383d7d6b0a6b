"""The interconnect family's measuring fixture."""

from __future__ import annotations

import pytest

from signoff.fixtures import measurer
from signoff.interconnect import report
from signoff.interconnect.run import MEASURES


@pytest.fixture(scope="session")
def measure(request, fleet, profile):
    """measure(what, host, every=()): the host's document of MEASURES[what] (fixtures.measurer)."""
    return measurer(request, fleet, profile, MEASURES)


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.interconnect_section(doc["results"], profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
