"""Version parity across hosts, by majority: the odd host out is named with its field."""

from __future__ import annotations

from collections import Counter

from signoff import hostlist


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


def deviations(per_host: dict[str, dict], host: str, table: dict | None = None, skip=()) -> list[str]:
    """What differs on `host` from the majority of hosts, field by field; the other hosts
    folded into ranges with their count. `table` is fields(per_host), computed once per run
    (each host's check reads it: 1,000 hosts x 1,000 would be quadratic). `skip`: the fields an
    intent file pins (signoff/intent): judged against it, never by majority."""
    table = table if table is not None else fields(per_host)
    out = []
    for field, (label, _) in FIELDS.items():
        if field in skip:
            continue
        value, clear, groups = table[field]
        mine = per_host[host][field]
        if clear and mine == value:
            continue
        if clear:
            out.append(f"{label} {shown(mine)} differs from {shown(value)} on {groups[value]}")
        else:
            spread = "; ".join(f"{shown(v)} on {g}" for v, g in groups.items())
            out.append(f"{label} has no majority value ({spread})")
    return out


def fields(per_host: dict[str, dict]) -> dict[str, tuple]:
    """field -> (majority value, whether clear, {value: 'N host(s) folded'}), values sorted."""
    out = {}
    for field in FIELDS:
        values = {h: v[field] for h, v in per_host.items()}
        value, clear = majority(values)
        by: dict = {}
        for h, v in values.items():
            by.setdefault(v, []).append(h)
        out[field] = (value, clear, {v: counted(by[v]) for v in sorted(by, key=str)})
    return out


def counted(names: list[str]) -> str:
    return f"{len(names)} host{'s' if len(names) != 1 else ''} {hostlist.fold(names)}"


def shown(value) -> str:
    return "unknown" if value is None else str(value)


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
    return sorted(set(identities(a)) & set(identities(b)))


def identities(facts: dict) -> list[str]:
    """What identifies a host's machine: its machine-id with boot and network namespace (a
    cloned image has its own boot, a lab namespace its own netns), and each GPU's UUID."""
    m = facts.get("machine") or {}
    out = []
    if m.get("boot_id"):
        out.append(f"machine-id {shown(m.get('machine_id'))}, boot {m['boot_id']}, "
                   f"network namespace {shown(m.get('netns'))}")
    gpus = (facts.get("nvidia") or {}).get("gpus") or []
    out += sorted({f"GPU {g['uuid']}" for g in gpus if g.get("uuid")})
    return out


def same_machines(facts: dict[str, dict]) -> dict[str, list[str]]:
    """host -> what it shares with other hosts of the run, each identity once with the hosts
    that share it ("GPU GPU-1 on 2 hosts lab[1,4]"); hosts of a machine of their own are
    absent. Linear in hosts (an index by identity), so 1,000 hosts cost one pass."""
    by: dict[str, list[str]] = {}
    for name, f in facts.items():
        if isinstance(f, dict):
            for ident in identities(f):
                by.setdefault(ident, []).append(name)
    out: dict[str, list[str]] = {}
    for ident, names in by.items():
        if len(names) > 1:
            said = f"{ident} on {counted(names)}"
            for n in names:
                out.setdefault(n, []).append(said)
    return out
