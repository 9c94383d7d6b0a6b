"""Storage read throughput, pure parts: the workload knobs a profile sets (validated when it
loads), the aggregate over the window in which every host was reading, the per-node/GPU
scaling of the aggregate minimum, how a figure was measured and the likely cause of a slow one."""

from __future__ import annotations

import statistics
from dataclasses import replace

from signoff import InputError
from signoff.profiles import Threshold
from signoff.units import parse_size

WORKLOADS = {"storage_read_seq": "seq", "storage_read_small": "small"}



# Knobs each storage criterion takes (profile `extra` keys) and their defaults.
KNOBS = {
    # alone_sample: hosts of a shared filesystem read alone (docs/thresholds.md: why 4)
    "storage_read_seq": {"size": "8G", "bs": "1M", "jobs": 4, "iodepth": 32, "runtime": 10,
                         "alone_sample": 4},
    "storage_read_small": {"files": 4096, "file_size": "128K", "bs": "1M", "jobs": 8, "runtime": 10,
                           "alone_sample": 4},
    # node_min: GB/s every host must get while all read (none: not judged per host)
    "storage_read_aggregate": {"runtime": 15, "per": "cluster", "node_min": None},
    # writes: one pass of `size` (a checkpoint's pattern), every byte read back (probe_storage_write)
    "storage_write_seq": {"size": "8G", "bs": "1M", "jobs": 16, "iodepth": 16, "alone_sample": 4},
    "storage_write_small": {"files": 4096, "file_size": "128K", "bs": "1M", "jobs": 8, "alone_sample": 4},
    "storage_write_aggregate": {"size": "8G", "per": "cluster", "node_min": None},
    "storage_write_verify": {},
}



PER = ("cluster", "node", "gpu")



MIN_OVERLAP = 0.5  # the hosts' reads must overlap for at least half of a host's read time



def check_extra(name: str, value, extra: dict, where: str) -> None:
    """Validate a storage criterion's knobs when the profile loads (before any host)."""
    for key, val in extra.items():
        w = f"{where}.{key}"
        if key in ("size", "bs", "file_size"):
            try:
                n = parse_size(val)
            except ValueError as exc:
                raise InputError(f"{w}: {exc}") from None
            if n <= 0 or n % 4096:
                raise InputError(f"{w}: {val} must be a positive multiple of 4K (O_DIRECT)")
        elif key in ("jobs", "iodepth", "files", "runtime", "alone_sample"):
            if isinstance(val, bool) or not isinstance(val, int) or val < (0 if key == "runtime" else 1):
                raise InputError(f"{w}: expected a positive integer, got {val!r}")
        elif key == "per" and val not in PER:
            raise InputError(f"{w}: expected one of {', '.join(PER)}, got {val!r}")
        elif key == "node_min" and val is not None and (  # 0 would judge nothing
                isinstance(val, bool) or not isinstance(val, (int, float)) or val <= 0):
            raise InputError(f"{w}: expected a number of GB/s above 0 every host must read (or none: "
                             f"not judged per host), got {val!r}")
    k = {**KNOBS.get(name, {}), **extra}
    if name in ("storage_read_small", "storage_write_small"):
        fs, bs = parse_size(k["file_size"]), parse_size(k["bs"])
        if fs > bs and fs % bs:
            raise InputError(f"{where}.file_size: {k['file_size']} is larger than bs {k['bs']} "
                             f"but not a multiple of it (each file is read whole, in bs blocks)")



def check_profile(profile, where: str) -> None:
    """`per: gpu` in a profile of no GPU class scales the aggregate minimum by 0 GPUs."""
    for c in ("storage_read_aggregate", "storage_write_aggregate"):
        t = profile.criteria.get(c)
        if t and t.extra.get("per") == "gpu" and not profile.gpu_required:
            raise InputError(f"{where}.{c}.per: gpu in a profile that expects no GPU "
                             f"(hardware names no gpu_model or gpu_count): the minimum would be 0 GB/s on a "
                             f"host without GPUs; use per: node or cluster")


def knobs(t: Threshold) -> dict:
    return {**KNOBS[t.criterion], **t.extra}



def gbps(n_bytes: float, seconds: float) -> float:
    return n_bytes / seconds / 1e9 if seconds > 0 else 0.0


def figure(v: float) -> float:
    """A GB/s figure as judged and recorded: 3 decimals, 3 significant digits below 0.1 (a
    floor of 0.0001 GB/s, the lab's small writes, would judge 0.0004 rounded to 0)."""
    return round(v, 3) if abs(v) >= 0.1 else float(f"{v:.3g}")



