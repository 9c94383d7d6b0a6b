"""The machine's form, cheaply (no measurement, < 0.2 s): bare metal, a VM, a container (or a VM
and a container at once), each decided by strong markers only (weak ones are kept as hints), who
the probes run as, the kernel log's access, /dev/shm, the locked-memory limit, the CPUs and NUMA
nodes the probes may use, the GPUs the environment lets CUDA see, the NICs and the storage path's
disk as the provider gives them.

Shipped to every host as form.py; sysinfo's preflight() loads it beside itself and calls read();
run alone it prints the same document. Stdlib only; every read is guarded: nothing here raises."""

import errno
import json
import os
import re
import sys

SYS = os.environ.get("SIGNOFF_SYSFS", "/sys")
PROC = "/proc"
ROOT = "/"  # where /.dockerenv and /run/.containerenv are looked for (tests point it elsewhere)
# DMI's sys_vendor / product_name of the common hypervisors and clouds -> the VM's name (hints only:
# the clouds' bare-metal instances carry the same strings)
DMI_VM = (("QEMU", "kvm"), ("KVM", "kvm"), ("Amazon EC2", "amazon"), ("Google Compute Engine", "google"),
          ("Virtual Machine", "microsoft"),  # Hyper-V's product name (its vendor also makes laptops)
          ("VMware", "vmware"), ("Xen", "xen"), ("innotek", "oracle"), ("VirtualBox", "oracle"),
          ("OpenStack", "kvm"), ("Parallels", "parallels"), ("Bochs", "bochs"), ("Alibaba Cloud", "kvm"))
# cgroup path words of the container runtimes
CGROUP = (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
          ("containerd", "containerd"), ("lxc", "lxc"))
VIRTUAL_NICS = ("virtio_net", "ena", "gve", "hv_netvsc", "vmxnet3", "veth", "bridge", "xen-netfront",
                "tun", "macvlan", "ipvlan", "vxlan", "dummy")
DISK_DRIVERS = {"virtio_blk": "virtual", "virtio_scsi": "virtual", "xen-blkfront": "virtual",
                "hv_storvsc": "virtual", "vmw_pvscsi": "virtual", "nvme": "local nvme"}
NETWORK_FS = ("nfs", "lustre", "gpfs", "beegfs", "cifs", "smb", "ceph", "glusterfs", "wekafs", "9p",
              "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse", "virtiofs")
RAM_FS = ("tmpfs", "ramfs")
MAX_LIST = 256  # NICs, GPU device nodes: bounded, whatever the host has


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


def _link(path):
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def cpulist(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; None where unreadable."""
    if text is None:
        return None
    out = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, _, hi = part.partition("-")
            out += range(int(lo), int(hi or lo) + 1)
    except ValueError:
        return None
    return out[:4096]


def vm():
    """A VM only by the kernel's own view: the CPU's hypervisor flag (CPUID's hypervisor bit, which
    bare metal never sets), or systemd-detect-virt --vm naming one. DMI's vendor and virtio devices
    are hints, kept but never deciding: "Amazon EC2" / "Google Compute Engine" are also those clouds'
    bare-metal (.metal) instances' DMI, and a BlueField DPU emulating virtio-net / virtio-blk (SNAP)
    puts 0x1af4 devices on bare metal. Reading bare metal as a VM turns its missing DCGM from an
    ERROR into UNSEEN and lets --profile auto pick a slice: the unsafe way to be wrong."""
    by, hints, hinted = [], [], None
    flags = _read(PROC + "/cpuinfo", 1 << 16) or ""
    if re.search(r"^flags\s*:.*\bhypervisor\b", flags, re.M):
        by.append("cpuinfo: hypervisor flag")
    for key in ("sys_vendor", "product_name"):
        val = _read("%s/class/dmi/id/%s" % (SYS, key), 200)
        for word, vm_name in DMI_VM if val else ():
            if word.lower() in val.lower():
                hints.append("dmi: %s" % val[:80])
                hinted = hinted or vm_name
                break
    virtio = [d for d in _ls(SYS + "/bus/pci/devices")
              if _read("%s/bus/pci/devices/%s/vendor" % (SYS, d), 16) == "0x1af4"]
    if virtio:
        hints.append("pci: %d virtio device(s)" % len(virtio))
        hinted = hinted or "kvm"
    detected = _detect_virt("--vm")
    if detected and detected != "none":
        by.append("systemd-detect-virt: %s" % detected)
    if not by:
        return {"name": None, "by": [], "hints": hints}
    # the name: systemd's where it has one beyond plain kvm, else the hints' (DMI's cloud, virtio's kvm)
    name = detected if detected not in (None, "none", "kvm") else hinted or detected
    return {"name": None if name == "none" else name, "by": by, "hints": hints}


def _detect_virt(flag):
    """systemd-detect-virt's answer where it is installed (never required), else None."""
    import shutil
    import subprocess
    exe = shutil.which("systemd-detect-virt")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, flag], capture_output=True, text=True, timeout=2).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[:40] or None


