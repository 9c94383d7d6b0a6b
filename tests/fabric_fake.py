"""What the sysinfo probe reads of an NVLink fabric on hosts this machine cannot be: each GPU's
fabric info is the real probe's fabric_info() reading a fake NVML (tests/fake_nvml.py: no
NVSwitch or NVL72 rack exists here), IMEX the document `nvidia-imex-ctl -N -j` prints (its
shape as NVIDIA/DCGM dcgmlib/dcgm_fields.h and the IMEX guide describe it: nodes with status and
connections, the domain's status)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fake_nvml import FakeGPU, FakeNV

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("sysinfo_probe", ROOT / "signoff" / "gpu" / "probe_sysinfo.py")
sysinfo_probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sysinfo_probe)

RACK = "5c3a1e2f9b7d4c8aa1b2c3d4e5f60718"  # a stand-in cluster UUID (32 hex digits): one NVL72 rack
OTHER_RACK = "9e8d7c6b5a4938271605f4e3d2c1b0a9"
# A clean v3 health mask as NVML gives it: every 2-bit field FALSE (2), configuration NONE (1),
# partition assigned TRUE (1), global fabric manager CONNECTED (1) (pynvml NVML_GPU_FABRIC_HEALTH_MASK_*)
CLEAN = 2 << 0 | 2 << 2 | 2 << 4 | 2 << 6 | 1 << 8 | 1 << 12 | 1 << 14
DEGRADED_BW = (CLEAN & ~0x3) | 1  # the degraded-bandwidth field TRUE


# NVML's health summary of a v3 struct (pynvml NVML_GPU_FABRIC_HEALTH_SUMMARY_*)
HEALTHY, UNHEALTHY, LIMITED_CAPACITY = 1, 2, 3


def fabric(state=3, status=0, uuid=RACK, clique=1, mask=CLEAN, summary=HEALTHY) -> dict:
    return {"state": state, "status": status, "cluster_uuid": uuid, "clique_id": clique, "health_mask": mask,
            "health_summary": summary}


HGX = fabric(uuid="00" * 16, clique=0)  # an HGX board: one fabric manager, no rack domain
FM_DOWN = fabric(state=1, uuid="00" * 16, clique=0, mask=0)  # fabric manager not running: not started


def read(per_gpu: list[dict | None], api: str = "v3") -> list[dict]:
    """The probe's reading of each GPU's fabric (None: NVML says not supported)."""
    gpus = [FakeGPU(i, fabric=f) for i, f in enumerate(per_gpu)]
    nv = FakeNV(gpus, fabric_api=api)
    return [sysinfo_probe.fabric_info(nv, g) for g in gpus]


def imex(trays: list[str], me: int, down: dict | None = None, status: str = "UP", channels=("channel0",),
         ctl: str | None = "/usr/bin/nvidia-imex-ctl", error: str | None = None) -> dict:
    """The probe's IMEX record on tray `me` of `trays` (10.0.0.<k>): every node READY and every
    connection CONNECTED but those in `down` ({(from, to): status}, indices into trays)."""
    down = down or {}
    nodes = {}
    for i, name in enumerate(trays):
        conns = {str(j): {"host": f"10.0.0.{j + 1}", "status": down.get((i, j), "CONNECTED"), "changed": True}
                 for j in range(len(trays))}
        nodes[str(i)] = {"status": "READY", "host": f"10.0.0.{i + 1}", "hostName": name,
                         "connections": conns, "changed": True, "version": "580.95.05"}
    doc = None if error or not ctl else {"nodes": nodes, "timestamp": "12/5/2026 08:00:00.000",
                                         "status": status}
    return {"ctl": ctl, "domain": doc, "error": error, "channel_dir": "/dev/nvidia-caps-imex-channels",
            "channels": list(channels), "hostname": trays[me], "addresses": [f"10.0.0.{me + 1}"]}


NO_IMEX = {"ctl": None, "domain": None, "error": None, "channel_dir": "/dev/nvidia-caps-imex-channels",
           "channels": [], "hostname": "node", "addresses": []}


def record(prof, facts: dict) -> None:
    """Put into a recorded class host's sysinfo what the probe reads of its fabric: its GPUs
    registered with an HGX fabric manager (hardware.nvlink_fabric), with rack RACK's domain
    (clique 1) and IMEX on an NVL72 tray (node 0 of 18), else NVML's NotSupported and no IMEX."""
    gpus = facts["nvidia"]["gpus"]
    rack = bool(prof.hardware.get("nvlink_domain"))
    per = fabric() if rack else HGX if prof.hardware.get("nvlink_fabric") else None
    for g, fab in zip(gpus, read([per] * len(gpus))):
        g["fabric"] = fab
    trays = prof.hardware["nvlink_domain"] // len(gpus) if rack else 0
    facts["imex"] = imex([facts["hostname"]] + [f"tray{k:02d}" for k in range(2, trays + 1)], 0) if rack \
        else dict(NO_IMEX, hostname=facts["hostname"])


def not_applicable(prof) -> set[str]:
    """The fabric checks N.A. on one recorded host of a class: all three without a fabric, the
    domain's also on one tray (a domain across trays is judged over the run's trays)."""
    if not prof.hardware.get("nvlink_fabric"):
        return {"nvlink_fabric", "nvlink_domain", "imex"}
    return {"nvlink_domain"} if prof.hardware.get("nvlink_domain") else {"nvlink_domain", "imex"}
