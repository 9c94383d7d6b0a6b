"""Intra-node GPU interconnect: all-reduce bus bandwidth, GPU pairs, topology, NCCL transport."""

import pytest

from signoff import diagnose, plots
from signoff.check import class_guard, not_applicable
from signoff.fleet import ProbeError
from signoff.plugin import HostView, selected_hosts
from signoff.profiles import parse_size

RULE = "signoff acceptance rule"


def allreduce_doc(host, profile, devices) -> dict:
    if len(devices) == 1:
        not_applicable(f"{host} has one GPU: an all-reduce needs two")
    t = profile.threshold("allreduce_busbw")
    lo, hi = t.extra["sweep"]
    env = {"NCCL_NVLS_ENABLE": "0"} if profile.hardware.get("nvls") is False else {}
    doc = host.cached_probe("allreduce", "--min-bytes", lo, "--max-bytes", hi, env=env)
    if "error" in doc:
        raise ProbeError(f"{host}: all-reduce probe failed: {doc['error']}")
    return doc  # fewer ranks than GPUs is judged by allreduce(), where its rows are recorded


def p2p_doc(host, gpus) -> dict:
    if len(gpus) < 2:
        not_applicable(f"{host} has {len(gpus)} GPU(s): no pair to measure")
    doc = host.cached_probe("p2p")
    if doc.get("error") or doc.get("gpus") != len(gpus) or "unidirectional" not in doc:
        raise ProbeError(f"{host}: P2P probe measured {doc.get('gpus')} of {len(gpus)} GPUs "
                         f"({doc.get('error') or 'no bandwidth matrix'})")
    return doc


# Each measurement's family, the checks whose hosts it measures at once, and its probe on one
# host with the gates its checks' fixtures apply (devices, of_class, gpus): a host whose
# checks stop at a gate is not measured (what the gate raised is kept, never used).
MEASURES = {
    "allreduce": ("interconnect", ("test_allreduce_busbw", "test_allreduce_correct", "test_nccl_transport"),
                  lambda v, prof: class_guard(prof, [v]) or allreduce_doc(v, prof, collective_devices(v))),
    "p2p": ("interconnect p2p", ("test_p2p_bandwidth", "test_p2p_uniformity"),
            lambda v, prof: class_guard(prof, [v]) or p2p_doc(v, v.gpus)),
    "topology": ("interconnect topology", ("test_gpu_topology",),
                 lambda v, prof: v.cached_probe("p2p", "--no-bandwidth") if len(v.gpus) > 1 else None),
}


@pytest.fixture(scope="session")
def measure(request, fleet, profile):
    """measure(what, host): the host's document of MEASURES[what], measured on every host with
    a selected check of it at once, the first time any check asks (Fleet.measured)."""
    def get(what: str, host) -> dict:
        family, tests, probe = MEASURES[what]
        return fleet.measured(family, host.name,
                              lambda n: probe(HostView(n, fleet.facts(n), fleet.sessions[n]), profile),
                              selected_hosts(request.session, __file__, tests))
    return get


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
    ref = parse_size(t.extra["size"])
    row = next(r for r in doc["rows"] if r["bytes"] == ref)
    attach("png", plots.busbw_curve(host.name, doc["rows"], t.value, ref), "busbw curve")
    attach("html", table(doc), "all-reduce table")
    cause = ""
    if not t.ok(row["busbw"]):
        pairs = p2p(host, measure) if devices else None
        cause = "; ".join(diagnose.interconnect(devices, doc, pairs,
                                                cpu_count=host.facts.get("cpu_count"))) or \
            "nothing abnormal found in links, transport or pairs"
    check.expect(row["busbw"], t, f"all-reduce busbw at {t.extra['size']} "
                 f"({doc['world_size']} ranks, {doc['backend']})", cause=cause,
                 details={"rows": doc["rows"], "backend": doc["backend"],
                          "graphs": doc.get("graphs"), "nccl": doc.get("nccl"),
                          "measured_utc": fleet.windows["interconnect"].get(host.name)})


def test_allreduce_correct(host, devices, check, measure):
    doc = allreduce(host, measure, devices, check)
    wrong = [f"wrong sum at {plots.human_bytes(r['bytes'])}" for r in doc["rows"] if not r["correct"]]
    check.require(wrong, f"{len(doc['rows']) - len(wrong)}/{len(doc['rows'])} sizes correct",
                  "every all-reduce returns the exact sum", RULE,
                  cause="faulty GPU memory or link corrupting data")


