"""Intra-node GPU interconnect: all-reduce bus bandwidth, GPU pairs, topology, NCCL transport."""

from dataclasses import replace
from statistics import median

import pytest

from signoff import retry
from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.interconnect import diagnose, judge, plots
from signoff.interconnect.run import COLLECTIVES, MEASURES, busbw_at, collective_devices
from signoff.render import render
from signoff.units import human_bytes, parse_size

RULE = "signoff acceptance rule"


def allreduce(host, measure, devices, check) -> dict:
    doc = measure("allreduce", host)
    if devices and doc["local_ranks"] != len(devices):
        check.record(None, unit="GB/s", details={  # what it measured on fewer GPUs, kept
            "rows": doc.get("rows"), "local_ranks": doc["local_ranks"], "backend": doc.get("backend")})
        raise ProbeError(f"{host}: all-reduce ran on {doc['local_ranks']} of the {len(devices)} GPUs "
                         f"NVML reports (CUDA_VISIBLE_DEVICES or a GPU torch cannot use)")
    return doc


def p2p(host, measure) -> dict:
    return measure("p2p", host)


def test_allreduce_busbw(host, profile, devices, check, attach, measure, fleet):
    doc = allreduce(host, measure, devices, check)
    t = profile.threshold("allreduce_busbw")

    def busbw(d):
        return next(r for r in d["rows"] if r["bytes"] == parse_size(t.extra["size"]))["busbw"]
    attach("html", plots.allreduce_table(doc), "all-reduce table")

    def cause():
        pairs = p2p(host, measure) if devices else None
        return "; ".join(diagnose.interconnect(devices, doc, pairs, cpu_count=host.facts.get("cpu_count"))) \
            or "nothing abnormal found in links, transport or pairs"
    check.expect(busbw(doc), t, f"all-reduce busbw at {t.extra['size']} "
                 f"({doc['world_size']} ranks, {doc['backend']}{retry.said(doc, 'GB/s')})", cause=cause,
                 details={"rows": doc["rows"], "backend": doc["backend"],
                          "graphs": doc.get("graphs"), "nccl": doc.get("nccl"),
                          "attempts": doc.get("attempts"), "spread_pct": doc.get("spread_pct"),
                          "retry": doc.get("retry"), "restarted": doc.get("restarted"),
                          "measured_utc": fleet.windows["interconnect"].get(host.name)},
                 fleet=fleet.peers(MEASURES["allreduce"][0], busbw))


def test_allreduce_correct(host, devices, check, measure):
    doc = allreduce(host, measure, devices, check)
    wrong = [f"wrong sum at {human_bytes(r['bytes'])}" for r in doc["rows"] if not r["correct"]]
    check.require(wrong, f"{len(doc['rows']) - len(wrong)}/{len(doc['rows'])} sizes correct",
                  "every all-reduce returns the exact sum", RULE,
                  cause="faulty GPU memory or link corrupting data")


@pytest.mark.usefixtures("of_class")
def test_p2p_bandwidth(host, gpus, profile, check, measure, fleet):
    doc = p2p(host, measure)
    uni, bi = doc["unidirectional"], doc["bidirectional"]
    check.record(min(uni.values()), unit="GB/s", details={"unidirectional": uni, "bidirectional": bi})
    t = profile.threshold("p2p_bandwidth")  # measured first: a missing threshold loses nothing
    floors, expected = judge.floors(t, doc, gpus)  # per pair: the class's figure, or of its link
    if any(f is None for f, _ in floors.values()):
        raise ProbeError(f"{host}: no link rate to judge P2P by: {floors}")
    low = {k: v for k, v in uni.items() if v < floors[k][0]}
    bad = [f"{diagnose.pair(k)}: {v:g} GB/s < {floors[k][0]:g}{floors[k][1]}" for k, v in sorted(low.items())]
    unit = "x link rate" if t.extra.get("derived") else "GB/s"  # the retry's figure (run.py)
    said = retry.said(doc, unit)[1:]  # ' best of 2 attempts (...)', or why measured once
    bad += [f"slowest pair{said}"] if bad and said else []
    # over PCIe a copy staged through host memory reads about what a direct one does
    off = judge.peer_access_off(doc)
    if profile.hardware.get("peer_access") is False:  # the class's normal state (GeForce): no fault
        check.note(f"peer access off on {len(off)} of {len(uni)} pairs, as profile {profile.name}'s class "
                   f"runs (its driver offers none): copies staged through host memory"
                   + ("" if len(off) == len(uni) else "; on for the others: a driver other than the "
                      "class's stock one"))
        off = []
    bad += [f"{diagnose.pair(k)}: peer access off (the copy went through host memory)" for k in off]
    slowest = min(uni, key=uni.get)
    worst, paths = uni[slowest], doc["topology"].get("paths", {})
    cause = "; ".join([f"peer access off between {len(off)} pair(s): P2P disabled (ACS or the IOMMU "
                       f"redirecting PCIe peer traffic, a VM or container without P2P, a driver that "
                       f"offers none for this GPU)"] if off else []
                      + sorted({f"{paths.get(k, '?')} path" for k in low})) \
        or f"the slowest pair {diagnose.pair(slowest)} ({paths.get(slowest, '?')} path)"
    access = ", peer access on" if profile.hardware.get("peer_access") is not False else \
        ", through host memory (the class has no peer access)"
    check.require(bad, worst, f"every GPU pair {expected}{access}", t.source, cause=cause,
                  details={"unidirectional": uni, "bidirectional": bi, "paths": paths,
                           "floors": {k: f for k, (f, _) in floors.items()},
                           "peer_access": doc.get("peer_access"), "attempts": doc.get("attempts"),
                           "spread_pct": doc.get("spread_pct")},
                  fleet=(replace(t, unit="GB/s"),  # the slowest pair's GB/s, whatever the rule
                         fleet.peers(MEASURES["p2p"][0], lambda d: min(d["unidirectional"].values()))))


