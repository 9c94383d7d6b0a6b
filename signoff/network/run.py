"""Inter-node network, the controller: NIC facts on every host at once, host pairs in rounds,
the multi-node all-reduce and its bisection to the slow host or link."""

from __future__ import annotations

import re
import time
from concurrent.futures import FIRST_COMPLETED, wait

from signoff import hostlist, retry
from signoff.fleet import Fleet, HostSession, ProbeError, threads
from signoff.network.judge import (
    PAIR_DURATION_S,
    again_rounds,
    data_address,
    data_port,
    judged,
    node_nics,
    pair_figure,
    pair_id,
    pair_tool,
    rdma_port,
    ring_pairs,
    rounds,
    summarise,
    suspects,
)
from signoff.transport import HostUnreachable
from signoff.units import human_bytes

# what probe_allreduce says on stdout after each size it finished (its reached())
REACHED = re.compile(r"signoff-event reached (\w+) (\d+)$")
LABELS = {"allreduce": "all-reduce", "train": "training step"}
SAY_EVERY_S = 15  # a collective's progress line: at each size reached, else this often

# what probe_allreduce --op / --rail-split add to the all-reduce's document
OTHER_OPS = ("ops", "op_graphs", "op_errors", "rails", "rail_errors", "rails_of")


class Network:
    """Runs and caches the network measurements of one session."""

    def __init__(self, fleet: Fleet, port: int = 29400, ops: tuple = (), pair_ops: tuple = ()):
        """ops: probe_allreduce's --op/--rail-split arguments every all-reduce across nodes adds (the
        collectives beyond it whose checks are selected: plugin.multinode_ops), so one rendezvous and
        one launch (SSH or srun) measures them all; pair_ops: those the bisection's 2-host runs add
        (what names a slow host: the all-to-all and its rails)."""
        self.fleet, self.port, self.ops, self.pair_ops = fleet, port, list(ops), list(pair_ops)
        self._info: dict = {}
        self._pairs: dict | None = None
        self._collective: dict = {}

    def session(self, name: str) -> HostSession:
        return self.fleet.sessions[name]

    def info(self, name: str) -> dict:
        return self.session(name).cached_probe("netinfo", timeout=60)

    def address(self, name: str) -> str:
        return data_address(name, self.info(name), self.session(name).host.data_iface)

    def line_rate_gbps(self, name: str, tool: str = "") -> float | None:
        """The data interface's speed; for ib_write_bw, the rate of its RDMA port."""
        iface = self.session(name).host.data_iface
        if tool == "ib_write_bw":
            return (rdma_port(self.info(name), iface) or {}).get("rate_gbps")
        port = data_port(self.info(name), iface)
        return port["speed_mbps"] / 1000 if port and port.get("speed_mbps") else None

    def line_rates(self, pairs: list, tool: str = "") -> dict[str, float | None]:
        """Every host of the pairs' line rate (line_rate_gbps), None where it cannot be read."""
        out = {}
        for h in dict.fromkeys(h for p in pairs for h in p):
            try:
                out[h] = self.line_rate_gbps(h, tool)
            except (ProbeError, HostUnreachable):
                out[h] = None
        return out

    def rdma_args(self, name: str) -> list[str]:
        """ib_write_bw's --device/--ib-port: the card of the interface measured, never
        perftest's default one."""
        iface = self.session(name).host.data_iface
        port = rdma_port(self.info(name), iface)
        if port is None:
            raise ProbeError(f"{name}: data_iface {iface} has no InfiniBand/RDMA port in "
                             f"/sys/class/infiniband: ib_write_bw cannot measure it")
        return ["--device", port["device"], "--ib-port", str(port["port"])]

    def tool(self, a: str, b: str, want: str) -> str:
        """The profile's tool; auto: ib_write_bw where both data interfaces sit on an RDMA port and
        both hosts have it (the line rate is that port's, and the 0.9 of a derived threshold is an
        ib_write_bw mark), else iperf3 where both hosts have it, else the built-in probe.
        A named tool is never swapped for another (TCP would be judged against an RDMA rate)."""
        have = {h: self.info(h)["tools"] for h in (a, b)}
        rdma = {h: rdma_port(self.info(h), self.session(h).host.data_iface) for h in (a, b)}
        tool, missing = pair_tool(have, rdma, want)
        if missing:
            raise ProbeError(f"{pair_id(a, b)}: {want} is not installed on {', '.join(missing)} "
                             f"(the profile's net_pair_bandwidth.tool)")
        return tool

    def bounds(self, names: list[str], intra) -> dict[str, dict]:
        """Each node's figures for the multi-node all-reduce's node_bound rule (judge.py): its NICs
        (netinfo, every host at once; NCCL's on a GPU host, gloo's data interface on a CPU one) and
        intra(name), its intra-node all-reduce busbw (GB/s, None where it runs one rank)."""
        with threads(len(names)) as pool:
            infos = dict(zip(names, pool.map(self.info, names)))
        return {n: {"nics": node_nics(infos[n], self.session(n).host.data_iface,
                                      bool(self.fleet.facts(n)["nvidia"].get("gpus"))),
                    "intra": intra(n)} for n in names}

    # --- host pairs ---------------------------------------------------------------
    def pair(self, a: str, b: str, pairs: list, t) -> dict:
        """Pair (a, b)'s judged result by threshold `t`: every pair once, then (retry policy) the
        pairs that missed again, up to t's attempts in all, each pass in disjoint rounds."""
        if self._pairs is None:
            args = (t.extra.get("streams", 4), t.extra.get("duration", PAIR_DURATION_S),
                    t.extra.get("tool", "auto"))
            tries: dict = {p: [] for p in pairs}
            self.fleet.settle()  # no per-host measurement still running beside the pairs
            todo, t0, say = rounds(pairs), time.monotonic(), self.fleet.progress or (lambda line, final: None)
            again = ""
            while todo:
                for i, rnd in enumerate(todo, 1):
                    # progress: the round, the time so far against the rounds' own (each pair's
                    # probe is stopped at its duration + 60 s)
                    say(f"host pairs{again}: round {i}/{len(todo)} ({len(rnd)} pairs at once, {args[1]} s "
                        f"each), {time.monotonic() - t0:.0f} s of about {len(todo) * args[1]} s", False)
                    with threads(len(rnd)) as pool:
                        for p, res in zip(rnd, pool.map(lambda p: self._measure(*p, *args), rnd)):
                            tries[p].append(res)
                todo = again_rounds(tries, t)
                if todo:  # the retry policy: which pairs are measured again, and why (one line each)
                    for p in (p for rnd in todo for p in rnd):
                        why = retry.weigh([pair_figure(r, t.unit) for r in tries[p]], t)[1]
                        say(f"host pairs: {pair_id(*p)} {why}", True)
                    again = f", attempt {len(tries[todo[0][0]]) + 1}"
            say(f"host pairs: {len(pairs)} measured in {time.monotonic() - t0:.0f} s", True)
            self._pairs = {p: judged(docs, t) for p, docs in tries.items()}
        res = self._pairs[(a, b)]
        if isinstance(res, Exception):
            raise res
        return res

    def peers(self, figure) -> dict:
        """figure(result) of every pair measured (signoff/outlier.py), by pair id (a->b)."""
        return {pair_id(*p): figure(r) for p, r in (self._pairs or {}).items() if isinstance(r, dict)}

    def _measure(self, a: str, b: str, streams: int, duration: int, tool: str):
        try:
            for h in (a, b):  # a host found dead is this pair's cause; not contacted again
                self.fleet.facts(h)
            src, dst = self.address(a), self.address(b)
            t = self.tool(a, b, tool)
            common = ["--tool", t, "--port", str(self.port), "--streams", str(streams),
                      "--duration", str(duration)]
            rdma = {h: self.rdma_args(h) for h in (a, b)} if t == "ib_write_bw" else {a: [], b: []}
            with threads(1) as pool:
                server = pool.submit(self.session(b).probe, "netpair", "server", "--bind", dst,
                                     *common, *rdma[b], timeout=duration + 60)
                client = self.session(a).probe("netpair", "client", "--connect", dst,
                                               "--bind", src, *common, *rdma[a], timeout=duration + 60)
                served = server.result()
            if "error" in client or "error" in served:
                raise ProbeError(f"{a}->{b}: {client.get('error') or served.get('error')}")
            gbps = served["gbps"] if t == "builtin" else client["gbps"]
            rates = [r for r in (self.line_rate_gbps(a, t), self.line_rate_gbps(b, t)) if r]
            line = min(rates) if rates else None
            return {"gbps": gbps, "tool": t, "streams": streams, "duration": duration,
                    "from": f"{a} {src}", "to": f"{b} {dst}", "line_rate_gbps": line,
                    "fraction": round(gbps / line, 3) if line else None,
                    "cmd": client.get("cmd"),
                    **({"rdma": {h: f"{rdma[h][1]} port {rdma[h][3]}" for h in (a, b)}}
                       if t == "ib_write_bw" else {})}
        except (ProbeError, HostUnreachable) as exc:
            return exc

    # --- multi-node all-reduce --------------------------------------------------
    def dead(self, names: list[str]) -> dict[str, Exception]:
        """Hosts already known to be unusable: their sysinfo failed, or (asked in parallel)
        their data interface has no address. Nothing is started that would wait for them."""
        out = {}
        for name in names:
            try:
                self.fleet.facts(name)
            except (HostUnreachable, ProbeError) as exc:
                out[name] = exc
        live = [n for n in names if n not in out]
        with threads(len(live)) as pool:
            for name, fut in [(n, pool.submit(self.address, n)) for n in live]:
                try:
                    fut.result()
                except (HostUnreachable, ProbeError) as exc:
                    out[name] = exc
        return out

    def allreduce(self, names: list[str], lo: str, hi: str, env: dict, timeout: int,
                  again: bool = False, pair: bool = False) -> dict:
        """All hosts at once, rendezvous on the first; a failure kills every host's ranks.
        again: run it anew (the retry policy), not the cached result; pair: a bisection's 2-host run."""
        base = ["--min-bytes", lo, "--max-bytes", hi]
        ops = self.pair_ops if pair else self.ops
        if not (again and ops):
            return self.collective(names, "allreduce", [*base, *ops], env, timeout, again)
        # the retry measures the all-reduce again, the figure that missed: the other collectives of
        # the first run stay (they are judged once, never retried)
        first = self.collective(names, "allreduce", [*base, *ops], env, timeout)
        res = self.collective(names, "allreduce", base, env, timeout, again=True)
        if res["ok"] and first.get("ok"):
            res = {**res, "doc": {**res["doc"], **{k: v for k, v in first["doc"].items() if k in OTHER_OPS}}}
        self._collective[self.key(names, "allreduce", [*base, *ops], env)] = res
        return res

    @staticmethod
    def key(names, probe, args, env) -> tuple:
        return (tuple(names), probe, tuple(args), tuple(sorted(env.items())))  # NVLS/MNNVL off: its own run

    def collective(self, names: list[str], probe: str, args: list[str], env: dict, timeout: int,
                   again: bool = False) -> dict:
        """Probe `probe` (with probe_allreduce's rendezvous arguments: --nnodes, --node-rank,
        --master-addr, --master-port, --timeout, --nprocs) on every host at once, as allreduce()."""
        key = self.key(names, probe, args, env)
        if key in self._collective and not again:
            return self._collective[key]
        dead = self.dead(names)
        if dead:  # never started without them: the others are not run, not blamed
            states = {n: (f"not run because of {', '.join(dead)}" if n not in dead else
                          f"unreachable: {dead[n].cause}" if isinstance(dead[n], HostUnreachable)
                          else str(dead[n])) for n in names}
            self._collective[key] = {"ok": False, "started": False, "states": states,
                                     "culprits": list(dead), "not_run": [n for n in names if n not in dead]}
            return self._collective[key]
        master = self.address(names[0])
        port = str(self.port + 1)
        self.fleet.settle()
        outcome: dict = {}
        if self.fleet.slurm and probe == "allreduce":  # one srun step, its tasks the ranks
            result = self._srun_allreduce(names, args, env, timeout, master, port)
            self._collective[key] = result
            return result

        reached: dict[str, tuple[str, int]] = {}  # host -> the (op, size) its ranks last finished
        sweep = Sweep(probe, args, names, timeout, self.fleet.progress)

        def one(rank_name):
            rank, name = rank_name
            s = self.session(name)
            # one rank per GPU; one gloo rank on a CPU-only host
            nproc = [] if self.fleet.facts(name)["nvidia"].get("gpus") else ["--nprocs", "1"]
            ifenv = {"GLOO_SOCKET_IFNAME": s.host.data_iface, "NCCL_SOCKET_IFNAME": s.host.data_iface}
            ranked = (*args, "--nnodes", str(len(names)), "--node-rank", str(rank), "--master-addr",
                      master, "--master-port", port, "--timeout", str(timeout), *nproc)

            def said(line):  # streamed: the sweep's progress on the terminal while it runs
                if m := REACHED.match(line.strip()):
                    reached[name] = (m[1], int(m[2]))
            # as probe_result(), its stdout streamed (signoff/stream.py)
            return s.t.run_stream(s._command(probe, ranked, {**ifenv, **env}), timeout + 30, said)

        first, killed = None, set()
        with threads(len(names)) as pool:
            futures = {pool.submit(one, rn): rn[1] for rn in enumerate(names)}
            pending = set(futures)
            while pending:
                sweep.say(reached, final=False)
                done, pending = wait(pending, timeout=2 if first else 1, return_when=FIRST_COMPLETED)
                for fut in done:
                    name = futures[fut]
                    try:
                        r = fut.result()
                        outcome[name] = r
                        failed = not r.ok
                    except (HostUnreachable, ProbeError) as exc:
                        outcome[name], failed = exc, True
                    if failed and first is None:
                        first = name
                # Don't let the survivors wait out their timeout: kill their ranks, again
                # while they run (a rank may start after the first kill).
                for fut in pending if first else ():
                    try:
                        if self.session(futures[fut]).kill_probes():
                            killed.add(futures[fut])
                    except HostUnreachable:
                        pass
        sweep.say(reached, final=True)
        result = summarise(outcome, names, first, killed, probe)
        if not result["ok"] and sweep.overran(outcome, first, killed):
            # every rank joined and was still at it when the timeout came: the sweep is longer
            # than the timeout allows, no host's fault (each said the same size reached)
            said = sweep.overrun(reached)
            result = {**result, "culprits": [], "timeout": said,
                      "states": {n: f"joined; {sweep.where(reached.get(n))}; stopped at the timeout"
                                 for n in names}}
        self._collective[key] = result
        return result

    def pairwise(self, names, size: str, env, timeout) -> dict:
        """Every ring pair's all-reduce of `size` alone (disjoint pairs at once; cached), with the
        collectives of self.pair_ops: {(a, b): the run's result}."""
        out = {}
        # an all-reduce of two hosts is the same both ways: each unordered pair once
        for rnd in rounds(list({frozenset(p): p for p in ring_pairs(names)}.values())):
            with threads(len(rnd)) as pool:
                runs = pool.map(lambda p: self.allreduce(list(p), size, size, env, timeout, pair=True), rnd)
                out.update(zip(rnd, runs))
        return out

    def bisect(self, names, t, env, timeout, figure=None, ok=None) -> dict:
        """Re-measure every ring pair (disjoint pairs at once) and name the slow host or link.
        figure(pair, run's doc): the figure judged (default: the all-reduce's busbw), None where the
        pair has none; ok(pair, figure): whether it passes (default: t.ok); t.extra["size"]: the size."""
        figure = figure or (lambda p, doc: doc["rows"][0]["busbw"])
        pair_bw = {p: figure(p, r["doc"]) if r["ok"] else None
                   for p, r in self.pairwise(names, t.extra["size"], env, timeout).items()}
        ok = ok or (lambda p, bw: t.ok(bw))
        hosts, links = suspects({p: bw is not None and ok(p, bw) for p, bw in pair_bw.items()})
        return {"pairs": {pair_id(*p): bw for p, bw in pair_bw.items()},
                "slow_hosts": hosts, "slow_links": [pair_id(*p) for p in links]}

    def _srun_allreduce(self, names, args, env, timeout, master, port) -> dict:
        """The multi-node all-reduce as one srun step: a task per GPU of the allocation (per GPU the
        sysinfo saw where the job asked for none; one gloo rank on a CPU-only node), ranks from
        SLURM_PROCID/SLURM_LOCALID/SLURM_NTASKS, the store on the first node's data address."""
        job = self.fleet.slurm
        per_node = job.gpus_per_node() or min(len(self.fleet.facts(n)["nvidia"].get("gpus") or [1])
                                               for n in names)
        commands = {}
        for name in names:
            s = self.session(name)
            ifenv = {"GLOO_SOCKET_IFNAME": s.host.data_iface, "NCCL_SOCKET_IFNAME": s.host.data_iface}
            ranked = (*args, "--slurm", "--master-addr", master, "--master-port", port,
                      "--timeout", str(timeout))
            commands[name] = s._command("allreduce", ranked, {**ifenv, **env}), s.host.python
        outcome, first, killed = job.collective(commands, per_node, timeout + 30)
        result = summarise(outcome, names, first, killed)
        result["launched"] = f"srun: {len(names)} nodes x {per_node} tasks in one step"
        return result


