"""The training family's measuring fixture."""

from __future__ import annotations

import pytest

from signoff.fixtures import measurer
from signoff.training.report import methodology, training_section
from signoff.training.run import MEASURES


@pytest.fixture(scope="session")
def training(request, fleet, profile):
    """training(what, host, every=()): the host's document of MEASURES[what] ("train", "loader",
    "hostlink"; fixtures.measurer)."""
    return measurer(request, fleet, profile, MEASURES)


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return training_section(doc["results"])


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return methodology(doc, profile)
