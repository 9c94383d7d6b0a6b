"""A stand-in for the `pynvml` module, enough for signoff/soak/probe_soak.py: GPUs heat up under
load towards a set temperature, sit at the power cap with reason 0x4, and can be told to
throttle, lose an XID or an ECC error. Values follow docs/reference-figures.md."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from types import SimpleNamespace


class NVMLError(Exception):
    def __init__(self, value=999):
        super().__init__(f"NVML error {value}")
        self.value = value


class NVMLError_Timeout(NVMLError):  # noqa: N801 - pynvml's name
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801
    pass


class NVMLError_ArgumentVersionMismatch(NVMLError):  # noqa: N801 - a struct version the driver lacks
    pass


class NVMLError_FunctionNotFound(NVMLError):  # noqa: N801 - a driver older than the call
    pass


# nvidia-ml-py 13's GPU fabric info structs (pynvml.py), field for field
class _Fabric(ctypes.Structure):
    pass


class c_nvmlGpuFabricInfo_t(_Fabric):  # noqa: N801
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 16), ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint)]


class c_nvmlGpuFabricInfo_v2_t(_Fabric):  # noqa: N801
    _fields_ = [("version", ctypes.c_uint), *c_nvmlGpuFabricInfo_t._fields_, ("healthMask", ctypes.c_uint32)]

    def __init__(self):
        super().__init__(version=0x02000024)


class c_nvmlGpuFabricInfo_v3_t(_Fabric):  # noqa: N801
    _fields_ = [*c_nvmlGpuFabricInfo_v2_t._fields_, ("healthSummary", ctypes.c_uint8)]

    def __init__(self):
        super().__init__(version=0x3000028)


FABRIC_COMPLETED = {"state": 3, "status": 0, "cluster_uuid": "00" * 16, "clique_id": 0, "health_mask": 0}


class FakeGPU:
    def __init__(self, index, idle=32.0, hot=65.0, mem_hot=54.0, tau=20.0, reasons=0x4,
                 mem_temp=True, procs=None, fabric=None):
        self.index, self.idle, self.hot, self.mem_hot, self.tau = index, idle, hot, mem_hot, tau
        self.reasons, self.mem_temp_ok = reasons, mem_temp
        # its compute processes now: [(pid, used bytes)]; by default the caller's own context
        self.procs = procs or (lambda: [(os.getpid(), 1 << 30)])
        self.ecc_unc = self.ecc_corr = 0
        # its GPU fabric info: state, status, cluster_uuid (32 hex digits), clique_id, health_mask;
        # None: NotSupported (a GPU on no NVSwitch fabric)
        self.fabric = fabric
        self.t0 = time.monotonic()

    def temp(self):
        frac = 1 - 0.5 ** ((time.monotonic() - self.t0) / self.tau)
        return int(self.idle + (self.hot - self.idle) * frac)


class FakeNV:
    """Module-like: the attributes the probe reads from pynvml."""

    NVMLError, NVMLError_Timeout = NVMLError, NVMLError_Timeout
    NVMLError_NotSupported = NVMLError_NotSupported
    NVML_TEMPERATURE_GPU = 0
    NVML_CLOCK_SM = 1
    NVML_FI_DEV_MEMORY_TEMP = 82
    NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
    NVML_VOLATILE_ECC = 0
    NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 0, 1
    NVML_TEMPERATURE_THRESHOLD_MEM_MAX, NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 2, 3
    NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL = 0, 1
    nvmlEventTypeXidCriticalError = 8

    NVMLError_ArgumentVersionMismatch = NVMLError_ArgumentVersionMismatch
    NVMLError_FunctionNotFound = NVMLError_FunctionNotFound
    c_nvmlGpuFabricInfo_t, c_nvmlGpuFabricInfo_v3_t = c_nvmlGpuFabricInfo_t, c_nvmlGpuFabricInfo_v3_t
    c_nvmlGpuFabricInfoV_t = c_nvmlGpuFabricInfo_v2_t

    def __init__(self, gpus: list[FakeGPU], xid_events=True, xid_after: float | None = None,
                 fabric_api: str = "v3"):
        self.gpus = gpus
        self.xid_events = xid_events
        self.xid_after = xid_after  # seconds after the event set is made: one XID 79 on GPU 0
        self._xid_sent = False
        self._set_made = None
        self.shutdown = False
        self.fabric_api = fabric_api  # the newest fabric struct the fake driver knows: v3, v2, v1

    def _fabric(self, h, ref, api):
        """Fill the caller's struct as the driver does: NotSupported for a GPU on no fabric, a
        version mismatch for a struct newer than the driver's."""
        if h.fabric is None:
            raise NVMLError_NotSupported(3)
        info = ref._obj
        if api != "v1" and info.version >> 24 > int(self.fabric_api[1]):
            raise NVMLError_ArgumentVersionMismatch(25)
        f = h.fabric
        info.clusterUuid[:] = list(bytes.fromhex(f["cluster_uuid"]))
        info.status, info.cliqueId, info.state = f["status"], f["clique_id"], f["state"]
        if hasattr(info, "healthMask"):
            info.healthMask = f["health_mask"]
        if hasattr(info, "healthSummary"):  # v3; 0: not supported
            info.healthSummary = f.get("health_summary", 0)

    def nvmlDeviceGetGpuFabricInfoV(self, h, ref):
        if self.fabric_api == "v1":
            raise NVMLError_FunctionNotFound(13)
        self._fabric(h, ref, "V")

    def nvmlDeviceGetGpuFabricInfo(self, h, ref):
        self._fabric(h, ref, "v1")

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetIndex(self, h):
        return h.index

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H200"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-0000000{h.index}-aaaa-bbbb-cccc-dddddddddddd"

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=f"00000000:{0x18 + 0x10 * h.index:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=143771 << 20)

    def nvmlDeviceGetTemperatureThreshold(self, h, which):
        return {0: 95, 1: 89, 2: 95, 3: 87}[which]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700000

    def nvmlDeviceGetTemperature(self, h, sensor):
        return h.temp()

    def nvmlDeviceGetFieldValues(self, h, ids):
        if not h.mem_temp_ok:
            return [SimpleNamespace(nvmlReturn=3, valueType=1, value=SimpleNamespace(uiVal=0))]
        frac = (h.temp() - h.idle) / max(1, h.hot - h.idle)
        val = int(30 + (h.mem_hot - 30) * frac)
        return [SimpleNamespace(nvmlReturn=0, valueType=1, value=SimpleNamespace(uiVal=val))]

    def nvmlDeviceGetPowerUsage(self, h):
        return 690000

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1755

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return h.reasons

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=100, memory=40)

    def nvmlDeviceGetTotalEccErrors(self, h, kind, counter):
        return h.ecc_unc if kind == 1 else h.ecc_corr

    def nvmlDeviceGetRemappedRows(self, h):
        return (0, 0, 0, 0)

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in h.procs()]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        return []

    def nvmlSystemGetProcessName(self, pid):
        raise NVMLError(3)  # as for a pid the driver does not know

    def nvmlDeviceGetViolationStatus(self, h, policy):
        return SimpleNamespace(violationTime=0, referenceTime=0)

    def nvmlEventSetCreate(self):
        if not self.xid_events:
            raise NVMLError_NotSupported(3)
        self._set_made = time.monotonic()
        return object()

    def nvmlDeviceGetSupportedEventTypes(self, h):
        return 0xFFFF

    def nvmlDeviceRegisterEvents(self, h, types, es):
        pass

    def nvmlEventSetWait_v2(self, es, timeout_ms):
        if self.xid_after is not None and not self._xid_sent and \
                time.monotonic() - self._set_made >= self.xid_after:
            self._xid_sent = True
            return SimpleNamespace(device=self.gpus[0], eventType=8, eventData=79)
        threading.Event().wait(min(timeout_ms, 50) / 1000)
        raise NVMLError_Timeout(10)

    def nvmlEventSetFree(self, es):
        pass
