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


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    from signoff.roce import report
    return report.section(doc["results"])


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    """The report's Methodology rows, where a host had RoCE to judge (all N.A.: none)."""
    if not any(str(r.get("criterion", "")).startswith("roce_") and r.get("status") != "N.A."
               for r in doc.get("results") or []):
        return []
    return [{"check": "roce_pfc, roce_ecn, roce_trust, roce_uniform",
             "tool": "mlnx_qos -i <netdev> (else iproute2's dcb pfc / dcb app and the qos/trust sysfs file); "
                     "/sys/class/net/<netdev>/ecn/roce_np|roce_rp/enable/<prio>",
             "how": "read by the sysinfo probe at the run's start on every RDMA port whose link layer is "
                    "Ethernet: PFC and ECN on the profile's priority, the trust mode, and each host's "
                    "settings against the majority of the run's hosts; InfiniBand ports and hosts "
                    "without RDMA N.A."},
            {"check": "roce_loss, roce_congestion",
             "tool": "ethtool -S <netdev>; /sys/class/infiniband/<dev>/ports/<n>/hw_counters",
             "how": "the counters at the run's start (sysinfo) against its end (after the collectives and "
                    "the soak): out-of-sequence, sequence errors and physical discards may not grow; the "
                    "priority's pause frames and the CNPs only within a site's bound (none shipped)"}]
