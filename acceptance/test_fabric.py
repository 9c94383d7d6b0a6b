"""The NVLink fabric (issue 43): every GPU registered with its fabric and healthy, the NVLink
domain the run's trays form, IMEX on the trays of a multi-node NVLink domain, the all-reduce
across a domain's trays over MNNVL at NVLink speed. NVML's GPU fabric
info and `nvidia-imex-ctl -N -j` are read by the sysinfo probe at the run's start."""

import pytest

from signoff import cotenants, retry, unseen
from signoff.causes import named as named_hosts
from signoff.check import cannot_show, not_applicable
from signoff.fabric import judge
from signoff.fleet import ProbeError
from signoff.hostlist import fold
from signoff.units import parse_size


def test_nvlink_fabric(host, gpus, profile, check):
    """Every GPU's fabric registration COMPLETED with status SUCCESS and a clean health mask
    (no degraded bandwidth, route recovery, unhealthy route, access-timeout recovery or incorrect
    configuration). On an HGX board a fabric manager that is down leaves the state NOT_STARTED."""
    fabs = {g["index"]: g.get("fabric") for g in gpus}
    of_class = unseen.fabric_class(profile)  # a slice of a fabric's class: judged by the class's rule
    rented = unseen.fabric_unseen(profile, host.facts, fabs)  # none reported in a VM: the host's manager
    if rented:
        cannot_show(*rented)
    if not of_class and not profile.hardware.get("nvlink_fabric"):
        seen = sorted({judge.STATES.get(f.get("state"), f.get("state")) for f in fabs.values()
                       if f and f.get("state")})
        said = "false" if profile.hardware.get("nvlink_fabric") is False else "unset"
        not_applicable(f"profile {profile.name}'s class declares no NVLink fabric whose fabric manager must "
                       f"register its GPUs (hardware.nvlink_fabric {said})"
                       + (f"; NVML reports fabric state {', '.join(seen)} (not judged)" if seen else ""))
    t = profile.threshold("nvlink_fabric")  # a slice's is its class's rule
    unread = {i: why for i, f in fabs.items() if (why := judge.unread(f))}
    if unread:  # the class has a fabric: a state NVML does not give is never a PASS
        raise ProbeError(f"{host}: no GPU fabric state for " + "; ".join(
            f"GPU {i} ({why})" for i, why in unread.items()) + f": profile {profile.name}'s class has an "
            f"NVLink fabric to judge; NVML gives GPU fabric info on Hopper and later with a driver of "
            f"R550 or newer and nvidia-ml-py 12.550 or newer")
    bad = {i: why for i, f in fabs.items() if (why := judge.gpu_fault(f))}
    rack = bool(profile.hardware.get("nvlink_domain") or of_class and of_class.hardware.get("nvlink_domain"))
    gfm = sorted({judge.gfm(f.get("health_mask")) for f in fabs.values()} - {None})
    if gfm:
        check.note(f"global fabric manager {', '.join(gfm)} (NVML health mask; not judged)")
    check.require([f"GPU {i} {why}" for i, why in bad.items()] if not t.ok(len(bad)) else [], len(bad),
                  f"GPUs with an unsound fabric registration {t.expected}: every GPU's state completed, "
                  f"status success, no health fault", t.source,
                  cause=judge.CAUSE_RACK if rack else judge.CAUSE_HGX, details={"gpus": fabs})


