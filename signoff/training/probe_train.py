#!/usr/bin/env python3
"""Host-side probe: a data-parallel training step on synthetic data, one process per GPU.

A stack of `layers` nn.TransformerEncoderLayer(d_model, heads, ffn, norm_first, no dropout)
under DistributedDataParallel (NCCL, bf16 autocast, fused AdamW on GPUs; gloo, fp32, AdamW
on CPU ranks), learning a fixed synthetic batch (target: the input with its features
reversed): the same step at every width (1, 2, 4, ... ranks, each in its own process
group), or once over every node (--nnodes, probe_allreduce's rendezvous arguments).

Per width: step time (slowest rank, after warm-up), tokens/s, model TFLOP/s per GPU with
  FLOP per rank and step = 6 * params * batch * seq + 12 * layers * batch * seq^2 * d_model
  (matmuls forward and backward, plus attention's scores and weighted sum),
the losses, whether every replica holds the same weights at the end (a wrong all-reduce
lets them drift apart), and each rank's step time without gradient sync (DDP no_sync):
comm_share = 1 - slowest no-sync step / synced step, the communication the step waits for.
Over nodes, each node's document says which transport the step's traffic between nodes took, as
probe_allreduce's does (its parser, loaded by path): NCCL's channel lines (NCCL_DEBUG=INFO, to a
file per rank), gloo's connections and the interface each leaves by (signoff/network/route.py).
Prints exactly one JSON document.
"""
import argparse
import datetime
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

# probelib.py by its path, never sys.path (under python -P/-I its fallback was the run dir's
# parent, anyone's /tmp): beside this file as shipped, else signoff/probelib.py of the source tree
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = os.path.join(_dir, "probelib.py")
if not os.path.exists(_lib) and os.path.basename(os.path.dirname(_dir)) == "signoff":
    _lib = os.path.join(os.path.dirname(_dir), "probelib.py")
_spec = importlib.util.spec_from_file_location("probelib", _lib)
probelib = sys.modules["probelib"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probelib)

NCCL_LOG = "nccl.%h.%p.log"


