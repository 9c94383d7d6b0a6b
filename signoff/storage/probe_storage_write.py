#!/usr/bin/env python3
"""Host-side probe: storage write throughput, every byte read back and checked.

fio (rw=write, O_DIRECT, crc32c verify headers in every 4 KiB; then fio's verify_only pass)
where it is installed and the filesystem takes O_DIRECT, else a built-in writer (a process per
job, pwrite of a known pseudo-random pattern, O_DIRECT or buffered, fsync'ed) checked byte by
byte against that pattern. Either way the files are written, synced, read back, then removed.

Safety: the claim checks the free bytes (and inodes) before anything is written and makes
<path>/.signoff-<runid>-<host>-write/ (mkdir: never an existing one); every file goes in it with
O_EXCL; on SIGTERM, SIGINT or SIGHUP the probe removes what it created (the claim, cleanup and
path helpers are probe_storage.py's, loaded by path).

Subcommands: claim (free space, the run's write dir), look (who else writes there), write (one
workload: seq, small or agg; written, read back, removed), clean (the write dir).
Prints exactly one JSON document; {"error": ...} for a refusal (exit 0).
"""
import argparse
import hashlib
import importlib.util
import json
import mmap
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback

# probe_storage.py by its path (shipped beside this file as storage.py), never through sys.path
_dir = os.path.dirname(os.path.realpath(__file__))
_lib = next((p for p in (os.path.join(_dir, "storage.py"), os.path.join(_dir, "probe_storage.py"))
             if os.path.exists(p)), os.path.join(_dir, "storage.py"))
_spec = importlib.util.spec_from_file_location("signoff_storage_probe", _lib)
st = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(st)

SUFFIX = "-write"
PATTERN_LEN = 4 << 20
VERIFY_BLOCK = 4096  # fio's verify_interval: a failure names the 4 KiB block it is in
NAMED = 20  # mismatches named in the document, at most (the rest counted)
EXACT = 16  # bad 4 KiB blocks whose wrong bytes are counted one by one (the rest: whole blocks)
MAX_RESIDENT = 0.01  # of the files' pages left in the cache after the drop, as the read probe
# fio's report of a block that read back wrong (verify.c, log_verify_failure / verify_header)
FIO_BAD = re.compile(r"at file (?P<file>.+?) offset (?P<off>\d+), length (?P<len>\d+)")


def write_dir(a):
    return st.own_dir(a.path_resolved, a.runid, a.host) + SUFFIX


