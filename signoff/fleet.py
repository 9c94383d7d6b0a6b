"""The hosts of one run: probes shipped to a per-run temp dir on each host, run in
parallel, their JSON cached; temp dirs removed at the end whatever happened."""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import datetime, timezone

from signoff import cotenants, families
from signoff.inventory import Host, Inventory
from signoff.slurm import SlurmTransport
from signoff.transport import HostUnreachable, Transport, open_transport

# The end of a run (or Ctrl-C) waits this long for each cleanup phase of all hosts at once;
# a host that has not answered by then is named with what it keeps, not waited for.
CLEANUP_S = 10
# Hosts measured at once (--max-parallel): 1,000 hosts in one wave, a thread each.
MAX_PARALLEL = 1024
PROGRESS_S = 1.0  # how often a waiting check updates the progress line


def bounded(fn, items: list, seconds: float = CLEANUP_S) -> list:
    """fn(item) for every item at once; the items whose call had not returned after
    `seconds`. Daemon threads: one stuck on a dead host cannot hold up the exit."""
    threads = [threading.Thread(target=_quiet, args=(fn, x), daemon=True) for x in items]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [x for x, t in zip(items, threads) if t.is_alive()]


def _quiet(fn, x) -> None:
    try:
        fn(x)
    except Exception:  # noqa: BLE001 - a failed cleanup is reported by what it left
        pass


@contextmanager
def threads(n: int):
    """A thread pool whose exit never waits for calls still running: on Ctrl-C the run
    stops at once (Fleet.close() then ends the remote commands those calls wait for);
    a `with ThreadPoolExecutor()` block would wait for them, e.g. a hung rank's timeout."""
    pool = ThreadPoolExecutor(max_workers=max(1, n))
    try:
        yield pool
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


# A probe's pid file (.pid.<pid>) holds its shell's start time: a pid file whose pid now
# names another process (pids wrap; a file left by a killed probe, or `signoff clean` on a dead
# run's dir) is skipped, never killed. A file without a start time (an older version) too.
SAME_PROCESS = ("t=$(cat \"$f\" 2>/dev/null); [ -n \"$t\" ] && "
                "[ \"$(cut -d' ' -f22 /proc/$p/stat 2>/dev/null)\" = \"$t\" ] || continue; ")
PID_FILE = "cut -d' ' -f22 /proc/$$/stat > .pid.$$"  # the probe's shell: pid and start time
# Kill the process group of every probe this run started on the host (the group leader
# is the host-side `timeout`), then anything left by pid. Only in a dir of this user (never a
# link), from a pid file of this user, and a process of this user: another local user may plant
# a pid file naming any process (its start time is world-readable). A pid file whose process
# is another user's is "spared": said, with its pid and dir, and never signalled.
KILL_PROBES = ("[ -O {wd} ] && ! [ -L {wd} ] && for f in {wd}/.pid.*; do p=${{f##*.}}; "
               "[ \"$p\" = '*' ] && continue; [ -O \"$f\" ] && [ -f \"$f\" ] || continue; " + SAME_PROCESS +
               "[ -O /proc/$p ] || {{ echo spared $p {wd}; continue; }}; "
               "kill -0 $p 2>/dev/null && echo killed $p; "
               "g=$(ps -o pgid= -p $p 2>/dev/null | tr -d ' '); "
               "[ \"$g\" = \"$(ps -o pgid= -p $$ | tr -d ' ')\" ] && g=; "  # never our own group
               "[ -n \"$g\" ] && kill -KILL -$g 2>/dev/null; kill -KILL $p 2>/dev/null; done; true")


