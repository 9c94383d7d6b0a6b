"""A host's lossless-RoCE settings and counters, cheaply (no traffic): for every RDMA port
(/sys/class/infiniband/<dev>/ports/<n>) its link layer and, on Ethernet (RoCE), its netdev's
PFC per priority and trust mode (`mlnx_qos -i <netdev>` where MLNX_OFED's tool is installed,
else the kernel's DCB: `dcb pfc show`, the qos/trust sysfs file or `dcb app show`, as mlnx_qos
itself reads trust), ECN for RoCE per priority (/sys/class/net/<netdev>/ecn/roce_np|roce_rp/
enable/<prio>) and the counters a lossy fabric grows (`ethtool -S <netdev>`: per-priority
pause frames, physical discards; the port's RDMA hw_counters: CNPs, out-of-sequence, sequence
errors).

Shipped to every host as roce.py; sysinfo's preflight() loads it beside itself and calls read()
(the settings and the counters at the run's start); `roce.py counters` prints the counters alone
(the end of the run). Stdlib only; nothing here raises: what could not be read says why."""

import json
import os
import re
import subprocess
import sys
import time

SYS = os.environ.get("SIGNOFF_SYSFS", "/sys")  # tests read a recorded sysfs (no ConnectX here)
MAX_PORTS = 64  # whatever the host has: the document stays bounded
MAX_OUT = 1 << 20  # a tool's output read, at most
PRIOS = range(8)
# ethtool -S names watched (mlx5: NVIDIA's "Understanding mlx5 ethtool Counters"); per priority
# the pause frames, per port the physical discards
ETHTOOL = re.compile(r"^\s*((?:rx|tx)_prio[0-7]_pause|rx_discards_phy|tx_discards_phy|"
                     r"np_cnp_sent|rp_cnp_handled|out_of_sequence|packet_seq_err):\s*(\d{1,20})\s*$")
# the RDMA port's hw_counters (mlx5 RoCE: CNPs sent and handled, packets out of sequence, NAK
# sequence errors) where the kernel keeps them, not in ethtool -S
HW_COUNTERS = ("np_cnp_sent", "rp_cnp_handled", "out_of_sequence", "packet_seq_err")


def _read(path, limit=4096):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit).strip()
    except (OSError, ValueError):
        return None


def _ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _run(argv, timeout=5):
    """(stdout, None) or (None, why): a tool missing, refused or slow is said, never raised."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return None, "%s: %s" % (argv[0], str(exc)[:200])
    if r.returncode != 0:
        return None, "%s exit %d: %s" % (argv[0], r.returncode, (r.stderr or r.stdout).strip()[:200])
    return r.stdout[:MAX_OUT], None


def _word(text, n=20):
    """A host's word, bounded (the judge makes it inert where it is shown)."""
    return None if text is None else str(text)[:n]


def parse_mlnx_qos(text):
    """mlnx_qos -i's trust state and PFC enables (Mellanox/mlnx-tools python/mlnx_qos pretty_print:
    'Priority trust state: dscp'; 'PFC configuration:' then 'priority 0 1 ... 7' and 'enabled 0 0
    0 1 ...', tabs or not as its versions print them): (trust, [8 x 0/1] or None)."""
    trust, pfc, in_pfc = None, None, False
    for line in (text or "").splitlines():
        s = line.strip()
        m = re.match(r"Priority trust (?:state|mode):\s*(\S+)", s)
        if m:
            trust = _word(m.group(1))
        if s.startswith("PFC configuration"):
            in_pfc = True
        elif in_pfc and s.startswith("enabled"):
            vals = s.split()[1:9]
            if len(vals) == 8 and all(v in ("0", "1") for v in vals):
                pfc = [int(v) for v in vals]
            in_pfc = False
    return trust, pfc


def parse_dcb_pfc(text):
    """iproute2's `dcb pfc show dev X`: 'prio-pfc 0:off 1:off 2:off 3:on ...' -> [8 x 0/1] or None."""
    m = re.search(r"prio-pfc((?:\s+[0-7]:(?:on|off)){8})", text or "")
    if not m:
        return None
    got = dict(tok.split(":") for tok in m.group(1).split())
    return [int(got.get(str(p)) == "on") for p in PRIOS]


def parse_dcb_trust(text):
    """`dcb app show dev X`: DSCP entries in the APP table ('dscp-prio ...') mean trust dscp, none
    pcp (mlnx_qos's own rule where the qos/trust sysfs file is absent: Trust.getTrust)."""
    if text is None:
        return None
    return "dscp" if "dscp-prio" in text else "pcp"


