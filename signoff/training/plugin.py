"""The training family's measuring fixture."""

from __future__ import annotations

import pytest

from signoff.fixtures import HostView, selected_hosts
from signoff.training.report import methodology, training_section
from signoff.training.run import MEASURES


@pytest.fixture(scope="session")
def training(request, fleet, profile):
    """training(what, host): the host's document of MEASURES[what] ("train", "loader",
    "hostlink"), measured on every host with a selected check of it at once (Fleet.measured)."""
    def get(what: str, host) -> dict:
        family, tests, probe = MEASURES[what]
        return fleet.measured(family, host if isinstance(host, str) else host.name,
                              lambda n: probe(HostView(n, fleet.facts(n), fleet.sessions[n]), profile),
                              selected_hosts(request.session, tests))
    return get


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return training_section(doc["results"])


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return methodology(doc, profile)
