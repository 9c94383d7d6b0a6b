#!/usr/bin/env python3
"""Host-side probe: software versions and NVML GPU inventory/health.

Standalone (stdlib; torch and nvidia-ml-py when the host's Python has them). Prints
exactly one JSON document. Never raises: what could not be read is reported with why.
`sysinfo.py xids SINCE` prints only the kernel log's XIDs since SINCE (epoch s).
`sysinfo.py [--storage-path DIR] [--data-iface IF]` adds `preflight`: what the run's other
probes will find here (the storage path's filesystem, the data interface, the tools), read by
those probes' own functions (storage.py, netinfo.py beside this one).
"""
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time

SYS = os.environ.get("SIGNOFF_SYSFS", "/sys")  # tests read a recorded sysfs (no IB card here)
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors")
NET_COUNTERS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")
# nvmlDeviceGetTemperatureThreshold's SHUTDOWN=0, SLOWDOWN=1, MEM_MAX=2, GPU_MAX=3
THERMAL = {"shutdown": 0, "slowdown": 1, "mem_max": 2, "gpu_max": 3}
CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124
XID = re.compile(r"NVRM: Xid \(([^)]*)\): (\d+)")
XIDS_KEPT = 200  # lines kept in the document; the counts by code are always complete
# Blackwell's NVLink5 XIDs (144-150) print the unit, the driver's severity, the intrinfo and the
# error status (leptonai/gpud PR 1174: "145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2
# 0x00000008 ...)"); the sub-code is the intrinfo's bits 20-25 (gpud PR 1120, 1160). XID 154 names
# the recovery action (nvmlDeviceGpuRecoveryAction_t: "changed from 0x0 (None) to 0x1 (GPU Reset
# Required)"). Their fatality is the line's (signoff/gpu/judge.py fatal_xids)
NVLINK5 = re.compile(r"\): (?:14[4-9]|150), ([A-Za-z0-9_]{1,40}) (Fatal|Nonfatal|Non-fatal)\b[^(]{0,80}"
                     r"\((0x[0-9a-fA-F]{1,8})(?: (0x[0-9a-fA-F]{1,8}))?")
RECOVERY = re.compile(r"\): 154, GPU recovery action changed from 0x[0-9a-fA-F]{1,8} \([^)]{0,40}\) "
                      r"to (0x[0-9a-fA-F]{1,8})\b")
# nvmlNvLinkErrorCounter_t (DL_REPLAY, DL_RECOVERY, DL_CRC_FLIT, DL_CRC_DATA): per link, what
# `nvidia-smi nvlink -e` shows; NVML (v565 change log) removed the call on Blackwell, where
# NVLink5's per-link field values (scopeId: the link) are read instead: receive errors, local
# link integrity errors, link recovery events (NVML_FI_DEV_NVLINK_COUNT_*), none of which a
# sound link raises (its FEC-corrected symbol errors do grow: not watched)
NVLINK_ERRORS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))
NVLINK5_ERRORS = (("rcv_errors", 208), ("link_integrity", 211), ("recovery_events", 215))
ECC_COUNTS = (("corrected", 0), ("uncorrected", 1))  # nvmlMemoryErrorType_t, NVML_VOLATILE_ECC 0
FIELD_TYPES = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")  # nvmlValueType_t


def os_release():
    try:
        with open("/etc/os-release") as f:
            kv = dict(line.rstrip().split("=", 1) for line in f if "=" in line)
        return kv.get("PRETTY_NAME", "").strip('"') or None
    except OSError:
        return None


# Arm's /proc/cpuinfo has no "model name": the core by its implementer and part (MIDR fields;
# Arm's Technical Reference Manuals: Neoverse V2 0xd4f, the Grace CPU of GB200 / GB300 trays)
ARM_PARTS = {("0x41", "0xd4f"): "Neoverse-V2", ("0x41", "0xd40"): "Neoverse-V1",
             ("0x41", "0xd0c"): "Neoverse-N1", ("0x41", "0xd49"): "Neoverse-N2"}


