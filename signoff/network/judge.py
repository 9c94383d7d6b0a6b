"""Inter-node network, pure parts: host pairs and their rounds, the data interface's address
and port, line-rate sanity, and which host or link a set of verdicts blames."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from signoff import outlier, retry
from signoff.fleet import ProbeError, last_document, parse_probe_output
from signoff.transport import HostUnreachable


def ring_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Each host sends to the next, so every host's transmit and receive paths are measured:
    two hosts make two pairs, one each way (one pair would never measure B's transmit)."""
    if len(names) < 2:
        return []
    return [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]



def all_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Every pair once, listed round by round (the circle method of a round-robin
    tournament), so that rounds() packs them into N-1 rounds (N even) or N (N odd)."""
    slots: list = list(range(len(names))) + ([None] if len(names) % 2 else [])
    out = []
    for _ in range(len(slots) - 1):
        for i in range(len(slots) // 2):
            a, b = slots[i], slots[-1 - i]
            if a is not None and b is not None:
                out.append((names[min(a, b)], names[max(a, b)]))
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return out



# Default cap of --net-pairs all: 64 hosts' pairs. Each pair is a check of its own (a test, a
# record, a row), so all pairs of 1,000 hosts would be half a million of them.
NET_PAIRS_MAX = 64 * 63 // 2



PAIR_DURATION_S = 5  # net_pair_bandwidth.duration where the profile sets none



def all_pairs_cost(hosts: int) -> tuple[int, int]:
    """(pairs, rounds) of --net-pairs all: each host is in N-1 pairs, one per round."""
    return hosts * (hosts - 1) // 2, 0 if hosts < 2 else hosts - 1 + hosts % 2



def rounds(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Pairs that share no host run in the same round: a ring of N costs 2-3 rounds, not N."""
    out: list[list[tuple[str, str]]] = []
    busy: list[set[str]] = []  # the hosts of each round
    for p in pairs:
        for r, b in zip(out, busy):
            if not b & set(p):
                r.append(p)
                b.update(p)
                break
        else:
            out.append([p])
            busy.append(set(p))
    return out



def pair_figure(res: dict, unit: str):
    """The figure net_pair_bandwidth judges: Gb/s, or the share of line rate."""
    return res["gbps"] if unit == "Gb/s" else res["fraction"]


def judged(tries: list, t):
    """The retry policy over a pair's attempts so far: the judged result (every attempt's figure
    kept), or None while it wants another attempt. An error ends the pair's attempts and is its
    result: a host or tool that broke is not noise."""
    if isinstance(tries[-1], Exception):
        return retry.broke(tries[-1], [pair_figure(r, t.unit) for r in tries[:-1]])
    figure = lambda r: pair_figure(r, t.unit)  # noqa: E731
    if figure(tries[-1]) is None:  # no line rate to share: not noise, the check ERRORs saying so
        return tries[-1]
    if retry.wants_more(tries, figure, t):
        return None
    return retry.kept(*retry.best(tries, figure, t))


def again_rounds(tries: dict, t) -> list[list[tuple[str, str]]]:
    """The pairs to measure again, in disjoint rounds (a host in one pair at a time)."""
    return rounds([p for p, docs in tries.items() if judged(docs, t) is None])


def pair_tool(have: dict[str, dict], rdma: dict[str, dict | None], want: str) -> tuple[str, list[str]]:
    """(the tool of a pair, or of one host for the preflight; the hosts lacking a tool the profile
    names): per host its installed tools (netinfo's) and the RDMA port behind its data interface.
    NetworkRun.tool says why."""
    if want == "auto" and all(t["ib_write_bw"] and rdma[h] for h, t in have.items()):
        return "ib_write_bw", []
    if want in ("iperf3", "ib_write_bw"):
        return want, [h for h, t in have.items() if not t[want]]
    return ("iperf3" if want == "auto" and all(t["iperf3"] for t in have.values()) else "builtin"), []


# test_nic_link's N.A. on one host without a data interface, said by the preflight too
NO_IFACE_SINGLE = "single host and no data_iface named in the inventory"


