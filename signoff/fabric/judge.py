"""Pure judgements of the NVLink fabric: a GPU's fabric registration and health (NVML's GPU
fabric info, as the sysinfo probe reads it), the NVLink domains the run's hosts form, a tray's
IMEX daemon. Field meanings: NVML API reference, nvmlFabricDefs and nvmlGpuFabricInfo_v3_t
(docs.nvidia.com/deploy/nvml-api); nvidia-ml-py's pynvml.py names them."""

from __future__ import annotations

import json

from signoff.fleet import ProbeError
from signoff.hostlist import fold

STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
COMPLETED = 3
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# The health mask's 2-bit fields, (name, shift): 0 not supported, 1 true (the fault), 2 false
HEALTH = (("degraded bandwidth", 0), ("route recovery in progress", 2), ("route unhealthy", 4),
          ("access timeout recovery", 6))
CONFIG_SHIFT = 8  # 4 bits: 0 not supported, 1 none, else the incorrect configuration
CONFIG = {2: "incorrect system GUID", 3: "incorrect chassis serial number", 4: "no partition",
          5: "insufficient NVLinks", 6: "incompatible GPU firmware", 7: "invalid location",
          8: "GPU state invalid"}
GFM_SHIFT = 14  # the global fabric manager's connection: 1 connected, 2 disconnected (reported only)
# v3's health summary, NVML's own verdict over the mask (NVML_GPU_FABRIC_HEALTH_SUMMARY_* in
# nvmlFabricDefs, nvidia-ml-py pynvml.py): 0 not supported, 1 healthy, 2 unhealthy, 3 limited
# capacity. Not supported or absent (v1, v2) leaves the mask to judge; any other value is a fault
SUMMARY_OK = (None, 0, 1)
SUMMARY = {2: "UNHEALTHY", 3: "LIMITED_CAPACITY"}
CAUSE_HGX = ("the fabric manager (nvidia-fabricmanager) not running or failed on this node: NCCL falls "
             "back to PCIe and CUDA reports the system not ready")
CAUSE_RACK = ("the rack's NVLink fabric (switch trays, NMX / global fabric manager) did not register "
              "the GPU, or a degraded NVLink or switch path")


def health_faults(mask: int | None) -> list[str]:
    """The faults a health mask reports (empty: clean, or none reported)."""
    if not mask:
        return []
    out = [name for name, shift in HEALTH if (mask >> shift) & 0x3 == 1]
    cfg = (mask >> CONFIG_SHIFT) & 0xF
    if cfg > 1:
        out.append(f"incorrect configuration: {CONFIG.get(cfg, f'code {cfg}')}")
    return out


def gfm(mask: int | None) -> str | None:
    v = ((mask or 0) >> GFM_SHIFT) & 0x3
    return {1: "connected", 2: "disconnected"}.get(v)


def gpu_fault(fab: dict) -> str | None:
    """What keeps this GPU's fabric registration from being sound; None: sound. Status is
    meaningful only once the state is completed (NVML: "must be checked only if state returns
    complete")."""
    state = fab.get("state")
    if state != COMPLETED:
        return f"fabric state {STATES.get(state, state)} (registration not completed)"
    if fab.get("status"):
        return f"fabric registration completed with status {fab.get('status_text') or fab['status']}"
    bad = health_faults(fab.get("health_mask"))
    summary = fab.get("health_summary")
    if summary not in SUMMARY_OK:
        bad.insert(0, f"health summary {SUMMARY.get(summary) or f'{summary!r} (not an NVML value)'}")
    return f"fabric health: {', '.join(bad)}" if bad else None


def unread(fab: dict | None) -> str | None:
    """Why no fabric state was read for a GPU (None: one was)."""
    if not fab:
        return "the sysinfo probe recorded no fabric state (an older signoff's probe)"
    if fab.get("state") is None or fab.get("state") == 0:
        return fab.get("error") or "NVML reports the GPU fabric state not supported"
    return None


def membership(fab: dict) -> tuple[str, int] | None:
    """(cluster UUID, clique id) of a GPU registered with its domain; None: in none."""
    if fab.get("state") != COMPLETED or fab.get("status") or not fab.get("cluster_uuid") \
            or fab["cluster_uuid"] == ZERO_UUID:
        return None
    return fab["cluster_uuid"], fab.get("clique_id")