def cpu_model(path="/proc/cpuinfo"):
    """The CPU's model: x86's "model name", else (aarch64) its Arm implementer and part."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    kv = {}
    for line in lines:
        key, sep, val = line.partition(":")
        if sep:
            kv.setdefault(key.strip(), val.strip())
    if kv.get("model name"):
        return kv["model name"]
    arm = (kv.get("CPU implementer"), kv.get("CPU part"))
    if None in arm:
        return None
    return ARM_PARTS.get(arm, "Arm CPU implementer %s part %s" % arm)


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


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def error_counters(nv=None):
    """Counters that grow with a failing link: every InfiniBand port's, every interface's
    errors and drops, each GPU's PCIe replays, per-link NVLink errors and volatile ECC counts
    (NVML). None: unreadable (NVML's reason in not_read)."""
    out = {"t": round(time.time(), 1), "infiniband": {}, "net": {}, "pcie_replay": {}}
    root = SYS + "/class/infiniband"
    for dev in _ls(root):
        for port in _ls("%s/%s/ports" % (root, dev)):
            base = "%s/%s/ports/%s/counters/" % (root, dev, port)
            out["infiniband"]["%s/%s" % (dev, port)] = {k: _int(_read(base + k)) for k in IB_COUNTERS}
    for name in _ls(SYS + "/class/net"):
        base = "%s/class/net/%s/statistics/" % (SYS, name)
        out["net"][name] = {k: _int(_read(base + k)) for k in NET_COUNTERS}
        # each carrier loss and return: a link that flapped during the run (none on a sound link)
        out["net"][name]["carrier_changes"] = _int(_read("%s/class/net/%s/carrier_changes" % (SYS, name)))
    if nv is not None:
        out.update(nvlink={}, ecc={}, not_read={})
        for i in range(_nv(nv.nvmlDeviceGetCount) or 0):
            h = _nv(nv.nvmlDeviceGetHandleByIndex, i)
            out["pcie_replay"][str(i)] = _nv(nv.nvmlDeviceGetPcieReplayCounter, h) if h else None
            if h:
                out["nvlink"][str(i)] = nvlink_errors(nv, h, i, out["not_read"])
                out["ecc"][str(i)] = ecc_counts(nv, h, i, out["not_read"])
    return out


def _count(fn, *args):
    """(value, None), or (None, why): NotSupported kept apart from a failed read by its name."""
    try:
        return int(fn(*args)), None
    except Exception as exc:  # noqa: BLE001
        return None, _nverr(exc)


def _nvlink5(nv, h, link):
    """NVLink5's counters of one link (field values, scopeId the link): {name: (value, why)}."""
    try:
        vals = nv.nvmlDeviceGetFieldValues(h, [(f, link) for _, f in NVLINK5_ERRORS])
    except Exception as exc:  # noqa: BLE001
        return {n: (None, _nverr(exc)) for n, _ in NVLINK5_ERRORS}
    out = {}
    for (name, _), v in zip(NVLINK5_ERRORS, vals):
        code = int(v.nvmlReturn)
        if code:  # 3: NVML_ERROR_NOT_SUPPORTED, named as pynvml names it
            out[name] = (None, "NVMLError_NotSupported: Not Supported" if code == 3
                         else _nverr(_error(nv, code)))
        else:
            out[name] = (int(getattr(v.value, FIELD_TYPES[int(v.valueType)])), None)
    return out


def nvlink_errors(nv, h, gpu, not_read):
    """Every link's error counters, {link: {"active": bool, counter: n}}, read on active links
    only (an inactive one is nvlink_up's); a counter not read is None, its reason in not_read
    under the name test_error_counters gives it ('GPU 0 NVLink 3 crc_data')."""
    out = {}
    for link, state, why in _links(nv, h):
        where = "GPU %s NVLink %d" % (gpu, link)
        if why is not None:
            out[str(link)] = {"active": None}
            not_read[where + " state"] = why
            continue
        row = out[str(link)] = {"active": state == 1}
        if state != 1:
            continue
        got = {n: _count(nv.nvmlDeviceGetNvLinkErrorCounter, h, link, c) for n, c in NVLINK_ERRORS}
        gone = all(w and "NotSupported" in w for _, w in got.values())
        if gone and hasattr(nv, "nvmlDeviceGetFieldValues"):  # Blackwell: the call is gone
            nvlink5 = _nvlink5(nv, h, link)
            if any(w is None for _, w in nvlink5.values()):  # its fields are there: said once a GPU
                not_read["GPU %s NVLink DL counters" % gpu] = "%s (NVLink5's own counters read)" % (
                    got["replay"][1])
                got = nvlink5
            else:
                got.update(nvlink5)
        for name, (v, w) in got.items():
            row[name] = v
            if w:
                not_read["%s %s" % (where, name)] = w
    return out


def ecc_counts(nv, h, gpu, not_read):
    """The GPU's volatile (since the driver loaded) ECC counts; None where unread, as above."""
    out = {}
    for name, kind in ECC_COUNTS:
        out[name], why = _count(nv.nvmlDeviceGetTotalEccErrors, h, kind, 0)
        if why:
            not_read["GPU %s volatile ECC %s" % (gpu, name)] = why
    return out


def counters_now():
    """`sysinfo.py counters`: the counters alone, for the snapshot at the end of a run."""
    try:
        import pynvml as nv
        nv.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: a host without GPUs
        nv = None
    try:
        return dict(error_counters(nv), probe="counters", nvml=nv is not None)
    finally:
        if nv is not None:
            nv.nvmlShutdown()


def _first_line(cmd):
    out, _ = _run(cmd, timeout=15)
    return out.strip().splitlines()[0].strip() if out and out.strip() else None


def _package(pattern):
    """The installed version of a Debian or RPM package (a glob: nvidia-fabricmanager* matches
    the versioned names), None where none is installed."""
    out, _ = _run(["dpkg-query", "-W", "-f", "${Status} ${Version}\n", pattern], timeout=15)
    for line in (out or "").splitlines():
        if line.startswith("install ok installed "):
            return line.split()[-1]
    out, _ = _run(["rpm", "-qa", "--qf", "%{VERSION}-%{RELEASE}\n", pattern], timeout=15)
    return (out or "").strip().splitlines()[0] if (out or "").strip() else None


def stack():
    """Firmware and stack versions a cluster pins (Imbue's golden config): NIC firmware
    (RDMA cards' fw_ver, ethtool -i of physical interfaces), OFED / rdma-core, the container
    runtime and toolkit, nvidia-fabricmanager. None: not present."""
    fw = {}
    for dev in _ls(SYS + "/class/infiniband"):
        fw[dev] = _read("%s/class/infiniband/%s/fw_ver" % (SYS, dev))
    for name in _ls(SYS + "/class/net"):
        if os.path.exists("%s/class/net/%s/device" % (SYS, name)) and \
                not os.path.isdir("%s/class/net/%s/device/infiniband" % (SYS, name)):
            out, _ = _run(["ethtool", "-i", name], timeout=15)
            m = re.search(r"^firmware-version:\s*(.+)$", out or "", re.M)
            if m:
                fw[name] = m.group(1).strip()
    runtime = None
    for cmd in (["docker", "--version"], ["podman", "--version"], ["containerd", "--version"],
                ["enroot", "version"]):
        runtime = _first_line(cmd)
        if runtime:
            break
    fm = _first_line(["nv-fabricmanager", "--version"])
    return {"nic_firmware": fw,
            "ofed": _first_line(["ofed_info", "-s"]),
            "rdma_core": _package("rdma-core"),
            "container_runtime": runtime,
            "container_toolkit": _first_line(["nvidia-container-cli", "--version"]),
            "fabricmanager": (re.search(r"[\d.]+\d", fm).group(0) if fm and re.search(r"[\d.]+\d", fm)
                              else fm) or _package("nvidia-fabricmanager*")}


def thermal(nv, h):
    """NVML's temperature thresholds (C), the current temperature and the margin to the
    nearest slowdown (newer drivers report thresholds as offsets from T.Limit)."""
    out = {k: _nv(nv.nvmlDeviceGetTemperatureThreshold, h, v) for k, v in THERMAL.items()}
    out["temp"] = _nv(nv.nvmlDeviceGetTemperature, h, 0)  # NVML_TEMPERATURE_GPU
    out["tlimit_margin"] = _nv(getattr(nv, "nvmlDeviceGetMarginTemperature", None) or (lambda _h: None), h)
    return out


def smi_temperatures():
    """bus id -> {label: C} from `nvidia-smi -q -d TEMPERATURE`: both forms, absolute
    ('GPU Slowdown Temp : 89 C') and T.Limit offsets ('GPU Slowdown T.Limit Temp : -2 C')."""
    out, _ = _run(["nvidia-smi", "-q", "-d", "TEMPERATURE"], timeout=30)
    gpus, cur = {}, None
    for line in (out or "").splitlines():
        m = re.match(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", line)
        if m:
            cur = gpus.setdefault(m.group(1).lower(), {})
            continue
        m = re.match(r"^\s+(.+?)\s*:\s*(-?\d+) C\s*$", line)
        if m and cur is not None:
            cur[m.group(1)] = int(m.group(2))
    return gpus


def _pci_path(bdf):
    """The sysfs path of a PCI function: /sys/devices/pci0000:00/<bridges...>/<bdf>."""
    return os.path.realpath("%s/bus/pci/devices/%s" % (SYS, bdf))


def pci_link(a, b):
    """nvidia-smi topo's relation of two PCI functions from their sysfs paths: PIX (one
    switch), PXB (several bridges), PHB (the same host bridge), NODE (the same NUMA node),
    SYS (across NUMA nodes)."""
    pa, pb = a["path"].split("/"), b["path"].split("/")
    common = 0
    while common < min(len(pa), len(pb)) and pa[common] == pb[common]:
        common += 1
    root = next((i for i, c in enumerate(pa) if c.startswith("pci")), None)
    if root is not None and common > root + 1:  # a bridge below the root port in common
        return "PIX" if len(pa) - common <= 2 and len(pb) - common <= 2 else "PXB"
    if root is not None and common > root:
        return "PHB"
    return "NODE" if a["numa"] is not None and a["numa"] == b["numa"] else "SYS"


def gpu_nic(gpus):
    """Each GPU's relation to every RDMA NIC (InfiniBand/RoCE), and whether GPUDirect RDMA
    is available: nvidia_peermem loaded, or dma-buf (CUDA's DMA_BUF_SUPPORTED)."""
    nics = []
    for dev in _ls(SYS + "/class/infiniband"):
        path = os.path.realpath("%s/class/infiniband/%s/device" % (SYS, dev))
        ports = _ls("%s/class/infiniband/%s/ports" % (SYS, dev))
        nics.append({"name": dev, "path": path, "numa": _int(_read(path + "/numa_node")),
                     "link_layer": _read("%s/class/infiniband/%s/ports/%s/link_layer" % (SYS, dev, ports[0]))
                     if ports else None})
    out = {"nics": [{k: n[k] for k in ("name", "numa", "link_layer")} for n in nics], "gpus": {},
           "peermem": os.path.isdir(SYS + "/module/nvidia_peermem"),
           "dmabuf": dma_buf(len(gpus)) if nics else None}
    for g in gpus:
        bdf = (g.get("pci_bus_id") or "").lower()
        bdf = bdf[4:] if len(bdf) == 16 else bdf  # NVML's 8-digit domain, sysfs's 4
        path = _pci_path(bdf)
        gpu = {"path": path, "numa": _int(_read(path + "/numa_node"))}
        out["gpus"][str(g["index"])] = {n["name"]: pci_link(gpu, n) for n in nics} if os.path.exists(path) \
            else None
    topo, _ = _run(["nvidia-smi", "topo", "-m"], timeout=30) if nics else (None, None)
    out["topo_m"] = topo
    return out


def dma_buf(count):
    """Per GPU, CUDA's CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (libcuda); None: unreadable."""
    try:
        import ctypes
        cu = ctypes.CDLL("libcuda.so.1")
        if cu.cuInit(0) != 0:
            return None
        out = {}
        for i in range(count):
            dev, val = ctypes.c_int(), ctypes.c_int()
            ok = cu.cuDeviceGet(ctypes.byref(dev), i) == 0 and \
                cu.cuDeviceGetAttribute(ctypes.byref(val), CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) == 0
            out[str(i)] = bool(val.value) if ok else None
        return out
    except Exception:  # noqa: BLE001
        return None


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


def cpu_torch():
    """A CPU build of torch on a host without an NVIDIA GPU, read from its torch/version.py
    without importing it (the import costs about 2 s of CPU, on every host of every run): what
    an import reports there too (no CUDA, NCCL or arch list). None: import it."""
    if nvidia_pci_devices() or os.path.exists("/dev/nvidiactl"):
        return None
    try:
        import importlib.util
        spec = importlib.util.find_spec("torch")
        path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
        ns = {}
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), ns)  # noqa: S102 - torch's own, a few assignments
    except Exception:  # noqa: BLE001 - no torch, or no readable version file: the import says why
        return None
    if ns.get("cuda") or ns.get("hip") or not ns.get("__version__"):
        return None  # a GPU build: its NCCL and arch list come from torch itself
    return {"version": str(ns["__version__"]), "cuda": None, "nccl": None, "arch_list": [],
            "cuda_available": False, "read_from": "torch/version.py (a CPU build on a host without an "
                                                  "NVIDIA GPU: not imported)"}