def layout(a):
    """[(relative name, size)]: seq and agg: `jobs` large files; small: many small ones."""
    if a.workload in ("seq", "agg"):
        bs = st.parse_size(a.bs)
        per = max(bs, st.parse_size(a.size) // a.jobs // bs * bs)
        return [("%s.%d" % (a.workload, j), per) for j in range(a.jobs)]
    fsize = st.parse_size(a.file_size)
    return [("f%06d" % i, fsize) for i in range(a.files)]


def need(a):
    names = layout(a)
    return sum(s for _, s in names) + 4096 * len(names), len(names) + 1


def refuse_space(path, nbytes, nfiles, min_free):
    """Refuse before writing: the bytes (and inodes) needed, the free ones, the margin kept."""
    avail, total = st.space(path)
    margin, label = st.margin_bytes(min_free, total)
    if avail - nbytes < margin:
        raise st.Refused("refusing to write %s (%d bytes) to %s: %s (%d bytes) free of %s, and %s "
                         "(%d bytes) must stay free (--storage-min-free); free space, lower the write "
                         "sizes in the profile, or pass --storage-readonly to write nothing"
                         % (st.human(nbytes), nbytes, path, st.human(avail), avail, st.human(total),
                            label, margin))
    st.check_space(path, 0, min_free, st.human(nbytes), files=nfiles)  # the inodes
    return avail


# ------------------------------------------------------------------ subcommands

def cmd_claim(a):
    """Check the path and the free space for the largest workload, make the write dir, and
    list this run's other write dirs there (hosts that share this path)."""
    path = a.path_resolved
    fs = st.fs_info(path)
    st.check_access(path, False, fs)
    free = refuse_space(path, st.parse_size(a.need), a.need_files, a.min_free)
    d = write_dir(a)
    try:
        os.mkdir(d, 0o700)
        st.OWNED.append(d)
    except FileExistsError:
        raise st.Refused("%s already exists: refusing to touch it" % d) from None
    except OSError as exc:
        raise st.Refused("storage path %s: cannot create %s (%s)" % (path, d, exc.strerror)) from None
    del st.OWNED[:]  # claimed: removed by `clean` (or the controller's cleanup), not on exit
    return {"path": path, "fs": fs, "free": free, "dir": d}


def cmd_look(a):
    """This run's write dirs in the path, once every host claimed: the hosts writing here too."""
    return {"writers": sorted(n for n in os.listdir(a.path_resolved)
                              if n.startswith("%s%s-" % (st.MARK, a.runid)) and n.endswith(SUFFIX))}


def cmd_write(a):
    path = a.path_resolved
    d = write_dir(a)
    if not os.path.isdir(d):
        raise st.Refused("%s is missing (claim it first)" % d)
    fs = st.fs_info(path)
    nbytes, nfiles = need(a)
    free = refuse_space(path, nbytes, nfiles, a.min_free)
    sub = os.path.join(d, a.workload)
    os.mkdir(sub, 0o700)
    st.OWNED.append(sub)
    try:
        files = [(os.path.join(sub, rel), size) for rel, size in layout(a)]
        direct, why = direct_write_ok(sub)
        tool, fallback = a.tool, None
        if tool in ("auto", "fio"):
            if shutil.which("fio") is None:
                fallback = "fio is not installed on this host"
            elif not direct:
                fallback = "no O_DIRECT (%s): fio would write into the page cache" % why
            elif st.FIO_UNSAFE.search(sub):
                fallback = "fio cannot take the path's name (':', ';', '#', '$' or a control character)"
            tool = "builtin" if fallback else "fio"
        seed = hashlib.sha256(("%s/%s/%s" % (a.runid, a.host, a.workload)).encode()).digest()
        res = fio_write(files, a) if tool == "fio" else builtin_write(files, a, direct, seed)
        st.drop_pages([p for p, _ in files])
        cache = read_back_from(files, fs, direct)
        res["verify"] = fio_verify(files, a) if tool == "fio" else builtin_verify(files, direct, seed, sub)
        res["verify"]["cache"] = cache
    finally:
        shutil.rmtree(sub, ignore_errors=True)  # written, read back: gone before the next one
        st.OWNED.remove(sub)
    res.update(workload=a.workload, path=path, fs=fs, free=free, fallback=fallback,
               files=len(files), bytes_per_pass=sum(s for _, s in files),
               ram=fs["fstype"] in st.RAM_FS, removed=not os.path.exists(sub))
    if a.workload == "small" and res.get("seconds"):
        res["files_per_s"] = round(len(files) / max(res["seconds"], 1e-9), 1)
    g = res["bw_bytes"] / 1e9
    res["gbps"] = round(g, 4) if g >= 0.1 else float("%.4g" % g)  # a slow disk's 2.7 KB/s is not 0
    return res


def cmd_clean(a):
    d = write_dir(a)
    shutil.rmtree(d, ignore_errors=True)
    return {"dir": d, "removed": not os.path.exists(d)}


def read_back_from(files, fs, direct):
    """Whether the read-back that follows reads the storage or memory still holding what was
    written (then it checked RAM, not the disk: the controller ERRORs, never PASSes). Taken after
    the pages were dropped, before the read: fadvise's answer is never taken on trust."""
    paths = [p for p, _ in files]
    out = {"method": "O_DIRECT" if direct else "fadvise(DONTNEED), then mincore", "resident_fraction": None}
    if fs["fstype"] in st.RAM_FS:
        return dict(out, disk=False, note="%s is RAM-backed: its files live in the page cache" % fs["fstype"])
    if fs["fstype"].startswith(st.OWN_CACHE_FS):
        # its ARC keeps what was written: fadvise does not empty it, and ZFS before 2.3 takes
        # O_DIRECT and ignores it; only more bytes than the host's memory cannot all be in it
        total, mem = sum(s for _, s in files), st.mem_total()
        return dict(out, disk=bool(mem and total > mem),
                    note="%s caches what was written in its own ARC, which neither fadvise nor (before "
                         "ZFS 2.3) O_DIRECT bypasses; %s written, %s of memory"
                         % (fs["fstype"], st.human(total), st.human(mem) if mem else "unknown"))
    if direct:
        return dict(out, disk=True, note="")
    res = st.resident_fraction(paths)
    if res is None:
        return dict(out, disk=False, note="mincore unavailable: cannot tell whether the page cache "
                                          "still holds the files")
    out["resident_fraction"] = round(res, 4)
    if res >= MAX_RESIDENT:
        return dict(out, disk=False, note="%.0f%% of the files' pages stayed in the page cache after "
                                          "fadvise(DONTNEED) (%s)" % (100 * res, fs["fstype"]))
    return dict(out, disk=True, note="")


def direct_write_ok(d):
    """Whether a new file here takes an aligned O_DIRECT write (tmpfs and some FUSE do not)."""
    if not hasattr(os, "O_DIRECT"):
        return False, "this OS has no O_DIRECT"
    p = os.path.join(d, ".direct")
    buf = mmap.mmap(-1, 4096)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o600)
        try:
            os.pwrite(fd, buf, 0)
        finally:
            os.close(fd)
        return True, ""
    except OSError as exc:
        return False, "O_DIRECT write failed: %s" % exc.strerror
    finally:
        buf.close()
        if os.path.exists(p):
            os.unlink(p)


