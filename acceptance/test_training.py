"""Training level: a real data-parallel step's throughput and loss, its scaling over the GPUs
of a host and over the nodes, whether the CPUs can feed it, and the host<->GPU links."""

from __future__ import annotations

from dataclasses import replace

import pytest

from signoff import InputError, cotenants, retry
from signoff.check import not_applicable
from signoff.figures import html_table
from signoff.fleet import ProbeError
from signoff.interconnect.judge import pcie_rate
from signoff.interconnect.run import collective_devices
from signoff.network import route
from signoff.network.judge import node_bound_threshold
from signoff.network.plugin import multinode_args, node_bounds
from signoff.training import judge, parallel
from signoff.training.run import MEASURES, across, over_nodes
from signoff.units import parse_size

RULE = "signoff acceptance rule"


def _settings(doc: dict) -> dict:
    return {"model": doc["model"], "formula": doc["formula"], "settings": doc.get("settings"),
            "backend": doc["backend"]}


def _row(r: dict) -> dict:
    return {k: r[k] for k in ("ranks", "step_s", "tokens_per_s", "samples_per_s", "tflops_per_gpu",
                              "comm_share", "compute_s")}


def test_train_throughput(host, profile, devices, check, attach, training, fleet):
    doc = training("train", host)
    one = doc["widths"][0]
    eff = judge.efficiency(doc["widths"])
    attach("html", html_table({
        f"{r['ranks']} ranks": f"{r['step_s'] * 1e3:.1f} ms/step, {r['tokens_per_s']:g} tokens/s, "
                               f"{r['tflops_per_gpu']:g} TFLOP/s per GPU, comm share "
                               f"{r['comm_share']:.0%}, efficiency {eff.get(r['ranks'])}"
        for r in doc["widths"]}), "training step per width")
    details = {**_settings(doc), "params": one["params"], "widths": [_row(r) for r in doc["widths"]],
               "attempts": doc.get("attempts"), "spread_pct": doc.get("spread_pct"),
               "restarted": doc.get("restarted")}
    check.record(one["tflops_per_gpu"], unit="TFLOP/s", details=details)
    t = profile.threshold("train_throughput")  # measured first: a missing threshold loses nothing
    check.expect(one["tflops_per_gpu"], t,
                 f"model TFLOP/s of the 1-{'GPU' if devices else 'rank'} step ({one['tokens_per_s']:g} "
                 f"tokens/s, {one['step_s'] * 1e3:.1f} ms/step, {one['params'] / 1e6:.1f} M params"
                 f"{retry.said(doc, 'TFLOP/s')})",
                 cause="GPU clocks or power capped, a slow GPU, or another process on it "
                       "(see power_limit, soak_gemm_tflops, gpu processes)", details=details,
                 fleet=fleet.peers(MEASURES["train"][0], lambda d: d["widths"][0]["tflops_per_gpu"]))


def test_train_loss_falls(host, profile, check, training):
    doc = training("train", host)
    t = profile.threshold("train_loss_falls")
    ratios = {r["ranks"]: judge.loss_ratio(r["losses"]) for r in doc["widths"]}
    bad = [f"{n} ranks: a loss is not finite ({doc['widths'][i]['losses'][-3:]})"
           for i, (n, q) in enumerate(ratios.items()) if q is None]
    bad += [f"{n} ranks: loss {r['losses'][0]:g} -> {r['losses'][-1]:g}, {q:g} x the first"
            for (n, q), r in zip(ratios.items(), doc["widths"])
            if q is not None and not t.ok(q)]
    bad += [f"{r['ranks']} ranks: the replicas' weights differ after synced steps"
            for r in doc["widths"] if not r["replicas_equal"]]
    worst = max((q for q in ratios.values() if q is not None), default=None)
    check.require(bad, worst, f"late loss {t.expected}, every loss finite, replicas equal",
                  t.source, cause="the step does not learn: learning rate 0, gradients lost or wrong "
                                  "(a bad all-reduce, a GPU computing garbage)",
                  details={"ratios": ratios, "losses": {r["ranks"]: r["losses"] for r in doc["widths"]},
                           "lr": (doc.get("settings") or {}).get("lr")})