def torch_info():
    cpu = cpu_torch()
    if cpu:
        return cpu
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


# NVML's GPU fabric info (nvmlFabricDefs): state 0 not supported, 1 not started, 2 in progress, 3 completed
FABRIC_STRUCTS = (("v3", "c_nvmlGpuFabricInfo_v3_t", "nvmlDeviceGetGpuFabricInfoV"),
                  ("v2", "c_nvmlGpuFabricInfoV_t", "nvmlDeviceGetGpuFabricInfoV"),
                  ("v1", "c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo"))


def fabric_info(nv, h):
    """The GPU's registration with its NVLink fabric (NVSwitch fabric manager, an NVL72 rack's
    switch trays): state, status (an NVML return code, meaningful once completed), the cluster
    UUID and clique id (NVLink domain and partition), the health mask (v2 and later). The newest
    struct this nvidia-ml-py and the driver both know: v3, v2, else the first API. error: why none
    was read; supported False where NVML says the GPU has no fabric (NotSupported)."""
    import ctypes
    tried = []
    for api, cls, fn in FABRIC_STRUCTS:
        if not (hasattr(nv, cls) and hasattr(nv, fn)):
            continue
        info = getattr(nv, cls)()
        try:
            getattr(nv, fn)(h, ctypes.byref(info))
        except Exception as exc:  # noqa: BLE001 - a version the driver lacks: the next one
            tried.append("%s %s: %s" % (fn, api, _nverr(exc)))
            if type(exc).__name__ == "NVMLError_NotSupported":  # no fabric: no older struct has one
                return {"api": None, "state": None, "supported": False, "error": tried[-1]}
            continue
        status = int(info.status)
        out = {"api": api, "supported": int(info.state) != 0, "state": int(info.state), "status": status,
               "status_text": None if status == 0 else _nverr(_error(nv, status)),
               "cluster_uuid": _uuid(bytes(bytearray(info.clusterUuid))), "clique_id": int(info.cliqueId),
               "health_mask": int(info.healthMask) if hasattr(info, "healthMask") else None,
               "health_summary": int(info.healthSummary) if hasattr(info, "healthSummary") else None,
               "error": None}
        return out
    return {"api": None, "state": None, "supported": None,
            "error": "; ".join(tried) or "nvidia-ml-py %s has no GPU fabric info call" % _nv_version(nv)}


