"""Intra-node interconnect, the controller: each measurement's probe on one host, behind the
gates its checks apply, so that Fleet.measured runs it on every selected host at once."""

from __future__ import annotations

import functools

import pytest

from signoff import retry
from signoff.check import class_guard, not_applicable
from signoff.fleet import ProbeError
from signoff.interconnect import SWEEP, judge
from signoff.units import parse_size


def allreduce_doc(host, profile, devices, ops=()) -> dict:
    """The all-reduce sweep; with `ops` (COLLECTIVES whose checks are selected) those collectives
    too, back to back in the same probe run and rendezvous (the doc's `ops`)."""
    if len(devices) == 1:
        not_applicable(f"{host} has one GPU: a collective needs two")
    # measured without a busbw threshold too: its correctness and transport checks judge it
    t = profile.criteria.get("allreduce_busbw")
    lo, hi = t.extra["sweep"] if t else SWEEP
    env = {"NCCL_NVLS_ENABLE": "0"} if profile.hardware.get("nvls") is False else {}
    args = ("allreduce", "--min-bytes", lo, "--max-bytes", hi)
    more = ("--op", ",".join(("allreduce", *ops))) if ops else ()

    def sweep(probe, again=False) -> dict:
        # the retry measures the all-reduce alone, the figure that missed; best_of keeps the first
        # run's other collectives (judged once, never retried)
        doc = probe(*args, *(() if again else more), env=env)
        if "error" in doc:
            raise ProbeError(f"{host}: all-reduce probe failed: {doc['error']}")
        if again and devices and doc.get("local_ranks") != len(devices):  # not dropped for a better one
            raise ProbeError(f"{host}: all-reduce attempt ran on {doc.get('local_ranks')} of the "
                             f"{len(devices)} GPUs NVML reports")
        return doc
    doc = sweep(host.cached_probe)
    if t is None:  # no threshold to miss: measured once (test_allreduce_busbw ERRORs saying why)
        return doc
    # fewer ranks than GPUs at the first attempt: judged by allreduce() with what it measured
    return best_of(doc, lambda: sweep(host.probe, again=True), t)


def busbw_at(doc: dict, nbytes: int):
    return next((r["busbw"] for r in doc.get("rows") or [] if r["bytes"] == nbytes), None)


def best_of(doc: dict, again, t) -> dict:
    """The retry policy (signoff/retry.py) on the busbw at the judged size. Correctness is never
    retried into a pass: a size is correct only if it was in every attempt."""
    ref = parse_size(t.extra["size"])
    tries = retry.measured(doc, again, lambda d: busbw_at(d, ref), t)
    if len(tries) == 1:  # passed, or a miss not measured again: why not (retry.why)
        said = retry.why([busbw_at(doc, ref)], t)
        return {**doc, "retry": said} if said else doc
    best, figures = retry.best(tries, lambda d: busbw_at(d, ref), t)
    wrong = {r["bytes"] for d in tries for r in d["rows"] if not r["correct"]}
    # the other collectives: measured in the first attempt only (the retry is the all-reduce's)
    best = {**best, **{k: v for k, v in doc.items() if k in OTHER_OPS}}
    used: dict = {}  # a transport NCCL fell back to in any attempt stays in the judgement
    for d in tries:
        for kind, pairs in (d.get("transports") or {}).items():
            used.setdefault(kind, set()).update(map(tuple, pairs))
    return retry.kept({**best, "rows": [{**r, "correct": r["bytes"] not in wrong} for r in best["rows"]],
                       **({"transports": {k: sorted(v) for k, v in used.items()}} if used else {})},
                      figures)


def p2p_doc(host, gpus, profile) -> dict:
    """The pair copies; measured again after the slowest pair misses p2p_bandwidth (retry
    policy), the attempt with the fastest slowest pair judged, uniformity too."""
    if len(gpus) < 2:
        not_applicable(f"{host} has {len(gpus)} GPU(s): no pair to measure")

    def pairs(probe) -> dict:
        doc = probe("p2p")
        if doc.get("error") or doc.get("gpus") != len(gpus) or "unidirectional" not in doc:
            raise ProbeError(f"{host}: P2P probe measured {doc.get('gpus')} of {len(gpus)} GPUs "
                             f"({doc.get('error') or 'no bandwidth matrix'})")
        return doc
    doc = pairs(host.cached_probe)
    t = profile.criteria.get("p2p_bandwidth")
    if t is None:  # the check ERRORs on the missing threshold; nothing to retry against
        return doc
    figure = slowest_pair
    if t.extra.get("derived") == "link_rate":  # a fraction of each pair's own link: the worst ratio
        figure = functools.partial(judge.worst_ratio, gpus=gpus)
    return retry.kept(*retry.best_of(doc, lambda: pairs(host.probe), figure, t))


def slowest_pair(doc: dict):
    return min(doc["unidirectional"].values(), default=None)


# Each measurement's family, the checks whose hosts it measures at once, and its probe on one
# host with the gates its checks' fixtures apply (devices, of_class, gpus): a host whose
# checks stop at a gate is not measured (what the gate raised is kept, never used).
MEASURES = {
    "allreduce": ("interconnect", ("test_allreduce_busbw", "test_allreduce_correct", "test_nccl_transport"),
                  lambda v, prof: class_guard(prof, [v]) or allreduce_doc(v, prof, collective_devices(v))),
    "p2p": ("interconnect p2p", ("test_p2p_bandwidth", "test_p2p_uniformity"),
            lambda v, prof: class_guard(prof, [v]) or p2p_doc(v, v.gpus, prof)),
    "topology": ("interconnect topology", ("test_gpu_topology",),
                 lambda v, prof: v.cached_probe("p2p", "--no-bandwidth") if len(v.gpus) > 1 else None),
}


# what probe_allreduce --op adds to the all-reduce's document
OTHER_OPS = ("ops", "op_graphs", "op_errors")
# The collectives beyond all-reduce (probe_allreduce --op): criterion <op>_busbw, what a check says
COLLECTIVES = {"allgather": "all-gather", "reduce_scatter": "reduce-scatter", "alltoall": "all-to-all",
               "sendrecv": "send/recv"}
CORRECT_TEST = "test_collectives_correct"


def with_ops(ops) -> dict:
    """MEASURES whose all-reduce also measures `ops` in the same probe run (the plugin passes the
    collectives whose checks are selected: a run of the all-reduce's checks alone measures it alone)."""
    if not ops:
        return MEASURES
    family, tests, _ = MEASURES["allreduce"]
    return {**MEASURES, "allreduce": (
        family, (*tests, *(f"test_{op}_busbw" for op in COLLECTIVES), CORRECT_TEST),
        lambda v, prof: class_guard(prof, [v]) or allreduce_doc(v, prof, collective_devices(v), tuple(ops)))}


def collective_devices(host) -> list[dict]:
    if host.gpus:
        return host.gpus
    if host.hidden_gpus:
        pytest.fail(f"{host}: {host.hidden_gpus}", pytrace=False)
    return []
