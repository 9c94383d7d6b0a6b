"""Pure judgements of GPUDirect RDMA per rail: which NIC each GPU's rail takes (its PCIe-closest,
from sysinfo's gpu_nic map), what perftest's `ib_write_bw --use_cuda` printed (a GPU picked and its
buffer allocated on both ends, the bandwidth), and, where perftest has no CUDA, what NCCL's channel
lines say (`via NET/IB/<n>/GDRDMA` or not). Every function takes documents and returns plain data;
acceptance/test_rails.py records the verdicts."""

from __future__ import annotations

import re

from signoff.gpu.judge import LEVELS, nearest_nics
from signoff.printable import printable

PATH_CAUSE = ("GPUDirect RDMA not in use on the rail: nvidia_peermem not loaded (or dma-buf unsupported), "
              "perftest built without CUDA, or the GPU's NIC across the CPU's root complex: its traffic "
              "is staged in host memory and shares the CPU's links")
BW_CAUSE = ("the rail's NIC, cable or switch port below its line rate, the GPU and NIC behind a PCIe link "
            "trained down (width or generation), or PCIe ACS/IOMMU forcing peer traffic up to the root "
            "complex")
NO_CUDA = ("perftest's ib_write_bw here has no CUDA (its --help lists no --use_cuda; built without "
           "cuda.h: perftest README, 'GPUDirect usage'), so it cannot put a rail's buffer in GPU memory")


def text(v, n: int = 60) -> str:
    s = printable(v)
    return s if len(s) <= n else s[:n - 3] + "..."


# ------------------------------------------------------------------ the rails of a host


def rails_of(facts: dict) -> tuple[list[dict], str, str]:
    """(each GPU's rail: {"gpu", "nic", "level", "port", "rate_gbps", "state"}, why none applies
    (N.A.), why they cannot be read (ERROR)). A GPU's rail is its closest RDMA NIC (nvidia-smi
    topo's relations from sysfs PCI paths, sysinfo's gpu_nic); of several at that distance, the
    one at the GPU's position among them, so GPUs sharing a switch with two NICs take one each."""
    topo = (facts or {}).get("gpu_nic") or {}
    if not topo.get("nics"):
        # worded as the other checks' N.A. without RDMA (the walk-through knows it as the hardware's)
        return [], "no RDMA device (/sys/class/infiniband is empty): no rail to measure", ""
    gpus = topo.get("gpus") or {}
    if not gpus:
        return [], "no GPU (NVML lists none): no GPU memory to put a rail's buffer in", ""
    unread = sorted((i for i, links in gpus.items() if not links), key=int)
    if unread:
        return [], "", f"the PCIe path of GPU(s) {', '.join(unread)} is not in sysfs: no closest NIC known"
    ports = {p.get("device"): p for p in (facts.get("preflight") or {}).get("infiniband") or []
             if isinstance(p, dict)}
    taken: dict[tuple, int] = {}
    out = []
    for i in sorted(gpus, key=int):
        level, nics = nearest_nics(gpus[i])
        key = (level, tuple(nics))
        nic = nics[taken.get(key, 0) % len(nics)]
        taken[key] = taken.get(key, 0) + 1
        p = ports.get(nic) or {}
        out.append({"gpu": i, "nic": nic, "level": level, "port": p.get("port", 1),
                    "rate_gbps": p.get("rate_gbps"), "state": p.get("state")})
    return out, "", ""


