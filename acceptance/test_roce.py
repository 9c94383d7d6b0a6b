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


def _doc(host):
    return judge.roce_of(host.facts)


def test_roce_pfc(host, profile, check):
    """PFC enabled on the RoCE priority on every Ethernet RDMA port (mlnx_qos, else the kernel's DCB)."""
    _judge(host, check, *_with(profile, "roce_pfc", lambda t: judge.pfc(_doc(host), t.value), host))


def test_roce_ecn(host, profile, check):
    """ECN for RoCE (notification and reaction point) enabled on the RoCE priority on every port."""
    _judge(host, check, *_with(profile, "roce_ecn", lambda t: judge.ecn(_doc(host), t.value), host))


def test_roce_trust(host, profile, check):
    """The ports classify RoCE traffic by the field the profile names (pcp or dscp)."""
    _judge(host, check, *_with(profile, "roce_trust", lambda t: judge.trust(_doc(host), t.value), host))


def test_roce_uniform(host, fleet, profile, check):
    """The host's RoCE settings are those of the majority of the run's hosts (one unlike FAILs)."""
    lines = fleet.once("roce settings", lambda: {n: judge.settings(judge.roce_of(f))
                                                 for n, f in fleet.all_facts().items()})
    _judge(host, check, *_with(profile, "roce_uniform", lambda t: judge.uniform(lines, host.name), host))


def test_roce_loss(host, profile, check, roce):
    """Runs late (signoff/roce/plugin.py): no packet lost on the lossless fabric during the run
    (out-of-sequence, sequence errors, physical discards), end against start."""
    _judge(host, check, *_counters(host, profile, roce, "roce_loss"))


def test_roce_congestion(host, profile, check, roce):
    """Runs late: the priority's pause frames and the CNPs grow no more than a site's profile allows
    (no public bound: N.A. without one, saying so)."""
    if judge.ports(_doc(host))[0] and "roce_congestion" not in profile.criteria:
        not_applicable(f"{host}: {judge.NO_CONGESTION_BOUND} (profile {profile.name})")
    _judge(host, check, *_counters(host, profile, roce, "roce_congestion"))


def _with(profile, crit, judged, host):
    """(threshold, verdict): N.A. before the threshold is asked for (a host without RoCE needs none);
    a missing threshold is then an ERROR."""
    eth, na, err = judge.ports(_doc(host))
    if na:
        not_applicable(f"{host}: {na}")
    if err:
        raise ProbeError(f"{host}: {err}")
    t = profile.threshold(crit)
    return t, judged(t)


def _counters(host, profile, roce, crit):
    def judged(t):
        prio = profile.threshold("roce_pfc").value
        return judge.counter_growth(_doc(host), roce.counters(host.name), t.extra["counters"], prio, t.value)
    return _with(profile, crit, judged, host)
