#!/usr/bin/env python3
"""Host-side probe: checkpoint save and restore, as a training job does it.

Builds the training step's model (a stack of nn.TransformerEncoderLayer, --layers of them) and an
AdamW optimizer on the device (cuda:0 where torch sees a GPU, else the CPU), takes --steps
optimizer steps so the moments hold real numbers, then
  save     torch.save({"model": state_dict, "optimizer": state_dict}) into
           <path>/.signoff-<runid>-<host>/checkpoint.pt, fsync of the file and of its directory
           (seconds from the call to the directory's fsync: what a blocking checkpoint costs);
  drop     posix_fadvise(DONTNEED) on the file, then mincore says how much of it the page
           cache still holds: a restore read from memory is no disk figure (said, never hidden);
  restore  torch.load(map_location=the same device), the device synchronised;
  compare  every tensor against the one still in memory, bit for bit (as bytes: NaN or -0.0
           compare as their bits), each one that differs named.
Free space is checked before anything is written (--min-free kept free); the run's directory
is made with mkdir (never an existing one) and removed at the end, whatever happens (an error,
SIGTERM, SIGINT, SIGHUP); a SIGKILL leaves it to the controller, which removes
<path>/.signoff-<runid>-* by name. SIGNOFF_CHECKPOINT_CORRUPT (tests only) flips one byte of the
file after its fsync, as a disk corrupting writes would. Prints exactly one JSON document;
{"error": ...} for a refusal (exit 0)."""
import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time
import traceback
import zipfile

# probe_storage.py by its path (shipped beside this probe as storage.py; in the source tree
# signoff/storage/probe_storage.py), never through sys.path: its path, space, signal and cache
# helpers, the storage probes' own
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = next((p for p in (os.path.join(_dir, "storage.py"),
                         os.path.join(os.path.dirname(_dir), "storage", "probe_storage.py"))
             if os.path.exists(p)), os.path.join(_dir, "storage.py"))
_spec = importlib.util.spec_from_file_location("signoff_storage_probe", _lib)
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)
Refused, Interrupted, OWN_CACHE_FS = st.Refused, st.Interrupted, st.OWN_CACHE_FS

FILE = "checkpoint.pt"
MAX_RESIDENT = 0.05  # as signoff/checkpoint/judge.py: more left in the cache is no disk read
OWNED = []  # what this process created: removed at the end, whatever happens


def human(n):
    for unit, k in (("TB", 1e12), ("GB", 1e9)):
        if n >= k / 10:
            return "%.3g %s" % (n / k, unit)
    return "%.3g MB" % (n / 1e6)


# ------------------------------------------------------------------ the path, its space

def resolve(path):
    path = st.resolve_path(path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise Refused("storage path %s is not writable by uid %d: pass --storage-readonly to write "
                      "nothing (the checkpoint checks are then N.A.)" % (path, os.geteuid()))
    return path


def check_space(path, need, min_free):
    """Refuse before writing when the checkpoint would leave less than min_free free."""
    avail, total = st.space(path)
    keep, label = st.margin_bytes(min_free, total)
    if avail - need < keep:
        raise Refused("refusing to write a %s checkpoint to %s: %s free of %s, and %s (%s) must stay "
                      "free (--storage-min-free): %s needed; free space, set a smaller "
                      "checkpoint.size_gb in the profile, or pass --storage-readonly to write nothing"
                      % (human(need), path, human(avail), human(total), label, human(keep),
                         human(need + keep)))
    return avail, total


# ------------------------------------------------------------------ the page cache

def drop(path, fstype):
    """Drop the file's (clean, fsync'ed) pages; whether the cache no longer holds it, and why not."""
    if not hasattr(os, "posix_fadvise"):
        return {"dropped": False, "resident": None, "note": "this OS has no posix_fadvise"}
    st.drop_pages([path])
    left = st.resident_fraction([path])
    if fstype.startswith(OWN_CACHE_FS):
        return {"dropped": False, "resident": left,
                "note": "%s caches files in its own ARC, which fadvise does not empty" % fstype}
    if left is None:
        return {"dropped": False, "resident": None, "note": "mincore could not tell what the cache holds"}
    if left > MAX_RESIDENT:
        return {"dropped": False, "resident": round(left, 4),
                "note": "fadvise DONTNEED left %.0f %% of the file in the page cache (%s)"
                        % (100 * left, fstype)}
    return {"dropped": True, "resident": round(left, 4), "note": "fadvise DONTNEED, checked with mincore"}


# ------------------------------------------------------------------ the model and its state

def build(torch, a, dev):
    """The training step's layers and AdamW (fused on a GPU, as probe_train), --steps steps taken."""
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(
        a.d_model, a.heads, a.ffn, dropout=0.0, batch_first=True, norm_first=True, device=dev)
        for _ in range(a.layers)])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **({"fused": True} if dev.type == "cuda" else {}))
    x = torch.randn(2, 16, a.d_model, device=dev)
    for _ in range(a.steps):
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)  # the gradients are no part of a checkpoint
    return model, opt


