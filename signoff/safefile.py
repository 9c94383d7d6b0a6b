"""Files a run writes into its report directory, where another local user may have planted a
link (issue 51 item 3: root wrote dcgm/<host>.json through one, into any file it names).

The rules: the report directory is refused unless the run's user owns it and no one else can
write to it or to a directory above it (refused(): then no one else can plant anything there
from the moment it is checked); every directory in it is made fresh by the run (subdir(): mkdir,
which never follows a link); every file is written into a new file of its own, opened with
O_CREAT|O_EXCL|O_NOFOLLOW relative to its directory's descriptor, then renamed over the name
(write(), open_new()): a link or file already at the name is replaced, never written through."""

from __future__ import annotations

import os
import pwd
import secrets
import stat
from pathlib import Path

NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# the directory as named (the user's own link to the report dir is fine: refused() checked where
# it leads; the run's subdirectories are made by subdir(), never a link)
DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
MODE = 0o644  # the report is read by the provider, as a plain write_text left it (umask 022)
DIR_MODE = 0o755


def user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _unsafe(path: Path, st: os.stat_result, uid: int, last: bool) -> str | None:
    """Why another user could put something at or under `path`, else None. A directory above may
    be root's, and open to all where it is sticky (/tmp: only an entry's owner renames it)."""
    link = stat.S_ISLNK(st.st_mode)
    if st.st_uid != uid and (st.st_uid != 0 or (last and not link)):
        return f"{path} is owned by {user(st.st_uid)}, not by {user(uid)} who runs signoff"
    if link:
        return None  # the user's own link (or root's): where it leads is checked as well
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and (last or not st.st_mode & stat.S_ISVTX):
        who = " and ".join(w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH))
                           if st.st_mode & bit)
        return f"{path} is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def refused(path: Path, trusted: Path | None = None, parent: bool = False) -> str | None:
    """Why `path`, an existing directory, is no place for a run's files, else None: not owned by
    the run's user, writable by anyone else, or below a directory another user owns or can write
    to (without the sticky bit) or a link another user owns; those at or above `trusted` (the
    clone's own reports/) are not asked. parent: `path` is where the run's directory will be
    made, held to a parent's rules (/tmp is fine)."""
    uid = os.geteuid()
    path = Path(os.path.abspath(path))
    trusted = Path(os.path.abspath(trusted)) if trusted else None
    for chain in (path, Path(os.path.realpath(path))):  # as named, then where its links lead
        for p in (*reversed(chain.parents), chain):
            if trusted is not None and (p == trusted or p in trusted.parents):
                continue
            why = _unsafe(p, os.lstat(p), uid, last=p == chain and not parent)
            if why:
                return why
    return None


def subdir(path: Path) -> Path:
    """path made a directory: fresh (mkdir never follows a link), or the one this run made
    already (another thread's; a real directory of the run's user that no one else can write)."""
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        st = os.lstat(path)
        why = f"{path} is not a directory" if not stat.S_ISDIR(st.st_mode) else \
            _unsafe(path, st, os.geteuid(), True)
        if why:
            raise OSError(f"{why}: not written into") from None
    return path


def _tmp(d: int, name: str) -> tuple[int, str]:
    """A new file beside `name` in directory `d`: never one that existed (O_EXCL), never a link."""
    while True:
        tmp = f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, NEW, MODE, dir_fd=d), tmp
        except FileExistsError:
            continue


def write(path: Path, data: str | bytes) -> None:
    """data into a new file renamed over path (atomic: a reader sees the old or the new whole)."""
    path = Path(path)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    d = os.open(path.parent, DIR)  # the names below are resolved from it alone (dir_fd)
    try:
        fd, tmp = _tmp(d, path.name)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, path.name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            os.unlink(tmp, dir_fd=d)
            raise
    finally:
        os.close(d)


def open_new(path: Path, buffering: int = -1):
    """A new file at path, open for writing text (a log appended to as the run goes): whatever
    was at the name (an earlier run's log, a planted link) is replaced, never written through."""
    path = Path(path)
    d = os.open(path.parent, DIR)
    try:
        fd, tmp = _tmp(d, path.name)
        try:
            os.replace(tmp, path.name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=d)
            raise
    finally:
        os.close(d)
    return os.fdopen(fd, "w", encoding="utf-8", buffering=buffering)


def read_text(path: Path) -> str:
    """A file of the report dir read without following a link at its name (ELOOP: OSError)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, encoding="utf-8") as f:
        return f.read()
