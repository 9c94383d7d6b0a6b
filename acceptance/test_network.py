"""Inter-node network: NIC line rate, host pairs near line rate, multi-node all-reduce."""

import pytest

from signoff import cotenants, outlier, retry, unseen
from signoff.causes import named as named_hosts
from signoff.check import cannot_show, not_applicable
from signoff.fixtures import selected_hosts
from signoff.fleet import ProbeError
from signoff.network import judge as net
from signoff.network import route
from signoff.network.plugin import multinode_args, node_bounds
from signoff.roce import judge as roce
from signoff.units import parse_size

RULE = "signoff acceptance rule"


def test_nic_link(host, fleet, network, profile, check, request):
    def read():  # every host's NICs read at once, the first time a host's check asks
        return fleet.measured("network", host.name, network.info,
                              selected_hosts(request.session, ("test_nic_link",)))
    if unseen.class_ib_ports(profile):  # a slice of a class whose server has InfiniBand ports
        rented = unseen.nic_unseen(profile, host.facts, read()["infiniband"], host.session.host.data_iface)
        if rented:  # none of them here: the provider's virtual NIC, never the server's ports
            cannot_show(*rented)
    if not host.session.host.data_iface and len(fleet.names) == 1 and not net.ib_fabric(profile):
        not_applicable(f"{host}: {net.NO_IFACE_SINGLE}")  # an InfiniBand fabric's ports need none
    t = profile.threshold("nic_rate")
    info = read()
    if t.extra.get("derived") == "fleet_rate":  # no class NIC: the run's own ports (judge.fleet_rate)
        if t.extra.get("fabric") != "infiniband":
            network.address(host.name)  # the named interface exists and has an address
        ifaces = {n: fleet.sessions[n].host.data_iface for n in fleet.names}
        docs = {**fleet.peers("network", lambda d: d), host.name: info}  # every host measured
        ports = {n: net.nic_ports(d, ifaces[n], t.extra.get("fabric")) for n, d in docs.items()}
        res = net.fleet_rate(host.name, ports, t)
        check.require(res["bad"], res["measured"], res["expected"], f"{t.source}; {t.provisional}",
                      cause="cable, transceiver or switch port negotiated down, or a port down",
                      details={"ethernet": info["ethernet"], "infiniband": info["infiniband"],
                               "fabric": res["fabric"], "fleet_rate_gbps": res["common_gbps"],
                               "ports_up": res["ports_up"]})
        return
    if t.extra.get("fabric") == "infiniband":
        ports = info["infiniband"]
        up = [p for p in ports if "ACTIVE" in (p["state"] or "") and t.ok(p["rate_gbps"] or 0)]
        bad = [f"{p['device']} port {p['port']} {p['state']} at {p['rate'] or 'no rate'}"
               for p in ports if p not in up]
        measured = min((p["rate_gbps"] or 0 for p in ports), default=0)
    else:
        iface = host.session.host.data_iface
        network.address(host.name)  # the named interface exists and has an address
        port = net.data_port(info, iface)
        speed = (port["speed_mbps"] or 0) / 1000
        bad = [] if port["operstate"] == "up" else [f"{iface} is {port['operstate']}"]
        bad += [] if t.ok(speed) else [f"{iface} at {speed:g} Gb/s, {t}"]
        up, measured = ([port] if not bad else []), speed
    want = t.extra.get("ports", 1)
    if len(up) < want:
        bad.append(f"{len(up)} of {want} expected {t.extra.get('fabric')} ports up at {t.expected}")
    check.require(bad, measured, f"{want} x {t.extra.get('fabric')} port(s) up at {t.expected}",
                  t.source, cause="cable, transceiver or switch port; or the profile names another "
                  "fabric", details={"ethernet": info["ethernet"], "infiniband": info["infiniband"]})


