"""Training, the controller: each measurement's probe on one host behind the gates its checks
apply (as signoff/interconnect/run.py), and the step over 2, 4, ... all nodes at once."""

from __future__ import annotations

from signoff.check import class_guard, not_applicable
from signoff.fleet import ProbeError
from signoff.interconnect.run import collective_devices
from signoff.training import section

PROBE_TIMEOUT_S = 600


def step_args(sec: dict) -> list[str]:
    return [a for k in ("layers", "d_model", "heads", "ffn", "seq", "batch", "warmup", "steps", "lr",
                        "threads") for a in (f"--{k.replace('_', '-')}", str(sec[k]))]


def nccl_env(profile) -> dict:
    """As the all-reduce runs: a profile with `nvls: false` keeps NVLink multicast off."""
    return {"NCCL_NVLS_ENABLE": "0"} if profile.hardware.get("nvls") is False else {}


def train_doc(host, profile) -> dict:
    devices = collective_devices(host)
    doc = host.cached_probe("train", *step_args(section(profile)), timeout=PROBE_TIMEOUT_S,
                            env=nccl_env(profile))
    if "error" in doc:
        raise ProbeError(f"{host}: training probe failed: {doc['error']}")
    if devices and doc["local_ranks"] != len(devices):
        raise ProbeError(f"{host}: the training step ran on {doc['local_ranks']} of the {len(devices)} "
                         f"GPUs NVML reports (CUDA_VISIBLE_DEVICES or a GPU torch cannot use)")
    return doc


def loader_doc(host, profile) -> dict:
    ld = section(profile)["loader"]
    args = [a for k in ("size", "crop", "batch", "samples") for a in (f"--{k}", str(ld[k]))]
    args += ["--delay-ms", str(ld["delay_ms"])]
    if ld["workers"] is not None:
        args += ["--workers", ",".join(map(str, ld["workers"]))]
    doc = host.cached_probe("loader", *args, timeout=PROBE_TIMEOUT_S)
    if "error" in doc or not doc.get("rows"):
        raise ProbeError(f"{host}: DataLoader probe failed: {doc.get('error') or 'no rows'}")
    return doc


def hostlink_doc(host) -> dict:
    if not host.gpus:
        not_applicable(f"{host} has no GPU: no host<->GPU link")
    doc = host.cached_probe("hostlink", timeout=PROBE_TIMEOUT_S)
    if "error" in doc or len(doc.get("gpus") or []) != len(host.gpus):
        raise ProbeError(f"{host}: host-link probe measured {len(doc.get('gpus') or [])} of "
                         f"{len(host.gpus)} GPUs ({doc.get('error') or 'CUDA sees fewer GPUs than NVML'})")
    return doc


# Each measurement's family (phases run one after another, never beside each other on a host:
# the loader's CPU work would slow the step), its checks, and its probe behind the gates.
MEASURES = {
    "train": ("training", ("test_train_throughput", "test_train_loss_falls", "test_train_scaling_host",
                           "test_train_input_headroom"),
              lambda v, prof: class_guard(prof, [v]) or train_doc(v, prof)),
    "loader": ("training loader", ("test_train_input_headroom",),
               lambda v, prof: class_guard(prof, [v]) or loader_doc(v, prof)),
    "hostlink": ("training hostlink", ("test_host_link_bandwidth",),
                 lambda v, prof: class_guard(prof, [v]) or hostlink_doc(v)),
}


def node_counts(n: int) -> list[int]:
    """2, 4, 8, ... nodes, then all of them."""
    out, k = [], 2
    while k < n:
        out.append(k)
        k *= 2
    return out + [n]


def over_nodes(network, names: list[str], profile, timeout: int) -> dict[int, dict]:
    """The step on the first k hosts at once for every node count k; {k: collective result}.
    One rank per GPU; one gloo rank on a CPU-only host (Network.collective)."""
    args = step_args(section(profile))
    out = {}
    for k in node_counts(len(names)):
        out[k] = network.collective(names[:k], "train", args, nccl_env(profile), timeout)
        if not out[k]["ok"]:
            break  # a failed run names its culprits; larger counts would only fail again
    return out