def ib_fabric(profile) -> bool:
    """nic_rate names an InfiniBand fabric (`fabric: infiniband`, a class's or a derived rule's):
    nic_link judges every RDMA port sysfs lists, with or without a data interface."""
    t = profile.criteria.get("nic_rate") if profile else None
    return bool(t) and t.extra.get("fabric") == "infiniband"


def pair_id(a: str, b: str) -> str:
    return f"{a}->{b}"



def data_port(netinfo: dict, iface: str) -> dict | None:
    return next((p for p in netinfo["ethernet"] if p["name"] == iface), None)



def data_address(host: str, netinfo: dict, iface: str | None) -> str:
    """The IPv4 address of the interface the inventory names; never guessed."""
    if not iface:
        raise ProbeError(f"{host}: no data interface named: set data_iface for this host in the "
                         f"inventory (the network is measured only on an interface you name)")
    port = data_port(netinfo, iface)
    if port is None:
        names = ", ".join(p["name"] for p in netinfo["ethernet"])
        raise ProbeError(f"{host}: data_iface {iface} does not exist (interfaces: {names})")
    if not port["addresses"]:
        raise ProbeError(f"{host}: data_iface {iface} has no IPv4 address")
    return port["addresses"][0]



# A host pair cannot carry more than its line rate; a fraction above it means the line rate
# or the measurement is wrong (a virtual interface's nominal speed, another card measured).
# 5 % allows for the tools' own timing over a run of a few seconds.
LINE_RATE_TOLERANCE = 1.05



def rdma_port(netinfo: dict, iface: str) -> dict | None:
    """The InfiniBand/RoCE port behind the data interface (netinfo maps netdev -> card)."""
    port = data_port(netinfo, iface)
    if not port or not port.get("ib_device"):
        return None
    return next((p for p in netinfo["infiniband"]
                 if p["device"] == port["ib_device"] and p["port"] == port["ib_port"]), None)



def suspects(pair_ok: dict[tuple[str, str], bool]) -> tuple[list[str], list[tuple[str, str]]]:
    """From pairwise verdicts: hosts all of whose pairs failed, and failing pairs not
    explained by such a host (a bad link between two otherwise good hosts)."""
    hosts = {h for p in pair_ok for h in p}
    bad_hosts = sorted(h for h in hosts
                       if all(not ok for p, ok in pair_ok.items() if h in p)
                       and any(h in p for p in pair_ok))
    bad_links = [p for p, ok in pair_ok.items() if not ok and not set(p) & set(bad_hosts)]
    return bad_hosts, bad_links



def slow_nics(pair: tuple[str, str], rates: dict[str, float | None], t) -> list[str]:
    """Each end of `pair` whose host's line rate (its NIC's negotiated rate, Gb/s) is a fleet
    outlier among the hosts' (signoff/outlier.py): a pair judged against its own line rate, or
    against pairs of which most share that host (3 hosts: 2 of 3 pairs), cannot show it."""
    out = []
    for h in dict.fromkeys(pair):
        res = outlier.compare(h, rates, t.fleet_min, t.profile)
        if res["status"] == "outlier":
            out.append(f"{h}'s NIC line rate {rates[h]:g} Gb/s is {outlier.describe(res, 'Gb/s')}")
    return out


def pair_cause(pair: tuple[str, str], pairs: list, figures: dict, t) -> str:
    """A slow pair's likely cause: a host all of whose pairs are slow (below the threshold or
    fleet outliers: signoff/outlier.py), else this path's link, NIC, cable or switch port."""
    def ok(p):
        v = figures.get(pair_id(*p))
        return v is not None and t.ok(v) and \
            outlier.compare(pair_id(*p), figures, t.fleet_min)["status"] != "outlier"
    hosts, _ = suspects({p: ok(p) for p in pairs if pair_id(*p) in figures})
    mine = [h for h in hosts if h in pair]
    if mine:
        return f"host {', '.join(mine)}: every pair of {'it' if len(mine) == 1 else 'them'} is slow " \
               f"(its NIC, cable or switch port)"
    return "a slow link, NIC, cable or switch port on this path"


# what each host's document says of the transport between nodes (route.judge reads them)
ROUTE_KEYS = ("backend", "local_ranks", "node_rank", "transports", "nccl_net", "links", "nccl_env")