def parse_ethtool(text):
    """ethtool -S's watched counters: {name: int}; every other line (a host's own text) ignored."""
    out = {}
    for line in (text or "").splitlines()[:20000]:
        m = ETHTOOL.match(line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _netdev(dev, port):
    """The port's netdev: its GID table's (RoCE), else the PCI function's only net device."""
    nd = _read("%s/class/infiniband/%s/ports/%s/gid_attrs/ndevs/0" % (SYS, dev, port), 64)
    if nd:
        return nd
    nets = _ls("%s/class/infiniband/%s/device/net" % (SYS, dev))
    return nets[0] if len(nets) == 1 else None


def ecn(netdev):
    """{'roce_np': [8 x 0/1/None], 'roce_rp': [...]}: None where the file is absent or unreadable."""
    out = {}
    for point in ("roce_np", "roce_rp"):
        vals = []
        for p in PRIOS:
            v = _read("%s/class/net/%s/ecn/%s/enable/%d" % (SYS, netdev, point, p), 16)
            vals.append(int(v) if v in ("0", "1") else None)
        out[point] = vals
    return out


def qos(netdev, run=_run):
    """The port's trust and PFC, and which tool said each (or why none could)."""
    out = {"trust": None, "trust_from": None, "pfc": None, "pfc_from": None, "qos_error": None}
    text, why = run(["mlnx_qos", "-i", netdev])
    if text is not None:
        trust, pfc = parse_mlnx_qos(text)
        out.update(trust=trust, trust_from="mlnx_qos" if trust else None,
                   pfc=pfc, pfc_from="mlnx_qos" if pfc else None)
    errors = [why] if why else []
    if out["pfc"] is None:
        text, why2 = run(["dcb", "pfc", "show", "dev", netdev])
        out["pfc"] = parse_dcb_pfc(text)
        out["pfc_from"] = "dcb pfc" if out["pfc"] else None
        errors += [why2] if why2 else []
    if out["trust"] is None:
        sysfs = _read("%s/class/net/%s/qos/trust" % (SYS, netdev), 32)
        if sysfs:
            out.update(trust=_word(sysfs), trust_from="sysfs qos/trust")
        else:
            text, why3 = run(["dcb", "app", "show", "dev", netdev])
            out["trust"] = parse_dcb_trust(text)
            out["trust_from"] = "dcb app" if out["trust"] else None
            errors += [why3] if why3 else []
    if out["pfc"] is None or out["trust"] is None:
        out["qos_error"] = "; ".join(errors)[:400] or "no PFC or trust line in the tools' output"
    return out


def counters(dev, port, netdev, run=_run):
    """The port's watched counters now: ethtool -S's, then the RDMA hw_counters it lacks."""
    text, why = run(["ethtool", "-S", netdev])
    got = parse_ethtool(text)
    for name in HW_COUNTERS:
        if name not in got:
            v = _read("%s/class/infiniband/%s/ports/%s/hw_counters/%s" % (SYS, dev, port, name), 32)
            if v is not None and v.isdigit() and len(v) <= 20:
                got[name] = int(v)
    return {"counters": got, "counters_error": why}


def ports(run=_run, settings=True):
    """Every RDMA port with its link layer; on Ethernet its netdev, settings and counters."""
    out = []
    root = SYS + "/class/infiniband"
    for dev in _ls(root)[:MAX_PORTS]:
        for port in _ls("%s/%s/ports" % (root, dev))[:8]:
            layer = _read("%s/%s/ports/%s/link_layer" % (root, dev, port), 32)
            p = {"port": _word("%s/%s" % (dev, port), 80), "link_layer": _word(layer)}
            if layer == "Ethernet":
                nd = _netdev(dev, port)
                p["netdev"] = _word(nd, 40)
                if nd and settings:
                    p.update(qos(nd, run))
                    p["ecn"] = ecn(nd)
                if nd:
                    p.update(counters(dev, port, nd, run))
            out.append(p)
            if len(out) >= MAX_PORTS:
                return out
    return out


def read(run=_run):
    return {"probe": "roce", "t": round(time.time(), 1), "ports": ports(run)}


def counters_now(run=_run):
    """`roce.py counters`: the Ethernet ports' counters alone, for the end of the run."""
    return {"probe": "roce counters", "t": round(time.time(), 1),
            "ports": [{k: p.get(k) for k in ("port", "netdev", "counters", "counters_error")}
                      for p in ports(run, settings=False) if p.get("link_layer") == "Ethernet"]}


def main():
    print(json.dumps(counters_now() if sys.argv[1:2] == ["counters"] else read()))


if __name__ == "__main__":
    main()
