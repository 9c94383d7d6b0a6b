#!/usr/bin/env python3
"""Host-side probe: all-reduce bus bandwidth sweep, one process per GPU.

nccl-tests' definitions: algbw = bytes / time (GB = 1e9 B); busbw = algbw * 2(n-1)/n.
NCCL on GPUs, timed with CUDA events over a CUDA graph of `iters` all-reduces (an eager
loop loses most of the small-message bandwidth to launch overhead); gloo on CPU-only
hosts, timed with the wall clock. Every size's result is checked for correctness.
--op adds the other collectives of nccl-tests, measured back to back in the same rendezvous:
all-gather, reduce-scatter, all-to-all, send/recv, with nccl-tests' sizes and busbw factors
(NVIDIA/nccl-tests doc/PERFORMANCE.md: the size is the whole array, count per rank x n, for
all-gather and reduce-scatter, a rank's whole buffer for all-to-all, what a rank sends for
send/recv; busbw = algbw x (n-1)/n, send/recv x 1); --rail-split measures them again inside each
rail, the ranks of one local index on every node (nccl-tests' NCCL_TESTS_SPLIT="MOD <ranks per
node>"), all rails at once. Prints exactly one JSON document.
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
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

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
OPS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv")
NCCL_LOG = "nccl.%h.%p.log"


def ops_list(text):
    ops = [o.strip() for o in text.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad or not ops:
        raise argparse.ArgumentTypeError("unknown collective(s) %s: expected %s" % (bad, ",".join(OPS)))
    return ops


def parse_size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)i?B?", text.strip().upper())
    if not m:
        raise SystemExit("bad size %r" % text)
    return int(m.group(1)) * UNITS[m.group(2)]


def sizes(lo, hi, factor):
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= factor
    return out


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def time_size(torch, dist, nbytes, args, dev, rank, world, use_graph):
    """Seconds per all-reduce of `nbytes`, median over repeats, max over ranks."""
    n = nbytes // 4
    x = torch.full((n,), float(rank + 1), dtype=torch.float32, device=dev)
    dist.all_reduce(x)
    want = world * (world + 1) / 2
    ok = bool(torch.all(x == want).item()) if n else True
    x.zero_()  # zeros stay finite however often they are summed
    graph = None
    if dev.type == "cuda" and use_graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(args.warmup):
                dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(args.iters):
                dist.all_reduce(x)
        # Prove the graph really reduces (an empty capture would time nothing): from ones,
        # `iters` in-place sums leave world**iters everywhere.
        x.fill_(1.0)
        graph.replay()
        want_g = float(world) ** args.iters
        if n and want_g < 1e30:
            lo_hi = (float(x.min()), float(x.max()))
            if not all(abs(v - want_g) <= 1e-5 * want_g for v in lo_hi):
                raise RuntimeError("CUDA graph replay did not reduce: %r != %g" % (lo_hi, want_g))
        x.zero_()
    else:
        for _ in range(args.warmup):
            dist.all_reduce(x)
    times = []
    for _ in range(args.repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            dist.barrier()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if graph is not None:
                graph.replay()
            else:
                for _ in range(args.iters):
                    dist.all_reduce(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / args.iters)
        else:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.iters):
                dist.all_reduce(x)
            times.append((time.perf_counter() - t0) / args.iters)
    t = torch.tensor([median(times), 0.0 if ok else 1.0], dtype=torch.float64,
                     device=dev if dev.type == "cuda" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
    del graph, x
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return float(t[0]), t[1].item() == 0.0


REACHED = [False]  # set in each node's first rank: it says every size it finished (reached())


def reached(op, nbytes):
    """A line on stdout per size finished (one rank per node says it): the controller streams
    it as the sweep's progress, and names the last one when the sweep overruns its timeout."""
    if REACHED[0]:
        sys.stdout.write("signoff-event reached %s %d\n" % (op, nbytes))
        sys.stdout.flush()