def _allreduce_seen(host, measure, profile) -> list[str]:
    """What the intra-node all-reduce measured (acceptance/test_interconnect.py, cached)."""
    try:
        t = profile.threshold("allreduce_busbw")
        doc = measure("allreduce", host)
    except (ProbeError, InputError, pytest.skip.Exception):
        return []
    row = next((r for r in doc["rows"] if r["bytes"] == parse_size(t.extra["size"])), None)
    return [f"intra-node all-reduce busbw {row['busbw']:g} GB/s at {t.extra['size']} "
            f"({'meets' if t.ok(row['busbw']) else 'below'} {t.expected})"] if row else []


def test_train_scaling_host(host, profile, devices, check, training, measure):
    doc = training("train", host)
    if doc["local_ranks"] < 2:
        not_applicable(f"{host} has one GPU: no scaling within the host")
    eff = judge.efficiency(doc["widths"])
    full = doc["widths"][-1]
    details = {**_settings(doc), "efficiency": eff, "widths": [_row(r) for r in doc["widths"]]}
    check.record(eff[full["ranks"]], unit="x linear", details=details)
    t = profile.threshold("train_scaling_host")
    cause = ""
    if not t.ok(eff[full["ranks"]]):
        link = None
        if devices:
            try:
                link = training("hostlink", host)
            except ProbeError:
                pass
        seen = judge.placement(link) + (_allreduce_seen(host, measure, profile) if devices else [])
        cause = judge.scaling_cause(full, doc["widths"][0], seen) or \
            "nothing abnormal in communication share or per-rank pace"
    check.expect(eff[full["ranks"]], t, f"scaling efficiency at {full['ranks']} ranks "
                 f"({full['tokens_per_s']:g} tokens/s vs {full['ranks']} x "
                 f"{doc['widths'][0]['tokens_per_s']:g}; comm share {full['comm_share']:.0%})",
                 cause=cause, details=details)


def test_train_input_headroom(host, profile, check, attach, training):
    doc, ld = training("train", host), training("loader", host)
    attach("html", html_table({f"{r['workers']} workers": f"{r['samples_per_s']:g} samples/s"
                               for r in ld["rows"]}), "DataLoader per worker count")
    full = doc["widths"][-1]
    best, workers = judge.saturation(ld["rows"])
    ratio = round(best / full["samples_per_s"], 3)
    details = {"loader": ld["rows"], "loader_settings": ld["settings"], "cpus": ld["cpus"],
               "saturates_at_workers": workers, "step_samples_per_s": full["samples_per_s"],
               "step_ranks": full["ranks"],
               "sample": "one item of a batch: a sequence of the step, an image of the loader"}
    check.record(ratio, unit="x the step's samples/s", details=details)
    t = profile.threshold("train_input_headroom")
    check.expect(ratio, t, f"DataLoader {best:g} samples/s (saturating at {workers} workers of "
                 f"{ld['cpus']} CPUs) / the {full['ranks']}-rank step's {full['samples_per_s']:g}",
                 cause="too few CPU cores or too slow ones for the input pipeline; per-sample work "
                       "(decode, augment) too heavy for this host", details=details)


