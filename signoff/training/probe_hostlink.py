#!/usr/bin/env python3
"""Host-side probe: host<->GPU copy bandwidth per GPU, and where each GPU sits.

Per GPU: pinned host-to-device and device-to-host, and pageable host-to-device copies of
--bytes (default 1 GiB), timed with CUDA events, mean of --iters after --warmup copies
(GB = 1e9 B). Each GPU's NUMA node and local CPUs (sysfs of its PCI device), this process's
CPU affinity, and whether it lies on the GPU's node. Prints exactly one JSON document.
"""
import argparse
import importlib.util
import json
import os
import sys

# probelib.py by its path, never sys.path (under python -P/-I its fallback was the run dir's
# parent, anyone's /tmp): beside this file as shipped, else signoff/probelib.py of the source tree
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = os.path.join(_dir, "probelib.py")
if not os.path.exists(_lib) and os.path.basename(os.path.dirname(_dir)) == "signoff":
    _lib = os.path.join(os.path.dirname(_dir), "probelib.py")
_spec = importlib.util.spec_from_file_location("probelib", _lib)
probelib = sys.modules["probelib"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probelib)


def cpulist(text):
    """'0-3,8,10-11' -> {0, 1, 2, 3, 8, 10, 11}."""
    out = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def placement(bus_id, mine):
    """The GPU's NUMA node and local CPUs, read from sysfs; whether `mine` (CPUs) lie there."""
    dev = "/sys/bus/pci/devices/%s" % bus_id.lower()
    try:
        with open(dev + "/numa_node") as f:
            node = int(f.read())
        with open(dev + "/local_cpulist") as f:
            local = cpulist(f.read())
    except (OSError, ValueError) as exc:
        return {"numa_node": None, "error": "sysfs: %s" % exc}
    nodes = [d for d in os.listdir("/sys/devices/system/node") if d.startswith("node")] \
        if os.path.isdir("/sys/devices/system/node") else []
    # A Grace tray (GB200, GB300) shows each GPU's memory as a NUMA node of its own, without
    # CPUs: a node without local CPUs says nothing of where the process should run.
    return {"numa_node": node, "numa_nodes": len(nodes), "local_cpus": fmt(local),
            "process_on_gpu_node": mine <= local if node >= 0 and len(nodes) > 1 and local else None}


def fmt(cpus):
    """{0, 1, 2, 3, 8} -> '0-3,8'."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
            run = []
        run.append(c)
    if run:
        out.append("%d-%d" % (run[0], run[-1]) if len(run) > 1 else str(run[0]))
    return ",".join(out)


def copy_gbps(torch, src, dst, warmup, iters):
    for _ in range(warmup):
        dst.copy_(src, non_blocking=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        dst.copy_(src, non_blocking=True)
    end.record()
    end.synchronize()
    return round(src.numel() * iters / (start.elapsed_time(end) / 1e3) / 1e9, 2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", type=int, default=1 << 30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    mine = os.sched_getaffinity(0)
    doc = {"probe": "hostlink", "argv": sys.argv[1:], "process_cpus": fmt(mine), "bytes": args.bytes,
           "timing": "CUDA events, mean of %d copies after %d warm-ups" % (args.iters, args.warmup)}
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "torch not importable: %s" % exc
        print(json.dumps(doc))
        return 1
    if not torch.cuda.is_available():
        doc.update(gpus=[], cuda=False)
        print(json.dumps(doc))
        return 0
    gpus = []
    cot = probelib.load_cotenants()
    seen = cot.watch(0.5, "host-GPU copies") if cot else None
    try:
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            bus = ("%04x:%02x:%02x.0" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
                   if hasattr(p, "pci_bus_id") else None)  # older torch has no PCI address
            with torch.cuda.device(i):
                dev = torch.empty(args.bytes, dtype=torch.uint8, device="cuda")
                pinned = torch.empty(args.bytes, dtype=torch.uint8, pin_memory=True)
                pageable = torch.empty(args.bytes, dtype=torch.uint8)
                gpus.append({"index": i, "name": p.name, "pci_bus_id": bus,
                             "h2d_pinned": copy_gbps(torch, pinned, dev, args.warmup, args.iters),
                             "d2h_pinned": copy_gbps(torch, dev, pinned, args.warmup, args.iters),
                             "h2d_pageable": copy_gbps(torch, pageable, dev, args.warmup, args.iters),
                             **(placement(bus, mine) if bus else
                                {"numa_node": None, "error": "torch %s reports no PCI bus id"
                                 % torch.__version__})})
                del dev, pinned, pageable
                torch.cuda.empty_cache()
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])
    doc.update(gpus=gpus, cuda=True, torch=torch.__version__, **(seen.stop() if seen else {}))
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