def container():
    by, name = [], None
    if os.path.exists(os.path.join(ROOT, ".dockerenv")):
        by.append("/.dockerenv")
        name = "docker"
    if os.path.exists(os.path.join(ROOT, "run/.containerenv")):
        by.append("/run/.containerenv")
        name = name or "podman"
    marker = _read(os.path.join(ROOT, "run/systemd/container"), 80)
    if marker:
        by.append("/run/systemd/container: %s" % marker)
        name = name or marker
    env = None
    try:
        with open(PROC + "/1/environ", "rb") as f:
            env = f.read(1 << 16)
    except OSError:
        pass
    m = re.search(rb"(?:^|\0)container=([^\0]{1,40})", env or b"")
    if m:
        val = m.group(1).decode(errors="replace")
        by.append("pid 1: container=%s" % val)
        name = name or val
    cg = _read(PROC + "/self/cgroup", 1 << 14) or ""
    for word, runtime in CGROUP:
        line = next((ln for ln in cg.splitlines() if word in ln.split(":", 2)[-1]), None)
        if line:
            by.append("cgroup: %s" % line.split(":", 2)[-1][:80])
            name = name or runtime
            break
    detected = _detect_virt("--container")
    if detected and detected != "none":
        by.append("systemd-detect-virt: %s" % detected)
        name = name or detected
    # KUBERNETES_SERVICE_HOST is a hint, never a decider: it is only an inherited environment
    # variable (any login profile or job launcher may export it; sshd passes none of a pod's), and
    # it says nothing of the probe's own namespaces. Reading bare metal as a container turns an
    # ERROR into UNSEEN; missing a pod leaves an ERROR, which is the safe way to be wrong.
    hints = ["KUBERNETES_SERVICE_HOST"] if os.environ.get("KUBERNETES_SERVICE_HOST") else []
    if hints and by:
        name = "kubernetes" if name in (None, "containerd", "docker") else name
    return {"name": name if by else None, "by": by, "hints": hints}


def kernel_log():
    """Whether this user can read the kernel's ring buffer (the XID checks' dmesg): /dev/kmsg
    opened without blocking, else the syslog(2) call dmesg makes (its size, nothing read)."""
    restrict = _read(PROC + "/sys/kernel/dmesg_restrict", 8)
    who = "root" if os.geteuid() == 0 else "not root"
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
        os.close(fd)
        return {"readable": True, "why": None}
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENODEV):
            why = "/dev/kmsg: %s" % os.strerror(exc.errno)
            if exc.errno in (errno.EPERM, errno.EACCES) and restrict == "1":
                why += " (kernel.dmesg_restrict=1 and %s, without CAP_SYSLOG)" % who
            return {"readable": False, "why": why}
    try:  # no /dev/kmsg (a container's /dev): ask the kernel as dmesg would
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.klogctl(10, None, 0) >= 0:  # SYSLOG_ACTION_SIZE_BUFFER
            return {"readable": True, "why": None}
        err = ctypes.get_errno()
        why = "no /dev/kmsg, and syslog(2): %s" % os.strerror(err)
        if err in (errno.EPERM, errno.EACCES):
            why += " (kernel.dmesg_restrict=%s, %s: a container without CAP_SYSLOG)" % (restrict, who)
        return {"readable": False, "why": why}
    except (OSError, AttributeError, TypeError) as exc:
        return {"readable": False, "why": "no /dev/kmsg, and syslog(2) not callable: %s" % exc}


