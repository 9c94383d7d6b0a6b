"""Inter-node network: data interfaces, host pairs in rounds, the multi-node all-reduce and
its bisection to the slow host or link."""

from __future__ import annotations

import re
from concurrent.futures import FIRST_COMPLETED, wait

from signoff.fleet import Fleet, HostSession, ProbeError, last_document, parse_probe_output, threads
from signoff.transport import HostUnreachable


def ring_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Each host sends to the next; two hosts make one pair, not two."""
    if len(names) < 2:
        return []
    if len(names) == 2:
        return [(names[0], names[1])]
    return [(names[i], names[(i + 1) % len(names)]) for i in range(len(names))]


def all_pairs(names: list[str]) -> list[tuple[str, str]]:
    """Every pair once, listed round by round (the circle method of a round-robin
    tournament), so that rounds() packs them into N-1 rounds (N even) or N (N odd)."""
    slots: list = list(range(len(names))) + ([None] if len(names) % 2 else [])
    out = []
    for _ in range(len(slots) - 1):
        for i in range(len(slots) // 2):
            a, b = slots[i], slots[-1 - i]
            if a is not None and b is not None:
                out.append((names[min(a, b)], names[max(a, b)]))
        slots = [slots[0], slots[-1], *slots[1:-1]]
    return out


# Default cap of --net-pairs all: 64 hosts' pairs. Each pair is a check of its own (a test, a
# record, a row), so all pairs of 1,000 hosts would be half a million of them.
NET_PAIRS_MAX = 64 * 63 // 2
PAIR_DURATION_S = 5  # net_pair_bandwidth.duration where the profile sets none


def all_pairs_cost(hosts: int) -> tuple[int, int]:
    """(pairs, rounds) of --net-pairs all: each host is in N-1 pairs, one per round."""
    return hosts * (hosts - 1) // 2, 0 if hosts < 2 else hosts - 1 + hosts % 2


def rounds(pairs: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Pairs that share no host run in the same round: a ring of N costs 2-3 rounds, not N."""
    out: list[list[tuple[str, str]]] = []
    busy: list[set[str]] = []  # the hosts of each round
    for p in pairs:
        for r, b in zip(out, busy):
            if not b & set(p):
                r.append(p)
                b.update(p)
                break
        else:
            out.append([p])
            busy.append(set(p))
    return out


def pair_id(a: str, b: str) -> str:
    return f"{a}->{b}"


def data_port(netinfo: dict, iface: str) -> dict | None:
    return next((p for p in netinfo["ethernet"] if p["name"] == iface), None)


def data_address(host: str, netinfo: dict, iface: str | None) -> str:
    """The IPv4 address of the interface the inventory names; never guessed."""
    if not iface:
        raise ProbeError(f"{host}: no data interface named: set data_iface for this host in the "
                         f"inventory (the network is measured only on an interface you name)")
    port = data_port(netinfo, iface)
    if port is None:
        names = ", ".join(p["name"] for p in netinfo["ethernet"])
        raise ProbeError(f"{host}: data_iface {iface} does not exist (interfaces: {names})")
    if not port["addresses"]:
        raise ProbeError(f"{host}: data_iface {iface} has no IPv4 address")
    return port["addresses"][0]


# A host pair cannot carry more than its line rate; a fraction above it means the line rate
# or the measurement is wrong (a virtual interface's nominal speed, another card measured).
# 5 % allows for the tools' own timing over a run of a few seconds.
LINE_RATE_TOLERANCE = 1.05


def rdma_port(netinfo: dict, iface: str) -> dict | None:
    """The InfiniBand/RoCE port behind the data interface (netinfo maps netdev -> card)."""
    port = data_port(netinfo, iface)
    if not port or not port.get("ib_device"):
        return None
    return next((p for p in netinfo["infiniband"]
                 if p["device"] == port["ib_device"] and p["port"] == port["ib_port"]), None)


def suspects(pair_ok: dict[tuple[str, str], bool]) -> tuple[list[str], list[tuple[str, str]]]:
    """From pairwise verdicts: hosts all of whose pairs failed, and failing pairs not
    explained by such a host (a bad link between two otherwise good hosts)."""
    hosts = {h for p in pair_ok for h in p}
    bad_hosts = sorted(h for h in hosts
                       if all(not ok for p, ok in pair_ok.items() if h in p)
                       and any(h in p for p in pair_ok))
    bad_links = [p for p, ok in pair_ok.items() if not ok and not set(p) & set(bad_hosts)]
    return bad_hosts, bad_links


