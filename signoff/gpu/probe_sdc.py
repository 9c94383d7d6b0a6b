#!/usr/bin/env python3
"""Host-side probe: silent data corruption. The same seeded bf16 and fp32 GEMMs and an fp32
reduction on every GPU (fp32 only on the CPU where there is none), each repeated; prints per
device the SHA-256 of each result's bytes and whether every repeat gave the same bits.
Identical hardware and software compute identical bits: the controller compares the
checksums across the GPUs of a host and across hosts of a class (majority vote).
SIGNOFF_SDC_PERTURB=<op>[:<device>] flips one bit of that device's (default the first)
result of <op>: a fault injection for the suite's own tests. One JSON document."""
import hashlib
import json
import os
import sys
import time

N_GPU, N_CPU = 8192, 512  # GEMM n: ~1 TFLOP per bf16 GEMM on a GPU, 0.27 GFLOP on one CPU core
REPEATS = 5
SEED = 20261201


def inputs(torch, n):
    g = torch.Generator().manual_seed(SEED)  # on the CPU: the same bits on every host
    return torch.randn(n, n, generator=g), torch.randn(n, n, generator=g), torch.randn(4 * n * n, generator=g)


def compute(torch, op, dev, a, b, v):
    """One op's inputs on the device, and the op itself (called again for each repeat)."""
    if op == "reduce_fp32":
        x = v.to(dev)
        return lambda: x.sum(dtype=torch.float32).reshape(1)
    dtype = torch.bfloat16 if op == "gemm_bf16" else torch.float32
    x, y = a.to(dev, dtype), b.to(dev, dtype)
    return lambda: x @ y


def run(torch, dev, ops, a, b, v, perturb):
    out = {}
    for op in ops:
        t0 = time.time()
        fn = compute(torch, op, dev, a, b, v)
        first = fn()
        stable = all(torch.equal(first, fn()) for _ in range(REPEATS - 1))
        # the result's bits as integers (numpy has no bf16)
        raw = first.contiguous().cpu().view(torch.int16 if first.dtype == torch.bfloat16 else torch.int32)
        if perturb == op:
            raw.view(-1)[0] ^= 1
        out[op] = {"sha256": hashlib.sha256(raw.numpy().tobytes()).hexdigest(),
                   "repeats_equal": stable, "s": round(time.time() - t0, 3)}
    return out


def main():
    try:
        import torch
    except Exception as exc:  # noqa: BLE001
        print(json.dumps({"probe": "sdc", "error": "torch not importable: %s" % exc}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, not TF32
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > 0
    if cuda:
        devices = ["cuda:%d" % i for i in range(torch.cuda.device_count())]
        n, ops = N_GPU, ("gemm_bf16", "gemm_fp32", "reduce_fp32")
    else:
        torch.set_num_threads(1)  # one thread's blocking: the same bits on every CPU host alike
        devices, n, ops = ["cpu"], N_CPU, ("gemm_fp32", "reduce_fp32")
    op_dev = (os.environ.get("SIGNOFF_SDC_PERTURB") or "").split(":")
    bad_dev = int(op_dev[1]) if len(op_dev) > 1 else 0
    a, b, v = inputs(torch, n)
    doc = {"probe": "sdc", "n": n, "repeats": REPEATS, "seed": SEED, "ops": list(ops),
           "torch": torch.__version__, "cuda": torch.version.cuda, "devices": {},
           "injected": os.environ.get("SIGNOFF_SDC_PERTURB") or None}
    for i, dev in enumerate(devices):
        name = torch.cuda.get_device_name(i) if cuda else "cpu"
        try:
            doc["devices"][str(i)] = {"name": name, **run(torch, dev, ops, a, b, v,
                                                          op_dev[0] if i == bad_dev else None)}
        except Exception as exc:  # noqa: BLE001
            doc["devices"][str(i)] = {"name": name, "error": "%s: %s" % (type(exc).__name__, exc)}
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
