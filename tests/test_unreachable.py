"""Hosts that do not answer at fleet start, for real and at no cost: names that DNS refuses at
once (.invalid, RFC 6761) and loopback addresses where nothing listens (refused). No host
answering ends the run there; an unreachable host's checks each say its own cause."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_cli import LOCK_WAIT
from test_gpu_faults_recorded import RECORDED, recorded_inventory

from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
DNS = "unreachable: DNS: cannot resolve"


def accept(tmp_path: Path, inv: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", *args, "--inventory", str(inv), "--report-dir",
                        str(rd), "-p", "no:cacheprovider", *LOCK_WAIT], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    return p, load_results(rd / "results.json")


def test_no_host_answering_ends_the_run_at_fleet_start_with_a_line_per_cause(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - {name: 'nosuch[001-003].invalid'}\n"
                   "  - {name: shut1, address: 127.0.0.2, port: 1}\n"
                   "  - {name: shut2, address: 127.0.0.3, port: 1}\n")
    start = time.monotonic()
    p, res = accept(tmp_path, inv, "acceptance/")  # the whole sheet
    took, out = time.monotonic() - start, p.stdout + p.stderr
    assert p.returncode == res["meta"]["exit_code"] == 2, out  # ERROR only, not INCOMPLETE (README)
    assert took < 60, took  # no check ran: each would have had its turn to fail (83 s for 50 hosts)
    # one line per cause, hosts folded, right after the fleet's start; no line per check
    said = out.split("none of the 5 hosts answered; the run stops, each check ERROR with its host's "
                     "cause:\n", 1)[1].splitlines()[:3]
    assert said == [f"  {DNS} nosuch[001-003].invalid (Name or service not known)",
                    "  shut[1-2]: unreachable: connection refused by 127.0.0.[2-3]:1 (no sshd listening?)",
                    ""], out
    assert "EEEE" not in out and "PASSED" not in out and "ERROR acceptance/" not in out, out
    # every selected check recorded ERROR, none lost, each with its own host's cause
    log = [json.loads(ln) for ln in (tmp_path / "report" / "results.jsonl").read_text().splitlines()]
    (selected,) = [c["tests"] for c in log if c["type"] == "selected"]
    recs = res["results"]
    assert sorted(r["test"] for r in recs) == sorted(selected) and len(selected) > 200
    assert {r["status"] for r in recs} == {"ERROR"}
    own = {f"nosuch00{i}.invalid": f"nosuch00{i}.invalid: {DNS} nosuch00{i}.invalid (Name or service "
                                   f"not known)" for i in (1, 2, 3)}
    own |= {f"shut{i}": f"shut{i}: unreachable: connection refused by 127.0.0.{i + 1}:1 (no sshd "
                        f"listening?)" for i in (1, 2)}
    for r in recs:
        if r["host"] in own:
            assert r["message"] == own[r["host"]], r
        else:  # a pair's two hosts, or all of them for a cluster-wide check
            assert r["message"].startswith("no host answered: "), r
            assert DNS in r["message"] or "refused" in r["message"], r
    everyone = [r for r in recs if r["host"] == "all hosts"]
    assert everyone and all("nosuch[001-003].invalid" in r["message"] and "shut[1-2]" in r["message"]
                            for r in everyone), everyone
    # junit.xml and report.md say it too
    cases = ET.parse(tmp_path / "report" / "junit.xml").getroot().iter("testcase")
    errors = [c.find("error").get("message") for c in cases if c.find("error") is not None]
    assert sum(m == own["shut1"] for m in errors) == sum(r["host"] == "shut1" for r in recs) > 40
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"Checks: {len(recs)} ERROR" in md and "connection refused by 127.0.0.2:1" in md, md


def test_an_unreachable_hosts_checks_say_its_cause_when_the_profile_cannot_be_picked(tmp_path):
    """--profile auto picks nothing (the one host that answered hides its GPUs: its interpreter
    lacks nvidia-ml-py): the unreachable host's checks say their own cause, not the profile's."""
    facts = json.loads(RECORDED.read_text())["hosts"]["localhost"]
    facts["nvidia"] = {"available": False, "error": "nvidia-ml-py (pynvml) not importable: No module "
                       "named 'pynvml'", "pci_devices": 2, "driver_loaded": True}
    inv = recorded_inventory(tmp_path, facts)
    inv.write_text(inv.read_text() + "  - {name: nosuch001.invalid}\n")
    p, res = accept(tmp_path, inv, "acceptance/test_gpu_health.py", "-k", "ecc_enabled or gpu_count",
                    "--partial", "--profile", "auto")
    r = {(x["criterion"], x["host"]): x for x in res["results"]}
    for crit in ("ecc_enabled", "gpu_count"):
        assert r[(crit, "nosuch001.invalid")]["message"] == \
            f"nosuch001.invalid: {DNS} nosuch001.invalid (Name or service not known)", r
        assert r[(crit, "nosuch001.invalid")]["status"] == "ERROR"
        assert r[(crit, "gpunode")]["message"].startswith("--profile auto: gpunode: 2 NVIDIA GPU(s)"), r
    assert p.returncode == 2, p.stdout


@pytest.mark.lab
def test_a_host_whose_link_is_down_is_down_or_unplugged_alike_in_plan_and_run(tmp_path):
    """A lab host whose link is down (its controller-side veth, for real): the kernel answers the
    connect with EHOSTUNREACH (no ARP reply), which paramiko raises as the error a refused port
    raises. plan and run both say "host down or unplugged", never "no sshd listening" (whose fix,
    start sshd, is wrong for a host that is off); the host that answers is measured."""
    from lab import Lab
    from test_lab_acceptance import accept as accept_lab

    with Lab(tmp_path / "lab", n_hosts=2) as lab:
        inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
        down = lab.host("lab2")
        subprocess.run(["ip", "link", "set", "dev", down.veth_controller, "down"], check=True)
        # its MAC learnt at the lab's start would be tried first (a stale entry's probes): forgotten
        subprocess.run(["ip", "neigh", "flush", "to", down.address], check=True)
        cause = (f"lab2: unreachable: no route to {down.address}:22 (EHOSTUNREACH: nothing answers at its "
                 f"address): host down or unplugged")
        plan = subprocess.run([sys.executable, "-m", "signoff", "plan", "--inventory", str(inv), "--profile",
                               "local", "--connect-timeout", "10"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert cause.removeprefix("lab2: ") in plan.stdout, plan.stdout + plan.stderr
        rc, res, out = accept_lab(tmp_path, "acceptance/test_versions.py", "-k", "host_unique",
                                  "--inventory", str(inv), "--profile", "local", "--connect-timeout", "10")
    r = {x["host"]: x for x in res["results"]}
    assert r["lab2"]["status"] == "ERROR" and r["lab2"]["message"] == cause, r["lab2"]
    assert r["lab1"]["status"] == "PASS", r["lab1"]
    assert "no sshd" not in plan.stdout + out, out
