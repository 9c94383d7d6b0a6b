"""The report's network section: each host pair's throughput as a share of line rate, and the
multi-node all-reduce with its bisection to the slow host or link."""

from __future__ import annotations

from signoff import retry
from signoff.check import NA_PREFIX
from signoff.figures import img, png, pyplot
from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, WORST, status_class
from signoff.units import readable

MATRIX_HOSTS = 32  # up to this many hosts a sender x receiver matrix; above, a histogram


def _pct(fraction) -> str:
    return "" if fraction is None else f"{100 * fraction:.0f} %"


def network_section(records: list[dict]) -> str:
    """Per host pair: throughput as % of line rate; and the multi-node bisection."""
    pairs = [r for r in records if r["criterion"] == "net_pair_bandwidth" and r.get("details")]
    unmeasured = next((r for r in records if r["criterion"] == "net_pair_bandwidth" and not r.get("details")),
                      None)
    multi = next((r for r in records if r["criterion"] == "multinode_allreduce"), None)
    if not pairs and not multi and not unmeasured:
        return ""
    pct = all(r["details"].get("fraction") is not None for r in pairs)
    fig = pair_figure(pairs, pct) if pairs else ""
    if len(pairs) > MATRIX_MAX_HOSTS:  # the problems and the lowest, not 1,000 rows
        low = sorted(pairs, key=lambda r: r["details"].get("fraction" if pct else "gbps") or 0)
        pairs = [r for r in low if r["status"] != "PASS"] or low[:WORST]
    rows = [{"cls": status_class(r["status"]), "host": r["host"], "tool": d.get("tool"),
             "streams": d.get("streams"), "duration": d.get("duration"), "gbps": d.get("gbps"),
             "line_rate": d.get("line_rate_gbps"), "pct": _pct(d.get("fraction")), "status": r["status"]}
            for r in pairs for d in [r["details"]]]
    bis = ((multi or {}).get("details") or {}).get("bisection")
    return render("network/section.jinja2", figure=img(fig, "host pair throughput") if fig else "",
                  pairs=rows,
                  # one host, or no pair measured: why in one line, no empty table
                  unmeasured={"status": unmeasured["status"], "why": why(unmeasured)} if unmeasured else None,
                  multi={"status": multi["status"],
                         "got": f"{readable(multi['measured'])} {multi.get('unit') or ''}"
                         if multi.get("measured") is not None else why(multi)} if multi else None,
                  bisection={"named": ", ".join(bis["slow_hosts"] + bis["slow_links"]) or
                             "no single host or link", "pairs": list(bis["pairs"].items())} if bis else None,
                  across=across_table(records), collectives=collectives_figure(records))


ACROSS = (("multinode_allgather_busbw", "all-gather"), ("multinode_reduce_scatter_busbw", "reduce-scatter"),
          ("multinode_alltoall_busbw", "all-to-all"), ("rail_alltoall_busbw", "all-to-all, slowest rail"),
          ("multinode_sendrecv_busbw", "send/recv"), ("multinode_collectives_correct", "exact"))


def across_table(records: list[dict]) -> str:
    """Each collective across nodes beside the all-reduce: its verdict and figure, one row each."""
    got = {r["criterion"]: r for r in records if r["criterion"] in dict(ACROSS)}
    if not got:
        return ""

    def figure(r):
        m = r.get("measured")
        return f"{readable(m)} {r.get('unit') or ''}" if isinstance(m, (int, float)) else (m or why(r))
    return render("network/across.jinja2", rows=[
        {"cls": status_class(r["status"]), "what": what, "status": r["status"], "figure": figure(r),
         "expected": r.get("expected")} for c, what in ACROSS if (r := got.get(c))])


def collectives_figure(records: list[dict]) -> str:
    """The collectives of the multi-node all-reduce's run, each rail's all-to-all among them, drawn
    beside its all-reduce curve (the details of multinode_collectives_correct and the all-to-all)."""
    from signoff.interconnect.plots import collectives_chart
    got = {r["criterion"]: r.get("details") or {} for r in records
           if r["criterion"] in ("multinode_collectives_correct", "multinode_alltoall_busbw")}
    ops = dict(got.get("multinode_collectives_correct", {}).get("ops") or {})
    if not ops:
        return ""
    if got.get("multinode_alltoall_busbw", {}).get("allreduce_rows"):
        ops["allreduce"] = got["multinode_alltoall_busbw"]["allreduce_rows"]
    rails = (got["multinode_collectives_correct"].get("rails") or {}).get("alltoall") or {}
    # a rail's key is the probe's word: numbers in their order, anything else after them by name
    ops.update({f"all-to-all, rail {r}": rows for r, rows in sorted(
        rails.items(), key=lambda kv: (not str(kv[0]).isdigit(), int(kv[0]) if str(kv[0]).isdigit() else 0,
                                       str(kv[0])))})
    return img(collectives_chart("all hosts", ops, None, "collectives across nodes"),
               "collectives across nodes beside the all-reduce")


