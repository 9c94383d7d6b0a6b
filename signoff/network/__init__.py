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
    # the all-to-all across every node, one rank per GPU, in the multi-node all-reduce's probe run
    # (probe_allreduce --op), judged at its size; and inside each rail (the ranks of one local index
    # on every node: nccl-tests' NCCL_TESTS_SPLIT="MOD <ranks per node>"), the slowest rail. derived
    # nic_bound: a fraction of the lowest node's NIC share per rank x N/(N-1) x (n-1)/n (judge.py)
    "multinode_alltoall_busbw": {"type": "number", "derived": {"nic_bound": "x NIC bound"}},
    "rail_alltoall_busbw": {"type": "number", "derived": {"nic_bound": "x NIC bound"}},
    # all-gather and reduce-scatter over every rank in the same run, judged at its size; derived
    # node_bound: the multi-node all-reduce's rule (their ring crosses the same NICs, busbw alike)
    "multinode_allgather_busbw": {"type": "number", "derived": {"node_bound": "x node bound"}},
    "multinode_reduce_scatter_busbw": {"type": "number", "derived": {"node_bound": "x node bound"}},
    # send/recv around the ring of every rank: one rank's buffer crosses each node boundary; derived
    # nic_share: a fraction of the lowest node's NIC share per rank (NICs x rate / 8 / its ranks)
    "multinode_sendrecv_busbw": {"type": "number", "derived": {"nic_share": "x NIC share"}},
    # which transport the multi-node all-reduce's traffic between nodes took (route.py): NET (NCCL's
    # network plugin over RDMA: IB, RoCE, EFA; never NET/Socket), MNNVL (P2P over a multi-node NVLink
    # domain; `without_mnnvl`: what a second run with MNNVL and NVLS off must use), or data_iface
    # (gloo's connections, NCCL's sockets, on the inventory's data interface)
    "multinode_transport": {"type": "name", "ops": ("equals",), "extra": ("without_mnnvl",),
                            "with_limit": ("without_mnnvl",)},
}
TRANSPORTS = ("NET", "MNNVL", "data_iface")
PLUGIN = "signoff.network.plugin"


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "multinode_transport":
        if value not in TRANSPORTS:
            raise InputError(f"{where}.equals: expected one of {', '.join(TRANSPORTS)}, got {value!r}")
        other = extra.get("without_mnnvl")
        if other not in (None, "NET") or (other and value != "MNNVL"):
            raise InputError(f"{where}.without_mnnvl: NET, and only beside equals: MNNVL (the run with MNNVL "
                             f"and NVLS off), got {other!r}")
        return
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


def timing(config, prof, picked, inventory, facts) -> tuple[list[str], list[tuple]]:
    """`signoff plan`: the multi-node collectives' run against --collective-timeout (network/plan.py)."""
    from signoff.network import plan
    return plan.timing(config, prof, picked, inventory, facts)


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The data interface and its line rate, the host pairs' tool (the fallback that serves);
    warned: the checks that ERROR or are N.A. for want of a usable data interface, with their
    own message (judge.data_address, test_nic_link's N.A.)."""
    from signoff.fleet import ProbeError
    from signoff.network import judge
    pf = facts.get("preflight") or {}
    if "ethernet" not in pf:  # a sysinfo of an older version, or a recording
        return [], []
    netinfo = {"ethernet": pf["ethernet"], "infiniband": pf.get("infiniband") or []}
    iface = host.data_iface
    port = judge.data_port(netinfo, iface) if iface else None
    rdma = judge.rdma_port(netinfo, iface) if iface else None
    if not iface:
        said = ["data_iface none"]
    elif port is None:
        said = [f"data_iface {iface} (not on this host)"]
    else:
        rate = (f"{rdma['rate_gbps']:g} Gb/s RDMA port {rdma['device']}/{rdma['port']}"
                if rdma and rdma.get("rate_gbps") else f"{port['speed_mbps'] / 1000:g} Gb/s"
                if port.get("speed_mbps") else "no line rate")
        said = [f"data_iface {iface} ({rate}, {port.get('operstate')})"]
    t = ctx.profile.criteria.get("net_pair_bandwidth") if ctx.profile else None
    tools = pf.get("tools") or {}
    if ctx.checks("net_pair_bandwidth") and t and ctx.hosts > 1:
        tool, missing = judge.pair_tool({host.name: tools}, {host.name: rdma}, t.extra.get("tool", "auto"))
        said.append(f"host pairs: {tool}" + (f" (not installed here: {tool})" if missing else "")
                    + (" (no ib_write_bw or RDMA port, no iperf3)" if tool == "builtin" else ""))
    # a tool the profile names and the host lacks: its pairs ERROR (Network.tool's words)
    warned = [f"net_pair_bandwidth ERROR on its pairs: {tool} is not installed here (the profile's "
              f"net_pair_bandwidth.tool)"] if ctx.checks("net_pair_bandwidth") and t and ctx.hosts > 1 \
        and missing else []
    rdma_fabric = judge.ib_fabric(ctx.profile)
    if not iface and ctx.hosts == 1:
        if ctx.checks("nic_link") and not rdma_fabric:  # test_nic_link's own condition
            warned.append(f"nic_link N.A.: {judge.NO_IFACE_SINGLE}")
        return said, warned
    try:
        judge.data_address(host.name, netinfo, iface)
    except ProbeError as exc:  # the very error these checks raise in the run
        # nic_link on an InfiniBand fabric reads the ports, not the interface; the others
        # listen, or rendezvous (every check of the collectives' run across nodes, the training step
        # over nodes; mnnvl_allreduce where the class has an NVLink domain, else N.A. before), on it
        from signoff.network.plan import MULTINODE
        multi = ("net_pair_bandwidth", *MULTINODE, "train_scaling_nodes", "train_transport",
                 *(("mnnvl_allreduce",) if ctx.profile and ctx.profile.hardware.get("nvlink_domain") else ())
                 ) if ctx.hosts > 1 else ()
        checks = ctx.checks(*(() if rdma_fabric else ("nic_link",)), *multi)
        if checks:
            warned.append(f"{', '.join(checks)} ERROR: {str(exc).removeprefix(f'{host.name}: ')}")
    return said, warned