@pytest.mark.usefixtures("of_class")
def test_p2p_uniformity(host, gpus, profile, check, measure):
    doc = p2p(host, measure)
    t = profile.threshold("p2p_uniformity")
    slow = diagnose.slow_pairs(doc, t.value)
    uni = doc["unidirectional"]
    ratio = round(min(uni.values()) / median(uni.values()), 3)  # the median slow_pairs judges by
    check.require(slow, ratio, f"slowest pair {t.expected}", t.source,
                  cause="one degraded link or a pair routed through the CPU",
                  details={"unidirectional": uni})


def test_gpu_topology(host, gpus, profile, check, attach, measure):
    doc = measure("topology", host) if len(gpus) > 1 else None
    if doc is None:
        not_applicable(f"{host} has one GPU")
    topo = doc["topology"]
    if topo.get("error") or len(topo.get("paths", {})) != len(gpus) * (len(gpus) - 1):
        raise ProbeError(f"{host}: GPU topology unreadable ({topo.get('error') or 'paths missing'})")
    attach("html", render("templates/pre.jinja2", text=topo.get("topo_m") or ""), "nvidia-smi topo -m")
    numa = {g["index"]: f"NUMA {g['numa_node']}, CPUs {g['cpu_affinity']}" for g in topo["gpus"]}
    if profile.hardware.get("interconnect") != "nvlink":
        not_applicable(f"profile {profile.name} does not require NVLink between GPUs; "
                       f"paths: {topo.get('paths')}")
    bad = diagnose.non_nvlink_paths(doc)
    check.require(bad, f"{sum(v == 'NVLINK' for v in topo['paths'].values())}/"
                  f"{len(topo['paths'])} pairs NVLink", "NVLink between every GPU pair",
                  f"profile {profile.name}", cause="NVSwitch/bridge missing or a GPU off the fabric",
                  details={"paths": topo["paths"], "affinity": numa})


def test_nccl_transport(host, profile, devices, check, measure):
    doc = allreduce(host, measure, devices, check)
    if doc["backend"] != "nccl":
        not_applicable(f"{host} runs the all-reduce on gloo (no GPU): NCCL transport does not apply")
    nvlink = any(g["nvlink"]["links"] for g in devices)
    used = sorted(doc.get("transports") or {})
    if not used:
        raise ProbeError(f"{host}: NCCL printed no transport lines (NCCL_DEBUG output missing)")
    if profile.hardware.get("peer_access") is False and not nvlink:  # RTX 4090: SHM is the path
        check.require(diagnose.off_host_transports(doc), ", ".join(used),
                      "SHM (host memory) between every pair of ranks: the class's driver offers no GPU "
                      "peer access", f"profile {profile.name}",
                      cause="; ".join(diagnose.steering_env(doc.get("nccl_env") or {}))
                      or "NCCL's SHM transport unusable (NCCL_SHM_DISABLE, a container's small /dev/shm)",
                      details={"transports": doc.get("transports"), "nccl_env": doc.get("nccl_env"),
                               "nccl_log": doc.get("nccl_log")})
        return
    if not nvlink:
        not_applicable(f"{host} has no NVLink; NCCL used {', '.join(used)}")
    bad = diagnose.fallback_transports(doc, nvlink)
    check.require(bad, ", ".join(used), "P2P (NVLink) between every pair of ranks", RULE,
                  cause="; ".join(diagnose.steering_env(doc.get("nccl_env") or {}))
                  or "P2P disabled by the driver, container or ACS",
                  details={"transports": doc.get("transports"), "nccl_env": doc.get("nccl_env"),
                           "nccl_log": doc.get("nccl_log")})


@pytest.fixture
def devices(host, profile, of_class):
    """GPUs to run collectives on; [] on a CPU-only host under a profile that allows it (gloo).
    A host not of the profile's class (a GPU-less one under a GPU profile) is NOT RUN (of_class)."""
    return collective_devices(host)


