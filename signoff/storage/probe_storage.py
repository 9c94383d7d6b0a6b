#!/usr/bin/env python3
"""Host-side probe: storage read throughput, large sequential blocks and many small files.

fio (JSON output, --readonly) where it is installed, else a built-in reader (a process
per job, Linux AIO or pread into page-aligned buffers). The page cache must not inflate the figure: O_DIRECT
where the filesystem takes it, else buffered reads with the files' pages dropped before
(fadvise DONTNEED, checked with mincore) and behind; a run that could not defeat the
cache says so ("cache": {"defeated": false}).

Safety: files are written only inside <path>/.signoff-<runid>-<host>/ (created with
mkdir, so never an existing one), with O_EXCL, after a free-space check; on SIGTERM,
SIGINT or SIGHUP the probe removes what it created. --readonly writes nothing at all.

Subcommands (the controller runs them in this order on every host):
  claim    check the path, refuse early on too little space, make the run's directory
  prepare  write the workload's files (or, --readonly, pick existing ones); keep a manifest
           in the current directory
  read     read the manifest's files (optionally from --start-at, an epoch time), report
           bytes, seconds, per-interval bytes with epoch timestamps, tool and parameters
  clean    remove <path>/.signoff-<runid>-*
  run      all of the above in one go (standalone use)
Prints exactly one JSON document; {"error": ...} for a refusal (exit 0).
"""
import argparse
import ctypes
import ctypes.util
import errno
import fcntl
import json
import mmap
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback

MARK = ".signoff-"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
PATTERN_LEN = 4 << 20
WRITE_CHUNK = 1 << 20
SAMPLE_S = 0.1
# Filesystems other hosts may mount too (prefixes: nfs4, fuse.ceph-fuse): a read there is not
# one host's disk. FUSE counts as shared: mistaking a local disk for a shared one costs only
# reading it alone on a sample, the other way round would judge contended reads as solo ones.
NETWORK_FS = ("nfs", "lustre", "gpfs", "beegfs", "cifs", "smb", "ceph", "glusterfs", "wekafs",
              "ocfs2", "gfs2", "panfs", "afs", "orangefs", "pvfs2", "fuse.")
# Filesystems whose own cache may answer O_DIRECT reads (ZFS before 2.3 ignores O_DIRECT).
OWN_CACHE_FS = ("zfs",)
RAM_FS = ("tmpfs", "ramfs")  # the page cache is where their files live
# Names fio cannot take as they are: it splits filename= on ':', ends a value at ';' or '#'
# (even on its command line), expands '$', and strips blanks at the ends: fio gets a link.
FIO_UNSAFE = re.compile(r"[:;#$\\\x00-\x1f\x7f]|\s$")
WALK_LIMIT = 200000
# Read-only mode reads only files whose bytes are on the disk: a hole or a preallocated
# (unwritten) extent reads as zeros without any I/O, so a sparse file's figure is no disk's.
FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
FIEMAP_HEAD = struct.Struct("=QQIIII")  # fm_start, fm_length, fm_flags, mapped, count, reserved
FIEMAP_EXTENT = struct.Struct("=QQQQQIIII")  # logical, physical, length, 2 reserved, flags, 3 reserved
FIEMAP_EXTENT_LAST, FIEMAP_EXTENT_UNWRITTEN = 0x1, 0x800
# ext4 (dioread_nolock) writes dirty pages back into unwritten extents and converts them when the
# I/O ends: a file written seconds ago reads as preallocated unless FIEMAP syncs it first.
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_BATCH = 64
# Filesystems whose allocated blocks may be fewer than the bytes stored (compression): there a
# short st_blocks is no hole; each answers SEEK_HOLE itself, which still finds one.
COMPRESSING_FS = ("zfs", "btrfs", "bcachefs")
NAMED = 32  # the files read named in the record, at most (the rest counted)
OWNED = []  # what this process created: removed again on a refusal, an error or a signal


class Refused(Exception):
    """An expected refusal (bad path, too little space): one clear message, exit 0."""


class Interrupted(BaseException):
    def __init__(self, signum):
        super().__init__("signal %d" % signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise Interrupted(signum)


def parse_size(text):
    m = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:I?B)?", str(text).strip().upper())
    if not m:
        raise Refused("not a size: %r (expected e.g. 128K, 1M, 8G)" % text)
    return int(m.group(1)) * UNITS[m.group(2)]


def human(n):
    for unit, k in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if abs(n) >= 1 << k:
            return "%.1f %s" % (n / float(1 << k), unit)
    return "%d B" % n


def plural(n, what):
    return "%d %s%s" % (n, what, "" if n == 1 else "s")


def own_dir(path, runid, host):
    return os.path.join(path, "%s%s-%s" % (MARK, runid, re.sub(r"[^A-Za-z0-9._-]", "_", host)))


# ------------------------------------------------------------------ the path and its filesystem

