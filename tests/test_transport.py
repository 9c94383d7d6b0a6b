"""signoff.transport: guarded commands, local runs, and how SSH failures are explained."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import paramiko
import pytest
from lab import SilentListener
from paramiko.ssh_exception import NoValidConnectionsError

from signoff.inventory import LOCAL, Host
from signoff.transport import (
    CommandResult,
    HostUnreachable,
    LocalTransport,
    SSHTransport,
    explain,
    guarded,
)


@pytest.fixture
def run_guarded(tmp_path):
    """Run guarded(command, timeout) through `sh -c`, in its own session; kill leftovers."""
    procs = []

    def run(command: str, timeout: float, wait: float = 10) -> tuple[int, str, float]:
        out = tmp_path / f"out{len(procs)}"
        with out.open("w") as f:
            start = time.monotonic()
            # stdin held open, as the controller does: its EOF means the controller went
            proc = subprocess.Popen(["sh", "-c", guarded(command, timeout)], stdout=f,
                                    stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                                    start_new_session=True)
        procs.append(proc)
        rc = proc.wait(timeout=wait)
        return rc, out.read_text(), time.monotonic() - start

    yield run
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie is dead, only not yet reaped


def test_guarded_runs_the_command_through_sh(run_guarded):
    rc, out, _ = run_guarded("echo 'a b' \"$HOME\" | tr a A; exit 3", 5)
    assert rc == 3
    assert out == f"A b {os.environ['HOME']}\n"


def test_overrun_is_killed_with_124(run_guarded):
    rc, _, took = run_guarded("sleep 30", 1)
    assert rc == 124
    assert took < 4


def test_overrun_kills_the_commands_children(run_guarded):
    rc, out, took = run_guarded("sleep 300 & echo $!; wait", 1)
    pid = int(out.split()[0])
    try:
        assert rc == 124 and took < 4
        deadline = time.monotonic() + 2
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"child sleep {pid} survived the timeout"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_stdin_eof_kills_the_command_and_its_children():
    """A controller that dies (SIGKILL) closes the command's stdin (its SSH channel or pipe):
    the command and everything it started must die on the host, not run on unwatched."""
    proc = subprocess.Popen(["sh", "-c", guarded("sleep 300 & echo $!; sleep 300", 600)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    pid = int(proc.stdout.readline())
    try:
        time.sleep(0.3)
        assert alive(pid) and proc.poll() is None, "the command should run while stdin is open"
        proc.stdin.close()
        proc.wait(timeout=5)
        deadline = time.monotonic() + 3
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"child sleep {pid} survived its controller"
    finally:
        for p in (pid, proc.pid):
            if alive(p):
                os.kill(p, signal.SIGKILL)


def test_local_stream_command_dies_with_its_controller(tmp_path):
    """The same through LocalTransport.run_stream, the controller SIGKILLed mid-command."""
    marker = f"signoff-eof-{os.getpid()}"
    script = tmp_path / "ctl.py"
    script.write_text(
        "import sys\nsys.path.insert(0, %r)\n" % str(Path(__file__).resolve().parent.parent)
        + "from signoff.inventory import LOCAL, Host\nfrom signoff.transport import LocalTransport\n"
        f"LocalTransport(Host(name='l', address=LOCAL)).run_stream('bash -c \"exec -a {marker} sleep 300\"', "
        "600, print)\n")
    ctl = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not _pgrep(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _pgrep(marker), "the command never started"
        ctl.kill()
        ctl.wait()
        deadline = time.monotonic() + 5
        while _pgrep(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _pgrep(marker), "the command outlived its SIGKILLed controller"
    finally:
        for pid in _pgrep(marker):
            os.kill(pid, signal.SIGKILL)


def _pgrep(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if alive(int(p))]


def test_subsecond_timeout_still_limits(run_guarded):
    try:
        rc, _, _ = run_guarded("sleep 2", 0.5, wait=1.5)
    except subprocess.TimeoutExpired:
        pytest.fail("guarded command with timeout 0.5 still running after 1.5 s")
    assert rc == 124


def test_local_transport_run():
    t = LocalTransport(Host(name="localhost", address=LOCAL))
    r = t.run("echo out; echo err >&2; exit 3", 10)
    assert isinstance(r, CommandResult)
    assert (r.rc, r.stdout, r.stderr, r.ok, r.timed_out) == (3, "out\n", "err\n", False, False)
    assert t.run("true", 10).ok


def test_local_transport_overrun():
    start = time.monotonic()
    r = LocalTransport(Host(name="localhost", address=LOCAL)).run("echo hi; sleep 30", 1)
    assert r.rc == 124 and r.timed_out and r.stdout == "hi\n"
    assert time.monotonic() - start < 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ssh_closed_port_is_refused():
    h = Host(name="closed", address="127.0.0.1", port=free_port())
    with pytest.raises(HostUnreachable) as exc:
        SSHTransport(h, connect_timeout=3).run("true", 5)
    assert exc.value.host == "closed"
    assert "refused" in exc.value.cause and f":{h.port}" in exc.value.cause
    assert str(exc.value).startswith("closed: unreachable: ")


def test_ssh_unresolvable_name_is_dns():
    h = Host(name="no-such-host.invalid")
    with pytest.raises(HostUnreachable) as exc:
        SSHTransport(h, connect_timeout=3).run("true", 5)
    assert "DNS" in exc.value.cause and "no-such-host.invalid" in exc.value.cause


def test_explain_unknown_host_key():
    msg = explain(paramiko.SSHException("Server '[x]:22' not found in known_hosts"),
                  Host(name="x", port=2200))
    assert "known_hosts" in msg and "--accept-new-host-keys" in msg
    assert "x:2200" in msg


def test_explain_other_causes():
    h = Host(name="n1", user="ops")
    assert "authentication failed for ops@n1:22" in explain(
        paramiko.AuthenticationException("no keys"), h)
    assert explain(TimeoutError(), h, 7) == (
        "connect to n1:22 timed out: no answer within 7 s (host down or unplugged, or packets dropped)")
    assert explain(paramiko.SSHException("No existing session"), h, 7, "SSH-2.0-x") == (
        "SSH key exchange with n1:22 (SSH-2.0-x) not finished within 7 s")
    assert explain(ValueError("odd"), h) == "ValueError: odd"
    # paramiko opening a key file Fabric took from ~/.ssh/config: its errors never name the file
    assert explain(FileNotFoundError(2, "No such file or directory", "/k/id"), h) == (
        "identity file /k/id: no such file")
    assert explain(IsADirectoryError(21, "Is a directory", "/k"), h) == (
        "identity file /k: is a directory, not a key file")
    assert explain(paramiko.AuthenticationException("no"), h, keys=["/a", "/b"]).startswith(
        "authentication failed for ops@n1:22 with identity files /a, /b ")


def test_silent_port_says_no_banner_and_is_contacted_once():
    with SilentListener() as silent:
        t = SSHTransport(Host(name="silent", address=silent.address, port=silent.port), connect_timeout=2)
        causes = []
        for call in (lambda: t.run("true", 5), lambda: t.put(Path(__file__), "/tmp/x"),
                     lambda: t.run_stream("true", 5, print), lambda: t.run("true", 5)):
            start = time.monotonic()
            with pytest.raises(HostUnreachable) as exc:
                call()
            causes.append((exc.value.cause, time.monotonic() - start))
        assert silent.accepted == 1  # found dead once; later calls get the same answer at once
    first, took = causes[0]
    assert first == (f"no SSH banner from {silent.address}:{silent.port} within 2 s: it accepts TCP "
                     f"connections but no sshd answers there (hung sshd, or another service on the port)")
    assert 1.5 < took < 8
    assert all(c == first and s < 1 for c, s in causes[1:]), causes


def test_a_sigkill_before_the_limit_is_not_reported_as_a_timeout():
    """A probe SIGKILLed after a second (the OOM killer does this) exits 137 like a timeout's
    KILL: the elapsed time tells them apart, and the message says which."""
    from signoff.fleet import ProbeError, parse_probe_output
    t = LocalTransport(Host(name="localhost", address=LOCAL))
    r = t.run("echo started; kill -9 $$", 120)
    assert r.rc == 137 and not r.timed_out and r.signal == "SIGKILL" and r.elapsed < 120
    with pytest.raises(ProbeError) as exc:
        parse_probe_output("n1", "train", r)
    msg = str(exc.value)
    assert msg.startswith("n1: probe train was ended by SIGKILL after ") and "of its 120 s timeout" in msg
    assert "not its timeout: the kernel's OOM killer" in msg and "overran" not in msg
    r = t.run("kill -ABRT $$", 120)
    assert r.signal == "SIGABRT" and not r.timed_out
    r = t.run("trap '' TERM; sleep 30", 1)  # deaf to TERM: timeout's KILL after its grace
    assert r.rc == 137 and r.timed_out and r.signal is None
    with pytest.raises(ProbeError, match="overran its 1 s timeout"):
        parse_probe_output("n1", "train", r)


def test_no_route_and_no_network_say_host_down_not_no_sshd():
    """paramiko folds EHOSTUNREACH into the NoValidConnectionsError a refused port raises: the
    errno of each address tells a host that does not answer (down, unplugged) from one that
    answers with no sshd; ENETUNREACH comes as a plain OSError; a timeout says the same cause."""
    h = Host(name="n1", address="10.9.9.9")
    no_route = NoValidConnectionsError({("10.9.9.9", 22): OSError(errno.EHOSTUNREACH, "No route to host")})
    assert explain(no_route, h) == ("no route to 10.9.9.9:22 (EHOSTUNREACH: nothing answers at its "
                                    "address): host down or unplugged")
    assert explain(OSError(errno.EHOSTUNREACH, "No route to host"), h).startswith("no route to 10.9.9.9:22")
    assert explain(OSError(errno.ENETUNREACH, "Network is unreachable"), h) == (
        "network unreachable for 10.9.9.9:22 (ENETUNREACH): host down or unplugged, or this machine "
        "has no route to its network")
    assert "host down or unplugged" in explain(TimeoutError(), h, 3)
    refused = NoValidConnectionsError({("10.9.9.9", 22): ConnectionRefusedError(errno.ECONNREFUSED, "x")})
    assert explain(refused, h) == "connection refused by 10.9.9.9:22 (no sshd listening?)"
    # one address answers (refused), another has no route: the host is up, its sshd is not
    both = NoValidConnectionsError({("10.9.9.9", 22): ConnectionRefusedError(errno.ECONNREFUSED, "x"),
                                    ("fd00::9", 22, 0, 0): OSError(errno.EHOSTUNREACH, "No route")})
    assert "no sshd listening" in explain(both, h)