class Network:
    """Runs and caches the network measurements of one session."""

    def __init__(self, fleet: Fleet, port: int = 29400):
        self.fleet, self.port = fleet, port
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
        """The profile's tool; auto: iperf3 where both hosts have it, else the built-in probe.
        A named tool is never swapped for another (TCP would be judged against an RDMA rate)."""
        have = {h: self.info(h)["tools"] for h in (a, b)}
        if want in ("iperf3", "ib_write_bw"):
            missing = [h for h, t in have.items() if not t[want]]
            if missing:
                raise ProbeError(f"{pair_id(a, b)}: {want} is not installed on {', '.join(missing)} "
                                 f"(the profile's net_pair_bandwidth.tool)")
            return want
        return "iperf3" if want == "auto" and all(t["iperf3"] for t in have.values()) else "builtin"

    # --- host pairs ---------------------------------------------------------------
    def pair(self, a: str, b: str, pairs: list, streams: int, duration: int, tool: str) -> dict:
        if self._pairs is None:
            self._pairs = {}
            self.fleet.settle()  # no per-host measurement still running beside the pairs
            for rnd in rounds(pairs):
                with threads(len(rnd)) as pool:
                    done = pool.map(lambda p: self._measure(*p, streams, duration, tool), rnd)
                    for p, res in zip(rnd, done):
                        self._pairs[p] = res
        res = self._pairs[(a, b)]
        if isinstance(res, Exception):
            raise res
        return res

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

    def allreduce(self, names: list[str], lo: str, hi: str, env: dict, timeout: int) -> dict:
        """All hosts at once, rendezvous on the first; a failure kills every host's ranks."""
        key = (tuple(names), lo, hi)
        if key in self._collective:
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
        if self.fleet.slurm:  # one srun step, its tasks the ranks
            result = self._srun_allreduce(names, lo, hi, env, timeout, master, port)
            self._collective[key] = result
            return result

        def one(rank_name):
            rank, name = rank_name
            s = self.session(name)
            # one rank per GPU; one gloo rank on a CPU-only host
            nproc = [] if self.fleet.facts(name)["nvidia"].get("gpus") else ["--nprocs", "1"]
            ifenv = {"GLOO_SOCKET_IFNAME": s.host.data_iface, "NCCL_SOCKET_IFNAME": s.host.data_iface}
            return s.probe_result(
                "allreduce", "--min-bytes", lo, "--max-bytes", hi, "--nnodes", str(len(names)),
                "--node-rank", str(rank), "--master-addr", master, "--master-port", port,
                "--timeout", str(timeout), *nproc, timeout=timeout + 30, env={**ifenv, **env})

        first, killed = None, set()
        with threads(len(names)) as pool:
            futures = {pool.submit(one, rn): rn[1] for rn in enumerate(names)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, timeout=2 if first else None, return_when=FIRST_COMPLETED)
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
        self._collective[key] = result = summarise(outcome, names, first, killed)
        return result


    def _srun_allreduce(self, names, lo, hi, env, timeout, master, port) -> dict:
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
            args = ("--min-bytes", lo, "--max-bytes", hi, "--slurm", "--master-addr", master,
                    "--master-port", port, "--timeout", str(timeout))
            commands[name] = s._command("allreduce", args, {**ifenv, **env}), s.host.python
        outcome, first, killed = job.collective(commands, per_node, timeout + 30)
        result = summarise(outcome, names, first, killed)
        result["launched"] = f"srun: {len(names)} nodes x {per_node} tasks in one step"
        return result


def summarise(outcome: dict, names: list[str], first: str | None = None,
              killed: set | None = None) -> dict:
    """One document for the collective; on failure, name the hosts that caused it:
    unreachable hosts, hosts whose probe never started, hosts whose ranks died of a signal
    we did not send; else, after a timeout, the hosts we stopped that had got least far
    (a hang), or the first host that failed. Hosts stopped after another failed are not
    blamed for it."""
    killed = killed or set()
    states, doc, culprits, progress = {}, None, [], {}
    for name in names:
        r = outcome[name]
        if isinstance(r, (HostUnreachable, ProbeError)):
            states[name] = f"unreachable: {r.cause}" if isinstance(r, HostUnreachable) else str(r)
            culprits.append(name)
            continue
        started, joined = "signoff-event started" in r.stderr, "signoff-event joined" in r.stderr
        progress[name] = started + joined
        reached = ["the probe never started", "never joined the rendezvous", "joined"][progress[name]]
        own = (last_document(r.stdout) or {}).get("error")  # the probe's own words first
        if r.ok:
            doc = doc or parse_probe_output(name, "allreduce", r)
            states[name] = "ok"
        elif name in killed:
            states[name] = f"{reached}; stopped by signoff after {first} failed"
        elif not started:
            states[name] = f"{reached} (exit {r.rc}): {own or r.stderr.strip()[-200:]}"
            culprits.append(name)
        elif r.timed_out:
            states[name] = f"{reached}; killed"
            culprits.append(name)
        else:
            tail = [ln for ln in r.stderr.strip().splitlines()
                    if ln and not ln.startswith("signoff-event")][-1:]
            last = re.sub(r"\s+", " ", own or (tail[0] if tail else f"exit {r.rc}"))[:200]
            states[name] = (f"exit {r.rc} after joining: {last}" if joined
                            else f"exit {r.rc} before joining: {last}")
    if doc and all(v == "ok" for v in states.values()):
        return {"ok": True, "doc": doc, "states": states}
    if not culprits and first:
        timed_out = re.search(r"time[ds]? ?out", states.get(first, ""), re.I)
        if timed_out and killed:  # a hang: the stopped hosts that got least far
            least = min(progress.get(k, 0) for k in killed)
            culprits = sorted(k for k in killed if progress.get(k, 0) == least)
        else:
            culprits = [first]
    return {"ok": False, "started": True, "states": states, "culprits": culprits, "not_run": []}
