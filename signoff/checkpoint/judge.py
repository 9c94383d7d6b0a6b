"""Checkpoint judgement as pure functions: the model's size from the profile, what a checkpoint
every interval costs the run, and the words of a FAIL."""

from __future__ import annotations

import math

from signoff.units import figure

# fp32 weights plus AdamW's two fp32 moments (exp_avg, exp_avg_sq) per parameter
STATE_BYTES_PER_PARAM = 12
# torch.save's zip: a header per tensor and records aligned to 64 bytes; plus what fsync may need
FILE_SLACK = 1.02
FILE_EXTRA = 1 << 20
# the page cache may keep this fraction of the file after fadvise DONTNEED and still leave the
# restore a disk figure (a few pages the kernel keeps busy, metadata)
MAX_RESIDENT = 0.05
RAM_FS = ("tmpfs", "ramfs")  # their files live in the page cache: no disk figure


def layer_params(d_model: int, ffn: int) -> int:
    """Parameters of one nn.TransformerEncoderLayer(d_model, heads, ffn): attention's in- and
    out-projections (4 d^2 + 4 d), the MLP (2 d ffn + ffn + d), two LayerNorms (4 d)."""
    return 4 * d_model * d_model + 2 * d_model * ffn + 9 * d_model + ffn


def sizing(train: dict, size_gb) -> dict:
    """The model the probe builds: the training step's (its `training:` section), with as many
    layers as `size_gb` of weights and AdamW state takes where the profile sets one."""
    per = layer_params(train["d_model"], train["ffn"])
    layers = train["layers"] if size_gb is None else \
        max(1, round(size_gb * 1e9 / (per * STATE_BYTES_PER_PARAM)))
    params = per * layers
    return {"layers": layers, "d_model": train["d_model"], "heads": train["heads"], "ffn": train["ffn"],
            "params": params, "bytes": params * STATE_BYTES_PER_PARAM,
            "from": "the training step's model" if size_gb is None else f"checkpoint.size_gb {size_gb:g}"}


def need_bytes(state_bytes: int) -> int:
    """What the free-space check asks for: the file torch.save writes, with its slack."""
    return int(state_bytes * FILE_SLACK) + FILE_EXTRA


def gb(n: int) -> str:
    return f"{figure(n / 1e9)} GB" if n >= 1e8 else f"{figure(n / 1e6)} MB"


def cost(save_s: float, interval_min: float) -> float:
    """The share of a run a blocking checkpoint every interval takes: each interval of training
    is followed by one save, so save / (interval + save)."""
    return save_s / (interval_min * 60 + save_s)


def cost_line(host: str, doc: dict, interval_min: float, hosts: int) -> str:
    """The cover's line: a checkpoint of this size every interval costs X % of the run, said of
    the slowest host of the run (every host saves its own at once, the run waits for the last)."""
    save_s, size = doc["save"]["seconds"], gb(doc["bytes"])
    pct = 100 * cost(save_s, interval_min)
    slowest = f"on the slowest of {hosts} hosts ({host})" if hosts > 1 else f"on {host}"
    return (f"a {size} checkpoint every {figure(interval_min)} min costs {figure(pct)} % of the run "
            f"{slowest}: {figure(save_s)} s to save it (fsync'ed), {figure(doc['restore']['seconds'])} s "
            f"to read it back after a failure")


def slowest(docs: dict[str, dict]) -> str | None:
    """The host whose save took longest (the one every host's checkpoint waits for)."""
    timed = {n: d["save"]["seconds"] for n, d in docs.items()
             if isinstance(d, dict) and isinstance((d.get("save") or {}).get("seconds"), (int, float))}
    return max(timed, key=timed.get) if timed else None


def not_disk(doc: dict, what: str) -> str | None:
    """Why this figure is not the disk's: a RAM-backed path (both), or, for the restore, a file
    the page cache still held after fadvise DONTNEED (the probe's own words)."""
    fs = doc.get("fs") or {}
    if fs.get("fstype") in RAM_FS:
        return (f"{doc['path']} is {fs['fstype']}, RAM-backed: its files live in the page cache, so "
                f"the {what} is no storage figure")
    cache = doc.get("cache") or {}
    if what == "restore" and not cache.get("dropped"):
        return f"the page cache was not emptied of the file before the read ({cache.get('note')})"
    return None


def differing(doc: dict) -> list[str]:
    """What read back different: each tensor named, or the load's own error."""
    i = doc.get("intact") or {}
    out = [f"{doc['file']}: could not be loaded back: {i['load_error']}"] if i.get("load_error") else []
    out += [f"{doc['file']}: tensor {t} differs ({why})" for t, why in (i.get("differing") or {}).items()]
    out += [f"{doc['file']}: tensor {t} is missing from the file" for t in i.get("missing") or []]
    out += [f"{doc['file']}: {t} is in the file, not in the saved state" for t in i.get("extra") or []]
    return out


def count(doc: dict) -> int:
    i = doc.get("intact") or {}
    if i.get("load_error"):
        return max(1, doc.get("tensors") or 1)  # nothing came back: every tensor counts as lost
    return len(i.get("differing") or {}) + len(i.get("missing") or []) + len(i.get("extra") or [])


def cause(doc: dict, what: str) -> str:
    fs = doc.get("fs") or {}
    on = f"{fs.get('fstype')} on {fs.get('mount')} ({fs.get('source')})"
    dev = doc.get("device")
    copy = " and the copies between GPU and host memory" if str(dev).startswith("cuda") else ""
    if what == "intact":
        return (f"the disk or filesystem under {doc['path']} ({on}) returned other bytes than were "
                f"written and fsync'ed: a failing drive, a controller or a network filesystem "
                f"corrupting data; a checkpoint restored from it resumes from wrong weights")
    return (f"a slow or shared disk under {doc['path']} ({on}){copy}; a network filesystem's "
            f"link; another process writing there")


def plan_line(prof) -> str:
    """`signoff plan`: how large, and the seconds at the class's floors (each host at once)."""
    from signoff.checkpoint import section
    from signoff.training import section as train_section
    s = sizing(train_section(prof), section(prof)["size_gb"])
    floors = [prof.criteria.get(c) for c in ("checkpoint_save", "checkpoint_restore")]
    what = (f"checkpoint: a {gb(s['bytes'])} torch.save ({s['from']}) fsync'ed and read back on every "
            f"host at once")
    if not all(t is not None and t.value > 0 for t in floors):
        return f"{what}: of unknown time (no checkpoint_save / checkpoint_restore floor)"
    secs = sum(s["bytes"] / 1e9 / t.value for t in floors)
    return (f"{what} (at most, at the floors {figure(floors[0].value)} and {figure(floors[1].value)} "
            f"GB/s, the model's build and steps on top): {math.ceil(secs)} s")
