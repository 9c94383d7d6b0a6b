#!/usr/bin/env python3
"""Host-side probe: what a vendor's RMA asks for, collected once from a host that failed, after
the run's measurements (signoff/evidence/collect.py): `nvidia-smi -q`, `lspci -vvv` of the NVIDIA
and Mellanox functions (and the other devices named), the kernel log's XID/NVRM lines with their
times, and `nvidia-bug-report.sh` where the host has it. Prints one JSON document: every piece's
command, exit code, seconds, bytes and status (ok, cut, skipped, absent, failed, timed out) with
why, and its bytes as base64 (`b64`), all of them within a time and a size budget:

    evidence.py --budget-s 120 --budget-bytes 50000000 [--bdf 0000:17:00.0 ...] [--nic mlx5_0 ...]

Each command runs under coreutils' `timeout` in a process group of its own (killed whole at its
limit, and by this probe's TERM/HUP/INT handler); nvidia-bug-report.sh runs in a temp dir made in
this probe's cwd (the run's own temp dir on the host) and removed when it ends, whatever happened.
SIGNOFF_KERNEL_LOG names a recorded kernel log read instead of the journal (tests inject one)."""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KILL_GRACE_S = 5  # `timeout -k`: what outlives its TERM is KILLed this much later
MIN_PIECE_S = 3  # a piece given less time than this is skipped, said so
SMI_S, LSPCI_S, KLOG_S = 60, 20, 30  # each piece's own cap (the budget's rest bounds it too)
KLOG_LINES = 5000  # XID/NVRM lines kept (the newest)
NIC_CLASSES = ("/sys/class/infiniband", "/sys/class/net")  # an RDMA device's name, else an interface's
VENDORS = ("10de", "15b3")  # NVIDIA (GPUs, NVSwitches, ConnectX since Mellanox's 2020 rebrand keep 15b3)
KERNEL_LINE = re.compile(r"NVRM|Xid|nvidia-(?:nvlink|peermem|modeset|uvm)|mlx5_core", re.I)
BDF = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")
NIC = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

_child = {"pid": None}  # the running command's process group, killed by the handler
_temp = {"dir": None}  # nvidia-bug-report's temp dir, removed by the handler too


class Budget:
    def __init__(self, seconds, nbytes):
        self.end = time.time() + seconds
        self.left_bytes = nbytes

    def seconds(self, cap):
        return max(0.0, min(cap, self.end - time.time()))


def _stop(signum, frame):
    """The controller went (transport.guarded TERMs the group) or the host-side limit came: the
    command's group killed, the temp dir removed, nothing left behind."""
    _kill()
    _rmtemp()
    sys.exit(128 + signum)


def _kill():
    pid = _child["pid"]
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def _rmtemp():
    d = _temp["dir"]
    if d:
        shutil.rmtree(d, ignore_errors=True)
        _temp["dir"] = None


def run(argv, seconds, cwd=None):
    """(rc, stdout bytes, stderr text, timed_out, elapsed) of argv, killed at `seconds`."""
    limit = ["timeout", "-k", str(KILL_GRACE_S), "%.1f" % seconds] if shutil.which("timeout") else []
    wrapped = limit + argv
    t0 = time.time()
    p = subprocess.Popen(wrapped, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         cwd=cwd, start_new_session=True)
    _child["pid"] = p.pid
    try:
        out, err = p.communicate(timeout=seconds + KILL_GRACE_S + 2)
        timed_out = p.returncode == 124 or p.returncode == 137 and time.time() - t0 >= seconds
    except subprocess.TimeoutExpired:
        _kill()
        out, err = p.communicate()
        timed_out = True
    finally:
        _child["pid"] = None
    return p.returncode, out, err.decode("utf-8", "replace")[-1000:], timed_out, round(time.time() - t0, 2)


def piece(name, command, budget, data=None, status="ok", why="", rc=None, elapsed=0.0, binary_whole=False):
    """One piece of the document: its bytes within what the size budget has left (a text cut at
    the limit and said; a binary that must be whole, the bug report's gzip, skipped instead)."""
    out = {"name": name, "command": command, "rc": rc, "elapsed_s": elapsed, "status": status, "why": why,
           "bytes": 0, "size": None}
    if data is None:
        return out
    out["size"] = len(data)
    if len(data) > budget.left_bytes:
        if binary_whole:
            out.update(status="skipped", why="%d bytes, over what the size budget has left (%d bytes)"
                       % (len(data), budget.left_bytes))
            return out
        data = data[:budget.left_bytes]
        out.update(status="cut", why="cut at %d of its %d bytes: the size budget" % (len(data), out["size"]))
    budget.left_bytes -= len(data)
    out["bytes"] = len(data)
    out["b64"] = base64.b64encode(data).decode("ascii")
    return out


