#!/usr/bin/env python3
"""Host-side: other processes on the GPUs while a probe measures them. Shipped beside every
probe as cotenants.py; probe_soak, probe_hbm, probe_allreduce, probe_p2p and probe_train run
a Sampler (a thread) over their measurement: NVML's compute and graphics processes of every
GPU, every interval. The probe's own processes (itself, its children, its ranks: every
process carrying its MARK in its environment) are not another's. A foreign process is kept
as {gpu, pid, name, type, first_seen, last_seen (UTC), t_first, t_last (s on the probe's
clock), used_mib, samples, visible (in this pid namespace)}; the probe's document gets
`cotenants: [...]` (empty: none seen; null with `cotenants_note`: NVML could not list them).
Run alone: samples for --seconds and prints one JSON document. Standalone: stdlib, nvidia-ml-py.
"""
import argparse
import json
import os
import socket
import sys
import threading
import time

MARK = "SIGNOFF_PROBE_OWNER"
KINDS = (("compute", "nvmlDeviceGetComputeRunningProcesses"),
         ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"))


def _err(exc):
    return ("%s: %s" % (type(exc).__name__, exc)).strip()


def _read(path, mode="r"):
    try:
        with open(path, mode) as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _stat(pid):
    """(parent pid, start time in clock ticks) of a process; None when it is not visible."""
    text = _read("/proc/%d/stat" % pid)
    if not text:
        return None
    rest = text[text.rfind(")") + 2:].split()  # the name may hold spaces and brackets
    return int(rest[1]), rest[19]


def mark():
    """This probe's mark, put in its environment so that its children and spawned ranks
    inherit it; the tasks of one srun step (ranks started beside it) share the step's."""
    if not os.environ.get(MARK):
        job, step = os.environ.get("SLURM_JOB_ID"), os.environ.get("SLURM_STEP_ID")
        me = _stat(os.getpid())
        os.environ[MARK] = ("slurm:%s.%s" % (job, step) if job and step else
                            "%s:%d:%s" % (socket.gethostname(), os.getpid(), me[1] if me else ""))
    return os.environ[MARK]


def own(pid, token):
    """A process of this probe: itself, a descendant, or one carrying its mark."""
    me = os.getpid()
    if pid == me:
        return True
    seen, p = set(), pid
    while p > 1 and p not in seen:
        seen.add(p)
        st = _stat(p)
        if st is None:
            break
        if st[0] == me:
            return True
        p = st[0]
    env = _read("/proc/%d/environ" % pid, "rb")  # another user's: unreadable, so not ours
    if not env:
        return False
    env = set(env.split(b"\0"))
    if token.startswith("slurm:"):  # srun started the tasks, each before this one set a mark
        job, _, step = token[6:].partition(".")
        return {("SLURM_JOB_ID=" + job).encode(), ("SLURM_STEP_ID=" + step).encode()} <= env
    return ("%s=%s" % (MARK, token)).encode() in env


def name_of(nv, pid):
    comm = _read("/proc/%d/comm" % pid)
    if comm:
        return comm.strip()
    try:  # not in this pid namespace: the driver may still know it
        n = nv.nvmlSystemGetProcessName(pid)
        n = n.decode() if isinstance(n, bytes) else n
        return os.path.basename(n) if n else None
    except Exception:  # noqa: BLE001
        return None


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Sampler:
    """Every `interval` s, NVML's processes on each GPU (handles: NVML index order), the
    probe's own left out. `clock` gives t_first/t_last (default: s since start())."""

    def __init__(self, nv, handles, interval=1.0, clock=None, on_new=None, during=None):
        self.nv, self.handles, self.interval = nv, list(handles), interval
        self.clock, self.on_new, self.during = clock, on_new, during
        self.token = mark()
        self.found = {}  # (gpu, pid, type) -> entry
        self.mine = {}  # pid -> start time: known to be the probe's own
        self.others = set()  # pids known to be another's
        self.own_listed = False  # NVML listed a pid of ours: its pids are this namespace's
        self.own_count = {}  # gpu -> samples in which NVML listed a process of ours on it
        self.why = {}  # kind -> why NVML could not list it
        self.listed = False  # one list read at least
        self.samples = 0
        self.stop_ev = threading.Event()
        self.thread = None
        self.t0 = None

    @classmethod
    def open(cls, interval=1.0, clock=None, during=None):
        """A sampler with its own NVML handles (a probe that reads NVML no other way), or
        None with why, when NVML cannot be loaded."""
        try:
            import pynvml as nv
            nv.nvmlInit()
            handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        except Exception as exc:  # noqa: BLE001
            return None, "NVML unavailable: %s" % _err(exc)
        return cls(nv, handles, interval, clock, during=during), None

    def _now(self):
        return self.clock() if self.clock else time.monotonic() - self.t0

    def _is_own(self, pid):
        st = _stat(pid)
        if pid in self.mine and (st is None or st[1] == self.mine[pid]):
            return True
        if pid in self.others and st is not None:
            return False
        if st is not None and own(pid, self.token):
            self.mine[pid] = st[1]
            return True
        if st is not None:
            self.others.add(pid)
        return False

    def sample(self):
        now, t = time.time(), round(self._now(), 1)
        for gpu, h in enumerate(self.handles):
            ours = False
            for kind, fn in KINDS:
                get = getattr(self.nv, fn, None)
                if get is None:
                    continue
                try:
                    procs = get(h)
                except Exception as exc:  # noqa: BLE001 - NotSupported (vGPU), NoPermission
                    self.why.setdefault(kind, _err(exc))
                    continue
                self.listed = True
                for p in procs:
                    pid = int(p.pid)
                    if self._is_own(pid):
                        ours = True
                        continue
                    mem = getattr(p, "usedGpuMemory", None)
                    mib = mem // (1 << 20) if isinstance(mem, int) and mem < 1 << 60 else None
                    key = (gpu, pid, kind)
                    e = self.found.get(key)
                    if e is None:
                        e = self.found[key] = {
                            "gpu": gpu, "pid": pid, "name": name_of(self.nv, pid), "type": kind,
                            "first_seen": utc(now), "t_first": t, "used_mib": mib, "samples": 0,
                            "visible": _stat(pid) is not None}
                        if self.on_new:
                            self.on_new(dict(e))
                    e["last_seen"], e["t_last"] = utc(now), t
                    e["samples"] += 1
                    if mib is not None and (e["used_mib"] is None or mib > e["used_mib"]):
                        e["used_mib"] = mib
            if ours:
                self.own_listed = True
                self.own_count[gpu] = self.own_count.get(gpu, 0) + 1
        self.samples += 1

    def _loop(self):
        while True:
            try:
                self.sample()
            except Exception as exc:  # noqa: BLE001 - never the probe's end
                self.why.setdefault("sampler", _err(exc))
            if self.stop_ev.wait(self.interval):
                return

    def start(self):
        self.t0 = time.monotonic()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def stop(self, loaded=True):
        """The document's fields: {"cotenants": [...] or None, "cotenants_note": "..."}.
        loaded: the probe held a context on every GPU, so NVML must have listed it; where it
        never did, NVML's pids are another pid namespace's (a container:
        NVIDIA/nvidia-docker#1483) and the probe's own is, per GPU, the one listed longest."""
        self.stop_ev.set()
        if self.thread:
            self.thread.join(timeout=10)
        self.sample()  # the last word, after the load
        found = sorted(self.found.values(), key=lambda e: (e["t_first"], e["gpu"], e["pid"]))
        notes = ["NVML %s processes unreadable (%s)" % kv for kv in sorted(self.why.items())]
        label = {"cotenants_during": self.during} if self.during else {}
        if not self.listed:
            return dict(label, cotenants=None, cotenants_note="; ".join(notes) or "no GPU to sample")
        if loaded and not self.own_listed and found:
            ours = {}
            for e in found:
                if not e["visible"] and e["samples"] > ours.get(e["gpu"], {}).get("samples", 0):
                    ours[e["gpu"]] = e
            found = [e for e in found if e is not ours.get(e["gpu"])]
            notes.append("NVML listed none of this probe's pids: its pids are another pid "
                         "namespace's (a container); on each GPU the pid listed longest was "
                         "taken for the probe's own")
        notes.append("NVML processes sampled every %g s (%d samples) on %d GPU(s)"
                     % (self.interval, self.samples, len(self.handles)))
        return dict(label, cotenants=found, cotenants_note="; ".join(notes))


class Unsampled:
    """What watch() gives where NVML cannot be loaded: the document says why, no list."""

    def __init__(self, why):
        self.why = why

    def stop(self, loaded=True):
        return {"cotenants": None, "cotenants_note": self.why}


def watch(interval=1.0, during=None):
    """A started sampler with its own NVML handles, for a probe that reads NVML no other way;
    `during`: what it measures, as the check's message names it ("all-reduce")."""
    s, why = Sampler.open(interval, during=during)
    return s.start() if s is not None else Unsampled(why)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--interval", type=float, default=1.0)
    args = ap.parse_args(argv)
    s, why = Sampler.open(args.interval)
    if s is None:
        print(json.dumps({"probe": "cotenants", "error": why}))
        return 0
    s.start()
    time.sleep(args.seconds)
    print(json.dumps(dict(probe="cotenants", **s.stop(loaded=False))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
