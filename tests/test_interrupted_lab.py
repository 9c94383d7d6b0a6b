"""An interrupted 20-host run keeps every finished result: a real acceptance run on 20 lab
hosts (sshd each; the cheap checks: versions and GPU health under `local`, then the error
counters, whose probe is held until the signal) is stopped with
Ctrl-C, or killed outright (SIGKILL, then rebuilt from results.jsonl), after some results
are in; every record results.jsonl held by then is in results.json, the rest NOT RUN."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import Lab

from signoff import results

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
N_HOSTS = 20  # more than the report's host matrix (16): its PASS rows are left out
# the last (each host's data interface watched): its probe waits on every host (held()), so the
# interrupt always comes before it
LAST = "acceptance/test_health.py::test_error_counters"
CHECKS = ["acceptance/test_versions.py", "acceptance/test_gpu_health.py", LAST]


@pytest.fixture(scope="module")
def inv(tmp_path_factory):
    d = tmp_path_factory.mktemp("lab20")
    with Lab(d, n_hosts=N_HOSTS) as lab:
        yield lab.write_inventory(d / "inv.yaml", python=sys.executable,
                                  overrides={h.name: {"data_iface": h.veth_host} for h in lab.hosts})


def logged_records(rd: Path) -> list[dict]:
    path = rd / "results.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            change = json.loads(line)
        except json.JSONDecodeError:
            continue  # being written
        if change["type"] == "result":
            out.append(change["record"])
    return out


def held(tmp_path, inv: Path) -> Path:
    """The inventory with a Python whose counters probe waits (a process named HELD) and that runs
    every other probe: the checks before LAST are judged in well under a second once sysinfo is
    in, too fast for a poll on a loaded CPU to land inside them (fresh clone cdf0203: the run had
    ended, nothing was cut short); LAST's probe holds the run until the signal."""
    import yaml

    py = tmp_path / "heldpython"
    py.write_text(f'#!/bin/bash\ncase " $* " in *" counters "*) exec -a {HELD} sleep 300;; esac\n'
                  f'exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    data = yaml.safe_load(inv.read_text())
    data["defaults"]["python"] = str(py)
    out = tmp_path / "inv.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


HELD = f"signoff-held-counters-{os.getpid()}"


def stop_after(tmp_path, inv, sig, n=40) -> tuple[Path, list[dict], str]:
    """Start the run, send `sig` once results.jsonl holds `n` records; (report dir, the
    records it held just before, the run's output)."""
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", *CHECKS, "--report-dir", str(rd), "--partial",
                          "-p", "no:cacheprovider", "--inventory", str(held(tmp_path, inv)),
                          "--profile", "local", "-v"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    log = rd / "results.jsonl"
    while time.monotonic() < deadline and p.poll() is None and (
            not log.exists() or log.read_bytes().count(b'{"type":"result"') < n):
        time.sleep(0.02)  # counted, not parsed: the poll must not slow the run it watches
    before = logged_records(rd)
    assert p.poll() is None, "the run ended before it could be interrupted"
    p.send_signal(sig)
    out, _ = p.communicate(timeout=120)
    return rd, before, out


def selected(out: str) -> int:
    return int(re.search(r"collected (\d+) items", out).group(1))


def check_kept(doc: dict, before: list[dict]) -> None:
    got = {r["test"]: r for r in doc["results"]}
    assert len(before) >= 40 and len(got) == len(doc["results"])  # one record per check
    lost = [r["test"] for r in before if got.get(r["test"]) != r]
    assert not lost, f"finished before the interrupt, missing or changed in results.json: {lost[:5]}"
    assert doc["verdict"] == "INCOMPLETE" and doc["meta"]["interrupted"] is True
    not_run = [r for r in doc["results"] if r["status"] == "NOT RUN"]
    assert not_run, "the interrupt came after the last check: nothing was cut short"


def test_ctrl_c_on_20_hosts_keeps_every_finished_result(inv, tmp_path):
    rd, before, out = stop_after(tmp_path, inv, signal.SIGINT)
    doc = results.load(rd)  # written by the run itself, on Ctrl-C
    check_kept(doc, before)
    assert len(doc["results"]) == selected(out) > N_HOSTS * 10, out[-2000:]
    assert "killed" not in doc["meta"]
    left = subprocess.run(["pgrep", "-f", HELD], capture_output=True, text=True).stdout
    assert left == "", f"the held probes still run after the interrupt: {left}"
    # more hosts than the host matrix shows: the HTML table lists what did not pass
    from test_verdict_files import html_statuses
    rows = html_statuses(rd / "report.html")
    passed = sum(r["status"] == "PASS" for r in doc["results"])
    assert passed and "PASS" not in rows.values(), rows  # they had a row each before
    assert f"the {passed} that passed are in the summary above" in (rd / "report.html").read_text()


def test_sigkill_on_20_hosts_loses_nothing_rebuilt_from_the_log(inv, tmp_path):
    rd, before, out = stop_after(tmp_path, inv, signal.SIGKILL)
    at_kill = json.loads((rd / "results.json").read_text())
    assert at_kill["verdict"] is None and at_kill["results"] == []  # the run's start: in progress
    p = subprocess.run([sys.executable, "-m", "signoff.results", "rebuild", str(rd)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    doc = results.load(rd)
    try:
        check_kept(doc, before)
        assert doc["meta"]["killed"] and len(doc["results"]) == selected(out) > N_HOSTS * 10
        assert len(doc["hosts"]) == N_HOSTS
    finally:  # a killed controller cleans nothing: its probes and temp dirs (this shared /tmp)
        subprocess.run(["pkill", "-f", HELD])
        for facts in doc["hosts"].values():
            if facts.get("workdir", "").startswith("/tmp/signoff."):
                shutil.rmtree(facts["workdir"], ignore_errors=True)