# The run lock of a host: a directory made atomically by a keeper process that the run
# holds on its own SSH channel (guarded(): it is TERMed, and removes the lock, when the
# channel goes, even if the controller was SIGKILLed). Its pid is in the lock: a lock
# whose keeper is dead (a crashed host, a KILLed keeper) is stale and taken over. Named
# by the network namespace, which is the host as its SSH clients see it (network-namespace
# hosts share one filesystem), and the boot (a home shared over NFS holds every host's).
# The xdist workers of one run share its lock. The trap ignores
# TERM before it removes the lock: `timeout` sends its group (rm included) a second TERM;
# and nothing may be written to the closed channel (sh's "Terminated": SIGPIPE).
# The takeover is atomic: only the run whose token (a symlink, made with O_EXCL semantics and
# its pid and start time in it at once) is in the stale lock removes it, after judging it
# stale again (renamed away first: a token another run makes in it meanwhile cannot make its
# removal fail), then makes a new one with mkdir like any run. (Two runs that judged the same
# lock stale at once both removed it: the second removed the first's new lock, and both held it.)
# A token whose maker is dead (killed while taking over) is passed by a token named after it.
# The lock lives where no other user can make a name (in /tmp any user could: a lock planted
# there blocked every run, a name holding line breaks spelt this keeper's answers and had root
# TERM a pid of its choosing): a 0700 dir of the user's own (mkdir does not follow a link; then
# it must be a dir, not a link, ours, not writable by others), in a parent of the user's alone:
# root's /run/signoff; another user's runtime dir (/run/user/<uid>, by uid: XDG_RUNTIME_DIR
# differs between a login, sudo and cron, and two runs of one user must find one lock) or,
# without one (no logind: Slurm nodes), its home. Made by the first run, removed by the last.
# Nothing another user chose is ever said: the keeper's first line is its pid and start time
# (cleanup TERMs that process only), then exactly one answer (take_lock).
KEEPER = """st() {{ sed 's/.*) //' /proc/$1/stat 2>/dev/null | cut -d' ' -f20; }}
me="$$ $(st $$)"; echo "keeper $me"
ours() {{ [ -d "$1" ] && ! [ -L "$1" ] && [ -O "$1" ] && [ -z "$(find "$1" -maxdepth 0 -perm /022)" ]; }}
u=$(id -u); if [ "$u" = 0 ]; then Q=/run B=signoff; elif ours /run/user/$u; then Q=/run/user/$u B=signoff
else Q=$HOME B=.signoff-lock; fi
P=$(cd -P -- "$Q" 2>/dev/null && pwd -P); ours "$P" || {{ echo "nolock $Q"; exit 3; }}; B=$P/$B
L=$B/lock.$(tr -cd 0-9a-f- </proc/sys/kernel/random/boot_id).$(readlink /proc/self/ns/net | tr -cd 0-9)
end=$(( $(date +%s) + {wait} )); n=0
alive() {{ [ -n "$1" ] && [ -d /proc/$1 ] && [ "$(st $1)" = "$2" ]; }}
stale() {{ set -- $(cat "$L/pid" 2>/dev/null); if [ -n "${{1:-}}" ]; then ! alive "$1" "${{2:-}}"
  else [ -n "$(find "$L" -maxdepth 0 -mmin +1 2>/dev/null)" ]; fi; }}
while :; do
  mkdir -m 700 "$B" 2>/dev/null; ours "$B" || {{ echo "nolock $B"; exit 3; }}
  mkdir "$L" 2>/dev/null && break
  # neither made nor there: B removed by a run that ended meanwhile (again), or not writable
  [ -d "$L" ] || {{ n=$((n+1)); [ $n -lt 20 ] && continue; echo "nolock $B"; exit 3; }}
  case "$(cat "$L/owner" 2>/dev/null)" in "run {run} "*) echo "shared $$"; exec sleep {keep};; esac
  if stale; then
    k="$L/take"; h=$(readlink "$k")
    while [ -n "$h" ] && [ "$h" != "$me" ] && ! alive $h; do
      k="$L/take.${{h% *}}.${{h#* }}"; h=$(readlink "$k"); done
    [ -z "$h" ] && ln -sn "$me" "$k" 2>/dev/null && h=$me
    if [ "$h" = "$me" ] && stale && mv "$L" "$L.gone.${{me% *}}.${{me#* }}"; then
      rm -rf "$L.gone.${{me% *}}.${{me#* }}"; continue; fi
  fi
  if [ $(date +%s) -ge $end ]; then echo "busy $L $(head -c 300 "$L/owner" 2>/dev/null | tr -cd '[:print:]')"
    exit 3; fi
  sleep 1
done
echo {owner} > "$L/owner"; echo $me > "$L/pid"
trap 'trap "" TERM INT HUP; rm -rf "$L"; rmdir "$B" 2>/dev/null; exit 0' TERM INT HUP
echo "locked $$ $L"; exec >/dev/null 2>&1
while :; do sleep 2 & wait $!; done"""
KEEPER_S = 30 * 86400  # the host-side limit of a keeper: longer than any soak
KEEPER_SAID = re.compile(r"keeper (\d+) (\d+)")  # its first line: pid and start time
# The lock's path as KEEPER makes it: its parent's (/run, /run/user/<uid>, a home) as the host
# resolves it, printable and one line
LOCK_PATH = r"/(?:[ -~]*/)?(?:signoff|\.signoff-lock)/lock\.[0-9a-f-]*\.\d*"
# Only the keeper's own process: a pid that is another process's by now (the keeper gone, the
# pid reused) is not signalled. Then its end is waited for (5 s at most): the lock is gone when
# the run ends, and a run started right after it is not refused by it.
KILL_KEEPER = ("k() {{ [ \"$(sed 's/.*) //' /proc/{pid}/stat 2>/dev/null | cut -d' ' -f20)\" = {start} ]; "
               "}}; k && kill -TERM {pid} && i=0 && while k && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); "
               "done; true")


