"""The field's health checks (SemiAnalysis ClusterMAX, Meta GCM, Imbue, Azure, DCGM; issue 14):
XID history, error counters over the run, silent data corruption, HBM bandwidth, thermal
thresholds and margin, GPU-NIC affinity and GPUDirect."""

from dataclasses import replace

from signoff import cotenants, unseen
from signoff.check import cannot_show, not_applicable
from signoff.fleet import ProbeError
from signoff.gpu import judge
from signoff.soak import judge as soak
from signoff.soak.plugin import soaked

RULE = "signoff acceptance rule"
COUNTERS = ("SemiAnalysis ClusterMAX's passive PCIe / link-flap / IB-counter monitoring (clustermax.ai); "
            "Meta GCM's check-dcgmi nvlink (NVLink CRC, replay, recovery thresholds 0 by default: "
            "facebookresearch.github.io/gcm/docs/GCM_Health_Checks/health_checks/check-dcgmi/nvlink); "
            "signoff rule: no error counter grows during the sign-off")
XID_RUN = ("DCGM fails on XID 63; signoff rule (docs/thresholds.md), as soak_errors: no XID of any code "
           "in the kernel log while the suite loads the GPUs")
SDC = ("SemiAnalysis ClusterMAX's silent-data-corruption test (clustermax.ai); signoff rule: identical "
       "seeded computations give identical bits on every GPU and host of a class (majority vote)")


def test_xid_history(host, gpus, profile, check, health):
    """Fatal XIDs in the kernel log over the profile's window FAIL; the others are reported.
    The log must cover this boot (require_history: that much before the run); short of the
    window before the boot (a fresh node, a volatile journal) it is judged as far as it reaches,
    and what it covers is said with the verdict (a reboot that hid an XID: the soak and
    test_xid_during_run catch what it left broken)."""
    t = profile.threshold("xid_fatal")
    window = None if t.extra["window"] == "boot" else soak.parse_duration(t.extra["window"])
    need = t.extra.get("require_history")
    doc = health.xids(host.name, window)
    if doc.get("error"):
        denied = unseen.xid_unseen(host.facts, doc["error"])  # a container's or a user's: the host's to give
        if denied:
            cannot_show(*denied)
        raise ProbeError(f"{host}: kernel log unreadable, so no XID history: {doc['error']}"
                         + unseen.xid_fix(host.facts, doc["error"]))  # bare metal: the operator's to fix
    counts = {int(k): v for k, v in doc["counts"].items()}
    fatal, said, others = judge.xid_history(doc, t.extra["codes"], t.extra.get("rows") or {}, gpus)
    end = health.run_start(host.name)
    # strict: the window's part of this boot, or require_history's span before the run
    need_from = end - soak.parse_duration(need) if need else max(doc["since"], doc.get("boot") or 0)
    over = "this boot" if window is None else f"the last {soak.human_duration(window)}"
    short = judge.log_short(doc, end, need_from)
    if short and not fatal:  # what the log lost may hold the XID: never "none over 168 h"
        check.record(sum(counts.get(c, 0) for c in t.extra["codes"]), t.expected, t.unit, t.source,
                     {**doc, "window_s": window})
        lacks = (f"the last {soak.human_duration(soak.parse_duration(need))} (require_history)" if need
                 else over if need_from == doc["since"] else f"this boot (from {judge.utc(need_from)})")
        raise ProbeError(f"{host}: the kernel log ({doc['source']}) covers {short}, not {lacks}: XIDs "
                         f"before it are unseen, so no PASS; keep a persistent journal (journald "
                         f"Storage=persistent)" + (", or drop require_history" if need else ""))
    cover = judge.log_cover(doc, end)
    if cover:  # a fresh node or a volatile journal: judged as far as the log reaches, said
        check.note(f"kernel log {cover}: the rest of the {soak.human_duration(window)} window is unseen")
    what = (f"fatal XIDs in the kernel log ({doc['source']}) over {over}"
            + (f" ({cover})" if cover else "")
            + (f": {said}" if said else "") + (f"; others: {others}" if others else ""))
    check.expect(sum(fatal.values()), t, what, cause=judge.xid_cause(fatal),
                 details={**doc, "window_s": window, "covers": cover})