def pairs_of_rails(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Rail i: GPU i of the client host with its NIC to GPU i of the server host with its NIC (a
    rail-optimised fabric wires NIC i of every node to one leaf)."""
    theirs = {r["gpu"]: r for r in b}
    return [(r, theirs[r["gpu"]]) for r in a if r["gpu"] in theirs]


def unmeasured(mine: list[dict], measured: list[dict], host_a: str, host_b: str) -> list[str]:
    """This host's rails its pair did not measure: GPU i pairs with GPU i (pairs_of_rails), so a
    GPU the other host lacks leaves its rail out. Each is named: a rail not measured is no pass."""
    done = {str((r.get("a") or {}).get("gpu")) for r in measured}
    return [f"{text(host_a, 40)} GPU {text(r['gpu'], 4)} / {text(r['nic'], 20)}: not measured "
            f"({text(host_b, 40)} has no GPU {text(r['gpu'], 4)} to pair it with)"
            for r in mine if str(r["gpu"]) not in done]


def listed(lines: list[str], n: int = 4) -> str:
    """The first `n` lines joined, and how many more."""
    return "; ".join(lines[:n]) + (f"; and {len(lines) - n} more" if len(lines) > n else "")


# ------------------------------------------------------------------ perftest's output

TABLE = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
PICKED = re.compile(r"Picking (?:device No\.|GPU number) (\d+)")


def parse_perftest(out: str) -> dict:
    """What ib_write_bw printed: its average (Gb/s with --report_gbits; the last row of its table),
    the GPU it picked ('Picking device No. N', perftest 4.x-24.x; 'Picking GPU number N', 25.x), and
    whether its buffer went to GPU memory ('allocated GPU buffer') through dma-buf ('using DMA-BUF')."""
    rows = [m for m in (TABLE.match(ln) for ln in (out or "").splitlines()) if m]
    picked = PICKED.search(out or "")
    return {"gbps": float(rows[-1].group(4)) if rows else None,
            "gpu_picked": int(picked.group(1)) if picked else None,
            "gpu_buffer": "allocated GPU buffer" in (out or ""),
            "dmabuf": "using DMA-BUF for GPU buffer" in (out or ""),
            "no_cuda": "Unsupported memory type" in (out or "")}


def rail_name(r: dict, host_a: str, host_b: str) -> str:
    a, b = r.get("a") or {}, r.get("b") or {}
    return (f"{text(host_a, 40)} GPU {text(a.get('gpu'), 4)} / {text(a.get('nic'), 20)} -> "
            f"{text(host_b, 40)} GPU {text(b.get('gpu'), 4)} / {text(b.get('nic'), 20)}")


def rail_path(r: dict, host_a: str, host_b: str, farthest: str) -> list[str]:
    """What puts one measured rail off GPUDirect: an end whose perftest did not allocate its buffer
    on the rail's GPU, or a GPU whose NIC sits farther than `farthest` (nvidia-smi topo's scale)."""
    name, bad = rail_name(r, host_a, host_b), []
    for end, host in (("client", host_a), ("server", host_b)):
        got = r.get(end) or {}
        gpu = (r.get("a") if end == "client" else r.get("b")) or {}
        if not got.get("gpu_buffer"):
            bad.append(f"{name}: {text(host, 40)}'s ib_write_bw put its buffer in host memory (no 'allocated "
                       f"GPU buffer' in its output)")
        elif got.get("gpu_picked") is not None and str(got["gpu_picked"]) != str(gpu.get("gpu")):
            bad.append(f"{name}: {text(host, 40)}'s ib_write_bw picked GPU {got['gpu_picked']}, "
                       f"not the rail's")
    for end, host in (("a", host_a), ("b", host_b)):
        e = r.get(end) or {}
        if e.get("level") in LEVELS and LEVELS.index(e["level"]) > LEVELS.index(farthest):
            bad.append(f"{name}: {text(host, 40)} GPU {text(e.get('gpu'), 4)}'s closest NIC "
                       f"{text(e.get('nic'), 20)} is {e['level']} (across the CPU), farther than {farthest}")
    return bad


def far(rails: list[dict], host: str, farthest: str) -> list[str]:
    """This host's GPUs whose closest NIC is farther than `farthest` (the CPU between them)."""
    return [f"{text(host, 40)} GPU {text(r['gpu'], 4)}'s closest NIC {text(r['nic'], 20)} is {r['level']} "
            f"(across the CPU), farther than {farthest}" for r in rails
            if r.get("level") in LEVELS and LEVELS.index(r["level"]) > LEVELS.index(farthest)]


def rail_floor(r: dict, fraction: float, fixed: bool = False) -> tuple[float | None, str]:
    """The rail's floor in GB/s: `fraction` x the slower end's NIC line rate / 8, and the rule
    (fixed: `fraction` is the floor itself, a class's own GB/s)."""
    if fixed:
        return fraction, "the profile's floor"
    rates = [x for x in ((r.get("a") or {}).get("rate_gbps"), (r.get("b") or {}).get("rate_gbps")) if x]
    if not rates:
        return None, "no line rate in sysfs (infiniband/<nic>/ports/<n>/rate) for either NIC"
    line = min(rates)
    return round(fraction * line / 8, 3), f"{fraction:g} x {line:g} Gb/s / 8"


def rail_bw(rails: list[dict], host_a: str, host_b: str, fraction: float, fixed: bool = False) -> dict:
    """Every rail of a pair against its floor: {"worst": the lowest GB/s, "bad": the rails below
    their floor, "unjudged": rails with no figure or no line rate, "rows": the table shown}."""
    rows, bad, unjudged = [], [], []
    for r in rails:
        name = rail_name(r, host_a, host_b)
        if r.get("error"):
            unjudged.append(f"{name}: {text(r['error'], 240)}")
            continue
        floor, rule = rail_floor(r, fraction, fixed)
        gbs = round(r["gbps"] / 8, 3) if isinstance(r.get("gbps"), (int, float)) else None
        rows.append({"rail": name, "gb_s": gbs, "floor_gb_s": floor, "rule": rule,
                     "dmabuf": bool((r.get("client") or {}).get("dmabuf"))})
        if gbs is None:
            unjudged.append(f"{name}: no bandwidth in ib_write_bw's output")
        elif floor is None:
            unjudged.append(f"{name}: {rule}")
        elif gbs < floor:
            bad.append(f"{name}: {gbs:g} GB/s, below {floor:g} GB/s ({rule})")
    figures = [x["gb_s"] for x in rows if x["gb_s"] is not None]
    return {"worst": min(figures) if figures else None, "bad": bad, "unjudged": unjudged, "rows": rows}


