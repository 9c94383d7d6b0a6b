"""A real Slurm on a tests/lab.py Lab: munged, slurmctld on the bridge (controller) address and
one slurmd per lab host inside its network namespace (`slurmd -N labN`), all with their own
files in one temp dir (SLURM_CONF points there; nothing under /etc is touched).

    with Lab(tmp, n_hosts=3) as lab, SlurmLab(lab) as slurm:
        subprocess.run(["srun", "-N3", "hostname", "-I"], env=slurm.env)

Needs root and Debian's slurmctld, slurmd, slurm-client and munge (make system)."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import socket
import subprocess
import time

from lab import _NO_BASHRC, Lab, _wait_dead, alive

BINARIES = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/srun")
START_TIMEOUT_S = 60.0
# A dead slurmd is DOWN after this long (Slurm's default, 300 s, is too long for a test).
SLURMD_TIMEOUT_S = 10


def slurm_missing() -> str | None:
    missing = [b for b in BINARIES if not os.path.exists(b)]
    return f"{', '.join(missing)} missing: install slurmctld slurmd slurm-client munge (make system)" \
        if missing else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


class SlurmLab:
    def __init__(self, lab: Lab, partition: str = "lab"):
        self.lab, self.partition = lab, partition
        self.dir = lab.workdir / "slurm"
        self.conf = self.dir / "slurm.conf"
        self.socket = self.dir / "munge.sock"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._procs: dict[str, subprocess.Popen] = {}  # munged, slurmctld, slurmd:labN

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> SlurmLab:
        why = slurm_missing()
        if why:
            raise RuntimeError(why)
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in ("state", "spool"):
            (self.dir / sub).mkdir(exist_ok=True)
        try:
            self._start_munge()
            self._write_conf()
            self._start("slurmctld", ["/usr/sbin/slurmctld", "-D", "-i", "-f", str(self.conf)])
            for h in self.lab.hosts:
                self.start_slurmd(h.name)
            self.wait_idle([h.name for h in self.lab.hosts])
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Stop every daemon this lab started (slurmd's job steps too); idempotent."""
        pids = []
        for name in [n for n in self._procs if n.startswith("slurmd:")] + ["slurmctld", "munged"]:
            proc = self._procs.pop(name, None)
            if proc is not None:
                pids.append(proc.pid)
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGTERM)
        if not _wait_dead(pids, 10):
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            _wait_dead(pids, 5)
        for pid in self.stepds():  # a step whose slurmd went first
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def __enter__(self) -> SlurmLab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers for tests

    def run(self, *cmd: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """A Slurm client command (sinfo, scontrol, srun) against this lab's controller."""
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              env={**self.env, **kw.pop("env", {})}, stdin=subprocess.DEVNULL, **kw)

    def states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-p", self.partition, "-o", "%N %T").stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def wait_idle(self, names: list[str], timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            st = self.states()
            if all(st.get(n) == "idle" for n in names):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm nodes not idle after {timeout:.0f} s: {st}; "
                                   f"slurmctld log: {self._tail('slurmctld.log')}")
            time.sleep(0.5)

    def start_slurmd(self, name: str) -> None:
        h = self.lab.host(name)
        (self.dir / "spool" / name).mkdir(parents=True, exist_ok=True)
        # `ip netns exec` mounts the namespace's own /sys, without the cgroup tree slurmd's
        # cgroup plugin insists on loading (nothing uses it: proctrack/linuxproc, task/none)
        self._start(f"slurmd:{name}", [*_NO_BASHRC, "ip", "netns", "exec", h.netns, "sh", "-c",
                                       'mount -t tmpfs cgroup /sys/fs/cgroup && exec "$@"', "sh",
                                       "/usr/sbin/slurmd", "-D", "-N", name, "-f", str(self.conf)])

    def kill_slurmd(self, name: str) -> None:
        """The node dies: its slurmd and every step daemon and task of it, at once (SIGKILL)."""
        proc = self._procs.pop(f"slurmd:{name}")
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        ns_pids = subprocess.run(["ip", "netns", "pids", self.lab.host(name).netns],
                                 capture_output=True, text=True).stdout.split()
        for pid in map(int, ns_pids):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(10)

    def daemons(self) -> list[int]:
        """Pids of this lab's daemons still alive (a test asserts none after close())."""
        conf = str(self.conf)
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (conf.encode() in cmd or str(self.socket).encode() in cmd) and alive(int(pid)):
                out.append(int(pid))
        return out + self.stepds()

    def stepds(self) -> list[int]:
        """slurmstepd processes of this lab's nodes (they hold the spool dir as cwd)."""
        spool = str(self.dir / "spool")
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                comm = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if comm == "slurmstepd" and cwd.startswith(spool) and alive(int(pid)):
                out.append(int(pid))
        return out

    # ------------------------------------------------------------------ internals

    def _start(self, name: str, cmd: list[str]) -> None:
        log = open(self.dir / f"{name.replace(':', '.')}.out", "ab")
        with log:
            self._procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                 env=self.env, start_new_session=True)

    def _start_munge(self) -> None:
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._start("munged", ["/usr/sbin/munged", "-F", "--force", f"--socket={self.socket}",
                               f"--key-file={key}", f"--pid-file={self.dir / 'munged.pid'}",
                               f"--log-file={self.dir / 'munged.log'}",
                               f"--seed-file={self.dir / 'munged.seed'}"])
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self.socket.exists():
            if self._procs["munged"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {self._tail('munged.log')}"
                                   f"{self._tail('munged.out')}")
            time.sleep(0.05)

    def _write_conf(self) -> None:
        d, lab = self.dir, self.lab
        hw = _hardware()
        nodes = "\n".join(f"NodeName={h.name} NodeAddr={h.address} {hw} State=UNKNOWN" for h in lab.hosts)
        names = ",".join(h.name for h in lab.hosts)
        (d / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
        self.conf.write_text(f"""\
ClusterName=signofflab
SlurmctldHost={socket.gethostname()}({lab.controller_address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}/%n
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.%n.pid'}
SlurmctldLogFile={d / 'slurmctld.log'}
SlurmdLogFile={d / 'slurmd.%n.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=1
SlurmdTimeout={SLURMD_TIMEOUT_S}
MessageTimeout=5
KillWait=2
InactiveLimit=0
{nodes}
PartitionName={self.partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP
""")

    def _tail(self, name: str) -> str:
        try:
            return " | ".join((self.dir / name).read_text().strip().splitlines()[-5:])
        except OSError:
            return f"(no {name})"


def _hardware() -> str:
    """This machine's CPUs as slurmd reports them (every lab node is this machine)."""
    out = subprocess.run(["/usr/sbin/slurmd", "-C"], capture_output=True, text=True).stdout
    return " ".join(w for w in out.split() if w.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard",
                                                                  "CoresPerSocket", "ThreadsPerCore"))
