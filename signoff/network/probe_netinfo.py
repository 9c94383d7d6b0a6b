#!/usr/bin/env python3
"""Host-side probe: network ports and their line rates.

Ethernet from /sys/class/net/*/{speed,operstate,mtu}; InfiniBand/RoCE from
/sys/class/infiniband/*/ports/*/{rate,state,link_layer}; IPv4 addresses per interface;
whether iperf3 / ib_write_bw are installed; for each interface, the RDMA device and port
behind it (ib_write_bw must measure that card, not perftest's default one). One JSON document.
SIGNOFF_SYSFS names another sysfs root: tests read a fake one (no InfiniBand card there).
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys

SYS = os.environ.get("SIGNOFF_SYSFS", "/sys")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def ipv4_addresses():
    """iface -> [addresses], from `ip -j` where present (stdlib has no portable call)."""
    out = {}
    try:
        doc = json.loads(subprocess.run(["ip", "-j", "-4", "addr"], capture_output=True,
                                        text=True, timeout=10).stdout or "[]")
        for link in doc:
            out[link["ifname"]] = [a["local"] for a in link.get("addr_info", [])]
    except Exception:  # noqa: BLE001
        try:  # fallback: SIOCGIFADDR per interface
            import fcntl
            for name in os.listdir(SYS + "/class/net"):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    try:
                        raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
                        out[name] = [socket.inet_ntoa(raw[20:24])]
                    except OSError:
                        pass
        except Exception:  # noqa: BLE001
            pass
    return out


def rdma_device(name):
    """(device, port) of the RDMA card behind netdev `name`, or (None, None): the PCI
    function's infiniband/ dir, else the card whose device/net/ holds the netdev."""
    base = "%s/class/net/%s" % (SYS, name)
    ibdir = base + "/device/infiniband"
    devs = sorted(os.listdir(ibdir)) if os.path.isdir(ibdir) else []
    root = SYS + "/class/infiniband"
    if not devs and os.path.isdir(root):
        devs = [d for d in sorted(os.listdir(root)) if os.path.isdir("%s/%s/device/net/%s" % (root, d, name))]
    if not devs:
        return None, None
    # dev_port: 0-based port of a multi-port card (IB ports count from 1)
    try:
        port = int(read(base + "/dev_port") or 0) + 1
    except ValueError:
        port = 1
    return devs[0], port


def ethernet(addrs):
    ports = []
    for name in sorted(os.listdir(SYS + "/class/net")):
        base = SYS + "/class/net/" + name
        speed = read(base + "/speed")
        try:
            speed = int(speed) if speed is not None and int(speed) > 0 else None
        except ValueError:
            speed = None  # reading speed of a down link raises EINVAL: unknown
        ib_device, ib_port = rdma_device(name)
        ports.append({"name": name, "operstate": read(base + "/operstate"),
                      "speed_mbps": speed, "mtu": int(read(base + "/mtu") or 0),
                      "addresses": addrs.get(name, []),
                      "virtual": not os.path.exists(base + "/device"),
                      "ib_device": ib_device, "ib_port": ib_port})
    return ports


def infiniband():
    ports, root = [], SYS + "/class/infiniband"
    if not os.path.isdir(root):
        return ports
    for dev in sorted(os.listdir(root)):
        for port in sorted(os.listdir("%s/%s/ports" % (root, dev))):
            base = "%s/%s/ports/%s" % (root, dev, port)
            rate = read(base + "/rate") or ""  # e.g. "400 Gb/sec (4X NDR)"
            try:
                gbps = float(rate.split()[0])
            except (ValueError, IndexError):
                gbps = None
            ports.append({"device": dev, "port": int(port), "rate": rate, "rate_gbps": gbps,
                          "state": read(base + "/state"),  # e.g. "4: ACTIVE"
                          "link_layer": read(base + "/link_layer")})
    return ports


def main():
    addrs = ipv4_addresses()
    doc = {"probe": "netinfo", "ethernet": ethernet(addrs), "infiniband": infiniband(),
           "tools": {t: bool(shutil.which(t)) for t in ("iperf3", "ib_write_bw")}}
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
