#!/usr/bin/env python3
"""Host-side: what the intended build (signoff/intent) is judged on beyond sysinfo's own facts:
the kernel command line, each NIC (one PCI function: an RDMA device and its network interface
are one NIC) with its model as the host's own lspci names it, and each port's LLDP neighbour
where lldpctl runs (read-only: it asks the local lldpd, sends nothing). Shipped as build.py
beside sysinfo.py, whose preflight() calls read(). Stdlib only; never raises.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

SYS = os.environ.get("SIGNOFF_SYSFS", "/sys")  # tests read a recorded sysfs (no NIC here)
PROC = os.environ.get("SIGNOFF_PROCFS", "/proc")  # and a recorded command line
BDF = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
MAX_NICS = 64  # a host's list is its own to lengthen: bounded
TEXT = 120  # any string a host gives, bounded


def _read(path, limit=4096):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit).strip()
    except OSError:
        return None


def _ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _run(cmd, timeout=15):
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - missing, refused, hung: said, never raised
        return None, "%s: %s" % (cmd[0], exc)
    if r.returncode != 0:
        return None, "%s exit %d: %s" % (cmd[0], r.returncode, r.stderr.strip()[:200])
    return r.stdout, None


def cmdline():
    """/proc/cmdline as the kernel was booted (its key=value words are the kernel parameters)."""
    text = _read(PROC + "/cmdline", 8192)
    if text is None:
        return {"text": None, "error": "%s/cmdline unreadable" % PROC}
    return {"text": text, "error": None}


def pci_names():
    """{bdf: (vendor, device)} as lspci names them from the host's own pci.ids; {} without lspci."""
    out, _ = _run(["lspci", "-mm", "-D"])
    names = {}
    for line in (out or "").splitlines():
        try:
            words = shlex.split(line)
        except ValueError:
            continue
        if len(words) >= 4 and BDF.fullmatch(words[0]):
            names[words[0].lower()] = (words[2][:TEXT], words[3][:TEXT])
    return names


def model(vendor_name, device_name, ids):
    """What a NIC is called: the bracketed name of lspci's (`MT2910 Family [ConnectX-7]` ->
    ConnectX-7), else lspci's whole name, else the PCI vendor:device ID (15b3:1021)."""
    if device_name:
        m = re.search(r"\[([^\]]+)\]\s*$", device_name)
        return m.group(1) if m else device_name
    return ids


def nics():
    """One entry per PCI function of an RDMA device or a physical network interface (no VF, no
    virtual interface): its names (mlx5_0, ens1np0), PCI address, vendor:device, model."""
    funcs = {}

    def add(name, devdir):
        real = os.path.realpath(devdir)
        bdf = os.path.basename(real).lower()
        key = bdf if BDF.fullmatch(bdf) else "dev:" + name  # a recorded sysfs may have no PCI path
        f = funcs.setdefault(key, {"pci": bdf if BDF.fullmatch(bdf) else None, "names": [], "dir": devdir})
        f["names"].append(name[:40])

    for dev in _ls(SYS + "/class/infiniband"):
        add(dev, "%s/class/infiniband/%s/device" % (SYS, dev))
    for name in _ls(SYS + "/class/net"):
        base = "%s/class/net/%s" % (SYS, name)
        if not os.path.exists(base + "/device") or os.path.exists(base + "/device/physfn"):
            continue  # virtual (veth, bridge, bond) or a VF: no card of its own
        if os.path.isdir(base + "/device/infiniband"):  # an RDMA device's interface: that NIC
            rdma = _ls(base + "/device/infiniband")
            f = next((f for f in funcs.values() if rdma and rdma[0] in f["names"]), None)
            if f is not None:
                f["names"].append(name[:40])
                continue
        add(name, base + "/device")
    names = pci_names() if funcs else {}
    out = []
    for f in list(funcs.values())[:MAX_NICS]:
        vendor = (_read(f["dir"] + "/vendor", 16) or "").lower().replace("0x", "")
        device = (_read(f["dir"] + "/device", 16) or "").lower().replace("0x", "")
        ids = "%s:%s" % (vendor, device) if vendor and device else None
        vname, dname = names.get(f["pci"] or "", (None, None))
        out.append({"names": f["names"], "pci": f["pci"], "ids": ids, "lspci": dname,
                    "model": model(vname, dname, ids) or (f["names"][0] if f["names"] else None)})
    return out


def _first(v):
    """lldpctl's json0 wraps every value in a list of objects: the first one's value."""
    while isinstance(v, list):
        v = v[0] if v else None
    if isinstance(v, dict):
        v = v.get("value")
    return str(v)[:TEXT] if v is not None else None


def lldp_neighbours(doc):
    """{interface: {"switch": its system name, "port": its port id, "descr": the port's description}}
    of `lldpctl -f json0`'s document (the format lldpd keeps stable across versions)."""
    out = {}
    for top in doc.get("lldp") or []:
        for itf in top.get("interface") or []:
            name = str(itf.get("name") or "")[:40]
            chassis = (itf.get("chassis") or [{}])[0]
            port = (itf.get("port") or [{}])[0]
            if name:
                out[name] = {"switch": _first(chassis.get("name")) or _first(chassis.get("id")),
                             "port": _first(port.get("id")), "descr": _first(port.get("descr"))}
    return out


def lldp():
    """Each port's LLDP neighbour (switch and port) where lldpctl runs; why not, where it does not."""
    if not shutil.which("lldpctl"):
        return {"available": False, "neighbours": {}, "error": "lldpctl not installed (lldpd)"}
    out, why = _run(["lldpctl", "-f", "json0"], timeout=10)
    if out is None:
        return {"available": False, "neighbours": {}, "error": why}
    try:
        return {"available": True, "neighbours": lldp_neighbours(json.loads(out)), "error": None}
    except (ValueError, AttributeError, TypeError, IndexError) as exc:
        return {"available": False, "neighbours": {}, "error": "lldpctl's output not read: %s" % exc}


def read():
    doc = {}
    for key, fn in (("cmdline", cmdline), ("nics", nics), ("lldp", lldp)):
        try:
            doc[key] = fn()
        except Exception as exc:  # noqa: BLE001 - one unreadable part must not lose the others
            doc[key] = {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
    return doc


if __name__ == "__main__":
    json.dump(read(), sys.stdout)
    print()
