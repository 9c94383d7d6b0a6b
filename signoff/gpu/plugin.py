"""The gpu family's measuring fixture, and the error-counter check moved to the end."""

from __future__ import annotations

import pytest

from signoff.gpu.run import Health

LAST = ("test_error_counters",)  # compares the counters at the end with those at the start


@pytest.fixture(scope="session")
def health(request, fleet) -> Health:
    return Health(fleet, request.session)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The counters' second snapshot is taken after every other check has loaded the hosts."""
    late = {id(i) for i in items if getattr(i, "originalname", i.name) in LAST}
    items[:] = [i for i in items if id(i) not in late] + [i for i in items if id(i) in late]