def printable(text: str) -> str:
    """Host text for one line of a message: no control characters (a line break, an escape)."""
    return re.sub(r"[^ -~]", "?", text)

# The run's temp dir, with its keeper's pid and start time: one short command, its own cause
# (no space, a read-only /tmp) in its error. SIGNOFF_TMPDIR moves it (tests: a /tmp of their own).
TMP = "${{SIGNOFF_TMPDIR:-/tmp}}"  # as .format() reads it
MKTEMP = f"d=$(mktemp -d {TMP}/signoff.XXXXXXXX) && echo $d && {{keeper}} > $d/.keeper"
KEEPER_LINE = "echo {pid} $(cut -d' ' -f22 /proc/{pid}/stat 2>/dev/null)"
# A session without a lock (`signoff plan`, a HostSession used alone) has no keeper: a blank
# .keeper, judged by the dir's age as an older version's. (Its pid once read '': /proc//stat is
# the kernel's /proc/stat, whose fields made a "keeper" 0 that is never alive, so every other
# run's sweep, `signoff clean` and the suite's own cleanup took the live dir for a dead run's.)
# A line, not an empty file: its write needs a data block, so a full /tmp fails here, first.
NO_KEEPER = "echo"
# Then, apart, the temp dirs of runs that are gone (their keeper dead, or its pid now another
# process's: pids wrap on a busy host; a dir without one, of an older version, once 10 minutes
# old), at most SWEEP_MAX of them and for SWEEP_S: a host with thousands, or a slow /tmp, says
# so and runs its checks. The lock's pid file is judged likewise. Only this user's dirs of
# mktemp's mode (0700) are a dead run's: another user's dir, a link, or another mode is
# "skipped", with why (signoff clean says it; a run does not list it), and never read.
SWEEP_MAX, SWEEP_S = 200, 10
SWEEP = (f"end=$(( $(date +%s) + {SWEEP_S} )); n=0; m=0; l=; x=; s=; for o in {TMP}/signoff.????????; do "
         "[ \"$o\" != {own} ] || continue; "
         # another user's dir, or a link: never read, never ours; said as skipped (at most SWEEP_MAX)
         "if [ -L \"$o\" ] || {{ [ -d \"$o\" ] && ! [ -O \"$o\" ]; }}; then "
         f"m=$((m+1)); [ $m -le {SWEEP_MAX} ] && x=\"$x $o\"; continue; fi; [ -d \"$o\" ] || continue; "
         "k=; t=; [ -f \"$o/.keeper\" ] && read k t 2>/dev/null <\"$o/.keeper\"; if [ -n \"$k\" ]; then "
         "[ -d /proc/$k ] && {{ [ -z \"$t\" ] || [ \"$(cut -d' ' -f22 /proc/$k/stat)\" = \"$t\" ]; }} "
         "&& continue; "
         "elif [ -n \"$(find $o -maxdepth 0 -mmin -10)\" ]; then continue; fi; "
         f"n=$((n+1)); [ $n -gt {SWEEP_MAX} ] && {{{{ s='more than {SWEEP_MAX}'; break; }}}}; "
         # builtins only per dir (a loaded host forks slowly): the clock every 20th, one find at the end
         f"[ $((n % 20)) -eq 0 ] && [ $(date +%s) -ge $end ] && {{{{ s='after {SWEEP_S} s'; break; }}}}; "
         "l=\"$l $o\"; done; "
         # a dead run's dir is ours and mktemp's mode, 0700 (no other user could have put a pid file in it)
         "[ -z \"$l\" ] || find $l -maxdepth 0 -perm 700 -printf 'leftover %p %T@\\n' "
         "-o -printf 'skipped %p mode %m, not 700\\n' 2>/dev/null; "
         "[ -z \"$x\" ] || {{ u=$(id -un); find $x -maxdepth 0 "
         "-type l -printf 'skipped %p a symbolic link\\n' "
         "-o -printf \"skipped %p owner %u, not $u\\\\n\" 2>/dev/null; }}; "
         "[ -z \"$s\" ] || echo stopped $s; true")


def _epoch(epoch: str) -> float:
    try:
        return float(epoch)
    except ValueError:
        return 0.0


def _utc(epoch: str) -> str:
    """A dir's mtime as the sweep printed it (epoch seconds), in UTC."""
    try:
        return f"{datetime.fromtimestamp(int(float(epoch)), timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    except ValueError:
        return "unknown"


