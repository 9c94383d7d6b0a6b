"""Inter-node network, pure parts: host pairs and their rounds, the data interface's address
and port, line-rate sanity, and which host or link a set of verdicts blames."""

from __future__ import annotations

import re

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


def summarise(outcome: dict, names: list[str], first: str | None = None,
              killed: set | None = None, probe: str = "allreduce") -> dict:
    """One document for the collective; on failure, name the hosts that caused it:
    unreachable hosts, hosts whose probe never started, hosts whose ranks died of a signal
    we did not send; else, after a timeout, the hosts we stopped that had got least far
    (a hang), or the first host that failed. Hosts stopped after another failed are not
    blamed for it."""
    killed = killed or set()
    states, doc, culprits, progress = {}, None, [], {}
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
            doc = doc or parse_probe_output(name, probe, r)
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
        return {"ok": True, "doc": doc, "states": states}
    if not culprits and first:
        timed_out = re.search(r"time[ds]? ?out", states.get(first, ""), re.I)
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