def shm(path="/dev/shm"):
    try:
        s = os.statvfs(path)
        return {"path": path, "bytes": s.f_blocks * s.f_frsize, "error": None}
    except OSError as exc:
        return {"path": path, "bytes": None, "error": "%s: %s" % (path, exc.strerror or exc)}


def memlock():
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        inf = resource.RLIM_INFINITY
        return {"soft": None if soft == inf else soft, "hard": None if hard == inf else hard}
    except (ImportError, OSError, ValueError, AttributeError):
        return {"soft": None, "hard": None, "error": "RLIMIT_MEMLOCK unreadable"}


def cpus_allowed():
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def numa_cpus():
    out = {}
    for node in _ls(SYS + "/devices/system/node"):
        if re.fullmatch(r"node\d+", node):
            cpus = cpulist(_read("%s/devices/system/node/%s/cpulist" % (SYS, node), 1 << 14))
            if cpus is not None:
                out[node[4:]] = cpus
    return out


def gpu_numa():
    """Each NVIDIA GPU's NUMA node by its PCI address (sysfs numa_node; -1: none reported, None)."""
    out = {}
    for dev in _ls(SYS + "/bus/pci/devices"):
        base = "%s/bus/pci/devices/%s" % (SYS, dev)
        gpu = (_read(base + "/class", 16) or "").startswith("0x03")  # display or 3D controller
        if _read(base + "/vendor", 16) != "0x10de" or not gpu:
            continue
        node = _read(base + "/numa_node", 16)
        try:
            out[dev] = int(node) if node is not None and int(node) >= 0 else None
        except ValueError:
            out[dev] = None
    return out


def visible():
    nodes = sorted(int(n[6:]) for n in _ls("/dev") if re.fullmatch(r"nvidia\d+", n))[:MAX_LIST]
    out = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "NVIDIA_VISIBLE_DEVICES": os.environ.get("NVIDIA_VISIBLE_DEVICES"), "dev_nodes": nodes,
           "cuda_devices": None}
    torch = sys.modules.get("torch")  # sysinfo imported it already on a GPU host: never import it here
    if torch is not None:
        try:
            if torch.cuda.is_available():
                out["cuda_devices"] = int(torch.cuda.device_count())
        except Exception:  # noqa: BLE001 - a broken CUDA: the GPU checks say why
            pass
    return out


def nics():
    out = []
    for name in _ls(SYS + "/class/net"):
        if name == "lo":
            continue
        base = "%s/class/net/%s" % (SYS, name)
        driver = _link(base + "/device/driver")
        if driver is None and os.path.isdir(base + "/bridge"):
            driver = "bridge"
        elif driver is None and "DEVTYPE=" in (_read(base + "/uevent") or ""):
            driver = re.search(r"DEVTYPE=(\S+)", _read(base + "/uevent")).group(1)[:20]
        speed = _read(base + "/speed", 16)
        try:
            speed = int(speed) if speed is not None and int(speed) > 0 else None
        except ValueError:
            speed = None
        out.append({"name": name[:40], "driver": driver, "speed_mbps": speed,
                    "virtual": not os.path.exists(base + "/device") or driver in VIRTUAL_NICS,
                    "vf": os.path.exists(base + "/device/physfn")})
        if len(out) >= MAX_LIST:
            break
    return out


