"""Run a command and hand each stdout line to a callback as it arrives (a soak's samples),
locally or over an open SSH connection. Only the last lines of stdout and stderr are kept,
so an hours-long stream costs no memory; the command runs under `guarded()` like any other,
and the controller gives up `2 * KILL_GRACE_S` after the host-side timeout."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import deque
from typing import Callable

KEEP_LINES = 200


class Lines:
    """Split chunks into lines for `on_line`; keep the tail. A callback that raises is
    recorded, never allowed to stop the reading."""

    def __init__(self, on_line: Callable[[str], None] | None, keep: int = KEEP_LINES):
        self.on_line, self.tail, self.buf = on_line, deque(maxlen=keep), ""
        self.callback_errors: list[str] = []

    def feed(self, chunk: str) -> None:
        self.buf += chunk
        *lines, self.buf = self.buf.split("\n")
        for line in lines:
            self._line(line)

    def close(self) -> None:
        if self.buf:
            self._line(self.buf)
            self.buf = ""

    def _line(self, line: str) -> None:
        self.tail.append(line)
        if self.on_line is None:
            return
        try:
            self.on_line(line)
        except Exception as exc:  # noqa: BLE001 - a bad line must not stop the stream
            if len(self.callback_errors) < 10:
                self.callback_errors.append(f"{type(exc).__name__}: {exc}")

    def text(self) -> str:
        return "\n".join(self.tail) + ("\n" if self.tail else "")


def run_local(command: str, deadline_s: float, on_line) -> tuple[int, str, str]:
    """(rc, stdout tail, stderr tail); rc 124 if still running after deadline_s."""
    out, err = Lines(on_line), Lines(None, keep=50)
    # stdin stays open while we wait: guarded() kills the command when it closes (we died)
    p = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, bufsize=1, errors="replace")
    t_err = threading.Thread(target=lambda: [err.feed(c) for c in p.stderr], daemon=True)
    t_err.start()
    killed = threading.Event()

    def kill():
        killed.set()
        p.kill()

    timer = threading.Timer(deadline_s, kill)
    timer.daemon = True
    timer.start()
    try:
        for line in p.stdout:
            out.feed(line)
        rc = p.wait()
    finally:
        timer.cancel()
        p.stdin.close()  # an interrupted wait: the host side stops the command
        if p.poll() is None:
            p.kill()
            p.wait()
    t_err.join(timeout=5)
    out.close()
    err.close()
    return (124 if killed.is_set() else rc), out.text(), err.text()


def run_channel(channel, command: str, deadline_s: float, on_line) -> tuple[int, str, str]:
    """The same over a paramiko channel (an SSH session of an open connection)."""
    out, err = Lines(on_line), Lines(None, keep=50)
    channel.exec_command(command)
    channel.settimeout(0.5)
    start = time.monotonic()
    dec_out, dec_err = _decoder(), _decoder()
    while True:
        progressed = False
        if channel.recv_ready():
            out.feed(dec_out(channel.recv(65536)))
            progressed = True
        if channel.recv_stderr_ready():
            err.feed(dec_err(channel.recv_stderr(65536)))
            progressed = True
        if channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
            break
        if channel.closed and not progressed:
            break
        if time.monotonic() - start > deadline_s:
            channel.close()
            out.close()
            return 124, out.text(), err.text()
        if not progressed:
            time.sleep(0.05)
    if not channel.exit_status_ready():
        channel.close()
        raise EOFError("the SSH channel closed without an exit status")
    rc = channel.recv_exit_status()
    channel.close()
    out.close()
    err.close()
    return rc, out.text(), err.text()


def _decoder():
    import codecs
    d = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return lambda b: d.decode(b)
