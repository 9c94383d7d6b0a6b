"""The Slurm launcher (--launcher slurm): inside an allocation, every host command is a task of an
srun step instead of an SSH channel. The commands that a phase starts on many hosts at about the
same time (Fleet.measured starts a family's measure() on every host at once) become ONE step
across those nodes: `srun --nodelist=... --ntasks-per-node=1 --kill-on-bad-exit=0 --time=...
--label`, each task picking its own host's command by $SLURMD_NODENAME and marking its start and
exit status, so each node's stdout is its own and is parsed as that host's JSON. A node Slurm
reports DOWN/DRAIN, or that dies mid-step, is that host's ERROR with Slurm's reason; the others'
results stand. close() scancels every step of this run (Ctrl-C too); a controller killed outright
ends them too: every task watches the step's stdin, a pipe the controller holds open."""

from __future__ import annotations

import collections
import io
import os
import re
import shlex
import subprocess
import tarfile
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from os.path import commonprefix
from pathlib import Path

from signoff import InputError
from signoff.hostlist import expand, fold
from signoff.transport import KILL_GRACE_S, CommandResult, HostUnreachable, Transport

MARK = "@@signoff-slurm"
GATHER_S = 0.3  # a batch is launched once no host has joined it for this long ...
GATHER_MAX_S = 2.0  # ... or this long after its first host: a phase's calls arrive within ms
STEP_START_S = 60  # srun's own start-up allowance (allocation of the step, task launch)
CLOSE_S = 10  # close() waits this long for our steps to leave squeue
STREAM_KEEP = 200  # stdout lines a streamed command keeps (its caller has seen them all)
# Linux caps one argument at 128 KiB (MAX_ARG_STRLEN): a step's script past this (a phase of
# ~500 nodes or more, each its own command) travels as a file, srun --bcast copying it once to
# every node (BCAST_DIR/slurm_bcast_<job>.<step>_<node>) for all of the node's tasks: the last of
# them to start removes it (a task that removed it first would leave the others nothing to run).
ARG_SCRIPT_MAX = 96 * 1024
BCAST_DIR = "/tmp/"
# Slurm node states that take a node out of the run: its host ERRORs with Slurm's reason.
BAD_STATES = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER", "REBOOT", "MAINT", "FUTURE")
# srun splits a task's output line at 1024 bytes (each piece labelled): a task's stdout goes
# through this filter (in the host's Python: the probes need it anyway; awk may read in blocks),
# pieces of CHUNK bytes, each '+' (continued) or '=' (the line ends) first.
CHUNK = 1000
SPLIT = ("import sys\no = sys.stdout.buffer\nfor ln in sys.stdin.buffer:\n ln = ln.rstrip(b'\\n')\n"
         " while len(ln) > %d:\n  o.write(b'+' + ln[:%d] + b'\\n'); ln = ln[%d:]\n"
         " o.write(b'=' + ln + b'\\n'); o.flush()\n" % (CHUNK, CHUNK, CHUNK))
_LABEL_B = re.compile(rb"^\s*(\d+): ?(.*)$", re.S)
_LAUNCH_FAILED = re.compile(r"Task launch for StepId=\S+ failed on node (\S+?): (.*)$")
# srun's words when its connection to one node's step daemon breaks with an error (a node dying
# with data in flight: src/api/step_io.c, step_launch.c); it names the node by its index in the step
_NODE_LOST = re.compile(r"(?:io error with slurmstepd on|missing step on|io error on|"
                        r"test connection to|Cannot communicate with) node (\d+)")
# A task's exit status of SIGKILL/SIGTERM: its own timeout, or srun ending the whole step
KILLED = (137, 143)


def step_aborts(srun_err: list[str], order: list[str] = ()) -> dict[str, str]:
    """Nodes that made srun abort the whole step, killing the other nodes' tasks with it: their
    launch failed, or srun lost their step daemon (`order`: the step's node of each index).
    node -> why, in srun's words."""
    out = {}
    for line in srun_err:
        if m := _LAUNCH_FAILED.search(line):
            out[m.group(1)] = f"srun could not launch the step's task there ({m.group(2).strip()})"
        elif (m := _NODE_LOST.search(line)) and int(m.group(1)) < len(order):
            said = line.removeprefix("srun: ").removeprefix("error: ")
            out.setdefault(order[int(m.group(1))],
                           f"srun lost the step's task there and ended the step ({said})")
    return out