def overlap(per_host: dict[str, list[list[float]]]) -> dict:
    """Aggregate over the window in which every host was reading.

    per_host: host -> [[t0, t1, bytes], ...] on one clock. A host's bytes in the window
    count pro rata of each interval's overlap with it (uniform rate within an interval)."""
    spans = {h: (min(i[0] for i in iv), max(i[1] for i in iv)) for h, iv in per_host.items() if iv}
    missing = sorted(set(per_host) - set(spans))
    if missing:
        raise ValueError(f"no read intervals from {', '.join(missing)}")
    a = max(s for s, _ in spans.values())
    b = min(e for _, e in spans.values())
    longest = statistics.median(e - s for s, e in spans.values())
    out = {"window": [a, b], "seconds": max(b - a, 0.0),
           "coverage": max(b - a, 0.0) / longest if longest > 0 else 0.0,
           "spans": {h: [s, e] for h, (s, e) in spans.items()}, "per_host": {}}
    if b <= a:
        out["aggregate"] = 0.0
        return out
    for h, iv in per_host.items():
        got = 0.0
        for t0, t1, n in iv:
            if t1 > t0:
                got += n * max(0.0, min(t1, b) - max(t0, a)) / (t1 - t0)
        out["per_host"][h] = gbps(got, b - a)
    out["aggregate"] = sum(out["per_host"].values())
    return out



def makespan(per_host: dict[str, list[list[float]]]) -> dict:
    """The aggregate of a one-pass write of every host at once (the checkpoint pattern): all
    bytes over the time from the first host's start to the last host's end (a checkpoint is
    written when its last host is done; the window in which all were writing is no measure of
    it: a fast host is done before a slow one got going). Each host's share: its bytes over its
    own span. coverage: 1 - the spread of the starts over that time (1: all started together)."""
    spans = {h: (min(i[0] for i in iv), max(i[1] for i in iv)) for h, iv in per_host.items() if iv}
    missing = sorted(set(per_host) - set(spans))
    if missing:
        raise ValueError(f"no write intervals from {', '.join(missing)}")
    a, b = min(s for s, _ in spans.values()), max(e for _, e in spans.values())
    took = max(b - a, 1e-9)
    starts = [s for s, _ in spans.values()]
    per = {h: gbps(sum(i[2] for i in per_host[h]), max(e - s, 1e-9)) for h, (s, e) in spans.items()}
    return {"window": [a, b], "seconds": b - a, "coverage": max(0.0, 1 - (max(starts) - min(starts)) / took),
            "spans": {h: [s, e] for h, (s, e) in spans.items()}, "per_host": per,
            "aggregate": gbps(sum(i[2] for iv in per_host.values() for i in iv), took)}


def alone_gbps(doc) -> float | None:
    """A host's alone read as judged (GB/s), None where it is no storage figure (an error, the
    page cache not bypassed): such a read is not noise, never read again."""
    return figure(doc["gbps"]) if isinstance(doc, dict) and doc["cache"]["defeated"] else None


def aggregate_gbps(got: dict) -> float | None:
    """The aggregate of one read of every host at once (GB/s), None where it is no figure: a
    host's error, too little overlap, the page cache not bypassed (not noise: never read again)."""
    ov = got.get("overlap")
    if "errors" in got or not ov or ov["coverage"] < MIN_OVERLAP or \
            not all(d["cache"]["defeated"] for d in got["docs"].values()):
        return None
    return figure(ov["aggregate"])


def starved(shares: dict[str, float], node_min) -> list[str]:
    """'lab1 read 0.2' for each host whose share of the aggregate is below node_min (if set)."""
    return [f"{h} read {v:g}" for h, v in shares.items() if node_min is not None and v < node_min]


def scaled(t: Threshold, hosts: int, gpus: int) -> Threshold:
    """The aggregate minimum for this many hosts/GPUs (`per: node|gpu`), or as written."""
    per = knobs(t)["per"]
    if per == "cluster":
        return t
    n = hosts if per == "node" else gpus
    if n < 1:  # x 0 GPUs: a minimum of 0, which nothing fails
        raise InputError(f"profile {t.profile}: criteria.{t.criterion}.per: {per}, but no host of "
                         f"this run reports a {'GPU' if per == 'gpu' else 'node'}: the minimum would be "
                         f"0 GB/s; use per: node or cluster")
    return replace(t, value=round(t.value * n, 3),
                   source=f"{t.source}; x {n} {'nodes' if per == 'node' else 'GPUs'}")