def lacks(facts: dict) -> list[str]:
    """What a host's probe interpreter cannot import, as its sysinfo says: torch, nvidia-ml-py."""
    nv = facts.get("nvidia") or {}
    return [name for name, missing in (
        ("torch", not (facts.get("torch") or {}).get("version")),
        ("nvidia-ml-py", "pynvml) not importable" in str(nv.get("error") or ""))) if missing]


class ProbeError(Exception):
    """A probe ran but gave no usable answer (crash, timeout, bad JSON). `stderr` keeps the
    tail of the probe's stderr for the record when the message states the probe's own error."""

    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


def last_document(stdout: str) -> dict | None:
    """The probe's JSON document: its last stdout line that parses as a JSON object."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:
                return None
            return doc if isinstance(doc, dict) else None
    return None


def parse_probe_output(host: str, probe: str, result) -> dict:
    tail = "\n".join((result.stderr or "").strip().splitlines()[-20:])
    if result.timed_out:
        raise ProbeError(f"{host}: probe {probe} overran its {result.timeout:.0f} s timeout "
                         f"and was killed on the host", tail)
    if result.signal:
        took = f" after {result.elapsed:.1f} s" if result.elapsed is not None else ""
        why = ("not its timeout: the kernel's OOM killer when the host ran out of memory (see its "
               "dmesg), or another process" if result.signal == "SIGKILL" else "it crashed")
        raise ProbeError(f"{host}: probe {probe} was ended by {result.signal}{took} of its "
                         f"{result.timeout:.0f} s timeout ({why})", tail)
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("{")]
    if result.rc != 0 or not lines:
        # the probe's own error says why; stderr (progress events, tracebacks) goes to details
        doc = last_document(result.stdout) or {}
        why = doc.get("error") or " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        raise ProbeError(f"{host}: probe {probe} failed (exit {result.rc}): {why}", tail)
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise ProbeError(f"{host}: probe {probe} printed invalid JSON: {exc}", tail) from None


class HostSession:
    """One host's connection and its per-run working directory."""

    def __init__(self, host: Host, transport: Transport):
        self.host, self.t = host, transport
        self.workdir: str | None = None
        self.keeper: str | None = None  # host-side pid of the keeper of this run's lock
        self.keeper_start: str | None = None  # and its start time (/proc/<pid>/stat field 22)
        self.lock_dir: str | None = None
        self.leftovers: list[str] = []  # temp dirs of runs that are gone, found on the host
        self._shipped = False  # the temp dir made and the probes in it
        self._workdir_error: ProbeError | None = None
        self._lock = threading.Lock()
        self._cache: dict = {}
        self.lacks: list[str] = []  # what the probe interpreter cannot import (sysinfo says)

    def interpreter_said(self, facts: dict) -> None:
        """Keep what sysinfo found missing in the host's interpreter, for later probes' errors."""
        self.lacks = lacks(facts)

    def _parsed(self, name: str, result) -> dict:
        try:
            return parse_probe_output(self.host.name, name, result)
        except ProbeError as exc:
            if " not importable" not in str(exc):
                raise
            lacks = " and ".join(self.lacks or ["a module the probes import"])
            raise ProbeError(f"{exc}. The probes' interpreter {self.host.python} lacks {lacks}: it is "
                             f"not the training environment. Name that one with --python PATH or the "
                             f"inventory's python: for {self.host.name}", exc.stderr) from None

    def take_lock(self, run: str, owner: str, wait: float = 0, timeout: float = 60) -> None:
        """Hold the host's run lock for run `run` (KEEPER; `owner` says who, and starts with
        "run <run> "); raises ProbeError naming the run that holds it after `wait` s."""
        said: list = []  # the keeper's first two lines, then what ended it (its exit, an exception)
        ready = threading.Event()

        def line(text):
            if len(said) < 2:
                said.append(text)
            if len(said) == 2 or not KEEPER_SAID.fullmatch(said[0]):
                ready.set()

        def keep():
            try:
                r = self.t.run_stream(KEEPER.format(wait=int(wait), owner=shlex.quote(owner), run=run,
                                                    keep=KEEPER_S), KEEPER_S, line)
                said.append(f"exit {r.rc}: {(r.stderr or r.stdout).strip()[-300:]}")
            except Exception as exc:  # noqa: BLE001 - handed to the waiting thread
                said.append(exc)
            ready.set()
        threading.Thread(target=keep, daemon=True, name=f"lock-{self.host.name}").start()
        if not ready.wait(wait + timeout):
            raise ProbeError(f"{self.host}: no answer taking the run lock within {wait + timeout:.0f} s")
        heard = said[:2]  # a copy: the keeper's end may still be appended to `said`
        if isinstance(heard[-1], Exception):
            raise heard[-1]
        keeper = KEEPER_SAID.fullmatch(heard[0]) if isinstance(heard[0], str) else None
        answer = heard[1] if keeper and len(heard) > 1 else ""
        pid = keeper.group(1) if keeper else None
        got = re.fullmatch(rf"locked {pid} ({LOCK_PATH})", answer) if pid else None
        if got:
            self.keeper, self.keeper_start, self.lock_dir = pid, keeper.group(2), got.group(1)
            return
        if answer == f"shared {pid}":  # another xdist worker of this run holds it; this keeper sleeps
            self.keeper, self.keeper_start = pid, keeper.group(2)
            return
        busy = re.fullmatch(rf"busy ({LOCK_PATH}) ?(.*)", answer)
        if busy:  # the holder's owner line: a run of this user's wrote it
            where, other = busy.group(1), printable(busy.group(2))
            raise ProbeError(f"{self.host}: in use by another signoff run: {other or 'owner unknown'} "
                             f"(lock {where}{f', waited {wait:g} s' if wait else ''}; "
                             f"--lock-wait waits for it)")
        if answer.startswith("nolock "):
            raise ProbeError(f"{self.host}: cannot take the run lock: {printable(answer[7:])} "
                             f"is not a directory of this user's alone (missing, a link, another user's, "
                             f"writable by others, or full)")
        # anything else (an older keeper, a shell that printed something first): never a pid to signal
        raise ProbeError(f"{self.host}: cannot take the run lock: its keeper answered "
                         f"{printable(' | '.join(heard[1:] if keeper else heard))[:300] or 'nothing'}")

    def cached_probe(self, name: str, *args: str, timeout: float = 600,
                     env: dict | None = None) -> dict:
        """Run a probe once per run and arguments; later checks reuse its document."""
        key = (name, args, tuple(sorted((env or {}).items())))
        if key not in self._cache:
            try:
                self._cache[key] = self.probe(name, *args, timeout=timeout, env=env)
            except ProbeError as exc:
                self._cache[key] = exc
        if isinstance(self._cache[key], Exception):
            raise self._cache[key]
        return self._cache[key]

    def run(self, command: str, timeout: float = 60):
        return self.t.run(command, timeout)

    def probe_stream(self, name: str, *args: str, on_line, timeout: float = 120,
                     env: dict | None = None) -> dict:
        """Like probe(), and on_line(line) gets each stdout line as the probe prints it (a
        soak's samples); the last line is the probe's JSON document, as for every probe."""
        cmd = self._command(name, args, env)
        return self._parsed(name, self.t.run_stream(cmd, timeout, on_line))

    def _ensure_workdir(self) -> str:
        with self._lock:
            if self._workdir_error is not None:  # every later probe says the first cause
                raise self._workdir_error
            if not self._shipped:
                keeper = KEEPER_LINE.format(pid=int(self.keeper)) if self.keeper else NO_KEEPER
                r = self.t.run(MKTEMP.format(keeper=keeper), 30)
                out = r.stdout.split()
                if out and "/signoff." in out[0]:  # created: removed at the end, whatever came next
                    self.workdir = out[0]
                if not r.ok or not out:
                    self._workdir_error = ProbeError(
                        f"{self.host}: cannot create a temp dir in /tmp (exit {r.rc}): "
                        f"{(r.stderr or r.stdout).strip() or 'no message'}")
                    raise self._workdir_error
                self.leftovers = self._sweep()
                try:  # every family's probe_<name>.py as <name>.py, and probelib.py
                    self.t.put_all(families.shipped(), self.workdir)
                except (HostUnreachable, OSError) as exc:  # a half-shipped dir: never run from it
                    self._workdir_error = exc
                    raise
                self._shipped = True
            return self.workdir

    def _sweep(self) -> list[str]:
        """The temp dirs of runs that are gone (SWEEP), bounded; never fails the host. Dirs it
        skipped (another user's, a link, not mode 0700) are not this user's runs': not listed."""
        r = self.t.run(SWEEP.format(own=shlex.quote(self.workdir)), SWEEP_S + 20)
        found, out = [], []
        for ln in r.stdout.splitlines():
            w = ln.split() + ["", "", "unknown"]
            if w[0] == "leftover":
                said = f"probe temp dir {w[1]} of a run that is gone (since {_utc(w[2])})"
                found.append((_epoch(w[2]), said))
            elif w[0] == "stopped":
                out.append(f"probe temp dirs of runs that are gone: listing stopped ({ln[8:]}); "
                           f"more are left")
        # newest first: the terminal and the cover name a few, and the run the user just lost
        # (Ctrl-C twice, a killed job) is the one they look for
        out = [line for _, line in sorted(found, key=lambda f: -f[0])] + out
        if not r.ok and not out:
            out.append(f"probe temp dirs of runs that are gone: not listed (exit {r.rc}: "
                       f"{(r.stderr or '').strip()[:200] or 'no message'})")
        return out

    def probe(self, name: str, *args: str, timeout: float = 120, env: dict | None = None) -> dict:
        """Run probe <name> (signoff/<family>/probe_<name>.py) with the host's Python; return
        its JSON document."""
        return self._parsed(name, self.probe_result(name, *args, timeout=timeout, env=env))

    def probe_result(self, name: str, *args: str, timeout: float = 120, env: dict | None = None):
        """Like probe(), but the raw CommandResult (exit code, stdout, stderr)."""
        return self.t.run(self._command(name, args, env), timeout)

    def _command(self, name: str, args, env: dict | None) -> str:
        wd = self._ensure_workdir()
        env = {**self.host.env, **(env or {})}
        envs = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
        # The pid is recorded so that cleanup can kill the probe's process group even when
        # the controller is interrupted before the host-side timeout fires.
        # The pid file goes when the probe ends, so a reused pid is never killed.
        return (f"cd {shlex.quote(wd)} && {PID_FILE} && env {envs} "
                f"{shlex.quote(self.host.python)} {name}.py {' '.join(map(shlex.quote, args))}"
                f"; rc=$?; rm -f .pid.$$; exit $rc")

    def kill_probes(self) -> bool:
        """Kill every probe of this run still running on the host (e.g. the surviving ranks
        of a collective whose peer died); True if one was running."""
        if not self.workdir:
            return False
        return "killed" in self.t.run(KILL_PROBES.format(wd=shlex.quote(self.workdir)), 30).stdout

    def cleanup(self) -> None:
        try:
            if self.workdir:
                wd = shlex.quote(self.workdir)
                self.t.run(KILL_PROBES.format(wd=wd) + f"; [ -O {wd} ] && ! [ -L {wd} ] && rm -rf {wd}; true",
                           CLEANUP_S)
                self.workdir = None
            if self.keeper:  # the keeper removes the lock (its own channel closing would, too)
                self.t.run(KILL_KEEPER.format(pid=int(self.keeper), start=int(self.keeper_start)), CLEANUP_S)
                self.keeper = self.keeper_start = self.lock_dir = None
        except HostUnreachable:
            pass  # nothing was created on a host we could not reach
        finally:
            self.t.close()

    def left_behind(self) -> list[str]:
        """What this run keeps on the host while its cleanup has not run."""
        return ([f"probe temp dir {self.workdir} (and any probe still running in it)"]
                if self.workdir else []) + ([f"run lock {self.lock_dir}"] if self.lock_dir else [])