def tensors(torch, state, names):
    """name -> tensor of a checkpoint's state: model.<param>, optimizer[<param>].<moment>."""
    out = {"model." + k: v for k, v in state["model"].items()}
    for idx, moments in state["optimizer"]["state"].items():
        for k, v in moments.items():
            if torch.is_tensor(v):
                name = names[idx] if isinstance(idx, int) and idx < len(names) else idx
                out["optimizer[%s].%s" % (name, k)] = v
    return out


def differs(torch, a, b):
    """None where b holds a's bits, else what differs."""
    if not torch.is_tensor(b):
        return "read back as %s, not a tensor" % type(b).__name__
    if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
        return "read back as %s %s, saved %s %s" % (b.dtype, tuple(b.shape), a.dtype, tuple(a.shape))
    if b.device != a.device:
        b = b.to(a.device)
    x = a.detach().contiguous().reshape(-1).view(torch.uint8)
    y = b.detach().contiguous().reshape(-1).view(torch.uint8)
    if torch.equal(x, y):
        return None
    return "%d of its %d bytes differ" % (int((x != y).sum()), x.numel())


def compare(torch, saved, loaded_state, names, groups):
    got = tensors(torch, loaded_state, names)
    out = {"compared": len(saved), "differing": {}, "missing": sorted(set(saved) - set(got))[:20],
           "extra": sorted(set(got) - set(saved))[:20]}
    for name, t in saved.items():
        if name in got:
            why = differs(torch, t, got[name])
            if why:
                out["differing"][name] = why
    if loaded_state["optimizer"].get("param_groups") != groups:
        out["differing"]["optimizer.param_groups"] = "the optimizer's settings read back different"
    return out


def corrupt(path):
    """Tests only (SIGNOFF_CHECKPOINT_CORRUPT): flip the middle byte of the first tensor's record."""
    with zipfile.ZipFile(path) as z:
        recs = [i for i in z.infolist() if re.search(r"/data/\d+$", i.filename) and i.file_size]
    rec = min(recs, key=lambda i: int(i.filename.rsplit("/", 1)[1]))
    with open(path, "r+b") as f:
        f.seek(rec.header_offset)
        n, m = struct.unpack("<HH", f.read(30)[26:30])  # the local header's name and extra lengths
        at = rec.header_offset + 30 + n + m + rec.file_size // 2
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    return "byte %d of the file (record %s) flipped after its fsync (SIGNOFF_CHECKPOINT_CORRUPT)" \
        % (at, rec.filename)


def load(torch, path, dev):
    try:
        return torch.load(path, map_location=dev, weights_only=True)
    except TypeError:  # a torch before weights_only
        return torch.load(path, map_location=dev)


# ------------------------------------------------------------------ the run

