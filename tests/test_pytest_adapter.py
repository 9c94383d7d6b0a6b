"""signoff.pytest_adapter, the one place signoff touches pytest beyond its hooks, against the
pytest installed (pyproject.toml's range): a pytest release that changes what it relies on
fails here, not in `signoff plan` or a run's terminal."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from signoff import InputError, pytest_adapter

ROOT = Path(__file__).resolve().parent.parent
BASE = ["-c", "/dev/null", "--rootdir", str(ROOT), "--noconftest", "-p", "no:cacheprovider"]


def test_parsed_gives_pytests_parse_and_runs_no_session(tmp_path):
    seen = []

    class Spy:
        def pytest_sessionstart(self, session):
            seen.append("session")

        def pytest_configure(self, config):
            seen.append("configure")

    def work(config):
        config.pluginmanager.register(Spy())
        return config.getoption("maxfail"), config.getoption("verbose"), config.args

    answer = pytest_adapter.parsed([*BASE, "--maxfail", "3", "-v", str(tmp_path)], work)
    assert answer == (3, 1, [str(tmp_path)]) and seen == []  # nothing configured, collected or run


def test_parsed_says_a_bad_option_in_argparses_words():
    with pytest.raises(InputError) as exc:
        pytest_adapter.parsed([*BASE, "--maxfail", "many", "/dev/null"], lambda config: None)
    assert str(exc.value) == "argument --maxfail: invalid int value: 'many'"
    with pytest.raises(InputError, match="unrecognized arguments: --nosuch"):
        pytest_adapter.parsed([*BASE, "--nosuch", "/dev/null"], lambda config: None)


CONFTEST = '''
import pytest
from signoff import pytest_adapter
from signoff.terminal import ROW, Terminal

@pytest.fixture
def say(pytestconfig):
    return Terminal(pytestconfig).say

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report):
    config = pytest.CONFIG
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if config.stash.get(ROW, None) is not None:  # as signoff's Recorder does
        pytest_adapter.resume_row(tr, config.stash[ROW])
        del config.stash[ROW]

def pytest_configure(config):
    pytest.CONFIG = config
'''


@pytest.mark.parametrize("verbosity", [[], ["-q"], ["-v"]])
def test_lines_said_mid_row_leave_pytests_rows_whole(tmp_path, verbosity):
    """A measuring phase's lines (Terminal.say) between a file's letters: the letters after them
    are on their file's row again (its name, once, no orphan '.' line); the next file's row its
    own; under -q and -v nothing added."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_a.py").write_text(textwrap.dedent('''
        def test_1(): pass
        def test_2(say): say("interconnect: 1/1 hosts measured, 0 errors")
        def test_3(): pass
    '''))
    (tmp_path / "test_b.py").write_text("def test_4(): pass\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", "/dev/null",
                        "--rootdir", str(tmp_path), *verbosity, str(tmp_path)], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    said = lines.index("interconnect: 1/1 hosts measured, 0 errors")
    if not verbosity:
        assert lines[said - 1].startswith("test_a.py .") and lines[said + 1].startswith("test_a.py ..") \
            and lines[said + 2].startswith("test_b.py ."), p.stdout
    elif verbosity == ["-q"]:
        assert lines[said - 1] == "." and lines[said + 1].startswith("..."), p.stdout
    else:  # pytest's own: the test's line again after ours
        assert lines[said - 1].startswith("test_a.py::test_2") and \
            any(ln.startswith("test_a.py::test_2 PASSED") for ln in lines[said:]), p.stdout