def _error(nv, code):
    """pynvml's exception for an NVML return code (NVMLError(code) is its subclass for it)."""
    try:
        return nv.NVMLError(code)
    except Exception as exc:  # noqa: BLE001
        return exc


def _nverr(exc):
    """pynvml's error as 'NVMLError_NotSupported: Not Supported' (its text needs the library)."""
    try:
        return "%s: %s" % (type(exc).__name__, exc)
    except Exception:  # noqa: BLE001
        return type(exc).__name__


def _uuid(raw):
    x = raw.hex()
    return "%s-%s-%s-%s-%s" % (x[:8], x[8:12], x[12:16], x[16:20], x[20:32]) if len(x) == 32 else x


def _nv_version(nv):
    try:
        from importlib.metadata import version
        return version("nvidia-ml-py")
    except Exception:  # noqa: BLE001
        return getattr(nv, "__version__", "?")


IMEX_CHANNELS = "nvidia-caps-imex-channels"


def imex():
    """The IMEX daemon's view of its domain, `nvidia-imex-ctl -N -j` (each node of the domain:
    status, connections; the domain's status), and the IMEX channel devices CUDA imports fabric
    memory through. ctl None: nvidia-imex-ctl not installed. addresses and hostname: what tells
    this host's own node among the domain's."""
    import shutil
    dev = os.path.join(os.environ.get("SIGNOFF_DEVFS", "/dev"), IMEX_CHANNELS)
    out = {"ctl": shutil.which("nvidia-imex-ctl"), "domain": None, "error": None,
           "channel_dir": dev, "channels": _ls(dev), "hostname": platform.node(), "addresses": []}
    if not out["ctl"]:
        return out
    net = _beside("netinfo")
    if net is not None:
        out["addresses"] = sorted({a for addrs in net.ipv4_addresses().values() for a in addrs})
    text, why = _run([out["ctl"], "-N", "-j"], timeout=30)
    if text is None:
        out["error"] = why
        return out
    try:
        out["domain"] = json.loads(text)
    except ValueError:
        out["error"] = "nvidia-imex-ctl -N -j printed no JSON: %r" % text.strip()[:200]
    return out


