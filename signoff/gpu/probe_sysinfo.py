#!/usr/bin/env python3
"""Host-side probe: software versions and NVML GPU inventory/health.

Standalone (stdlib; torch and nvidia-ml-py when the host's Python has them). Prints
exactly one JSON document. Never raises: what could not be read is reported with why.
"""
import json
import os
import platform
import sys
import threading
import time


def os_release():
    try:
        with open("/etc/os-release") as f:
            kv = dict(line.rstrip().split("=", 1) for line in f if "=" in line)
        return kv.get("PRETTY_NAME", "").strip('"') or None
    except OSError:
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None


def machine():
    """What tells this machine (and network namespace) from another host of the run: two
    inventory entries that reach one host report the same. boot_id: a cloned image keeps
    its machine-id but boots with its own."""
    out = {}
    for key, path in (("machine_id", "/etc/machine-id"), ("boot_id", "/proc/sys/kernel/random/boot_id")):
        try:
            with open(path) as f:
                out[key] = f.read().strip() or None
        except OSError:
            out[key] = None
    try:
        out["netns"] = os.readlink("/proc/self/ns/net")
    except OSError:
        out["netns"] = None
    return out


def nvidia_pci_devices():
    """NVIDIA display/3D controllers on the PCI bus: evidence of GPUs even when NVML fails."""
    n, root = 0, "/sys/bus/pci/devices"
    try:
        for dev in os.listdir(root):
            try:
                with open(os.path.join(root, dev, "vendor")) as f:
                    vendor = f.read().strip()
                with open(os.path.join(root, dev, "class")) as f:
                    cls = f.read().strip()
            except OSError:
                continue
            if vendor == "0x10de" and cls.startswith("0x03"):
                n += 1
    except OSError:
        pass
    return n


def torch_info():
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        return {"version": None, "error": "torch not importable: %s" % exc}
    info = {"version": torch.__version__, "cuda": torch.version.cuda, "nccl": None,
            "arch_list": [], "cuda_available": False}
    try:
        info["cuda_available"] = bool(torch.cuda.is_available())
        info["arch_list"] = list(torch.cuda.get_arch_list())
        if torch.version.cuda:
            v = torch.cuda.nccl.version()
            # a tuple on current torch, an int (e.g. 21803) on old ones
            info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else \
                "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else \
                "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
    except Exception as exc:  # noqa: BLE001
        info["error"] = "torch.cuda: %s" % exc
    return info


def _nv(fn, *args):
    """Call NVML; NotSupported and friends become None instead of killing the probe."""
    try:
        v = fn(*args)
        return v.decode() if isinstance(v, bytes) else v
    except Exception:  # noqa: BLE001
        return None


def nvlinks(nv, h):
    """Links that exist, how many are up, and those whose state could not be read (never
    dropped: an unreadable link is not a missing one)."""
    absent = tuple(getattr(nv, n) for n in ("NVMLError_NotSupported", "NVMLError_InvalidArgument")
                   if hasattr(nv, n))
    states, unreadable = [], {}
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            states.append(int(nv.nvmlDeviceGetNvLinkState(h, link)))
        except absent:
            continue  # this link does not exist on the GPU
        except Exception as exc:  # noqa: BLE001
            unreadable[str(link)] = ("%s: %s" % (type(exc).__name__, exc)).strip()
    # every query failing is a GPU without reachable NVLink (a PCIe card, a 1-GPU VM slice):
    # no links, the errors kept; a class that needs NVLink fails on them
    return {"links": len(states) + (len(unreadable) if states else 0), "up": sum(states),
            "unreadable": unreadable}


def power_limits(nv, h):
    """Power limits in W: enforced (what holds the GPU now), the management limit an admin
    sets (nvidia-smi -pl), the board's default and the settable range."""
    def watts(fn):
        mw = _nv(getattr(nv, fn, None) or (lambda _h: None), h)
        return round(mw / 1000.0, 1) if mw else None
    rng = _nv(getattr(nv, "nvmlDeviceGetPowerManagementLimitConstraints", None) or (lambda _h: None), h)
    return {"enforced_w": watts("nvmlDeviceGetEnforcedPowerLimit"),
            "limit_w": watts("nvmlDeviceGetPowerManagementLimit"),
            "default_w": watts("nvmlDeviceGetPowerManagementDefaultLimit"),
            "min_w": round(rng[0] / 1000.0, 1) if rng else None,
            "max_w": round(rng[1] / 1000.0, 1) if rng else None}


