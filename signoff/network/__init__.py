"""Inter-node network: NIC line rate (probe_netinfo), host pairs near line rate (probe_netpair:
iperf3 or ib_write_bw, in rounds of disjoint pairs), the multi-node all-reduce over every host
(probe_allreduce) and its bisection to the slow host or link (run.py, judge.py)."""

from signoff import InputError

CRITERIA = {
    # inter-node: per-port line rate of the fabric the profile names
    # with_limit: the fabric and port count the rate is of, set with it in a child (profiles.py)
    # derived: where the class fixes no NIC, rule -> unit of the fraction `min` is (profiles.py,
    # docs/thresholds.md): fleet_rate, every port at the rate most of the run's ports run at
    "nic_rate": {"type": "number", "extra": ("fabric", "ports"), "with_limit": ("fabric", "ports"),
                 "derived": {"fleet_rate": "x the fleet's rate"}},
    # host-to-host throughput: unit "x line rate" (of the detected one) or "Gb/s"
    # retry: measured again after a miss, up to `attempts` in all (signoff/retry.py)
    # derived line_rate: a fraction of the pair's own negotiated line rate, said as such
    "net_pair_bandwidth": {"type": "number", "extra": ("streams", "duration", "tool"), "retry": True,
                           "fleet": True, "derived": {"line_rate": "x line rate"}},
    # derived node_bound: a fraction of min over the nodes of min(its intra-node all-reduce busbw,
    # its NICs x their rate), both read in the run (judge.node_bound)
    "multinode_allreduce_busbw": {"type": "number", "extra": ("size", "sweep", "algo"), "retry": True,
                                  "derived": {"node_bound": "x node bound"}},
}
PLUGIN = "signoff.network.plugin"


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "multinode_allreduce_busbw":
        from signoff.interconnect import check_sweep
        check_sweep(extra, where)
    if name == "nic_rate" and extra.get("derived"):  # fabric and ports optional: the run's own
        if extra.get("fabric") not in (None, "ethernet", "infiniband"):
            raise InputError(f"{where}.fabric: expected ethernet or infiniband (or none: the data "
                             f"interface's), got {extra.get('fabric')!r}")
        ports = extra.get("ports")
        if ports is not None and (isinstance(ports, bool) or not isinstance(ports, int) or ports < 1):
            raise InputError(f"{where}.ports: expected a number of ports >= 1, got {ports!r}")
        return
    if name == "nic_rate" and extra.get("fabric") not in ("ethernet", "infiniband"):
        raise InputError(f"{where}.fabric: expected ethernet or infiniband, got {extra.get('fabric')!r}")


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: the host pairs' rounds (disjoint pairs measure at once)."""
    if "net_pair_bandwidth" not in picked or not pairs:
        return []
    from signoff.network.judge import PAIR_DURATION_S, rounds
    t = prof.criteria.get("net_pair_bandwidth")
    dur = t.extra.get("duration", PAIR_DURATION_S) if t else PAIR_DURATION_S
    n = len(rounds(pairs))
    return [f"host pairs: {len(pairs)} pairs in {n} rounds of {dur} s: {n * dur} s"]
