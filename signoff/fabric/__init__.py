"""The NVLink fabric (issue 43): every GPU's registration with its fabric (NVML's GPU fabric
info, read by the sysinfo probe: signoff/gpu/probe_sysinfo.py fabric_info()), the NVLink domain
the run's hosts form (one cluster UUID and clique id per domain, the declared number of GPUs),
and IMEX (`nvidia-imex-ctl -N -j`, the channel devices) where the class spans trays with one
NVLink domain, and the all-reduce across that domain's trays over MNNVL at NVLink speed. Judged
in acceptance/test_fabric.py (signoff/fabric/judge.py)."""

from signoff import InputError

CRITERIA = {
    # GPUs whose fabric registration did not complete with status SUCCESS or whose health mask
    # is not clean; on classes with hardware.nvlink_fabric (NVSwitch HGX, NVL72 trays)
    "nvlink_fabric": {"type": "number", "ops": ("max",)},
    # NVLink domains (cluster UUID + clique id) of the run that do not hold hardware.nvlink_domain
    # GPUs, or hold a tray split across domains
    "nvlink_domain": {"type": "number", "ops": ("max",)},
    # faults of a tray's IMEX daemon (not READY, a peer not CONNECTED, domain not UP, no channel);
    # per_job: true where the site starts IMEX per job (Kubernetes DRA ComputeDomain, a Slurm
    # prolog): an idle tray without a daemon is then N.A. saying what was not judged
    "imex": {"type": "number", "ops": ("max",), "extra": ("per_job",)},
    # GB/s: the all-reduce across the trays of one NVLink domain over MNNVL (NCCL's defaults, as the
    # published runs: NVLS on), at `size` of its `sweep`, the slowest domain of the run; its traffic
    # between trays must be MNNVL (network/route.py). The NICs' run (MNNVL and NVLS off) is
    # multinode_allreduce's, judged by its own (NIC) rule. retry: measured again after a miss
    "mnnvl_allreduce_busbw": {"type": "number", "extra": ("size", "sweep"), "retry": True},
}


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "mnnvl_allreduce_busbw":
        from signoff.interconnect import check_sweep
        check_sweep(extra, where)
    if name == "imex" and "per_job" in extra and not isinstance(extra["per_job"], bool):
        raise InputError(f"{where}.per_job: expected true or false, got {extra['per_job']!r}")


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """`signoff plan`: on a slice of a class with an NVLink fabric, in a VM or a container, whose
    GPUs report no fabric state, nvlink_fabric is UNSEEN (its fabric manager runs on the
    provider's host), in the check's own words."""
    from signoff import unseen
    if ctx.profile is None or not ctx.checks("nvlink_fabric") or not (facts.get("nvidia") or {}).get("gpus"):
        return [], []
    got = unseen.fabric_unseen(ctx.profile, facts, [g.get("fabric") for g in facts["nvidia"]["gpus"]])
    return ([], [unseen.plan_line("nvlink_fabric", *got, ctx.config)]) if got else ([], [])