def test_xid_during_run(host, gpus, check, health):
    """Runs last (signoff/gpu/plugin.py): any XID the kernel logged since the run's start, the
    suite's own load (all-reduce, network, storage, soak, training) on the GPUs, FAILs."""
    doc = health.xids_during(host.name)
    if doc.get("error"):
        denied = unseen.xid_unseen(host.facts, doc["error"])
        if denied:
            cannot_show(*denied)
        raise ProbeError(f"{host}: kernel log unreadable at the end of the run, so no XID of the run "
                         f"is excluded: {doc['error']}" + unseen.xid_fix(host.facts, doc["error"]))
    end = health.run_start(host.name)
    short = judge.log_short(doc, end, doc["since"])
    if short:  # a ring buffer that wrapped during the run lost the start of it
        raise ProbeError(f"{host}: the kernel log ({doc['source']}) read at the end of the run covers "
                         f"{short}, not the run since {judge.utc(doc['since'])}: XIDs of the run are unseen")
    seen = [f"XID {x['xid']} on {x['device']} at {judge.utc(x['t'])} ({x['t'] - doc['since']:.0f} s into "
            f"the run): {x['line']}" for x in doc["xids"][:5]]
    n = sum(doc["counts"].values())
    check.require(seen + ([f"and {n - len(seen)} more"] if n > len(seen) else []),
                  n, "no XID in the kernel log since the run's start", XID_RUN,
                  cause="a GPU, its HBM, NVLink or driver that fails under load: see NVIDIA's XID catalog "
                  "for the code", details={**doc, "run_start": end})


def test_error_counters(host, profile, check, health):
    """Runs last (signoff/gpu/plugin.py): every InfiniBand port's symbol errors, link downed
    (flaps), link error recoveries and receive errors, the data interface's errors and drops,
    every GPU's PCIe replays, each active NVLink's error counters and each GPU's volatile ECC
    counts, at the end against the start of the run. None may grow unless the profile's
    error_counter_growth allows its counters some, with a source."""
    before = host.facts.get("counters")
    if not before:
        raise ProbeError(f"{host}: sysinfo recorded no error counters at the start of the run")
    iface = host.session.host.data_iface if host.session else None
    ifaces = [iface] if iface else []
    if not (before["infiniband"] or before["pcie_replay"] or ifaces):
        not_applicable(f"{host}: {judge.NOTHING_TO_WATCH}")
    after = health.counters(host.name)
    grew, unread = judge.counter_growth(before, after, ifaces)
    t = profile.criteria.get("error_counter_growth")
    gpu = judge.gpu_counter_growth(before, after, dict.fromkeys(t.extra["counters"], t.value) if t else {})
    grew, unread = grew + gpu["grew"], unread + gpu["unread"]
    if gpu["unsupported"]:  # NVML offers no such counter there (ECC off, a removed API): said
        check.note(f"not watched, NVML does not read them: {judge.unsupported_text(gpu['unsupported'])}")
    if gpu["allowed"]:
        check.note(f"grew within error_counter_growth ({t.expected} for {', '.join(t.extra['counters'])}, "
                   f"source: {t.source}): {'; '.join(gpu['allowed'])}")
    if unread and not grew:
        raise ProbeError(f"{host}: counters unreadable: {', '.join(unread)}")
    links = sum(1 for ls in (before.get("nvlink") or {}).values() for x in ls.values() if x.get("active"))
    watched = [*(f"InfiniBand {p}" for p in before["infiniband"]), *ifaces,
               *(f"GPU {g}" for g in before["pcie_replay"])] + \
        ([f"the error counters of {links} active NVLink(s)"] if links else []) + \
        ([f"the volatile ECC counts of {len(before['ecc'])} GPU(s)"] if before.get("ecc") else [])
    allowed = f" (error_counter_growth: {t.expected} for {', '.join(t.extra['counters'])})" if t else ""
    check.require(grew, f"{len(grew)} counter(s) grew", "no error counter grows during the run on "
                  + ", ".join(watched) + allowed, COUNTERS + (f"; {t.source}" if t else ""),
                  cause="a marginal cable, transceiver, port or PCIe link (link_downed, carrier_changes: "
                  "the link flapped); an NVLink (its cable, connector or NVSwitch port: replays, CRC, "
                  "recoveries) or HBM (ECC) that errs under load",
                  details={"before": before, "after": after, "unreadable": unread,
                           "nvml_unsupported": [list(x) for x in gpu["unsupported"]],
                           "allowed": gpu["allowed"]})