def test_host_link_bandwidth(host, gpus, profile, check, training, fleet):
    doc = training("hostlink", host)
    worst, which = judge.slowest_link(doc["gpus"])
    details = {"gpus": doc["gpus"], "process_cpus": doc["process_cpus"], "bytes": doc["bytes"],
               "timing": doc["timing"], "attempts": doc.get("attempts"), "spread_pct": doc.get("spread_pct")}
    check.record(worst, unit="GB/s", details=details)
    t = profile.threshold("host_link_bandwidth")
    link = "a degraded NVLink-C2C link to its Grace CPU" if profile.hardware.get("host_link") == "c2c" \
        else "a GPU on a narrower or slower PCIe link (see pcie_link)"
    cause = "; ".join(judge.placement(doc)) or link
    if t.extra.get("derived") == "pcie_link":  # no class: each GPU against its own PCIe link
        links = {g["index"]: pcie_rate(g) for g in gpus}
        if any(r is None for r, _ in links.values()):
            raise ProbeError(f"{host}: no PCIe link to judge host-link copies by: "
                             f"{'; '.join(w for r, w in links.values() if r is None)}")
        copies = [(g[k] / links[g["index"]][0], g[k], g["index"], k.replace("_pinned", "").upper())
                  for g in doc["gpus"] for k in ("h2d_pinned", "d2h_pinned")]
        frac, gbps, i, way = min(copies)
        rate, what = links[i]
        bad = [] if t.ok(round(frac, 3)) else [
            f"slowest pinned copy / its link: GPU {i} {way} {gbps:g} GB/s of {what} = {rate:g} GB/s = "
            f"{frac:.3f} x PCIe link{retry.said(doc, 'x PCIe link')}"]
        # the figure recorded is the slowest copy's GB/s, as a class's (signoff calibrate reads it)
        check.require(bad, worst, f"every GPU's pinned copies {t.expected}", t.source, cause=cause,
                      details={**details, "links": {i: r for i, (r, _) in links.items()}},
                      fleet=(replace(t, unit="GB/s"), None))
        return
    check.expect(worst, t, f"slowest pinned copy ({which}{retry.said(doc, 'GB/s')})", cause=cause,
                 details=details,
                 fleet=fleet.peers(MEASURES["hostlink"][0], lambda d: judge.slowest_link(d["gpus"])[0]))


@pytest.mark.usefixtures("fleet_of_class")
def test_train_scaling_nodes(fleet, network, profile, check, training, pytestconfig, measure):
    names = fleet.names
    if len(names) < 2:
        not_applicable("one host: no scaling across nodes")
    alone = {}
    for name in names:  # each node's own step (the per-host measurement), never blamed twice
        try:
            alone[name] = training("train", name, every=names)  # every node at once
        except ProbeError as exc:
            raise ProbeError(f"the step across nodes needs each node's own step first: {exc}") from None
    t = profile.threshold("train_scaling_nodes")
    runs = over_nodes(network, names, profile, pytestconfig.getoption("collective_timeout"))
    last = runs[max(runs)]
    if not last["ok"]:
        check.record(None, t.expected, t.unit, t.source,
                     details={k: last[k] for k in ("states", "culprits") if k in last})
        raise ProbeError(f"training step over {max(runs)} nodes failed; caused by "
                         f"{', '.join(last.get('culprits') or []) or 'unknown'}: "
                         + "; ".join(f"{h}: {s}" for h, s in last["states"].items()))
    # another process on a node's GPUs during a step across nodes (signoff/cotenants.py)
    cotenants.guard(check, "all hosts", {"cotenants": [e for r in runs.values() for e in cotenants.seen(r)]},
                    "training step across nodes")
    per_node, eff = {}, {}
    for k, res in runs.items():
        row, ranks = res["doc"]["widths"][0], res["doc"]["local_ranks"]
        own = {n: next(r for r in alone[n]["widths"] if r["ranks"] == ranks) for n in names[:k]}
        eff[k] = judge.node_efficiency(row, own)
        per_node[k] = {n: max(row["compute_s"][i * ranks:(i + 1) * ranks]) for i, n in enumerate(names[:k])}
    n = len(names)
    full = runs[n]["doc"]["widths"][0]
    slowest, why = judge.slowest_node(per_node, eff)  # a straggler, or the node that slowed the run
    details = {"efficiency": eff, "step": _row(full), "node_step_alone_s": per_node,
               "slowest_node": slowest, "ranks_per_node": runs[n]["doc"]["local_ranks"],
               **_settings(runs[n]["doc"])}
    cause = (f"{why}; {full['comm_share']:.0%} of the step waits on the gradient all-reduce across "
             f"nodes (see multinode_allreduce, net_pair_bandwidth)")
    if t.extra.get("derived") == "step_bound":  # the bound from this run's own figures
        ranks = runs[n]["doc"]["local_ranks"]
        step_s = max(next(r for r in alone[m]["widths"] if r["ranks"] == ranks)["step_s"] for m in names)
        t = _step_bound(t, network, profile, names, step_s, full["params"],
                        pytestconfig.getoption("collective_timeout"), (fleet, measure))
        details["derived"] = t.source
    check.expect(eff[n], t, f"scaling efficiency over {n} nodes ({full['tokens_per_s']:g} tokens/s vs "
                 f"the nodes' own sum; {f'slowest node {slowest}' if slowest else 'no node stands out'})",
                 cause=cause, details=details)


