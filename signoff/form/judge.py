"""Pure judgements of a host's form facts (facts["preflight"]["form"], probe_form.py): the
"fake parallelism" checks, each a Verdict the acceptance test records, and the preflight says
before anything runs (the same functions, so `signoff plan` and the run agree)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from signoff.printable import printable

GIB = 1 << 30
SHM_CAUSE = ("Docker's 64 MB default /dev/shm: run the container with --shm-size=1g or --ipc=host "
             "(a host's own tmpfs: mount -o remount,size=...)")
SHM_BREAKS = ("NCCL's shared-memory transport (and its proxy) cannot map its segments, and the "
              "DataLoader's workers pass batches through /dev/shm: both fail (a bus error, ncclShmOpen)")
MEMLOCK_CAUSE = ("the locked-memory limit of the probes' login (ulimit -l; a container's --ulimit "
                 "memlock=-1, limits.conf memlock unlimited): RDMA registers its buffers as locked "
                 "memory, and NCCL / perftest fail to register them")
AFFINITY_CAUSE = ("a container's cpuset (docker run --cpuset-cpus) or a taskset / Slurm binding pinned "
                  "to the other socket: every host-device copy of that GPU crosses the socket link")


@dataclass
class Verdict:
    """What a form check found: `na` (why it does not apply) or `error` (why it cannot be judged),
    else the figure and the failures (empty: a PASS); `note` is said whatever the status."""
    measured: object = None
    failures: list[str] = field(default_factory=list)
    cause: str = ""
    details: dict = field(default_factory=dict)
    na: str = ""
    error: str = ""
    note: str = ""


def within(v: Verdict, t) -> Verdict:
    """The verdict against the profile's threshold: its failures only where the figure misses it."""
    if not (v.na or v.error) and t.ok(v.measured):
        v.failures = []
    return v


def text(v, n: int = 60) -> str:
    """A value a host wrote, inert and bounded (it reaches terminals and pages)."""
    s = printable(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def form_of(facts: dict) -> dict | None:
    f = (facts.get("preflight") or {}).get("form")
    return f if isinstance(f, dict) else None


def size(n: int | None) -> str:
    if n is None:
        return "unlimited"
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.3g} {unit}"
    return f"{n} bytes"


def cpus(ids) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    ids, out = sorted(set(ids)), []
    for i in ids:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in out) or "none"


def no_form(host) -> str:
    return (f"{host}: the host's sysinfo holds no form facts (preflight.form: a sysinfo of an older "
            f"signoff, or form.py not shipped beside it)")


def shm_size(form: dict, min_gib: float) -> Verdict:
    sh = form.get("shm") or {}
    if sh.get("bytes") is None:
        return Verdict(error=f"/dev/shm unreadable: {text(sh.get('error') or 'no size read', 200)}")
    gib = sh["bytes"] / GIB
    v = Verdict(measured=round(gib, 3), details={"shm": sh})
    if gib < min_gib:
        where = " in a container" if "container" in (form.get("kinds") or []) else ""
        v.failures = [f"/dev/shm is {size(sh['bytes'])}{where}, below {min_gib:g} GiB: {SHM_BREAKS}"]
        v.cause = SHM_CAUSE
    return v


def rdma_devices(facts: dict) -> list[str]:
    """The host's RDMA devices (/sys/class/infiniband: InfiniBand, RoCE), as sysinfo read them."""
    nics = (facts.get("gpu_nic") or {}).get("nics") or []
    names = [n.get("name") for n in nics if isinstance(n, dict)]
    names += [p.get("name") for p in (facts.get("preflight") or {}).get("infiniband") or []
              if isinstance(p, dict)]
    return sorted({text(n, 40) for n in names if n})


def memlock(form: dict, rdma: list[str]) -> Verdict:
    if not rdma:
        return Verdict(na="no RDMA device (/sys/class/infiniband is empty): the locked-memory limit "
                          "is what RDMA registration needs, and nothing here registers")
    ml = form.get("memlock") or {}
    if ml.get("error") or "soft" not in ml:
        return Verdict(error=f"RLIMIT_MEMLOCK unreadable: {text(ml.get('error') or 'not read')}")
    v = Verdict(measured=size(ml["soft"]), details={"memlock": ml, "rdma": rdma})
    if ml["soft"] is not None:
        v.failures = [f"the locked-memory limit (ulimit -l) is {size(ml['soft'])}, hard "
                      f"{size(ml.get('hard'))}, on a host with RDMA devices {', '.join(rdma[:8])}"]
        v.cause = MEMLOCK_CAUSE
    return v


def cuda_visible(value: str | None, gpus: list[dict]) -> int | None:
    """How many GPUs CUDA enumerates under CUDA_VISIBLE_DEVICES (CUDA programming guide,
    "CUDA Environment Variables": indices or UUID prefixes, comma-separated; the devices before
    the first invalid entry; an empty value hides every GPU). None: not set."""
    if value is None:
        return None
    n, seen = 0, set()
    uuids = [str(g.get("uuid") or "") for g in gpus]
    for item in value.split(","):
        item = item.strip()
        if re.fullmatch(r"\d+", item) and int(item) < len(gpus):
            idx = int(item)
        elif item.startswith(("GPU-", "MIG-")) and len(item) > 4:
            idx = next((i for i, u in enumerate(uuids) if u.startswith(item)), None)
        else:
            idx = None
        if idx is None or idx in seen:
            break
        seen.add(idx)
        n += 1
    return n


