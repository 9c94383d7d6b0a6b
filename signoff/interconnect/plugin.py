"""The interconnect family's measuring fixture."""

from __future__ import annotations

import pytest

from signoff.fixtures import HostView, selected_hosts
from signoff.interconnect import report
from signoff.interconnect.run import MEASURES


@pytest.fixture(scope="session")
def measure(request, fleet, profile):
    """measure(what, host): the host's document of MEASURES[what], measured on every host with
    a selected check of it at once, the first time any check asks (Fleet.measured)."""
    def get(what: str, host) -> dict:
        family, tests, probe = MEASURES[what]
        return fleet.measured(family, host.name,
                              lambda n: probe(HostView(n, fleet.facts(n), fleet.sessions[n]), profile),
                              selected_hosts(request.session, tests))
    return get


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.interconnect_section(doc["results"], profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
