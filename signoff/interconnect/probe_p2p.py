#!/usr/bin/env python3
"""Host-side probe: GPU topology and the copy bandwidth of every GPU pair.

Per ordered pair, unidirectional (i->j) and bidirectional (i<->j at once) device-to-device
copy bandwidth in GB/s (1e9 B/s); per pair, the NVML path (NVLink or the PCIe level);
per GPU, NUMA node and CPU affinity; and `nvidia-smi topo -m` as printed. One JSON document.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
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

PCIE_LEVEL = {0: "SAME", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def topology():
    out = {"gpus": [], "paths": {}, "topo_m": None}
    try:
        out["topo_m"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True,
                                       text=True, timeout=60).stdout
    except Exception as exc:  # noqa: BLE001
        out["topo_m"] = "nvidia-smi topo -m failed: %s" % exc
    try:
        import pynvml as nv
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        out["error"] = "NVML: %s" % exc
        return out
    try:
        n = nv.nvmlDeviceGetCount()
        hs = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        for i, h in enumerate(hs):
            g = {"index": i, "numa_node": None, "cpu_affinity": None}
            try:
                g["numa_node"] = nv.nvmlDeviceGetNumaNodeId(h)
            except Exception:  # noqa: BLE001
                pass
            try:
                words = nv.nvmlDeviceGetCpuAffinity(h, 64)
                cpus = [w * 64 + b for w, m in enumerate(words) for b in range(64) if m >> b & 1]
                g["cpu_affinity"] = ranges(cpus)
            except Exception:  # noqa: BLE001
                pass
            out["gpus"].append(g)
        for i in range(n):
            for j in range(n):
                if i == j:
                    continue
                path = None
                try:
                    if nv.nvmlDeviceGetP2PStatus(hs[i], hs[j], nv.NVML_P2P_CAPS_INDEX_NVLINK) == 0:
                        path = "NVLINK"
                except Exception:  # noqa: BLE001
                    pass
                if path is None:
                    try:
                        path = PCIE_LEVEL.get(nv.nvmlDeviceGetTopologyCommonAncestor(hs[i], hs[j]))
                    except Exception:  # noqa: BLE001
                        path = "unknown"
                out["paths"]["%d-%d" % (i, j)] = path
    finally:
        nv.nvmlShutdown()
    return out


def ranges(xs):
    out, start = [], None
    for k, x in enumerate(xs):
        if start is None:
            start = x
        if k + 1 == len(xs) or xs[k + 1] != x + 1:
            out.append(str(start) if start == x else "%d-%d" % (start, x))
            start = None
    return ",".join(out)


def bandwidth(torch, n, nbytes, iters):
    uni, bi, peer = {}, {}, {}
    bufs = [torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % i) for i in range(n)]
    recv = [torch.empty(nbytes, dtype=torch.uint8, device="cuda:%d" % i) for i in range(n)]
    streams = [torch.cuda.Stream(device=i) for i in range(n)]

    def sync(*devs):
        for d in devs:
            torch.cuda.synchronize(d)

    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            peer["%d-%d" % (i, j)] = bool(torch.cuda.can_device_access_peer(i, j))
            recv[j].copy_(bufs[i])  # warm-up (enables peer access)
            sync(i, j)
            t0 = time.perf_counter()
            with torch.cuda.stream(streams[i]):
                for _ in range(iters):
                    recv[j].copy_(bufs[i], non_blocking=True)
            sync(i, j)
            uni["%d-%d" % (i, j)] = round(nbytes * iters / (time.perf_counter() - t0) / 1e9, 2)
    for i in range(n):
        for j in range(i + 1, n):
            sync(i, j)
            t0 = time.perf_counter()
            with torch.cuda.stream(streams[i]):
                for _ in range(iters):
                    recv[j].copy_(bufs[i], non_blocking=True)
            with torch.cuda.stream(streams[j]):
                for _ in range(iters):
                    recv[i].copy_(bufs[j], non_blocking=True)
            sync(i, j)
            bw = round(2 * nbytes * iters / (time.perf_counter() - t0) / 1e9, 2)
            bi["%d-%d" % (i, j)] = bi["%d-%d" % (j, i)] = bw
    return uni, bi, peer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-bandwidth", action="store_true")
    args = ap.parse_args()
    doc = {"probe": "p2p", "bytes": args.bytes, "iters": args.iters}
    doc["topology"] = topology()
    try:
        import torch
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "torch not importable: %s" % exc
        n = 0
    doc["gpus"] = n
    if n >= 2 and not args.no_bandwidth:
        t0 = time.time()
        cot = probelib.load_cotenants()
        seen = cot.watch(0.5, "P2P copies") if cot else None
        doc["unidirectional"], doc["bidirectional"], doc["peer_access"] = bandwidth(
            torch, n, args.bytes, args.iters)
        doc["elapsed_s"] = round(time.time() - t0, 2)
        doc.update(seen.stop() if seen else {})
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