# ------------------------------------------------------------------ fio

def _fio_job(files, a, verify):
    bs = st.parse_size(a.bs)
    seq = a.workload != "small"
    jobs = max(1, min(a.jobs, len(files)))
    engine = "libaio" if seq and "libaio" in st.fio_engines() else "psync"
    depth = a.iodepth if engine == "libaio" else 1
    if not seq:
        bs = min(bs, max(s for _, s in files))
    tag = os.path.join(a.state_dir, "fiow-%s-%s" % (a.runid, a.workload))
    lines = ["[global]", "rw=write", "bs=%d" % bs, "direct=1", "ioengine=%s" % engine,
             "iodepth=%d" % depth, "group_reporting=1", "file_service_type=sequential",
             "fallocate=none", "verify=crc32c", "verify_interval=%d" % VERIFY_BLOCK,
             "do_verify=%d" % int(verify), "verify_fatal=0", "verify_state_save=0", "end_fsync=1"]
    if verify:
        lines.append("verify_only=1")
    else:
        lines += ["write_bw_log=%s" % tag, "log_avg_msec=%d" % int(st.SAMPLE_S * 1000), "log_unix_epoch=1"]
    if not seq:  # create, write, close: a checkpoint's shards or a dataset's samples
        lines += ["openfiles=1", "create_on_open=1"]
    for j in range(jobs):
        mine = files[j::jobs]
        lines += ["[w%d]" % j, "size=%d" % sum(s for _, s in mine)]
        chunk = []
        for p, _ in mine:  # a value holds <= 4096 chars; repeated filename= appends
            if chunk and sum(len(c) + 1 for c in chunk) + len(p) > 4000:
                lines.append("filename=" + ":".join(chunk))
                chunk = []
            chunk.append(p)
        lines.append("filename=" + ":".join(chunk))
    jobfile = tag + (".verify" if verify else "") + ".fio"
    with open(jobfile, "w") as f:
        f.write("\n".join(lines) + "\n")
    return jobfile, tag, {"bs": bs, "iodepth": depth, "numjobs": jobs, "direct": True, "ioengine": engine}