def _links(nv, h):
    """(link, state, None) for each link the GPU has, (link, None, why) where its state could
    not be read. nvidia-ml-py >= 13's table has 36 slots where NVLink5 has 18: past the GPU's
    own, NVML says InvalidArgument (NotSupported: a GPU without NVLink); those do not exist."""
    absent = tuple(getattr(nv, n) for n in ("NVMLError_NotSupported", "NVMLError_InvalidArgument")
                   if hasattr(nv, n))
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            state = int(nv.nvmlDeviceGetNvLinkState(h, link))
        except absent:
            continue  # this link does not exist on the GPU
        except Exception as exc:  # noqa: BLE001
            yield link, None, ("%s: %s" % (type(exc).__name__, exc)).strip()
            continue
        yield link, state, None


def nvlinks(nv, h):
    """Links that exist, how many are up, and those whose state could not be read (never
    dropped: an unreadable link is not a missing one)."""
    states, unreadable = [], {}
    for link, state, why in _links(nv, h):
        if why is None:
            states.append(state)
        else:
            unreadable[str(link)] = why
    # every query failing is a GPU without reachable NVLink (a PCIe card, a 1-GPU VM slice):
    # no links, the errors kept; a class that needs NVLink fails on them
    return {"links": len(states) + (len(unreadable) if states else 0), "up": sum(states),
            "unreadable": unreadable}


def pci_device_id(info):
    """The GPU's PCI device id, 4 hex digits ("2941" for GB200): NVML's pciDeviceId holds the
    device id in its upper 16 bits and NVIDIA's vendor id (0x10de) in the lower. It tells the
    class where NVML's name is a generic one ("NVIDIA Graphics Device")."""
    dev = getattr(info, "pciDeviceId", None)
    return "%04x" % (dev >> 16) if isinstance(dev, int) and dev else None