def bus_factor(op, n):
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md; src/sendrecv.cu: factor 1)."""
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    return 1.0 if op == "sendrecv" else (n - 1) / n


def op_case(torch, dist, op, nbytes, dev, group, ranks):
    """(run, check, bytes) of one collective at nccl-tests' size `nbytes` among `ranks` (global ranks
    of `group`, None: the world): run() does it once, check() says whether its output is exact,
    bytes is the size algbw counts (the whole array rounded down to a multiple of the ranks, as
    nccl-tests' count). Integer data where nothing is summed; reduce-scatter sums small integers
    (chunk j holds j % 16 + 1 on every rank), exact in float32 at any rank count of a cluster."""
    n, me = len(ranks), ranks.index(dist.get_rank())
    count = nbytes // 4 // (1 if op == "sendrecv" else n)
    if count == 0:
        return None
    i32, f32 = torch.int32, torch.float32
    chunks = torch.arange(n, dtype=i32, device=dev).view(n, 1)
    # torch 2.13 names them *_single (the old names warn, deprecated); older torch has the old only
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if op == "allgather":
        inp = torch.full((count,), me + 1, dtype=i32, device=dev)
        out = torch.empty(count * n, dtype=i32, device=dev)

        def run():
            all_gather(out, inp, group=group)

        def check():
            return bool((out.view(n, count) == chunks + 1).all())
    elif op == "reduce_scatter":
        inp = (chunks % 16 + 1).to(f32).expand(n, count).contiguous().view(-1)
        out = torch.empty(count, dtype=f32, device=dev)

        def run():
            reduce_scatter(out, inp, group=group)

        def check():
            return bool((out == float(n * (me % 16 + 1))).all())
    elif op == "alltoall":
        inp = (me * n + chunks).expand(n, count).contiguous().view(-1)  # chunk j goes to rank j
        out = torch.empty(count * n, dtype=i32, device=dev)

        def run():
            dist.all_to_all_single(out, inp, group=group)

        def check():  # chunk i came from rank i
            return bool((out.view(n, count) == chunks * n + me).all())
    elif op == "sendrecv":  # nccl-tests' ring: to the next rank, from the previous one
        inp = torch.full((count,), me + 1, dtype=i32, device=dev)
        out = torch.empty(count, dtype=i32, device=dev)
        to, frm = ranks[(me + 1) % n], ranks[(me - 1) % n]

        def run():
            for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, inp, to, group),
                                               dist.P2POp(dist.irecv, out, frm, group)]):
                req.wait()

        def check():
            return bool((out == (me - 1) % n + 1).all())
    else:
        raise ValueError("unknown op %r" % op)
    if os.environ.get("SIGNOFF_WRONG_OP") == op:
        # tests: this process's ranks (a host's, where only its probe has it set) leave their output
        # off by one after every run, as a corrupting link or NIC would
        exact = run

        def run():
            exact()
            out[:1] += 1
    return run, check, count * 4 * (1 if op == "sendrecv" else n)


def time_op(torch, dist, case, args, dev, group, use_graph):
    """Seconds per run of `case` (op_case), median over repeats, max over the group's ranks,
    whether every rank's output was exact (before the timing, and after the graph's replay), and
    the group ranks whose output was not (so the controller names their host)."""
    run, check, _ = case
    run()
    ok = check()
    graph = None
    if dev.type == "cuda" and use_graph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(args.warmup):
                run()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(args.iters):
                run()
        graph.replay()  # the same inputs each time: the replayed output must be exact too
        torch.cuda.synchronize(dev)
        ok = ok and check()
    else:
        for _ in range(args.warmup):
            run()
    times = []
    for _ in range(args.repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            dist.barrier(group=group)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if graph is not None:
                graph.replay()
            else:
                for _ in range(args.iters):
                    run()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / args.iters)
        else:
            dist.barrier(group=group)
            t0 = time.perf_counter()
            for _ in range(args.iters):
                run()
            times.append((time.perf_counter() - t0) / args.iters)
    n, me = dist.get_world_size(group), dist.get_rank(group)
    t = torch.zeros(2 + n, dtype=torch.float64, device=dev if dev.type == "cuda" else "cpu")
    t[0], t[1] = median(times), 0.0 if ok else 1.0
    t[2 + me] = t[1]  # this rank's own verdict: its slot, every other rank's zero
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    del graph
    flags = t.tolist()
    return flags[0], flags[1] == 0.0, [i for i in range(n) if flags[2 + i]]


def sweep_op(torch, dist, op, args, dev, group, ranks, use_graph):
    """One collective over the sweep among `ranks`: (rows, graphs used, error). An error the
    collective raises alike on every rank (an op the backend lacks) ends this op only."""
    rows = []
    try:
        for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor):
            case = op_case(torch, dist, op, nbytes, dev, group, ranks)
            if case is None:  # fewer bytes than ranks x 4: nothing to send
                continue
            try:
                t, ok, bad = time_op(torch, dist, case, args, dev, group, use_graph)
            except RuntimeError:
                if not use_graph:
                    raise
                use_graph = False  # capture unsupported for this op: eager, and said (graphs)
                t, ok, bad = time_op(torch, dist, case, args, dev, group, use_graph)
            algbw = case[2] / t / 1e9
            rows.append({"bytes": nbytes, "time_us": round(t * 1e6, 3), "algbw": round(algbw, 3),
                         "busbw": round(algbw * bus_factor(op, len(ranks)), 3), "correct": ok,
                         # the global ranks whose output was wrong: their host is named
                         **({"wrong_ranks": [ranks[i] for i in bad]} if bad else {})})
            reached(op, nbytes)
            del case
            if dev.type == "cuda":
                torch.cuda.empty_cache()
    except (RuntimeError, NotImplementedError, ValueError) as exc:
        said = (str(exc).strip().splitlines() or [""])[0][:300]
        return rows, use_graph, "%s: %s" % (type(exc).__name__, said)
    return rows, use_graph, None


def other_ops(torch, dist, args, dev, rank, world, local_rank, local_world, use_graph):
    """The collectives of --op besides the all-reduce over every rank, then (--rail-split, several
    nodes) those of --rail-split inside each rail, every rail at once: {"ops": {op: rows},
    "op_graphs", "op_errors", "rails": {op: {local index: rows}}, "rail_errors"}."""
    out = {}
    every = list(range(world))
    for op in [o for o in args.op if o != "allreduce"]:
        # --op-size: this op at the size judged alone, not swept (a rail-split op keeps the sweep)
        at = args.op_size and op not in args.rail_split
        one = argparse.Namespace(**{**vars(args), "min_bytes": args.op_size, "max_bytes": args.op_size}) \
            if at else args
        rows, graphs, err = sweep_op(torch, dist, op, one, dev, None, every, use_graph)
        out.setdefault("ops", {})[op] = rows
        out.setdefault("op_graphs", {})[op] = graphs
        if err:
            out.setdefault("op_errors", {})[op] = err
    if not args.rail_split or args.nnodes < 2:
        return out
    if local_world == 1 and all(op in out.get("ops", {}) for op in args.rail_split):
        # one rank per node: its one rail is every rank, measured above; not run twice
        out["rails"] = {op: {"0": out["ops"][op]} for op in args.rail_split}
        out["rail_errors"] = {op: {"0": out["op_errors"][op]} for op in args.rail_split
                              if op in out.get("op_errors", {})}
        out["rails_of"] = "ops: one rank per node, the rail is the whole run"
        return out
    # every rank makes every rail's group, in the same order (torch.distributed.new_group)
    rails = [[node * local_world + r for node in range(args.nnodes)] for r in range(local_world)]
    groups = [dist.new_group(ranks) for ranks in rails]
    mine = {}
    for op in args.rail_split:
        rows, _, err = sweep_op(torch, dist, op, args, dev, groups[local_rank], rails[local_rank], use_graph)
        mine[op] = {"rows": rows, "error": err}
    every_rail = [None] * world
    dist.all_gather_object(every_rail, mine)  # node 0's rank r speaks for rail r
    for r in range(local_world):
        for op, res in every_rail[r].items():
            out.setdefault("rails", {}).setdefault(op, {})[str(r)] = res["rows"]
            if res["error"]:
                out.setdefault("rail_errors", {}).setdefault(op, {})[str(r)] = res["error"]
    return out


def worker(local_rank, local_world, args, port, out_path):
    import torch
    import torch.distributed as dist

    world = args.nnodes * local_world
    rank = args.node_rank * local_world + local_rank
    once = os.environ.get("SIGNOFF_ABORT_ONCE")  # tests: rank 1 aborts in the first run
    if once and local_rank == 1 and not os.path.exists(once):
        open(once, "w").close()
        os.abort()
    cuda = args.backend == "nccl"
    # under srun each task may see only its own GPU (--gpus-per-task): index within those seen
    dev = torch.device("cuda", local_rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    kw = {"device_id": dev} if cuda else {}
    timeout = datetime.timedelta(seconds=args.timeout)
    store = dist.TCPStore(args.master_addr, port, world, is_master=False, timeout=timeout)
    dist.init_process_group(args.backend, store=store, rank=rank, world_size=world,
                            timeout=timeout, **kw)
    sys.stderr.write("signoff-event joined rank %d\n" % rank)  # who reached the rendezvous
    REACHED[0] = local_rank == 0
    rows, use_graph = [], cuda and not args.no_graph
    try:
        for nbytes in sizes(args.min_bytes, args.max_bytes, args.factor) if "allreduce" in args.op else ():
            try:
                t, ok = time_size(torch, dist, nbytes, args, dev, rank, world, use_graph)
            except RuntimeError:
                if not use_graph:
                    raise
                use_graph = False  # capture unsupported here: fall back, and say so
                t, ok = time_size(torch, dist, nbytes, args, dev, rank, world, use_graph)
            algbw = nbytes / t / 1e9
            rows.append({"bytes": nbytes, "time_us": round(t * 1e6, 3),
                         "algbw": round(algbw, 3),
                         "busbw": round(algbw * 2 * (world - 1) / world, 3), "correct": ok})
            reached("allreduce", nbytes)
        more = other_ops(torch, dist, args, dev, rank, world, local_rank, local_world,
                         cuda and not args.no_graph)
        if local_rank == 0:
            # gloo across hosts: the connections it holds, and the interface each leaves by
            links = {"links": gloo_links(port)} if not cuda and args.nnodes > 1 else {}
            with open(out_path, "w") as f:
                json.dump({"rows": rows, "graphs": use_graph, **links, **more}, f)
        if not cuda and args.nnodes > 1:  # every rank: no node closes its connections before every
            dist.barrier()  # node read its own (a peer's closed one is no longer ESTABLISHED)
    finally:
        dist.destroy_process_group()


# A channel line, every format NCCL has printed: "Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0/GDRDMA"
# (2.12+: the connection index, [send]/[receive] on NET lines), "Channel 06 : 0[31000] -> 4[31000] via
# NET/Socket/0" (older: bus ids), "Ring 00 : 7 -> 8 [receive] via NET/AWS Libfabric/0" (2.4: no
# device, a plugin's name with a space), "via P2P/direct pointer": the rest of the line is the transport.
CHANNEL = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-F]+\])? -> "
                     r"(\d+)(?:\[[0-9a-fA-F]+\])?(?: \[(?:send|receive)\])? via (.+?)\s*$")


def parse_nccl_log(lines):
    """What NCCL said it used (NCCL_DEBUG=INFO text): transports ({"P2P/CUMEM": [[0, 1], ...],
    "NET/IB/0/GDRDMA": ...}, rank -> rank), the network it loaded ("Using network IB"), the
    interfaces its socket transport uses ("NET/Socket : Using [0]eth1:10.0.0.2<0>"), the MNNVL flag
    of each communicator ("comm 0x.. rank 0 nRanks 8 nNodes 2 ... MNNVL 0"), and the lines kept."""
    found, kept, net = {}, [], {"network": set(), "socket_ifaces": set(), "mnnvl": set()}
    for line in lines:
        m = CHANNEL.search(line)
        if m:
            found.setdefault(m.group(3), set()).add((int(m.group(1)), int(m.group(2))))
            if len(kept) < 40:
                kept.append(line.strip())
            continue
        u = re.search(r"Using network (.+?)\s*$", line)
        if u:
            net["network"].add(u.group(1))
        if "NET/Socket : Using" in line:
            net["socket_ifaces"].update(re.findall(r"\[\d+\]([^:\s]+):", line))
        mn = re.search(r"nNodes \d+ .*\bMNNVL (\d)\b", line)
        if mn:
            net["mnnvl"].add(int(mn.group(1)))
        if re.search(r"NCCL version|NVLS|MNNVL|Using network|NET/\w+ : Using|Connected all rings|comm 0x",
                     line) and len(kept) < 40:
            kept.append(line.strip())
    return ({k: sorted(v) for k, v in found.items()}, {k: sorted(v) for k, v in net.items()}, kept)


def nccl_transports(logdir):
    """What NCCL reported it used between ranks ('via P2P/CUMEM', 'via SHM', 'via NET/IB'), read
    from every rank's NCCL_DEBUG_FILE: (transports, network, lines) as parse_nccl_log."""
    lines = []
    for name in sorted(os.listdir(logdir)):
        if name.startswith("nccl."):
            with open(os.path.join(logdir, name), errors="replace") as f:
                lines.extend(f)
    return parse_nccl_log(lines)


