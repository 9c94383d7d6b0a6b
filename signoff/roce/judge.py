"""Pure judgements of a host's lossless-RoCE facts (facts["preflight"]["roce"], probe_roce.py):
PFC, ECN and trust on every Ethernet RDMA port, the same settings on every host, and the loss and
congestion counters over the run. Each returns a Verdict the acceptance test records; the
preflight and the network family's cause text use the same functions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from signoff.printable import printable

PFC_CAUSE = ("PFC not enabled on the RoCE priority of the port's netdev (mlnx_qos -i <netdev> --pfc "
             "0,0,0,1,0,0,0,0 for priority 3, or the site's tool): RoCE traffic on that priority is "
             "dropped under congestion instead of paused, and every drop costs a go-back-N retransmission")
ECN_CAUSE = ("ECN for RoCE off on the priority (echo 1 > /sys/class/net/<netdev>/ecn/roce_np/enable/<prio> "
             "and roce_rp/enable/<prio>, or the site's tool): no CNP is sent or acted on, so DCQCN never "
             "slows a sender and congestion turns into PFC pauses that spread")
TRUST_CAUSE = ("the port classifies by another field than the fabric marks (mlnx_qos -i <netdev> --trust "
               "dscp|pcp): RoCE packets land on a priority without PFC")
UNIFORM_CAUSE = ("a host set up by hand or left out of the site's QoS configuration (its NIC settings "
                 "reset by a firmware update, a reboot without the service that applies them)")
LOSS_CAUSE = ("packets lost on the lossless priority: PFC off or misconfigured on a port or switch on the "
              "path, buffers too small for the cable length, or a congested link without ECN")


# where the per-priority enables are absent: they are MLNX_OFED's (DOCA-OFED's) sysfs; the kernel's
# own mlx5 driver keeps RoCE congestion control's parameters in debugfs (drivers/infiniband/hw/mlx5/
# cong.c: mlx5/<pci>/cc_params, rp_* and np_*), with no per-priority enable to read
ECN_INBOX = ("/sys/class/net/<netdev>/ecn/roce_np|roce_rp/enable/<prio> are MLNX_OFED's sysfs; the inbox "
             "mlx5 driver has none (its DCQCN parameters are in debugfs mlx5/<pci>/cc_params, Linux "
             "drivers/infiniband/hw/mlx5/cong.c): install MLNX_OFED/DOCA-OFED, or a site profile without "
             "roce_ecn where ECN is set elsewhere")


@dataclass
class Verdict:
    """`na` (why it does not apply) or `error` (why it cannot be judged), else the figure and the
    failures (empty: a PASS); `note` is said whatever the status."""
    measured: object = None
    failures: list[str] = field(default_factory=list)
    cause: str = ""
    details: dict = field(default_factory=dict)
    na: str = ""
    error: str = ""
    note: str = ""


def text(v, n: int = 60) -> str:
    """A value a host wrote, inert and bounded (it reaches terminals and pages)."""
    s = printable(v)
    return s if len(s) <= n else s[:n - 3] + "..."


def roce_of(facts) -> dict | None:
    """The host's RoCE facts; where its sysinfo holds none (a recording of an older signoff), what
    sysinfo's own reading of /sys/class/infiniband tells: no RDMA port at all, or InfiniBand ports
    only (N.A. either way); None where it saw an Ethernet RDMA port it cannot judge (ERROR)."""
    if not isinstance(facts, dict):
        return None
    r = (facts.get("preflight") or {}).get("roce")
    if isinstance(r, dict) and isinstance(r.get("ports"), list):
        return r
    if "roce" in (facts.get("preflight") or {}):
        return None  # a document of another shape: never read as "no port"
    if (facts.get("counters") or {}).get("infiniband") == {}:
        return {"ports": []}
    nics = (facts.get("gpu_nic") or {}).get("nics")
    if isinstance(nics, list) and nics and all(isinstance(n, dict) and n.get("link_layer") == "InfiniBand"
                                               for n in nics):
        return {"ports": [{"port": n.get("name"), "link_layer": "InfiniBand"} for n in nics]}
    return None


NO_CONGESTION_BOUND = ("pause frames and CNPs not judged: they count congestion PFC and ECN handled, not "
                       "loss, and no public bound exists; a site sets roce_congestion (max, counters) "
                       "from healthy runs of its fabric")
NO_ROCE = ("the host's sysinfo holds no RoCE facts (preflight.roce: a sysinfo of an older signoff, or "
           "roce.py not shipped beside it)")


def ports(doc: dict | None) -> tuple[list[dict], str, str]:
    """(the Ethernet RDMA ports, why none applies (N.A.), why none can be read (ERROR))."""
    if doc is None:
        return [], "", NO_ROCE
    all_ports = [p for p in doc["ports"] if isinstance(p, dict)]
    if not all_ports:
        return [], "no RDMA port (/sys/class/infiniband lists none): no RoCE to judge", ""
    eth = [p for p in all_ports if p.get("link_layer") == "Ethernet"]
    if not eth:
        layers = ", ".join(f"{text(p.get('port'), 30)} {text(p.get('link_layer'), 20)}"
                           for p in all_ports[:8])
        return [], f"its RDMA ports' link layer is not Ethernet ({layers}): lossless RoCE is judged on " \
                   f"Ethernet ports only", ""
    return eth, "", ""


def _name(p: dict) -> str:
    return f"{text(p.get('port'), 30)} ({text(p.get('netdev') or 'no netdev', 30)})"


def _on(vals) -> str:
    got = [str(i) for i, v in enumerate(vals or []) if v == 1]
    return ",".join(got) or "none"


def _gate(doc) -> tuple[list[dict], Verdict | None]:
    eth, na, err = ports(doc)
    if na or err:
        return [], Verdict(na=na, error=err)
    return eth, None


def pfc(doc: dict | None, prio: int) -> Verdict:
    """PFC enabled on `prio` on every Ethernet RDMA port."""
    eth, v = _gate(doc)
    if v:
        return v
    unread = [f"{_name(p)}: {text(p.get('qos_error') or 'no PFC line read', 160)}"
              for p in eth if not isinstance(p.get("pfc"), list) or len(p["pfc"]) != 8]
    if unread:
        return Verdict(error=f"PFC unreadable on {'; '.join(unread)}")
    off = [f"{_name(p)} PFC on priorities {_on(p['pfc'])}, not {prio} (read by {text(p.get('pfc_from'), 20)})"
           for p in eth if p["pfc"][prio] != 1]
    return Verdict(measured=f"{len(eth) - len(off)}/{len(eth)} ports", failures=off, cause=PFC_CAUSE,
                   details={"ports": eth})


def ecn(doc: dict | None, prio: int) -> Verdict:
    """ECN for RoCE (notification and reaction point) enabled on `prio` on every Ethernet RDMA port."""
    eth, v = _gate(doc)
    if v:
        return v
    unread, off = [], []
    for p in eth:
        e = p.get("ecn") if isinstance(p.get("ecn"), dict) else {}
        for point in ("roce_np", "roce_rp"):
            vals = e.get(point) if isinstance(e.get(point), list) and len(e.get(point)) == 8 else None
            if vals is None or vals[prio] not in (0, 1):
                unread.append(f"{_name(p)} {point}/enable/{prio}")
            elif vals[prio] != 1:
                off.append(f"{_name(p)} ECN {point} off on priority {prio} (on: {_on(vals)})")
    if unread and not off:
        return Verdict(error=f"ECN enable files absent or unreadable: {'; '.join(unread)} "
                             f"({ECN_INBOX})")
    bad = {f.split(" ECN")[0] for f in off}
    return Verdict(measured=f"{len(eth) - len(bad)}/{len(eth)} ports", cause=ECN_CAUSE,
                   failures=off + [f"{u} unreadable" for u in unread], details={"ports": eth})


def trust(doc: dict | None, mode: str) -> Verdict:
    """The trust mode (pcp or dscp) the profile names on every Ethernet RDMA port."""
    eth, v = _gate(doc)
    if v:
        return v
    unread = [f"{_name(p)}: {text(p.get('qos_error') or 'no trust line read', 160)}"
              for p in eth if not p.get("trust")]
    if unread:
        return Verdict(error=f"trust mode unreadable on {'; '.join(unread)}")
    off = [f"{_name(p)} trusts {text(p['trust'], 20)}, not {mode}" for p in eth if p["trust"] != mode]
    return Verdict(measured=", ".join(sorted({text(p["trust"], 20) for p in eth})), failures=off,
                   cause=TRUST_CAUSE, details={"ports": eth})


def settings(doc: dict | None) -> str | None:
    """A host's RoCE settings as one line, its ports' distinct settings sorted (ports named alike or
    not on other hosts): None where nothing applies or was read."""
    eth, na, err = ports(doc)
    if na or err:
        return None
    seen = set()
    for p in eth:
        e = p.get("ecn") if isinstance(p.get("ecn"), dict) else {}
        seen.add(f"PFC on {_on(p.get('pfc')) if isinstance(p.get('pfc'), list) else 'unread'}, "
                 f"ECN np {_on(e.get('roce_np'))} rp {_on(e.get('roce_rp'))}, "
                 f"trust {text(p.get('trust') or 'unread', 20)}")
    return " | ".join(sorted(seen))


def uniform(lines: dict[str, str | None], host: str) -> Verdict:
    """`host`'s settings against the majority of the hosts' (lines: host -> settings()). A tie names
    no one; a host alone is N.A. (nothing to compare with)."""
    mine = lines.get(host)
    others = {h: s for h, s in lines.items() if s is not None}
    if mine is None:
        return Verdict(error="its RoCE settings could not be read (see roce_pfc / roce_ecn / roce_trust)")
    if len(others) < 2:
        return Verdict(na="one host with RoCE settings in the run: nothing to compare with")
    counts = Counter(others.values())
    (top, n), *rest = counts.most_common()
    if rest and rest[0][1] == n:
        return Verdict(measured=0, note="no majority among the hosts' RoCE settings: " +
                       "; ".join(f"{s} on {c} host(s)" for s, c in counts.items()))
    if mine == top:
        return Verdict(measured=0)
    same = sorted(h for h, s in others.items() if s == top)
    shown = ", ".join(same[:5]) + (f" and {len(same) - 5} more" if len(same) > 5 else "")
    return Verdict(measured=1, cause=UNIFORM_CAUSE,
                   failures=[f"{host} has {mine}; the other {len(same)} host(s) ({shown}) have {top}"],
                   details={"this": mine, "majority": top, "hosts": len(others)})


def _map(v) -> dict:
    """A counters map as the probe prints it, else none (a host's document of another shape)."""
    return v if isinstance(v, dict) else {}


def _by_port(doc) -> dict[str, dict]:
    return {str(p.get("port")): p for p in (doc or {}).get("ports") or [] if isinstance(p, dict)
            and p.get("link_layer", "Ethernet") == "Ethernet"}


def counter_growth(before: dict | None, after: dict | None, names: list[str], prio: int,
                   allow: float) -> Verdict:
    """The counters `names` ('{p}' for the RoCE priority) of every Ethernet RDMA port, the end of the
    run against its start: each may grow by `allow` at most; one absent or unreadable is an ERROR."""
    eth, v = _gate(before)
    if v:
        return v
    if not isinstance(after, dict) or "error" in after or not isinstance(after.get("ports"), list):
        return Verdict(error=f"the counters at the end of the run could not be read: "
                             f"{text((after or {}).get('error'), 200)}")
    end = _by_port(after)
    grew, unread, worst = [], [], 0
    for p in eth:
        a = end.get(str(p.get("port")))
        b0, a0 = _map(p.get("counters")), _map((a or {}).get("counters"))
        for name in (n.replace("{p}", str(prio)) for n in names):
            b, e = b0.get(name), a0.get(name)
            if not isinstance(b, int) or not isinstance(e, int):
                why = ((a or {}).get("counters_error") or p.get("counters_error")
                       or "not in ethtool -S nor hw_counters")
                unread.append(f"{_name(p)} {name} ({text(why, 100)})")
            elif e < b:
                grew.append(f"{_name(p)} {name} went back from {b} to {e} (reset during the run)")
            elif e - b > allow:
                grew.append(f"{_name(p)} {name} +{e - b} ({b} -> {e})")
            if isinstance(b, int) and isinstance(e, int):
                worst = max(worst, e - b)
    if unread and not grew:
        return Verdict(error=f"counters unreadable: {'; '.join(unread[:8])}")
    return Verdict(measured=worst, failures=grew + [f"{u} unreadable" for u in unread], cause=LOSS_CAUSE,
                   details={"before": {k: p.get("counters") for k, p in _by_port(before).items()},
                            "after": {k: p.get("counters") for k, p in end.items()}})


def likely_cause(all_facts: dict, pfc_prio: int | None, ecn_prio: int | None) -> str:
    """For a slow all-reduce across nodes: the hosts whose RoCE ports miss PFC or ECN on the
    profile's priority, named; '' where none does (or none is RoCE)."""
    bad = []
    for host, facts in sorted(all_facts.items()):
        doc = roce_of(facts)
        for what, prio, fn in (("PFC", pfc_prio, pfc), ("ECN", ecn_prio, ecn)):
            if prio is None:
                continue
            v = fn(doc, prio)
            if v.failures:
                bad.append(f"{host}: {what} off on priority {prio}")
    if not bad:
        return ""
    more = f"; {len(bad) - 6} more" if len(bad) > 6 else ""
    return ("lossless RoCE not configured (" + "; ".join(bad[:6]) + more
            + "): a RoCE fabric without PFC or ECN drops and retransmits under the all-reduce's load")


def slow_fabric_cause(all_facts: dict, profile) -> str:
    """likely_cause() at the profile's RoCE priorities (a profile without them: '')."""
    prio = {c: getattr(profile.criteria.get(c), "value", None) for c in ("roce_pfc", "roce_ecn")}
    return likely_cause(all_facts, prio["roce_pfc"], prio["roce_ecn"])