def test_net_pair_bandwidth(pair, pairs, network, profile, check):
    if pair is None:
        not_applicable("one host: no pair to measure")
    t = profile.threshold("net_pair_bandwidth")
    if t.unit not in ("x line rate", "Gb/s"):
        raise ProbeError(f"profile {t.profile}: criteria.net_pair_bandwidth.unit {t.unit!r}: "
                         f"expected 'x line rate' or 'Gb/s'")
    try:
        res = network.pair(*pair, pairs, t)  # measured again after a miss: the retry policy
    except ProbeError as exc:  # the attempts before the one that broke are kept
        tries = {"attempts": exc.attempts, "spread_pct": retry.spread_pct(exc.attempts)} \
            if getattr(exc, "attempts", None) else {}
        check.record(None, t.expected, t.unit, t.source,
                     details={**({"stderr": exc.stderr} if exc.stderr else {}), **tries})
        raise
    said = retry.said(res, t.unit)  # ', best of 2 attempts (...)' after a miss
    how = f"{res['gbps']:g} Gb/s ({res['tool']}, {res['streams']} streams{said})"
    rates = network.line_rates(pairs, res["tool"])  # per host: the median of hosts, not of pairs
    slow = net.slow_nics(pair, rates, t)
    if slow:
        key = "gbps" if t.unit == "Gb/s" else "fraction"
        check.record(res[key], t.expected, t.unit, t.source, details={**res, "nic_rates": rates})
        pytest.fail(f"{net.pair_id(*pair)}: {how}: {'; '.join(slow)}; {outlier.RULE}; likely cause: "
                    f"that NIC negotiated a lower speed or width (its cable, port or card)", pytrace=False)
    key = "gbps" if t.unit == "Gb/s" else "fraction"
    peers = network.peers(lambda r: r[key])

    def cause():
        return net.pair_cause(pair, pairs, peers, t)
    if t.unit == "Gb/s":  # a fabric without a real line rate (e.g. veth's nominal speed): no fraction
        check.expect(res["gbps"], t, f"{res['tool']} throughput ({res['streams']} streams{said})",
                     cause=cause, details={**res, "fraction": None}, fleet=peers)
        return
    line = res["line_rate_gbps"]
    if line is None:
        check.record(res["gbps"], t.expected, "Gb/s", t.source, details=res)
        raise ProbeError(f"{net.pair_id(*pair)}: line rate unknown (no speed on the data interface): "
                         f"measured {res['gbps']} Gb/s cannot be judged")
    if res["fraction"] > net.LINE_RATE_TOLERANCE:
        check.record(res["fraction"], t.expected, t.unit, t.source, details=res)
        raise ProbeError(f"{net.pair_id(*pair)}: {how} is {res['fraction']:g} x the {line:g} Gb/s line "
                         f"rate, more than the link carries (allowed {net.LINE_RATE_TOLERANCE} x, for "
                         f"timing): the line rate is wrong (a virtual interface's nominal speed?) or "
                         f"another path or card was measured; not judged")
    own = "its own " if t.extra.get("derived") else ""  # the slower end's negotiated rate
    check.expect(res["fraction"], t, f"{how} of {own}{line:g} Gb/s line rate, fraction",
                 cause=cause, details=res, fleet=peers)


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_allreduce(fleet, network, profile, check, pytestconfig, measure):
    names = fleet.names
    if len(names) < 2:
        not_applicable("one host: no inter-node all-reduce")
    t = profile.threshold("multinode_allreduce_busbw")
    # the figure in GB/s, from what the nodes report; a dead node: run() says so, naming it
    if t.extra.get("derived") == "node_bound" and not network.dead(names):
        t = net.node_bound_threshold(t, node_bounds(fleet, network, measure, names))
    lo, hi = t.extra["sweep"]
    env = {"NCCL_ALGO": t.extra["algo"]} if t.extra.get("algo") else {}
    if profile.hardware.get("nvls") is False:
        env["NCCL_NVLS_ENABLE"] = "0"
    mt = profile.criteria.get("multinode_transport")
    if mt is not None and mt.extra.get("without_mnnvl"):  # an NVLink domain: the NIC rule judges the
        env.update(NCCL_MNNVL_ENABLE="0", NCCL_NVLS_ENABLE="0")  # NICs' run (mnnvl_allreduce: MNNVL's)
    timeout = pytestconfig.getoption("collective_timeout")

    def run(again=False) -> dict:
        """One all-reduce over every host; a failed one (a host, not noise) ERRORs, never retried."""
        res = network.allreduce(names, lo, hi, env, timeout, again)
        if not res["ok"]:
            check.record(None, t.expected, t.unit, t.source,
                         details={k: res[k] for k in ("started", "states", "culprits", "not_run")})
            if not res["started"]:  # a host known dead: nothing launched, nobody else blamed
                raise ProbeError("multi-node all-reduce not started; caused by "
                                 f"{', '.join(res['culprits'])}: "
                                 + "; ".join(f"{h}: {res['states'][h]}" for h in res["culprits"])
                                 + (f"; not run because of {'it' if len(res['culprits']) == 1 else 'them'}"
                                    f": {', '.join(res['not_run'])}" if res["not_run"] else ""))
            if res.get("timeout"):  # every rank still at it when the timeout came: no host's fault
                raise ProbeError(f"multi-node all-reduce {res['timeout']}")
            who = ", ".join(res["culprits"]) or "no one host (every host timed out together)"
            raise ProbeError(f"multi-node all-reduce failed; caused by {who}: "
                             + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
        return res

    def busbw(res):
        return next(r for r in res["doc"]["rows"] if r["bytes"] == parse_size(t.extra["size"]))["busbw"]
    # the retry policy: after a miss, the all-reduce again (up to attempts); bisected only after
    res = retry.kept(*retry.best_of(run(), lambda: run(again=True), busbw, t))
    doc = res["doc"]
    # another process on a host's GPUs: not the network's figure (signoff/cotenants.py)
    cotenants.guard(check, "all hosts", res, "multi-node all-reduce", busbw(res), t.expected, t.unit,
                    t.source, {"rows": doc["rows"]})
    ranks = {n: len(fleet.facts(n)["nvidia"].get("gpus") or []) or 1 for n in names}  # CPU: one rank
    if doc["world_size"] != sum(ranks.values()):  # judged on fewer GPUs, it proves nothing of the rest
        check.record(busbw(res), t.expected, t.unit, t.source, details={"rows": doc["rows"], "ranks": ranks})
        per = ", ".join(f"{n} {g}" for n, g in ranks.items())
        raise ProbeError(f"all hosts: the multi-node all-reduce ran {doc['world_size']} ranks where NVML "
                         f"reports {sum(ranks.values())} GPUs ({per}): it needs a rank per GPU of every "
                         f"host (Slurm gres, CUDA_VISIBLE_DEVICES)")
    cause, found = "", {}
    if not t.ok(busbw(res)):
        found = network.bisect(names, t, env, timeout)
        # a RoCE fabric whose PFC or ECN is off on a host names that first (signoff/roce/judge.py)
        cause = "; ".join(c for c in (roce.slow_fabric_cause(fleet.all_facts(), profile),
                                      net.describe_bisection(found)) if c)
    check.expect(busbw(res), t, f"{len(names)}-host all-reduce busbw at {t.extra['size']} "
                 f"({doc['world_size']} ranks, {doc['backend']}{retry.said(res, t.unit)})", cause=cause,
                 details={"rows": doc["rows"], "bisection": found, "launched": res.get("launched", "ssh"),
                          "attempts": res.get("attempts"), "spread_pct": res.get("spread_pct"),
                          "retry": res.get("retry")})


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_transport(fleet, network, profile, check, pytestconfig):
    """The transport the multi-node all-reduce's traffic between nodes took (network/route.py), as
    NCCL's channel lines say (gloo: the interface its connections leave by), against the class's."""
    names = fleet.names
    if len(names) < 2:
        not_applicable("one host: no traffic between nodes")
    t = profile.threshold("multinode_transport")
    b = profile.criteria.get("multinode_allreduce_busbw")
    # test_multinode_allreduce's run where the profile sets its sweep (cached), else one of 1M
    lo, hi, env = multinode_args(profile, b) if b else ("1M", "1M", {})
    timeout = pytestconfig.getoption("collective_timeout")
    ifaces = {n: fleet.sessions[n].host.data_iface for n in names}
    domain = profile.hardware.get("nvlink_domain")
    runs = [(t.value, env, "")]
    if t.extra.get("without_mnnvl"):  # the NIC path the domain falls back to, asserted too
        runs.append((t.extra["without_mnnvl"], {**env, "NCCL_MNNVL_ENABLE": "0", "NCCL_NVLS_ENABLE": "0"},
                     "with MNNVL and NVLS off: "))
    bad, measured, details, causes, at_fault = [], [], {}, [], {}
    for want, run_env, said in runs:
        res = network.allreduce(names, lo, hi, run_env, timeout)
        if not res["ok"]:
            raise ProbeError(f"all hosts: the multi-node all-reduce {said}failed, its transport unknown: "
                             + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
        gpus = sum(len(fleet.facts(n)["nvidia"].get("gpus") or []) for n in names)  # every host answered
        one_domain = not domain or gpus <= domain  # more GPUs than one domain: NET between domains
        v = route.judge(want, res["hosts"], ifaces, one_domain)
        if v["error"]:
            check.record(None, t.expected, t.unit, t.source, details={"used": v["used"]})
            raise ProbeError(f"all hosts: {said}{v['error']}")
        bad += [f"{said}{x}" for x in v["bad"]]
        for h, lines in named_hosts(v["bad"], names).items():  # each line opens with its host
            at_fault.setdefault(h, []).extend(f"{said}{x}" for x in lines)
        measured.append(f"{said}{v['measured']}")
        causes += [v["cause"]] if v["bad"] else []
        details[f"{said or 'the run: '}{route.EXPECTED[want]}"] = v["used"]
    if t.value == "MNNVL" and not one_domain:
        check.note(f"{gpus} GPUs, more than one NVLink domain ({domain}): NET between domains allowed")
    check.require(bad, "; ".join(measured), "; ".join(f"{s}{route.EXPECTED[w]}" for w, _, s in runs),
                  t.source, cause="; ".join(causes),
                  details={"used": details, "data_ifaces": ifaces, "at_fault": at_fault})


@pytest.fixture(autouse=True)
def _need_reachable(request, fleet):
    """Network checks need the hosts' sysinfo: a dead host ERRORs by name, the others run."""
    pair = request.node.callspec.params.get("pair") if hasattr(request.node, "callspec") else None
    for name in pair or ():
        fleet.facts(name)


def multinode_collectives(fleet, network, profile, pytestconfig) -> tuple[dict, dict, str]:
    """The multi-node all-reduce's run (cached; its collectives: network.ops) and its threshold's
    size: (result, doc, size). A failed run ERRORs naming its hosts, as the transport check."""
    names = fleet.names
    if len(names) < 2:
        not_applicable("one host: no collective across nodes")
    b = profile.threshold("multinode_allreduce_busbw")  # its sweep and size: one run serves both
    lo, hi, env = multinode_args(profile, b)
    res = network.allreduce(names, lo, hi, env, pytestconfig.getoption("collective_timeout"))
    if not res["ok"]:
        raise ProbeError("all hosts: the multi-node all-reduce's run (which measures the other collectives) "
                         "failed: " + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
    doc = res["doc"]
    if "ops" not in doc:
        raise ProbeError("all hosts: the multi-node run measured no collective besides the all-reduce")
    return res, doc, b.extra["size"]


def alltoall_rows(doc: dict, where: str):
    err = (doc.get("op_errors") or {}).get("alltoall")
    if err and doc["backend"] == "gloo":
        not_applicable(f"{where}: gloo (torch {doc.get('torch')}) runs no all-to-all: {err}")
    if err:
        raise ProbeError(f"{where}: the all-to-all across nodes failed: {err}")
    return doc["ops"]["alltoall"]


def nic_threshold(t, fleet, network, names, doc, rail: bool, what: str):
    """t as GB/s: its own figure, or by rule nic_bound from every node's NICs (netinfo)."""
    if t.extra.get("derived") != "nic_bound":
        return t
    nccl = doc["backend"] == "nccl"
    nics = {n: net.node_nics(network.info(n), fleet.sessions[n].host.data_iface, nccl) for n in names}
    return net.nic_bound_threshold(t, nics, doc["local_ranks"], 1 if rail else doc["local_ranks"], what)


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_alltoall_busbw(fleet, network, profile, check, pytestconfig):
    """The all-to-all over every node, one rank per GPU: it cannot average over rails or NICs, so one
    slow NIC or host slows it (the MoE collective); after a miss, every ring pair's own all-to-all
    names the slow host or link (the all-reduce's bisection runs, which measure it too)."""
    res, doc, size = multinode_collectives(fleet, network, profile, pytestconfig)
    names = fleet.names
    rows = alltoall_rows(doc, "all hosts")
    t0 = profile.threshold("multinode_alltoall_busbw")
    bw = net.at_size(rows, parse_size(size))
    if bw is None:
        check.record(None, t0.expected, t0.unit, t0.source, details={"rows": rows})
        raise ProbeError(f"all hosts: no all-to-all at {size} (multinode_allreduce_busbw's size) in the run")
    t = nic_threshold(t0, fleet, network, names, doc, False, "all-to-all across nodes")
    cause, found = "", {}
    if not t.ok(bw):
        lo_t = profile.threshold("multinode_allreduce_busbw")
        # a pair's bound is of two nodes (N/(N-1) = 2): its own, by the same rule
        per_pair = {p: nic_threshold(t0, fleet, network, list(p), doc, False, "pairwise all-to-all")
                    for p in net.ring_pairs(names)}
        found = network.bisect(names, lo_t, multinode_args(profile, lo_t)[2],
                               pytestconfig.getoption("collective_timeout"),
                               figure=lambda p, d: net.at_size((d.get("ops") or {}).get("alltoall"),
                                                               parse_size(size)),
                               ok=lambda p, v: (per_pair.get(p) or t).ok(v))
        cause = net.describe_bisection(found).replace("pairwise busbw", "pairwise all-to-all busbw")
    check.expect(bw, t, f"{len(names)}-host all-to-all busbw at {size} ({doc['world_size']} ranks, "
                 f"{doc['backend']})", cause=cause,
                 details={"rows": rows, "allreduce_rows": doc["rows"], "bisection": found,
                          "launched": res.get("launched", "ssh"), "transports": route_of(res)})


@pytest.mark.usefixtures("fleet_of_class")
def test_rail_alltoall_busbw(fleet, network, profile, check, pytestconfig):
    """The all-to-all inside each rail (the ranks of one local index on every node, all rails at
    once: nccl-tests' NCCL_TESTS_SPLIT="MOD <GPUs per node>"): a slow rail is named, not averaged;
    after a miss, every ring pair's rails name the slow host or link of each slow rail."""
    res, doc, size = multinode_collectives(fleet, network, profile, pytestconfig)
    names = fleet.names
    errs = (doc.get("rail_errors") or {}).get("alltoall")
    if errs and doc["backend"] == "gloo":
        not_applicable(f"all hosts: gloo (torch {doc.get('torch')}) runs no all-to-all in a rail: {errs}")
    if errs:
        raise ProbeError(f"all hosts: the rails' all-to-all failed: {errs}")
    t = profile.threshold("rail_alltoall_busbw")
    rails = net.rail_figures(doc, parse_size(size))
    if not rails or any(v is None for v in rails.values()):
        check.record(None, t.expected, t.unit, t.source, details={"rails": doc.get("rails")})
        raise ProbeError(f"all hosts: no rail all-to-all at {size} (multinode_allreduce_busbw's size) "
                         f"for rail(s) {[r for r, v in rails.items() if v is None] or 'any'}")
    t = nic_threshold(t, fleet, network, names, doc, True, "rail all-to-all")
    if doc.get("rails_of"):  # one rank per node (a CPU host, a 1-GPU node): its one rail is the run
        check.note("one rank per node: the one rail is the all-to-all over every host, measured once")
    slow = {r: v for r, v in rails.items() if not t.ok(v)}
    bad, found = [], {}
    if slow:
        lo_t = profile.threshold("multinode_allreduce_busbw")
        for r in slow:
            def figure(p, d, r=r):
                return net.at_size(((d.get("rails") or {}).get("alltoall") or {}).get(r), parse_size(size))
            # a pair's rail holds one rank per node, as the whole rail: the same bound (b)
            found[r] = network.bisect(names, lo_t, multinode_args(profile, lo_t)[2],
                                      pytestconfig.getoption("collective_timeout"), figure=figure,
                                      ok=lambda p, v: t.ok(v))
            bad.append(f"rail {r} (local rank {r} of every node): {slow[r]:g} GB/s < {t.value:g}; "
                       f"{net.describe_bisection(found[r]).replace('pairwise busbw', 'pairwise rail busbw')}")
    worst = min(rails, key=rails.get)
    check.require(bad, rails[worst], f"every rail's all-to-all at {size} {t.expected} ({len(rails)} "
                  f"rail(s) of {len(names)} ranks)", t.source,
                  cause="the slow rail's NIC, cable or switch port on the host named (its own rail's "
                        "NIC: one rank per node, nothing to average over)",
                  details={"rails": rails, "rows": (doc.get("rails") or {}).get("alltoall"),
                           "bisection": found})


def across_nodes(op, t0, fleet, network, profile, check, pytestconfig, measure):
    """One collective over every rank of the multi-node run (all-gather, reduce-scatter, send/recv),
    judged at the all-reduce's size against t0: its figure, or by rule from what the nodes report
    (node_bound: the multi-node all-reduce's; nic_share: each rank's share of its node's NICs).
    After a miss, the all-reduce's bisection (every ring pair's 2-host all-reduce at that size, its
    threshold by the same rule over the pair) names the slow host or link: the same ring of NICs."""
    from signoff.interconnect.plots import OP_NAMES
    res, doc, size = multinode_collectives(fleet, network, profile, pytestconfig)
    names, what = fleet.names, OP_NAMES[op]
    err = (doc.get("op_errors") or {}).get(op)
    if err and doc["backend"] == "gloo":
        not_applicable(f"all hosts: gloo (torch {doc.get('torch')}) runs no {what}: {err}")
    if err:
        raise ProbeError(f"all hosts: the {what} across nodes failed: {err}")
    rows = doc["ops"][op]
    bw = net.at_size(rows, parse_size(size))
    if bw is None:
        check.record(None, t0.expected, t0.unit, t0.source, details={"rows": rows})
        raise ProbeError(f"all hosts: no {what} at {size} (multinode_allreduce_busbw's size) in the run")
    lo_t = profile.threshold("multinode_allreduce_busbw")
    bounds = {}
    if "node_bound" in (t0.extra.get("derived"), lo_t.extra.get("derived")):
        bounds = node_bounds(fleet, network, measure, names)  # cached: the all-reduce's own figures

    def bound(t, hosts):
        """t over these hosts: its figure, or by its rule from their NICs (and intra-node all-reduce)."""
        if t.extra.get("derived") == "node_bound":
            return net.node_bound_threshold(t, {n: bounds[n] for n in hosts})
        if t.extra.get("derived") == "nic_share":
            nccl = doc["backend"] == "nccl"
            nics = {n: net.node_nics(network.info(n), fleet.sessions[n].host.data_iface, nccl) for n in hosts}
            return net.nic_share_threshold(t, nics, doc["local_ranks"], what)
        return t
    t, cause, found = bound(t0, names), "", {}
    if not t.ok(bw):
        found = network.bisect(names, lo_t, multinode_args(profile, lo_t)[2],
                               pytestconfig.getoption("collective_timeout"),
                               ok=lambda p, v: bound(lo_t, list(p)).ok(v))
        cause = net.describe_bisection(found).replace("pairwise busbw", "pairwise all-reduce busbw")
    check.expect(bw, t, f"{len(names)}-host {what} busbw at {size} ({doc['world_size']} ranks, "
                 f"{doc['backend']})", cause=cause,
                 details={"rows": rows, "allreduce_rows": doc["rows"], "bisection": found,
                          "launched": res.get("launched", "ssh"), "transports": route_of(res)})


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_allgather_busbw(fleet, network, profile, check, pytestconfig, measure):
    """The all-gather over every rank across nodes, in the multi-node all-reduce's run."""
    t = profile.threshold("multinode_allgather_busbw")
    across_nodes("allgather", t, fleet, network, profile, check, pytestconfig, measure)


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_reduce_scatter_busbw(fleet, network, profile, check, pytestconfig, measure):
    """The reduce-scatter over every rank across nodes, in the multi-node all-reduce's run."""
    t = profile.threshold("multinode_reduce_scatter_busbw")
    across_nodes("reduce_scatter", t, fleet, network, profile, check, pytestconfig, measure)


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_sendrecv_busbw(fleet, network, profile, check, pytestconfig, measure):
    """Send/recv around the ring of every rank across nodes (nccl-tests' sendrecv: each rank to the
    next), in the multi-node all-reduce's run: the slowest node boundary sets its pace."""
    t = profile.threshold("multinode_sendrecv_busbw")
    across_nodes("sendrecv", t, fleet, network, profile, check, pytestconfig, measure)


@pytest.mark.usefixtures("fleet_of_class")
def test_multinode_collectives_correct(fleet, network, profile, check, pytestconfig):
    """Every collective of the multi-node run besides the all-reduce (all-gather, reduce-scatter,
    all-to-all, send/recv over every rank, the all-to-all inside each rail) returns exactly what its
    ranks sent, at every size; a wrong one names the host of each rank whose output was wrong."""
    from signoff.interconnect.plots import OP_NAMES
    res, doc, _ = multinode_collectives(fleet, network, profile, pytestconfig)
    errors = doc.get("op_errors") or {}
    ran = {op: rows for op, rows in doc["ops"].items() if op not in errors}
    if errors and doc["backend"] != "gloo":
        raise ProbeError("all hosts: " + "; ".join(f"the {OP_NAMES[o]} failed: {e}"
                                                   for o, e in sorted(errors.items())))
    if errors:
        check.note(f"not run on gloo: {'; '.join(f'{OP_NAMES[o]} ({e})' for o, e in sorted(errors.items()))}")
    if not ran:
        not_applicable(f"all hosts: no collective besides the all-reduce ran ({', '.join(errors)})")
    hosts = res.get("hosts") or {}
    wrong = net.wrong_across({"ops": ran, "rails": doc.get("rails")}, hosts, OP_NAMES)
    n = sum(len(r) for r in ran.values()) + sum(len(r) for rails in (doc.get("rails") or {}).values()
                                                 for r in rails.values())
    bad = net.wrong_hosts({"ops": ran, "rails": doc.get("rails")}, hosts)
    check.require(wrong, f"{n - len(wrong)}/{n} sizes exact across {len(fleet.names)} hosts",
                  "every collective across nodes returns exactly what its ranks sent", RULE,
                  cause=(f"host {', '.join(bad)}: its NIC, link or GPU corrupting data" if bad else
                         "a NIC, link or GPU corrupting data, or a rank of another run in the rendezvous"),
                  details={"ops": ran, "rails": doc.get("rails"), "wrong_hosts": bad})


def route_of(res: dict) -> dict:
    """The transport each host's ranks used in the run (route.py's record), for the details."""
    return {h: r.get("transports") or r.get("links") for h, r in (res.get("hosts") or {}).items()}