def gpus_usable(form: dict, gpus: list[dict]) -> Verdict:
    if any(g.get("mig_current") for g in gpus):
        return Verdict(na="MIG is on: CUDA enumerates MIG instances, not GPUs (test_mig_mode judges "
                          "MIG against the class)")
    vis = form.get("visible") or {}
    cvd, nvd = vis.get("CUDA_VISIBLE_DEVICES"), vis.get("NVIDIA_VISIBLE_DEVICES")
    listed = len(gpus)
    cuda = vis.get("cuda_devices")
    parsed = cuda_visible(cvd, gpus)
    usable = cuda if isinstance(cuda, int) and not isinstance(cuda, bool) else parsed
    usable = listed if usable is None else min(usable, listed)
    nodes = vis.get("dev_nodes") or []
    v = Verdict(measured=listed - usable, details={
        "nvml_gpus": listed, "cuda_devices": cuda, "CUDA_VISIBLE_DEVICES": cvd,
        "NVIDIA_VISIBLE_DEVICES": nvd, "dev_nodes": nodes[:64]})
    how = "torch.cuda.device_count()" if isinstance(cuda, int) else "CUDA_VISIBLE_DEVICES as CUDA reads it"
    if usable < listed:
        env = "no CUDA_VISIBLE_DEVICES set" if cvd is None else \
            f"CUDA_VISIBLE_DEVICES={text(cvd, 40)} in the probes' (login) environment"
        v.failures.append(f"CUDA can use {usable} of the {listed} GPUs NVML lists ({how}; {env}): "
                          f"{listed - usable} hidden")
        v.cause = (f"{env} hides {listed - usable} of {listed} GPUs: unset it in the login shell's "
                   f"profile (or the job's environment)" if cvd is not None else
                   "a GPU CUDA cannot initialise (a fallen-off or faulted GPU: the kernel log's XIDs)")
    if len(nodes) < listed and "dev_nodes" in vis:
        v.failures.append(f"{len(nodes)} /dev/nvidiaN device node(s) for the {listed} GPUs NVML lists: "
                          f"CUDA cannot open a GPU without its node")
        v.measured = max(v.measured, listed - len(nodes))
        v.cause = v.cause or ("the container was given fewer GPU device nodes than the machine shows "
                              f"(NVIDIA_VISIBLE_DEVICES={text(nvd, 40)}, --gpus)")
    return v


def _bdf(bus_id: str) -> str:
    """NVML's 00000000:17:00.0 -> sysfs's 0000:17:00.0."""
    b = (bus_id or "").lower()
    return b[4:] if len(b) == 16 else b


def cpu_numa_affinity(form: dict, gpus: list[dict]) -> Verdict:
    numa = form.get("numa_cpus") or {}
    gnuma = form.get("gpu_numa")
    allowed = set(form.get("cpus_allowed") or [])
    if gnuma is None:
        return Verdict(error="the form facts hold no GPU NUMA nodes (gpu_numa: a sysinfo of an older "
                             "signoff)")
    if len(numa) <= 1:  # nothing to pin wrongly: a PASS that says why, not a measurement
        return Verdict(measured=0, details={"numa_nodes": len(numa)},
                       note=f"{'one NUMA node' if numa else 'no NUMA node in sysfs'}: every CPU the "
                            f"probes may run on is local to every GPU")
    nodes = {g["index"]: gnuma.get(_bdf(g.get("pci_bus_id"))) for g in gpus}
    if all(n is None for n in nodes.values()):
        return Verdict(na="the kernel reports no NUMA node for any GPU (sysfs numa_node -1, as in a VM "
                          "whose hypervisor hides the host's topology): no affinity to judge")
    if not allowed:
        return Verdict(error="the CPUs the probes may run on are unread (sched_getaffinity)")
    bad, details = [], {"cpus_allowed": cpus(allowed), "gpus": {}}
    for i, n in nodes.items():
        local = set(numa.get(str(n)) or []) if n is not None else set()
        details["gpus"][str(i)] = {"numa_node": n, "node_cpus": cpus(local),
                                   "allowed_local": cpus(local & allowed)}
        if n is not None and local and not local & allowed:
            bad.append(f"GPU {i} is on NUMA node {n} (CPUs {cpus(local)}), none of which the probes may "
                       f"run on (allowed: CPUs {cpus(allowed)})")
    v = Verdict(measured=len(bad), failures=bad, details=details)
    if bad:
        v.cause = AFFINITY_CAUSE
    unknown = [str(i) for i, n in nodes.items() if n is None]
    if unknown:
        v.note = f"no NUMA node reported for GPU(s) {', '.join(unknown)} (numa_node -1): not judged"
    return v