def test_sdc(host, fleet, check, health):
    doc = health.sdc(host.name)
    if doc.get("error"):
        raise ProbeError(f"{host}: silent-data-corruption probe: {doc['error']}")
    ran = sorted({d.get("name") for d in doc["devices"].values()})
    if host.gpus and (len(doc["devices"]) != len(host.gpus) or "cpu" in ran):  # a PASS on fewer
        check.record(None, details=doc)
        raise ProbeError(f"{host}: the silent-data-corruption probe ran on {len(doc['devices'])} device(s) "
                         f"({', '.join(ran)}) of the {len(host.gpus)} GPUs NVML reports: "
                         f"CUDA_VISIBLE_DEVICES or a GPU torch cannot use")
    fails, mine = judge.sdc_host(doc)
    key = sdc_class(doc)
    peers = {host.name: mine}
    for n in fleet.names:
        if n == host.name:
            continue
        try:  # a peer's document this host is not judged by (that host's own check says why)
            other = health.sdc(n)
            if not other.get("error") and sdc_class(other) == key:
                peers[n] = judge.sdc_host(other)[1]
        except Exception:  # noqa: BLE001 - unreadable, or of a shape no probe prints
            continue
    against, ties = judge.sdc_fleet(peers, host.name)
    fails += against
    if ties and not fails:  # nothing here says which host computes wrongly: never blame the good one
        raise ProbeError(f"{host}: silent-data-corruption vote: {'; '.join(ties)}: the hosts of its class "
                         f"disagree with no majority, so neither is judged; add a third host of the class")
    check.require(fails, f"{len(doc['devices'])} device(s) x {', '.join(doc['ops'])}; "
                  f"{len(peers)} host(s) of its class", "the same bits as the other GPUs of the host "
                  "and the hosts of its class", SDC, cause="a GPU (or CPU) that computes wrongly: "
                  "silent data corruption",
                  details={**doc, "class": list(key), "hosts_compared": sorted(peers)})


def sdc_class(doc: dict) -> tuple:
    """Hosts whose checksums must agree: the same devices, torch, CUDA and sizes."""
    return (tuple(sorted({d.get("name") for d in doc["devices"].values()})), doc["torch"], doc["cuda"],
            doc["n"], tuple(doc["ops"]))


def _hbm(host, health) -> dict:
    doc = health.hbm(host.name)
    if doc.get("error") or doc.get("errors") or len(doc.get("gpus") or {}) != len(host.gpus):
        raise ProbeError(f"{host}: HBM probe measured {len(doc.get('gpus') or {})} of {len(host.gpus)} "
                         f"GPUs: {doc.get('error') or doc.get('errors')}")
    return doc


def test_hbm_bandwidth(host, gpus, profile, check, health, fleet):
    t = profile.threshold("hbm_bandwidth")
    doc = _hbm(host, health)
    if t.extra.get("derived") == "memory_peak":  # no class: each GPU against its own peak
        peaks = {str(g["index"]): judge.memory_peak(g) for g in gpus}
        if any(v is None for v, _ in peaks.values()):
            raise ProbeError(f"{host}: no memory peak to judge HBM by: "
                             f"{'; '.join(w for v, w in peaks.values() if v is None)}")
        ratio = judge.fractions(doc["gpus"], peaks)
        bad = [f"GPU {k}'s device-to-device copy, read + written, {doc['gpus'][k]:g} TB/s / its peak "
               f"{peaks[k][0]:g} TB/s ({peaks[k][1]}) = {r:g} x memory peak" for k, r in ratio.items()
               if not t.ok(r)]
        # the figure recorded is the slowest GPU's TB/s, as a class's (signoff calibrate reads it)
        check.require(bad, min(doc["gpus"].values()), f"every GPU {t.expected}", t.source,
                      cause="degraded HBM or clocks (throttling, a power cap)",
                      details={**doc, "peaks": {k: v for k, (v, _) in peaks.items()}, "fraction": ratio},
                      fleet=(replace(t, unit="TB/s"), None))
        return
    slowest = min(doc["gpus"], key=doc["gpus"].get)
    check.expect(doc["gpus"][slowest], t, f"GPU {slowest} (the slowest) device-to-device copy, "
                 f"read + written", cause="degraded HBM or clocks (throttling, a power cap)", details=doc,
                 fleet=fleet.peers("hbm", _slowest))


