"""GPU pairs judged by what the host reports: each pair's link rate (NVLink links between the two
GPUs, else the PCIe link both negotiate) and its peer access. Pure: measurement in, verdict out."""

from __future__ import annotations

import re

from signoff.profiles import PROVISIONAL

# One way, per link: 25 GB/s for NVLink 2, 3 and 4 (NVIDIA V100 / A100 / H100 datasheets: 6, 12
# and 18 links per GPU for 300, 600 and 900 GB/s both ways).
NVLINK_GBPS = 25.0
# One way, per lane: the transfer rate after line coding (PCI-SIG: 2.5 / 5 GT/s 8b/10b, 8 / 16 /
# 32 GT/s 128b/130b, 64 GT/s FLIT 242/256). A x16 Gen4 link: 31.5 GB/s.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


def nvlinks_between(topo_m: str | None) -> dict[str, int]:
    """`nvidia-smi topo -m`'s NV<k> cells: NVLinks between GPU i and GPU j ("i-j": k)."""
    lines = [ln.split("\t") for ln in (topo_m or "").splitlines() if ln.strip()]
    if not lines:
        return {}
    head = [c.strip() for c in lines[0]]
    cols = {k: int(c[3:]) for k, c in enumerate(head) if re.fullmatch(r"GPU\d+", c)}
    out = {}
    for row in lines[1:]:
        name = row[0].strip()
        if not re.fullmatch(r"GPU\d+", name):
            continue
        for k, cell in enumerate(row):
            m = re.fullmatch(r"NV(\d+)", cell.strip())
            if m and k in cols:
                out[f"{name[3:]}-{cols[k]}"] = int(m.group(1))
    return out


def pcie_rate(g: dict) -> tuple[float | None, str]:
    """A GPU's PCIe link, one way in GB/s: the generation and width it and its slot support
    (NVML's max; test_pcie_link judges a link trained below them), else those it runs at."""
    p = g.get("pcie") or {}
    gen, width = p.get("max_gen") or p.get("gen"), p.get("max_width") or p.get("width")
    if gen not in PCIE_LANE_GBPS or not width:
        return None, f"GPU {g.get('index')} PCIe link unreadable ({p})"
    return round(PCIE_LANE_GBPS[gen] * width, 2), f"PCIe Gen{gen} x{width}"


def link_rates(doc: dict, gpus: list[dict]) -> dict[str, tuple[float | None, str]]:
    """Each measured pair's link rate, one way, and what it is: k NVLinks x 25 GB/s where
    `nvidia-smi topo -m` shows NV<k> between them, else the slower of the two GPUs' PCIe links."""
    nv = nvlinks_between((doc.get("topology") or {}).get("topo_m"))
    by_index = {str(g["index"]): g for g in gpus}
    out = {}
    for key in doc.get("unidirectional") or {}:
        if nv.get(key):
            out[key] = (nv[key] * NVLINK_GBPS, f"NV{nv[key]}: {nv[key]} x {NVLINK_GBPS:g} GB/s")
            continue
        ends = [pcie_rate(by_index.get(i) or {"index": i}) for i in key.split("-")]
        if any(r is None for r, _ in ends):
            out[key] = (None, "; ".join(w for r, w in ends if r is None))
        else:
            out[key] = min(ends)
    return out


def peer_access_off(doc: dict) -> list[str]:
    """Pairs whose peer access torch reports off: their copy is staged through host memory,
    which over PCIe reads about the same GB/s as a direct one, so the figure cannot tell."""
    return [k for k, on in sorted((doc.get("peer_access") or {}).items()) if on is False]


def ratios(doc: dict, gpus: list[dict]) -> dict[str, float]:
    """Each pair's copy as a fraction of its link rate (pairs of unreadable rate left out)."""
    rates = link_rates(doc, gpus)
    return {k: round(v / rates[k][0], 3) for k, v in (doc.get("unidirectional") or {}).items()
            if rates[k][0]}


def worst_ratio(doc: dict, gpus: list[dict]) -> float | None:
    """The figure `derived: link_rate` judges: the lowest pair / link-rate ratio (the retry's too)."""
    return min(ratios(doc, gpus).values(), default=None)


def floors(t, doc: dict, gpus: list[dict]) -> tuple[dict[str, tuple[float | None, str]], str]:
    """Each pair's floor in GB/s and how it was had, and what is expected of every pair: the
    threshold's own figure, or (`derived: link_rate`) its fraction of the pair's link rate."""
    uni = doc.get("unidirectional") or {}
    if t.extra.get("derived") != "link_rate":
        return {k: (t.value, "") for k in uni}, t.expected
    rates = link_rates(doc, gpus)
    out = {k: (None, why) if r is None else (round(t.value * r, 2), f" ({t.value:g} x {why} = {r:g} GB/s)")
           for k, (r, why) in rates.items()}
    kinds = sorted({f"{why}: >= {round(t.value * r, 2):g} GB/s" for r, why in rates.values() if r})
    said = f" ({PROVISIONAL})" if t.provisional else ""
    return out, f">= {t.value:g} x its link rate, one way ({'; '.join(kinds)}){said}"


def allreduce_threshold(t, allreduce_busbw: float | None, size: str, host: str):
    """A collective's threshold by rule `derived: allreduce`: t.value x the host's own all-reduce busbw
    at `size` in the same probe run, as a threshold in GB/s whose source states the figures."""
    from dataclasses import replace

    from signoff.fleet import ProbeError
    if not allreduce_busbw:
        raise ProbeError(f"{host}: no all-reduce busbw at {size} in the same run: {t.criterion}'s "
                         f"derived threshold has nothing to be a fraction of")
    rule = (f"derived: {t.value:g} x {allreduce_busbw:g} GB/s, this host's all-reduce busbw at {size} in the "
            f"same probe run")
    return replace(t, value=round(t.value * allreduce_busbw, 3), unit="GB/s", source=f"{rule}; {t.source}")


def wrong_results(doc: dict, names: dict[str, str]) -> list[str]:
    """Every collective's size whose output was not exact (the doc's `ops`, and its `rails`'s per
    rail), said as `wrong all-to-all at 1M` (`names`: op -> what a check calls it)."""
    from signoff.units import human_bytes
    out = [f"wrong {names.get(op, op)} at {human_bytes(r['bytes'])}"
           for op, rows in sorted((doc.get("ops") or {}).items()) for r in rows if not r["correct"]]
    out += [f"wrong {names.get(op, op)} at {human_bytes(r['bytes'])} in rail {rail}"
            for op, rails in sorted((doc.get("rails") or {}).items())
            for rail, rows in sorted(rails.items(), key=lambda kv: int(kv[0]))
            for r in rows if not r["correct"]]
    return out