_LABEL = re.compile(r"^\s*(\d+): ?(.*)$", re.S)


def in_allocation(env=os.environ) -> bool:
    return bool(env.get("SLURM_JOB_ID") and env.get("SLURM_JOB_NODELIST"))


def allocation(env=os.environ) -> tuple[str, list[str]]:
    """(job id, node names) of the allocation this process runs in."""
    if not in_allocation(env):
        raise InputError("--launcher slurm: not inside a Slurm allocation (SLURM_JOB_ID and "
                         "SLURM_JOB_NODELIST unset): run it under salloc or sbatch")
    return env["SLURM_JOB_ID"], expand(env["SLURM_JOB_NODELIST"])


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def node_states(names: list[str]) -> dict[str, tuple[str, str]]:
    """name -> (State, Reason) as `scontrol show node` says; ("UNKNOWN", why) if it cannot."""
    try:
        r = _run(["scontrol", "-o", "show", "node", fold(names)])
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {n: ("UNKNOWN", f"scontrol show node failed: {exc}") for n in names}
    out = {}
    for line in r.stdout.splitlines():
        f = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", line))
        if f.get("NodeName"):
            out[f["NodeName"]] = (f.get("State", "UNKNOWN"), f.get("Reason", "").strip())
    return {n: out.get(n, ("UNKNOWN", (r.stderr or r.stdout).strip()[-200:])) for n in names}


def bad(state: str) -> bool:
    return any(s in state for s in BAD_STATES)


def describe(name: str, state: tuple[str, str]) -> str:
    st, why = state
    return f"Slurm reports node {name} {st}" + (f" (reason: {why})" if why and why != "none" else "")


def gpus_per_node(job_line: str) -> int | None:
    """GPUs per node of the allocation from `scontrol -o show job`: TresPerNode (--gpus-per-node,
    --gres=gpu:N), else AllocTRES gres/gpu over NumNodes; None when the job asked for none."""
    m = re.search(r"TresPerNode=\S*?gres[:/]gpu(?::[^:,\s]+)?:(\d+)", job_line)
    if m:
        return int(m.group(1))
    total = re.search(r"AllocTRES=\S*?gres/gpu=(\d+)", job_line)
    nodes = re.search(r"NumNodes=(\d+)", job_line)
    return int(total.group(1)) // int(nodes.group(1)) if total and nodes else None


def _seconds(timeout: float) -> str:
    return f"{timeout:.3f}".rstrip("0").rstrip(".")  # as transport.guarded(): not 2.592e+06


def _time(seconds: float) -> str:
    """srun --time as minutes:seconds (whole seconds, at least one minute: Slurm's granularity)."""
    s = max(60, int(seconds) + 1)
    return f"{s // 60}:{s % 60:02d}"


@dataclass
class _Entry:
    node: str
    command: str
    timeout: float
    on_line: object = None
    python: str = "python3"  # the host's Python (the probes'): it filters the task's stdout
    why: str = ""  # why its step gave no exit status, once known
    done: threading.Event = field(default_factory=threading.Event)
    result: object = None  # CommandResult or HostUnreachable


@dataclass
class _Step:
    started: bool = False  # a task printed its start marker
    rc: int | None = None  # srun's exit status
    tasks: dict = field(default_factory=dict)  # task id -> _Task
    srun_err: list = field(default_factory=list)  # srun's own stderr lines
    held: set = field(default_factory=set)  # nodes whose tasks were killed, judged at the step's end
    lost: dict = field(default_factory=dict)  # step_aborts(): the nodes srun aborted the step for
    ended: float | None = None  # when srun ended (monotonic): a killed task's end