class Sweep:
    """A collective's progress while it runs (the sizes its ranks said they finished, the time
    against its timeout) and, when every rank overran the timeout alike, what to do about it."""

    def __init__(self, probe: str, args: list[str], names: list[str], timeout: int, progress):
        self.probe, self.names, self.timeout, self.progress = probe, names, timeout, progress
        lo, hi = (args[args.index(k) + 1] if k in args else None for k in ("--min-bytes", "--max-bytes"))
        self.span = (f"{lo}-{hi} sweep" if lo != hi else f"{hi} all-reduce") if hi else f"{probe} run"
        self.what = f"{LABELS.get(probe, probe)} over {hostlist.fold(names)}"
        sweeps = probe == "allreduce" and lo != hi
        self.hint = "raise it or shorten multinode_allreduce_busbw.sweep" if sweeps else "raise it"
        # a measurement again (the retry policy): which attempt and why, before its own progress
        self.attempt = retry.attempt()
        self.t0 = time.monotonic()
        self.last: tuple = (None, -SAY_EVERY_S)

    def at(self, reached: dict):
        """The (op, size) the ranks last finished: the first host's (a collective's ranks go
        in step), else any host's."""
        return reached.get(self.names[0]) or next(iter(reached.values()), None)

    @staticmethod
    def where(at) -> str:
        if at is None:
            return "no size finished"
        op, nbytes = at
        return f"reached {human_bytes(nbytes)}" + ("" if op == "allreduce" else f" of the {op} after it")

    def say(self, reached: dict, final: bool) -> None:
        """The progress line: each new size reached, else every SAY_EVERY_S (the terminal keeps
        one line in place; a log gets these lines)."""
        if self.progress is None:
            return
        now = time.monotonic() - self.t0
        at = self.at(reached)
        if not final and at == self.last[0] and now - self.last[1] < SAY_EVERY_S:
            return
        self.last = (at, now)
        which, _, why = (self.attempt or "").partition(": ")  # 'attempt 2 of 3 (attempt 1 read ...)'
        again = f", {which} ({why})" if self.attempt else ""
        self.progress(f"{self.what}{again}: {self.span}, {self.where(at)}, {now:.0f} s of "
                      f"--collective-timeout {self.timeout} s", final)

    def overran(self, outcome: dict, first, killed: set) -> bool:
        """Whether every rank joined and the first to end was stopped by the timeout (the others
        with it, or stopped by us right after): no host ended it."""
        results = [outcome.get(n) for n in self.names]
        if first is None or any(r is None or isinstance(r, Exception) for r in results):
            return False
        if not getattr(outcome[first], "timed_out", False):
            return False
        return all("signoff-event joined" in (r.stderr or "") and (r.timed_out or n in killed)
                   for n, r in zip(self.names, results))

    def overrun(self, reached: dict) -> str:
        at = self.at(reached)
        return (f"did not finish the {self.span} within --collective-timeout {self.timeout} s, "
                f"{self.where(at)}: {self.hint}")
