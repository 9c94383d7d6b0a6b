"""`signoff plan`'s time of the multi-node collectives' run, against --collective-timeout."""

from __future__ import annotations

from signoff import hostlist
from signoff.network import judge

# probe_allreduce's defaults: a collective's operations per size (one to check the sum,
# --warmup 5, --repeats 3 x --iters 20, the max over ranks); signoff passes none of them
OPS_PER_SIZE = 1 + 5 + 3 * 20 + 1
# the checks the multi-node all-reduce's run serves; those of another collective add it to the
# run (network/plugin.py multinode_ops), over the same sweep
OPS = {"multinode_alltoall_busbw": "alltoall", "rail_alltoall_busbw": "alltoall",
       "multinode_allgather_busbw": "allgather", "multinode_reduce_scatter_busbw": "reduce_scatter",
       "multinode_sendrecv_busbw": "sendrecv"}
# every check of that one run, in the sheet's order (acceptance/test_network.py)
MULTINODE = ("multinode_allreduce", "multinode_transport", *OPS, "multinode_collectives_correct")


def sweep_seconds(lo: str, hi: str, hosts: dict[str, int], gbps: float, ops=(), at=None) -> float:
    """At least how long the multi-node all-reduce's run takes: OPS_PER_SIZE collectives of every
    size of the sweep (doubling, as probe_allreduce), each moving what nccl-tests' busbw factor
    says over the slowest node's NICs at their full rate (hosts: name -> ranks); and `ops`, the
    other collectives of the run: the all-to-all over the same sweep (inside each rail too where a
    node has several ranks), the others at `at` alone (network/plugin.py: --op-size), else swept."""
    from signoff.units import parse_size
    ranks, nodes = sum(hosts.values()), len(hosts)
    per = max(hosts.values())
    rate = gbps / 8 * 1e9  # bytes/s

    def others(size):  # all-gather, reduce-scatter: (n-1)/n; send/recv: one buffer a boundary
        return (sum(size * (ranks - 1) / ranks for op in ("allgather", "reduce_scatter") if op in ops)
                + (size if "sendrecv" in ops else 0))
    size, hi_b, moved = parse_size(lo), parse_size(hi), 0.0
    while size <= hi_b:
        moved += size * 2 * (ranks - 1) / ranks  # the all-reduce's ring: busbw factor 2(n-1)/n
        if "alltoall" in ops:
            moved += per * size * (ranks - per) / ranks  # what leaves a node of `per` ranks
            if per > 1:
                moved += per * size * (nodes - 1) / nodes  # every rail at once
        moved += 0 if at else others(size)
        size *= 2
    moved += others(parse_size(at)) if at else 0
    return OPS_PER_SIZE * moved / rate


def timing(config, prof, picked: set[str], inventory, facts: dict) -> tuple[list[str], list[tuple]]:
    """The multi-node all-reduce's run against --collective-timeout, from its sweep and the hosts'
    line rates (their sysinfo): (a long-measurement line, the preflight warning where it cannot
    finish in time: the run's ERROR, killed at the timeout)."""
    t = prof.criteria.get("multinode_allreduce_busbw") if prof else None
    names = [h.name for h in inventory.hosts]
    if t is None or len(names) < 2 or not picked & set(MULTINODE) or "sweep" not in t.extra:
        return [], []
    lo, hi = t.extra["sweep"]
    timeout = config.getoption("collective_timeout")
    ranks, rates = {}, {}
    for h in inventory.hosts:
        f = facts.get(h.name)
        pf = (f.get("preflight") or {}) if isinstance(f, dict) else {}
        if "ethernet" not in pf:
            continue
        gpus = len((f.get("nvidia") or {}).get("gpus") or [])
        ranks[h.name] = gpus or 1
        nics = judge.node_nics({"ethernet": pf["ethernet"], "infiniband": pf.get("infiniband") or []},
                               h.data_iface, bool(gpus))
        rates[h.name] = nics["gbps"]
    if len(ranks) < 2 or not all(rates.values()):
        return [f"multi-node all-reduce: the {lo}-{hi} sweep's time unknown: no line rate read on "
                f"{hostlist.fold([n for n in names if not rates.get(n)])}"], []
    slow = min(rates, key=rates.get)
    ops = sorted({OPS[c] for c in picked if c in OPS})
    secs = sweep_seconds(lo, hi, ranks, rates[slow], ops, t.extra.get("size"))
    also = f" (and {', '.join(ops)})" if ops else ""
    what = (f"the {lo}-{hi} sweep{also} over {len(ranks)} hosts "
            f"({sum(ranks.values())} ranks) at {rates[slow]:g} Gb/s ({slow}'s line rate, the slowest)")
    line = (f"multi-node all-reduce: {what}: at least {secs:.0f} s of --collective-timeout {timeout} s "
            f"({OPS_PER_SIZE} collectives a size at the full line rate)")
    if secs <= timeout:
        return [line], []
    checks = ", ".join(c for c in MULTINODE if c in picked)
    return [line], [("all hosts", f"{checks} ERROR: {what} takes at least {secs:.0f} s, more than "
                                  f"--collective-timeout {timeout} s: the run is killed at it; raise it or "
                                  f"shorten multinode_allreduce_busbw.sweep")]