def resolve_path(path):
    if path in ("", "@tmp"):
        path = tempfile.gettempdir()
    if not os.path.isabs(path):
        raise Refused("storage path %s is not absolute" % path)
    path = os.path.normpath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise Refused("storage path %s does not exist" % path) from None
    except OSError as exc:
        raise Refused("storage path %s: cannot stat it (%s)" % (path, exc.strerror)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise Refused("storage path %s is not a directory" % path)
    return path


def check_access(path, readonly, fs):
    if not os.access(path, os.R_OK | os.X_OK):
        raise Refused("storage path %s is not readable by uid %d" % (path, os.geteuid()))
    if readonly or os.access(path, os.W_OK | os.X_OK):
        return
    why = "read-only mount" if "ro" in fs.get("options", "").split(",") else \
        "permission denied for uid %d" % os.geteuid()
    raise Refused("storage path %s is not writable (%s): pass --storage-readonly to measure the "
                  "files already there without writing" % (path, why))


def fs_info(path):
    """Filesystem type, source, mount options and whether the disk behind it spins."""
    real = os.path.realpath(path)
    best = {"mount": "/", "fstype": "?", "source": "?", "options": ""}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                a, b = left.split(), right.split()
                mp = a[4].encode().decode("unicode_escape")  # \040 -> space
                if (real == mp or real.startswith(mp.rstrip("/") + "/")) and \
                        len(mp) >= len(best["mount"]):
                    best = {"mount": mp, "fstype": b[0], "source": b[1] if len(b) > 1 else "?",
                            "options": a[5]}
    except (OSError, IndexError):
        pass
    best["rotational"], best["device"] = None, None
    try:
        st = os.stat(path)
        dev = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)))
        if os.path.exists(os.path.join(dev, "partition")):
            dev = os.path.dirname(dev)
        best["device"] = os.path.basename(dev) if os.path.isdir(dev) else None
        with open(os.path.join(dev, "queue", "rotational")) as f:
            best["rotational"] = f.read().strip() == "1"
    except (OSError, ValueError):
        pass
    best["network"] = network_fs(best["fstype"])
    return best


def network_fs(fstype):
    """Whether a mount of this type may be the same filesystem on other hosts."""
    return fstype.startswith(NETWORK_FS)


def space(path):
    s = os.statvfs(path)
    return s.f_bavail * s.f_frsize, s.f_blocks * s.f_frsize


def inodes(path):
    """(free, total) inodes; total 0: the filesystem has no fixed inode count (btrfs, NFS)."""
    s = os.statvfs(path)
    return s.f_favail, s.f_files


def no_space(path):
    """What ENOSPC meant: the inodes ran out (bytes may be free), or the bytes did."""
    free_i, total_i = inodes(path)
    if total_i and not free_i:
        avail, total = space(path)
        return "ran out of inodes (df -i: 0 free of %d; %s of %s still free)" \
            % (total_i, human(avail), human(total))
    return "ran out of space"


def margin_bytes(min_free, total):
    text = str(min_free).strip()
    if text.endswith("%"):
        return int(total * float(text[:-1]) / 100), text
    return parse_size(text), human(parse_size(text))


def check_space(path, need, min_free, what, files=0):
    """Refuse before writing when the bytes, or the inodes for `files` new entries, would
    leave less than the margin free (a percentage margin applies to inodes too)."""
    free_i, total_i = inodes(path)
    if total_i and files:
        text = str(min_free).strip()
        keep = int(total_i * float(text[:-1]) / 100) if text.endswith("%") else 0
        if free_i - files < keep:
            raise Refused("refusing to create %s in %s: it has %d free inodes "
                          "of %d (df -i)%s; free inodes, use fewer files in the profile, or pass "
                          "--storage-readonly to measure existing files"
                          % (plural(files, "file"), path, free_i, total_i,
                             ", and %s (%d) must stay free" % (text, keep) if keep else ""))
    avail, total = space(path)
    margin, label = margin_bytes(min_free, total)
    if avail - need < margin:
        raise Refused("refusing to write %s to %s: it would leave %s free of %s, below the safe "
                      "margin of %s (%s); free space, use smaller sizes in the profile, or pass "
                      "--storage-readonly to measure existing files"
                      % (what, path, human(max(avail - need, 0)), human(total), label,
                         human(margin)))
    return avail


# ------------------------------------------------------------------ cache control

def _libc():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def resident_fraction(paths, max_files=64):
    """Fraction of the files' pages in the page cache (mincore), or None if unknown."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mincore"):
        return None
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    step = max(1, len(paths) // max_files)
    resident = pages = 0
    for p in paths[::step]:
        fd = os.open(p, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            if not size:
                continue
            addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                n = (size + page - 1) // page
                vec = (ctypes.c_ubyte * n)()
                if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                    return None
                resident += n - bytes(vec).count(0)
                pages += n
            finally:
                libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    return resident / float(pages) if pages else 0.0


def drop_pages(paths):
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def direct_ok(path):
    if not hasattr(os, "O_DIRECT"):
        return False, "this OS has no O_DIRECT"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        return False, "open(O_DIRECT) failed: %s" % exc.strerror
    buf = mmap.mmap(-1, 1 << 16)
    try:
        os.preadv(fd, [buf], 0)
    except OSError as exc:
        return False, "read with O_DIRECT failed: %s" % exc.strerror
    finally:
        os.close(fd)
        buf.close()
    return True, ""


def mem_total():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def sync_fs(path):
    libc = _libc()
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc is not None and hasattr(libc, "syncfs") and libc.syncfs(fd) == 0:
            return
        os.sync()
    finally:
        os.close(fd)


_NOATIME = [getattr(os, "O_NOATIME", 0)]


def open_read(path, direct):
    """O_RDONLY (+O_DIRECT), and O_NOATIME where allowed: reading touches nothing."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    if _NOATIME[0]:
        try:
            return os.open(path, flags | _NOATIME[0])
        except PermissionError:
            _NOATIME[0] = 0
    return os.open(path, flags)


# ------------------------------------------------------------------ subcommands