def gpu_processes(nv, h):
    """Other processes with a CUDA context on the GPU (NVML compute processes): a GPU that
    someone else uses measures low. None: unreadable."""
    try:
        procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
    except Exception:  # noqa: BLE001
        return None
    out = []
    for p in procs:
        if p.pid == os.getpid():  # this probe's own context (torch_info, Busy)
            continue
        try:
            with open("/proc/%d/comm" % p.pid) as f:
                name = f.read().strip()
        except OSError:
            name = None  # another pid namespace, or gone
        mem = getattr(p, "usedGpuMemory", None)
        out.append({"pid": p.pid, "name": name,
                    "used_mib": mem // (1 << 20) if isinstance(mem, int) and mem < 1 << 60 else None})
    return out


class Busy:
    """Keep every GPU busy while PCIe links are read: idle links downshift to save power."""

    def __init__(self, torch_ok):
        self.stop = threading.Event()
        self.threads = []
        self.ok = False
        if not torch_ok:
            return
        try:
            import torch
            for i in range(torch.cuda.device_count()):
                t = threading.Thread(target=self._spin, args=(torch, i), daemon=True)
                t.start()
                self.threads.append(t)
            self.ok = bool(self.threads)
            time.sleep(1.0)  # links retrain up within a few hundred ms
        except Exception:  # noqa: BLE001
            self.ok = False

    def _spin(self, torch, i):
        dev = torch.device("cuda", i)
        host = torch.empty(64 << 20, dtype=torch.uint8).pin_memory()
        buf = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        while not self.stop.is_set():
            buf.copy_(host, non_blocking=True)  # PCIe traffic, not only SM load
            torch.cuda.synchronize(dev)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)


def gpu_info(torch_ok):
    try:
        import pynvml as nv
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "error": "nvidia-ml-py (pynvml) not importable: %s" % exc}
    try:
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "error": "NVML init failed: %s" % exc}
    out = {"available": True, "driver": _nv(nv.nvmlSystemGetDriverVersion),
           "cuda_driver": None, "gpus": []}
    cuda = _nv(nv.nvmlSystemGetCudaDriverVersion)
    if cuda:
        out["cuda_driver"] = "%d.%d" % (cuda // 1000, cuda % 1000 // 10)
    count = _nv(nv.nvmlDeviceGetCount) or 0
    busy = Busy(torch_ok and count > 0)
    try:
        for i in range(count):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            g = {"index": i, "name": _nv(nv.nvmlDeviceGetName, h),
                 "uuid": _nv(nv.nvmlDeviceGetUUID, h),
                 "pci_bus_id": getattr(_nv(nv.nvmlDeviceGetPciInfo, h), "busId", None),
                 "serial": _nv(nv.nvmlDeviceGetSerial, h),  # what a provider finds the board by
                 "vbios": _nv(nv.nvmlDeviceGetVbiosVersion, h)}
            if isinstance(g["pci_bus_id"], bytes):
                g["pci_bus_id"] = g["pci_bus_id"].decode()
            cc = _nv(nv.nvmlDeviceGetCudaComputeCapability, h)
            g["compute_capability"] = "%d.%d" % cc if cc else None
            ecc = _nv(nv.nvmlDeviceGetEccMode, h)
            g["ecc_current"], g["ecc_pending"] = (bool(ecc[0]), bool(ecc[1])) if ecc else (None, None)
            g["ecc_volatile_uncorrectable"] = _nv(
                nv.nvmlDeviceGetTotalEccErrors, h, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nv.NVML_VOLATILE_ECC)
            rr = _nv(nv.nvmlDeviceGetRemappedRows, h)
            g["row_remap"] = dict(zip(("corrected", "uncorrected", "pending", "failure"),
                                      [int(x) for x in rr])) if rr else None
            g["pcie"] = {
                "gen": _nv(nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
                "width": _nv(nv.nvmlDeviceGetCurrPcieLinkWidth, h),
                "max_gen": _nv(nv.nvmlDeviceGetMaxPcieLinkGeneration, h),
                "max_width": _nv(nv.nvmlDeviceGetMaxPcieLinkWidth, h),
                "gpu_max_gen": _nv(getattr(nv, "nvmlDeviceGetGpuMaxPcieLinkGeneration", None)
                                   or (lambda _h: None), h),
                "under_load": busy.ok,
            }
            g["persistence_mode"] = _nv(nv.nvmlDeviceGetPersistenceMode, h)
            g["processes"] = gpu_processes(nv, h)
            try:
                mig = nv.nvmlDeviceGetMigMode(h)
                g["mig_current"], g["mig_pending"] = int(mig[0]), int(mig[1])
            except getattr(nv, "NVMLError_NotSupported", ()):
                g["mig_current"] = g["mig_pending"] = 0  # a GPU without MIG runs without it
            except Exception:  # noqa: BLE001 - unreadable: the check ERRORs, never "off"
                g["mig_current"] = g["mig_pending"] = None
            g["nvlink"] = nvlinks(nv, h)
            g["power"] = power_limits(nv, h)
            out["gpus"].append(g)
    finally:
        busy.close()
        nv.nvmlShutdown()
    return out


def main():
    t0 = time.time()
    tinfo = torch_info()
    doc = {
        "probe": "sysinfo",
        "hostname": platform.node(),
        "machine": machine(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "workdir": os.getcwd(),  # the run's temp dir on this host, removed at the end
        "os": os_release(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "torch": tinfo,
        "nvidia": gpu_info(bool(tinfo.get("cuda_available"))),
    }
    doc["nvidia"]["pci_devices"] = nvidia_pci_devices()
    doc["nvidia"]["driver_loaded"] = os.path.exists("/proc/driver/nvidia")
    doc["elapsed_s"] = round(time.time() - t0, 3)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
