"""The network family's options, fixtures, host pairs and report section."""

from __future__ import annotations

import pytest

from signoff import InputError
from signoff.fixtures import HostView
from signoff.fleet import ProbeError
from signoff.network import report
from signoff.network.judge import (
    NET_PAIRS_MAX,
    PAIR_DURATION_S,
    all_pairs,
    all_pairs_cost,
    pair_id,
    ring_pairs,
)
from signoff.network.report import network_section
from signoff.network.run import Network

NET_PORT = 29400  # the first of two: PORTS below
PORTS = (1024, 65533)  # unprivileged, and room for the next one (the probes use port and port + 1)
COLLECTIVE_TIMEOUT = 600


def pytest_addoption(parser):
    g = parser.getgroup("signoff")
    g.addoption("--net-pairs", choices=("ring", "all"), default="ring",
                help="host pairs for inter-node bandwidth: ring (each host with the next) or all "
                     "(default ring)")
    g.addoption("--net-pairs-max", type=int, default=NET_PAIRS_MAX,
                help=f"refuse --net-pairs all above this many pairs (default {NET_PAIRS_MAX}: 64 hosts)")
    g.addoption("--net-port", type=int, default=NET_PORT,
                help=f"first TCP port the network probes listen on (bound to the data interface; "
                     f"{PORTS[0]}-{PORTS[1]}, default {NET_PORT})")
    g.addoption("--collective-timeout", type=int, default=COLLECTIVE_TIMEOUT,
                help=f"multi-node all-reduce: rendezvous/collective timeout, s (ranks killed after; "
                     f"default {COLLECTIVE_TIMEOUT})")


def all_pairs_plan(config, n_hosts: int, prof) -> tuple[str, bool]:
    """What --net-pairs all costs on these hosts, said before it starts, and whether it is
    above --net-pairs-max (every pair is its own check: O(N^2) of them)."""
    pairs, rnds = all_pairs_cost(n_hosts)
    t = prof.criteria.get("net_pair_bandwidth") if prof else None
    dur = t.extra.get("duration", PAIR_DURATION_S) if t else PAIR_DURATION_S
    whose = f"net_pair_bandwidth.duration of profile {prof.name}" if t else \
        f"{PAIR_DURATION_S} s where the profile sets no duration"
    m, sec = divmod(rnds * dur, 60)
    cost = (f"--net-pairs all: {n_hosts} hosts make {pairs} host pairs in {rnds} rounds of {dur} s "
            f"({whose}): about {f'{m} min ' if m else ''}{sec} s of measuring, plus each round's "
            f"start-up")
    return cost, pairs > config.getoption("net_pairs_max")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    port = config.getoption("net_port")
    if not PORTS[0] <= port <= PORTS[1]:
        raise InputError(f"--net-port {port}: expected {PORTS[0]}-{PORTS[1]} (the probes use it and the "
                         f"next one)")
    if config.getoption("net_pairs_max") < 0:
        raise InputError(f"--net-pairs-max {config.getoption('net_pairs_max')}: expected a number of "
                         f"pairs >= 0")
    if config.getoption("collective_timeout") <= 0:
        raise InputError(f"--collective-timeout {config.getoption('collective_timeout')}: expected "
                         f"seconds > 0")
    if config.getoption("net_pairs") != "all":
        return
    cost, over = all_pairs_plan(config, len(inventory.hosts), profile)
    if over:
        cap = config.getoption("net_pairs_max")
        raise InputError(f"{cost}; that is above --net-pairs-max {cap}: pass --net-pairs-max "
                         f"{all_pairs_cost(len(inventory.hosts))[0]} to run them all, or use --net-pairs "
                         f"ring ({len(ring_pairs([h.name for h in inventory.hosts]))} pairs)")


def host_pairs(config, inventory) -> list[tuple[str, str]]:
    names = [h.name for h in inventory.hosts]
    return (all_pairs if config.getoption("net_pairs") == "all" else ring_pairs)(names)


@pytest.hookimpl
def pytest_signoff_parametrize(config, inventory):
    # one host has no pair: a single N.A. case rather than an empty (silently skipped) set
    pairs = host_pairs(config, inventory)
    return {"pair": [(p, pair_id(*p)) for p in pairs] or [(None, "single-host")]}


def pytest_report_header(config):
    from signoff.state import STATE
    if STATE in config.stash and config.getoption("net_pairs") == "all":
        st = config.stash[STATE]
        return [all_pairs_plan(config, len(st.inventory.hosts), st.profile)[0]]
    return None


