"""The gpu family's measuring fixture, and the checks of the run's own faults moved to the end."""

from __future__ import annotations

import pytest

from signoff.gpu.run import Health

# the counters at the end against those at the start; the kernel log's XIDs since the start
LAST = ("test_xid_during_run", "test_error_counters")


@pytest.fixture(scope="session")
def health(request, fleet) -> Health:
    return Health(fleet, request.session)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The counters' second snapshot and the XIDs of the run are read after every other
    check has loaded the hosts."""
    late = {id(i) for i in items if getattr(i, "originalname", i.name) in LAST}
    items[:] = [i for i in items if id(i) not in late] + [i for i in items if id(i) in late]
