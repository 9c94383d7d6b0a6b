"""Version parity across hosts, by majority: the odd host out is named with its field."""

from __future__ import annotations

from collections import Counter


def _stack(key):
    return lambda f: (f.get("stack") or {}).get(key)


def _values(values) -> str | None:
    """Several parts' versions (the GPUs' VBIOS, the NICs' firmware) as one value per host."""
    return ", ".join(sorted({str(v) for v in values if v is not None})) or None


# field -> (label, how to read it from a sysinfo document); firmware and stack fields are
# the ones Imbue pins (github.com/imbue-ai/cluster-health): None on every host (not present) agrees
FIELDS = {
    "nvidia_driver": ("NVIDIA driver", lambda f: f["nvidia"].get("driver")),
    "cuda_driver": ("CUDA driver API", lambda f: f["nvidia"].get("cuda_driver")),
    "torch": ("torch", lambda f: f["torch"].get("version")),
    "torch_cuda": ("torch CUDA build", lambda f: f["torch"].get("cuda")),
    "nccl": ("NCCL (torch)", lambda f: f["torch"].get("nccl")),
    "python": ("Python", lambda f: f.get("python")),
    "os": ("OS release", lambda f: f.get("os")),
    "kernel": ("kernel", lambda f: f.get("kernel")),
    "driver_branch": ("GPU driver branch",
                      lambda f: str(f["nvidia"].get("driver") or "").split(".")[0] or None),
    "vbios": ("VBIOS", lambda f: _values(g.get("vbios") for g in f["nvidia"].get("gpus") or [])),
    "nic_firmware": ("NIC firmware",
                     lambda f: _values(((f.get("stack") or {}).get("nic_firmware") or {}).values())),
    "ofed": ("OFED", _stack("ofed")),
    "rdma_core": ("rdma-core", _stack("rdma_core")),
    "container_runtime": ("container runtime", _stack("container_runtime")),
    "container_toolkit": ("NVIDIA container toolkit", _stack("container_toolkit")),
    "fabricmanager": ("nvidia-fabricmanager", _stack("fabricmanager")),
}


def versions(facts: dict) -> dict:
    return {k: read(facts) for k, (_, read) in FIELDS.items()}


def majority(values: dict[str, object]) -> tuple[object, bool]:
    """The most common value and whether it is a strict majority winner (no tie)."""
    counts = Counter(values.values()).most_common()
    if not counts:
        return None, True
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return None, False
    return counts[0][0], True


def deviations(per_host: dict[str, dict], host: str) -> list[str]:
    """What differs on `host` from the majority of hosts, field by field."""
    out = []
    for field, (label, _) in FIELDS.items():
        values = {h: v[field] for h, v in per_host.items()}
        mine = values[host]
        value, clear = majority(values)
        if clear and mine == value:
            continue
        if clear:
            others = sorted(h for h, v in values.items() if v == value)
            out.append(f"{label} {mine} differs from {value} on {', '.join(others)}")
        else:
            spread = "; ".join(f"{h}={v}" for h, v in sorted(values.items()))
            out.append(f"{label} has no majority value ({spread})")
    return out


def odd_cells(per_host: dict[str, dict]) -> set[tuple[str, str]]:
    """(host, field) cells that differ from the majority, for highlighting in the report."""
    cells = set()
    for field in FIELDS:
        values = {h: v[field] for h, v in per_host.items()}
        value, clear = majority(values)
        cells |= {(h, field) for h, v in values.items() if not clear or v != value}
    return cells


MACHINE_KEYS = ("machine_id", "boot_id", "netns")


def same_machine(a: dict, b: dict) -> list[str]:
    """What shows that two hosts' sysinfo documents come from one machine: the same
    machine-id, boot and network namespace, or a GPU UUID seen on both."""
    out = []
    ma, mb = a.get("machine") or {}, b.get("machine") or {}
    if ma.get("boot_id") and all(ma.get(k) == mb.get(k) for k in MACHINE_KEYS):
        out.append(f"machine-id {ma['machine_id']}, boot {ma['boot_id']}, network namespace {ma['netns']}")
    uuids = [{g.get("uuid") for g in f.get("nvidia", {}).get("gpus", [])} - {None} for f in (a, b)]
    shared = sorted(uuids[0] & uuids[1])
    if shared:
        out.append(f"GPU {', '.join(shared)}")
    return out