def _mount_of(path):
    """The mountinfo line that holds `path`: (major, minor, fstype, source)."""
    real = os.path.realpath(path)
    best, best_mp = None, ""
    try:
        with open(PROC + "/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                a, b = left.split(), right.split()
                mp = a[4].encode().decode("unicode_escape")
                if (real == mp or real.startswith(mp.rstrip("/") + "/")) and len(mp) >= len(best_mp):
                    major, _, minor = a[2].partition(":")
                    best, best_mp = (int(major), int(minor), b[0], b[1] if len(b) > 1 else ""), mp
    except (OSError, IndexError, ValueError):
        return None
    return best


def _block(major, minor, source):
    """The whole disk's sysfs dir of a block device: a partition's parent; a mapper's first slave."""
    if major == 0 and source.startswith("/dev/"):  # btrfs and friends: the source's own numbers
        try:
            st = os.stat(source)
            major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        except OSError:
            return None
    dev = os.path.realpath("%s/dev/block/%d:%d" % (SYS, major, minor))
    for _ in range(4):
        if not os.path.isdir(dev):
            return None
        if os.path.exists(dev + "/partition"):
            dev = os.path.dirname(dev)
            continue
        slaves = _ls(dev + "/slaves")
        if slaves:  # device mapper, md: the disk underneath
            dev = os.path.realpath("%s/class/block/%s" % (SYS, slaves[0]))
            continue
        return dev
    return dev


def disk(path):
    out = {"path": path, "device": None, "driver": None, "rotational": None, "model": None, "kind": None}
    m = _mount_of(path or "/")
    if m is None:
        return out
    major, minor, fstype, source = m
    if fstype in RAM_FS:
        out["kind"] = "ram"
        return out
    if fstype.startswith(NETWORK_FS):
        out["kind"] = "network"
        return out
    dev = _block(major, minor, source)
    if not dev:
        return out
    out["device"] = os.path.basename(dev)[:40]
    driver = _link(dev + "/device/driver") or _link(dev + "/device/device/driver")
    out["driver"] = driver
    rot = _read(dev + "/queue/rotational", 4)
    out["rotational"] = None if rot not in ("0", "1") else rot == "1"
    model = _read(dev + "/device/model", 120)
    out["model"] = model[:80] if model else None
    if driver in DISK_DRIVERS or out["device"].startswith(("vd", "xvd")):
        out["kind"] = DISK_DRIVERS.get(driver) or "virtual"
    elif out["device"].startswith("nvme"):
        out["kind"] = "local nvme"
    elif out["rotational"] is not None:
        out["kind"] = "local hdd" if out["rotational"] else "local ssd"
    return out


def read(storage_path=None):
    """The form document (docs/outputs.md); any part that fails says so in place of its facts."""
    doc = {}
    parts = (("vm", vm), ("container", container), ("kernel_log", kernel_log), ("shm", shm),
             ("memlock", memlock), ("cpus_allowed", cpus_allowed), ("numa_cpus", numa_cpus),
             ("gpu_numa", gpu_numa), ("visible", visible), ("nics", nics),
             ("disk", lambda: disk(storage_path or "/tmp")))
    for key, fn in parts:
        try:
            doc[key] = fn()
        except Exception as exc:  # noqa: BLE001 - one unreadable part must not lose the others
            doc[key] = {"error": "%s: %s" % (type(exc).__name__, str(exc)[:200])}
    doc["kinds"] = [k for k in ("vm", "container") if (doc.get(k) or {}).get("by")]
    try:
        import pwd
        doc["user"] = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError, OSError):
        doc["user"] = str(os.geteuid())
    doc["root"] = os.geteuid() == 0
    return doc


if __name__ == "__main__":
    print(json.dumps(read(sys.argv[1] if len(sys.argv) > 1 else None)))
