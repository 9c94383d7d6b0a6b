"""GPUDirect RDMA per rail, the controller: every host sends to the next (network's ring of pairs),
pairs that share no host at once, and inside a pair its rails one after another (each rail's own
figure, not a share of the node's): GPU i of the client with its closest NIC to GPU i of the
server with its own, ib_write_bw --use_cuda on both ends (probe_gdr.py, shipped as gdr.py)."""

from __future__ import annotations

import time

from signoff.fleet import Fleet, ProbeError, threads
from signoff.network.judge import data_address, pair_id, ring_pairs, rounds
from signoff.rails.judge import NO_CUDA, pairs_of_rails, parse_perftest, rails_of
from signoff.transport import HostUnreachable

DURATION_S = 5  # per rail: ib_write_bw -D, as the host pairs' default (network.judge.PAIR_DURATION_S)


class Rails:
    """Runs and caches the rails of one session: {client host: its pair's result or error}."""

    def __init__(self, fleet: Fleet, port: int = 29410):
        self.fleet, self.port = fleet, port
        self._caps: dict = {}
        self._done: dict | None = None

    def caps(self, name: str) -> dict:
        """ib_write_bw's presence and CUDA build on `name` (gdr.py caps), once."""
        if name not in self._caps:
            self._caps[name] = self.fleet.sessions[name].probe("gdr", "caps", timeout=60)
        return self._caps[name]

    def address(self, name: str) -> str:
        pf = self.fleet.facts(name).get("preflight") or {}
        netinfo = {"ethernet": pf.get("ethernet") or [], "infiniband": pf.get("infiniband") or []}
        return data_address(name, netinfo, self.fleet.sessions[name].host.data_iface)

    def of(self, host: str, duration: int = DURATION_S, dmabuf: bool = False) -> dict:
        """`host`'s rails as the client of its ring pair: {"pair", "server", "rails": [...]} with each
        rail's both ends' perftest documents, or {"no_cuda": hosts} where perftest lacks CUDA.
        Raises the pair's error (a host down, no ib_write_bw, no address)."""
        if self._done is None:
            self._done = {}
            self.fleet.settle()  # no other family's traffic beside the rails
            pairs = ring_pairs(list(self.fleet.names))
            say, t0 = self.fleet.progress or (lambda line, final: None), time.monotonic()
            for i, rnd in enumerate(rounds(pairs)):
                say(f"rails: round {i + 1}, {len(rnd)} pair(s) at once, each pair's rails one after another",
                    False)
                with threads(len(rnd)) as pool:
                    for (a, _), res in zip(rnd, pool.map(lambda p: self._pair(*p, duration, dmabuf), rnd)):
                        self._done[a] = res
            say(f"rails: {len(pairs)} pair(s) measured in {time.monotonic() - t0:.0f} s", True)
        res = self._done.get(host)
        if res is None:
            raise ProbeError(f"{host}: no rail pair (one host)")
        if isinstance(res, Exception):
            raise res
        return res

    def _pair(self, a: str, b: str, duration: int, dmabuf: bool):
        try:
            rails = {}
            for h in (a, b):
                rails[h], na, err = rails_of(self.fleet.facts(h))
                if na or err:
                    raise ProbeError(f"{h}: {na or err}")
            caps = {h: self.caps(h) for h in (a, b)}
            missing = [h for h in (a, b) if not caps[h].get("ib_write_bw")]
            if missing:
                raise ProbeError(f"{pair_id(a, b)}: ib_write_bw (perftest) is not installed on "
                                 f"{', '.join(missing)}")
            no_cuda = [h for h in (a, b) if not caps[h].get("cuda")]
            if no_cuda:  # the test falls back to NCCL's channel lines
                return {"pair": pair_id(a, b), "server": b, "no_cuda": no_cuda, "why": NO_CUDA,
                        "rails": [{"a": x, "b": y} for x, y in pairs_of_rails(rails[a], rails[b])]}
            use_dmabuf = dmabuf and all(caps[h].get("dmabuf") for h in (a, b))
            dst = self.address(b)
            out = [self._rail(a, b, x, y, dst, duration, use_dmabuf, i)
                   for i, (x, y) in enumerate(pairs_of_rails(rails[a], rails[b]))]
            return {"pair": pair_id(a, b), "server": b, "rails": out, "dmabuf": use_dmabuf}
        except (ProbeError, HostUnreachable) as exc:
            return exc

    def _rail(self, a, b, x, y, dst, duration, dmabuf, i) -> dict:
        def args(r):
            return ["--gpu", str(r["gpu"]), "--device", r["nic"], "--ib-port", str(r["port"]), "--port",
                    str(self.port + i), "--duration", str(duration), *(["--dmabuf"] if dmabuf else [])]
        rail = {"a": x, "b": y}
        with threads(1) as pool:
            server = pool.submit(self.fleet.sessions[b].probe, "gdr", "server", *args(y),
                                 timeout=duration + 90)
            client = self.fleet.sessions[a].probe("gdr", "client", "--connect", dst, *args(x),
                                                  timeout=duration + 90)
            served = server.result()
        for end, doc in (("client", client), ("server", served)):
            rail[end] = {**parse_perftest(doc.get("output") or ""), "cmd": doc.get("cmd"),
                         "error": doc.get("error")}
        rail["gbps"] = client.get("gbps")
        err = client.get("error") or served.get("error")
        if err:
            rail["error"] = err
        return rail