def summarise(outcome: dict, names: list[str], first: str | None = None,
              killed: set | None = None, probe: str = "allreduce") -> dict:
    """One document for the collective; on failure, name the hosts that caused it:
    unreachable hosts, hosts whose probe never started, hosts whose ranks died of a signal
    we did not send; else, after a timeout, the hosts we stopped that had got least far
    (a hang), or the first host that failed. Hosts stopped after another failed are not
    blamed for it."""
    killed = killed or set()
    states, doc, culprits, progress = {}, None, [], {}
    beside = {}  # each host's other processes on its GPUs (signoff/cotenants.py), where sampled
    routes = {}  # each host's record of the transport its ranks used (route.py)
    for name in names:
        r = outcome[name]
        if isinstance(r, (HostUnreachable, ProbeError)):
            states[name] = f"unreachable: {r.cause}" if isinstance(r, HostUnreachable) else str(r)
            culprits.append(name)
            continue
        started, joined = "signoff-event started" in r.stderr, "signoff-event joined" in r.stderr
        progress[name] = started + joined
        reached = ["the probe never started", "never joined the rendezvous", "joined"][progress[name]]
        own = (last_document(r.stdout) or {}).get("error")  # the probe's own words first
        if r.ok:
            own_doc = parse_probe_output(name, probe, r)
            doc = doc or own_doc
            routes[name] = {k: own_doc[k] for k in ROUTE_KEYS if k in own_doc}
            if own_doc.get("cotenants") is not None:
                beside[name] = [{**e, "host": name} for e in own_doc["cotenants"]]
            states[name] = "ok"
        elif name in killed:
            states[name] = f"{reached}; stopped by signoff after {first} failed"
        elif not started:
            states[name] = f"{reached} (exit {r.rc}): {own or r.stderr.strip()[-200:]}"
            culprits.append(name)
        elif r.timed_out:
            states[name] = f"{reached}; killed"
            culprits.append(name)
        else:
            tail = [ln for ln in r.stderr.strip().splitlines()
                    if ln and not ln.startswith("signoff-event")][-1:]
            last = re.sub(r"\s+", " ", own or (tail[0] if tail else f"exit {r.rc}"))[:200]
            states[name] = (f"exit {r.rc} after joining: {last}" if joined
                            else f"exit {r.rc} before joining: {last}")
    if doc and all(v == "ok" for v in states.values()):
        return {"ok": True, "doc": doc, "states": states, "hosts": routes,
                **({"cotenants": [e for es in beside.values() for e in es]} if beside else {})}
    if not culprits and first:
        # a rank that lost its connection to the store or a peer ("Failed to recv, got 0 bytes")
        # is told of another's end, as one whose rendezvous timed out is told of a hang: under
        # load the store's node ending its timed-out ranks could reach the controller after it
        timed_out = re.search(r"time[ds]? ?out|got 0 bytes|connection (was likely closed|reset)",
                              states.get(first, ""), re.I)
        every = len(names) > 1 and all(re.search(r"time[ds]? ?out", states.get(n, ""), re.I) for n in names)
        if timed_out and killed:  # a hang: the stopped hosts that got least far
            least = min(progress.get(k, 0) for k in killed)
            culprits = sorted(k for k in killed if progress.get(k, 0) == least)
        elif not every:  # every rank's watchdog fired: whoever said so first is not the cause
            culprits = [first]
    return {"ok": False, "started": True, "states": states, "culprits": culprits, "not_run": []}


def describe_bisection(found: dict) -> str:
    parts = [f"slow host {h}" for h in found["slow_hosts"]]
    parts += [f"slow link {p}" for p in found["slow_links"]]
    pairs = ", ".join(f"{p} {bw if bw is not None else 'failed'}" for p, bw in found["pairs"].items())
    return (" and ".join(parts) or "no single pair is slow (congestion or a collective problem)") + \
        f" (pairwise busbw GB/s: {pairs})"


# --- derived thresholds: where the class fixes no NIC, what the hosts report (docs/thresholds.md)


def most_common(values):
    """The value most of `values` take; a tie goes to the highest (a degraded link is the lower)."""
    counts = Counter(v for v in values if v is not None)
    return max(counts, key=lambda v: (counts[v], v)) if counts else None