def run(a, doc):
    path = resolve(a.path)
    fs = st.fs_info(path)
    doc.update(path=path, fs=fs)
    doc["free_before"], _ = check_space(path, a.need, a.min_free)
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the same refusal
        raise Refused("torch not importable by %s: %s" % (sys.executable, exc)) from None
    cuda = a.device != "cpu" and torch.cuda.is_available() and torch.cuda.device_count() > 0
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
        doc["gpu"] = torch.cuda.get_device_name(dev)
    else:
        torch.set_num_threads(1)  # a few steps of a small model: one thread, beside the other hosts
    doc.update(device=str(dev), torch=torch.__version__)

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    d = st.own_dir(path, a.runid, a.host)
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        raise Refused("%s already exists: refusing to touch it" % d) from None
    OWNED.append(d)
    f = os.path.join(d, FILE)
    doc.update(dir=d, file=f)
    t = time.perf_counter()
    model, opt = build(torch, a, dev)
    sync()
    doc["build_s"] = round(time.perf_counter() - t, 3)
    names = [n for n, _ in model.named_parameters()]
    state = {"model": model.state_dict(), "optimizer": opt.state_dict()}
    saved = tensors(torch, state, names)
    groups = json.loads(json.dumps(state["optimizer"]["param_groups"], default=str))
    doc.update(params=sum(p.numel() for p in model.parameters()), tensors=len(saved),
               state_bytes=sum(v.numel() * v.element_size() for v in saved.values()),
               model={"layers": a.layers, "d_model": a.d_model, "heads": a.heads, "ffn": a.ffn,
                      "steps": a.steps})

    t0 = time.perf_counter()
    torch.save(state, f)
    t1 = time.perf_counter()
    fd = os.open(f, os.O_RDONLY)
    try:
        os.fsync(fd)  # fsync flushes the inode's dirty pages whichever descriptor wrote them
    finally:
        os.close(fd)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)  # the directory entry: a file fsync'ed but not its name can vanish in a crash
    finally:
        os.close(fd)
    t2 = time.perf_counter()
    size = os.path.getsize(f)
    doc.update(bytes=size, fsynced=True, save={
        "seconds": round(t2 - t0, 4), "write_s": round(t1 - t0, 4), "fsync_s": round(t2 - t1, 4),
        "gbps": round(size / (t2 - t0) / 1e9, 4)})
    if os.environ.get("SIGNOFF_CHECKPOINT_CORRUPT"):
        doc["injected"] = corrupt(f)
    doc["cache"] = drop(f, fs["fstype"])

    sync()
    t0 = time.perf_counter()
    try:
        back = load(torch, f, dev)
        sync()
    except Exception as exc:  # noqa: BLE001 - a file that does not load is the finding itself
        doc["intact"] = {"compared": 0, "load_error": "%s: %s" % (type(exc).__name__, str(exc)[:300])}
        return doc
    t1 = time.perf_counter()
    doc["restore"] = {"seconds": round(t1 - t0, 4), "gbps": round(size / (t1 - t0) / 1e9, 4)}
    if not isinstance(back, dict) or not {"model", "optimizer"} <= set(back):
        doc["intact"] = {"compared": 0,
                         "load_error": "read back as %s, not the saved state" % type(back).__name__}
        return doc
    back["optimizer"]["param_groups"] = json.loads(json.dumps(back["optimizer"].get("param_groups"),
                                                              default=str))
    doc["intact"] = compare(torch, saved, back, names, groups)
    return doc


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--path", default="@tmp", help="directory to write into (@tmp: the temp dir)")
    ap.add_argument("--runid", default=time.strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid())
    ap.add_argument("--host", default=socket.gethostname(), help="name in the run's directory")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2, help="optimizer steps before the save")
    ap.add_argument("--device", choices=["auto", "cpu"], default="auto",
                    help="auto: cuda:0 where torch sees a GPU")
    ap.add_argument("--need", type=int, default=0, help="bytes the file will take (the free-space check)")
    ap.add_argument("--min-free", default="10%", help="keep this much free (percent or size)")
    return ap


def main(argv=None):
    a = build_parser().parse_args(argv)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, st._on_signal)
    rc, doc = 0, {"probe": "checkpoint"}
    try:
        run(a, doc)
    except Refused as exc:
        doc["error"] = str(exc)
    except Interrupted as exc:
        doc["error"], rc = "interrupted by signal %d" % exc.signum, 128 + exc.signum
    except Exception as exc:  # noqa: BLE001 - the controller gets the cause, not a traceback
        doc.update(error="%s: %s" % (type(exc).__name__, exc),
                   traceback=traceback.format_exc().splitlines()[-4:])
    finally:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
        removed = []
        while OWNED:
            p = OWNED.pop()
            shutil.rmtree(p, ignore_errors=True)
            if not os.path.exists(p):
                removed.append(p)
        doc["removed"] = removed
    doc.update(host=socket.gethostname(), runid=a.runid)
    try:
        print(json.dumps(doc))
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