# ------------------------------------------------------------------ NCCL's channel lines (no CUDA perftest)

NCCL_NET = re.compile(r"^(?P<host>[^\s:]+):\d+:\d+ \[(?P<dev>\d+)\] NCCL INFO "
                      r"(?:Channel|Ring) \d+(?:/\d+)? : "
                      r"\d+(?:\[[0-9a-fA-F]+\])? -> \d+(?:\[[0-9a-fA-F]+\])?(?: \[(?:send|receive)\])? "
                      r"via NET/(?P<net>[^/\s]+(?: [^/\s]+)?)/(?P<nic>\d+)(?P<gdr>/GDRDMA)?")
NCCL_DEVS = re.compile(r"^(?P<host>[^\s:]+):\d+:\d+ \[\d+\] NCCL INFO NET/(?P<net>\w+) : Using "
                       r"(?P<list>.+?)(?: ;|$)")


def nccl_rails(lines) -> dict:
    """NCCL_DEBUG=INFO lines -> {host: {cuda device: {nic: {"gdr": bool, "channels": n}}}}: the NIC is
    the name from 'NET/IB : Using [0]mlx5_0:1/IB ...' where the host printed it, else 'NET/<n>'.
    Each rank prints its own NET connections (send and receive) with its own NIC index."""
    names: dict[str, dict[str, str]] = {}
    seen: dict = {}
    for line in lines:
        d = NCCL_DEVS.search(line)
        if d:
            names.setdefault(d["host"], {}).update(re.findall(r"\[(\d+)\]([^:\s]+):", d["list"]))
            continue
        m = NCCL_NET.search(line)
        if m:
            nic = names.get(m["host"], {}).get(m["nic"]) or f"NET/{m['net']}/{m['nic']}"
            e = seen.setdefault(m["host"], {}).setdefault(m["dev"], {}).setdefault(
                nic, {"gdr": True, "channels": 0})
            e["gdr"] = e["gdr"] and bool(m["gdr"])
            e["channels"] += 1
    return seen


def nccl_from_route(doc: dict) -> dict:
    """The same shape as nccl_rails()[host] from one host's record of the multi-node all-reduce
    (network's route keys: its own ranks' channel lines parsed by probe_allreduce, "NET/IB/5/GDRDMA":
    [[src, dst], ...]): the local end of each NET edge is this node's rank (node_rank x local_ranks
    on: torchrun's layout), its local index the GPU; the NIC is NCCL's index (no names kept there)."""
    n, k = doc.get("node_rank"), doc.get("local_ranks")
    if not isinstance(n, int) or not isinstance(k, int) or k < 1:
        return {}
    lo, out = n * k, {}
    for key, edges in (doc.get("transports") or {}).items():
        m = re.match(r"NET/([^/]+)/(\d+)(/GDRDMA)?$", key)
        if not m:
            continue
        for src, dst in edges:
            local = src if lo <= src < lo + k else dst if lo <= dst < lo + k else None
            if local is None:
                continue
            e = out.setdefault(str(local - lo), {}).setdefault(f"NET/{m[1]}/{m[2]}",
                                                               {"gdr": True, "channels": 0})
            e["gdr"] = e["gdr"] and bool(m[3])
            e["channels"] += 1
    return out


def nccl_path(host_rails: dict, host: str, rails: list[dict]) -> tuple[list[str], int]:
    """One host's NCCL NET connections ({cuda device: {nic: ...}}) against its rails: each GPU's NET
    traffic through GPUDirect RDMA and through its own closest NIC. (failures, GPUs seen)."""
    want = {r["gpu"]: r for r in rails}
    bad = []
    for dev, nics in sorted(host_rails.items(), key=lambda kv: int(kv[0])):
        r = want.get(dev) or {}
        for nic, e in sorted(nics.items()):
            if not e["gdr"]:
                bad.append(f"{text(host, 40)} GPU {dev} / {text(nic, 24)}: NCCL's NET channels without "
                           f"GDRDMA ({e['channels']} connection(s)): through host memory")
            if r.get("nic") and not nic.startswith("NET/") and nic != r["nic"]:
                bad.append(f"{text(host, 40)} GPU {dev} / {text(nic, 24)}: not the GPU's closest NIC "
                           f"({text(r['nic'], 24)}, {r.get('level')})")
    return bad, len(host_rails)
