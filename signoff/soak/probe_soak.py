#!/usr/bin/env python3
"""Host-side probe: sustained bf16 GEMM on every GPU of the host at once (one thread per
GPU), NVML sampled every interval while it runs.

Streams JSON lines on stdout as they happen: a header ({"type": "header"}), one
{"type": "sample"} per interval (t = seconds since the load started; per-GPU lists of
temp, mem_temp, power, sm_clock, reasons, util, tflops, ecc_corr, ecc_unc; null where
NVML cannot read a value) and {"type": "event"} lines (an XID, a GPU whose load failed).
The last line is the JSON document (probe: soak). Never changes clocks or power limits.
Standalone: stdlib, torch, nvidia-ml-py; Python >= 3.8.
"""
import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time

# probelib.py by its path, never sys.path (under python -P/-I its fallback was the run dir's
# parent, anyone's /tmp): beside this file as shipped, else signoff/probelib.py of the source tree
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = os.path.join(_dir, "probelib.py")
if not os.path.exists(_lib) and os.path.basename(os.path.dirname(_dir)) == "signoff":
    _lib = os.path.join(os.path.dirname(_dir), "probelib.py")
_spec = importlib.util.spec_from_file_location("probelib", _lib)
probelib = sys.modules["probelib"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probelib)

# CUDA's order is then NVML's (PCI bus order); UUIDs are matched when torch exposes them.
os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"


FIELDS = ("temp", "mem_temp", "power", "sm_clock", "reasons", "util", "tflops", "ecc_corr", "ecc_unc")
_out_lock = threading.Lock()