def why(r: dict) -> str:
    """A record's message without its status said again (N.A.'s own prefix)."""
    return (r.get("message") or "").removeprefix(NA_PREFIX).strip()


def pair_figure(pairs: list[dict], pct: bool) -> str:
    """Sender x receiver matrix of throughput (% of line rate where the NIC has a real one,
    else Gb/s); above MATRIX_HOSTS hosts, the distribution over the pairs."""
    plt = pyplot()
    import numpy as np

    val = {tuple(r["host"].split("->")): (100 * r["details"]["fraction"] if pct else r["details"]["gbps"])
           for r in pairs if r["details"].get("gbps") is not None and "->" in r["host"]}
    what = "% of line rate" if pct else "Gb/s (no real line rate: veth or unknown)"
    hosts = sorted({h for k in val for h in k})
    if not val:
        return ""
    if len(hosts) > MATRIX_HOSTS:
        fig, ax = plt.subplots(figsize=(6.5, 3))
        ax.hist(list(val.values()), bins=40)
        ax.set_xlabel(what)
        ax.set_ylabel("host pairs")
        ax.set_title(f"{len(val)} host pairs over {len(hosts)} hosts", fontsize=10)
        return png(fig)
    m = np.full((len(hosts), len(hosts)), np.nan)
    for (a, b), v in val.items():
        m[hosts.index(a), hosts.index(b)] = v
    n = len(hosts)
    fig, ax = plt.subplots(figsize=(2 + 0.5 * n, 1.6 + 0.45 * n))
    # red to green only on a share of line rate; plain Gb/s has no "good" end to colour
    im = ax.imshow(m, cmap="RdYlGn" if pct else "viridis", vmin=0, vmax=100 if pct else None)
    for i in range(n):
        for j in range(n):
            if not np.isnan(m[i, j]):
                ax.text(j, i, f"{m[i, j]:.0f}" if pct else f"{m[i, j]:.3g}", ha="center", va="center",
                        fontsize=7)
    ax.set_xticks(range(n), hosts, rotation=60, fontsize=7)
    ax.set_yticks(range(n), hosts, fontsize=7)
    ax.set_xlabel("receiver")
    ax.set_ylabel("sender")
    ax.set_title(f"host pair throughput, {what}", fontsize=9)
    fig.colorbar(im, ax=ax, shrink=0.8)
    return png(fig)


def methodology(doc: dict, profile) -> list[dict]:
    pair = next((r["details"] for r in doc["results"]
                 if r["criterion"] == "net_pair_bandwidth" and r.get("details")), {})

    def attempts(name):
        t = profile.criteria.get(name) if profile else None
        return retry.count(t) if t else retry.ATTEMPTS
    return [{"check": "nic_link, nic_rate", "tool": "sysfs (/sys/class/net, /sys/class/infiniband)",
             "how": "every port's state and rate as the kernel reports it"},
            {"check": "net_pair_bandwidth",
             "tool": f"{pair.get('tool') or 'iperf3, ib_write_bw (perftest) or the built-in TCP probe'}"
                     + (f" {pair['version']}" if pair.get("version") else ""),
             "how": f"sender -> receiver over the data interface, {pair.get('streams') or 'the profile`s'} "
                    f"parallel streams for {pair.get('duration') or '(profile)'} s; pairs: a ring "
                    f"(each host to the next) or all pairs in rounds, each host in one pair at a time; "
                    f"judged in Gb/s (1e9 bit/s) or as a share of the slower NIC's line rate; a pair "
                    f"that misses is measured again after the first pass, in disjoint rounds, up to "
                    f"{attempts('net_pair_bandwidth')} attempts in all, the best judged"},
            {"check": "multinode_allreduce", "tool": "torch.distributed across hosts (NCCL, gloo on CPU)",
             "how": "one rank per GPU on every host, the all-reduce sweep as above; a low busbw is "
                    f"run again up to {attempts('multinode_allreduce_busbw')} attempts in all, the best "
                    "judged; still low, it is bisected by 2-host all-reduces per ring pair to name the "
                    "slow host or link"},
            {"check": "multinode_allgather_busbw, multinode_reduce_scatter_busbw, multinode_alltoall_busbw, "
                      "multinode_sendrecv_busbw, rail_alltoall_busbw, multinode_collectives_correct",
             "tool": "the multi-node all-reduce's probe run (probe_allreduce --op ... --rail-split alltoall)",
             "how": "after the all-reduce, in the same rendezvous: all-gather, reduce-scatter, all-to-all "
                    "and send/recv over every rank (nccl-tests' sizes and busbw factors), then "
                    "the all-to-all inside each rail (the ranks of one "
                    "local index on every node, every rail at once: nccl-tests' "
                    "NCCL_TESTS_SPLIT=\"MOD <ranks per node>\"); judged at the all-reduce's size; below the "
                    "floor, the 2-host runs of the "
                    "all-reduce's bisection (which measure the same collectives) name the slow host or link, "
                    "per rail; every output checked exactly, a wrong one naming the host of each rank "
                    "whose output was wrong"}]