def cmd_claim(a):
    path = resolve_path(a.path)
    fs = fs_info(path)
    check_access(path, a.readonly, fs)
    try:
        others = sorted(n for n in os.listdir(path)
                        if n.startswith(MARK) and not n.startswith("%s%s-" % (MARK, a.runid)))
    except OSError:
        others = []
    doc = {"path": path, "fs": fs, "readonly": a.readonly, "leftovers": others[:20]}
    if a.readonly:
        return doc
    need = parse_size(a.need)
    doc["free"] = check_space(path, need, a.min_free, human(need), files=a.need_files + 1)
    d = own_dir(path, a.runid, a.host)
    try:
        os.mkdir(d, 0o700)
        OWNED.append(d)
    except FileExistsError:
        raise Refused("%s already exists: refusing to touch it" % d) from None
    except OSError as exc:
        why = no_space(path) if exc.errno == errno.ENOSPC else exc.strerror
        raise Refused("storage path %s: cannot create %s (%s)" % (path, d, why)) from None
    doc["dir"] = d
    return doc


def manifest_path(a):
    return os.path.join(a.state_dir, "storage-%s-%s.json" % (a.runid, a.workload))


def _pattern():
    p = os.urandom(PATTERN_LEN)
    return memoryview(p + p)


def write_file(path, size, pattern, salt):
    """A new file (never an existing one) of size bytes of incompressible, non-repeating data."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    OWNED.append(path)
    try:
        off, b = 0, salt
        while off < size:
            n = min(WRITE_CHUNK, size - off)
            k = (b * 4097) % PATTERN_LEN
            off += os.write(fd, pattern[k:k + n])
            b += 1
    finally:
        os.close(fd)


def layout(a):
    """[(relative name, size)] of the files a workload writes."""
    if a.workload == "seq":
        bs = parse_size(a.bs)
        per = max(bs, parse_size(a.size) // a.jobs // bs * bs)
        return [("seq.%d" % j, per) for j in range(a.jobs)]
    fsize = parse_size(a.file_size)
    return [("small/f%06d" % i, fsize) for i in range(a.files)]


def unwritten_extents(fd):
    """Whether the open file holds an unwritten (preallocated: fallocate) extent; raises
    OSError where the filesystem does not answer FIEMAP."""
    start = 0
    while True:
        buf = bytearray(FIEMAP_HEAD.pack(start, (1 << 64) - 1 - start, FIEMAP_FLAG_SYNC, 0,
                                         FIEMAP_BATCH, 0)
                        + bytes(FIEMAP_EXTENT.size * FIEMAP_BATCH))
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf)
        mapped = FIEMAP_HEAD.unpack_from(buf)[3]
        if not mapped:
            return False
        for i in range(mapped):
            e = FIEMAP_EXTENT.unpack_from(buf, FIEMAP_HEAD.size + i * FIEMAP_EXTENT.size)
            if e[5] & FIEMAP_EXTENT_UNWRITTEN:
                return True
        if e[5] & FIEMAP_EXTENT_LAST:
            return False
        start = e[0] + e[2]


class OnDisk:
    """Read-only mode's test of a picked file: are its bytes on the disk? Counts what it skips
    and says whether unwritten extents could be looked for on this filesystem."""

    def __init__(self, fstype):
        self.fstype = fstype
        self.skipped = {"sparse": 0, "preallocated": 0}
        self.examples = []
        self.fiemap = None  # why FIEMAP could not be asked, once it failed

    def why_not(self, path, size, blocks):
        """None for a file to read, else why not ("sparse" or "preallocated")."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return "unreadable"
        try:
            if self.fiemap is None:
                try:
                    if unwritten_extents(fd):
                        return "preallocated"
                except OSError as exc:
                    self.fiemap = "FIEMAP unsupported on %s (%s)" % (self.fstype, exc.strerror)
            try:
                hole = os.lseek(fd, 0, os.SEEK_HOLE) < size
            except OSError:  # no SEEK_HOLE here: the allocated blocks below still tell
                hole = False
        finally:
            os.close(fd)
        short = blocks * 512 < size and not self.fstype.startswith(COMPRESSING_FS)
        return "sparse" if hole or short else None

    def skip(self, rel, why):
        self.skipped[why] = self.skipped.get(why, 0) + 1
        if len(self.examples) < 8:
            self.examples.append({"file": rel, "why": why})

    def said(self):
        """' (2 more skipped, no data on disk to read: 1 sparse, 1 preallocated)', or ''."""
        n = sum(self.skipped.values())
        if not n:
            return ""
        parts = ", ".join("%d %s" % (self.skipped[w], w) for w in ("sparse", "preallocated")
                          if self.skipped[w])
        return " (%d more skipped, no data on disk to read: %s)" % (n, parts)

    def doc(self):
        return {"count": sum(self.skipped.values()), **self.skipped, "files": self.examples,
                "unwritten_check": self.fiemap or "FIEMAP"}