def command_piece(name, argv, cap, budget, cwd=None):
    if not shutil.which(argv[0]):
        return piece(name, " ".join(argv), budget, status="absent", why="%s not on PATH" % argv[0])
    t = budget.seconds(cap)
    if t < MIN_PIECE_S:
        return piece(name, " ".join(argv), budget, status="skipped", why="the time budget is spent")
    rc, out, err, timed_out, took = run(argv, t, cwd)
    status, why = "ok", ""
    if timed_out:
        status, why = "timed out", "killed after %.0f s (its share of the time budget)" % t
    elif rc != 0:
        said = " | ".join(err.strip().splitlines()[-3:]) or "no message"
        status, why = "failed", "exit %s: %s" % (rc, said)
    got = piece(name, " ".join(argv), budget, out, rc=rc, elapsed=took)
    if status != "ok":
        got.update(status=status, why=(why + ("; " + got["why"] if got["why"] else "")))
    return got


def bdfs(given):
    """`lspci -s`'s form (dddd:bb:dd.f) of the devices named: NVML's 8-digit domain folded."""
    out = []
    for g in given:
        m = BDF.match(g.strip())
        if m:
            out.append("%04x:%s:%s.%s" % (int(m.group(1) or "0", 16), m.group(2).lower(), m.group(3).lower(),
                                          m.group(4)))
    return out


def nic_bdf(name):
    """The PCI function of an RDMA device (mlx5_0) or network interface, from sysfs. realpath never
    raises: a name absent from a class gives a path that does not exist, so each is tested first."""
    for top in NIC_CLASSES:
        link = os.path.join(top, name, "device")
        if os.path.exists(link):
            return os.path.basename(os.path.realpath(link))
    return None


def lspci(budget, named):
    """lspci -vvv of every NVIDIA and Mellanox function, then of each other device named."""
    if not shutil.which("lspci"):
        return piece("lspci", "lspci -vvv", budget, status="absent", why="lspci not on PATH (pciutils)")
    chunks, t0, notes = [], time.time(), []
    for args in [["-d", v + ":"] for v in VENDORS] + [["-s", b] for b in named]:
        t = budget.seconds(LSPCI_S)
        if t < MIN_PIECE_S:
            notes.append("lspci %s: skipped, the time budget is spent" % " ".join(args))
            continue
        rc, out, err, timed_out, _ = run(["lspci", "-vvv"] + args, t)
        if timed_out or rc != 0:
            notes.append("lspci %s: %s" % (" ".join(args), "timed out" if timed_out else "exit %s: %s"
                                                                % (rc, err.strip()[-200:])))
        if out.strip() and (args[0] == "-d" or out not in b"".join(chunks)):
            chunks.append(("### lspci -vvv %s\n" % " ".join(args)).encode() + out + b"\n")
    got = piece("lspci", "lspci -vvv -d 10de: ; -d 15b3: ; -s <each device named>", budget,
                b"".join(chunks), elapsed=round(time.time() - t0, 2))
    if notes:
        got.update(status="failed" if not chunks else got["status"],
                   why="; ".join(notes + ([got["why"]] if got["why"] else [])))
    return got


