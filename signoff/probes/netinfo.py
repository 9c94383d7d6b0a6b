#!/usr/bin/env python3
"""Host-side probe: network ports and their line rates.

Ethernet from /sys/class/net/*/{speed,operstate,mtu}; InfiniBand/RoCE from
/sys/class/infiniband/*/ports/*/{rate,state,link_layer}; IPv4 addresses per interface;
whether iperf3 / ib_write_bw are installed. One JSON document.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys


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
            for name in os.listdir("/sys/class/net"):
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    try:
                        raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
                        out[name] = [socket.inet_ntoa(raw[20:24])]
                    except OSError:
                        pass
        except Exception:  # noqa: BLE001
            pass
    return out


def ethernet(addrs):
    ports = []
    for name in sorted(os.listdir("/sys/class/net")):
        base = "/sys/class/net/" + name
        speed = read(base + "/speed")
        try:
            speed = int(speed) if speed is not None and int(speed) > 0 else None
        except ValueError:
            speed = None  # reading speed of a down link raises EINVAL: unknown
        ports.append({"name": name, "operstate": read(base + "/operstate"),
                      "speed_mbps": speed, "mtu": int(read(base + "/mtu") or 0),
                      "addresses": addrs.get(name, []),
                      "virtual": not os.path.exists(base + "/device")})
    return ports


def infiniband():
    ports, root = [], "/sys/class/infiniband"
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