def domains(hosts: dict[str, list[dict]], declared: int, unseen: list[str]) -> dict:
    """The NVLink domains of the run's hosts: `hosts` name -> its GPUs' fabric info (in GPU order),
    `declared` the GPUs one domain (or the site's partition) holds, `unseen` the hosts whose
    GPUs were not read. Returns {"groups": [...], "faults": [...], "short": [...], "figure": n}:
    faults name a tray outside its domain (GPUs in none, a tray split across domains, a tray in
    another cluster or partition than the run's other trays); short: a domain holding fewer GPUs
    than declared (a tray missing from the run or the partition); figure: the domains not whole
    and the trays split across domains or in none."""
    groups: dict[tuple, dict] = {}
    faults, split = [], set()
    for name, gpus in hosts.items():
        mine = {}
        for i, fab in enumerate(gpus):
            key = membership(fab)
            if key is None:
                faults.append(f"{name} GPU {i}: in no NVLink domain ({gpu_fault(fab) or 'no cluster UUID'})")
                split.add(name)
                continue
            mine.setdefault(key, []).append(i)
        if len(mine) > 1:
            split.add(name)
            faults.append(f"{name}: its GPUs in {len(mine)} NVLink domains: " + "; ".join(
                f"GPU {', '.join(map(str, g))} in cluster {k[0]} clique {k[1]}" for k, g in mine.items()))
        for key, idx in mine.items():
            grp = groups.setdefault(key, {"cluster_uuid": key[0], "clique_id": key[1], "hosts": [],
                                          "gpus": 0})
            grp["hosts"].append(name)
            grp["gpus"] += len(idx)
    ordered = sorted(groups.values(), key=lambda g: (-g["gpus"], g["cluster_uuid"], g["clique_id"]))
    main = ordered[0] if ordered else None
    short = []
    for g in ordered:
        trays = fold(sorted(g["hosts"]))
        g["trays"] = trays
        if g["gpus"] == declared:
            continue
        where = f"cluster {g['cluster_uuid']} clique {g['clique_id']}"
        if g is not main and len(ordered) > 1 and main["gpus"] > g["gpus"]:
            other = "partition (clique)" if g["cluster_uuid"] == main["cluster_uuid"] \
                else "NVLink domain (cluster UUID)"
            faults.append(f"{trays}: in another {other} than the run's other trays: {where} holds "
                          f"{g['gpus']} GPUs of the run, {declared} declared; the others are in cluster "
                          f"{main['cluster_uuid']} clique {main['clique_id']}")
        elif g["gpus"] > declared:
            faults.append(f"{where} holds {g['gpus']} GPUs of the run ({trays}), more than the {declared} "
                          f"declared (hardware.nvlink_domain): a larger partition than the profile says")
        if g["gpus"] < declared:
            short.append(f"{where} holds {g['gpus']} GPUs of the run ({len(g['hosts'])} trays: {trays}), "
                         f"{declared} declared (hardware.nvlink_domain): {declared - g['gpus']} GPUs missing"
                         + (f"; did not answer: {fold(sorted(unseen))}" if unseen else ""))
    figure = sum(1 for g in ordered if g["gpus"] != declared) + len(split)
    return {"groups": ordered, "faults": faults, "short": short, "figure": figure, "split": sorted(split)}


IMEX_CTL = "nvidia-imex-ctl -N -j"
JSON_TYPES = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean",
              type(None): "null"}