def select_existing(path, a, fstype=""):
    """Read-only mode: existing files under path, deterministic, this host's shard first, none
    without its data on the disk; returns (files, what was skipped)."""
    found, seen, stack = [], 0, [path]
    while stack and seen < WALK_LIMIT:
        d = stack.pop()
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name, reverse=True)
        except OSError:
            continue
        for e in entries:
            seen += 1
            if e.name.startswith(MARK):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file(follow_symlinks=False) and os.access(e.path, os.R_OK):
                    st = e.stat(follow_symlinks=False)
                    found.append((e.path, st.st_size, st.st_blocks))
            except OSError:
                continue
    found.sort(key=lambda f: f[0])
    if a.workload == "seq":
        bs = parse_size(a.bs)
        cands = sorted((f for f in found if f[1] >= bs), key=lambda f: (-f[1], f[0]))
        if not cands:
            raise Refused("storage path %s: no file of at least %s to read sequentially "
                          "(read-only mode reads the files already there)" % (path, human(bs)))
        want = parse_size(a.size)
    else:
        cands = [f for f in found if f[1] > 0]
        if not cands:
            raise Refused("storage path %s: no readable non-empty file to read "
                          "(read-only mode reads the files already there)" % path)
        want = None
    k = len(cands) * a.shard // max(a.shards, 1)
    cands = cands[k:] + cands[:k]  # hosts of an aggregate read start on different files
    out, total, disk = [], 0, OnDisk(fstype)
    for p, size, blocks in cands:
        if (want is not None and total >= want) or (want is None and len(out) >= a.files):
            break
        why = disk.why_not(p, size, blocks)  # only the files picked: a walk stays a walk
        if why == "unreadable":
            continue
        if why:
            disk.skip(os.path.relpath(p, path), why)
            continue
        out.append((p, size))
        total += size
    # A figure from a fraction of the data the profile asks for is not its measurement.
    walked = " (the first %d entries looked at)" % WALK_LIMIT if seen >= WALK_LIMIT else ""
    if want is not None and total < want:
        raise Refused("storage path %s holds %s in %s of at least %s%s%s; the profile asks to "
                      "read %s (size): read-only mode reads only the files already there, so "
                      "point it at a larger dataset or lower size" % (
                          path, human(total), plural(len(out), "file"), human(bs), disk.said(),
                          walked, human(want)))
    if want is None and len(out) < a.files:
        raise Refused("storage path %s holds %d readable non-empty files%s%s; the profile asks to "
                      "read %d (files): read-only mode reads only the files already there, so "
                      "point it at a larger dataset or lower files" % (
                          path, len(out), disk.said(), walked, a.files))
    return out, disk.doc()


def cmd_prepare(a):
    path = resolve_path(a.path)
    fs = fs_info(path)
    t0 = time.time()
    doc = {"path": path, "workload": a.workload, "readonly": a.readonly, "fs": fs}
    skipped = None
    if a.readonly:
        check_access(path, True, fs)
        files, skipped = select_existing(path, a, fs.get("fstype") or "")
        doc["skipped"] = skipped
    else:
        d = own_dir(path, a.runid, a.host)
        if not os.path.isdir(d):
            raise Refused("%s is missing (claim it first)" % d)
        names = layout(a)
        need = sum(s for _, s in names) + 4096 * len(names)
        # every host made its run dir before any prepares: those seen here share this path
        run_dirs = sorted(n for n in os.listdir(path) if n.startswith("%s%s-" % (MARK, a.runid)))
        doc["run_dirs"] = run_dirs
        sharers = max(1, len(run_dirs))
        what = human(need) + (" (x %d hosts sharing it)" % sharers if sharers > 1 else "")
        doc["free"] = check_space(path, need * sharers, a.min_free, what,
                                  files=(len(names) + (a.workload == "small")) * sharers)
        doc["sharers"] = sharers
        pattern = _pattern()
        files = []
        try:
            if a.workload == "small":
                os.mkdir(os.path.join(d, "small"), 0o700)
                OWNED.append(os.path.join(d, "small"))
            for i, (rel, size) in enumerate(names):
                p = os.path.join(d, rel)
                write_file(p, size, pattern, salt=i * 7919)
                files.append((p, size))
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise Refused("%s writing %s to %s (the files written are removed)"
                              % (no_space(path), human(need), path)) from None
            raise
        sync_fs(d)
        drop_pages([p for p, _ in files])
        doc["dir"] = d
        doc["write_seconds"] = round(time.time() - t0, 3)
    doc.update(files=len(files), bytes=sum(s for _, s in files))
    with open(manifest_path(a), "w") as f:
        json.dump({"path": path, "workload": a.workload, "readonly": a.readonly, "fs": fs,
                   "files": files, "skipped": skipped}, f)
    return doc


def cmd_clean(a):
    path = a.path if a.path not in ("", "@tmp") else tempfile.gettempdir()
    removed, failed = [], []
    prefix = "%s%s-" % (MARK, a.runid)
    try:
        names = [n for n in os.listdir(path) if n.startswith(prefix)]
    except OSError:
        names = []
    for n in names:
        p = os.path.join(path, n)
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
            removed.append(p)
        except OSError as exc:
            failed.append("%s: %s" % (p, exc.strerror))
    return {"path": path, "removed": removed, "failed": failed}


# ------------------------------------------------------------------ readers

def wait_until(start_at):
    if not start_at:
        return 0.0
    while True:
        left = start_at - time.time()
        if left <= 0:
            return -left  # how late we started
        time.sleep(min(left, 0.05))


MAX_READERS = 256
# Linux AIO (what fio's libaio engine uses), through the raw syscalls: no libaio needed.
AIO_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}  # setup destroy getevents submit


class _Iocb(ctypes.Structure):  # struct iocb, little-endian (linux/aio_abi.h)
    _fields_ = [("data", ctypes.c_uint64), ("key", ctypes.c_uint32), ("rw_flags", ctypes.c_int32),
                ("opcode", ctypes.c_uint16), ("reqprio", ctypes.c_int16), ("fildes", ctypes.c_uint32),
                ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64), ("offset", ctypes.c_int64),
                ("reserved2", ctypes.c_uint64), ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32)]


class _IoEvent(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64), ("res", ctypes.c_int64),
                ("res2", ctypes.c_int64)]


