#!/usr/bin/env python3
"""Host-side probe: a model-parallel step over the host's ranks (one process per GPU; 2 gloo
ranks on a CPU-only host), on synthetic data. Two steps, one after the other:

tensor parallel (Megatron-LM's MLP, arXiv:1909.08053 §3): `layers` blocks x + g(gelu(f(x) W1) W2),
  W1 split by columns and W2 by rows over the p ranks (ffn/p each); f is the identity forward and
  an all-reduce of the input's gradient backward, g an all-reduce of the output forward and the
  identity backward: one all-reduce inside the node per layer forward, one per layer backward.
pipeline (GPipe's schedule, arXiv:1811.06965): the layers (rounded up to a multiple of p) split
  into p stages, one per rank; m micro-batches of `batch` sequences each, every forward, then
  every backward in reverse, activations and gradients sent stage to stage with blocking
  torch.distributed send/recv (no interleaving: the ideal bubble is (p-1)/(m+p-1) of the step).

Both: bf16 autocast and fused AdamW on GPUs (fp32, AdamW on gloo), the loss an MSE against the
input's features reversed (probe_train's), warm-up steps then timed steps, the slowest rank's time.
  model FLOP per GPU and step = 6 * params * tokens / p (params: every block's W1 and W2, tokens: the
  step's, the TP step's batch x seq or the pipeline's m x batch x seq): 2 FLOP per weight and token
  forward, 4 backward.
TP comm share = 1 - the slowest rank's step with its all-reduces left out / the step (probe_train's
definition). Pipeline, per stage: busy (its forward, backward and optimizer step), transfer (each
message it sends or receives at the one-way time of that link, timed alone by ping-pong after the
step), idle = step - busy - transfer; bubble = idle / step; comm share = transfer / step.
Prints exactly one JSON document.
"""
import argparse
import datetime
import importlib.util
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback

# probelib.py by its path, never sys.path (as probe_train: signoff/probelib.py's docstring)
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = os.path.join(_dir, "probelib.py")
if not os.path.exists(_lib) and os.path.basename(os.path.dirname(_dir)) == "signoff":
    _lib = os.path.join(os.path.dirname(_dir), "probelib.py")
_spec = importlib.util.spec_from_file_location("probelib", _lib)
probelib = sys.modules["probelib"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probelib)

FORMULA = "6 * params * tokens / p per GPU and step (params: every block's W1 and W2, d_model x ffn each)"
SCHEDULE = "GPipe"


def ideal_bubble(p, m):
    """The share of a stage's step it idles in GPipe's (and 1F1B's) schedule, its ops all equal:
    p - 1 slots of the m + p - 1 (forward and backward alike)."""
    return (p - 1) / (m + p - 1)


def stage_layers(layers, p):
    """Blocks per stage: the layers rounded up to a multiple of p (every stage the same work)."""
    return max(1, math.ceil(layers / p))


def mlp_params(layers, d, ffn):
    return layers * 2 * d * ffn


class Ctx:
    """What both steps share on one rank."""

    def __init__(self, torch, dist, args, dev, rank, p):
        self.torch, self.dist, self.args, self.dev, self.rank, self.p = torch, dist, args, dev, rank, p
        self.cuda = dev.type == "cuda"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)

    def gather(self, value):
        """Every rank's float, in rank order."""
        t = self.torch.tensor([value], dtype=self.torch.float64, device=self.dev)
        got = [self.torch.zeros_like(t) for _ in range(self.p)]
        self.dist.all_gather(got, t)
        return [float(g[0]) for g in got]

    def autocast(self):
        return self.torch.autocast(self.dev.type, dtype=self.torch.bfloat16, enabled=self.cuda)

    def optimizer(self, params):
        return self.torch.optim.AdamW(params, lr=self.args.lr, **({"fused": True} if self.cuda else {}))

    def weight(self, rows, cols, gen):
        return self.torch.nn.Parameter(
            self.torch.randn(rows, cols, device=self.dev, generator=gen) / math.sqrt(rows))