def test_nvlink_domain(fleet, profile, check):
    """Over every tray of the run at once: the GPUs of one NVLink domain share one cluster UUID
    and clique (partition) id, and the domain holds the declared number of GPUs
    (hardware.nvlink_domain); a tray of another domain or partition, or a domain short of GPUs
    (a tray missing from the run or the partition), is named."""
    declared = profile.hardware.get("nvlink_domain")
    if not declared:
        not_applicable(f"all hosts: profile {profile.name}'s class has no multi-node NVLink domain "
                       f"(hardware.nvlink_domain unset)")
    t = profile.threshold("nvlink_domain")
    facts = fleet.all_facts()
    seen = {n: f for n, f in facts.items() if isinstance(f, dict)}
    unseen = sorted(set(facts) - set(seen))
    per_tray = max(1, profile.hardware.get("gpu_count") or 1)
    if len(facts) == 1 and declared > per_tray:
        not_applicable(f"one tray in the run: its NVLink domain of {declared} GPUs "
                       f"(hardware.nvlink_domain) is judged across the trays of the run; run on every "
                       f"tray of the domain, or declare the partition this run holds")
    hosts = {n: [g.get("fabric") or {} for g in f["nvidia"].get("gpus", [])] for n, f in seen.items()}
    unread = [f"{n} GPU {i} ({why})" for n, gs in hosts.items() for i, fab in enumerate(gs)
              if (why := judge.unread(fab))]
    if unread:
        raise ProbeError(f"no GPU fabric state, so no NVLink domain membership, for {'; '.join(unread)}")
    res = judge.domains(hosts, declared, unseen)
    empty = [f"{n}: no GPU (NVML reports none), so none in the domain" for n, gs in hosts.items() if not gs]
    res["faults"] += empty
    res["figure"] += len(empty)
    if not res["groups"] and not res["faults"]:  # nothing read: never a PASS by absence
        raise ProbeError(f"no GPU of the run reported an NVLink domain ({', '.join(unseen)} did not answer)")
    # the trays its faults name (a tray split or in another partition: each line opens with them);
    # a domain short of GPUs names none (a tray missing from the run)
    details = {"declared": declared, "groups": res["groups"], "unseen": unseen,
               "at_fault": named_hosts(res["faults"], hosts)}
    if unseen and not res["faults"] and res["short"]:  # the hosts that did not answer may hold them
        check.record(res["figure"], details=details)
        raise ProbeError(f"NVLink domain not judged whole: {'; '.join(res['short'])}")
    failures = res["faults"] + res["short"]
    check.require(failures if not t.ok(res["figure"]) else [], res["figure"],
                  f"NVLink domains not whole {t.expected}: every domain (cluster UUID, clique id) of the "
                  f"run holds {declared} GPUs, every tray's GPUs in one of them", t.source,
                  cause="a tray left out of the NVLink partition, registered with another rack's fabric, "
                        "or missing from the run; NCCL then falls back from MNNVL to the NICs",
                  details=details)


def test_imex(host, gpus, profile, check, fleet):
    """On a tray of a multi-node NVLink domain: the IMEX daemon answers, its domain is UP, this
    node READY with every peer CONNECTED, the domain lists every tray, a channel device exists.
    A site that starts IMEX per job (threshold per_job: true) is N.A. where no daemon runs."""
    declared = profile.hardware.get("nvlink_domain")
    if not declared:
        not_applicable(f"profile {profile.name}'s class has no multi-node NVLink domain "
                       f"(hardware.nvlink_domain unset): no IMEX")
    t = profile.threshold("imex")
    imex = host.facts.get("imex")
    if imex is None:
        raise ProbeError(f"{host}: the sysinfo probe recorded no IMEX state (an older signoff's probe)")
    idle = ("nvidia-imex-ctl not installed" if not imex.get("ctl") else
            f"nvidia-imex-ctl -N -j: {imex['error']}" if imex.get("error") else None)
    if idle and t.extra.get("per_job"):
        not_applicable(f"IMEX is started per job on this site (profile {profile.name}: imex.per_job) and "
                       f"no daemon answers at idle ({idle}): its domain, peers and channel device are not "
                       f"judged here; a job's own IMEX domain carries its multi-tray NVLink traffic")
    names = {}
    for n, f in fleet.all_facts().items():
        if isinstance(f, dict):
            for a in (f.get("imex") or {}).get("addresses") or []:
                names[a] = n
    names.update({h.address: h.name for h in fleet.inventory.hosts if getattr(h, "address", None)})
    trays = declared // max(1, profile.hardware.get("gpu_count") or 1)
    faults = [f"IMEX daemon not answering: {idle}"] if idle else judge.imex_faults(imex, trays, names)
    check.require(faults if not t.ok(len(faults)) else [], len(faults),
                  f"IMEX faults {t.expected}: the daemon answers, domain UP, this node READY, every peer "
                  f"CONNECTED, every tray of the domain listed, a channel device", t.source,
                  cause="the nvidia-imex service down or misconfigured (nodes_config.cfg), a peer tray's "
                        "daemon down or unreachable, or no channel created: CUDA cannot import memory "
                        "across trays and NCCL falls back from MNNVL",
                  details=imex)


