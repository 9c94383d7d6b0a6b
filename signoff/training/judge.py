"""Training judgement as pure functions of the probes' documents."""

from __future__ import annotations

import math
from statistics import median

SATURATED = 0.95  # a worker count within 5 % of the best rate delivers what more workers would


def loss_ratio(losses: list[float]) -> float | None:
    """Mean loss of the last quarter of the steps / the first step's loss; None if any loss is
    not finite (a GPU computing garbage, a diverged step)."""
    if not losses or not all(math.isfinite(v) for v in losses) or losses[0] <= 0:
        return None
    tail = losses[-max(1, len(losses) // 4):]
    return round(sum(tail) / len(tail) / losses[0], 4)


def efficiency(rows: list[dict]) -> dict[int, float]:
    """efficiency(n) = tokens/s at n ranks / (n x tokens/s at 1 rank)."""
    one = next((r for r in rows if r["ranks"] == 1), None)
    if not one:
        return {}
    return {r["ranks"]: round(r["tokens_per_s"] / (r["ranks"] * one["tokens_per_s"]), 4) for r in rows}


def stragglers(row: dict, what: str = "rank") -> list[str]:
    """Ranks whose own step (no gradient sync) is 10 % slower than the median rank's."""
    own = row.get("compute_s") or []
    if len(own) < 2:
        return []
    mid = median(own)
    return [f"{what} {i} steps in {t * 1e3:.1f} ms alone vs the median {mid * 1e3:.1f} ms"
            for i, t in enumerate(own) if t > 1.1 * mid]


def scaling_cause(row: dict, one: dict, placement: list[str]) -> str:
    """Why the step at full width falls short: waiting on the gradient all-reduce, a slow
    rank, or ranks slower alone than the 1-rank step (shared CPU, power, host placement)."""
    why = []
    if row["comm_share"] >= 0.1:
        why.append(f"{row['comm_share']:.0%} of the step waits on the gradient all-reduce "
                   f"(see allreduce_busbw, gpu_topology, nccl_transport)")
    why += stragglers(row)
    alone = max(row.get("compute_s") or [0])
    if one and alone > 1.1 * one["step_s"]:
        why.append(f"each rank alone steps in {alone * 1e3:.1f} ms at {row['ranks']} ranks vs "
                   f"{one['step_s'] * 1e3:.1f} ms as the only rank: shared CPU cores, memory "
                   f"bandwidth or power")
    return "; ".join(why + placement)


def placement(hostlink: dict | None) -> list[str]:
    """GPUs whose NUMA node is not where the process ran (from probe_hostlink)."""
    return [f"GPU {g['index']} is on NUMA node {g['numa_node']} (CPUs {g['local_cpus']}) but the "
            f"process ran on CPUs {hostlink['process_cpus']}"
            for g in (hostlink or {}).get("gpus", []) if g.get("process_on_gpu_node") is False]


def saturation(rows: list[dict]) -> tuple[float, int]:
    """The best samples/s over worker counts, and the fewest workers within SATURATED of it."""
    best = max(r["samples_per_s"] for r in rows)
    return best, min(r["workers"] for r in rows if r["samples_per_s"] >= SATURATED * best)


def slowest_link(gpus: list[dict]) -> tuple[float, str]:
    """The slowest pinned copy of any GPU, and which one it was."""
    worst = min(((g[k], f"GPU {g['index']} {k.replace('_pinned', '').upper()} pinned")
                 for g in gpus for k in ("h2d_pinned", "d2h_pinned")), key=lambda x: x[0])
    return worst


def node_efficiency(multi: dict, alone: dict[str, dict]) -> float:
    """Tokens/s of the step over these nodes / the sum of each node's tokens/s alone (at the
    same ranks per node): 1.0 is linear scaling."""
    return round(multi["tokens_per_s"] / sum(r["tokens_per_s"] for r in alone.values()), 4)


DDP_BUCKET = 25 << 20  # torch DDP's bucket_cap_mb default (25 MiB): one all-reduce per bucket


def step_bound(step_s: float, params: int, rows: list[dict],
               floor: float | None = None) -> tuple[float, float, str]:
    """(efficiency, t_ar, how): what a data-parallel step reaches over nodes when it cannot overlap
    its gradient all-reduce at all, t_c / (t_c + t_ar): t_c the node's own step (`step_s`), t_ar
    its fp32 gradients (4 bytes a parameter) all-reduced bucket by bucket, each at the time the
    multi-node all-reduce of the same run took for a message of the bucket's size (`rows`: its
    sweep; latency included). Above the sweep's largest size, that size's time scaled by bytes."""
    grads = params * 4
    size = min(grads, DDP_BUCKET)
    row = min((r for r in rows if r["bytes"] >= size), key=lambda r: r["bytes"], default=None)
    if row is None:
        row = max(rows, key=lambda r: r["bytes"])
    # `floor` (GB/s busbw, the multi-node all-reduce's threshold): each message at that floor
    # (time x busbw is its bytes x 2(n-1)/n), never at the run's own figure, which a slowed
    # network lowered along with the bound it set (issue 45: a slowed all-reduce PASSed the step)
    judged = bool(floor and row.get("busbw"))
    at = row["busbw"] / floor if judged else 1.0
    t_one = row["time_us"] * at / 1e6 * max(1.0, size / row["bytes"])
    t_ar = t_one * grads / size
    how = (f"{grads / 1e6:.1f} MB fp32 gradients in {grads / size:.3g} bucket(s) of "
           f"{size / (1 << 20):.3g} MiB at {t_one * 1e3:.3g} ms each (the multi-node all-reduce of "
           f"{row['bytes'] / (1 << 20):.3g} MiB "
           + (f"at its threshold's {floor:g} GB/s busbw)" if judged else "in this run)"))
    return round(step_s / (step_s + t_ar), 4), t_ar, how


# A node's own step (no gradient sync) this much above the others' median is a straggler; below
# it, the ranks' pace differs by noise (other processes on a host's cores), which named a node at
# random where a link was slow (issue 51 item 19: lab2 named, lab3's link slowed).
STRAGGLER = 1.25
# The scaling efficiency falling by more than this share when nodes join names the nodes that joined.
EFFICIENCY_DROP = 0.10


def slowest_node(per_node: dict[int, dict[str, float]], eff: dict[int, float]) -> tuple[str | None, str]:
    """(the node the step's figures show slowest, why), or (None, why none stands out).
    `per_node`: per node count k, each node's own step time without gradient sync (compute_s);
    `eff`: per node count, the scaling efficiency of the step over the first k nodes. A node is
    slowest by its own step only where that stands out from the others' (STRAGGLER): a slow link
    does not slow a node's own step, it slows every node's synced one. Else by the efficiency:
    the node that joined where it fell (a slow link or NIC slows every run it is part of)."""
    n = max(per_node)
    own = per_node[n]
    top = max(own, key=own.get)
    rest = [v for k, v in own.items() if k != top]
    if rest and median(rest) > 0 and own[top] > STRAGGLER * median(rest):
        return top, (f"slowest node {top}: {own[top] * 1e3:.1f} ms per step without gradient sync, "
                     f"{own[top] / median(rest):.2f} x the other nodes' median")
    counts = sorted(k for k in eff if k in per_node)
    drops = [(eff[a] - eff[b], a, b) for a, b in zip(counts, counts[1:]) if eff[a] > 0]
    drop, a, b = max(drops, default=(0.0, None, None))
    if a is not None and drop > EFFICIENCY_DROP * eff[a]:
        joined = [x for x in per_node[b] if x not in per_node[a]]
        who = joined[0] if len(joined) == 1 else None
        said = who or f"one of {', '.join(joined)}"
        return who, (f"slowest node {said}: the scaling efficiency fell from {eff[a]:g} over {a} nodes to "
                     f"{eff[b]:g} over {b} when it joined: its link or NIC (its own step within "
                     f"{STRAGGLER:g} x the others')")
    return None, (f"no node stands out: each node's own step within {STRAGGLER:g} x the others' median "
                  f"({max(own.values()) * 1e3:.1f} ms the slowest)")
