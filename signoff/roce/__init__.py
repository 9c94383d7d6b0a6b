"""Lossless RoCE (issue 53 item 3), on RDMA ports whose link layer is Ethernet: PFC on the RoCE
priority, ECN for RoCE on it, the trust mode, the same settings on every host, and the loss and
congestion counters over the run. probe_roce.py reads them (shipped as roce.py: sysinfo's
preflight() calls it at the run's start; `roce.py counters` at its end), judge.py judges them
(acceptance/test_roce.py). InfiniBand ports and hosts without RDMA are N.A., saying so."""

from signoff import InputError

# what counter_growth's `counters` may name: the probe's watched counters ({p}: the RoCE priority)
COUNTERS = ("rx_prio{p}_pause", "tx_prio{p}_pause", "rx_discards_phy", "tx_discards_phy",
            "np_cnp_sent", "rp_cnp_handled", "out_of_sequence", "packet_seq_err")

CRITERIA = {
    # the priority (0-7) PFC must be enabled on, on every Ethernet RDMA port
    "roce_pfc": {"type": "number", "ops": ("equals",)},
    # the priority ECN for RoCE (roce_np and roce_rp) must be enabled on
    "roce_ecn": {"type": "number", "ops": ("equals",)},
    # the ports' trust mode: pcp or dscp
    "roce_trust": {"type": "name", "ops": ("equals",)},
    # 1 where a host's RoCE settings differ from the majority of the run's hosts
    "roce_uniform": {"type": "number", "ops": ("max",)},
    # growth over the run of each counter in `counters` that a lossless fabric never raises
    "roce_loss": {"type": "number", "ops": ("max",), "extra": ("counters",)},
    # growth over the run of each congestion counter in `counters` (pause frames, CNPs)
    "roce_congestion": {"type": "number", "ops": ("max",), "extra": ("counters",)},
}
PLUGIN = "signoff.roce.plugin"


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name in ("roce_pfc", "roce_ecn") and (not isinstance(value, int) or isinstance(value, bool)
                                             or not 0 <= value <= 7):
        raise InputError(f"{where}.equals: expected a priority 0-7, got {value!r}")
    if name == "roce_trust" and value not in ("pcp", "dscp"):
        raise InputError(f"{where}.equals: expected pcp or dscp (mlnx_qos --trust), got {value!r}")
    if name in ("roce_loss", "roce_congestion"):
        got = extra.get("counters")
        if not isinstance(got, list) or not got or any(c not in COUNTERS for c in got):
            raise InputError(f"{where}.counters: expected a list of {', '.join(COUNTERS)}, got {got!r}")


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The host's RoCE settings ('roce: PFC on 3, ECN np 3 rp 3, trust dscp'), or why its checks
    will ERROR; warned: each configuration check that will FAIL, in its own words."""
    from signoff.roce import judge
    picked = ctx.checks(*CRITERIA)
    if not picked:
        return [], []
    doc = judge.roce_of(facts)
    eth, na, err = judge.ports(doc)
    if na:  # no RoCE port (the most hosts, the lab's veths): nothing said, its checks are N.A.
        return [], []
    if err:
        return [], [f"roce ERROR: {err}"]
    said = [f"roce: {judge.settings(doc)} on {len(eth)} Ethernet RDMA port(s)"]
    warned = []
    prof = ctx.profile
    for crit, fn in (("roce_pfc", judge.pfc), ("roce_ecn", judge.ecn), ("roce_trust", judge.trust)):
        t = prof.criteria.get(crit) if prof is not None else None
        if crit not in picked or t is None:
            continue
        v = fn(doc, t.value)
        if v.error:
            warned.append(f"{crit} ERROR: {v.error}")
        elif v.failures:
            warned.append(f"{crit} FAILs: {'; '.join(v.failures)}")
    return said, warned