def nic_ports(info: dict, iface: str | None, fabric: str | None = None) -> tuple[str, list[dict]]:
    """The ports nic_rate's fleet_rate rule judges on one host, and their fabric: every RDMA port
    (sysfs infiniband) where the profile says infiniband or the data interface sits on one, else
    the data interface. Each {"name", "up", "gbps"} (gbps None: no rate reported)."""
    fabric = fabric or ("infiniband" if iface and rdma_port(info, iface) else "ethernet")
    if fabric == "infiniband":
        return fabric, [{"name": f"{p['device']} port {p['port']}", "up": "ACTIVE" in (p["state"] or ""),
                         "gbps": p["rate_gbps"]} for p in info["infiniband"]]
    port = data_port(info, iface) if iface else None
    return fabric, [] if port is None else [
        {"name": iface, "up": port["operstate"] == "up",
         "gbps": port["speed_mbps"] / 1000 if port.get("speed_mbps") else None}]


def fleet_rate(name: str, ports: dict[str, tuple[str, list[dict]]], t) -> dict:
    """nic_rate by rule fleet_rate: host `name`'s ports (nic_ports; `ports` holds every host of
    the run measured, this one's among them) are each up at >= t.value x the rate most up ports of
    that fabric in the run run at, and at least t.extra["ports"] of them are up, else as many as
    most hosts have up. A single host is compared with its own ports. Returns {"bad": [...],
    "measured": its slowest up port (Gb/s), "expected": the rule with its figures, "threshold":
    t with the derived Gb/s figure}."""
    fabric, mine = ports[name]
    same = {h: ps for h, (f, ps) in ports.items() if f == fabric}
    rates = [p["gbps"] for ps in same.values() for p in ps if p["up"]]
    common = most_common(rates)
    if common is None:
        raise ProbeError(f"{name}: no {fabric} port of the {len(same)} host(s) measured is up with a rate "
                         f"(sysfs): nic_rate's fleet_rate rule has no rate to judge against")
    counts = [sum(p["up"] for p in ps) for ps in same.values()]
    want = t.extra.get("ports") or most_common(counts)
    at = sum(1 for r in rates if r == common)
    derived = replace(t, value=round(t.value * common, 3), unit="Gb/s")
    up = [p for p in mine if p["up"]]
    bad = [f"{p['name']} reports no rate" if p["gbps"] is None else f"{p['name']} at {p['gbps']:g} Gb/s"
           for p in up if not derived.ok(p["gbps"] or 0)]
    if len(up) < want:
        whose = "the profile's ports" if t.extra.get("ports") else \
            f"as most of the {len(same)} host(s) have"
        down = [p["name"] for p in mine if not p["up"]]
        bad.append(f"{len(up)} of {want} {fabric} ports up ({whose})"
                   + (f"; down: {', '.join(down)}" if down else ""))
    expected = (f"{want} {fabric} port(s) up at >= {derived.value:g} Gb/s ({t.value:g} x {common:g} Gb/s, "
                f"the rate {at} of the run's {len(rates)} up {fabric} ports run at)")
    return {"bad": bad, "measured": min((p["gbps"] or 0 for p in up), default=0), "expected": expected,
            "threshold": derived, "fabric": fabric, "common_gbps": common, "ports_up": want}


def node_nics(info: dict, iface: str | None, nccl: bool) -> dict:
    """What the multi-node all-reduce leaves one node by: with NCCL, every ACTIVE RDMA port with a
    rate (NCCL spreads its channels over each); else, or where there is none, the data interface
    (its RDMA port's rate, else its speed): {"nics", "gbps" (all of them), "what"}."""
    ib = [p for p in info["infiniband"] if "ACTIVE" in (p["state"] or "") and p["rate_gbps"]] if nccl else []
    if ib:
        rates = "/".join(sorted({f"{p['rate_gbps']:g}" for p in ib}))
        return {"nics": len(ib), "gbps": sum(p["rate_gbps"] for p in ib),
                "what": f"{len(ib)} RDMA port(s) x {rates} Gb/s"}
    port = rdma_port(info, iface) if iface else None
    gbps = port["rate_gbps"] if port and port.get("rate_gbps") else None
    if gbps is None:
        eth = data_port(info, iface) if iface else None
        gbps = eth["speed_mbps"] / 1000 if eth and eth.get("speed_mbps") else None
    return {"nics": 1 if gbps else 0, "gbps": gbps, "what": f"data interface {iface} at {gbps:g} Gb/s"
            if gbps else f"data interface {iface}: no rate reported"}


