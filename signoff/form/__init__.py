"""The machine's form (issue 52): bare metal, a VM, a container, or a VM and a container at once,
and what rented machines break on ("fake parallelism"): /dev/shm too small for NCCL and the
DataLoader, a locked-memory limit RDMA cannot register under, GPUs NVML lists that CUDA may not
use, a GPU whose NUMA node's CPUs the probes may not run on. probe_form.py reads the facts
(shipped as form.py: sysinfo's preflight() calls it), judge.py judges them (acceptance/
test_form.py), describe.py says them (the preflight's line, the cover's "what was rented")."""

from signoff import InputError

CRITERIA = {
    "shm_size": {"type": "number"},  # GiB of /dev/shm (tmpfs): NCCL's SHM transport, the DataLoader
    "memlock": {"type": "name", "ops": ("equals",)},  # RLIMIT_MEMLOCK on a host with RDMA devices
    "gpus_usable": {"type": "number", "ops": ("max",)},  # GPUs NVML lists that CUDA may not use
    "cpu_numa_affinity": {"type": "number", "ops": ("max",)},  # GPUs with no allowed CPU on their node
}


def check_extra(name: str, value, extra: dict, where: str) -> None:
    if name == "memlock" and value != "unlimited":  # the one rule RDMA's docs give: ulimit -l unlimited
        raise InputError(f"{where}.equals: expected unlimited (ulimit -l), got {value!r}")


def _verdicts(ctx, facts) -> list[tuple[str, object]]:
    """(criterion, Verdict) of each form check that will run, judged as the check judges."""
    from signoff.form import judge
    form = judge.form_of(facts)
    prof = ctx.profile
    if form is None or prof is None:
        return []
    gpus = (facts.get("nvidia") or {}).get("gpus") or []
    out = []
    for crit in ctx.checks(*CRITERIA):
        t = prof.criteria.get(crit)
        if t is None:
            continue
        if crit == "shm_size":
            v = judge.shm_size(form, t.value)
        elif crit == "memlock":
            v = judge.memlock(form, judge.rdma_devices(facts))
        elif gpus:  # gpus_usable, cpu_numa_affinity: a GPU-less host's are the gpus fixture's
            v = getattr(judge, crit)(form, gpus)
        else:
            continue
        out.append((crit, judge.within(v, t)))
    return out


# the host's preflight line reads python, torch, interface and storage first, then the form
PREFLIGHT_LAST = True


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The host's form (bare metal, VM, container; user, kernel log, /dev/shm, memlock, NIC, disk);
    warned: each form check that will FAIL or ERROR, in its own words."""
    from signoff.form import describe, judge
    form = judge.form_of(facts)
    if form is None:
        return [], []
    said = [f"form: {describe.line(form)}"]
    warned = []
    for crit, v in _verdicts(ctx, facts):
        if v.error:
            warned.append(f"{crit} ERROR: {v.error}")
        elif v.failures:
            warned.append(f"{crit} FAILs: {'; '.join(v.failures)}; likely cause: {v.cause}")
    return said, warned