def _iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _boot_time():
    try:
        with open("/proc/stat") as f:
            m = re.search(r"^btime (\d+)", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def kernel_lines(budget):
    """The kernel log's XID/NVRM lines (and the NVIDIA and mlx5 modules'), each with its time:
    the journal of this boot, else dmesg, else the recorded log SIGNOFF_KERNEL_LOG names."""
    t0, rec = time.time(), os.environ.get("SIGNOFF_KERNEL_LOG")
    lines, source, why = None, None, []
    if rec:
        source = "recorded log %s" % rec
        try:
            with open(rec, errors="replace") as f:
                text = f.read()
            btime = re.search(r"^btime (\d+)\s*$", text, re.M)
            lines = _stamped(text, int(btime.group(1)) if btime else None)
        except OSError as exc:
            why.append("%s: %s" % (source, exc))
    else:
        for argv, kind in ((["journalctl", "-k", "-b", "-o", "short-unix", "--no-pager", "-q"], "journal"),
                           (["dmesg"], "dmesg")):
            if not shutil.which(argv[0]):
                why.append("%s not on PATH" % argv[0])
                continue
            t = budget.seconds(KLOG_S)
            if t < MIN_PIECE_S:
                why.append("%s: the time budget is spent" % argv[0])
                break
            rc, out, err, timed_out, _ = run(argv, t)
            text = out.decode("utf-8", "replace")
            if rc == 0 and text.strip():
                source, lines = "journalctl -k -b" if kind == "journal" else "dmesg (this boot)", \
                    _stamped(text, _boot_time() if kind == "dmesg" else None)
                break
            why.append("%s: %s" % (argv[0], "timed out" if timed_out else "exit %s: %s"
                                   % (rc, err.strip()[-200:] or "no kernel messages")))
    if lines is None:
        return piece("kernel-log", "journalctl -k -b | dmesg", budget, status="failed",
                     why="; ".join(why) or "no kernel log", elapsed=round(time.time() - t0, 2))
    kept = [ln for ln in lines if KERNEL_LINE.search(ln)]
    head = ["# %s: %d XID/NVRM/nvidia/mlx5 lines of %d%s" % (source, len(kept), len(lines),
            ", the newest %d kept" % KLOG_LINES if len(kept) > KLOG_LINES else "")]
    data = "\n".join(head + kept[-KLOG_LINES:]) + "\n"
    got = piece("kernel-log", source, budget, data.encode("utf-8"), elapsed=round(time.time() - t0, 2))
    got["lines"] = len(kept)
    return got


def _stamped(text, btime):
    """Each line with its UTC time in front: journalctl's short-unix epoch, dmesg's seconds since
    boot plus the boot's epoch (kept as it was where neither is known)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^(\d+\.\d+) (.*)$", line)
        d = re.match(r"^\[\s*(\d+\.\d+)\] ?(.*)$", line)
        if m:
            out.append("%s %s %s" % (_iso(float(m.group(1))), m.group(1), m.group(2)))
        elif d and btime is not None:
            t = btime + float(d.group(1))
            out.append("%s %.1f %s" % (_iso(t), t, d.group(2)))
        else:
            out.append(line)
    return out


def bug_report(budget):
    """nvidia-bug-report.sh, where the host has it, in a temp dir of the run's own (removed at
    its end): its nvidia-bug-report.log.gz, whole or skipped (a cut gzip is no evidence)."""
    tool = shutil.which("nvidia-bug-report.sh")
    if not tool:
        return piece("nvidia-bug-report", "nvidia-bug-report.sh", budget, status="absent",
                     why="nvidia-bug-report.sh not on PATH (it ships with the NVIDIA driver)")
    t = budget.seconds(float("inf"))  # what the budget has left: the last piece
    if t < MIN_PIECE_S:
        return piece("nvidia-bug-report", tool, budget, status="skipped", why="the time budget is spent")
    _temp["dir"] = tempfile.mkdtemp(prefix="bugreport.", dir=os.getcwd())
    try:
        out = os.path.join(_temp["dir"], "nvidia-bug-report.log")
        rc, _, err, timed_out, took = run([tool, "--output-file", out], t, cwd=_temp["dir"])
        path = next((p for p in (out + ".gz", out) if os.path.isfile(p)), None)
        data = None
        if path and not timed_out:
            with open(path, "rb") as f:
                data = f.read()
        cmd = "nvidia-bug-report.sh --output-file <temp>/nvidia-bug-report.log"
        if timed_out:
            return piece("nvidia-bug-report", cmd, budget, status="timed out", rc=rc, elapsed=took,
                         why="killed after %.0f s (what the time budget had left): no log kept" % t)
        if data is None:
            return piece("nvidia-bug-report", cmd, budget, status="failed", rc=rc, elapsed=took,
                         why="exit %s, no log written: %s" % (rc, " | ".join(err.strip().splitlines()[-2:])))
        got = piece("nvidia-bug-report", cmd, budget, data, rc=rc, elapsed=took, binary_whole=True)
        got["gzip"] = path.endswith(".gz")
        if rc != 0 and got["status"] == "ok":
            got.update(why="exit %s (its log kept)" % rc)
        return got
    finally:
        _rmtemp()


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget-s", type=float, default=120)
    ap.add_argument("--budget-bytes", type=int, default=50 * 10 ** 6)
    ap.add_argument("--bdf", action="append", default=[], help="a device to lspci besides the vendors'")
    ap.add_argument("--nic", action="append", default=[], help="an RDMA device or interface to lspci")
    ap.add_argument("--no-bug-report", action="store_true")
    a = ap.parse_args()
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, _stop)
    t0 = time.time()
    budget = Budget(a.budget_s, a.budget_bytes)
    named = bdfs(a.bdf) + [b for b in (nic_bdf(n) for n in a.nic if NIC.match(n)) if b and BDF.match(b)]
    pieces = [kernel_lines(budget),
              command_piece("nvidia-smi-q", ["nvidia-smi", "-q"], SMI_S, budget),
              lspci(budget, list(dict.fromkeys(named)))]
    pieces.append(bug_report(budget) if not a.no_bug_report else
                  piece("nvidia-bug-report", "nvidia-bug-report.sh", budget, status="skipped",
                        why="not asked (--no-bug-report)"))
    print(json.dumps({"probe": "evidence", "started": round(t0, 3), "elapsed_s": round(time.time() - t0, 2),
                      "budget_s": a.budget_s, "budget_bytes": a.budget_bytes, "uid": os.getuid(),
                      "pieces": pieces}))


if __name__ == "__main__":
    main()