def multinode_args(profile, t) -> tuple[str, str, dict]:
    """(smallest, largest size, env) of the multi-node all-reduce threshold t asks for: its sweep,
    NCCL_ALGO where it names one, NVLS off where the class keeps it off: as
    acceptance/test_network.py's test_multinode_allreduce runs it, whose cached run the training
    step's step_bound rule reads (the sheet's catalog reads the profile keys in that test's body)."""
    lo, hi = t.extra["sweep"]
    env = {"NCCL_ALGO": t.extra["algo"]} if t.extra.get("algo") else {}
    if profile.hardware.get("nvls") is False:
        env["NCCL_NVLS_ENABLE"] = "0"
    return lo, hi, env


def node_bounds(fleet, network: Network, measure, names: list[str]) -> dict[str, dict]:
    """The node_bound rule's figures of every node (Network.bounds): the intra-node all-reduce
    is test_allreduce_busbw's measurement (signoff/interconnect), made now where it was not; its
    busbw at the sweep's largest size; none on a node of one GPU (one rank, nothing within the
    node). On a CPU node it is gloo's 2-rank all-reduce: what its CPU reduces at."""
    views = {n: HostView(n, fleet.facts(n), fleet.sessions[n]) for n in names}
    several = [n for n, v in views.items() if len(v.gpus) != 1]  # measured at once, each its own

    def intra(name):
        view = views[name]
        if len(view.gpus) == 1:
            return None
        try:
            doc = measure("allreduce", view, every=several)
        except pytest.skip.Exception as exc:  # a class guard: the check says so; no bound from it
            raise ProbeError(f"{name}: no intra-node all-reduce for the node_bound rule: {exc.msg}") from None
        except ProbeError as exc:
            raise ProbeError(f"the node_bound rule needs every node's intra-node all-reduce: {exc}") from None
        return max(doc["rows"], key=lambda r: r["bytes"])["busbw"]
    return network.bounds(names, intra)


# the checks of the collectives beyond all-reduce across nodes (acceptance/test_network.py)
ALLTOALL_TESTS = ("test_multinode_alltoall_busbw", "test_rail_alltoall_busbw",
                  "test_multinode_allgather_busbw", "test_multinode_reduce_scatter_busbw",
                  "test_multinode_sendrecv_busbw", "test_multinode_collectives_correct")
# Across nodes, every collective over every rank after the all-reduce, in its rendezvous (issue 44:
# "every collective inside and across hosts"), and the all-to-all again inside each rail. The
# all-to-all is swept; all-gather, reduce-scatter and send/recv are measured at the size judged
# alone (--op-size): over slow links each sweep costs as much as the all-reduce's own (gloo's
# reduce-scatter twice that), and inside each node they are swept already (signoff/interconnect)
MULTINODE_OPS = ("--op", "allreduce,allgather,reduce_scatter,alltoall,sendrecv", "--rail-split", "alltoall")
# the bisection's 2-host runs (one size): the all-reduce and the all-to-all with its rails name a slow
# host or link; the other collectives' misses are named by the pairs' all-reduce (the same ring)
PAIR_OPS = ("--op", "allreduce,alltoall", "--rail-split", "alltoall")


def multinode_ops(session, profile=None) -> tuple[tuple, tuple]:
    """probe_allreduce's arguments that add the other collectives (and the all-to-all inside each
    rail) to every all-reduce across nodes, and to the bisection's 2-host runs, where one of their
    checks is selected: one rendezvous, one launch; the all-reduce's checks alone measure it alone."""
    picked = {getattr(i, "originalname", i.name) for i in session.items}
    if not picked & set(ALLTOALL_TESTS):
        return (), ()
    t = profile.criteria.get("multinode_allreduce_busbw") if profile is not None else None
    size = ("--op-size", str(t.extra["size"])) if t is not None and t.extra.get("size") else ()
    return (*MULTINODE_OPS, *size), PAIR_OPS


@pytest.fixture(scope="session")
def network(request, pytestconfig, fleet, profile) -> Network:
    return Network(fleet, pytestconfig.getoption("net_port"), *multinode_ops(request.session, profile))


@pytest.fixture(scope="session")
def pairs(pytestconfig) -> list[tuple[str, str]]:
    from signoff.state import STATE
    return host_pairs(pytestconfig, pytestconfig.stash[STATE].inventory)


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return network_section(doc["results"])


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc, profile)
