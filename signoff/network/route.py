"""Which transport the multi-node all-reduce's traffic between nodes took, against what the class
promises (criterion multinode_transport). Pure: each host's probe document in, verdict out.

NCCL says it in its NCCL_DEBUG=INFO channel lines (probe_allreduce.parse_nccl_log): "via NET/IB/0",
"via NET/Socket/0", "via P2P/MNNVL" (P2P across the trays of a multi-node NVLink domain: NVIDIA/nccl
src/transport/p2p.cc). gloo says nothing: its TCP connections and the interface each leaves by are
read from the rank's own sockets (probe_allreduce.gloo_links)."""

from __future__ import annotations

import re

# What a site's environment may have steered NCCL with, named in a failure's cause (not
# NCCL_SOCKET_IFNAME: the controller sets it to the data interface, network/run.py)
STEERING = ("NCCL_NET", "NCCL_IB_DISABLE", "NCCL_IB_HCA", "NCCL_MNNVL_ENABLE", "NCCL_CUMEM_ENABLE",
            "NCCL_NET_PLUGIN")
# What each value of the threshold expects, said in the check's "expected"
EXPECTED = {
    "NET": "NCCL's network plugin over RDMA (NET/IB, RoCE, EFA) between every pair of nodes, "
           "never NET/Socket",
    "MNNVL": "P2P/MNNVL (NVLink across the trays of one NVLink domain) between every pair of nodes",
    "data_iface": "the inventory's data interface (gloo's connections, NCCL's sockets) or NCCL over RDMA",
}
CAUSES = {
    "NET": "NCCL found no RDMA device or plugin it could use, and fell back to TCP sockets: no "
           "InfiniBand/RoCE device visible (rdma-core/libibverbs missing, the container without "
           "/dev/infiniband), the EFA plugin (aws-ofi-nccl) not found, or NCCL_IB_DISABLE / NCCL_NET set",
    "MNNVL": "NCCL did not enable multi-node NVLink (its log says MNNVL 0): a tray outside the domain or "
             "partition, GPU fabric registration not complete, no IMEX channel (/dev/nvidia-caps-imex-"
             "channels), NCCL_MNNVL_ENABLE=0, or NCCL_CUMEM_ENABLE=0 (MNNVL needs cuMem fabric handles: "
             "vllm-project/vime pull 103)",
    "data_iface": "a route sends the traffic to the peers' data addresses out another interface, or the "
                  "collective bound another interface (GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME overridden)",
}


def kind(via: str) -> str:
    """A channel line's transport, as the criterion names it: MNNVL, P2P, SHM, NET/<plugin>
    (NET/IB, NET/IBext_v8, NET/AWS Libfabric, NET/Socket), else the text itself."""
    if via.startswith("P2P/MNNVL"):
        return "MNNVL"
    if via.startswith(("P2P", "SHM")):
        return via.split("/")[0]
    m = re.match(r"NET/(.+?)/\d", via)
    return f"NET/{m.group(1)}" if m else via


def rdma(k: str) -> bool:
    """NCCL's network plugin over an RDMA fabric (IB, RoCE through NET/IB, EFA), not its sockets."""
    return k.startswith("NET/") and k != "NET/Socket"


def between_nodes(doc: dict) -> dict[str, list[tuple[int, int]]]:
    """The channel edges of one host's document whose ranks sit on different nodes (rank r on
    node r // local_ranks: probe_allreduce's block layout), by transport kind."""
    per = doc.get("local_ranks") or 1
    out: dict[str, set] = {}
    for via, edges in (doc.get("transports") or {}).items():
        for a, b in edges:
            if a // per != b // per:
                out.setdefault(kind(via), set()).add((a, b))
    return {k: sorted(v) for k, v in out.items()}


def _edges(pairs) -> str:
    pairs = list(pairs)
    more = f" and {len(pairs) - 4} more" if len(pairs) > 4 else ""
    return ", ".join(f"{a}->{b}" for a, b in pairs[:4]) + more


def judge(expected: str, docs: dict[str, dict], ifaces: dict[str, str | None],
          one_domain: bool = True) -> dict:
    """The verdict on every host's document of one run: {"measured": the transports seen between
    nodes, "bad": what broke the promise, host by host, "used": host -> kind -> edges, "error": why
    it cannot be judged (nothing recorded), "cause"}. expected: NET, MNNVL (one_domain False: the
    run spans more GPUs than the domain holds, NET between domains is then allowed) or data_iface."""
    used, bad, seen, errors = {}, [], set(), []
    for host, doc in docs.items():
        if doc.get("backend") == "gloo":
            links = doc.get("links")
            if links is None:
                errors.append(f"{host}: gloo's connections were not read")
                continue
            if not links:
                errors.append(f"{host}: gloo held no connection to another host")
                continue
            links = [{**ln, "iface": ln.get("iface") or "unknown"} for ln in links]
            by = sorted({ln["iface"] for ln in links})
            used[host] = {f"gloo/TCP over {i}": [ln["remote"] for ln in links if ln["iface"] == i]
                          for i in by}
            seen |= {f"gloo/TCP over {'the data interface' if i == ifaces.get(host) else i}" for i in by}
            if expected != "data_iface":
                bad.append(f"{host}: gloo over TCP sockets ({', '.join(by)}), not {expected}")
                continue
            for ln in links:
                if ln["iface"] != ifaces.get(host):
                    held = f" (its address {ln['local']} is {ln['holds']}'s)" if ln.get("holds") else ""
                    bad.append(f"{host}: gloo's connection to {ln['remote']} leaves by {ln['iface']}{held}, "
                               f"not the data interface {ifaces.get(host)}")
            continue
        inter = between_nodes(doc)
        if not inter:
            errors.append(f"{host}: NCCL printed no channel line between nodes (NCCL_DEBUG output missing)")
            continue
        used[host] = inter
        seen |= set(inter)
        net = doc.get("nccl_net") or {}
        for k, edges in inter.items():
            if expected == "MNNVL" and (k == "MNNVL" or (not one_domain and rdma(k))):
                continue
            if expected == "NET" and rdma(k):
                continue
            if expected == "data_iface" and rdma(k):
                continue
            if expected == "data_iface" and k == "NET/Socket":
                off = [i for i in net.get("socket_ifaces") or [] if i != ifaces.get(host)]
                if net.get("socket_ifaces") and not off:
                    continue
                bad.append(f"{host}: NCCL's sockets (ranks {_edges(edges)}) on "
                           f"{', '.join(off) or 'an interface its log does not name'}, not the data "
                           f"interface {ifaces.get(host)}")
                continue
            said = ([f"NCCL loaded network {', '.join(net['network'])}"] if net.get("network") else []) \
                + ([f"MNNVL {'/'.join(map(str, net['mnnvl']))}"] if net.get("mnnvl") else [])
            loaded = f" ({'; '.join(said)})" if said else ""
            bad.append(f"{host}: {k} between nodes, ranks {_edges(edges)}{loaded}")
    env = sorted({f"{k}={v}" for d in docs.values() for k, v in (d.get("nccl_env") or {}).items()
                  if k in STEERING})
    cause = CAUSES[expected] + (f"; set here: {', '.join(env)}" if env else "")
    return {"measured": ", ".join(sorted(seen)) or "none recorded", "bad": bad, "used": used,
            "error": "; ".join(errors), "cause": cause}
