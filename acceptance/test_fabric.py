"""The NVLink fabric (issue 43): every GPU registered with its fabric and healthy, the NVLink
domain the run's trays form, IMEX on the trays of a multi-node NVLink domain. NVML's GPU fabric
info and `nvidia-imex-ctl -N -j` are read by the sysinfo probe at the run's start."""

from signoff.check import not_applicable
from signoff.fabric import judge
from signoff.fleet import ProbeError


def test_nvlink_fabric(host, gpus, profile, check):
    """Every GPU's fabric registration COMPLETED with status SUCCESS and a clean health mask
    (no degraded bandwidth, route recovery, unhealthy route, access-timeout recovery or incorrect
    configuration). On an HGX board a fabric manager that is down leaves the state NOT_STARTED."""
    fabs = {g["index"]: g.get("fabric") for g in gpus}
    if not profile.hardware.get("nvlink_fabric"):
        seen = sorted({judge.STATES.get(f.get("state"), f.get("state")) for f in fabs.values()
                       if f and f.get("state")})
        said = "false" if profile.hardware.get("nvlink_fabric") is False else "unset"
        not_applicable(f"profile {profile.name}'s class declares no NVLink fabric whose fabric manager must "
                       f"register its GPUs (hardware.nvlink_fabric {said})"
                       + (f"; NVML reports fabric state {', '.join(seen)} (not judged)" if seen else ""))
    t = profile.threshold("nvlink_fabric")
    unread = {i: why for i, f in fabs.items() if (why := judge.unread(f))}
    if unread:  # the class has a fabric: a state NVML does not give is never a PASS
        raise ProbeError(f"{host}: no GPU fabric state for " + "; ".join(
            f"GPU {i} ({why})" for i, why in unread.items()) + f": profile {profile.name}'s class has an "
            f"NVLink fabric to judge; NVML gives GPU fabric info on Hopper and later with a driver of "
            f"R550 or newer and nvidia-ml-py 12.550 or newer")
    bad = {i: why for i, f in fabs.items() if (why := judge.gpu_fault(f))}
    rack = bool(profile.hardware.get("nvlink_domain"))
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
    details = {"declared": declared, "groups": res["groups"], "unseen": unseen}
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
