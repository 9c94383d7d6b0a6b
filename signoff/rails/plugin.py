"""The rails family's measuring fixture, report section and methodology."""

from __future__ import annotations

import pytest

from signoff.rails import report
from signoff.rails.run import Rails


@pytest.fixture(scope="session")
def rails(fleet) -> Rails:
    return Rails(fleet)


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.section(doc["results"])


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    """Where a host had rails to judge (all N.A.: none)."""
    if not any(r.get("criterion") in ("gdr_rail_bw", "gdr_rail_path") and r.get("status") != "N.A."
               for r in doc.get("results") or []):
        return []
    return [{"check": "gdr_rail_bw, gdr_rail_path",
             "tool": "ib_write_bw --use_cuda=<gpu> [--use_cuda_dmabuf] -d <nic> -i <port> --report_gbits -F "
                     "(perftest); else NCCL_DEBUG=INFO channel lines of the multi-node all-reduce",
             "how": "each GPU with its closest RDMA NIC (sysfs PCI paths, nvidia-smi topo's scale); "
                    "every host sends to the next, disjoint pairs at once, each pair's rails one after "
                    "another, GPU i to GPU i; a rail's GB/s against a fraction of its NIC's line rate; a "
                    "buffer not in GPU memory, NCCL's NET channels without GDRDMA, or a NIC across the CPU "
                    "FAIL the path"}]