class Aio:
    """An AIO context of `depth` reads in flight into one page-aligned buffer per slot."""

    def __init__(self, depth, bs):
        import platform
        nrs = AIO_SYSCALLS.get(platform.machine())
        libc = _libc()
        if nrs is None or libc is None or sys.byteorder != "little":
            raise OSError(errno.ENOSYS, "no Linux AIO syscalls known for %s" % platform.machine())
        self.setup_nr, self.destroy_nr, self.getevents_nr, self.submit_nr = nrs
        self.sc = libc.syscall
        self.sc.restype = ctypes.c_long
        self.depth, self.bs = depth, bs
        self.ctx = ctypes.c_ulong(0)
        if self.sc(ctypes.c_long(self.setup_nr), ctypes.c_uint(depth), ctypes.byref(self.ctx)) < 0:
            raise OSError(ctypes.get_errno(), "io_setup: %s" % os.strerror(ctypes.get_errno()))
        self.mem = mmap.mmap(-1, depth * bs)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.iocbs = (_Iocb * depth)()
        self.events = (_IoEvent * depth)()
        self.one = (ctypes.POINTER(_Iocb) * 1)()

    def submit(self, slot, fd, off, nbytes):
        cb = self.iocbs[slot]
        ctypes.memset(ctypes.byref(cb), 0, ctypes.sizeof(cb))
        cb.data, cb.opcode, cb.fildes = slot, 0, fd  # IOCB_CMD_PREAD
        cb.buf, cb.nbytes, cb.offset = self.base + slot * self.bs, nbytes, off
        self.one[0] = ctypes.pointer(cb)
        while True:
            r = self.sc(ctypes.c_long(self.submit_nr), self.ctx, ctypes.c_long(1), self.one)
            if r == 1:
                return
            e = ctypes.get_errno()
            if r < 0 and e in (errno.EINTR, errno.EAGAIN):
                continue
            raise OSError(e, "io_submit: %s" % os.strerror(e))

    def reap(self):
        """[(slot, bytes)] of at least one finished read."""
        while True:
            n = self.sc(ctypes.c_long(self.getevents_nr), self.ctx, ctypes.c_long(1),
                        ctypes.c_long(self.depth), self.events, None)
            if n >= 0:
                out = []
                for e in self.events[:n]:
                    if e.res < 0:
                        raise OSError(-e.res, "read: %s" % os.strerror(-e.res))
                    out.append((e.data, e.res))
                return out
            if ctypes.get_errno() != errno.EINTR:
                raise OSError(ctypes.get_errno(), "io_getevents")

    def close(self):
        self.sc(ctypes.c_long(self.destroy_nr), self.ctx)


def aio_works(path):
    """Whether Linux AIO with O_DIRECT reads this file here (not in gVisor, say)."""
    try:
        aio = Aio(1, 4096)
    except OSError as exc:
        return False, str(exc)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        aio.submit(0, fd, 0, 4096)
        aio.reap()
        return True, ""
    except OSError as exc:
        return False, str(exc)
    finally:
        os.close(fd)
        aio.close()