def c2c_mode(nv, h):
    """Whether the GPU reaches the CPU over NVLink-C2C (Grace: GB200, GB300) rather than PCIe:
    NVML's C2C mode (R550+); None where NVML cannot say (older NVML, or NotSupported)."""
    fn = getattr(nv, "nvmlDeviceGetC2cModeInfoV", None)
    if fn is None:
        return None
    info = _nv(fn, h)
    enabled = getattr(info, "isC2cEnabled", None)
    return bool(enabled) if enabled is not None else None


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


def bar1(nv, h):
    """BAR1, the window peers and the CPU map the GPU's memory through, and that memory, in MiB
    (a BIOS without large BAR leaves 256 MiB: P2P crippled where the class needs it all)."""
    try:
        return {"total_mib": int(nv.nvmlDeviceGetBAR1MemoryInfo(h).bar1Total) >> 20,
                "memory_mib": int(nv.nvmlDeviceGetMemoryInfo(h).total) >> 20, "error": None}
    except Exception as exc:  # noqa: BLE001
        return {"total_mib": None, "memory_mib": None, "error": _nverr(exc)}


def uvm():
    """nvidia_uvm's uvm_disable_hmm as sysfs prints it ('Y', 'N'); None with why where the
    module is not loaded or the driver has no such parameter."""
    path = SYS + "/module/nvidia_uvm/parameters/uvm_disable_hmm"
    val = _read(path)
    why = None if val else ("nvidia_uvm not loaded" if not os.path.isdir(SYS + "/module/nvidia_uvm")
                            else "no such parameter in this driver's nvidia_uvm")
    return {"path": path, "disable_hmm": val[:8] if val else None, "error": why}


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
            g["pci_device_id"] = pci_device_id(_nv(nv.nvmlDeviceGetPciInfo, h))
            g["c2c"] = c2c_mode(nv, h)
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
            g["fabric"] = fabric_info(nv, h)
            g["power"] = power_limits(nv, h)
            g["bar1"] = bar1(nv, h)
            # the peak memory bandwidth a profile of no class judges HBM against (gpu/judge.py)
            mem_clock = getattr(nv, "NVML_CLOCK_MEM", 2)
            g["memory"] = {"bus_width_bits": _nv(getattr(nv, "nvmlDeviceGetMemoryBusWidth", None)
                                                 or (lambda _h: None), h),
                           "max_clock_mhz": _nv(getattr(nv, "nvmlDeviceGetMaxClockInfo", None)
                                                or (lambda _h, _c: None), h, mem_clock)}
            g["vbios"] = _nv(nv.nvmlDeviceGetVbiosVersion, h)
            g["thermal"] = thermal(nv, h)
            out["gpus"].append(g)
        out["counters"] = error_counters(nv)  # before the run; acceptance/test_health.py, after
    finally:
        busy.close()
        nv.nvmlShutdown()
    return out


def _run(cmd, timeout=60):
    """(stdout, None) or (None, why) for a command that may be missing or refused."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return None, "%s: %s" % (cmd[0], exc)
    if r.returncode != 0:
        return None, "%s exit %d: %s" % (cmd[0], r.returncode, r.stderr.strip()[:200])
    return r.stdout, None


def _journal(since):
    """(epoch, text) of the journal's kernel messages since `since`, over every boot it
    keeps (journalctl -k would read this boot only), [] where it holds none; None, why where
    journalctl fails."""
    out, why = _run(["journalctl", "_TRANSPORT=kernel", "--since",
                     time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)),
                     "-o", "short-unix", "--no-pager", "-q"], timeout=120)
    if out is None:
        return None, why
    lines = []
    for line in out.splitlines():
        t, _, text = line.partition(" ")
        try:
            lines.append((float(t), text))
        except ValueError:
            continue
    return lines, None


def journal_persistent():
    """Whether journald keeps kernel messages across boots: it keeps this boot only without
    /var/log/journal (Storage=auto, the default)."""
    return os.path.isdir(os.environ.get("SIGNOFF_JOURNAL_DIR", "/var/log/journal"))


def _beside(name):
    """Another probe shipped beside this one (<name>.py), loaded as a module; None if absent."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("signoff_" + name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def preflight(storage_path, iface, gpus=False):
    """What the run's probes will find on this host, cheaply (no measurement): the storage
    path as the storage probe resolves it and its filesystem, the data interface as netinfo
    reads it, which tools are installed, whether the journal persists."""
    import shutil
    out = {"tools": {t: bool(shutil.which(t)) for t in ("ib_write_bw", "iperf3", "fio", "journalctl")},
           "journal_persistent": journal_persistent()}
    storage, net = _beside("storage"), _beside("netinfo")
    if storage is not None:
        try:
            path = storage.resolve_path(storage_path or "@tmp")
            fs = storage.fs_info(path)
            out["storage"] = {"path": path, "temp_dir": not storage_path, "fstype": fs["fstype"],
                              "mount": fs["mount"], "network": fs["network"],
                              "ram": fs["fstype"] in storage.RAM_FS,
                              "free": storage.space(path)[0]}  # bytes: the storage writes' preflight
        except Exception as exc:  # noqa: BLE001 - storage.Refused: the storage checks' own ERROR
            out["storage"] = {"path": storage_path, "temp_dir": not storage_path, "error": str(exc)}
    if net is not None:
        ports = net.ethernet(net.ipv4_addresses())
        mine = [p for p in ports if p["name"] == iface]
        # the data interface's port, else every name (what a missing one's error lists)
        out["ethernet"] = mine or [{"name": p["name"], "addresses": []} for p in ports]
        out["infiniband"] = net.infiniband()
    dcgm = _beside("dcgm")
    if dcgm is not None and gpus:  # dcgmi on PATH, its host engine answering (dcgm_diag)
        out["dcgm"] = dcgm.preflight()
    roce = _beside("roce")
    if roce is not None:  # RDMA ports' PFC, ECN, trust and counters at the run's start (signoff/roce)
        out["roce"] = roce.read()
    form = _beside("form")
    if form is not None:  # bare metal, VM or container, /dev/shm, memlock, NICs, disk (signoff/form)
        out["form"] = form.read((out.get("storage") or {}).get("path") or storage_path or None)
    build = _beside("build")
    if build is not None:  # the command line, NIC models, LLDP: judged against the intent (signoff/intent)
        out["build"] = build.read()
    return out