class Fleet:
    """Every host of the run; facts gathered in parallel so one slow host stalls nobody."""

    def __init__(self, inventory: Inventory, accept_new_host_keys: bool = False,
                 connect_timeout: float = 10, probe_timeout: float = 180, on_facts=None,
                 on_note=None, run: str | None = None, lock_wait: float = 0,
                 max_parallel: int = MAX_PARALLEL, slurm=None, storage_path: str | None = None,
                 lock: bool = True):
        self.inventory = inventory
        self.storage_path = storage_path  # --storage-path: sysinfo's preflight reads that path
        self.lock = lock  # False: `signoff plan`, which only asks, beside a run holding the lock
        self.run = run or new_run_id()
        ctl = socket.gethostname()
        self.owner = (f"run {self.run} by {getpass.getuser()}@{ctl} "
                      f"since {datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%SZ}")
        self.lock_wait = lock_wait
        self.slurm = slurm  # signoff.slurm.Slurm: every host command is a task of an srun step
        self.sessions = {
            h.name: HostSession(h, SlurmTransport(h, slurm) if slurm else
                                open_transport(h, inventory.known_hosts, accept_new_host_keys,
                                               connect_timeout))
            for h in inventory.hosts
        }
        self.probe_timeout = probe_timeout
        self.on_facts, self.on_note = on_facts, on_note
        self.max_parallel = max_parallel
        self._pool = ThreadPoolExecutor(max_workers=min(max_parallel, len(self.sessions)) or 1)
        self._facts: dict[str, Future] = {}
        self._families: dict[str, dict[str, Future]] = {}  # measured(): family -> host -> result
        self._family_pool: ThreadPoolExecutor | None = None
        self._family_lock = threading.Lock()
        self._said: set[str] = set()  # families whose final progress line was given
        self.windows: dict[str, dict[str, tuple[str, str]]] = {}  # family -> host -> (start, end) UTC
        self.progress = None  # progress(line, final): "interconnect: 3/4 hosts measured, 1 errors"
        self.notes: dict[str, dict[str, list[str]]] = {}
        self._once: dict[str, object] = {}
        self._once_lock = threading.RLock()

    def note(self, section: str, name: str, what: str) -> None:
        """What the user must hear of besides the checks, per host: `leftovers` (of killed
        runs, found on the host), `left_behind` (what this run's cleanup could not remove)."""
        got = self.notes.setdefault(section, {}).setdefault(name, [])
        got.append(what)
        if self.on_note:
            self.on_note(section, name, list(got))

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.inventory.hosts]

    def start(self) -> None:
        for name, s in self.sessions.items():
            self._facts[name] = self._pool.submit(self._gather, name, s)

    def _gather(self, name: str, s: HostSession) -> dict:
        try:
            if self.lock:
                s.take_lock(self.run, self.owner, self.lock_wait, self.probe_timeout)
            # the path the storage checks read and the data interface (storage/run.py, the
            # network family's data_address): sysinfo's preflight says what they will find
            facts = s.probe("sysinfo", "--storage-path", self.storage_path or s.host.storage_path or "",
                            "--data-iface", s.host.data_iface or "", timeout=self.probe_timeout)
            s.interpreter_said(facts)
        except (HostUnreachable, ProbeError) as exc:
            if self.on_facts:
                self.on_facts(name, {"error": str(exc)})
            raise
        finally:
            for what in s.leftovers:
                self.note("leftovers", name, what)
        if self.on_facts:
            self.on_facts(name, facts)
        return facts

    def facts(self, name: str) -> dict:
        """This host's sysinfo; raises HostUnreachable/ProbeError naming the host and cause."""
        if not self._facts:
            self.start()
        return self._facts[name].result()

    def answered(self) -> bool:
        """Whether a host answered at the start (its sysinfo came). Waits until one has, or every
        host has failed: a hung host is waited for only while no other host has answered."""
        if not self._facts:
            self.start()
        pending = set(self._facts.values())
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            if any(not f.cancelled() and f.exception() is None for f in done):
                return True
        return False

    def answers(self, within: float) -> dict[str, dict | Exception]:
        """The hosts that answered (or failed) within `within` s of now, each its sysinfo or its
        error; a host still gathering is left out (the run's preflight lines wait no longer)."""
        if not self._facts:
            self.start()
        wait(self._facts.values(), timeout=within)
        return {n: (f.exception() or f.result()) for n, f in self._facts.items() if f.done()}

    def all_facts(self) -> dict[str, dict | Exception]:
        """Every host's sysinfo, or its error; gathered once (every host's check may ask)."""
        return self.once("all facts", self._all_facts)

    def _all_facts(self) -> dict[str, dict | Exception]:
        out = {}
        for name in self.names:
            try:
                out[name] = self.facts(name)
            except (HostUnreachable, ProbeError) as exc:
                out[name] = exc
        return out

    def once(self, key: str, compute):
        """compute(), once per run under `key`: what every host's check derives from all
        hosts (the version majority, shared machine identities), so 1,000 checks cost one
        pass over 1,000 hosts, not a million."""
        with self._once_lock:
            if key not in self._once:
                self._once[key] = compute()
            return self._once[key]

    def measured(self, family: str, name: str, measure, hosts):
        """measure(name): host `name`'s measurement of `family`, measured on every host at once.

        The first call of a family first waits for every other family's measurements to end
        (families never overlap on a host: an all-reduce would distort a storage read), then
        starts measure(h) for every h in `hosts` (those with a selected check of the family:
        signoff.fixtures.selected_hosts), at most max_parallel at once. Each call waits for its own
        host only; what measure(h) raised (HostUnreachable, ProbeError, a pytest outcome) is
        raised again for h's checks alone, and never measured twice. A host not in `hosts` is
        measured on demand. While it waits, self.progress(line, final) gets the phase's
        "interconnect: 812/1000 hosts measured, 3 errors". A family that must run two probes in
        sequence on one host does both in one measure(), or uses two families ("interconnect",
        "interconnect p2p"). Outside pytest (bench/scale.py): fleet.measured("sleep", h, fn, names)
        for each h, with fleet.progress = lambda line, final: print(line)."""
        with self._family_lock:
            futures = self._families.get(family)
            if futures is None or name not in futures:
                self.settle(but=family)
                if self._family_pool is None:
                    self._family_pool = ThreadPoolExecutor(self.max_parallel, "measure")
                futures = self._families.setdefault(family, {})
                self._said.discard(family)
                for h in dict.fromkeys([*hosts, name]):
                    if h not in futures:
                        futures[h] = self._family_pool.submit(self._timed, family, h, measure)
        fut = futures[name]
        while not wait([fut], PROGRESS_S if self.progress else None)[0]:
            self._say(family, final=False)
        self._say(family, final=True)
        return fut.result()

    def register(self, family: str, futures: dict) -> None:
        """Measurements started elsewhere (the soak's, one future per host) that every later
        family waits for, as for its own (measured, settle)."""
        with self._family_lock:
            self._families.setdefault(family, {}).update(futures)

    def peers(self, family: str, figure) -> dict:
        """figure(doc) of every host `family` measured (waiting for those under way): the
        hosts of the class a check compares its own figure with (signoff/outlier.py). A host
        whose measurement raised (an error, a class guard's NOT RUN) or gave no figure is left out."""
        out = {}
        for name, fut in list(self._families.get(family, {}).items()):
            try:
                out[name] = figure(fut.result())
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # noqa: BLE001 - its own check reports it (a pytest outcome too)
                continue
        return out

    def documents(self, name: str) -> dict:
        """Host `name`'s document of every family measured on it (what its measurement raised, as
        {"error": text}; one still under way left out, never waited for): the raw outputs the run
        holds, kept in a failed host's evidence (signoff/evidence)."""
        out = {}
        for family, futures in list(self._families.items()):
            fut = futures.get(name)
            if fut is None or not fut.done() or fut.cancelled():
                continue
            exc = fut.exception()
            out[family] = {"error": f"{type(exc).__name__}: {exc}"} if exc is not None else fut.result()
        return out

    def _timed(self, family: str, name: str, measure):
        """measure(name), its start and end (UTC) kept in windows: proof of the overlap. A
        document that saw another process on a GPU is an error of every check of it, naming
        the process (signoff/cotenants.py): its figures are not the hardware's."""
        start = utc_now()
        try:
            doc = measure(name)
        finally:
            self.windows.setdefault(family, {})[name] = (start, utc_now())
        exc = cotenants.error(name, doc)
        if exc is not None:
            raise exc
        return doc

    def settle(self, but: str | None = None) -> None:
        """Wait until every family's measurements (but `but`'s) have ended: call before loading
        hosts some other way (a soak, an aggregate read, the host pairs)."""
        for family, futures in list(self._families.items()):
            pending = [f for f in futures.values() if not f.done()]
            while family != but and pending:
                pending = list(wait(pending, PROGRESS_S if self.progress else None,
                                    FIRST_COMPLETED)[1])
                self._say(family, final=False)
            if family != but:
                self._say(family, final=True)

    def _say(self, family: str, final: bool) -> None:
        if not self.progress or (final and family in self._said):
            return  # said: every later check of the family costs nothing here
        futures = list(self._families[family].values())
        done = [f for f in futures if f.done()]
        if not futures or (final and len(done) < len(futures)):
            return  # no host (a soak on CPU-only hosts): "soak: 0/0 hosts measured" said nothing
        if final:
            self._said.add(family)
        errors = sum(isinstance(f.exception(), (HostUnreachable, ProbeError)) for f in done
                     if not f.cancelled())
        self.progress(f"{family}: {len(done)}/{len(futures)} hosts measured, {errors} "
                      f"error{'' if errors == 1 else 's'}", final)

    def close(self) -> None:
        """Clean every host at once, CLEANUP_S at most; what stays is noted (left_behind)."""
        # Don't wait for probes still running (Ctrl-C, a hung host): cleanup kills them.
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._family_pool:
            self._family_pool.shutdown(wait=False, cancel_futures=True)
        for s in bounded(HostSession.cleanup, list(self.sessions.values())):
            for what in s.left_behind():
                self.note("left_behind", s.host.name, f"{what}: no answer to the cleanup within "
                                                      f"{CLEANUP_S} s")
            s.t.close()  # ends the threads still waiting on that host
        if self.slurm:  # every step of ours scancelled (a keeper's, a hung probe's)
            for step in self.slurm.close():
                self.note("left_behind", "slurm", f"step {step}: still listed by squeue after scancel")


def utc_now() -> str:
    return f"{datetime.now(timezone.utc):%Y-%m-%dT%H:%M:%S.%fZ}"


def new_run_id() -> str:
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())
    return f"{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{host}-{os.getpid()}"
