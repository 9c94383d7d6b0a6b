"""The recorded host's interpreter: answers each probe with its recorded document.

Run as `respond.py HOST.json PROBE.py ARGS...` by the host's "python" (a wrapper that the
tests write): the controller ships and starts every probe for real (`cd <run dir> && env
... python <probe>.py args`), and this prints what that probe printed on the recorded host,
so that everything up to the probe (transport, shipping, locks, timeouts) and after it
(parsing, retries, judging, the report) runs for real. HOST.json holds one recorded document
per probe (and per mode where a probe has modes: sysinfo, sysinfo counters, p2p, p2p
--no-bandwidth, storage claim / prepare / read); `sysinfo xids` is the real probe reading the
host's recorded kernel log (SIGNOFF_KERNEL_LOG). What depends on the call is taken from it:
the storage run's id and start time, the soak's duration
(its sample stream is the recorded one, continued in its steady state), NCCL_* as the
controller set them. A probe HOST.json has no document for answers an error saying so
(never the real probe: it would measure this machine; but the dcgm probe runs for real, its
`dcgmi` a stand-in printing the host's recorded output); anything but a probe (`python -c`)
runs in this interpreter. Stdlib only.
"""

import json
import os
import sys
import time


def arg(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


ENV = os.environ  # the probe's environment (answer() sets it for one call)


def nccl_env():
    return {k: v for k, v in ENV.items() if k.startswith("NCCL_")}


def line(doc):
    return json.dumps(doc, separators=(",", ":"))


class Xids(Exception):
    """`sysinfo xids`: the real probe must read the recorded kernel log (its caller runs it)."""


def sysinfo(rec, args, lines):
    if args[:1] == ["xids"]:
        raise Xids(rec["kernel_log"])
    if args[:1] == ["counters"]:
        return rec["counters"]
    return rec["sysinfo"]


def p2p(rec, args, lines):
    doc = dict(rec["p2p"])
    if "--no-bandwidth" in args:  # the topology alone
        for k in ("unidirectional", "bidirectional", "peer_access", "elapsed_s"):
            doc.pop(k, None)
    return doc


def allreduce(rec, args, lines):
    # a host's own run with MNNVL off, where it has one (an NVL72 tray's NICs: tests/test_fabric.py)
    off = rec.get("allreduce_mnnvl_off") if ENV.get("NCCL_MNNVL_ENABLE") == "0" else None
    return {**(off or rec["allreduce"]), "argv": args, "nccl_env": nccl_env()}


def train(rec, args, lines):
    doc = {**rec["train"], "argv": args}
    doc["settings"] = {**doc["settings"], "nccl_env": nccl_env()}
    return doc


def soak(rec, args, lines):
    """The stream: header, one sample per interval over --duration (the recording, then its
    steady part again), the final document."""
    s = rec["soak"]
    duration, interval = float(arg(args, "--duration", 90)), float(arg(args, "--interval", 1))
    lines.append(line({**s["header"], "duration_s": duration, "interval_s": interval}))
    series, steady = s["series"], s["steady_from"]
    n = int(round(duration / interval)) + 1
    for k in range(n):
        src = series[k] if k < len(series) else series[steady + (k - steady) % (len(series) - steady)]
        lines.append(line({**src, "type": "sample", "t": round(k * interval, 2)}))
    return {**s["final"], "duration_s": duration, "interval_s": interval, "samples": n}


def storage(rec, args, lines):
    """claim, prepare, read (a read at --start-at, as the controller asked): the recorded
    documents; the run's directory by the probe's own naming rule."""
    st = rec["storage"]
    cmd, runid, host = args[0], arg(args, "--runid"), arg(args, "--host")
    path = st["path"]
    mine = ".signoff-%s-%s" % (runid, host)
    common = {"host": st["hostname"], "command": cmd, "runid": runid}
    if cmd == "claim":
        return {"path": path, "fs": st["fs"], "readonly": False, "leftovers": [], "free": st["free"],
                "dir": os.path.join(path, mine), **common}
    if cmd == "prepare":
        w = arg(args, "--workload")
        return {"path": path, "workload": w, "readonly": False, "fs": st["fs"], "run_dirs": [mine],
                "free": st["free"], "sharers": 1, "dir": os.path.join(path, mine),
                "write_seconds": st["prepare"][w]["write_seconds"], "files": st["prepare"][w]["files"],
                "bytes": st["prepare"][w]["bytes"], **common}
    if cmd == "read":
        w, runtime = arg(args, "--workload"), float(arg(args, "--runtime"))
        doc = dict(st["read"][w])
        start = float(arg(args, "--start-at", 0)) or doc["t_start"]
        doc.update(t_start=start, t_end=start + runtime, seconds=runtime,
                   bytes=int(doc["gbps"] * 1e9 * runtime), bw_bytes=doc["gbps"] * 1e9,
                   params={**doc["params"], "runtime_s": int(runtime)},
                   intervals=[[start + i * runtime / 10, start + (i + 1) * runtime / 10,
                               int(doc["gbps"] * 1e8 * runtime)] for i in range(10)])
        return {**doc, **common}
    return {"path": path, "removed": [], "failed": [], **common}


UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def size(text):
    """probe_storage's parse_size: 128K, 1M, 8G (binary units)."""
    t = str(text).strip().upper()
    return int(t[:-1]) * UNITS[t[-1]] if t[-1] in UNITS else int(t)


def storage_write(rec, args, lines):
    """claim, look, clean: the write dir by the probe's naming rule; write (seq, small or agg):
    the files as the probe lays them out from the controller's arguments, written at the
    recorded GB/s from --start-at (or now) in 10 even intervals, every byte read back, none wrong."""
    sw = rec["storage_write"]
    cmd, runid, host = args[0], arg(args, "--runid"), arg(args, "--host")
    path = sw["path"]
    mine = os.path.join(path, ".signoff-%s-%s-write" % (runid, host))
    common = {"host": sw["hostname"], "command": cmd, "runid": runid}
    if cmd == "claim":
        return {"path": path, "fs": sw["fs"], "free": sw["free"], "dir": mine, **common}
    if cmd == "look":
        return {"writers": [os.path.basename(mine)], **common}
    if cmd == "clean":
        return {"dir": mine, "removed": True, **common}
    w, bs, jobs = arg(args, "--workload"), size(arg(args, "--bs")), int(arg(args, "--jobs"))
    if w == "small":
        files = [size(arg(args, "--file-size"))] * int(arg(args, "--files"))
    else:  # probe_storage_write.layout: `jobs` files of size / jobs, whole blocks
        files = [max(bs, size(arg(args, "--size")) // jobs // bs * bs)] * jobs
    total, jobs = sum(files), max(1, min(jobs, len(files)))
    seconds = total / (sw["gbps"][w] * 1e9)
    start = float(arg(args, "--start-at", 0)) or time.time()
    cut = [total * i // 10 for i in range(11)]
    doc = {"tool": "builtin", "tool_version": sw["tool_version"],
           "params": {"bs": bs, "iodepth": 1, "numjobs": jobs, "direct": True,
                      "ioengine": "pwrite, %d processes" % jobs, "time_based": False, "fsync": "each file"},
           "bytes": total, "seconds": round(seconds, 4), "bw_bytes": total / seconds,
           "t_start": start, "t_end": start + seconds, "late_s": 0.0,
           "intervals": [[start + i * seconds / 10, start + (i + 1) * seconds / 10, cut[i + 1] - cut[i]]
                         for i in range(10)],
           "verify": {"how": "read back (O_DIRECT), compared byte by byte with the pattern written",
                      "bytes_checked": total, "bytes_written": total, "bad_bytes": 0, "bad_blocks": 0,
                      "mismatches": [], "cache": {"method": "O_DIRECT", "resident_fraction": None,
                                                  "disk": True, "note": ""}},
           "workload": w, "path": path, "fs": sw["fs"], "free": sw["free"], "fallback": sw["fallback"],
           "files": len(files), "bytes_per_pass": total, "ram": False, "removed": True}
    if w == "small":
        doc["files_per_s"] = round(len(files) / seconds, 1)
    doc["gbps"] = round(doc["bw_bytes"] / 1e9, 4)
    return {**doc, **common}


def parallel(rec, args, lines):
    return {**rec["parallel"], "argv": args, "nccl_env": nccl_env()}


def dcgm(rec, args, lines):
    """The real dcgm probe (signoff/dcgm/probe_dcgm.py), its `dcgmi` the stand-in
    (tests/recorded/dcgmi/dcgmi) answering with the host's recorded output (rec["dcgm"]: the
    stand-in's document, tests/dcgm_fake.py); {"absent": true}: no dcgmi on PATH at all."""
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    spec = rec["dcgm"]
    path = os.path.join(os.path.dirname(here), "dcgmi")
    was = os.environ.get("PATH", "")
    env = {**os.environ, "SIGNOFF_FAKE_DCGMI": json.dumps(spec),
           "PATH": was if spec.get("absent") else path + os.pathsep + was}
    p = subprocess.run([sys.executable, os.path.join(top, "signoff", "dcgm", "probe_dcgm.py"), *args],
                       capture_output=True, text=True, env=env,
                       timeout=float(arg(args, "--timeout", 60)) + 60)
    return json.loads(p.stdout)


ANSWERS = {"dcgm": dcgm, "sysinfo": sysinfo, "p2p": p2p, "allreduce": allreduce, "train": train, "soak": soak,
           "storage": storage, "storage_write": storage_write, "parallel": parallel, "hbm": None, "sdc": None,
           "hostlink": None, "loader": None}


def answer(rec, name, args, env):
    """The stdout lines probe `name` prints on the recorded host with `args` and environment
    `env`; raises Xids for the one answer that is the real probe's."""
    global ENV
    ENV = env
    fn = ANSWERS.get(name)
    if name not in rec and not (fn and name in ("sysinfo", "soak", "storage", "train", "p2p")):
        return [line({"probe": name, "error": "recorded host: no recorded document for probe %s" % name})]
    lines = []
    lines.append(line(fn(rec, args, lines) if fn else {**rec[name], "argv": args}))
    return lines


def main():
    rec_path, probe, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    name = os.path.basename(probe)[:-3] if probe.endswith(".py") else None
    if name is None:
        os.execv(sys.executable, [sys.executable, probe, *args])
    with open(rec_path) as f:
        rec = json.load(f)
    try:
        lines = answer(rec, name, args, dict(os.environ))
    except Xids as log:  # the real probe, reading the host's recorded kernel log
        os.environ["SIGNOFF_KERNEL_LOG"] = str(log)
        os.execv(sys.executable, [sys.executable, "sysinfo.py", *args])
    sys.stdout.write("".join(ln + "\n" for ln in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