def tensor_parallel(c):
    """Megatron's column- then row-parallel MLP on ranks 0..p-1; its row of the document."""
    torch, dist, args = c.torch, c.dist, c.args
    import torch.nn.functional as F
    comm = {"on": True}

    class Copy(torch.autograd.Function):  # Megatron's f
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            if comm["on"]:
                g = g.contiguous()
                dist.all_reduce(g)
            return g

    class Reduce(torch.autograd.Function):  # Megatron's g
        @staticmethod
        def forward(ctx, x):
            x = x.contiguous()
            if comm["on"]:
                dist.all_reduce(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    shard = math.ceil(args.ffn / c.p)
    gen = torch.Generator(device=c.dev).manual_seed(1000 + c.rank)  # each rank its own shard
    ws = [(c.weight(args.d_model, shard, gen), c.weight(shard, args.d_model, gen))
          for _ in range(args.layers)]
    opt = c.optimizer([w for pair in ws for w in pair])
    data = torch.Generator(device=c.dev).manual_seed(1)  # every rank the same batch
    x0 = torch.randn(args.batch, args.seq, args.d_model, device=c.dev, generator=data)
    target = x0.flip(-1)

    def step():
        x = x0
        with c.autocast():
            for w1, w2 in ws:
                x = x + Reduce.apply(F.gelu(Copy.apply(x) @ w1) @ w2)
        loss = F.mse_loss(x.float(), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def timed(n):
        c.sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        c.sync()
        return (time.perf_counter() - t0) / n

    for _ in range(args.warmup):
        step()
    step_s = max(c.gather(timed(args.steps)))
    comm["on"] = False  # each rank's own pace with no all-reduce (the weights drift: timing only)
    step()
    compute_s = c.gather(timed(max(2, args.steps // 2)))
    params = mlp_params(args.layers, args.d_model, shard * c.p)
    flops = 6 * params * args.batch * args.seq / c.p
    elem = 2 if c.cuda else 4  # bf16 under autocast, fp32 on gloo
    return {"ranks": c.p, "layers": args.layers, "ffn_per_rank": shard, "params": params,
            "step_s": round(step_s, 6), "tokens_per_s": round(args.batch * args.seq / step_s, 1),
            "tflops_per_gpu": round(flops / step_s / 1e12, 6), "flop_per_step_per_gpu": flops,
            "compute_s": [round(v, 6) for v in compute_s],
            "comm_share": round(max(0.0, 1 - max(compute_s) / step_s), 4),
            "allreduces_per_step": 2 * args.layers,
            "allreduce_bytes": args.batch * args.seq * args.d_model * elem}


def link_times(c, shape, dtype, rounds):
    """One-way time of a message of `shape` between stages s and s+1, each link alone (ping-pong:
    the median of `rounds` round trips / 2, a round trip another process delayed left out); every
    rank gets the list of the p-1 links."""
    torch, dist = c.torch, c.dist
    buf = torch.zeros(shape, dtype=dtype, device=c.dev)
    out = []
    for s in range(c.p - 1):
        dist.barrier()
        trips = [0.0]
        if c.rank in (s, s + 1):
            peer = s + 1 if c.rank == s else s
            for i in range(rounds + 1):
                c.sync()
                t0 = time.perf_counter()
                if c.rank == s:
                    dist.send(buf, peer)
                    dist.recv(buf, peer)
                else:
                    dist.recv(buf, peer)
                    dist.send(buf, peer)
                c.sync()
                if i:  # the first round trip sets up the connection
                    trips.append(time.perf_counter() - t0)
        out.append(max(c.gather(sorted(trips[1:] or trips)[len(trips[1:] or trips) // 2] / 2)))
    return out


def pipeline(c):
    """GPipe over p stages, one per rank; its row of the document."""
    torch, dist, args = c.torch, c.dist, c.args
    import torch.nn.functional as F
    p, s = c.p, c.rank
    m = args.micro_batches or 4 * p
    per = stage_layers(args.layers, p)
    gen = torch.Generator(device=c.dev).manual_seed(2000 + s)
    ws = [(c.weight(args.d_model, args.ffn, gen), c.weight(args.ffn, args.d_model, gen)) for _ in range(per)]
    opt = c.optimizer([w for pair in ws for w in pair])
    data = torch.Generator(device=c.dev).manual_seed(1)
    shape = (args.batch, args.seq, args.d_model)
    xs = [torch.randn(*shape, device=c.dev, generator=data) for _ in range(m)] if s == 0 else []
    targets = [torch.randn(*shape, device=c.dev, generator=data).flip(-1) for _ in range(m)] \
        if s == p - 1 else []
    act = torch.bfloat16 if c.cuda else torch.float32  # what crosses a stage under autocast
    slow = args.delay_ms / 1e3 if s == args.delay_stage else 0.0
    clock = {"busy": 0.0}

    def work(fn, *a):
        c.sync()
        t0 = time.perf_counter()
        out = fn(*a)
        c.sync()
        clock["busy"] += time.perf_counter() - t0
        return out

    def forward(x):
        with c.autocast():
            for w1, w2 in ws:
                x = x + F.gelu(x @ w1) @ w2
        return x

    def step():
        kept = []
        for i in range(m):
            if s == 0:
                x = xs[i]
            else:
                x = torch.empty(shape, dtype=act, device=c.dev)
                dist.recv(x, s - 1)
                x.requires_grad_()
            if slow:  # the profile's fake slow stage (tests): its own work, counted busy
                work(time.sleep, slow)
            y = work(forward, x)
            if s < p - 1:
                dist.send(y.detach().to(act).contiguous(), s + 1)
                kept.append((x, y))
            else:
                kept.append((x, work(lambda out, t: F.mse_loss(out.float(), t) / m, y, targets[i])))
        for i in reversed(range(m)):
            x, y = kept[i]
            if s == p - 1:
                work(y.backward)
            else:
                g = torch.empty(shape, dtype=act, device=c.dev)
                dist.recv(g, s + 1)
                work(y.backward, g.to(y.dtype))
            if s > 0:
                dist.send(x.grad.to(act).contiguous(), s - 1)
        work(opt.step)
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    c.sync()
    dist.barrier()
    clock["busy"] = 0.0
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    c.sync()
    own = (time.perf_counter() - t0) / args.steps
    busy = c.gather(clock["busy"] / args.steps)
    step_s = max(c.gather(own))
    links = link_times(c, shape, act, max(3, args.steps))
    # per stage: m messages out and m in per neighbour (activations forward, gradients backward)
    transfer = [2 * m * sum(links[k] for k in (i - 1, i) if 0 <= k < p - 1) for i in range(p)]
    stages = [{"stage": i, "layers": per, "busy_s": round(busy[i], 6), "transfer_s": round(transfer[i], 6),
               "idle_s": round(max(0.0, step_s - busy[i] - transfer[i]), 6),
               "bubble": round(max(0.0, step_s - busy[i] - transfer[i]) / step_s, 4),
               "comm_share": round(min(1.0, transfer[i] / step_s), 4)} for i in range(p)]
    params = mlp_params(per * p, args.d_model, args.ffn)
    flops = 6 * params * m * args.batch * args.seq / p
    return {"ranks": p, "stages": stages, "micro_batches": m, "micro_batch": args.batch,
            "layers": per * p, "params": params, "schedule": SCHEDULE,
            "ideal_bubble": round(ideal_bubble(p, m), 4), "step_s": round(step_s, 6),
            "tokens_per_s": round(m * args.batch * args.seq / step_s, 1),
            "tflops_per_gpu": round(flops / step_s / 1e12, 6), "flop_per_step_per_gpu": flops,
            "link_s": [round(v, 7) for v in links],
            "bubble": max(st["bubble"] for st in stages),
            "comm_share": max(st["comm_share"] for st in stages),
            "delay": {"stage": args.delay_stage, "ms": args.delay_ms} if args.delay_ms else None}


def worker(local_rank, p, args, port, out_path):
    import torch
    import torch.distributed as dist
    try:  # before the group exists (probe_train's worker says why)
        import torch.distributed.nn.functional  # noqa: F401
    except ImportError:
        pass
    cuda = args.backend == "nccl"
    dev = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(args.threads)  # ranks share the host's cores
    timeout = datetime.timedelta(seconds=args.timeout)
    store = dist.TCPStore("127.0.0.1", port, p, is_master=False, timeout=timeout)
    dist.init_process_group(args.backend, store=store, rank=local_rank, world_size=p, timeout=timeout,
                            **({"device_id": dev} if cuda else {}))
    try:
        c = Ctx(torch, dist, args, dev, local_rank, p)
        torch.manual_seed(0)
        tp = tensor_parallel(c)
        if cuda:
            torch.cuda.empty_cache()  # the TP step's weights and optimizer are gone
        pp = pipeline(c)
        dist.barrier()
        if local_rank == 0:
            with open(out_path, "w") as f:
                json.dump({"tensor_parallel": tp, "pipeline": pp}, f)
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8, help="sequences per TP step and per micro-batch")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--micro-batches", type=int, default=0, help="pipeline micro-batches; 0: 4 x stages")
    ap.add_argument("--delay-ms", type=float, default=0, help="tests: a sleep per micro-batch on one stage")
    ap.add_argument("--delay-stage", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per gloo rank")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--nprocs", type=int, default=0, help="ranks; default one per GPU (gloo: 2)")
    ap.add_argument("--timeout", type=int, default=300, help="rendezvous/collective timeout, s")
    args = ap.parse_args()
    doc = {"probe": "parallel", "argv": sys.argv[1:], "formula": FORMULA,
           "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
           "model": {k: getattr(args, k) for k in ("layers", "d_model", "ffn", "seq", "batch", "warmup",
                                                    "steps", "micro_batches")}}
    got = probelib.torch_ranks(doc, args)
    if got is None:
        print(json.dumps(doc))
        return 1
    torch, mp, gpus, p = got
    doc.update(backend=args.backend, local_ranks=p, gpus=gpus, torch=torch.__version__)
    if p < 2:  # both steps split the model over ranks: one has nothing to split it with
        doc["not_applicable"] = "one %s: no model to split over ranks" % ("GPU" if gpus else "rank")
        print(json.dumps(doc))
        return 0
    t0 = time.time()
    logdir = tempfile.mkdtemp(prefix="parallel.", dir=".")
    out_path = os.path.join(logdir, "rows.json")
    probelib.own_temp(logdir)
    cot = probelib.load_cotenants() if args.backend == "nccl" else None
    seen = cot.watch(1.0, "model-parallel step") if cot else None  # before the ranks: they inherit its mark
    store = None
    try:
        sock = probelib.listen("127.0.0.1", 0)  # one host: its ranks meet on loopback
        store = probelib.serve(sock, "127.0.0.1", p, args.timeout)
        mp.start_processes(worker, args=(p, args, sock.getsockname()[1], out_path), nprocs=p,
                           start_method=probelib.start_method(args.backend, gpus))
        with open(out_path) as f:
            doc.update(json.load(f))
        if args.backend == "nccl":
            doc["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])
        doc["traceback"] = traceback.format_exc()[-2000:]
    del store
    doc["elapsed_s"] = round(time.time() - t0, 2)
    doc.update(seen.stop() if seen else {})
    shutil.rmtree(logdir, ignore_errors=True)  # run by hand, nothing is left in the cwd
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
