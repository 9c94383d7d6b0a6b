#!/usr/bin/env python3
"""Host-side probe: HBM bandwidth per GPU, a device-to-device copy of 1 GiB timed with CUDA
events (3 warm-ups, mean of 20), counting the bytes read and written (2 x 1 GiB per copy), as
the 4.24 TB/s anchor on one H200 (docs/h200.md: 4.233-4.255 measured). One JSON document."""
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

SIZE = 1 << 30
WARMUP, ITERS = 3, 20


def main():
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"probe": "hbm", "error": "torch not importable: %s" % exc}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"probe": "hbm", "error": "torch.cuda.is_available() is False"}))
        return 0
    doc = {"probe": "hbm", "bytes": SIZE, "iters": ITERS, "gpus": {}, "errors": {}}
    cot = probelib.load_cotenants()
    seen = cot.watch(0.5, "HBM copies") if cot else None  # at the start, every 0.5 s, at the end
    for i in range(torch.cuda.device_count()):
        try:
            dev = torch.device("cuda", i)
            src = torch.empty(SIZE, dtype=torch.uint8, device=dev).fill_(1)
            dst = torch.empty_like(src)
            for _ in range(WARMUP):
                dst.copy_(src)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(ITERS):
                dst.copy_(src)
            end.record()
            end.synchronize()
            s = start.elapsed_time(end) / 1000.0
            doc["gpus"][str(i)] = round(2 * SIZE * ITERS / s / 1e12, 3)  # TB/s, read + written
            del src, dst
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001
            doc["errors"][str(i)] = "%s: %s" % (type(exc).__name__, exc)
    doc.update(seen.stop() if seen else {})
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