def _journal_reaches(since):
    """Whether the system journal holds a kernel message older than `since` (so it covers the
    kernel's messages after it): a user's or a service's older entry proves nothing of those."""
    out, _ = _run(["journalctl", "--system", "_TRANSPORT=kernel", "--until",
                   time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)),
                   "-n", "1", "-o", "short-unix", "--no-pager", "-q"], timeout=60)
    return bool(out and out.strip())


def _boot_time():
    """(epoch this machine booted, None) or (None, why), from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("btime")), None
    except (OSError, StopIteration, ValueError, IndexError) as exc:
        return None, "boot time unreadable (/proc/stat): %s" % exc


def _since_boot(text, btime):
    """(epoch, text) of dmesg's `[seconds since boot] text` lines of a machine booted at btime."""
    lines = []
    for line in text.splitlines():
        m = re.match(r"\[\s*(\d+\.\d+)\]\s?(.*)", line)
        if m:
            lines.append((btime + float(m.group(1)), m.group(2)))
    return lines


def _dmesg():
    """(epoch, text) of this machine's kernel ring buffer (this boot, as far back as it holds)."""
    text, why = _run(["dmesg"])
    if text is None:
        return None, why
    btime, why = _boot_time()
    return (None, why) if btime is None else (_since_boot(text, btime), None)


def _recorded(text):
    """(epoch, text) of a recorded kernel log, which carries its own clock, never this
    machine's: journalctl -o short-unix lines (`<epoch> host kernel: text`), or dmesg lines
    after a `btime <epoch>` line (the recorded machine's /proc/stat)."""
    m = re.search(r"^btime (\d+)\s*$", text, re.M)
    if m:
        return _since_boot(text, int(m.group(1))), None, int(m.group(1))
    lines = []
    for line in text.splitlines():
        t, _, rest = line.partition(" ")
        try:
            lines.append((float(t), rest))
        except ValueError:
            if re.match(r"\[\s*\d+\.\d+\]", line):
                return None, ("dmesg's seconds since boot but no 'btime <epoch>' line (its "
                              "machine's /proc/stat): the log's times are unknown"), None
    return lines, None, None