@pytest.mark.usefixtures("fleet_of_class")
def test_mnnvl_allreduce(fleet, network, profile, check, pytestconfig):
    """The all-reduce across the trays of each NVLink domain of the run (NCCL's defaults, as the
    published runs: MNNVL, NVLS on), its busbw at the threshold's size judged against the NVLink
    floor, the slowest domain's; its traffic between trays must be MNNVL: a domain that fell back
    to the NICs (NET/IB) FAILs naming the tray and transport. The NICs' own run (MNNVL and NVLS
    off) is multinode_allreduce's, judged by the NIC rule; a tray in no one domain is named here."""
    if not profile.hardware.get("nvlink_domain"):
        not_applicable(f"all hosts: profile {profile.name}'s class has no multi-node NVLink domain "
                       f"(hardware.nvlink_domain unset): no all-reduce over MNNVL")
    names = fleet.names
    if len(names) < 2:
        not_applicable("one tray: no all-reduce across the trays of its NVLink domain")
    t = profile.threshold("mnnvl_allreduce_busbw")
    hosts = {n: [g.get("fabric") or {} for g in fleet.facts(n)["nvidia"].get("gpus", [])] for n in names}
    unread = [f"{n} GPU {i} ({why})" for n, gs in hosts.items() for i, f in enumerate(gs)
              if (why := judge.unread(f))]
    if unread:  # which trays share a domain is NVML's to say: never guessed from the inventory
        raise ProbeError(f"no GPU fabric state, so no NVLink domain to run the all-reduce over MNNVL in, "
                         f"for {'; '.join(unread)}")
    groups, outside = judge.tray_domains(hosts)
    runs = [trays for trays in groups.values() if len(trays) > 1]
    if not runs and not outside:
        not_applicable(f"all hosts: no two trays of the run share an NVLink domain "
                       f"({fold(sorted(names))}: each alone in its own)")
    lo, hi = t.extra["sweep"]
    size, timeout = parse_size(t.extra["size"]), pytestconfig.getoption("collective_timeout")

    def busbw(res):
        return next((r["busbw"] for r in res["doc"]["rows"] if r["bytes"] == size), None)
    bad, figures, details, causes = [], {}, {}, []
    for trays in runs:
        where = fold(sorted(trays))

        def run(again=False, trays=trays, where=where):
            """One domain's all-reduce; a failed one (a tray, not noise) ERRORs, never retried."""
            res = network.collective(trays, "allreduce", ["--min-bytes", lo, "--max-bytes", hi], {}, timeout,
                                     again)
            if not res["ok"]:
                raise ProbeError(f"{where}: the all-reduce over their NVLink domain failed; caused by "
                                 f"{', '.join(res.get('culprits') or []) or 'no one tray'}: "
                                 + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
            if busbw(res) is None:
                raise ProbeError(f"{where}: no all-reduce at {t.extra['size']} in the run")
            return res
        res = retry.kept(*retry.best_of(run(), lambda run=run: run(again=True), busbw, t))
        cotenants.guard(check, "all hosts", res, f"all-reduce over MNNVL on {where}", busbw(res),
                        t.expected, t.unit, t.source, {"rows": res["doc"]["rows"]})
        gpus = sum(len(hosts[n]) for n in trays)
        if res["doc"]["world_size"] != gpus:  # judged on fewer GPUs, it proves nothing of the rest
            raise ProbeError(f"{where}: the all-reduce over MNNVL ran {res['doc']['world_size']} ranks where "
                             f"NVML reports {gpus} GPUs: it needs a rank per GPU of every tray")
        how = judge.over_mnnvl(res["hosts"])
        figures[where] = bw = busbw(res)
        details[where] = {"busbw": bw, "rows": res["doc"]["rows"], "transport": how["measured"],
                          "used": how["used"], "attempts": res.get("attempts"),
                          "spread_pct": res.get("spread_pct")}
        bad += how["bad"]  # each names its tray and what it used between the trays
        causes += [how["cause"]] if how["bad"] else []
        if not t.ok(bw):
            bad.append(f"{where}: all-reduce busbw {bw:g} GB/s at {t.extra['size']} over "
                       f"{how['measured']}{retry.said(res, t.unit)}, below {t.value:g} {t.unit}")
            if not how["bad"]:
                causes.append("a degraded NVLink or NVLink switch path in the domain (see nvlink_fabric's "
                              "health mask and error_counters' NVLink counters), or another job on its "
                              "switches")
        if not how["known"]:
            check.note(f"{where}: NCCL's log named no transport between the trays (multinode_transport "
                       f"asserts it on its own run)")
    bad += [f"{n}: in no one NVLink domain ({why}), so in no all-reduce over MNNVL (see nvlink_domain)"
            for n, why in outside.items()]
    # the trays named: what a tray used between the trays, a tray in no one domain (a domain's
    # busbw below the floor names none of its trays)
    at_fault = named_hosts([x for x in bad if not any(x.startswith(f"{w}: all-reduce busbw ")
                                                      for w in figures)], names)
    if outside:
        causes.append("a tray whose GPUs did not all register with one domain's fabric")
    worst = min(figures.values()) if figures else None
    check.require(bad, worst, f"every NVLink domain's all-reduce over MNNVL at {t.extra['size']} "
                  f"{t.expected} ({len(runs)} domain(s) of the run, NCCL's defaults)", t.source,
                  cause="; ".join(causes),
                  details={"domains": details, "outside": outside, "at_fault": at_fault}, fleet=(t, None))