def _run_fio(jobfile, out):
    p = subprocess.Popen(["fio", "--output-format=json", "--output=" + out, jobfile],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate()
    except BaseException:
        p.terminate()
        p.wait()
        raise
    try:
        with open(out) as f:
            text = f.read()
        job = json.loads(text[text.index("{"):])
    except (OSError, ValueError):
        job = None
    return p.returncode, err or "", job


def fio_write(files, a):
    """fio writes the files once (one pass: a checkpoint's pattern), bw log sampled."""
    jobfile, tag, params = _fio_job(files, a, verify=False)
    out = tag + ".json"
    late = st.wait_until(a.start_at)
    rc, err, doc = _run_fio(jobfile, out)
    t_end = time.time()
    job = (doc or {}).get("jobs", [{}])[0]
    if doc is None or rc != 0 or job.get("error"):
        raise st.Refused("fio failed (exit %d, error %s): %s" % (rc, job.get("error"), " | ".join(
            (err or "no output").strip().splitlines()[-3:])))
    w = job["write"]
    intervals = []
    for log in sorted(os.listdir(a.state_dir)):
        full = os.path.join(a.state_dir, log)
        if not full.startswith(tag + "_bw.") or not log.endswith(".log"):
            continue
        prev = None
        with open(full) as f:
            for line in f:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) < 3 or parts[2] != "1":  # direction 1: writes
                    continue
                t, kib_s = int(parts[0]) / 1000.0, int(parts[1])
                start = prev if prev is not None else t - st.SAMPLE_S
                intervals.append([round(start, 4), round(t, 4), int(kib_s * 1024 * (t - start))])
                prev = t
        os.unlink(full)
    logged = sum(iv[2] for iv in intervals)
    if not logged:
        intervals = [[t_end - w["runtime"] / 1000.0, t_end, w["io_bytes"]]]
    elif abs(logged - w["io_bytes"]) > 0.02 * w["io_bytes"]:  # log averages are rounded: rescale
        intervals = [[x, y, int(b * w["io_bytes"] / float(logged))] for x, y, b in intervals]
    for fn in (jobfile, out):
        os.unlink(fn)
    return {"tool": "fio", "tool_version": doc.get("fio version") or st.fio_version(),
            "params": dict(params, time_based=False, fsync="end_fsync"),
            "bytes": w["io_bytes"], "seconds": w["runtime"] / 1000.0, "bw_bytes": w["bw_bytes"],
            "t_start": min(iv[0] for iv in intervals), "t_end": max(iv[1] for iv in intervals),
            "late_s": round(late, 3), "intervals": intervals}


def fio_verify(files, a):
    """fio's verify_only pass: every 4 KiB block read back (O_DIRECT) against the crc32c
    header fio wrote in it; each block that fails is named (file, offset)."""
    jobfile, tag, _ = _fio_job(files, a, verify=True)
    out = tag + ".verify.json"
    rc, err, doc = _run_fio(jobfile, out)
    bad = [{"file": m.group("file"), "offset": int(m.group("off")), "bytes": int(m.group("len"))}
           for m in FIO_BAD.finditer(err)]
    job = (doc or {}).get("jobs", [{}])[0]
    for fn in (jobfile, out):
        if os.path.exists(fn):
            os.unlink(fn)
    if rc != 0 and not bad:
        raise st.Refused("fio verify failed (exit %d, error %s) naming no block: %s" % (
            rc, job.get("error"), " | ".join((err or "no output").strip().splitlines()[-3:])))
    checked = (job.get("read") or {}).get("io_bytes", 0)
    return _verdict(bad, checked, sum(s for _, s in files),
                    "fio verify_only (crc32c per %d B block, O_DIRECT)" % VERIFY_BLOCK)


def _verdict(bad, checked, total, how, blocks=None, estimated=0):
    """blocks: the bad 4 KiB blocks (default: one per entry, fio's); estimated: the bad bytes
    counted as whole blocks, not one by one."""
    return {"how": how, "bytes_checked": checked, "bytes_written": total,
            "bad_bytes": sum(b["bytes"] for b in bad), "bad_blocks": len(bad) if blocks is None else blocks,
            "bad_bytes_estimated": estimated, "mismatches": bad[:NAMED]}


# ------------------------------------------------------------------ built-in writer

def pattern(seed):
    """PATTERN_LEN pseudo-random bytes from the seed (stdlib, no state kept between steps),
    doubled so any slice of up to PATTERN_LEN bytes is contiguous."""
    p = hashlib.shake_256(seed).digest(PATTERN_LEN)
    return memoryview(p + p)