def kernel_xids(since):
    """XIDs ('NVRM: Xid (PCI:...): N, ...') of the kernel log since `since` (an epoch, or
    "boot": this machine's, or the recorded log's, boot): the journal, else dmesg.
    SIGNOFF_KERNEL_LOG names a recorded log read instead (tests inject a fault there). An
    unreadable log is an error, never "no XID". covers_from: the oldest moment the log
    provably covers (a reboot or a volatile journal loses what came before)."""
    out = {"probe": "xids", "since": since, "source": None, "covers_from": None, "notes": [],
           "xids": [], "counts": {}, "kinds": {}, "error": None, "boot": None}
    rec = os.environ.get("SIGNOFF_KERNEL_LOG")
    reaches = False
    if rec:
        try:
            with open(rec) as f:
                lines, why, out["boot"] = _recorded(f.read())
        except OSError as exc:
            lines, why = None, "recorded log %s: %s" % (rec, exc)
        out["source"] = "recorded log %s" % rec
    else:
        out["boot"], why = _boot_time()
        if since == "boot" and out["boot"] is None:
            out["error"] = why
            return out
        start = out["boot"] if since == "boot" else since
        lines, why = _journal(start)
        out["source"] = "journal"
        reaches = lines is not None and _journal_reaches(start)
        # Nothing since `start` in a journal that covers it is a quiet kernel: no XID, never
        # dmesg's to say (a user allowed the journal is often refused dmesg: dmesg_restrict=1).
        # Only a journal with no kernel message before it either (a user's own) leaves it to dmesg.
        if lines == [] and not reaches:
            lines, why = None, "journalctl: no kernel messages since then (no persistent journal?)"
        if lines is not None:
            out["persistent"] = journal_persistent()
        if lines is None:
            out["notes"].append(why)
            lines, why = _dmesg()
            out["source"] = "dmesg (this boot)"
    if lines is None:
        out["error"] = "; ".join(out["notes"] + [why])
        return out
    if since == "boot":
        if out["boot"] is None:
            out["error"] = "the recorded log has no 'btime <epoch>' line: its boot is unknown"
            return out
        since = out["since"] = out["boot"]
    # A log whose oldest line is younger than `since` says nothing of what came before it.
    out["covers_from"] = since if reaches or (lines and lines[0][0] <= since) else \
        (lines[0][0] if lines else None)
    lines = [(t, text) for t, text in lines if t >= since]
    for t, text in lines:
        m = XID.search(text)
        if not m:
            continue
        code = m.group(2)
        out["counts"][code] = out["counts"].get(code, 0) + 1
        x = {"t": round(t, 1), "device": m.group(1), "xid": int(code), "line": text.strip()[:300]}
        kind = _xid_kind(int(code), text, x)
        if kind:  # complete, as the counts: the judge's fatal count needs every line's
            seen = out["kinds"].setdefault(code, {})
            seen[kind] = seen.get(kind, 0) + 1
        if len(out["xids"]) < XIDS_KEPT:
            out["xids"].append(x)
    return out


def _xid_kind(code, text, x):
    """What decides an NVLink5 XID's or XID 154's fatality, put into `x`; returned as the kind
    it is counted under: the driver's severity (Fatal, Nonfatal), the recovery action's number,
    or "unstated" where the line does not say (a form this probe does not know)."""
    if 144 <= code <= 150:
        m = NVLINK5.search(text)
        if not m:
            return "unstated"
        intr = int(m.group(3), 16)
        x.update(unit=m.group(1), severity="Fatal" if m.group(2) == "Fatal" else "Nonfatal",
                 sub_code=(intr >> 20) & 0x3F, error_status=m.group(4))
        return x["severity"]
    if code == 154:
        m = RECOVERY.search(text)
        if not m:
            return "unstated"
        x["recovery"] = int(m.group(1), 16)
        return str(x["recovery"])
    return None


def main():
    if sys.argv[1:2] == ["xids"]:
        print(json.dumps(kernel_xids(sys.argv[2] if sys.argv[2] == "boot" else float(sys.argv[2]))))
        return
    if sys.argv[1:2] == ["counters"]:
        print(json.dumps(counters_now()))
        return
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--storage-path", default="")
    ap.add_argument("--data-iface", default="")
    a = ap.parse_args()
    t0 = time.time()
    tinfo = torch_info()
    doc = {
        "probe": "sysinfo",
        "clock": round(t0, 3),  # this host's epoch at the run's start: the run's XIDs are after it
        "hostname": platform.node(),
        "machine": machine(),
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "workdir": os.getcwd(),  # the run's temp dir on this host, removed at the end
        "os": os_release(),
        "kernel": platform.release(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "arch": platform.machine(),  # x86_64, aarch64 (Grace: GB200 / GB300 trays)
        "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "torch": tinfo,
        "nvidia": gpu_info(bool(tinfo.get("cuda_available"))),
    }
    nvidia = doc["nvidia"]
    # before the run: the counters the end of the run is compared with (NVML's with the GPUs)
    doc["counters"] = nvidia.pop("counters", None) or error_counters()
    smi = smi_temperatures() if nvidia.get("gpus") else {}
    for g in nvidia.get("gpus", []):
        bdf = (g.get("pci_bus_id") or "").lower()
        g["thermal"]["smi"] = smi.get(bdf) or smi.get(bdf[4:]) or {}
    doc["stack"] = stack()
    doc["gpu_nic"] = gpu_nic(nvidia.get("gpus", []))
    doc["imex"] = imex()
    doc["nvidia"]["pci_devices"] = nvidia_pci_devices()
    doc["nvidia"]["driver_loaded"] = os.path.exists("/proc/driver/nvidia")
    doc["nvidia"]["uvm"] = uvm()
    doc["preflight"] = preflight(a.storage_path, a.data_iface, bool(nvidia.get("gpus")))
    doc["elapsed_s"] = round(time.time() - t0, 3)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