def emit(doc):
    with _out_lock:
        sys.stdout.write(json.dumps(doc, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def _err(exc):
    return ("%s: %s" % (type(exc).__name__, exc)).strip()


class Nvml:
    """The NVML reads a soak needs; anything unreadable is None, with why kept once."""

    VALUE = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

    def __init__(self, nv):
        self.nv = nv
        nv.nvmlInit()
        self.handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
        self.why = {}  # field -> why it could not be read (first failure)

    def _get(self, field, fn, *args):
        try:
            v = fn(*args)
            return v.decode() if isinstance(v, bytes) else v
        except Exception as exc:  # noqa: BLE001 - NotSupported, NoPermission, GpuIsLost...
            self.why.setdefault(field, _err(exc))
            return None

    def close(self):
        try:
            self.nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass

    def _temp(self, h):
        nv = self.nv
        try:
            return nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
        except Exception:  # noqa: BLE001 - deprecated call gone: the versioned one
            return nv.nvmlDeviceGetTemperatureV(h, nv.NVML_TEMPERATURE_GPU)

    def _mem_temp(self, h):
        nv = self.nv
        fv = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_MEMORY_TEMP])[0]
        if fv.nvmlReturn != 0:
            raise nv.NVMLError(fv.nvmlReturn)
        return getattr(fv.value, self.VALUE.get(fv.valueType, "uiVal"))

    def _reasons(self, h):
        nv = self.nv
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return fn(h)

    def info(self, i):
        nv, h = self.nv, self.handles[i]
        thr = {}
        for key, const in (("shutdown", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
                           ("slowdown", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
                           ("mem_max", "NVML_TEMPERATURE_THRESHOLD_MEM_MAX"),
                           ("gpu_max", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX")):
            thr[key] = self._get("threshold_" + key, nv.nvmlDeviceGetTemperatureThreshold, h,
                                 getattr(nv, const, -1))
        limit = self._get("power_limit", nv.nvmlDeviceGetEnforcedPowerLimit, h)
        default = self._get("power_default", getattr(nv, "nvmlDeviceGetPowerManagementDefaultLimit",
                                                     lambda _h: None), h)
        pci = self._get("pci", nv.nvmlDeviceGetPciInfo, h)
        bus = getattr(pci, "busId", None)
        mem = self._get("memory", nv.nvmlDeviceGetMemoryInfo, h)
        return {"index": i, "name": self._get("name", nv.nvmlDeviceGetName, h),
                "uuid": self._get("uuid", nv.nvmlDeviceGetUUID, h),
                "pci_bus_id": bus.decode() if isinstance(bus, bytes) else bus,
                "memory_gib": round(mem.total / 2 ** 30, 1) if mem else None,
                "power_limit_w": round(limit / 1000.0, 1) if limit else None,  # enforced
                "power_default_w": round(default / 1000.0, 1) if default else None,
                "temp_thresholds": thr}

    def sample(self, i):
        nv, h = self.nv, self.handles[i]
        power = self._get("power", nv.nvmlDeviceGetPowerUsage, h)
        util = self._get("util", nv.nvmlDeviceGetUtilizationRates, h)
        ecc = self.ecc(i)
        return {"temp": self._get("temp", self._temp, h),
                "mem_temp": self._get("mem_temp", self._mem_temp, h),
                "power": round(power / 1000.0, 1) if power is not None else None,
                "sm_clock": self._get("sm_clock", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "reasons": self._get("reasons", self._reasons, h),
                "util": util.gpu if util is not None else None,
                "ecc_corr": ecc["corrected"], "ecc_unc": ecc["uncorrected"]}

    def ecc(self, i):
        nv, h = self.nv, self.handles[i]
        return {"gpu": i,
                "corrected": self._get("ecc", nv.nvmlDeviceGetTotalEccErrors, h,
                                       nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_VOLATILE_ECC),
                "uncorrected": self._get("ecc", nv.nvmlDeviceGetTotalEccErrors, h,
                                         nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)}

    def ecc_after(self, i):
        out = self.ecc(i)
        rr = self._get("row_remap", self.nv.nvmlDeviceGetRemappedRows, self.handles[i])
        out["remap_pending"] = bool(rr[2]) if rr else None
        return out

    def violations(self, i):
        """Cumulative time (ns) the driver held clocks down for power / thermal policy."""
        nv, h, out = self.nv, self.handles[i], {}
        for key, const in (("power", "NVML_PERF_POLICY_POWER"), ("thermal", "NVML_PERF_POLICY_THERMAL")):
            v = self._get("violation_" + key, nv.nvmlDeviceGetViolationStatus, h, getattr(nv, const, -1))
            out[key] = int(v.violationTime) if v is not None else None
        return out


def _pci_key(text):
    """'00000000:1B:00.0' / '0000:1b:00' -> (domain, bus, device)."""
    m = re.search(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})", text or "")
    return tuple(int(x, 16) for x in m.groups()) if m else None


def read_dmesg():
    try:
        r = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=20)
    except Exception as exc:  # noqa: BLE001
        return None, _err(exc)
    if r.returncode != 0:
        return None, "dmesg exit %d: %s" % (r.returncode, r.stderr.strip()[:200])
    return r.stdout.splitlines(), None


class Xid:
    """XID events during the soak: NVML critical-error events while it runs, and the kernel
    log's 'NVRM: Xid' lines before/after (dmesg, if this user may read it)."""

    def __init__(self, nvml, clock):
        self.nvml, self.clock = nvml, clock
        self.events, self.notes = [], []
        self.nvml_ok = False
        self.stop = threading.Event()
        self.thread = None
        self.set = None
        nv = nvml.nv
        try:
            self.set = nv.nvmlEventSetCreate()
            for i, h in enumerate(nvml.handles):
                supported = nv.nvmlDeviceGetSupportedEventTypes(h)
                if not supported & nv.nvmlEventTypeXidCriticalError:
                    raise RuntimeError("GPU %d does not support XID events" % i)
                nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, self.set)
            self.nvml_ok = True
            self.thread = threading.Thread(target=self._watch, daemon=True)
            self.thread.start()
        except Exception as exc:  # noqa: BLE001
            self.notes.append("NVML XID events unavailable (%s)" % _err(exc))
        self.dmesg_before, why = read_dmesg()
        if self.dmesg_before is None:
            self.notes.append("dmesg unreadable (%s)" % why)

    def _watch(self):
        nv = self.nvml.nv
        while not self.stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(self.set, 500)
            except nv.NVMLError_Timeout:
                continue
            except Exception as exc:  # noqa: BLE001
                self.notes.append("NVML event wait failed (%s)" % _err(exc))
                self.nvml_ok = False
                return
            try:
                gpu = nv.nvmlDeviceGetIndex(data.device)
            except Exception:  # noqa: BLE001
                gpu = None
            ev = {"t": round(self.clock(), 1), "gpu": gpu, "xid": int(data.eventData), "source": "nvml"}
            self.events.append(ev)
            emit(dict(ev, type="event", event="xid"))

    def close(self, gpus):
        self.stop.set()
        if self.thread:
            self.thread.join(timeout=5)
        if self.set is not None:
            try:
                self.nvml.nv.nvmlEventSetFree(self.set)
            except Exception:  # noqa: BLE001
                pass
        if self.dmesg_before is not None:
            after, why = read_dmesg()
            if after is None:
                self.notes.append("dmesg unreadable after the soak (%s)" % why)
                self.dmesg_before = None
            else:
                seen = set(self.dmesg_before)
                by_pci = {_pci_key(g.get("pci_bus_id")): g["index"] for g in gpus}
                known = {(e["gpu"], e["xid"]) for e in self.events}
                for line in after:
                    m = re.search(r"NVRM: Xid \(([^)]*)\): (\d+)", line)
                    if not m or line in seen:
                        continue
                    gpu = by_pci.get(_pci_key(m.group(1)))
                    if (gpu, int(m.group(2))) in known:
                        continue  # already reported by NVML
                    self.events.append({"t": None, "gpu": gpu, "device": m.group(1),
                                        "xid": int(m.group(2)), "source": "dmesg",
                                        "line": line.strip()[:300]})
        readable = self.nvml_ok or self.dmesg_before is not None
        sources = [s for s, ok in (("NVML events", self.nvml_ok),
                                   ("dmesg", self.dmesg_before is not None)) if ok]
        note = "read from " + " and ".join(sources) if sources else ""
        return readable, "; ".join([note] * bool(note) + self.notes)


class Gemm(threading.Thread):
    """Back-to-back C = A @ B (bf16, n x n) on one device; completed FLOPs counted at the
    end of each batch (~25 ms of work), with the next batch already queued."""

    def __init__(self, torch, device, n, go, stop):
        super().__init__(daemon=True)
        self.torch, self.device, self.n = torch, device, n
        self.go, self.stop = go, stop
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.flops, self.done_t = 0.0, None
        self.batch, self.calib_tflops, self.error = None, None, None
        self.changed = None  # batches whose C differed from the first C (same inputs): SDC under load

    def _sync(self):
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def _event(self):
        if self.device.type != "cuda":
            return None
        ev = self.torch.cuda.Event()
        ev.record(self.torch.cuda.current_stream(self.device))
        return ev

    def run(self):
        torch, n = self.torch, self.n
        try:
            if self.device.type == "cuda":
                torch.cuda.set_device(self.device)
            g = torch.Generator(device=self.device)
            g.manual_seed(1234 + (self.device.index or 0))
            a = torch.randn(n, n, device=self.device, dtype=torch.bfloat16, generator=g)
            b = torch.randn(n, n, device=self.device, dtype=torch.bfloat16, generator=g)
            c = torch.empty(n, n, device=self.device, dtype=torch.bfloat16)
            for _ in range(3):
                torch.matmul(a, b, out=c)
            self._sync()
            t0 = time.perf_counter()
            for _ in range(5):
                torch.matmul(a, b, out=c)
            self._sync()
            per = max((time.perf_counter() - t0) / 5, 1e-6)
            self.calib_tflops = round(2.0 * n ** 3 / per / 1e12, 1)
            self.batch = max(1, min(512, int(round(0.025 / per))))
            ref = c.clone()  # the same inputs give the same bits, cold or hot
            mismatch = torch.zeros((), dtype=torch.int64, device=self.device)
        except Exception as exc:  # noqa: BLE001
            self.error = _err(exc)
            self.ready.set()
            return
        self.ready.set()
        self.go.wait()
        flop = 2.0 * n ** 3 * self.batch
        prev = None
        try:
            while not self.stop.is_set():
                for _ in range(self.batch):
                    torch.matmul(a, b, out=c)
                mismatch += (c != ref).any()  # on the device: no sync, the queue stays ahead
                ev = self._event()
                if ev is None:
                    self._count(flop)
                elif prev is not None:
                    prev.synchronize()
                    self._count(flop)
                prev = ev
            if prev is not None:
                prev.synchronize()
                self._count(flop)
            self.changed = int(mismatch.item())
        except Exception as exc:  # noqa: BLE001 - e.g. an ECC error or a GPU lost mid-soak
            self.error = _err(exc)

    def _count(self, flop):
        with self.lock:
            self.flops += flop
            self.done_t = time.monotonic()

    def progress(self):
        with self.lock:
            return self.flops, self.done_t


def cuda_devices(torch, gpus):
    """NVML index -> torch device (None where CUDA does not see that GPU)."""
    count = torch.cuda.device_count()
    uuids = {}
    for c in range(count):
        try:
            uuids[str(torch.cuda.get_device_properties(c).uuid).lower().replace("gpu-", "")] = c
        except Exception:  # noqa: BLE001 - old torch: no uuid
            pass
    found = [uuids.get((g.get("uuid") or "").lower().replace("gpu-", "")) for g in gpus]
    if not any(c is not None for c in found) and count == len(gpus):
        found = [g["index"] for g in gpus]  # no UUIDs to match: PCI order on both sides
    return [torch.device("cuda", c) if c is not None else None for c in found]


def matrix_for(n, memory_gib):
    """The GEMM size: the profile's n, halved until A, B, C take at most a quarter of the card."""
    if memory_gib:
        while n > 1024 and 3 * n * n * 2 > memory_gib * 2 ** 30 / 4:
            n //= 2
    return n


def run(args, nvml, torch, devices):
    """The soak itself: devices[i] is the torch device loading NVML GPU i (None: not loaded)."""
    t_start = time.time()
    gpus = [nvml.info(i) for i in range(len(nvml.handles))]
    go, stop = threading.Event(), threading.Event()
    workers = {}
    gpu_errors = {}
    for g, dev in zip(gpus, devices):
        if dev is None:
            gpu_errors[str(g["index"])] = "not visible to CUDA (CUDA_VISIBLE_DEVICES?), not loaded"
            continue
        n = matrix_for(args.matrix, g.get("memory_gib"))
        workers[g["index"]] = Gemm(torch, dev, n, go, stop)
    for w in workers.values():
        w.start()
    for i, w in workers.items():
        w.ready.wait(timeout=600)
        if w.error:
            gpu_errors[str(i)] = "before the load started: " + w.error
    ecc_before = [nvml.ecc(i) for i in range(len(gpus))]
    viol_before = [nvml.violations(i) for i in range(len(gpus))]
    load_start = [time.monotonic()]
    xid = Xid(nvml, lambda: time.monotonic() - load_start[0])
    cot = probelib.load_cotenants()
    if cot is not None:  # another process's load would pass for this GPU's (issue 29 item 5)
        cot = cot.Sampler(nvml.nv, nvml.handles, args.interval, lambda: time.monotonic() - load_start[0],
                          lambda e: emit(dict(e, type="event", event="cotenant")), "soak")
    t0 = load_start[0] = time.monotonic()
    if cot is not None:
        cot.start()
    go.set()
    emit({"type": "header", "gpus": gpus, "duration_s": args.duration, "interval_s": args.interval,
          "matrix": {str(i): w.n for i, w in workers.items()}, "dtype": "bf16",
          "batch": {str(i): w.batch for i, w in workers.items()}, "fields": list(FIELDS),
          "gpu_errors": gpu_errors,
          "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    prev = {i: w.progress() for i, w in workers.items()}
    k, reported = 0, set(gpu_errors)
    while True:
        target = t0 + k * args.interval
        time.sleep(max(0.0, target - time.monotonic()))
        t = time.monotonic() - t0
        sample = {"type": "sample", "t": round(t, 2)}
        cols = {f: [] for f in FIELDS}
        for i in range(len(gpus)):
            s = nvml.sample(i)
            w = workers.get(i)
            s["tflops"] = None
            if w is not None and not w.error:
                flops, done = w.progress()
                pf, pd = prev[i]
                if k and done is not None and pd is not None and done > pd:
                    s["tflops"] = round((flops - pf) / (done - pd) / 1e12, 3)
                elif k:
                    s["tflops"] = 0.0  # no batch finished in this interval
                if done is not None and (pd is None or done > pd):
                    prev[i] = (flops, done)
            for f in FIELDS:
                cols[f].append(s[f])
        sample.update(cols)
        emit(sample)
        for i, w in workers.items():
            if w.error and str(i) not in reported:
                reported.add(str(i))
                gpu_errors[str(i)] = w.error
                emit({"type": "event", "event": "gpu_error", "t": round(t, 1), "gpu": i, "error": w.error})
        k += 1
        if t >= args.duration:
            break
    stop.set()
    for w in workers.values():
        w.join(timeout=60)
    seen = cot.stop() if cot is not None else {}
    readable, note = xid.close(gpus)
    viol_after = [nvml.violations(i) for i in range(len(gpus))]
    doc = {
        "probe": "soak", "duration_s": args.duration, "interval_s": args.interval, "samples": k,
        "gpus": gpus, "ecc_before": ecc_before,
        "ecc_after": [nvml.ecc_after(i) for i in range(len(gpus))],
        "violation_ns": [{key: (a[key] - b[key]) if None not in (a[key], b[key]) else None for key in a}
                         for a, b in zip(viol_after, viol_before)],
        "xid": xid.events, "xid_readable": readable, "xid_note": note,
        "gpu_errors": gpu_errors,
        "gemm": {str(i): {"n": w.n, "batch": w.batch, "calibration_tflops": w.calib_tflops,
                          "total_pflop": round(w.flops / 1e15, 1), "changed_batches": w.changed}
                 for i, w in workers.items()},
        "nvml_unreadable": nvml.why, **seen,
        "torch": getattr(torch, "__version__", None),
        "elapsed_s": round(time.time() - t_start, 1),
    }
    return doc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=90, help="load time, s")
    ap.add_argument("--interval", type=float, default=1.0, help="NVML sampling period, s")
    ap.add_argument("--matrix", type=int, default=8192, help="GEMM size n (bf16, n x n x n)")
    args = ap.parse_args(argv)
    try:
        import pynvml
        nvml = Nvml(pynvml)
    except Exception as exc:  # noqa: BLE001
        emit({"probe": "soak", "error": "NVML unavailable: %s" % _err(exc)})
        return 0
    try:
        if not nvml.handles:
            emit({"probe": "soak", "error": "NVML reports no GPU"})
            return 0
        try:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("torch %s: CUDA not available" % torch.__version__)
        except Exception as exc:  # noqa: BLE001
            emit({"probe": "soak", "error": "cannot load the GPUs: %s" % _err(exc)})
            return 0
        gpus = [nvml.info(i) for i in range(len(nvml.handles))]
        try:
            doc = run(args, nvml, torch, cuda_devices(torch, gpus))
        except Exception as exc:  # noqa: BLE001 - the samples so far are already out
            doc = {"probe": "soak", "error": "soak stopped: %s" % _err(exc)}
        emit(doc)
    finally:
        nvml.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
