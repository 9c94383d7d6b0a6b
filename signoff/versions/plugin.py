"""The versions family's report section."""

from __future__ import annotations

import pytest

from signoff.versions.report import versions_matrix


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return versions_matrix(doc["hosts"], doc["meta"])