def node_bound(nics: dict, intra: float | None) -> float | None:
    """A node's bound on the multi-node all-reduce busbw, GB/s: min(its intra-node all-reduce
    busbw (None on a one-GPU node: nothing within it), its NICs' rate / 8); None without a NIC
    rate."""
    if not nics["gbps"]:
        return None
    return round(min(nics["gbps"] / 8, intra if intra else float("inf")), 3)


def node_bound_threshold(t, bounds: dict[str, dict]):
    """multinode_allreduce_busbw by rule node_bound: t.value x the lowest node's bound (bounds:
    name -> {"nics": node_nics(), "intra": GB/s or None}), as a threshold in GB/s whose source
    states the figures. A node without a NIC rate: ProbeError naming it."""
    none = [n for n, b in bounds.items() if node_bound(b["nics"], b["intra"]) is None]
    if none:
        raise ProbeError(f"{', '.join(none)}: no NIC rate reported (sysfs) for the multi-node all-reduce's "
                         f"node_bound rule: {'; '.join(bounds[n]['nics']['what'] for n in none)}")
    low = min(bounds, key=lambda n: node_bound(bounds[n]["nics"], bounds[n]["intra"]))
    b = bounds[low]
    value = node_bound(b["nics"], b["intra"])
    intra = f"intra-node all-reduce {b['intra']:g} GB/s" if b["intra"] else \
        "no intra-node all-reduce (one rank)"
    rule = (f"derived: {t.value:g} x {value:g} GB/s, the lowest node's bound ({low}: min({intra}, "
            f"{b['nics']['what']} / 8 = {b['nics']['gbps'] / 8:g} GB/s))")
    return replace(t, value=round(t.value * value, 3), unit="GB/s", source=f"{rule}; {t.source}")



# --- the all-to-all across nodes (probe_allreduce --op alltoall --rail-split alltoall) -----------


def alltoall_bound(nics: dict, local_ranks: int, nnodes: int, nranks: int) -> float | None:
    """A node's bound on an all-to-all's busbw across `nnodes` nodes of `nranks` ranks, GB/s: its
    ranks' share of its NICs b = NICs' rate / 8 / local ranks, x N/(N-1) (the traffic that stays
    inside a node: NVIDIA/nccl-tests issues 130, 267, "N/(N-1)x the bandwidth per GPU") x (n-1)/n
    (nccl-tests' busbw factor). One rank per node (a rail): b. None without a NIC rate."""
    if not nics.get("gbps") or nnodes < 2:
        return None
    b = nics["gbps"] / 8 / max(local_ranks, 1)
    return round(b * nnodes / (nnodes - 1) * (nranks - 1) / nranks, 3)


def nic_bound_threshold(t, nics: dict[str, dict], local_ranks: int, nranks_per_node: int, what: str):
    """multinode_alltoall_busbw / rail_alltoall_busbw by rule nic_bound: t.value x the lowest node's
    alltoall_bound over these nodes (nics: name -> node_nics()), local_ranks: the ranks per node that
    share its NICs, nranks_per_node: the ranks of the collective per node (1 in a rail), as a
    threshold in GB/s whose source states the figures. A node without a NIC rate: ProbeError."""
    n = len(nics)
    none = [h for h, x in nics.items() if not x.get("gbps")]
    if none:
        raise ProbeError(f"{', '.join(none)}: no NIC rate reported (sysfs) for the {what}'s nic_bound rule: "
                         f"{'; '.join(nics[h]['what'] for h in none)}")
    low = min(nics, key=lambda h: nics[h]["gbps"])
    value = alltoall_bound(nics[low], local_ranks, n, n * nranks_per_node)
    ranks = n * nranks_per_node
    rule = (f"derived: {t.value:g} x {value:g} GB/s, the lowest node's bound ({low}: {nics[low]['what']} "
            f"/ 8 / {local_ranks} rank(s) x {n}/{n - 1} nodes x ({ranks}-1)/{ranks} ranks)")
    return replace(t, value=round(t.value * value, 3), unit="GB/s", source=f"{rule}; {t.source}")


