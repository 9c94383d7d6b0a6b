#!/usr/bin/env python3
"""Host-side probe: how many samples/s a torch DataLoader's CPU work delivers, per worker count.

Each sample is decode/augment-like work on a synthetic uint8 image: 3 x size x size (a shifted
view of one random image, copied), bilinear resize to crop x crop, normalise (ImageNet mean
and std); batches of `batch`, pin_memory where CUDA is present. Per worker count: samples/s
after the first batch (the workers' start-up is not the pipeline's rate). --delay-ms adds a
sleep per sample: a pipeline slowed on purpose. Prints exactly one JSON document.
"""
import argparse
import json
import os
import sys
import time


def worker_counts(given, cpus):
    if given:
        return [int(w) for w in given.split(",")]
    out, n = [0], 1
    while n < cpus:
        out.append(n)
        n *= 2
    return sorted(set(out + [max(0, cpus - 1)]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--crop", type=int, default=224)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--samples", type=int, default=1024, help="samples timed per worker count")
    ap.add_argument("--workers", default="", help="worker counts, e.g. 0,4,8; default 0, 1, 2, 4, ... CPUs-1")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    doc = {"probe": "loader", "argv": sys.argv[1:], "cpus": cpus}
    try:
        import torch
        import torch.nn.functional as F
        from torch.utils.data import DataLoader, Dataset
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "torch not importable: %s" % exc
        print(json.dumps(doc))
        return 1
    pin = torch.cuda.is_available()
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1) * 255
    base = torch.randint(0, 256, (3, args.size, 2 * args.size), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(0))

    class Images(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            off = i % args.size
            img = base[:, :, off:off + args.size].contiguous()  # a fresh uint8 image, as decoded
            x = F.interpolate(img.unsqueeze(0).float(), size=(args.crop, args.crop), mode="bilinear",
                              align_corners=False)[0]
            if args.delay_ms:
                time.sleep(args.delay_ms / 1e3)
            return (x - mean) / std

    rows = []
    try:
        for w in worker_counts(args.workers, cpus):
            loader = DataLoader(Images(), batch_size=args.batch, num_workers=w, pin_memory=pin,
                                persistent_workers=False)
            it = iter(loader)
            next(it)
            n, t0 = 0, time.perf_counter()
            while n < args.samples:
                n += len(next(it))
            dt = time.perf_counter() - t0
            del it, loader
            rows.append({"workers": w, "samples": n, "seconds": round(dt, 4),
                         "samples_per_s": round(n / dt, 2)})
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])
    doc.update(rows=rows, settings={"pin_memory": pin, "batch": args.batch, "size": args.size,
                                    "crop": args.crop, "delay_ms": args.delay_ms,
                                    "main_threads": torch.get_num_threads(), "torch": torch.__version__,
                                    "work": "uint8 3x%dx%d -> bilinear %dx%d -> normalise"
                                            % (args.size, args.size, args.crop, args.crop)})
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
