"""Likely causes of a low intra-node number, from what was measured on the host."""

from __future__ import annotations

from statistics import median

# NCCL settings that change which transport or algorithm it picks
NCCL_STEERING = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_ALGO",
                 "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_IB_DISABLE", "NCCL_NET",
                 "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_CUMEM_ENABLE")


def pair(key: str) -> str:
    i, j = key.split("-")
    return f"GPU{i}\u2192GPU{j}"


def links_down(gpus: list[dict]) -> list[str]:
    return [f"GPU {g['index']} has only {g['nvlink']['up']}/{g['nvlink']['links']} NVLinks up"
            for g in gpus if g["nvlink"]["links"] and g["nvlink"]["up"] < g["nvlink"]["links"]]


def fallback_transports(allreduce: dict, nvlink: bool) -> list[str]:
    """NCCL transports that are a fallback on a host whose GPUs have NVLink."""
    if not nvlink:
        return []
    return [f"NCCL used {t} between ranks {', '.join(f'{a}->{b}' for a, b in pairs[:4])} "
            f"although the GPUs have NVLink"
            for t, pairs in (allreduce.get("transports") or {}).items() if not t.startswith("P2P")]


def off_host_transports(allreduce: dict) -> list[str]:
    """NCCL transports that leave host memory on a class without GPU peer access (SHM is its
    path, P2P a driver that offers peer access after all): NET, the network's, is a fallback."""
    return [f"NCCL used {t} between ranks {', '.join(f'{a}->{b}' for a, b in pairs[:4])} "
            f"where the class's path is SHM (host memory)"
            for t, pairs in (allreduce.get("transports") or {}).items() if not t.startswith(("SHM", "P2P"))]


def non_nvlink_paths(p2p: dict) -> list[str]:
    paths = (p2p.get("topology") or {}).get("paths") or {}
    slow = sorted(k for k, v in paths.items() if v != "NVLINK")
    return [f"{v} (PCIe) path between GPU{k.replace('-', ' and GPU')}"
            for k, v in ((k, paths[k]) for k in slow) if int(k.split("-")[0]) < int(k.split("-")[1])]


def slow_pairs(p2p: dict, fraction: float) -> list[str]:
    uni = p2p.get("unidirectional") or {}
    if len(uni) < 2:
        return []
    mid = median(uni.values())
    return [f"slow pair {pair(k)} {v:g} GB/s vs host median {mid:g}"
            for k, v in sorted(uni.items(), key=lambda kv: kv[1]) if v < fraction * mid]


def steering_env(env: dict) -> list[str]:
    return [f"{k}={env[k]} is set" for k in NCCL_STEERING if k in env]


def interconnect(gpus: list[dict], allreduce: dict, p2p: dict | None,
                 uniformity: float = 0.8, cpu_count: int | None = None) -> list[str]:
    if allreduce.get("backend") == "gloo":
        return [f"CPU all-reduce over gloo ({allreduce.get('world_size')} ranks on {cpu_count} CPUs) "
                f"is bound by CPU and memory bandwidth"] + steering_env(allreduce.get("nccl_env") or {})
    nvlink = any(g["nvlink"]["links"] for g in gpus)
    causes = links_down(gpus) + fallback_transports(allreduce, nvlink)
    if p2p:
        causes += non_nvlink_paths(p2p) if nvlink else []
        causes += slow_pairs(p2p, uniformity)
    causes += steering_env(allreduce.get("nccl_env") or {})
    if allreduce.get("backend") == "nccl" and not allreduce.get("graphs"):
        causes.append("CUDA graph capture failed: small sizes include launch overhead")
    return causes