def _addr(hexaddr):
    """/proc/net/tcp's address: IPv4 one little-endian word, IPv6 four."""
    raw = bytes.fromhex(hexaddr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    ip = socket.inet_ntop(socket.AF_INET6, words)
    return ip[7:] if ip.startswith("::ffff:") and "." in ip else ip  # an IPv4-mapped peer


def own_addresses():
    """Address -> the interface that holds it (IPv4 by SIOCGIFADDR, IPv6 from if_inet6)."""
    import fcntl
    import struct
    out = {}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                req = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
                out[socket.inet_ntoa(req[20:24])] = name
            except OSError:
                pass
    finally:
        s.close()
    try:
        with open("/proc/self/net/if_inet6") as f:
            for row in f:
                p = row.split()
                out[socket.inet_ntop(socket.AF_INET6, bytes.fromhex(p[0]))] = p[5]
    except OSError:
        pass
    return out


def egress(local, remote, holds):
    """The interface the kernel sends local -> remote by (`ip route get`: a route may send a
    data address's traffic out another interface); the one holding `local` where ip is missing."""
    try:
        out = subprocess.run(["ip", "-o", "route", "get", remote, "from", local], capture_output=True,
                             text=True, timeout=5).stdout
        m = re.search(r"\bdev (\S+)", out)
        if m:
            return m.group(1)
    except (OSError, subprocess.SubprocessError):
        pass
    return holds


def gloo_links(store_port):
    """This process's TCP connections to other hosts: gloo's pairs (the store's connection, to
    store_port, left out), each with the local and remote address and the interface it leaves by."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink("/proc/self/fd/" + fd))
        except OSError:
            continue
        if m:
            inodes.add(m.group(1))
    own, links = own_addresses(), []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as f:
                rows = [r.split() for r in f.readlines()[1:]]
        except OSError:
            continue
        for r in rows:
            if len(r) < 10 or r[3] != "01" or r[9] not in inodes:  # 01: ESTABLISHED
                continue
            (lh, _lp), (rh, rp) = r[1].split(":"), r[2].split(":")
            local, remote = _addr(lh), _addr(rh)
            if int(rp, 16) == store_port or remote in own or remote.startswith("127."):
                continue
            links.append({"local": local, "remote": remote, "holds": own.get(local),
                          "iface": egress(local, remote, own.get(local))})
    return links


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=parse_size, default=parse_size("1M"))
    ap.add_argument("--max-bytes", type=parse_size, default=parse_size("8G"))
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    ap.add_argument("--nprocs", type=int, default=0, help="ranks; default one per GPU (gloo: 2)")
    ap.add_argument("--no-graph", action="store_true", help="eager loop instead of CUDA graphs")
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--master-addr", default="127.0.0.1", help="node 0's address on the measured net")
    ap.add_argument("--master-port", type=int, default=0, help="0: any free port (single node)")
    ap.add_argument("--timeout", type=int, default=120, help="rendezvous/collective timeout, s")
    ap.add_argument("--op", type=ops_list, default=["allreduce"],
                    help="collectives to measure, comma-separated, back to back: %s" % ",".join(OPS))
    ap.add_argument("--rail-split", type=ops_list, default=[],
                    help="across nodes: these collectives again inside each rail (the ranks of one "
                         "local index on every node: nccl-tests' NCCL_TESTS_SPLIT=\"MOD <ranks per node>\")")
    ap.add_argument("--op-size", type=parse_size, default=0,
                    help="the --op collectives besides the all-reduce (and those of --rail-split) at this "
                         "one size, not over the sweep: across nodes, the size judged")
    ap.add_argument("--slurm", action="store_true",
                    help="this process is one rank: a task of an srun step (SLURM_PROCID, SLURM_LOCALID, "
                         "SLURM_NTASKS, SLURM_NNODES, SLURM_NODEID); the store on task 0")
    args = ap.parse_args()
    doc = {"probe": "allreduce", "argv": sys.argv[1:],
           "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    got = probelib.torch_ranks(doc, args)
    if got is None:
        print(json.dumps(doc))
        return 1
    torch, mp, gpus, world = got
    rank = 0
    if args.slurm:  # srun placed the ranks: block layout, the same count on every node
        env = os.environ
        rank, local = int(env["SLURM_PROCID"]), int(env["SLURM_LOCALID"])
        args.nnodes, args.node_rank = int(env["SLURM_NNODES"]), int(env["SLURM_NODEID"])
        world = int(env["SLURM_NTASKS"]) // args.nnodes
        if rank != args.node_rank * world + local:
            doc["error"] = ("srun task %d is local rank %d of node %d: not a block layout of %d tasks "
                            "per node" % (rank, local, args.node_rank, world))
            print(json.dumps(doc))
            return 1
    doc.update(backend=args.backend, world_size=world * args.nnodes, local_ranks=world, gpus=gpus,
               nnodes=args.nnodes, node_rank=args.node_rank, torch=torch.__version__)
    if args.backend == "nccl":
        doc["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    logdir = tempfile.mkdtemp(prefix="allreduce.", dir=".")
    out_path = os.path.join(logdir, "rows.json")
    probelib.own_temp(logdir)
    if args.backend == "nccl":
        # Ask NCCL which transport it picks; the user's own NCCL_* settings stay in force.
        os.environ.setdefault("NCCL_DEBUG", "INFO")
        os.environ.setdefault("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET,GRAPH,ENV")
        os.environ["NCCL_DEBUG_FILE"] = os.path.join(os.path.abspath(logdir), NCCL_LOG)
    sys.stderr.write("signoff-event started node %d\n" % args.node_rank)
    sys.stderr.flush()
    t0 = time.time()
    cot = probelib.load_cotenants() if args.backend == "nccl" else None
    # before the ranks start: they inherit its mark (under srun: the step's, every task alike)
    first = not args.slurm or os.environ.get("SLURM_LOCALID") == "0"
    seen = cot.watch(1.0, "all-reduce") if cot and first else None
    store = None
    try:
        socks = []  # each listening socket lives as long as the process: the store holds its fd
        for attempt in (1, 2):
            port, sock = args.master_port, None
            if rank == 0 and args.node_rank == 0:
                sock = probelib.listen(args.master_addr, port)
                socks.append(sock)
                port = sock.getsockname()[1]
            if args.slurm:
                store = probelib.serve(sock, args.master_addr, world * args.nnodes, args.timeout)
                worker(int(os.environ["SLURM_LOCALID"]), world, args, port, out_path)
                break
            try:
                store = probelib.serve(sock, args.master_addr, world * args.nnodes, args.timeout)
                mp.start_processes(worker, args=(world, args, port, out_path), nprocs=world,
                                   start_method=probelib.start_method(args.backend, gpus))
                break
            except mp.ProcessExitedException as exc:
                # as probe_train: gloo's C++ threads can abort a CPU rank (pytorch/gloo#514): a
                # software crash, not the node's; once more on one node, and said so. Never NCCL.
                if attempt == 2 or args.backend != "gloo" or args.nnodes != 1 or exc.signal_name != "SIGABRT":
                    raise
                doc["restarted"] = ("rank %d aborted (%s) in the first run: gloo's own crash "
                                    "(pytorch/gloo#514), run once more" % (exc.error_index, exc.signal_name))
                sys.stderr.write("signoff-event restarted: %s\n" % doc["restarted"])
                store = None
        if os.path.exists(out_path) or not args.slurm:  # under srun: local rank 0 has the rows
            with open(out_path) as f:
                doc.update(json.load(f))
    except Exception as exc:  # noqa: BLE001
        doc["error"] = "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])
        doc["traceback"] = traceback.format_exc()[-2000:]
    del store
    doc["elapsed_s"] = round(time.time() - t0, 2)
    doc.update(seen.stop() if seen else {})
    if args.backend == "nccl":
        doc["transports"], doc["nccl_net"], doc["nccl_log"] = nccl_transports(logdir)
    shutil.rmtree(logdir, ignore_errors=True)  # run by hand, nothing is left in the cwd
    print(json.dumps(doc))
    return 1 if "error" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
