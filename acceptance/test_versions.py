"""Software parity across hosts and the minimums the profile sets."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.intent.judge import for_parity, parity_note, pinned
from signoff.units import version_tuple
from signoff.versions import parity
from signoff.versions.judge import runs_on

PARITY_SOURCE = "majority of hosts in this run"
# CUDA major of the torch build -> the oldest driver branch that runs it
DRIVER_FOR_CUDA = {11: "450.80.02", 12: "525", 13: "580"}
UNIQUE_SOURCE = "machine-id, boot id, network namespace and GPU UUIDs of every host in this run"
COMPAT_SOURCE = ("NVIDIA CUDA compatibility docs (docs.nvidia.com/deploy/cuda-compatibility: driver >= 525 "
                 "for CUDA 12.x, >= 580 for 13.x; docs/reference-figures.md)")


def test_version_parity(host, fleet, check, intent):
    per_host = fleet.once("versions", lambda: {n: parity.versions(for_parity(intent, f))
                                               for n, f in fleet.all_facts().items() if isinstance(f, dict)})
    if len(fleet.names) < 2:
        not_applicable("one host: nothing to compare its versions with (its versions: the report's "
                       "versions table)")
    skip = pinned(intent)  # what the intent file pins is judged against it (intent_*): a fleet
    if parity_note(intent):  # uniformly on the wrong firmware is no majority's to pass
        check.note(parity_note(intent))
    odd = parity.deviations(per_host, host.name, fleet.once("parity", lambda: parity.fields(per_host)), skip)
    check.require(odd, f"{len(odd)} field(s) differ", "the same versions as the other hosts",
                  PARITY_SOURCE, cause="hosts were provisioned from different images or envs",
                  details=per_host[host.name])


def test_host_unique(host, fleet, check):
    """No other host of the run is this machine: every check of a second name for it would
    measure this one again."""
    if len(fleet.names) < 2:
        not_applicable("one host: no other host it could be")
    if not (host.facts.get("machine") or {}).get("boot_id"):
        raise ProbeError(f"{host}: sysinfo recorded no boot id: cannot tell this machine from the others")
    same = fleet.once("machines", lambda: parity.same_machines(fleet.all_facts())).get(host.name, [])
    check.require([f"{host}: the same machine as other hosts ({'; '.join(same)})"] if same else [],
                  "shares its machine with other hosts", "a machine of its own", UNIQUE_SOURCE,
                  cause="two inventory entries reach one machine (an alias, a copied entry)",
                  details=host.facts["machine"])


def test_nvidia_driver_version(host, gpus, profile, check):
    t = profile.threshold("nvidia_driver_version")
    drv = host.facts["nvidia"]["driver"]
    branch, cause = str(drv).split(".")[0], ""
    if t.extra.get("branches") and not t.ok(drv):
        own = t.branch_minimum(drv)
        cause = (f"branch {branch} is not among the table's branches {', '.join(t.extra['branches'])}"
                 if own is None else f"below branch {branch}'s minimum {own}: update the driver")
    check.expect(drv, t, "NVIDIA driver", cause=cause)


def test_cuda_driver_version(host, gpus, profile, check):
    check.expect(host.facts["nvidia"]["cuda_driver"], profile.threshold("cuda_driver_version"),
                 "CUDA driver API version")


def test_torch_cuda_build(host, gpus, check):
    """The probe Python's torch can run kernels on these GPUs (no 'no kernel image')."""
    t = host.facts["torch"]
    bad = []
    if not t.get("version"):
        bad.append(f"torch is not importable by {host.facts['python_executable']}: {t.get('error')}")
    elif not t.get("cuda"):
        bad.append(f"torch {t['version']} is a CPU-only build")
    else:
        arches = t.get("arch_list") or []
        for cc in sorted({g["compute_capability"] for g in gpus}):
            if not runs_on(arches, cc):
                bad.append(f"compute capability {cc} is not in torch's arch list {arches}")
        major = version_tuple(t["cuda"])[0]
        need = DRIVER_FOR_CUDA.get(major)
        drv = host.facts["nvidia"]["driver"]
        if need and version_tuple(drv) < version_tuple(need):
            bad.append(f"driver {drv} is older than {need}, needed by torch's CUDA {t['cuda']}")
        if not t.get("cuda_available"):
            bad.append(f"torch.cuda.is_available() is False ({t.get('error', 'no reason given')})")
    check.require(bad, f"torch {t.get('version')} CUDA {t.get('cuda')}",
                  "a CUDA build of torch that covers the GPUs' compute capability",
                  COMPAT_SOURCE, details=t)