def expected(pat, index, off, n):
    """The bytes file `index` holds at [off, off + n): each 4 KiB block its own slice."""
    out = bytearray()
    while n > 0:
        blk, within = divmod(off, 4096)
        k = ((index * 7919 + blk) * 4097) % PATTERN_LEN
        take = min(n, 4096 - within)
        out += pat[k + within:k + within + take]
        off += take
        n -= take
    return out


def builtin_write(files, a, direct, seed):
    """One process per job, each writing its files whole with pwrite (O_DIRECT where taken,
    else buffered), fsync'ed before it counts as done; counters sampled every SAMPLE_S."""
    bs = st.parse_size(a.bs)
    jobs = max(1, min(a.jobs, len(files)))
    shm = mmap.mmap(-1, 16 * jobs)
    view = memoryview(shm)
    counts, ends = view[:8 * jobs].cast("Q"), view[8 * jobs:].cast("d")
    indexed = list(enumerate(files))
    late = st.wait_until(a.start_at)
    t_start = time.time()

    def work(j):
        pat = pattern(seed)
        buf = mmap.mmap(-1, bs)
        for i, (p, size) in indexed[j::jobs]:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | (os.O_DIRECT if direct else 0), 0o600)
            try:
                for off in range(0, size, bs):
                    n = min(bs, size - off)
                    buf[:n] = expected(pat, i, off, n)
                    span = (n + 4095) // 4096 * 4096 if direct else n  # O_DIRECT: whole 4 KiB blocks
                    counts[j] += os.pwrite(fd, memoryview(buf)[:span], off)
                if direct and size % 4096:
                    os.ftruncate(fd, size)
                os.fsync(fd)
            finally:
                os.close(fd)
        ends[j] = time.time()

    procs, failed, intervals, last_t, last_b = {}, [], [], t_start, 0
    try:
        for j in range(jobs):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(r)
                    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                        signal.signal(s, signal.SIG_DFL)
                    work(j)
                    code = 0
                except BaseException as exc:  # noqa: B036 - a forked writer must never return
                    try:
                        os.write(w, ("%s: %s" % (getattr(exc, "filename", None) or "write",
                                                 getattr(exc, "strerror", None) or exc)).encode()[:4000])
                    except OSError:
                        pass
                finally:
                    os._exit(code)
            os.close(w)
            procs[pid] = r
        while procs:
            time.sleep(st.SAMPLE_S)
            while procs:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if not pid:
                    break
                r = procs.pop(pid)
                msg = os.read(r, 4096).decode(errors="replace")
                os.close(r)
                if status:
                    failed.append(msg or "writer exited with status %d" % status)
            if failed:
                raise st.Refused("built-in writer failed: %s" % failed[0])
            now, tot = (max(ends) if not procs else time.time()), sum(counts)
            intervals.append([round(last_t, 4), round(now, 4), tot - last_b])
            last_t, last_b = now, tot
    finally:
        for pid, r in procs.items():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            os.close(r)
    t_end, total = max(ends), sum(counts)
    counts.release()
    ends.release()
    view.release()
    shm.close()
    return {"tool": "builtin", "tool_version": "signoff storage write probe (Python %s)"
            % sys.version.split()[0],
            "params": {"bs": bs, "iodepth": 1, "numjobs": jobs, "direct": direct, "ioengine": "pwrite, "
                       "%d processes" % jobs, "time_based": False, "fsync": "each file"},
            "bytes": total, "seconds": round(t_end - t_start, 4),
            "bw_bytes": total / max(t_end - t_start, 1e-9),
            "t_start": t_start, "t_end": t_end, "late_s": round(late, 3),
            "intervals": [iv for iv in intervals if iv[1] > iv[0] and iv[2]]}


