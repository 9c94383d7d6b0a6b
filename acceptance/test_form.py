"""The machine's form: what rented machines (VMs, containers, slices) break on, per host."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.form import judge


def _form(host) -> dict:
    form = judge.form_of(host.facts)
    if form is None:  # a figure missing is an ERROR, never a PASS
        raise ProbeError(judge.no_form(host))
    return form


def _judge(host, check, t, v: judge.Verdict) -> None:
    __tracebackhide__ = True
    if v.na:
        not_applicable(f"{host}: {v.na}")
    if v.error:
        raise ProbeError(f"{host}: {v.error}")
    if v.note:
        check.note(v.note)
    v = judge.within(v, t)
    check.require(v.failures, v.measured, t.expected, t.source,
                  cause=v.cause, details=v.details)


def test_shm_size(host, profile, check):
    """/dev/shm: NCCL's shared-memory transport and the DataLoader's workers live in it."""
    t = profile.threshold("shm_size")
    _judge(host, check, t, judge.shm_size(_form(host), t.value))


def test_memlock(host, profile, check):
    """Locked memory unlimited where RDMA registers buffers (InfiniBand, RoCE)."""
    t = profile.threshold("memlock")
    _judge(host, check, t, judge.memlock(_form(host), judge.rdma_devices(host.facts)))


def test_gpus_usable(host, gpus, profile, check):
    """Every GPU NVML lists is one CUDA may use in the probes' (the login's) environment."""
    t = profile.threshold("gpus_usable")
    _judge(host, check, t, judge.gpus_usable(_form(host), gpus))


def test_cpu_numa_affinity(host, gpus, profile, check):
    """Every GPU has CPUs of its own NUMA node among those the probes may run on."""
    t = profile.threshold("cpu_numa_affinity")
    _judge(host, check, t, judge.cpu_numa_affinity(_form(host), gpus))