def builtin_read(files, a, direct, drop_behind):
    """One process per job. Sequential with O_DIRECT: Linux AIO keeps iodepth consecutive
    blocks in flight, as fio's libaio engine does (synchronous readers fall behind it on
    some virtual disks). Without AIO: one process per read in flight (jobs x iodepth, at
    most MAX_READERS; no GIL or shared address space between them), reader (j, d) reading
    blocks d, d + D, ... Small files: one reader per job, each file opened, read whole and
    closed. Byte counters live in shared memory and are sampled every SAMPLE_S."""
    bs = parse_size(a.bs)
    seq = a.workload == "seq"
    if not seq:  # a small file is read whole: no larger buffer than the largest file
        bs = min(bs, (max(s for _, s in files) + 4095) // 4096 * 4096)
    jobs = max(1, min(a.jobs, len(files)))
    per_job = [files[j::jobs] for j in range(jobs)]
    depth = a.iodepth if seq else 1
    use_aio, why_not = (False, "")
    if seq and direct:
        use_aio, why_not = (False, "--no-aio given") if a.no_aio else aio_works(files[0][0])
    if not use_aio:  # then one process per read in flight
        depth = max(1, min(depth, MAX_READERS // jobs))
    slots = jobs if use_aio else jobs * depth
    shm = mmap.mmap(-1, 24 * slots)  # anonymous: shared with the forked readers
    view = memoryview(shm)
    counts, nfiles = view[:8 * slots].cast("Q"), view[8 * slots:16 * slots].cast("Q")
    ends = view[16 * slots:].cast("d")
    late = wait_until(a.start_at)
    t_start = time.time()
    deadline = t_start + a.runtime if a.runtime else None

    def work(i, j, d):
        buf = mmap.mmap(-1, bs)
        mv = memoryview(buf)
        views = {}  # request length -> a view of the buffer (small files: one length)
        fds = {}
        try:
            while True:
                for path, size in per_job[j]:
                    if deadline is not None and time.time() >= deadline:
                        return
                    fd = fds.get(path) if seq else None
                    if fd is None:
                        fd = open_read(path, direct)
                        if seq:
                            fds[path] = fd
                    try:
                        for off in range(d * bs, size, depth * bs):
                            if deadline is not None and time.time() >= deadline:
                                return
                            want = min(bs, size - off)
                            if direct:
                                want = (want + 4095) // 4096 * 4096
                            v = views.get(want)
                            if v is None:
                                v = views[want] = [mv[:want]]
                            n = os.preadv(fd, v, off)
                            counts[i] += n
                            if drop_behind:
                                os.posix_fadvise(fd, off, n, os.POSIX_FADV_DONTNEED)
                        if not seq:  # counted once read whole, not when the window ends in it
                            nfiles[i] += 1
                    finally:
                        if not seq:  # a data loader's worker: open, read whole, close
                            os.close(fd)
                if deadline is None:
                    return
        finally:
            ends[i] = time.time()

    def work_aio(i, j):
        """Job j's blocks in order, `depth` of them in flight, as fio's libaio engine."""
        try:
            aio = Aio(depth, bs)
            fds = {p: open_read(p, True) for p, _ in per_job[j]}

            def blocks():
                while True:
                    for path, size in per_job[j]:
                        for off in range(0, size, bs):
                            yield fds[path], off, (min(bs, size - off) + 4095) // 4096 * 4096
                    if deadline is None:
                        return
            it, inflight = blocks(), 0
            for slot in range(depth):
                item = next(it, None)
                if item is None:
                    break
                aio.submit(slot, *item)
                inflight += 1
            while inflight:
                for slot, n in aio.reap():
                    counts[i] += n
                    inflight -= 1
                    if deadline is not None and time.time() >= deadline:
                        continue
                    item = next(it, None)
                    if item is not None:
                        aio.submit(slot, *item)
                        inflight += 1
        finally:
            ends[i] = time.time()

    def reader(i, j, d, w):
        code = 1
        try:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            if use_aio:
                work_aio(i, j)
            else:
                work(i, j, d)
            code = 0
        except OSError as exc:
            try:
                os.write(w, ("%s: %s" % (exc.filename or "read", exc.strerror)).encode()[:4000])
            except OSError:
                pass
        except BaseException as exc:  # noqa: B036 - a forked reader must never return
            try:
                os.write(w, str(exc).encode()[:4000])
            except OSError:
                pass
        finally:
            os._exit(code)

    procs = {}
    try:
        pairs = [(j, 0) for j in range(jobs)] if use_aio else \
            [(j, d) for j in range(jobs) for d in range(depth)]
        for i, (j, d) in enumerate(pairs):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                reader(i, j, d, w)
            os.close(w)
            procs[pid] = r
        intervals, last_t, last_b, failed = [], t_start, 0, []
        while procs:
            time.sleep(SAMPLE_S)
            while procs:
                pid, status = os.waitpid(-1, os.WNOHANG)
                if not pid:
                    break
                r = procs.pop(pid)
                msg = os.read(r, 4096).decode(errors="replace")
                os.close(r)
                if status:
                    failed.append(msg or "reader exited with status %d" % status)
            if failed:
                raise Refused("built-in reader failed: %s" % failed[0])
            now = max(ends) if not procs else time.time()
            tot = sum(counts)
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
    t_end = max(ends)
    total = sum(counts)
    if total != last_b:
        intervals.append([round(last_t, 4), round(t_end, 4), total - last_b])
    done = sum(nfiles)
    for v in (counts, nfiles, ends):
        v.release()
    view.release()
    shm.close()
    return {"tool": "builtin", "tool_version": "signoff storage probe (Python %s)"
            % sys.version.split()[0],
            "params": {"bs": bs, "iodepth": depth, "numjobs": jobs, "direct": direct,
                       "ioengine": ("Linux AIO, %d processes" % slots) if use_aio else
                       ("pread, %d processes" % slots) + (" (no AIO: %s)" % why_not if why_not else ""),
                       "runtime_s": a.runtime, "time_based": bool(a.runtime)},
            "bytes": total, "seconds": round(t_end - t_start, 4),
            "bw_bytes": total / max(t_end - t_start, 1e-9), "files_read": done if not seq else None,
            "t_start": t_start, "t_end": t_end, "late_s": round(late, 3),
            "intervals": [iv for iv in intervals if iv[1] > iv[0]]}


def fio_engines():
    try:
        out = subprocess.run(["fio", "--enghelp"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {w.strip() for w in out.splitlines()[1:]}


def fio_version():
    try:
        return subprocess.run(["fio", "--version"], stdout=subprocess.PIPE,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "fio"


def fio_read(files, a):
    """fio on the files; a name fio cannot take is given to it as a symlink in the probe's
    own dir (never under the storage path), removed again after the read."""
    links = os.path.join(a.state_dir, "fio-%s-%s.links" % (a.runid, a.workload))
    named = []
    try:
        for i, (p, size) in enumerate(files):
            if FIO_UNSAFE.search(p):
                if not os.path.isdir(links):
                    os.mkdir(links, 0o700)
                p = os.path.join(links, str(i))
                os.symlink(files[i][0], p)
            named.append((p, size))
        res = _fio(named, a)
    finally:
        shutil.rmtree(links, ignore_errors=True)
    linked = sum(1 for x, y in zip(named, files) if x != y)
    if linked:
        res["params"]["names_linked"] = linked  # fio read these through symlinks
    return res


def _fio(files, a):
    """fio --readonly on the same files, one job per reader, JSON output and bw logs."""
    bs = parse_size(a.bs)
    seq = a.workload == "seq"
    jobs = max(1, min(a.jobs, len(files)))
    engine = "libaio" if seq and "libaio" in fio_engines() else "psync"
    depth = a.iodepth if engine == "libaio" else 1
    per_file = 1
    if not seq:  # a small file is read whole: one I/O per file, or per bs block of it
        bs = min(bs, max(s for _, s in files))
        per_file = max(1, -(-max(s for _, s in files) // bs))
    tag = os.path.join(a.state_dir, "fio-%s-%s" % (a.runid, a.workload))
    lines = ["[global]", "rw=read", "bs=%d" % bs, "direct=1", "ioengine=%s" % engine,
             "iodepth=%d" % depth, "group_reporting=1", "file_service_type=sequential",
             "write_bw_log=%s" % tag, "log_avg_msec=%d" % int(SAMPLE_S * 1000), "log_unix_epoch=1"]
    if not seq:
        lines.append("openfiles=1")  # open, read, close: what a data loader does per sample
    if a.runtime:
        lines += ["time_based=1", "runtime=%d" % a.runtime]
    for j in range(jobs):
        lines.append("[r%d]" % j)
        chunk = []
        for p, _ in files[j::jobs]:  # a value holds <= 4096 chars; repeated filename= appends
            if chunk and sum(len(c) + 1 for c in chunk) + len(p) > 4000:
                lines.append("filename=" + ":".join(chunk))
                chunk = []
            chunk.append(p)
        lines.append("filename=" + ":".join(chunk))
    jobfile, out = tag + ".fio", tag + ".json"
    with open(jobfile, "w") as f:
        f.write("\n".join(lines) + "\n")
    late = wait_until(a.start_at)
    t_launch = time.time()
    p = subprocess.Popen(["fio", "--readonly", "--output-format=json", "--output=" + out, jobfile],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = p.communicate()
    except BaseException:
        p.terminate()
        p.wait()
        raise
    t_end = time.time()
    try:
        with open(out) as f:
            text = f.read()
        doc = json.loads(text[text.index("{"):])
        job = doc["jobs"][0]
    except (OSError, ValueError, KeyError, IndexError):
        raise Refused("fio failed (exit %d): %s" % (p.returncode, " | ".join(
            (err or "no output").strip().splitlines()[-3:]))) from None
    if p.returncode != 0 or job.get("error"):
        raise Refused("fio failed (exit %d, error %s): %s" % (p.returncode, job.get("error"),
                      " | ".join((err or "").strip().splitlines()[-3:])))
    r = job["read"]
    intervals = []
    for log in sorted(os.listdir(a.state_dir)):
        full = os.path.join(a.state_dir, log)
        if not full.startswith(tag + "_bw.") or not log.endswith(".log"):
            continue
        prev = None
        with open(full) as f:
            for line in f:
                parts = [x.strip() for x in line.split(",")]
                if len(parts) < 3 or parts[2] != "0":
                    continue
                t, kib_s = int(parts[0]) / 1000.0, int(parts[1])
                start = prev if prev is not None else t - SAMPLE_S
                intervals.append([round(start, 4), round(t, 4), int(kib_s * 1024 * (t - start))])
                prev = t
        os.unlink(full)
    logged = sum(iv[2] for iv in intervals)
    if not intervals or not logged:
        intervals = [[t_end - r["runtime"] / 1000.0, t_end, r["io_bytes"]]]
    elif abs(logged - r["io_bytes"]) > 0.02 * r["io_bytes"]:  # log averages are rounded: rescale
        intervals = [[x, y, int(b * r["io_bytes"] / float(logged))] for x, y, b in intervals]
    for fn in (jobfile, out):
        os.unlink(fn)
    seconds = r["runtime"] / 1000.0
    return {"tool": "fio", "tool_version": doc.get("fio version") or fio_version(),
            "params": {"bs": bs, "iodepth": depth, "numjobs": jobs, "direct": True,
                       "ioengine": engine, "runtime_s": a.runtime, "time_based": bool(a.runtime),
                       "group_reporting": True},
            "bytes": r["io_bytes"], "seconds": seconds, "bw_bytes": r["bw_bytes"],
            "files_read": r.get("total_ios", 0) // per_file if not seq else None,
            "t_start": min(iv[0] for iv in intervals), "t_end": max(iv[1] for iv in intervals),
            "late_s": round(late, 3), "launch_s": round(intervals[0][0] - t_launch, 3) if intervals else None,
            "intervals": intervals}


def cmd_read(a):
    try:
        with open(manifest_path(a)) as f:
            man = json.load(f)
    except OSError:
        raise Refused("no %s workload prepared for run %s (prepare first)" % (a.workload, a.runid)) \
            from None
    files = [tuple(x) for x in man["files"]]
    paths = [p for p, _ in files]
    fs = man["fs"]
    direct, why = (False, "--no-direct given") if a.no_direct else direct_ok(paths[0])
    tool, fallback = a.tool, None
    fio_can = shutil.which("fio") is not None
    if tool in ("auto", "fio"):
        if not fio_can:
            fallback = "fio is not installed on this host"
        elif not direct:
            fallback = "no O_DIRECT (%s): fio would read through the page cache" % why
        elif a.workload == "small" and man["readonly"]:
            fallback = "fio reads whole blocks only and an existing dataset's files have " \
                       "arbitrary sizes"
        tool = "builtin" if fallback else "fio"
    cache = {"method": "O_DIRECT" if direct else "fadvise(DONTNEED) before and behind reads",
             "resident_fraction": None, "note": ""}
    if fs["fstype"] in RAM_FS:
        cache["defeated"] = False
        cache["note"] = "%s is RAM-backed: its files live in the page cache" % fs["fstype"]
    elif direct:
        cache["defeated"] = True
        if fs["fstype"].startswith(OWN_CACHE_FS):
            total, mem = sum(s for _, s in files), mem_total()
            cache["defeated"] = bool(mem and total > mem)
            cache["note"] = "%s may answer O_DIRECT reads from its own cache (ARC)" % fs["fstype"]
    else:
        drop_pages(paths)
        res = resident_fraction(paths)
        cache["resident_fraction"] = None if res is None else round(res, 4)
        cache["defeated"] = res is not None and res < 0.01
        if res is None:
            cache["note"] = "mincore unavailable: cannot tell whether the page cache holds the files"
        elif res >= 0.01:
            cache["note"] = ("%.0f%% of the files' pages stay in the page cache after "
                             "fadvise(DONTNEED) (mapped or locked by another process, or a "
                             "RAM-backed filesystem)" % (100 * res))
        cache["note"] = ("no O_DIRECT (%s); " % why + cache["note"]).rstrip("; ")
    res = fio_read(files, a) if tool == "fio" else builtin_read(files, a, direct, not direct)
    if not res["bytes"]:  # e.g. files truncated since they were picked: 0 GB/s is no figure
        raise Refused("%s read no data from the %d files under %s: nothing was measured"
                      % (res["tool"], len(files), man["path"]))
    res.update(workload=a.workload, path=man["path"], readonly=man["readonly"], fs=fs,
               cache=cache, fallback=fallback, files=len(files),
               bytes_per_pass=sum(s for _, s in files))
    res["params"]["file_size"] = files[0][1] if a.workload == "small" and not man["readonly"] else None
    if man["readonly"]:  # a dataset's files: which were read, which were not and why
        res["read_files"] = [os.path.relpath(p, man["path"]) for p in paths[:NAMED]]
        res["read_files_more"] = max(len(paths) - NAMED, 0)
        res["skipped"] = man.get("skipped")
    if a.workload == "small" and res.get("files_read"):
        res["files_per_s"] = round(res["files_read"] / max(res["seconds"], 1e-9), 1)
    res["gbps"] = round(res["bw_bytes"] / 1e9, 4)
    return res


def cmd_run(a):
    """claim + prepare + read + clean, in one process (standalone use)."""
    doc = {"claim": cmd_claim(a)}
    try:
        doc["prepare"] = cmd_prepare(a)
        doc.update(cmd_read(a))
    finally:
        if not a.readonly:
            doc["clean"] = cmd_clean(a)
        try:
            os.unlink(manifest_path(a))
        except OSError:
            pass
    return doc


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["claim", "prepare", "read", "clean", "run"])
    ap.add_argument("--path", default="@tmp", help="directory to measure (@tmp: the temp dir)")
    ap.add_argument("--runid", default=time.strftime("%Y%m%dT%H%M%S") + "-%d" % os.getpid())
    ap.add_argument("--host", default=socket.gethostname(), help="name in the run's directory")
    ap.add_argument("--workload", choices=["seq", "small"], default="seq")
    ap.add_argument("--readonly", action="store_true", help="read existing files, write nothing")
    ap.add_argument("--tool", choices=["auto", "fio", "builtin"], default="auto")
    ap.add_argument("--no-direct", action="store_true", help="buffered reads (cache dropped)")
    ap.add_argument("--no-aio", action="store_true",
                    help="built-in reader: one process per read in flight, not Linux AIO")
    ap.add_argument("--size", default="1G", help="seq: bytes per host (split over --jobs files)")
    ap.add_argument("--bs", default="1M", help="read block size")
    ap.add_argument("--jobs", type=int, default=4, help="readers (fio numjobs)")
    ap.add_argument("--iodepth", type=int, default=16, help="seq: I/Os in flight per reader")
    ap.add_argument("--files", type=int, default=4096, help="small: number of files")
    ap.add_argument("--file-size", default="128K", help="small: size of each file")
    ap.add_argument("--runtime", type=int, default=10, help="seconds of reading (0: one pass)")
    ap.add_argument("--start-at", type=float, default=0, help="epoch time to start reading at")
    ap.add_argument("--need", default="0", help="claim: bytes this host will write")
    ap.add_argument("--need-files", type=int, default=0, help="claim: files this host will create")
    ap.add_argument("--min-free", default="10%", help="keep this much free (percent or size)")
    ap.add_argument("--shard", type=int, default=0, help="read-only: this host's index")
    ap.add_argument("--shards", type=int, default=1, help="read-only: number of hosts")
    ap.add_argument("--state-dir", default=".", help="where the manifest goes (the probe's cwd)")
    return ap


def main(argv=None):
    a = build_parser().parse_args(argv)
    a.state_dir = os.path.abspath(a.state_dir)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _on_signal)
    rc, doc = 0, {}
    try:
        doc = {"claim": cmd_claim, "prepare": cmd_prepare, "read": cmd_read, "clean": cmd_clean,
               "run": cmd_run}[a.command](a)
    except Refused as exc:
        doc = {"error": str(exc)}
    except Interrupted as exc:
        doc, rc = {"error": "interrupted by signal %d" % exc.signum}, 128 + exc.signum
    except Exception as exc:  # noqa: BLE001 - the controller gets the cause, not a traceback
        doc = {"error": "%s: %s" % (type(exc).__name__, exc),
               "traceback": traceback.format_exc().splitlines()[-4:]}
    finally:
        if OWNED and (rc or "error" in doc):
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not stop the cleanup
            doc["removed"] = remove_owned()
    doc.update(host=socket.gethostname(), command=a.command, runid=a.runid)
    try:
        print(json.dumps(doc))
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    return rc


def remove_owned():
    """Remove what this process created, newest first; never anything else."""
    gone = []
    while OWNED:
        p = OWNED.pop()
        try:
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
            gone.append(p)
        except FileNotFoundError:
            pass
        except OSError:
            pass
    return len(gone)


if __name__ == "__main__":
    sys.exit(main())
