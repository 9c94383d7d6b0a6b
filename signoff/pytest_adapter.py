"""Every use signoff makes of pytest beyond its hooks, in one place, so that a pytest release
that changes one breaks this file's tests (tests/test_pytest_adapter.py), not a command.

Only public names: pytest.main with a plugin object, pytest.Config's get_terminal_writer,
TerminalReporter's write, ensure_newline and startpath; and
one attribute pytest does not document, TerminalReporter.currentfspath (its row of letters'
file), which no public call reads or sets without writing a blank line (row / resume_row)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from signoff import InputError


class _Parse:
    """A plugin that takes pytest's parse of the command line and stops before its session:
    `work(config)` runs in pytest_cmdline_main, ahead of pytest's own (which would configure
    every plugin and run a session); pytest_configure is the caller's to call."""

    def __init__(self, work):
        self.work, self.done, self.answer = work, False, None

    @pytest.hookimpl(wrapper=True)
    def pytest_cmdline_parse(self):
        try:
            return (yield)
        except pytest.UsageError as exc:  # argparse's "usage: ... error: <what>": the what
            said = [ln.split("error: ", 1)[1] for ln in str(exc).splitlines() if "error: " in ln]
            raise InputError(said[0] if said else str(exc)) from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config):
        self.answer, self.done = self.work(config), True
        return 0


def parsed(args: list[str], work):
    """pytest's parse of `args` (pytest.main's: its plugins, ini and options), no session:
    returns work(config). Bad options raise InputError with argparse's own words."""
    grab = _Parse(work)
    rc = pytest.main(args, plugins=[grab])
    if not grab.done:  # pytest said why on stderr (a plugin -p that does not import)
        raise InputError(f"pytest could not parse the options (its exit code {int(rc)})")
    return grab.answer


def line_width(config) -> int:
    """How much of the terminal's current line is written (0: at a line's start)."""
    return config.get_terminal_writer().width_of_current_line


def row(tr) -> Path | None:
    """The file whose row of letters (`-q`-less pytest: 'acceptance/test_x.py ..') the
    terminal is on, None when on none."""
    fspath = tr.currentfspath
    return fspath if isinstance(fspath, Path) else None  # -v: a test's line, -q: none


def resume_row(tr, fspath: Path) -> None:
    """After lines of ours broke `fspath`'s row of letters: its name again on a line of its
    own, and pytest told that it is on that row (so its next letter follows, and its next
    file starts a row of its own), without the blank line pytest's own write would add."""
    tr.ensure_newline()
    tr.write(f"{os.path.relpath(fspath, tr.startpath)} ")
    tr.currentfspath = fspath