def _slowest(doc) -> float | None:
    """A host's slowest GPU as its peers see it: none for a host whose HBM probe broke."""
    return None if doc.get("error") or doc.get("errors") else min(doc["gpus"].values())


def test_hbm_uniformity(host, gpus, profile, check, health):
    t = profile.threshold("hbm_uniformity")
    doc = _hbm(host, health)
    if len(doc["gpus"]) < 2:
        not_applicable(f"{host} has one GPU: no host median to compare it with")
    med, bad = judge.hbm_outliers(doc["gpus"], t.value)
    worst = min(doc["gpus"].values()) / med
    check.require(bad, round(worst, 3), f"every GPU {t.expected}", t.source,
                  cause="one GPU's HBM or clocks degraded", details={**doc, "median": med})


def _thresholds(gpus, need) -> dict:
    """Every GPU's thresholds; those the check judges (`need`) must be readable. An L40S
    reports no memory threshold: a profile that asks none judges what the GPU reports."""
    out = {g["index"]: judge.thermal_thresholds(g.get("thermal") or {}) for g in gpus}
    unread = [f"GPU {i} {k}" for i, th in out.items() for k, (v, _) in th.items() if v is None and k in need]
    if unread:
        raise ProbeError(f"NVML and nvidia-smi gave no temperature threshold for {', '.join(unread)}")
    return out


def test_thermal_thresholds(host, gpus, profile, check):
    """Each GPU's slowdown, shutdown, GPU-max and memory-max temperatures, in either NVML form,
    not below the class's (a lower one throttles the GPU early)."""
    t = profile.threshold("thermal_slowdown")
    if t.extra.get("derived") == "same_model":  # no class: the GPU's siblings of its model
        return _same_model_thresholds(host, gpus, t, check)
    want = {"slowdown": t.value, **{k: v for k, v in t.extra.items() if k in judge.SMI_ABSOLUTE}}
    try:
        got = _thresholds(gpus, want)
    except ProbeError as exc:
        raise ProbeError(f"{host}: {exc}") from None
    bad = [f"GPU {i} {k} {th[k][0]} C < {v} C ({th[k][1]})" for i, th in got.items()
           for k, v in want.items() if th[k][0] < v]
    check.require(bad, min(th["slowdown"][0] for th in got.values()),
                  "every GPU's " + ", ".join(f"{k} >= {v} C" for k, v in want.items()), t.source,
                  cause="a VBIOS or driver setting below the class's", details=got)


def _same_model_thresholds(host, gpus, t, check):
    """Every GPU's thresholds >= t.value x the highest its host's GPUs of the same model read:
    one GPU whose VBIOS or driver sets them lower throttles early. A GPU alone of its model has
    nothing to compare with: its own slowdown is what thermal_margin judges the soak by."""
    try:
        got = _thresholds(gpus, ("slowdown",))
    except ProbeError as exc:
        raise ProbeError(f"{host}: {exc}") from None
    want = judge.same_model_thresholds(gpus, got)
    if not want:
        not_applicable(f"{host}: no class figure, and no two GPUs of one model to compare; each GPU's "
                       f"own slowdown judges the soak (thermal_margin)")
    bad = [f"GPU {i} {k} {'unreadable' if got[i][k][0] is None else f'{got[i][k][0]} C'} < {t.value:g} x "
           f"{v} C, its model's highest on the host ({got[i][k][1]})" for i, w in want.items()
           for k, v in w.items() if v is not None and (got[i][k][0] is None or got[i][k][0] < t.value * v)]
    check.require(bad, min(got[i]["slowdown"][0] for i in want),
                  f"every GPU's thresholds {t.expected} (the highest its model reads on the host)", t.source,
                  cause="a VBIOS or driver setting below its siblings'", details=got)