class _Task:
    """What one task of a step printed: its node (from its start marker), stdout, stderr, rc."""

    def __init__(self, keep: int | None):
        self.node: str | None = None
        self.local = 0
        self.out: collections.deque = collections.deque(maxlen=keep)
        self.err: collections.deque = collections.deque(maxlen=400)
        self.rc: int | None = None
        self.err_end = False
        # when its start and exit status came (monotonic): its elapsed, as over SSH, tells a
        # SIGKILL well before the timeout (the OOM killer) from the timeout's own (137 both)
        self.began: float | None = None
        self.ended: float | None = None


class Slurm:
    """The allocation's steps of one run."""

    def __init__(self, job: str, nodes: list[str], run: str):
        self.job, self.nodes = job, nodes
        self.name = f"signoff-{run}"[:60]  # every step of this run carries it (squeue -s, scancel)
        self.steps: list[str] = []  # "job.step" of every step this run started
        self.states = node_states(nodes)  # before the run: DOWN/DRAIN nodes are named
        self.dead = {n: describe(n, s) for n, s in self.states.items() if bad(s[0])}
        self._procs: set[subprocess.Popen] = set()
        self._open: dict[bytes | None, list[_Entry]] = {}  # batches gathering, by stdin
        self._lock = threading.Lock()
        self.closed = False

    # ---------------------------------------------------------------- one host's command
    def run(self, node: str, command: str, timeout: float, on_line=None,
            stdin: bytes | None = None, python: str = "python3") -> CommandResult:
        """`command` on `node`, in the next step that gathers this phase's commands; raises
        HostUnreachable when Slurm cannot run it there (node DOWN/DRAIN, died, step refused)."""
        if node in self.dead:
            raise HostUnreachable(node, self.dead[node])
        if self.closed:
            raise HostUnreachable(node, "the run is stopping: no new Slurm step")
        e = _Entry(node, command, timeout, on_line, python)
        with self._lock:
            batch = self._open.get(stdin)
            if batch is None or any(x.node == node for x in batch):
                batch = self._open[stdin] = [e]
                threading.Thread(target=self._gather, args=(stdin, batch), daemon=True,
                                 name=f"srun-{node}").start()
            else:
                batch.append(e)
        e.done.wait()
        if isinstance(e.result, Exception):
            raise e.result
        return e.result

    def _gather(self, stdin, batch: list[_Entry]) -> None:
        first, seen = time.monotonic(), 0
        while True:
            time.sleep(GATHER_S)
            with self._lock:
                if len(batch) == seen or time.monotonic() - first > GATHER_MAX_S:
                    if self._open.get(stdin) is batch:
                        del self._open[stdin]
                    break
                seen = len(batch)
        self._launch(batch, stdin)

    # ---------------------------------------------------------------- one step
    def _launch(self, batch: list[_Entry], stdin: bytes | None, retry: bool = True) -> None:
        failed: dict[str, str] = {}
        try:
            step = self._step(batch, stdin)
            started, why, failed = step.started, None, step.lost
        except Exception as exc:  # noqa: BLE001 - every waiting host gets the cause
            started, why = False, f"srun failed: {exc}"
        pending = [e for e in batch if not e.done.is_set()]
        if not pending:
            return
        states = node_states([e.node for e in pending])
        for e in pending:
            if bad(states[e.node][0]):
                self.dead.setdefault(e.node, describe(e.node, states[e.node]))
            elif e.node in failed:  # it died while srun launched or ran the step: not yet DOWN
                self.dead.setdefault(e.node, f"{failed[e.node]}; {describe(e.node, states[e.node])}")
        again = [e for e in pending if e.node not in self.dead]
        # The step was refused, or srun aborted it whole when one node's launch failed or its
        # step daemon was lost (the healthy nodes' tasks killed with it): once more without them.
        if (not started or failed) and retry and again and len(again) < len(pending):
            self._launch(again, stdin, retry=False)
        for e in pending:
            if not e.done.is_set():
                cause = self.dead.get(e.node) or (
                    f"{why or self._why(e)}; {describe(e.node, states[e.node])}")
                self._finish(e, HostUnreachable(e.node, cause))

    def _why(self, e: _Entry) -> str:
        return e.why or "its srun task ended without an exit status"

    def _finish(self, e: _Entry, result) -> None:
        if not e.done.is_set():
            e.result = result
            e.done.set()

    def script(self, batch: list[_Entry], stdin: bool) -> str:
        """The step's command: each task finds its host's command by $SLURMD_NODENAME. The
        commands of a phase differ in a few characters (each host's temp dir): their common
        head and tail are sent once, the middle per node."""
        cmds = [e.command for e in batch]
        head = commonprefix(cmds)
        tail = commonprefix([c[len(head):][::-1] for c in cmds])[::-1]
        cases = " ".join(f"{shlex.quote(e.node)}) T={_seconds(e.timeout)}; P={shlex.quote(e.python)}; "
                         f"M={shlex.quote(e.command[len(head):len(e.command) - len(tail)])};;"
                         for e in batch)
        run = f"timeout -k {KILL_GRACE_S} \"$T\" sh -c {shlex.quote(head)}\"$M\"{shlex.quote(tail)}"
        if stdin:
            run = f"{run} 3>&- 4>&-; echo $? >&3"
        else:  # the command dies with its controller, as over SSH (transport.guarded()): the step's
            # stdin is a pipe the controller holds open (launch()); EOF there TERMs its group
            run = (f"{run} </dev/null 3>&- 4>&- 5<&- & p=$!; (while read -r _ <&5; do :; done; "
                   f"kill -TERM -$p 2>/dev/null || kill -TERM $p) >/dev/null 2>&1 3>&- 4>&- & w=$!; "
                   f"wait $p; echo $? >&3; kill $w 2>/dev/null")
        return (f"printf '{MARK} start %s %s.%s %s\\n' \"$SLURMD_NODENAME\" \"$SLURM_JOB_ID\" "
                f"\"$SLURM_STEP_ID\" \"${{SLURM_LOCALID:-0}}\"; "
                f"case \"$SLURMD_NODENAME\" in {cases} *) echo 'no command for this node' >&2; exit 2;; "
                f"esac; {'' if stdin else 'exec 5<&0; '}"
                # the command's exit status past the filter of its stdout (no pipefail in sh)
                f"{{ rc=$( {{ {{ {run}; }} | \"$P\" -c {shlex.quote(SPLIT)} 5<&- >&4; }} 3>&1 ); }} 4>&1; "
                f"printf '{MARK} rc %s\\n' $rc; echo '{MARK} end' >&2; exit $rc")

    @staticmethod
    @contextmanager
    def command(script: str, per_node: int = 1):
        """(srun options, the command) of a step's script: `sh -c` while it fits one argument,
        else a file srun broadcasts (--bcast), removed here once the step has ended. On a node,
        the copy is removed by the last of its `per_node` tasks to start: each task marks its
        start (mkdir, atomic; the running shell holds the file open) and the one that counts
        them all removes the copy and the marks."""
        if len(script.encode()) <= ARG_SCRIPT_MAX:
            yield [], ["sh", "-c", script]
            return
        fd, name = tempfile.mkstemp(prefix="signoff-step.", suffix=".sh")
        started = (f'mkdir -- "$0.up.${{SLURM_LOCALID:-0}}"\n'
                   f'n=0; for d in "$0".up.*; do [ -d "$d" ] && n=$((n + 1)); done\n'
                   f'if [ "$n" -ge {int(per_node)} ]; then\n'
                   f'  rm -f -- "$0"; rmdir -- "$0".up.* 2>/dev/null\nfi\n')
        try:
            with os.fdopen(fd, "w") as f:
                f.write(f'#!/bin/sh\n{started}{script}\n')
            os.chmod(name, 0o700)
            yield [f"--bcast={BCAST_DIR}"], [name]
        finally:
            os.unlink(name)

    def srun_args(self, nodes: list[str], timeout: float, per_node: int = 1,
                  kill_on_bad_exit: int = 0) -> list[str]:
        # --input=all: every task reads the step's stdin, its data (put_all) or the pipe the
        # controller holds open for the step's life (script(): the tasks die with it)
        return ["srun", f"--jobid={self.job}", f"--nodelist={fold(nodes)}", f"--nodes={len(nodes)}",
                f"--ntasks={len(nodes) * per_node}", f"--ntasks-per-node={per_node}",
                f"--kill-on-bad-exit={kill_on_bad_exit}", "--overlap", "--label", "--no-kill",
                f"--job-name={self.name}",
                f"--time={_time(timeout + 2 * KILL_GRACE_S + STEP_START_S)}", "--input=all"]

    def _step(self, batch: list[_Entry], stdin: bytes | None) -> _Step:
        by_node = {e.node: e for e in batch}
        limit = max(e.timeout for e in batch)
        with self.command(self.script(batch, stdin is not None)) as (opts, command):
            return self.launch([*self.srun_args(list(by_node), limit), *opts, *command],
                               by_node, limit, stdin)

    def launch(self, cmd: list[str], by_node: dict[str, _Entry], limit: float,
               stdin: bytes | None = None, per_node: int = 1) -> _Step:
        """Run srun `cmd` whose tasks print the markers of script(); each node's entry is
        finished when its tasks have all ended (several tasks per node: the worst rc, the
        stdout of its local task 0), or at its own deadline while the step runs on."""
        streamed = any(e.on_line for e in by_node.values())
        step = _Step()
        tasks, srun_err = step.tasks, step.srun_err
        with self._lock:
            if self.closed:
                raise RuntimeError("the run is stopping")
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)  # a terminal's Ctrl-C is ours to handle
            self._procs.add(p)
        if stdin is not None:
            threading.Thread(target=_feed, args=(p, stdin), daemon=True).start()
        # else its stdin stays open until srun ends: the tasks' EOF is their controller's end

        def task(i: int) -> _Task:
            return tasks.setdefault(i, _Task(STREAM_KEEP if streamed else None))

        def settle(node: str, final: bool = False) -> None:
            mine = [t for t in tasks.values() if t.node == node]
            e = by_node.get(node)
            if e and len(mine) == per_node and all(t.rc is not None and t.err_end for t in mine):
                lead = min(mine, key=lambda t: t.local)
                rcs = [t.rc for t in mine]
                if not final and any(rc in KILLED for rc in rcs):
                    step.held.add(node)  # its own timeout, or srun ending the step for another node
                    return
                self._finish(e, CommandResult(e.command, max(rcs, key=abs), _text(lead.out),
                                              "\n".join(ln for t in mine for ln in t.err), e.timeout,
                                              _elapsed(mine)))

        def read_err():
            for raw in p.stderr:
                line = raw.decode(errors="replace")
                m = _LABEL.match(line.rstrip("\n"))
                if not m:
                    srun_err.append(line.strip())
                    continue
                t = task(int(m.group(1)))
                if m.group(2) == f"{MARK} end":
                    t.err_end = True
                    if t.node:
                        settle(t.node)
                else:
                    t.err.append(m.group(2))
        err_thread = threading.Thread(target=read_err, daemon=True)
        err_thread.start()
        deadline = threading.Thread(target=self._deadlines, args=(p, by_node, limit, step.held),
                                    daemon=True)
        deadline.start()
        pieces: dict[int, bytes] = {}  # task -> its line so far
        for raw in p.stdout:
            m = _LABEL_B.match(raw.rstrip(b"\n"))
            if not m:
                continue
            i, piece = int(m.group(1)), m.group(2)
            if piece[:1] == b"+":
                pieces[i] = pieces.get(i, b"") + piece[1:]
                continue
            t = task(i)
            text = (pieces.pop(i, b"") + piece[1:] if piece[:1] == b"=" else piece).decode(errors="replace")
            if piece[:1] != b"=" and text.startswith(f"{MARK} start "):
                node, step_id, local = (text.split()[2:5] + ["0"])[:3]
                t.node, t.local, step.started = node, int(local) if local.isdigit() else 0, True
                t.began = time.monotonic()
                if step_id not in self.steps:
                    self.steps.append(step_id)
            elif piece[:1] != b"=" and text.startswith(f"{MARK} rc "):
                rc = text.split()[2:3]  # none when the task's command was killed before its `echo $?`
                t.rc = int(rc[0]) if rc and rc[0].lstrip("-").isdigit() else None
                t.ended = time.monotonic()
                if t.node:
                    settle(t.node)
            elif t.node:
                t.out.append(text)
                e = by_node.get(t.node)
                if e and e.on_line and t.local == 0:
                    e.on_line(text)
        step.rc = p.wait()
        step.ended = time.monotonic()
        if stdin is None:
            p.stdin.close()
        err_thread.join(5)
        with self._lock:
            self._procs.discard(p)
        order = [n for n in self.nodes if n in by_node]  # Slurm's order of the step's nodes ...
        for i, t in tasks.items():  # ... or, where a task said so, its node's index
            if t.node and t.node in order and i // per_node < len(order):
                order[i // per_node] = t.node
        step.lost = step_aborts(srun_err, order)
        for node in {t.node for t in tasks.values() if t.node}:
            for t in tasks.values():
                if t.node == node and t.rc is not None:
                    t.err_end = True  # stderr's marker lost with the step: stdout's rc stands
            if not (node in step.held and set(step.lost) - {node}):  # killed for another: run again
                settle(node, final=True)
        said = " | ".join(ln for ln in srun_err if ln)[-300:]
        for e in by_node.values():
            if not e.done.is_set():
                e.why = (f"srun step ended (exit {p.returncode}) without its exit status on "
                         f"{e.node}" + (f": {said}" if said else ""))
        return step

    def collective(self, commands: dict[str, tuple[str, str]], per_node: int, timeout: float):
        """One step of `per_node` tasks on each node (the ranks: SLURM_PROCID, SLURM_LOCALID),
        every node its own command; one rank's bad exit ends the step (--kill-on-bad-exit=1).
        Returns (outcome: node -> CommandResult or HostUnreachable, the first node that failed,
        the nodes whose ranks Slurm killed after it), as Network.allreduce's summarise() reads."""
        nodes = [n for n in commands if n not in self.dead]
        outcome = {n: HostUnreachable(n, self.dead[n]) for n in commands if n in self.dead}
        if not nodes:
            return outcome, next(iter(outcome), None), set()
        by_node = {n: _Entry(n, commands[n][0], timeout, python=commands[n][1]) for n in nodes}
        with self.command(self.script(list(by_node.values()), False), per_node) as (opts, command):
            step = self.launch([*self.srun_args(nodes, timeout, per_node, kill_on_bad_exit=1),
                                *opts, *command], by_node, timeout, per_node=per_node)
        first, killed = None, set()
        for line in step.srun_err:  # srun names each task that ended badly, the first first
            m = re.search(r"error: (\S+): tasks? [\d,-]+: (.*)", line)
            if m and m.group(1) in by_node:
                if m.group(2).startswith("Killed") and first:
                    killed.add(m.group(1))
                elif first is None:
                    first = m.group(1)
        for n, e in by_node.items():
            mine = [t for t in step.tasks.values() if t.node == n]
            if e.done.is_set():
                outcome[n] = e.result
            elif mine:  # its ranks were ended with the step: what they said so far
                lead = min(mine, key=lambda t: t.local)
                outcome[n] = CommandResult(e.command, 137, _text(lead.out),
                                           "\n".join(ln for t in mine for ln in t.err), timeout,
                                           _elapsed(mine, step.ended))
            else:
                outcome[n] = HostUnreachable(n, f"{self._why(e)}; {describe(n, node_states([n])[n])}")
        killed.discard(first)
        return outcome, first, killed

    def _deadlines(self, p: subprocess.Popen, by_node: dict[str, _Entry], limit: float,
                   held: set) -> None:
        """A node whose task has not ended by its own timeout (+ the kill grace and srun's
        start-up) is given up: its host ERRORs with Slurm's word on the node; the step's other
        tasks run on."""
        start = time.monotonic()
        while p.poll() is None:
            now = time.monotonic() - start
            late = [e for e in by_node.values() if not e.done.is_set() and e.node not in held
                    and now > e.timeout + 2 * KILL_GRACE_S + STEP_START_S]
            for e in late:
                st = node_states([e.node])[e.node]
                if bad(st[0]):
                    self.dead.setdefault(e.node, describe(e.node, st))
                grace = 2 * KILL_GRACE_S + STEP_START_S
                self._finish(e, HostUnreachable(e.node, f"no exit status from its srun task within "
                                                        f"{e.timeout:.0f} s + {grace} s; "
                                                        f"{describe(e.node, st)}"))
            if all(e.done.is_set() for e in by_node.values()):
                return
            time.sleep(1)

    # ---------------------------------------------------------------- the end
    def close(self) -> list[str]:
        """Stop every step of this run: our sruns signalled, then `scancel` of every step of
        ours still in squeue; waits (CLOSE_S at most) until none is left; returns those left."""
        with self._lock:
            self.closed = True
            procs = list(self._procs)
        for p in procs:
            if p.poll() is None:
                p.terminate()  # srun forwards it to its tasks and ends the step
        left = self.ours()
        for step in left:
            _quiet([["scancel", "--quiet", step]])
        deadline = time.monotonic() + CLOSE_S
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = self.ours()
        for p in procs:
            if p.poll() is None:
                p.kill()
        return left

    def ours(self) -> list[str]:
        """Steps of this run that squeue still lists."""
        try:
            r = _run(["squeue", "-h", "-s", "-j", self.job, "-o", "%i %j"])
        except (OSError, subprocess.TimeoutExpired):
            return []
        rows = (ln.split() for ln in r.stdout.splitlines())
        return [w[0] for w in rows if len(w) == 2 and w[1] == self.name]

    def gpus_per_node(self) -> int | None:
        try:
            return gpus_per_node(_run(["scontrol", "-o", "show", "job", self.job]).stdout)
        except (OSError, subprocess.TimeoutExpired):
            return None

    def meta(self) -> dict:
        return {"launcher": "slurm", "job": self.job, "nodes": fold(self.nodes), "steps": list(self.steps),
                "nodes_out": dict(self.dead)}


def _feed(p: subprocess.Popen, data: bytes) -> None:
    try:
        p.stdin.write(data)
        p.stdin.close()
    except (OSError, ValueError):
        pass


def _quiet(cmds: list[list[str]]) -> None:
    for c in cmds:
        try:
            _run(c)
        except (OSError, subprocess.TimeoutExpired):
            pass


def _elapsed(tasks: list[_Task], end: float | None = None) -> float | None:
    """A node's command from its first task's start to its last task's exit status (or `end`,
    for tasks killed before they said one), as the controller saw them; None if unknown."""
    ends = [t.ended if t.ended is not None else end for t in tasks]
    began = [t.began for t in tasks if t.began is not None]
    if not began or None in ends:
        return None
    return max(ends) - min(began)


def _text(lines) -> str:
    return "".join(f"{ln}\n" for ln in lines)


class SlurmTransport(Transport):
    """A host's run()/run_stream()/put() as tasks of this run's srun steps."""

    def __init__(self, host, slurm: Slurm):
        super().__init__(host)
        self.slurm = slurm

    def run(self, command: str, timeout: float) -> CommandResult:
        return self.slurm.run(self.host.name, command, timeout, python=self.host.python)

    def run_stream(self, command: str, timeout: float, on_line) -> CommandResult:
        return self.slurm.run(self.host.name, command, timeout, on_line=on_line, python=self.host.python)

    def put(self, local: Path, remote: str) -> None:
        data = Path(local).read_bytes()  # one step: every host's copy of it at once (srun --input=all)
        self._receive(f"cat > {shlex.quote(remote)}", data, f"copying {Path(local).name} to {remote}")

    def put_all(self, files: dict[str, Path], remote_dir: str) -> None:
        """One tar of the files ({name there: local path}) on every host's stdin, in one step."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, f in files.items():
                tar.add(str(f), arcname=name)
        self._receive(f"tar -x -m --no-same-owner -C {shlex.quote(remote_dir)}", buf.getvalue(),
                      f"copying the probes to {remote_dir}")

    def _receive(self, command: str, data: bytes, what: str) -> None:
        r = self.slurm.run(self.host.name, command, 60, stdin=data, python=self.host.python)
        if not r.ok:
            raise HostUnreachable(self.host.name, f"{what} failed (exit {r.rc}): {r.stderr.strip()[-200:]}")