@pytest.mark.usefixtures("of_class")
def test_p2p_bandwidth(host, gpus, profile, check, attach, measure):
    doc = p2p(host, measure)
    uni, bi = doc["unidirectional"], doc["bidirectional"]
    check.record(min(uni.values()), unit="GB/s", details={"unidirectional": uni, "bidirectional": bi})
    t = profile.threshold("p2p_bandwidth")  # measured first: a missing threshold loses nothing
    attach("png", plots.p2p_heatmap(host.name, len(gpus), uni, "unidirectional copy", t.value),
           "P2P unidirectional")
    attach("png", plots.p2p_heatmap(host.name, len(gpus), bi, "bidirectional copy"), "P2P bidirectional")
    bad = [f"{diagnose.pair(k)}: {v:g} GB/s < {t.value:g}" for k, v in sorted(uni.items())
           if not t.ok(v)]
    worst = min(uni.values())
    paths = doc["topology"].get("paths", {})
    cause = "; ".join({f"{paths.get(k, '?')} path" for k, v in uni.items() if not t.ok(v)})
    check.require(bad, worst, f"every GPU pair {t.expected}", t.source, cause=cause,
                  details={"unidirectional": uni, "bidirectional": bi, "paths": paths,
                           "peer_access": doc.get("peer_access")})


@pytest.mark.usefixtures("of_class")
def test_p2p_uniformity(host, gpus, profile, check, measure):
    doc = p2p(host, measure)
    t = profile.threshold("p2p_uniformity")
    slow = diagnose.slow_pairs(doc, t.value)
    uni = doc["unidirectional"]
    ratio = round(min(uni.values()) / sorted(uni.values())[len(uni) // 2], 3)
    check.require(slow, ratio, f"slowest pair {t.expected} of the host's median pair", t.source,
                  cause="one degraded link or a pair routed through the CPU",
                  details={"unidirectional": uni})


def test_gpu_topology(host, gpus, profile, check, attach, measure):
    doc = measure("topology", host) if len(gpus) > 1 else None
    if doc is None:
        not_applicable(f"{host} has one GPU")
    topo = doc["topology"]
    if topo.get("error") or len(topo.get("paths", {})) != len(gpus) * (len(gpus) - 1):
        raise ProbeError(f"{host}: GPU topology unreadable ({topo.get('error') or 'paths missing'})")
    attach("html", f"<pre>{escape(topo.get('topo_m') or '')}</pre>", "nvidia-smi topo -m")
    numa = {g["index"]: f"NUMA {g['numa_node']}, CPUs {g['cpu_affinity']}" for g in topo["gpus"]}
    if profile.hardware.get("interconnect") != "nvlink":
        not_applicable(f"profile {profile.name} does not require NVLink between GPUs; "
                       f"paths: {topo.get('paths')}")
    bad = diagnose.non_nvlink_paths(doc)
    check.require(bad, f"{sum(v == 'NVLINK' for v in topo['paths'].values())}/"
                  f"{len(topo['paths'])} pairs NVLink", "NVLink between every GPU pair",
                  f"profile {profile.name}", cause="NVSwitch/bridge missing or a GPU off the fabric",
                  details={"paths": topo["paths"], "affinity": numa})


def test_nccl_transport(host, devices, check, measure):
    doc = allreduce(host, measure, devices, check)
    if doc["backend"] != "nccl":
        not_applicable(f"{host} runs the all-reduce on gloo (no GPU): NCCL transport does not apply")
    nvlink = any(g["nvlink"]["links"] for g in devices)
    used = sorted(doc.get("transports") or {})
    if not used:
        raise ProbeError(f"{host}: NCCL printed no transport lines (NCCL_DEBUG output missing)")
    if not nvlink:
        not_applicable(f"{host} has no NVLink; NCCL used {', '.join(used)}")
    bad = diagnose.fallback_transports(doc, nvlink)
    check.require(bad, ", ".join(used), "P2P (NVLink) between every pair of ranks", RULE,
                  cause="; ".join(diagnose.steering_env(doc.get("nccl_env") or {}))
                  or "P2P disabled by the driver, container or ACS",
                  details={"transports": doc.get("transports"), "nccl_env": doc.get("nccl_env"),
                           "nccl_log": doc.get("nccl_log")})


def escape(text: str) -> str:
    from html import escape as esc
    return esc(text)


def table(doc: dict) -> str:
    rows = "".join(f"<tr><td>{plots.human_bytes(r['bytes'])}</td><td>{r['time_us']:.1f}</td>"
                   f"<td>{r['algbw']:.2f}</td><td>{r['busbw']:.2f}</td>"
                   f"<td>{'ok' if r['correct'] else 'WRONG'}</td></tr>" for r in doc["rows"])
    return ("<table class='so-table'><tr><th>size</th><th>time us</th><th>algbw GB/s</th>"
            f"<th>busbw GB/s</th><th>result</th></tr>{rows}</table>")


@pytest.fixture
def devices(host, profile, of_class):
    """GPUs to run collectives on; [] on a CPU-only host under a profile that allows it (gloo).
    A host not of the profile's class (a GPU-less one under a GPU profile) is NOT RUN (of_class)."""
    return collective_devices(host)


def collective_devices(host) -> list[dict]:
    if host.gpus:
        return host.gpus
    if host.hidden_gpus:
        pytest.fail(f"{host}: {host.hidden_gpus}", pytrace=False)
    return []