def test_thermal_margin(host, gpus, profile, soak_run, check):
    """After the soak: the margin between each GPU's hottest sustained temperature (held as
    soak_gpu_temp's hold) and its own slowdown threshold."""
    t = profile.threshold("thermal_margin")
    hs = soaked(host, soak_run)
    # another process's load heats the GPUs too: not the cooling's margin (ERROR, naming it)
    cotenants.guard(check, host, hs.doc, "soak", None, str(t.expected), t.unit, t.source)
    try:
        limits = _thresholds(gpus, ("slowdown",))
    except ProbeError as exc:
        raise ProbeError(f"{host}: {exc}") from None
    held = profile.criteria.get("soak_gpu_temp")
    hold = soak.parse_duration((held.extra if held else {}).get("hold", "30s"))
    hold = soak.effective_hold(hs.series, hold)
    rows = soak.temperatures(hs.series, "temp", hold)
    if not all(r["readable"] for r in rows):
        raise ProbeError(f"{host}: the soak has no GPU temperature for GPU(s) "
                         f"{[r['gpu'] for r in rows if not r['readable']]}")
    margin = {r["gpu"]: limits[r["gpu"]]["slowdown"][0] - r["sustained"] for r in rows}
    worst = min(margin, key=margin.get)
    check.expect(margin[worst], t, f"GPU {worst}'s margin: slowdown {limits[worst]['slowdown'][0]} C "
                 f"- sustained {rows[worst]['sustained']:g} C (held {hold:g} s)",
                 cause="cooling: airflow, fans, inlet temperature or a cold plate",
                 details={"margin": margin, "sustained": rows, "slowdown": limits})


def test_gpu_nic_affinity(host, gpus, profile, check):
    """On an InfiniBand/RoCE host: every GPU's closest NIC (the map is recorded), GPUDirect
    RDMA available (nvidia_peermem or dma-buf); rail alignment where the profile sets
    gpu_nic_affinity."""
    topo = host.facts.get("gpu_nic") or {}
    if not topo.get("nics"):
        not_applicable(f"{host} has no RDMA NIC (InfiniBand/RoCE) in /sys/class/infiniband")
    unread = [i for i, links in topo["gpus"].items() if links is None]
    if unread or len(topo["gpus"]) != len(gpus):
        raise ProbeError(f"{host}: the PCIe path of GPU(s) {unread or 'all'} is not in sysfs")
    near = {i: judge.nearest_nics(links) for i, links in topo["gpus"].items()}
    dmabuf = topo.get("dmabuf") or {}
    no_dmabuf = [i for i, v in dmabuf.items() if not v]
    bad = [] if topo.get("peermem") or (dmabuf and not no_dmabuf) else [
        "no GPUDirect RDMA: nvidia_peermem not loaded and dma-buf "
        + (f"unsupported on GPU(s) {', '.join(no_dmabuf)}" if dmabuf else "unreadable (libcuda)")]
    t = profile.criteria.get("gpu_nic_affinity")
    if t:
        bad += [f"GPU {i}'s closest NIC is {lv} ({', '.join(nics)})" for i, (lv, nics) in near.items()
                if not t.ok(judge.LEVELS.index(lv) + 1)]
    worst = max((lv for lv, _ in near.values()), key=judge.LEVELS.index)
    # Grace trays (GB200, GB300): the GPU hangs off NVLink-C2C, not a PCIe switch a NIC could
    # share, so NODE (a NIC on the GPU's own Grace socket) is the nearest there is, and the GPU's
    # memory shows as CPU-less NUMA nodes of its own that no NIC sits on
    c2c = " (GPUs on NVLink-C2C: no PCIe switch shared with a NIC, NODE, a NIC on the GPU's own " \
          "Grace socket, is the nearest)" if profile.hardware.get("host_link") == "c2c" else ""
    check.require(bad, f"closest NIC at worst {worst}",
                  "GPUDirect RDMA" + (f" and every GPU's closest NIC {t.expected}" if t else
                                      " (rail alignment not required by the profile: map reported)") + c2c,
                  t.source if t else RULE, cause="nvidia_peermem not loaded / no dma-buf; a NIC "
                  "on another PCIe switch or socket", details={"map": near, **topo})