@pytest.mark.usefixtures("fleet_of_class")
def test_train_transport(fleet, network, profile, check, pytestconfig):
    """The transport the training step's traffic between nodes took (its gradient all-reduce), as
    NCCL's channel lines say (gloo: the interface its connections leave by), against what the class
    promises of the multi-node all-reduce (multinode_transport; network/route.py judges both)."""
    names = fleet.names
    if len(names) < 2:
        not_applicable("one host: no training step across nodes")
    # the class's one promise of the traffic between nodes, unless the profile sets the step's own
    t = profile.criteria.get("train_transport") or profile.threshold("multinode_transport")
    res = across(network, names, profile, pytestconfig.getoption("collective_timeout"))
    if not res["ok"]:
        raise ProbeError(f"all hosts: the training step over {len(names)} nodes failed, its transport "
                         f"unknown; caused by {', '.join(res.get('culprits') or []) or 'unknown'}: "
                         + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
    ifaces = {n: fleet.sessions[n].host.data_iface for n in names}
    domain = profile.hardware.get("nvlink_domain")
    gpus = sum(len(fleet.facts(n)["nvidia"].get("gpus") or []) for n in names)
    one_domain = not domain or gpus <= domain  # more GPUs than one domain: NET between domains
    v = route.judge(t.value, res["hosts"], ifaces, one_domain)
    if v["error"]:
        check.record(None, t.expected, t.unit, t.source, details={"used": v["used"]})
        raise ProbeError(f"all hosts: the training step across nodes: {v['error']}")
    if t.value == "MNNVL" and not one_domain:
        check.note(f"{gpus} GPUs, more than one NVLink domain ({domain}): NET between domains allowed")
    check.require(v["bad"], v["measured"], f"the training step across nodes: {route.EXPECTED[t.value]}",
                  t.source, cause=v["cause"],
                  details={"used": v["used"], "data_ifaces": ifaces,
                           "ranks_per_node": res["doc"]["local_ranks"]})


def _step_bound(t, network, profile, names, step_s, params, timeout, bounds):
    """train_scaling_nodes by rule step_bound: t.value x judge.step_bound of the slowest node's own
    step and the multi-node all-reduce of this run (test_multinode_allreduce's, cached; run here
    where it was not)."""
    m = profile.threshold("multinode_allreduce_busbw")
    res = network.allreduce(names, *multinode_args(profile, m), timeout)
    if not res["ok"]:
        raise ProbeError("train_scaling_nodes' step_bound rule needs the multi-node all-reduce of these "
                         "nodes, which failed: see multinode_allreduce")
    if m.extra.get("derived") == "node_bound":  # the all-reduce's floor in GB/s, as it is judged
        fleet, measure = bounds
        m = node_bound_threshold(m, node_bounds(fleet, network, measure, names))
    if m.unit != "GB/s":
        raise ProbeError(f"train_scaling_nodes' step_bound rule needs multinode_allreduce_busbw in GB/s, "
                         f"not {m.unit}")
    # t_ar at the all-reduce's threshold, not at this run's figure: a slowed network must not lower
    # the bound it is judged by (issue 45)
    bound, t_ar, how = judge.step_bound(step_s, params, res["doc"]["rows"], m.value)
    rule = (f"derived: {t.value:g} x {bound:g} = t_c / (t_c + t_ar), a step that cannot overlap its "
            f"all-reduce: t_c {step_s * 1e3:.1f} ms, the slowest node's own step; t_ar {t_ar * 1e3:.1f} ms: "
            f"{how}")
    return replace(t, value=round(t.value * bound, 4), unit="x linear", source=f"{rule}; {t.source}")


def _parallel(doc: dict, step: str) -> dict:
    """The model-parallel document's settings and one step's row (without its per-stage list)."""
    return {"backend": doc["backend"], "formula": doc["formula"], "model": doc["model"],
            "torch": doc.get("torch"), "nccl": doc.get("nccl"), step: doc[step]}


def test_tp_step_tflops(host, profile, devices, check, training):
    if why := parallel.tp_not_laid(profile, devices):
        not_applicable(f"{host}: {why}")
    doc = training("parallel", host)
    tp, details = doc["tensor_parallel"], _parallel(doc, "tensor_parallel")
    check.record(tp["tflops_per_gpu"], unit="TFLOP/s", details=details)
    t = parallel.floor(profile.threshold("tp_step_tflops"), profile)
    check.expect(tp["tflops_per_gpu"], t,
                 f"model TFLOP/s per {'GPU' if devices else 'rank'} of the tensor-parallel step over "
                 f"{tp['ranks']} ranks ({tp['step_s'] * 1e3:.1f} ms/step, {tp['params'] / 1e6:.2f} M params, "
                 f"comm share {tp['comm_share']:.0%})",
                 cause="GPU clocks or power capped, a slow GPU (see train_throughput, soak_gemm_tflops), "
                       "or the all-reduces inside the node slow (see tp_comm_share, allreduce_busbw)",
                 details=details)


def test_tp_comm_share(host, profile, devices, check, training):
    if why := parallel.tp_not_laid(profile, devices):
        not_applicable(f"{host}: {why}")
    doc = training("parallel", host)
    tp, details = doc["tensor_parallel"], _parallel(doc, "tensor_parallel")
    check.record(tp["comm_share"], unit="share of the step", details=details)
    t = profile.threshold("tp_comm_share")
    check.expect(tp["comm_share"], t,
                 f"share of the tensor-parallel step over {tp['ranks']} ranks in its all-reduces "
                 f"({tp['allreduces_per_step']} of {tp['allreduce_bytes'] / 2**20:.3g} MiB per step; "
                 f"{tp['step_s'] * 1e3:.1f} ms/step, {max(tp['compute_s']) * 1e3:.1f} ms without them)",
                 cause="the all-reduce inside the node is slow: an NVLink down or GPUs talking over PCIe "
                       "or the host (see allreduce_busbw, nvlink_links, gpu_topology, nccl_transport)",
                 details=details)


def test_pipeline_step_tflops(host, profile, devices, check, training):
    doc = training("parallel", host)
    pp, details = doc["pipeline"], _parallel(doc, "pipeline")
    check.record(pp["tflops_per_gpu"], unit="TFLOP/s", details=details)
    t = parallel.floor(profile.threshold("pipeline_step_tflops"), profile, pp["ideal_bubble"])
    _, why = parallel.slow_stage(pp["stages"])
    check.expect(pp["tflops_per_gpu"], t,
                 f"model TFLOP/s per {'GPU' if devices else 'rank'} of the {pp['schedule']} pipeline over "
                 f"{pp['ranks']} stages, {pp['micro_batches']} micro-batches "
                 f"({pp['step_s'] * 1e3:.1f} ms/step, bubble {pp['bubble']:.0%}, "
                 f"ideal {pp['ideal_bubble']:.0%})",
                 cause=f"{why}; a slow GPU or the send/recv between GPUs slow (see pipeline_bubble, "
                       f"p2p_bandwidth)", details=details)


def test_pipeline_bubble(host, profile, check, training):
    doc = training("parallel", host)
    pp, details = doc["pipeline"], _parallel(doc, "pipeline")
    worst = parallel.idlest(pp["stages"])
    slow, why = parallel.slow_stage(pp["stages"])
    details = {**details, "slowest_stage": slow}
    said = "no stage stands out" if slow is None else f"slowest stage {slow}"
    check.record(worst["bubble"], unit="share of the step", details=details)
    t = parallel.bubble_limit(profile.threshold("pipeline_bubble"), pp["ideal_bubble"])
    check.expect(worst["bubble"], t,
                 f"bubble of the {pp['schedule']} pipeline over {pp['ranks']} stages, {pp['micro_batches']} "
                 f"micro-batches: stage {worst['stage']} idle {worst['idle_s'] * 1e3:.1f} ms of "
                 f"{pp['step_s'] * 1e3:.1f} ms per step ({said})",
                 cause=f"{why} (a slow GPU, a stage given more work, or its sends and receives slow: "
                       f"see p2p_bandwidth)", details=details)


@pytest.fixture
def devices(host, profile, of_class):
    """GPUs the step runs on; [] on a CPU-only host under a profile that allows it (gloo ranks).
    A host not of the profile's class is NOT RUN (of_class)."""
    return collective_devices(host)
