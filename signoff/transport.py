"""One ``run()`` per host with a result object: SSH through Fabric, or the local machine
through invoke. Transport failures raise ``HostUnreachable``; a command's own non-zero
exit is a result."""

from __future__ import annotations

import errno
import os
import shlex
import signal
import socket
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import paramiko
from fabric import Config, Connection
from fabric.runners import Remote
from invoke import Config as InvokeConfig
from invoke import Context, Local
from invoke.exceptions import CommandTimedOut
from paramiko.ssh_exception import NoValidConnectionsError

from signoff import stream
from signoff.inventory import Host

KILL_GRACE_S = 5


@dataclass
class CommandResult:
    command: str
    rc: int
    stdout: str
    stderr: str
    timeout: float
    elapsed: float | None = None  # s, as the controller saw it (None: not measured)

    @property
    def ok(self) -> bool:
        return self.rc == 0

    @property
    def timed_out(self) -> bool:
        # coreutils timeout: 124 after TERM, 137 after the KILL that follows -k; a 137 well
        # before the limit is a SIGKILL from elsewhere (the OOM killer), not the timeout
        return self.rc == 124 or (self.rc == 137 and (self.elapsed is None or self.elapsed >= self.timeout))

    @property
    def signal(self) -> str | None:
        """The signal that ended the command (SIGKILL, SIGABRT, ...), if one did and it was
        not its timeout."""
        if self.timed_out or not 128 < self.rc < 128 + 65:
            return None
        try:
            return signal.Signals(self.rc - 128).name
        except ValueError:
            return f"signal {self.rc - 128}"


class HostUnreachable(Exception):
    def __init__(self, host: str, cause: str):
        super().__init__(f"{host}: unreachable: {cause}")
        self.host, self.cause = host, cause


def guarded(command: str, timeout: float) -> str:
    """Wrap a command so that an overrun is killed on the host itself, whole process
    group included, not just its SSH channel closed; and so that it dies with its
    controller: the command runs in the background (`timeout` makes it a process group)
    while a watcher reads the shell's stdin, which the controller holds open for as long
    as it waits. EOF there (the controller was killed, or gave up on the command, and its
    SSH channel or pipe closed) TERMs the group; `timeout -k` KILLs what outlives that."""
    limit = f"{timeout:.3f}".rstrip("0").rstrip(".")  # not 2.592e+06
    inner = f"timeout -k {KILL_GRACE_S} {limit} sh -c {shlex.quote(command)}"
    # A background list's stdin is /dev/null in sh, so the watcher reads a copy (fd 3);
    # its output goes to /dev/null, or sshd would wait for it before closing the channel.
    wrapper = (f"exec 3<&0; {inner} </dev/null 3<&- & p=$!; "
               "(while read -r _ <&3; do :; done; kill -TERM -$p 2>/dev/null || kill -TERM $p) "
               ">/dev/null 2>&1 & w=$!; exec 3<&-; "
               "wait $p; rc=$?; kill $w 2>/dev/null; exit $rc")
    return f"sh -c {shlex.quote(wrapper)}"


# A host that does not answer: its link down, powered off or unplugged. The kernel says so as no
# route (ARP/neighbour discovery unanswered), no network, or the connect timing out first (which
# of them depends on the moment and --connect-timeout): one cause, said alike by plan and run.
DOWN = "host down or unplugged"
UNREACHABLE = {
    errno.EHOSTUNREACH: "no route to {target} (EHOSTUNREACH: nothing answers at its address): " + DOWN,
    errno.ENETUNREACH: "network unreachable for {target} (ENETUNREACH): " + DOWN
                       + ", or this machine has no route to its network",
}