def at_size(rows, nbytes: int):
    return next((r["busbw"] for r in rows or [] if r["bytes"] == nbytes), None)


def rail_figures(doc: dict, nbytes: int) -> dict[str, float | None]:
    """Each rail's all-to-all busbw at `nbytes` (the doc's rails), by local index."""
    rails = ((doc.get("rails") or {}).get("alltoall") or {}).items()
    return {r: at_size(rows, nbytes) for r, rows in sorted(rails, key=lambda kv: int(kv[0]))}


# --- the other collectives across nodes (probe_allreduce --op allgather,reduce_scatter,sendrecv) ---


def nic_share_threshold(t, nics: dict[str, dict], local_ranks: int, what: str):
    """multinode_sendrecv_busbw by rule nic_share: t.value x the lowest node's NIC share per rank
    (its NICs' rate / 8 / local_ranks, GB/s; nics: name -> node_nics()): around the ring one rank's
    whole buffer crosses each node boundary, through its share of that node's NICs, and nccl-tests'
    send/recv busbw is its algbw (factor 1). A node without a NIC rate: ProbeError naming it."""
    none = [h for h, x in nics.items() if not x.get("gbps")]
    if none:
        raise ProbeError(f"{', '.join(none)}: no NIC rate reported (sysfs) for the {what}'s nic_share rule: "
                         f"{'; '.join(nics[h]['what'] for h in none)}")
    low = min(nics, key=lambda h: nics[h]["gbps"])
    value = round(nics[low]["gbps"] / 8 / max(local_ranks, 1), 3)
    rule = (f"derived: {t.value:g} x {value:g} GB/s, the lowest node's NIC share per rank ({low}: "
            f"{nics[low]['what']} / 8 / {local_ranks} rank(s))")
    return replace(t, value=round(t.value * value, 3), unit="GB/s", source=f"{rule}; {t.source}")


def wrong_across(doc: dict, hosts: dict[str, dict], names: dict[str, str]) -> list[str]:
    """Every collective's size across nodes whose output was not exact (the doc's `ops` and each
    rail's), naming the hosts of the ranks whose output was wrong (rows' wrong_ranks: rank //
    local_ranks is the node; hosts: name -> its document's node_rank, local_ranks, as summarise()
    keeps them), e.g. `wrong all-gather at 1M on lab2 (rank 1)`; names: op -> what a check calls it."""
    from signoff.units import human_bytes
    node = {h.get("node_rank"): n for n, h in hosts.items()}
    per = next((h.get("local_ranks") for h in hosts.values() if h.get("local_ranks")), 1)

    def whose(r):
        who: dict[str, list[str]] = {}
        for k in r.get("wrong_ranks") or []:
            who.setdefault(node.get(k // per, f"node {k // per}"), []).append(str(k))
        if not who:
            return " (which rank's output: not said by the probe)"
        return "".join(f" on {h} (rank{'s' if len(ks) > 1 else ''} {', '.join(ks)})" for h, ks in who.items())
    out = [f"wrong {names.get(op, op)} at {human_bytes(r['bytes'])}{whose(r)}"
           for op, rows in sorted((doc.get("ops") or {}).items()) for r in rows if not r["correct"]]
    out += [f"wrong {names.get(op, op)} at {human_bytes(r['bytes'])} in rail {rail}{whose(r)}"
            for op, rails in sorted((doc.get("rails") or {}).items())
            for rail, rows in sorted(rails.items(), key=lambda kv: int(kv[0]))
            for r in rows if not r["correct"]]
    return out


def wrong_hosts(doc: dict, hosts: dict[str, dict]) -> list[str]:
    """The hosts of every rank whose output was wrong in the run (wrong_across's), sorted."""
    per = next((h.get("local_ranks") for h in hosts.values() if h.get("local_ranks")), 1)
    node = {h.get("node_rank"): n for n, h in hosts.items()}
    rows = [r for rs in (doc.get("ops") or {}).values() for r in rs]
    rows += [r for rails in (doc.get("rails") or {}).values() for rs in rails.values() for r in rs]
    return sorted({node.get(k // per, f"node {k // per}") for r in rows for k in r.get("wrong_ranks") or []})