def builtin_verify(files, direct, seed, sub):
    """Every byte read back (O_DIRECT, or buffered after its pages were dropped) and compared
    with the pattern written, 4 KiB block by block (a disk corrupting every block is found in
    the time a read takes): the wrong bytes of the first EXACT bad blocks counted one by one,
    each further bad block as its whole 4 KiB (said: bad_bytes_estimated); the first wrong byte
    of each file named."""
    pat, bad, checked, chunk, blocks, exact, estimated = pattern(seed), [], 0, 1 << 20, 0, 0, 0
    buf = mmap.mmap(-1, chunk)
    try:
        for i, (p, size) in enumerate(files):
            fd = st.open_read(p, direct)
            try:
                first, wrong = None, 0
                for off in range(0, size, chunk):
                    n = min(chunk, size - off)
                    got = os.preadv(fd, [memoryview(buf)[:(n + 4095) // 4096 * 4096 if direct else n]], off)
                    have = bytes(buf[:min(n, got)])
                    want = bytes(expected(pat, i, off, n))
                    checked += len(have)
                    if have == want:
                        continue
                    for b in range(0, n, VERIFY_BLOCK):
                        h, w = have[b:b + VERIFY_BLOCK], want[b:b + VERIFY_BLOCK]
                        if h == w:
                            continue
                        blocks += 1
                        if exact < EXACT or first is None:  # the file's first wrong byte: exact
                            exact += 1
                            diff = [k for k in range(len(w)) if k >= len(h) or h[k] != w[k]]
                            wrong += len(diff)
                            first = off + b + diff[0] if first is None else first
                        else:
                            wrong += len(w)
                            estimated += len(w)
            finally:
                os.close(fd)
            if wrong:
                bad.append({"file": p, "offset": first, "bytes": wrong})
    finally:
        buf.close()
    how = "read back (%s), compared with the pattern written per %d B block" % (
        "O_DIRECT" if direct else "buffered, pages dropped first", VERIFY_BLOCK)
    if estimated:
        how += ("; the wrong bytes of the first %d bad blocks counted one by one, %d bytes of the "
                "rest counted as whole blocks (an upper bound)" % (EXACT, estimated))
    return _verdict(bad, checked, sum(s for _, s in files), how, blocks, estimated)


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["claim", "look", "write", "clean"])
    ap.add_argument("--path", default="@tmp", help="directory to write in (@tmp: the temp dir)")
    ap.add_argument("--runid", default=time.strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid())
    ap.add_argument("--host", default=socket.gethostname(), help="name in the run's directory")
    ap.add_argument("--workload", choices=["seq", "small", "agg"], default="seq")
    ap.add_argument("--tool", choices=["auto", "fio", "builtin"], default="auto")
    ap.add_argument("--size", default="1G", help="seq, agg: bytes per host (split over --jobs files)")
    ap.add_argument("--bs", default="1M", help="write block size")
    ap.add_argument("--jobs", type=int, default=4, help="writers (fio numjobs)")
    ap.add_argument("--iodepth", type=int, default=16, help="seq, agg: I/Os in flight per writer")
    ap.add_argument("--files", type=int, default=1024, help="small: number of files")
    ap.add_argument("--file-size", default="128K", help="small: size of each file")
    ap.add_argument("--start-at", type=float, default=0, help="epoch time to start writing at")
    ap.add_argument("--need", default="0", help="claim: the most bytes one workload writes")
    ap.add_argument("--need-files", type=int, default=0, help="claim: the most files one workload makes")
    ap.add_argument("--min-free", default="10%", help="keep this much free (percent or size)")
    ap.add_argument("--state-dir", default=".", help="fio's job files and logs (the probe's cwd)")
    return ap


def main(argv=None):
    a = build_parser().parse_args(argv)
    a.state_dir = os.path.abspath(a.state_dir)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, st._on_signal)
    rc, doc = 0, {}
    try:
        a.path_resolved = st.resolve_path(a.path)
        doc = {"claim": cmd_claim, "look": cmd_look, "write": cmd_write, "clean": cmd_clean}[a.command](a)
    except st.Refused as exc:
        doc = {"error": str(exc)}
    except st.Interrupted as exc:
        doc, rc = {"error": "interrupted by signal %d" % exc.signum}, 128 + exc.signum
    except Exception as exc:  # noqa: BLE001 - the controller gets the cause, not a traceback
        doc = {"error": "%s: %s" % (type(exc).__name__, exc),
               "traceback": traceback.format_exc().splitlines()[-4:]}
    finally:
        if st.OWNED:
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
            doc["removed"] = st.remove_owned()
    doc.update(host=socket.gethostname(), command=a.command, runid=a.runid)
    try:
        print(json.dumps(doc))
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    return rc


if __name__ == "__main__":
    sys.exit(main())
