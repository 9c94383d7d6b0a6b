"""The roce family's measuring fixture (the counters at the end of the run), and its counter
checks moved to the end, after every other check has loaded the fabric."""

from __future__ import annotations

import pytest

from signoff.fixtures import selected_hosts

LAST = ("test_roce_loss", "test_roce_congestion")


class Roce:
    def __init__(self, fleet, session):
        self.fleet, self.session = fleet, session

    def counters(self, host: str) -> dict:
        """The Ethernet RDMA ports' counters at the end of the run (`roce.py counters`)."""
        return self.fleet.measured("roce counters", host,
                                   lambda n: self.fleet.sessions[n].probe("roce", "counters", timeout=120),
                                   selected_hosts(self.session, LAST))


@pytest.fixture(scope="session")
def roce(request, fleet) -> Roce:
    return Roce(fleet, request.session)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    """The counters' second snapshot is read after every other check (the multi-node collectives,
    the soak) has run; gpu's test_error_counters and test_xid_during_run stay the very last."""
    from signoff.gpu.plugin import LAST as GPU_LAST

    def name(i):
        return getattr(i, "originalname", i.name)
    late = [i for i in items if name(i) in LAST]
    if late:  # whichever plugin orders first, the gpu family's stay the very last
        last = [i for i in items if name(i) in GPU_LAST]
        items[:] = [i for i in items if name(i) not in LAST and name(i) not in GPU_LAST] + late + last
