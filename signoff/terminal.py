"""Lines on the terminal while the checks wait: a measuring phase's progress between pytest's
rows of result letters."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest

from signoff import pytest_adapter
from signoff.printable import printable

ROW = pytest.StashKey[Path]()  # the file whose row our lines broke: written again (Recorder)


class Terminal:
    """Lines on the terminal while the checks wait (capture suspended for them): say(line),
    and progress(line, final): one line updated in place on a terminal; on a non-tty (a log)
    a line every PROGRESS_EVERY_S at most, and the final one."""

    PROGRESS_EVERY_S = 5.0

    def __init__(self, config):
        self.config = config
        self.tr = config.pluginmanager.get_plugin("terminalreporter")
        self.capman = config.pluginmanager.get_plugin("capturemanager")
        self.open = False  # our progress line is the terminal's current line, unfinished
        self.width = 0  # the current line's width when we last wrote it
        self.last = 0.0

    def _quiet(self):
        return self.capman.global_and_fixture_disabled() if self.capman else contextlib.nullcontext()

    def _ours(self) -> bool:
        """Whether the current line is still our open progress line (nothing written since)."""
        return self.open and pytest_adapter.line_width(self.config) == self.width

    def _fresh_line(self) -> None:
        self.tr.ensure_newline()
        if pytest_adapter.line_width(self.config):  # pytest's dots (-q) or our open line
            self.tr.line("")

    def say(self, line: str) -> None:
        if self.tr is None:
            return
        line = printable(line)  # a host's text in it (a version, a cause) as escapes
        with self._quiet():
            row = pytest_adapter.row(self.tr)  # the file whose results pytest is writing on this row
            self._fresh_line()
            self.open = False
            self.tr.write_line(line)
            if row is not None:  # its row again before pytest's next letter (Recorder)
                self.config.stash[ROW] = row

    def progress(self, line: str, final: bool) -> None:
        if self.tr is None:
            return
        line = printable(line)
        if not self.tr.isatty():
            if final or time.monotonic() - self.last >= self.PROGRESS_EVERY_S:
                self.last = time.monotonic()
                self.say(line)
            return
        with self._quiet():
            if not self._ours():
                self._fresh_line()
            self.tr.rewrite(line, erase=True)
            if final:
                self.tr.line("")
            self.open, self.width = not final, pytest_adapter.line_width(self.config)


