"""Training, the controller: each measurement's probe on one host behind the gates its checks
apply (as signoff/interconnect/run.py), and the step over 2, 4, ... all nodes at once."""

from __future__ import annotations

from signoff import retry
from signoff.check import class_guard, not_applicable
from signoff.fleet import ProbeError
from signoff.interconnect.judge import pcie_rate
from signoff.interconnect.run import collective_devices
from signoff.training import section
from signoff.training.judge import loss_ratio, slowest_link

PROBE_TIMEOUT_S = 600


def step_args(sec: dict) -> list[str]:
    return [a for k in ("layers", "d_model", "heads", "ffn", "seq", "batch", "warmup", "steps", "lr",
                        "threads") for a in (f"--{k.replace('_', '-')}", str(sec[k]))]


def nccl_env(profile) -> dict:
    """As the all-reduce runs: a profile with `nvls: false` keeps NVLink multicast off."""
    return {"NCCL_NVLS_ENABLE": "0"} if profile.hardware.get("nvls") is False else {}


def train_doc(host, profile) -> dict:
    """The step at every width; after the 1-GPU step misses train_throughput, the step again
    (retry policy), the fastest attempt judged. Loss and replicas are never retried into a
    pass: each width keeps the worst loss curve and replicas equal only if equal in every attempt."""
    devices = collective_devices(host)

    def step(probe) -> dict:
        doc = probe("train", *step_args(section(profile)), timeout=PROBE_TIMEOUT_S, env=nccl_env(profile))
        if "error" in doc:
            raise ProbeError(f"{host}: training probe failed: {doc['error']}")
        if devices and doc["local_ranks"] != len(devices):
            raise ProbeError(f"{host}: the training step ran on {doc['local_ranks']} of the {len(devices)} "
                             f"GPUs NVML reports (CUDA_VISIBLE_DEVICES or a GPU torch cannot use)")
        return doc
    doc = step(host.cached_probe)
    t = profile.criteria.get("train_throughput")
    if t is None:  # the check ERRORs on the missing threshold
        return doc
    tries = retry.measured(doc, lambda: step(host.probe), one_gpu_tflops, t)
    if len(tries) == 1:  # passed, or a miss not measured again: why not (retry.why)
        said = retry.why([one_gpu_tflops(doc)], t)
        return {**doc, "retry": said} if said else doc
    best, figures = retry.best(tries, one_gpu_tflops, t)
    return retry.kept({**best, "widths": _merged(best, tries)}, figures)


def one_gpu_tflops(doc: dict):
    return doc["widths"][0]["tflops_per_gpu"] if doc.get("widths") else None


def _merged(best: dict, tries: list[dict]) -> list[dict]:
    """The best attempt's widths, each with the worst loss curve of that width over the
    attempts (a non-finite one first) and replicas equal only where every attempt's were."""
    out = []
    for row in best["widths"]:
        same = [r for d in tries for r in d["widths"] if r["ranks"] == row["ranks"]]
        worst = max(same, key=lambda r: float("inf") if loss_ratio(r["losses"]) is None
                    else loss_ratio(r["losses"]))
        out.append({**row, "losses": worst["losses"],
                    "replicas_equal": all(r["replicas_equal"] for r in same)})
    return out


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


def hostlink_doc(host, profile) -> dict:
    """The host<->GPU copies; measured again after the slowest misses host_link_bandwidth."""
    if not host.gpus:
        not_applicable(f"{host} has no GPU: no host<->GPU link")

    def copies(probe) -> dict:
        doc = probe("hostlink", timeout=PROBE_TIMEOUT_S)
        if "error" in doc or len(doc.get("gpus") or []) != len(host.gpus):
            raise ProbeError(f"{host}: host-link probe measured {len(doc.get('gpus') or [])} of "
                             f"{len(host.gpus)} GPUs "
                             f"({doc.get('error') or 'CUDA sees fewer GPUs than NVML'})")
        return doc
    doc = copies(host.cached_probe)
    t = profile.criteria.get("host_link_bandwidth")
    if t is None:
        return doc
    figure = lambda d: slowest_link(d["gpus"])[0]  # noqa: E731
    if t.extra.get("derived") == "pcie_link":  # a fraction of each GPU's own link: the lowest
        by = {g["index"]: g for g in host.gpus}
        figure = lambda d: round(min(g[k] / (pcie_rate(by.get(g["index"], {}))[0] or float("inf"))  # noqa: E731
                                     for g in d["gpus"] for k in ("h2d_pinned", "d2h_pinned")), 3)
    return retry.kept(*retry.best_of(doc, lambda: copies(host.probe), figure, t))


def parallel_doc(host, profile) -> dict:
    """The tensor-parallel and pipeline steps over the host's GPUs (2 gloo ranks without one); N.A.
    on one GPU: both split the model over two ranks at least."""
    devices = collective_devices(host)
    if len(devices) == 1:
        not_applicable(f"{host} has one GPU: the tensor-parallel and pipeline steps split the model "
                       f"over two at least")
    sec = section(profile)
    par = sec["parallel"]
    args = [a for k in ("layers", "d_model", "ffn", "seq", "batch", "warmup", "steps", "lr", "threads")
            for a in (f"--{k.replace('_', '-')}", str(sec[k]))]
    args += ["--micro-batches", str(par["micro_batches"] or 0)]
    if par["delay_ms"]:  # a fake slow stage (tests)
        args += ["--delay-ms", str(par["delay_ms"]), "--delay-stage", str(par["delay_stage"])]
    doc = host.cached_probe("parallel", *args, timeout=PROBE_TIMEOUT_S, env=nccl_env(profile))
    if "error" in doc:
        raise ProbeError(f"{host}: model-parallel probe failed: {doc['error']}")
    if doc.get("not_applicable"):
        not_applicable(f"{host}: {doc['not_applicable']}")
    if devices and doc["local_ranks"] != len(devices):
        raise ProbeError(f"{host}: the model-parallel step ran on {doc['local_ranks']} of the {len(devices)} "
                         f"GPUs NVML reports (CUDA_VISIBLE_DEVICES or a GPU torch cannot use)")
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
                 lambda v, prof: class_guard(prof, [v]) or hostlink_doc(v, prof)),
    "parallel": ("training parallel", ("test_tp_step_tflops", "test_tp_comm_share",
                                       "test_pipeline_step_tflops", "test_pipeline_bubble"),
                 lambda v, prof: class_guard(prof, [v]) or parallel_doc(v, prof)),
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
    out = {}
    for k in node_counts(len(names)):
        out[k] = across(network, names[:k], profile, timeout)
        if not out[k]["ok"]:
            break  # a failed run names its culprits; larger counts would only fail again
    return out


def across(network, names: list[str], profile, timeout: int) -> dict:
    """The step over `names` at once (cached: over_nodes' run of as many nodes is this one); each
    host's document says the transport its ranks' traffic between nodes took (probe_train)."""
    return network.collective(names, "train", step_args(section(profile)), nccl_env(profile), timeout)