def allreduce_probe():
    """probe_allreduce (its NCCL log parser, gloo's connection reader), by its path as probelib:
    beside this file as shipped (allreduce.py), else signoff/interconnect/ of the source tree."""
    mod = sys.modules.get("signoff_probe_allreduce")
    if mod is None:
        path = os.path.join(_dir, "allreduce.py")
        if not os.path.exists(path) and os.path.basename(os.path.dirname(_dir)) == "signoff":
            path = os.path.join(os.path.dirname(_dir), "interconnect", "probe_allreduce.py")
        spec = importlib.util.spec_from_file_location("signoff_probe_allreduce", path)
        mod = sys.modules["signoff_probe_allreduce"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod


FORMULA = "6 * params * batch * seq + 12 * layers * batch * seq^2 * d_model per rank and step"


def widths_for(world, given):
    if given:
        return sorted({int(w) for w in given.split(",") if 0 < int(w) <= world})
    out, n = [], 1
    while n < world:
        out.append(n)
        n *= 2
    return out + [world]


def settings(torch, args, cuda):
    """What changes the numbers, as this process runs the step."""
    out = {"amp_dtype": "bfloat16" if cuda else "none (fp32)", "optimizer": "AdamW fused" if cuda
           else "AdamW", "lr": args.lr, "torch": torch.__version__,
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
           "tf32_cudnn": torch.backends.cudnn.allow_tf32,
           "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    if cuda:
        out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    else:
        out["cpu_threads_per_rank"] = args.threads
    return out


def run_width(torch, dist, args, dev, rank, n, group):
    """The step on ranks 0..n-1 of `group`: timings, losses, replica check."""
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    cuda = dev.type == "cuda"
    torch.manual_seed(0)  # every replica starts from the same weights (DDP broadcasts anyway)
    model = nn.Sequential(*[nn.TransformerEncoderLayer(
        args.d_model, args.heads, args.ffn, dropout=0.0, batch_first=True, norm_first=True)
        for _ in range(args.layers)]).to(dev)
    params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model, device_ids=[dev.index] if cuda else None, process_group=group,
              gradient_as_bucket_view=True)  # no copy of the gradients into the buckets
    opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, **({"fused": True} if cuda else {}))
    gen = torch.Generator(device=dev).manual_seed(1 + rank)  # each rank its own shard
    x = torch.randn(args.batch, args.seq, args.d_model, device=dev, generator=gen)
    target = x.flip(-1)

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=cuda):
            out = ddp(x)
        loss = F.mse_loss(out.float(), target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    def slowest(value, op=dist.ReduceOp.MAX):
        t = torch.tensor([value], dtype=torch.float64, device=dev)
        dist.all_reduce(t, op=op, group=group)
        return float(t[0])

    losses = [step() for _ in range(args.warmup)]
    sync()
    dist.barrier(group=group)
    t0 = time.perf_counter()
    losses += [step() for _ in range(args.steps)]
    sync()
    step_s = slowest((time.perf_counter() - t0) / args.steps)
    # the replicas' weights: equal after synced steps (gathered as sums of |w| and w^2)
    sums = torch.stack([sum(p.detach().double().abs().sum() for p in model.parameters()),
                        sum(p.detach().double().pow(2).sum() for p in model.parameters())])
    got = [torch.zeros_like(sums) for _ in range(n)]
    dist.all_gather(got, sums, group=group)
    ref = got[0]
    replicas_equal = all(bool(torch.allclose(g, ref, rtol=1e-6, atol=0)) for g in got)
    # each rank's own pace without the gradient all-reduce (weights drift apart from here)
    k = max(2, args.steps // 2)
    dist.barrier(group=group)
    with ddp.no_sync():
        step()
        sync()
        t1 = time.perf_counter()
        for _ in range(k):
            step()
        sync()
        own = (time.perf_counter() - t1) / k
    t = torch.tensor([own], dtype=torch.float64, device=dev)
    alone = [torch.zeros_like(t) for _ in range(n)]
    dist.all_gather(alone, t, group=group)
    compute_s = [round(float(a[0]), 6) for a in alone]
    flops = 6 * params * args.batch * args.seq + 12 * args.layers * args.batch * args.seq ** 2 * args.d_model
    row = {"ranks": n, "params": params, "step_s": round(step_s, 6),
           "tokens_per_s": round(n * args.batch * args.seq / step_s, 1),
           "samples_per_s": round(n * args.batch / step_s, 2),
           "tflops_per_gpu": round(flops / step_s / 1e12, 6), "flop_per_step_per_rank": flops,
           "losses": [round(float(v), 6) for v in losses], "replicas_equal": replicas_equal,
           "compute_s": compute_s, "comm_share": round(max(0.0, 1 - max(compute_s) / step_s), 4)}
    return row


def worker(local_rank, local_world, args, port, out_path):
    import torch
    import torch.distributed as dist
    # Before the group exists: DDP's first construction imports torch.distributed.nn.functional
    # (through torch._dynamo), whose functions default to `group=group.WORLD`, read at import.
    # Imported after init_process_group they keep the default group for the process's life:
    # destroy_process_group frees nothing and gloo's group is torn down by the interpreter's
    # own teardown, its threads live while the peers exit (the SIGABRTs: docs/measurements.md).
    try:
        import torch.distributed.nn.functional  # noqa: F401
    except ImportError:
        pass

    world = args.nnodes * local_world
    rank = args.node_rank * local_world + local_rank
    once = os.environ.get("SIGNOFF_ABORT_ONCE")  # tests: rank 1 aborts in the first run
    if once and local_rank == 1 and not os.path.exists(once):
        open(once, "w").close()
        os.abort()
    cuda = args.backend == "nccl"
    dev = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    else:
        torch.set_num_threads(args.threads)  # ranks share the host's cores, not each all of them
    kw = {"device_id": dev} if cuda else {}
    timeout = datetime.timedelta(seconds=args.timeout)
    store = dist.TCPStore(args.master_addr, port, world, is_master=False, timeout=timeout)
    dist.init_process_group(args.backend, store=store, rank=rank, world_size=world,
                            timeout=timeout, **kw)
    sys.stderr.write("signoff-event joined rank %d\n" % rank)  # who reached the rendezvous
    sys.stderr.flush()
    rows = []
    try:
        for n in widths_for(world, args.widths) if args.nnodes == 1 else [world]:
            # new_group is collective: every rank makes every group, in the same order
            group = dist.new_group(list(range(n))) if n < world else None
            if rank < n:
                rows.append(run_width(torch, dist, args, dev, rank, n, group))
                if cuda:
                    torch.cuda.empty_cache()  # the last width's model and optimizer are gone
            dist.barrier()
        if not cuda and args.nnodes > 1 and local_rank == 0:
            # gloo across hosts: the connections it holds (alive until the group goes), and the
            # interface each leaves by: every node's own, beside its rows file
            links = allreduce_probe().gloo_links(port)
            with open(os.path.join(os.path.dirname(out_path), "links.json"), "w") as f:
                json.dump(links, f)
        if not cuda and args.nnodes > 1:  # every rank: no node closes its connections before every
            dist.barrier()  # node read its own (a peer's closed one is no longer ESTABLISHED)
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump({"widths": rows, "settings": settings(torch, args, cuda)}, f)
    finally:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--widths", default="", help="rank counts, e.g. 1,2,8; default 1, 2, 4, ... all")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads per gloo rank")
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--nprocs", type=int, default=0, help="ranks on this node; default one per GPU (gloo: 2)")
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--master-addr", default="127.0.0.1", help="node 0's address on the measured net")
    ap.add_argument("--master-port", type=int, default=0, help="0: any free port (single node)")
    ap.add_argument("--timeout", type=int, default=300, help="rendezvous/collective timeout, s")
    args = ap.parse_args()
    doc = {"probe": "train", "argv": sys.argv[1:], "formula": FORMULA,
           "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
           "model": {k: getattr(args, k) for k in ("layers", "d_model", "heads", "ffn", "seq", "batch",
                                                    "warmup", "steps")}}
    got = probelib.torch_ranks(doc, args)
    if got is None:
        print(json.dumps(doc))
        return 1
    torch, mp, gpus, local = got
    doc.update(backend=args.backend, world_size=local * args.nnodes, local_ranks=local, gpus=gpus,
               nnodes=args.nnodes, node_rank=args.node_rank)
    sys.stderr.write("signoff-event started node %d\n" % args.node_rank)
    sys.stderr.flush()
    t0 = time.time()
    logdir = tempfile.mkdtemp(prefix="train.", dir=".")
    out_path = os.path.join(logdir, "rows.json")
    probelib.own_temp(logdir)
    across = args.nnodes > 1
    if across and args.backend == "nccl":
        # Ask NCCL which transport the step's traffic between nodes takes; the user's own NCCL_*
        # settings stay in force (as probe_allreduce)
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET,GRAPH,ENV")
        os.environ["NCCL_DEBUG_FILE"] = os.path.join(os.path.abspath(logdir), NCCL_LOG)
    cot = probelib.load_cotenants() if args.backend == "nccl" else None
    # before the ranks start: they inherit its mark
    seen = cot.watch(1.0, "training step") if cot else None
    store = None
    try:
        socks = []  # each listening socket lives as long as the process: the store holds its fd
        for attempt in (1, 2):
            port, sock = args.master_port, None
            if args.node_rank == 0:
                sock = probelib.listen(args.master_addr, port)
                socks.append(sock)
                port = sock.getsockname()[1]
            try:
                store = probelib.serve(sock, args.master_addr, local * args.nnodes, args.timeout)
                mp.start_processes(worker, args=(local, args, port, out_path), nprocs=local,
                                   start_method=probelib.start_method(args.backend, gpus))
                break
            except mp.ProcessExitedException as exc:
                # gloo's C++ threads can abort a CPU rank on a torn connection (pytorch/gloo#514):
                # a software crash, not the node's; once more on one node, and said so. Never NCCL.
                if attempt == 2 or args.backend != "gloo" or args.nnodes != 1 or exc.signal_name != "SIGABRT":
                    raise
                doc["restarted"] = ("rank %d aborted (%s) in the first run: gloo's own crash "
                                    "(pytorch/gloo#514), run once more" % (exc.error_index, exc.signal_name))
                sys.stderr.write("signoff-event restarted: %s\n" % doc["restarted"])
                store = None
        if args.node_rank == 0:
            with open(out_path) as f:
                doc.update(json.load(f))
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])
        doc["traceback"] = traceback.format_exc()[-2000:]
    del store
    doc["elapsed_s"] = round(time.time() - t0, 2)
    doc.update(seen.stop() if seen else {})
    if across:
        try:
            if args.backend == "nccl":
                doc["transports"], doc["nccl_net"], doc["nccl_log"] = \
                    allreduce_probe().nccl_transports(logdir)
            elif os.path.exists(os.path.join(logdir, "links.json")):
                with open(os.path.join(logdir, "links.json")) as f:
                    doc["links"] = json.load(f)
        except Exception as exc:  # noqa: BLE001  the step's figures stand; the transport is unread
            doc["transport_error"] = "%s: %s" % (type(exc).__name__, exc)
    shutil.rmtree(logdir, ignore_errors=True)  # run by hand, nothing is left in the cwd
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
