"""Hooks a family's plugin module implements (mark them @pytest.hookimpl); the core plugin
calls them."""

from __future__ import annotations

import pytest


@pytest.hookspec
def pytest_signoff_check_options(config, inventory, profile) -> None:
    """Judge the family's options once, before any host is touched: raise signoff.InputError
    naming the option. `profile` is None under --profile auto (not resolved yet)."""


@pytest.hookspec
def pytest_signoff_parametrize(config, inventory) -> dict:
    """{fixture name: [(value, id), ...]}: what the family's checks are parametrised by besides
    `host` (network: `pair`). The sign-off sheet expects one entry per id."""


@pytest.hookspec
def pytest_signoff_report_sections(doc, profile) -> str:
    """An HTML section of the report's summary (results.json's document), or '': a fragment
    rendered from the family's template (signoff.render.render, autoescape on); a plain str is
    shown as text. One that raises is that section's note on the page, said with the verdict."""


@pytest.hookspec
def pytest_signoff_methodology(doc, profile) -> list:
    """How the family measured, for the report's Methodology: [{"check": ..., "tool": "fio
    3.36", "how": "sizes, timing, durations, definitions"}, ...], versions read from `doc`."""