def explain(exc: BaseException, host: Host, timeout: float | None = None,
            banner: str | None = None, keys: list[str] | None = None) -> str:
    """Name the cause of a connection failure the way an operator would; `banner`: the
    SSH version string the host sent ("" when none came), where known; `keys`: the
    identity files tried (default: the inventory's)."""
    target = f"{host.address or host.name}:{host.port or 22}"
    within = f" within {timeout:g} s" if timeout else ""
    if isinstance(exc, socket.gaierror):
        return f"DNS: cannot resolve {host.address or host.name} ({exc.strerror})"
    # paramiko folds ECONNREFUSED and EHOSTUNREACH into one NoValidConnectionsError: the errno of
    # each address tried tells a host that answers with no sshd from one that does not answer
    codes = {getattr(e, "errno", None) for e in (getattr(exc, "errors", None) or {}).values()} \
        or {getattr(exc, "errno", None)}
    code = next((c for c in UNREACHABLE if c in codes), None)
    if code is not None and errno.ECONNREFUSED not in codes:  # one address refused: it is up
        return UNREACHABLE[code].format(target=target)
    if isinstance(exc, NoValidConnectionsError) or isinstance(exc, ConnectionRefusedError):
        return f"connection refused by {target} (no sshd listening?)"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"connect to {target} timed out: no answer{within} ({DOWN}, or packets dropped)"
    if isinstance(exc, paramiko.BadHostKeyException):
        return f"host key of {target} does not match known_hosts (possible impersonation)"
    if isinstance(exc, paramiko.AuthenticationException):
        keys = keys if keys is not None else [host.identity_file] if host.identity_file else []
        key = f" with identity file{'s' if len(keys) > 1 else ''} {', '.join(keys)}" if keys else ""
        return f"authentication failed for {host.user or 'default user'}@{target}{key} ({exc})"
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return (f"unknown host key for {target}: add it to known_hosts "
                f"(or pass --accept-new-host-keys to trust it on first use)")
    # paramiko gives up waiting on the handshake quietly, then asks for the host key
    if isinstance(exc, paramiko.SSHException) and str(exc) == "No existing session":
        if not banner:
            return (f"no SSH banner from {target}{within}: it accepts TCP connections "
                    f"but no sshd answers there (hung sshd, or another service on the port)")
        return f"SSH key exchange with {target} ({banner}) not finished{within}"
    if isinstance(exc, paramiko.SSHException) and "protocol banner" in str(exc):
        return f"{target} closed the connection before an SSH banner (not an sshd, or sshd overloaded)"
    if isinstance(exc, tuple(_FILE_PROBLEMS)) and exc.filename:  # paramiko opening a key file
        return f"identity file {exc.filename}: {_FILE_PROBLEMS[type(exc)]}"
    if isinstance(exc, OSError):
        return f"network error reaching {target}: {exc.strerror or exc}"
    return f"{type(exc).__name__}: {exc}"


_KEY_TYPES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
# What paramiko dies of, opening a key file, without naming it
_FILE_PROBLEMS = {FileNotFoundError: "no such file", IsADirectoryError: "is a directory, not a key file",
                  PermissionError: "not readable"}


def identity_problem(path: str, usable: bool = True) -> str | None:
    """Why the identity file cannot be used, None if it can: checked before connecting,
    because paramiko's own errors never name the file. usable=False: only a file paramiko
    cannot open (it skips one that is not a usable key and tries the next, as ssh does)."""
    p = Path(path)
    if not p.exists():
        return _FILE_PROBLEMS[FileNotFoundError]
    if p.is_dir():
        return _FILE_PROBLEMS[IsADirectoryError]
    if not os.access(p, os.R_OK):
        return _FILE_PROBLEMS[PermissionError]
    if not usable:
        return None
    encrypted = False
    for kind in _KEY_TYPES:
        try:
            kind.from_private_key_file(str(p))
            return None
        except paramiko.PasswordRequiredException:
            encrypted = True
        except (paramiko.SSHException, ValueError):
            pass
    if encrypted:  # the agent may hold it unlocked; without one no passphrase can be given
        return None if os.environ.get("SSH_AUTH_SOCK") else (
            "encrypted, and there is no ssh-agent to unlock it (run ssh-add, or use a key "
            "without a passphrase)")
    return "not a private key (expected an OpenSSH or PEM ed25519, ECDSA or RSA key)"


class _AcceptAndRemember(paramiko.MissingHostKeyPolicy):
    """Trust-on-first-use, only when the user asked for it explicitly."""

    def missing_host_key(self, client, hostname, key):
        client.get_host_keys().add(hostname, key.get_name(), key)


class Transport:
    def __init__(self, host: Host):
        self.host = host

    def run(self, command: str, timeout: float) -> CommandResult:
        raise NotImplementedError

    def run_stream(self, command: str, timeout: float, on_line) -> CommandResult:
        """Like run(), calling on_line(line) for each stdout line as it arrives; stdout and
        stderr keep only their last lines (signoff.stream), so a stream may last hours."""
        raise NotImplementedError

    def put(self, local: Path, remote: str) -> None:
        raise NotImplementedError

    def put_all(self, files: dict[str, Path], remote_dir: str) -> None:
        """Copy files into remote_dir: {name there: local path}."""
        for name, f in files.items():
            self.put(f, f"{remote_dir}/{name}")

    def close(self) -> None:
        pass


class _InterruptibleLocal(Local):
    """invoke's Local answers Ctrl-C by writing ^C to the child's stdin and waiting on;
    close the stdin instead (guarded(): the command's group is TERMed) and re-raise, so the
    run stops at once."""

    def send_interrupt(self, interrupt):
        self.process.stdin.close()
        raise interrupt


class _InterruptibleRemote(Remote):
    """Fabric re-raises Ctrl-C but then waits for the remote command's output to end, i.e.
    for the probe to finish (the 58 s of a hung one); close the channel first: the host
    sees EOF on the command's stdin and kills it (guarded())."""

    def send_interrupt(self, interrupt):
        self.channel.close()
        raise interrupt