def _printed(value) -> str:
    """What the tool printed, as JSON (escapes every control character), at most 120 characters."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 120 else text[:120] + f"... ({len(text)} characters)"


def _object(value, what: str | None = None) -> dict:
    """`value` if the IMEX view holds an object there; else ERROR naming the tool and what it
    printed (the documented shape: the domain, its nodes and each node's connections are
    objects keyed by node index)."""
    if isinstance(value, dict):
        return value
    kind = JSON_TYPES.get(type(value), type(value).__name__)
    raise ProbeError(f"{IMEX_CTL} printed JSON " + (f"whose {what} are" if what else "that is")
                     + f" not an object: {kind}, {_printed(value)}")


def own_node(doc: dict, hostname: str, addresses: list[str]) -> tuple[str, dict] | None:
    """This host's entry among the IMEX domain's nodes: by address, else by host name."""
    nodes = _object(doc.get("nodes") or {}, "nodes") if isinstance(doc, dict) else {}
    for key, node in nodes.items():
        if isinstance(node, dict) and node.get("host") in addresses:
            return key, node
    for key, node in nodes.items():
        if isinstance(node, dict) and hostname and node.get("hostName") in (hostname, hostname.split(".")[0]):
            return key, node
    return None


def imex_faults(imex: dict, trays: int, names: dict[str, str]) -> list[str]:
    """A tray's IMEX faults from its daemon's view (`nvidia-imex-ctl -N -j`): the domain not UP,
    this node not READY, a connection of this node not CONNECTED (its peer named, through
    `names`: address -> host of the run), fewer nodes than the NVLink domain's trays, no channel
    device. The daemon not answering is the caller's (it may be idle under per-job IMEX)."""
    doc = _object(imex["domain"])
    out = []
    if doc.get("status") != "UP":
        out.append(f"IMEX domain status {doc.get('status') or 'missing'}, not UP")
    nodes = _object(doc.get("nodes") or {}, "nodes")
    if len(nodes) < trays:
        out.append(f"the IMEX domain lists {len(nodes)} nodes, the NVLink domain has {trays} trays "
                   f"(nodes_config.cfg lacks trays)")
    own = own_node(doc, imex.get("hostname") or "", imex.get("addresses") or [])
    views = [own] if own else list(nodes.items())  # own entry unknown: every node's, as it reports them
    for key, node in views:
        node = _object(node, f"node {_printed(key)[:40]}'s fields")
        if node.get("status") != "READY":
            out.append(f"IMEX node {_peer(node, names)} status {node.get('status') or 'missing'}, not READY")
        conns = _object(node.get("connections") or {}, f"node {_printed(key)[:40]}'s connections")
        for conn in conns.values():
            if isinstance(conn, dict) and conn.get("status") != "CONNECTED":
                out.append(f"IMEX peer {_peer(conn, names)} {conn.get('status') or 'status missing'}"
                           + ("" if own else f" (seen from node {_peer(node, names)})"))
    if not imex.get("channels"):
        out.append(f"no IMEX channel device in {imex.get('channel_dir')} (CUDA cannot import fabric "
                   f"memory: create channel0 with mknod, or the job's ComputeDomain does)")
    return out


def _peer(node: dict, names: dict[str, str]) -> str:
    host = node.get("host") or "?"
    name = node.get("hostName") or names.get(host)
    return f"{host} ({name})" if name and name != host else host


def tray_domains(hosts: dict[str, list[dict]]) -> tuple[dict[tuple, list[str]], dict[str, str]]:
    """The run's trays by NVLink domain (cluster UUID, clique id), each tray in the one all its
    GPUs registered with: ({domain: [trays in run order]}, {tray: why it is in no one domain}).
    nvlink_domain judges the membership itself; this is what an all-reduce over MNNVL can span."""
    groups: dict[tuple, list[str]] = {}
    outside = {}
    for name, gpus in hosts.items():
        keys = {membership(f) for f in gpus}
        if not gpus or None in keys or len(keys) > 1:
            why = "no GPU" if not gpus else next(
                (f"GPU {i}: {gpu_fault(f) or unread(f) or 'no cluster UUID'}" for i, f in enumerate(gpus)
                 if membership(f) is None), f"its GPUs in {len(keys)} NVLink domains")
            outside[name] = why
            continue
        groups.setdefault(keys.pop(), []).append(name)
    return groups, outside


def over_mnnvl(docs: dict[str, dict]) -> dict:
    """Whether a run's traffic between the trays of one domain took MNNVL, from each tray's record
    of its transports (network/route.py: NCCL's channel lines, its communicator's MNNVL flag):
    {"bad": a line per tray naming what it used instead (NET/IB between trays, MNNVL 0),
    "measured": what was seen, "known": whether anything said it, "cause"}."""
    from signoff.network import route
    v = route.judge("MNNVL", docs, {}, True)
    bad = list(v["bad"])
    flags = {h: (d.get("nccl_net") or {}).get("mnnvl") or [] for h, d in docs.items()}
    for host, f in flags.items():
        if 0 in f and not any(b.startswith(f"{host}:") for b in bad):
            bad.append(f"{host}: NCCL's communicator says MNNVL 0 (multi-node NVLink not enabled)")
    seen = v["measured"] if v["used"] else ""
    if not seen and any(1 in f for f in flags.values()):  # NVLS runs print no P2P channel lines
        seen = "MNNVL (NCCL's communicator: MNNVL 1)"
    return {"bad": bad, "measured": seen or "not recorded", "known": bool(seen or bad),
            "used": v["used"], "cause": v["cause"]}
