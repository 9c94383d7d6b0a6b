"""GPUDirect RDMA per rail (issue 53 item 4): each GPU with its closest RDMA NIC, GPU memory to GPU
memory across a pair of nodes (ib_write_bw --use_cuda), rails one after another; where perftest has
no CUDA, NCCL's channel lines say whether each GPU's traffic took GPUDirect RDMA. N.A. on hosts
without an RDMA NIC or a GPU, and in a run of one host."""

from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.rails import judge


def _rails(host, fleet) -> list[dict]:
    """The host's rails; N.A. before any threshold is read (a host without RDMA needs none)."""
    if len(fleet.names) < 2:
        not_applicable(f"{host}: one host in the run: no rail to another node")
    rails, na, err = judge.rails_of(host.facts)
    if na:
        not_applicable(f"{host}: {na}")
    if err:
        raise ProbeError(f"{host}: {err}")
    return rails


def test_gdr_rail_bw(host, fleet, rails, profile, check):
    """Every rail's GPU-to-GPU RDMA write bandwidth (ib_write_bw --use_cuda, this host's GPU i
    through its closest NIC to the next host's GPU i) at least its floor; the worst rail recorded."""
    mine = _rails(host, fleet)
    t = profile.threshold("gdr_rail_bw")
    res = rails.of(host.name, t.extra.get("duration", 5), t.extra.get("dmabuf", False))
    if res.get("no_cuda"):
        raise ProbeError(f"{host}: {res['why']} (on {', '.join(res['no_cuda'])}): no rail's GPU-memory "
                         f"bandwidth measured; gdr_rail_path reads NCCL's channel lines instead, and the "
                         f"rails' NCCL figure is rail_alltoall_busbw")
    derived = t.extra.get("derived") == "line_rate"
    v = judge.rail_bw(res["rails"], host.name, res["server"], t.value, fixed=not derived)
    missing = judge.unmeasured(mine, res["rails"], host.name, res["server"])  # every rail, or no pass
    details = {"pair": res["pair"], "rows": v["rows"], "dmabuf": res.get("dmabuf")}
    if not res["rails"]:
        raise ProbeError(f"{host}: no rail measured: {judge.listed(missing)}")
    if (v["unjudged"] or missing) and not v["bad"]:
        check.record(v["worst"], t.expected, "GB/s", t.source, details=details)
        raise ProbeError(f"{host}: {judge.listed(v['unjudged'] + missing)}")
    expected = f"every rail >= {t.value:g} x its NIC's line rate / 8" if derived else \
        f"every rail >= {t.expected}"
    check.require(v["bad"] + [f"{u} (not measured)" for u in v["unjudged"]] + missing, v["worst"], expected,
                  f"{t.source}; {t.provisional}" if t.provisional else t.source, cause=judge.BW_CAUSE,
                  details=details)


def test_gdr_rail_path(host, fleet, rails, network, profile, check, pytestconfig):
    """Every rail through GPUDirect RDMA: perftest's buffer on the rail's GPU at both ends (else
    NCCL's NET channels with GDRDMA, through the GPU's own NIC), and no GPU whose closest NIC sits
    farther than the profile's level (across the CPU)."""
    mine = _rails(host, fleet)
    t = profile.threshold("gdr_rail_path")
    level = t.extra.get("level", "PHB")
    tb = profile.criteria.get("gdr_rail_bw")  # its duration and dma-buf: one measurement serves both
    res = rails.of(host.name, tb.extra.get("duration", 5) if tb else 5, bool(tb and tb.extra.get("dmabuf")))
    if res.get("no_cuda"):
        bad, seen = nccl_fallback(host, fleet, network, profile, pytestconfig, mine)
        check.note(f"{res['why']} (on {', '.join(res['no_cuda'])}): judged on NCCL's channel lines of the "
                   f"multi-node all-reduce ({seen} GPU(s) with NET traffic)")
        bad += judge.far(mine, host.name, level)
        via = "NCCL channel lines"
    else:
        bad = [b for r in res["rails"] if not r.get("error")
               for b in judge.rail_path(r, host.name, res["server"], level)]
        broken = [f"{judge.rail_name(r, host.name, res['server'])}: {judge.text(r['error'], 240)}"
                  for r in res["rails"] if r.get("error")]
        missing = judge.unmeasured(mine, res["rails"], host.name, res["server"])  # every rail, or no pass
        if not res["rails"]:
            raise ProbeError(f"{host}: no rail measured: {judge.listed(missing)}")
        if (broken or missing) and not bad:
            raise ProbeError(f"{host}: {judge.listed(broken + missing)}")
        bad += [f"{b} (not measured)" for b in broken] + missing
        via = "ib_write_bw --use_cuda"
    off = len({b.split(":")[0] for b in bad})
    check.require(bad, off, f"<= {t.value:g} rails off GPUDirect RDMA, every GPU's NIC at most {level} "
                  f"({via})", t.source, cause=judge.PATH_CAUSE, details={"rails": mine, "via": via})


def nccl_fallback(host, fleet, network, profile, pytestconfig, mine) -> tuple[list[str], int]:
    """The multi-node all-reduce's own run (test_multinode_allreduce's, cached): this host's NCCL
    NET channels per GPU, GDRDMA and the GPU's own NIC."""
    from signoff.network.plugin import multinode_args
    b = profile.criteria.get("multinode_allreduce_busbw")
    lo, hi, env = multinode_args(profile, b) if b else ("1M", "1M", {})
    res = network.allreduce(fleet.names, lo, hi, env, pytestconfig.getoption("collective_timeout"))
    if not res["ok"]:
        raise ProbeError(f"{host}: perftest has no CUDA and the multi-node all-reduce whose NCCL lines would "
                         "tell failed: " + "; ".join(f"{h}: {s}" for h, s in res["states"].items()))
    doc = (res.get("hosts") or {}).get(host.name) or {}
    if doc.get("backend") != "nccl":
        raise ProbeError(f"{host}: perftest has no CUDA and the multi-node all-reduce ran "
                         f"{doc.get('backend') or 'no'} backend: no NCCL channel line to read")
    seen = judge.nccl_from_route(doc)
    if not seen:
        raise ProbeError(f"{host}: perftest has no CUDA and NCCL's log shows no NET channel of this host")
    return judge.nccl_path(seen, host.name, mine)