class LocalTransport(Transport):
    def __init__(self, host: Host):
        super().__init__(host)
        self.ctx = Context(InvokeConfig(overrides={"runners": {"local": _InterruptibleLocal}}))

    def run(self, command: str, timeout: float) -> CommandResult:
        t0 = time.monotonic()
        try:
            r = self.ctx.run(guarded(command, timeout), hide=True, warn=True, in_stream=False,
                             timeout=timeout + 2 * KILL_GRACE_S)
        except CommandTimedOut as exc:
            return CommandResult(command, 124, exc.result.stdout, exc.result.stderr, timeout)
        return CommandResult(command, r.exited, r.stdout, r.stderr, timeout, time.monotonic() - t0)

    def run_stream(self, command: str, timeout: float, on_line) -> CommandResult:
        t0 = time.monotonic()
        rc, out, err = stream.run_local(guarded(command, timeout), timeout + 2 * KILL_GRACE_S, on_line)
        return CommandResult(command, rc, out, err, timeout, time.monotonic() - t0)

    def put(self, local: Path, remote: str) -> None:
        Path(remote).write_bytes(Path(local).read_bytes())


class SSHTransport(Transport):
    def __init__(self, host: Host, known_hosts: str | None = None, accept_new: bool = False,
                 connect_timeout: float = 10):
        super().__init__(host)
        self._lock = threading.Lock()
        self._dead: str | None = None  # why the host could not be reached, once found
        # the handshake wait (connect_timeout) ends before paramiko's banner wait, so a port
        # that never sends a banner reads as that, not as a closed connection
        kwargs = {"banner_timeout": connect_timeout + 5}
        if host.identity_file:
            kwargs["key_filename"] = [host.identity_file]
        self.conn = Connection(
            host.address or host.name, user=host.user, port=host.port,
            config=Config(overrides={"runners": {"remote": _InterruptibleRemote}}),
            connect_timeout=connect_timeout, connect_kwargs=kwargs,
        )
        self.connect_timeout = self.conn.connect_timeout  # as Fabric applies it (whole seconds)
        # Fabric hard-codes AutoAddPolicy (accept any key); reject unknown keys instead.
        client = self.conn.client
        client.load_system_host_keys()
        for path in filter(None, [known_hosts, *self._config_known_hosts()]):
            if Path(path).is_file():
                client.load_host_keys(path)
        client.set_missing_host_key_policy(
            _AcceptAndRemember() if accept_new else paramiko.RejectPolicy())

    def _config_known_hosts(self) -> list[str]:
        files = self.conn.ssh_config.get("userknownhostsfile", "")
        files = files if isinstance(files, list) else files.split()
        return [str(Path(f).expanduser()) for f in files]

    def connect(self) -> None:
        """Connect once; a host found unreachable is not contacted again in this run (each
        later check would wait out the connect timeout for the same answer)."""
        with self._lock:
            if self._dead is None and not self.conn.is_connected:
                self._dead = self._open()
        if self._dead:
            raise HostUnreachable(self.host.name, self._dead)

    def _open(self) -> str | None:
        """None once connected, else why not."""
        # The inventory's key, then ~/.ssh/config's IdentityFile lines: Fabric merges them.
        keys = list(dict.fromkeys(self.conn.connect_kwargs.get("key_filename") or []))
        for key in keys:
            problem = identity_problem(key, usable=key == self.host.identity_file)
            if problem:
                return f"identity file {key}: {problem}"
        try:
            self.conn.open()
        except Exception as exc:  # noqa: BLE001 - every cause becomes one message
            t = self.conn.client.get_transport()
            self.conn.client.close()  # paramiko may still be waiting for a banner
            # name the host as ssh_config resolved it (HostName, User, Port)
            host = replace(self.host, address=self.conn.host, port=self.conn.port, user=self.conn.user)
            return explain(exc, host, self.connect_timeout, getattr(t, "remote_version", None), keys)
        return None

    def run(self, command: str, timeout: float) -> CommandResult:
        self.connect()
        t0 = time.monotonic()
        try:
            r = self.conn.run(guarded(command, timeout), hide=True, warn=True, in_stream=False,
                              timeout=timeout + 2 * KILL_GRACE_S)
        except CommandTimedOut as exc:
            return CommandResult(command, 124, exc.result.stdout, exc.result.stderr, timeout)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise HostUnreachable(self.host.name, f"connection lost: {exc}") from exc
        return CommandResult(command, r.exited, r.stdout, r.stderr, timeout, time.monotonic() - t0)

    def run_stream(self, command: str, timeout: float, on_line) -> CommandResult:
        self.connect()
        t0 = time.monotonic()
        try:
            channel = self.conn.client.get_transport().open_session()
            rc, out, err = stream.run_channel(channel, guarded(command, timeout),
                                              timeout + 2 * KILL_GRACE_S, on_line)
        except (paramiko.SSHException, OSError, EOFError, AttributeError) as exc:
            raise HostUnreachable(self.host.name, f"connection lost: {exc}") from exc
        return CommandResult(command, rc, out, err, timeout, time.monotonic() - t0)

    def put(self, local: Path, remote: str) -> None:
        self.connect()
        self.conn.put(str(local), remote)

    def close(self) -> None:
        self.conn.close()


def open_transport(host: Host, known_hosts: str | None = None,
                   accept_new: bool = False, connect_timeout: float = 10) -> Transport:
    if host.local:
        return LocalTransport(host)
    return SSHTransport(host, known_hosts, accept_new, connect_timeout)
