"""The report's interconnect section: every host's busbw curve on one chart against the
threshold, and the GPU pair heatmaps (every host's up to MATRIX_MAX_HOSTS, else the worst)."""

from __future__ import annotations

from signoff import retry
from signoff.figures import img
from signoff.interconnect import plots
from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, WORST
from signoff.units import human_bytes, parse_size


def interconnect_section(records: list[dict], profile) -> str:
    rows = {r["host"]: r["details"]["rows"] for r in records
            if r["criterion"] == "allreduce_busbw" and (r.get("details") or {}).get("rows")}
    p2p = {r["host"]: r["details"] for r in records
           if r["criterion"] == "p2p_bandwidth" and (r.get("details") or {}).get("unidirectional")}
    if not rows and not p2p and not any(r["criterion"] in OPS_CRITERIA for r in records):
        return ""
    t = profile.criteria.get("allreduce_busbw") if profile else None
    busbw, figs, of = "", [], None
    if rows:
        ref = parse_size(t.extra["size"]) if t and "size" in t.extra else None
        busbw = img(plots.busbw_hosts(rows, t.value if t else None, ref, MATRIX_MAX_HOSTS, WORST),
                    "all-reduce busbw vs message size")
    if p2p:
        lim = profile.criteria.get("p2p_bandwidth") if profile else None
        lim = None if lim and lim.extra.get("derived") else lim  # a fraction of each pair's link: no one line
        shown = sorted(p2p, key=lambda h: min(p2p[h]["unidirectional"].values()))
        if len(shown) > MATRIX_MAX_HOSTS:
            of = {"worst": WORST, "n": len(shown)}
            shown = shown[:WORST]
        for h in sorted(shown):
            uni = p2p[h]["unidirectional"]
            n = 1 + max(int(x) for k in uni for x in k.split("-"))
            figs.append(img(plots.p2p_heatmap(h, n, uni, "unidirectional copy", lim.value if lim else None),
                            f"{h} P2P unidirectional"))
            if p2p[h].get("bidirectional"):
                figs.append(img(plots.p2p_heatmap(h, n, p2p[h]["bidirectional"], "bidirectional copy"),
                                f"{h} P2P bidirectional"))
    return render("interconnect/section.jinja2", busbw=busbw, collectives=collectives_section(records, t),
                  p2p=figs, p2p_of=of)


OPS_CRITERIA = {f"{op}_busbw": op for op in plots.OP_NAMES if op != "allreduce"}


def collectives_section(records: list[dict], t) -> str:
    """Each host's collectives beside its all-reduce, one chart a host (the WORST by their lowest
    busbw / all-reduce at the judged size above MATRIX_MAX_HOSTS hosts)."""
    per: dict[str, dict] = {}
    for r in records:
        d = r.get("details") or {}
        if r["criterion"] in OPS_CRITERIA and d.get("rows"):
            per.setdefault(r["host"], {})[OPS_CRITERIA[r["criterion"]]] = d["rows"]
            if d.get("allreduce_rows"):
                per[r["host"]]["allreduce"] = d["allreduce_rows"]
    if not per:
        return ""
    ref = parse_size(t.extra["size"]) if t and "size" in t.extra else None
    shown, of = sorted(per), None
    if len(shown) > MATRIX_MAX_HOSTS:
        def low(h):
            return min((r["busbw"] for op, rs in per[h].items() if op != "allreduce" for r in rs
                        if r["bytes"] == ref), default=0)
        shown = sorted(shown, key=low)[:WORST]
        of = {"worst": WORST, "n": len(per)}
    return render("interconnect/collectives.jinja2", worst_of=of, charts=[
        img(plots.collectives_chart(h, per[h], ref), f"{h} collectives busbw beside the all-reduce")
        for h in sorted(shown)])


def methodology(doc: dict, profile) -> list[dict]:
    recs = [r for r in doc["results"] if r["criterion"] == "allreduce_busbw" and r.get("details")]
    d = recs[0]["details"] if recs else {}
    torch = next((f.get("torch") or {} for f in doc.get("hosts", {}).values() if f.get("torch")), {})
    nccl = d.get("nccl") or torch.get("nccl")
    sizes = [r["bytes"] for r in d.get("rows") or []]
    t = profile.criteria.get("allreduce_busbw") if profile else None
    attempts = retry.count(t) if t else retry.ATTEMPTS
    pt = profile.criteria.get("p2p_bandwidth") if profile else None
    swept = f"{human_bytes(sizes[0])} to {human_bytes(sizes[-1])}, x2 steps" if sizes else \
        "the profile's sweep"
    return [{"check": "allreduce_busbw, allreduce_correct, nccl_transport",
             "tool": f"torch.distributed {torch.get('version') or '?'}, "
                     f"{d.get('backend') or 'NCCL (gloo on CPU hosts)'} {nccl or ''}".strip(),
             "how": f"one process per GPU; message sizes {swept}; per size 5 warm-up all-reduces, then "
                    f"{'a CUDA graph of' if d.get('graphs') else 'a loop of'} 20 all-reduces timed with "
                    f"CUDA events (wall clock on gloo), median of 3 repeats, the slowest rank's time; "
                    f"algbw = bytes / time, busbw = algbw x 2(n-1)/n (nccl-tests' definition); every "
                    f"size's sum checked exactly; judged at the profile's size; after a miss there, "
                    f"the sweep again up to the threshold's attempts ({attempts} in all), the best "
                    f"judged, every attempt's busbw and the spread in the check's details and message; "
                    f"a size is correct only if it was in every attempt"},
            {"check": "allgather_busbw, reduce_scatter_busbw, alltoall_busbw, sendrecv_busbw, "
                      "collectives_correct",
             "tool": "the all-reduce's probe run (probe_allreduce --op), the same ranks and rendezvous",
             "how": "after the all-reduce, back to back: all_gather_into_tensor, reduce_scatter_tensor, "
                    "all_to_all_single, and send/recv to the next rank and from the previous one "
                    "(nccl-tests' ring), each timed as the all-reduce over its sweep; sizes as nccl-tests "
                    "counts them (the whole array for all-gather and reduce-scatter, a rank's buffer for "
                    "all-to-all, what a rank sends for send/recv: NVIDIA/nccl-tests doc/PERFORMANCE.md), "
                    "busbw = algbw x (n-1)/n, send/recv x 1; every output checked exactly (each rank's "
                    "chunks are its own integers); judged at the all-reduce's size, a derived threshold "
                    "as a fraction of the host's own all-reduce busbw there in the same run; not retried"},
            {"check": "p2p_bandwidth, p2p_uniformity, gpu_topology",
             "tool": f"torch {torch.get('version') or '?'} copies, nvidia-smi topo -m",
             "how": "1 GiB copy per ordered GPU pair, 10 iterations timed with CUDA events, one way "
                    "(unidirectional) and both ways at once (bidirectional); uniformity = slowest pair "
                    "/ the host's median pair; after the slowest pair misses p2p_bandwidth, every pair "
                    f"again up to its attempts ({retry.count(pt) if pt else retry.ATTEMPTS} in all), the "
                    "attempt with the fastest slowest pair judged (uniformity of that attempt)"}]