def collective(host, measure, devices, check, op) -> tuple[dict, list]:
    """The all-reduce's probe run and its rows of collective `op` (probe_allreduce --op)."""
    doc = allreduce(host, measure, devices, check)
    name = COLLECTIVES[op]
    err = (doc.get("op_errors") or {}).get(op)
    if err and doc["backend"] == "gloo":
        not_applicable(f"{host}: gloo (torch {doc.get('torch')}) runs no {name}: {err}")
    if err:
        raise ProbeError(f"{host}: the {name} failed: {err}")
    rows = (doc.get("ops") or {}).get(op)
    if not rows:
        raise ProbeError(f"{host}: the probe run measured no {name}")
    return doc, rows


def judge_collective(op, t, host, profile, devices, check, attach, measure):
    """t: the test's own profile.threshold(<op>_busbw) (the sheet's catalog reads it there)."""
    doc, rows = collective(host, measure, devices, check, op)
    name = COLLECTIVES[op]
    # judged at the all-reduce's size, in its sweep: the two curves side by side
    size = profile.threshold("allreduce_busbw").extra["size"]
    at = next((r for r in rows if r["bytes"] == parse_size(size)), None)
    if at is None:
        check.record(None, unit="GB/s", details={"rows": rows})
        raise ProbeError(f"{host}: no {name} at {size} (allreduce_busbw's size) in the sweep")
    if t.extra.get("derived") == "allreduce":
        t = judge.allreduce_threshold(t, busbw_at(doc, parse_size(size)), size, str(host))
    attach("html", plots.collectives_table(doc), "collectives table")
    used = sorted(doc.get("transports") or {})
    check.expect(at["busbw"], t, f"{name} busbw at {size} ({doc['world_size']} ranks, {doc['backend']})",
                 cause=lambda: (f"the {name} alone is slow: NCCL's algorithm or protocol for it (NCCL_ALGO, "
                                f"NCCL_PROTO), or a link it uses and the all-reduce does not"
                                + (f"; NCCL used {', '.join(used)}" if used else "")
                                if doc["backend"] == "nccl" else
                                # gloo: no algorithm to pick, no link of its own: the CPU's
                                f"gloo's {name} runs on the host's CPU cores: other processes on them, "
                                f"or too few cores for its {doc['world_size']} ranks"),
                 details={"rows": rows, "allreduce_rows": doc["rows"], "backend": doc["backend"],
                          "graphs": (doc.get("op_graphs") or {}).get(op), "nccl": doc.get("nccl"),
                          "transports": doc.get("transports")})


def test_allgather_busbw(host, profile, devices, check, attach, measure):
    judge_collective("allgather", profile.threshold("allgather_busbw"), host, profile, devices, check, attach,
                     measure)


def test_reduce_scatter_busbw(host, profile, devices, check, attach, measure):
    judge_collective("reduce_scatter", profile.threshold("reduce_scatter_busbw"), host, profile, devices,
                     check, attach, measure)


def test_alltoall_busbw(host, profile, devices, check, attach, measure):
    judge_collective("alltoall", profile.threshold("alltoall_busbw"), host, profile, devices, check, attach,
                     measure)


def test_sendrecv_busbw(host, profile, devices, check, attach, measure):
    judge_collective("sendrecv", profile.threshold("sendrecv_busbw"), host, profile, devices, check, attach,
                     measure)


def test_collectives_correct(host, devices, check, measure):
    doc = allreduce(host, measure, devices, check)
    errors = doc.get("op_errors") or {}
    unknown = sorted(o for o in {**(doc.get("ops") or {}), **errors} if o not in COLLECTIVES)
    if unknown:  # the probe measures only what it was asked: a document of another shape
        raise ProbeError(f"{host}: the probe's document names collectives signoff never runs: "
                         f"{', '.join(unknown)[:300]}")
    ran = {op: rows for op, rows in (doc.get("ops") or {}).items() if op not in errors}
    if errors and doc["backend"] == "gloo":
        check.note("not run on gloo: " + "; ".join(f"{COLLECTIVES[o]} ({e})"
                                                   for o, e in sorted(errors.items())))
    elif errors:
        raise ProbeError(f"{host}: " + "; ".join(f"the {COLLECTIVES[o]} failed: {e}"
                                                 for o, e in sorted(errors.items())))
    if not ran:
        not_applicable(f"{host}: no collective besides the all-reduce ran "
                       f"({', '.join(errors) or 'none measured'})")
    wrong = judge.wrong_results({"ops": ran}, COLLECTIVES)
    n = sum(len(rows) for rows in ran.values())
    check.require(wrong, f"{n - len(wrong)}/{n} sizes exact ({', '.join(COLLECTIVES[o] for o in ran)})",
                  "every collective returns exactly what its ranks sent", RULE,
                  cause="faulty GPU memory or link corrupting data", details={"ops": ran})