def describe(doc: dict) -> str:
    """'fio, bs 1M, iodepth 32, 4 jobs, O_DIRECT, 10 s' — how a figure was measured."""
    p = doc["params"]
    bs = p["bs"]
    bs_s = f"{bs >> 20}M" if bs % (1 << 20) == 0 else f"{bs >> 10}K"
    parts = [doc["tool"], f"bs {bs_s}", f"iodepth {p['iodepth']}", f"{p['numjobs']} jobs",
             "O_DIRECT" if p["direct"] else "buffered, cache dropped",
             f"{p['runtime_s']} s" if p.get("time_based") else "one pass"]
    if doc.get("fallback"):
        parts.append(f"fallback: {doc['fallback']}")
    return ", ".join(parts)



def storage_kind(fs: dict) -> str:
    disk = " (the kernel reports it rotational: HDD)" if fs.get("rotational") else \
        (" (non-rotational: flash)" if fs.get("rotational") is False else "")
    dev = f" on {fs['device']}" if fs.get("device") else ""
    return f"{fs.get('fstype', '?')} from {fs.get('source', '?')}{dev}{disk}"



def cause(doc: dict, workload: str) -> str:
    fs = doc.get("fs") or {}
    where = f"{doc.get('path')} is {storage_kind(fs)}"
    if fs.get("network"):
        why = "a shared filesystem: the storage servers or this node's storage network limit it"
    elif fs.get("rotational"):
        why = "a spinning disk, not flash (a virtual disk may only claim to be one)"
    else:
        why = "a slower disk or volume class than the profile's, a degraded RAID, or a throttled " \
              "cloud volume"
    if workload == "small":
        fps = doc.get("files_per_s")
        per = f" ({fps:.0f} files/s over {doc['params']['numjobs']} readers)" if fps else ""
        why = f"per-file open and metadata latency dominates{per}; {why}"
    if not doc["params"]["direct"]:
        why += "; buffered reads (no O_DIRECT on this filesystem)"
    return f"{where}: {why}"



def aggregate_cause(shares: dict[str, float], doc: dict) -> str:
    """Why all hosts together read too little: one slow host, or everyone slowed down."""
    med = statistics.median(shares.values())
    slow = [f"{n} {v:g} GB/s" for n, v in shares.items() if v < 0.5 * med]
    if slow:
        return (f"{', '.join(slow)}: under half the median host ({med:g} GB/s): that host's "
                f"storage link, mount options or client")
    fs = doc.get("fs") or {}
    if fs.get("network"):
        return (f"every host slowed down together: the shared filesystem ({storage_kind(fs)}) "
                f"or its network saturates with {len(shares)} concurrent clients")
    return (f"{doc.get('path')} is {storage_kind(fs)}, not a shared filesystem: with hosts on "
            f"one machine or one disk the aggregate is that disk's limit")



def details(doc: dict) -> dict:
    keep = ("tool", "tool_version", "params", "bytes", "seconds", "files", "files_read",
            "files_per_s", "bytes_per_pass", "cache", "fallback", "path", "readonly", "fs",
            "late_s", "leftovers", "t_start", "t_end", "read", "attempts", "spread_pct",
            "read_files", "read_files_more", "skipped")
    return {k: doc.get(k) for k in keep}


def skipped_note(doc: dict) -> str | None:
    """Read-only mode: the dataset's files left unread because their bytes are not on the disk
    (a hole or a preallocated extent reads as zeros without I/O), and a filesystem where
    preallocated extents could not be looked for; None where neither."""
    sk = doc.get("skipped") if doc.get("readonly") else None
    if not sk:
        return None
    parts = []
    if sk["count"]:
        why = ", ".join(f"{sk[w]} {w}" for w in ("sparse", "preallocated") if sk.get(w))
        parts.append(f"{sk['count']} file{'s' if sk['count'] > 1 else ''} of {doc['path']} not read: "
                     f"{why} (no data on disk to read)")
    if sk["unwritten_check"] != "FIEMAP":
        parts.append(f"preallocated extents not looked for: {sk['unwritten_check']}")
    return "; ".join(parts) or None



class NotReadAlone(Exception):
    """A host of a shared filesystem outside the sample read alone: N.A., never a PASS."""



def spread(names: list[str], k: int) -> list[str]:
    """k of the hosts, deterministically: the first, the last and evenly between (in
    inventory order, so different racks or switches where the inventory is in rack order)."""
    if len(names) <= k:
        return list(names)
    if k == 1:
        return names[:1]
    return [names[round(i * (len(names) - 1) / (k - 1))] for i in range(k)]
