"""Lossless RoCE on every Ethernet RDMA port (issue 53 item 3): PFC and ECN on the RoCE priority,
the trust mode, the same settings on every host, the loss and congestion counters over the run.
InfiniBand ports and hosts without RDMA are N.A., saying so."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.roce import judge


def _judge(host, check, t, v: judge.Verdict) -> None:
    __tracebackhide__ = True
    if v.na:
        not_applicable(f"{host}: {v.na}")
    if v.error:
        raise ProbeError(f"{host}: {v.error}")
    if v.note:
        check.note(v.note)
    check.require(v.failures, v.measured, t.expected, t.source, cause=v.cause, details=v.details)


def _roce(host) -> dict:
    """The host's RoCE facts with an Ethernet RDMA port: N.A. before any threshold is read (a host
    without RoCE needs none), ERROR where they cannot be read."""
    doc = judge.roce_of(host.facts)
    _, na, err = judge.ports(doc)
    if na:
        not_applicable(f"{host}: {na}")
    if err:
        raise ProbeError(f"{host}: {err}")
    return doc


def test_roce_pfc(host, profile, check):
    """PFC enabled on the RoCE priority on every Ethernet RDMA port (mlnx_qos, else the kernel's DCB)."""
    doc = _roce(host)
    t = profile.threshold("roce_pfc")
    _judge(host, check, t, judge.pfc(doc, t.value))


def test_roce_ecn(host, profile, check):
    """ECN for RoCE (notification and reaction point) enabled on the RoCE priority on every port."""
    doc = _roce(host)
    t = profile.threshold("roce_ecn")
    _judge(host, check, t, judge.ecn(doc, t.value))


def test_roce_trust(host, profile, check):
    """The ports classify RoCE traffic by the field the profile names (pcp or dscp)."""
    doc = _roce(host)
    t = profile.threshold("roce_trust")
    _judge(host, check, t, judge.trust(doc, t.value))


def test_roce_uniform(host, fleet, profile, check):
    """The host's RoCE settings are those of the majority of the run's hosts (one unlike FAILs)."""
    _roce(host)
    t = profile.threshold("roce_uniform")
    lines = fleet.once("roce settings", lambda: {n: judge.settings(judge.roce_of(f))
                                                 for n, f in fleet.all_facts().items()})
    _judge(host, check, t, judge.uniform(lines, host.name))


def test_roce_loss(host, profile, check, roce):
    """Runs late (signoff/roce/plugin.py): no packet lost on the lossless fabric during the run
    (out-of-sequence, sequence errors, physical discards), end against start."""
    doc = _roce(host)
    t = profile.threshold("roce_loss")
    prio = profile.threshold("roce_pfc").value
    end = roce.counters(host.name)
    _judge(host, check, t, judge.counter_growth(doc, end, t.extra["counters"], prio, t.value))


def test_roce_congestion(host, profile, check, roce):
    """Runs late: the priority's pause frames and the CNPs grow no more than a site's profile allows
    (no public bound: N.A. without one, saying so)."""
    doc = _roce(host)
    t = profile.criteria.get("roce_congestion")  # optional: set by a site, never shipped
    if t is None:
        not_applicable(f"{host}: {judge.NO_CONGESTION_BOUND} (profile {profile.name})")
    prio = profile.threshold("roce_pfc").value
    end = roce.counters(host.name)
    _judge(host, check, t, judge.counter_growth(doc, end, t.extra["counters"], prio, t.value))
