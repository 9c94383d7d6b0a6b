"""The acceptance suite, run for real over SSH against network-namespace hosts with sshd."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import Lab

from signoff import results as results_log
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
OTHER_PYTHON = "/usr/bin/python3"  # Debian's: another Python, no torch


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=4) as lab:
        lab.stop_sshd("lab4")  # a host whose sshd is down
        yield lab


def accept(tmp_path, *args, timeout=300, env=None, prefix=()):
    """Run `pytest acceptance/` as a user would (after `prefix`, e.g. salloc); return (exit code,
    results.json, output)."""
    rd = tmp_path / "report"
    targets = [a for a in args if a.startswith("acceptance/")] or ["acceptance/"]
    args = [a for a in args if a not in targets]
    if targets != ["acceptance/"] or any(a in ("-k", "--ignore") or a.startswith("--ignore=")
                                         for a in args):
        args.append("--partial")  # these tests judge a subset on purpose
    if not {"--inventory", "--hosts", "--lock-wait"} & set(args):
        # localhost's run lock is this machine's: another test file's local run may hold it
        args += ["--lock-wait", "300"]
    p = subprocess.run([*prefix, sys.executable, "-m", "pytest", *targets, "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    results = load_results(rd / "results.json") if (rd / "results.json").exists() else None
    # Lab hosts share this filesystem: no host's per-run temp dir may survive the run.
    left = [f["workdir"] for f in (results or {}).get("hosts", {}).values()
            if "workdir" in f and os.path.exists(f["workdir"])]
    assert not left, f"probe temp dirs left behind: {left}"
    return p.returncode, results, p.stdout + p.stderr


def leftovers(results) -> list[str]:
    """Processes still running in any of this run's host temp dirs (hosts share this kernel)."""
    dirs = [f["workdir"] for f in results["hosts"].values() if "workdir" in f]
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if any(cwd == d or cwd.startswith(d + "/") for d in dirs):
            out.append(pid)
    return out


def by_key(results):
    return {(r["criterion"], r["host"]): r for r in results["results"]}


def stalled(r: dict) -> bool:
    """A storage read FAILed only as 'unstable' (its attempts' spread), its best attempt at or above
    its floor, or measured once far below it, and no host below the aggregate's per-host minimum:
    one attempt this VM's one disk stalled, read and written by the other test workers at that
    moment (0.011-0.041 GB/s, the next attempt 0.17-1.26: fresh clones cb7d80e, 0a77ae6, f04442b).
    The right verdict on a cluster; here the machine's, not the lab hosts'."""
    floor = re.match(r">= ([\d.]+)", str(r.get("expected") or ""))
    if r["status"] != "FAIL" or not r["criterion"].startswith("storage_read") \
            or "below the per-host minimum" in r["message"]:
        return False
    # a first attempt the stall put far below the floor is final (signoff/retry.py: no attempt
    # could pass): the same stall, seen once
    return ("unstable:" in r["message"] and floor is not None and isinstance(r.get("measured"), (int, float))
            and r["measured"] >= float(floor[1])) or ", measured once: " in r["message"]


def test_parity_fails_the_odd_host_and_dead_host_errors(lab, tmp_path):
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={"lab3": {"python": OTHER_PYTHON}})
    # the checks this is about (the whole sheet on matching hosts: tests/test_walkthrough.py)
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "local",
                          "--connect-timeout", "5", "-k", "version or ecc_enabled or gpu_model",
                          "--partial")
    assert rc == 1, out
    r = by_key(res)
    assert r[("version_parity", "lab1")]["status"] == "PASS"
    assert r[("version_parity", "lab2")]["status"] == "PASS"
    odd = r[("version_parity", "lab3")]
    assert odd["status"] == "FAIL"
    assert "lab3" in odd["message"] and "Python 3.11.2 differs" in odd["message"]
    assert "torch unknown differs" in odd["message"] and "on 2 hosts lab[1-2]" in odd["message"]
    dead = [v for (c, h), v in r.items() if h == "lab4"]
    assert dead and all(v["status"] == "ERROR" for v in dead)
    assert all("lab4" in v["message"] and "refused" in v["message"] for v in dead)
    # GPU checks do not apply to GPU-less hosts under `local`, and are never a PASS
    assert r[("ecc_enabled", "lab1")]["status"] == "N.A."
    assert res["verdict"] == "FAIL"
    assert res["hosts"]["lab3"]["python"] == "3.11.2"  # every measurement kept
    assert "error" in res["hosts"]["lab4"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Versions across hosts" in html and "so-odd" in html and "Sign-off verdict" in html
    assert (tmp_path / "report" / "junit.xml").exists()


def test_intent_file_wrong_firmware_and_kernel_parameter_each_one_finding_with_its_fix(lab, tmp_path):
    """The intended build (signoff/intent) over SSH: the real sysinfo and build probes on lab1-3, each
    reading a FAKE sysfs of two ConnectX-7 cards (15b3:1021: no NIC here) and a FAKE /proc/cmdline;
    lab2 and lab3 on the old NIC firmware, lab3 booted with iommu=off; the inventory's intent: names
    the file. Exactly one finding per fault, its hosts folded, with its fix; parity by majority
    (lab1, the one host on the intended firmware, is its odd one out) leaves the firmware to it."""
    from test_intent import fake_nic_sysfs

    old, new = "28.39.1002", "28.41.1000"
    hosts = {}
    for name, fw, iommu in (("lab1", new, "pt"), ("lab2", old, "pt"), ("lab3", old, "off")):
        proc = tmp_path / f"proc-{name}"
        proc.mkdir()
        (proc / "cmdline").write_text(f"ro quiet iommu={iommu}\n")
        hosts[name] = {"env": {"SIGNOFF_SYSFS": str(fake_nic_sysfs(tmp_path / f"sys-{name}", [fw, fw])),
                               "SIGNOFF_PROCFS": str(proc)}}
    (tmp_path / "intent.yaml").write_text(f"firmware:\n  nic: {{'15b3:1021': '{new}'}}\n"
                                          "kernel:\n  iommu: pt\n")
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", sys.executable, overrides=hosts), list(hosts))
    inv.write_text(inv.read_text() + "intent: intent.yaml\n")  # beside the inventory
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "local",
                          "-k", "intent or version_parity")
    assert rc == 1, out[-3000:]
    st = {k: v["status"] for k, v in by_key(res).items()}
    assert [st[("intent_firmware", h)] for h in hosts] == ["PASS", "FAIL", "FAIL"], out[-3000:]
    assert [st[("intent_kernel", h)] for h in hosts] == ["PASS", "PASS", "FAIL"], out[-3000:]
    unset = ("intent_versions", "intent_hardware", "intent_cabling")  # the file sets none of them
    assert [st[(c, h)] for c in unset for h in hosts] == ["N.A."] * 9
    assert [st[("version_parity", h)] for h in hosts] == ["PASS"] * 3, out[-3000:]
    found = res["meta"]["intent"]["findings"]
    assert [(f["criterion"], f["who"], f["fix"]) for f in found] == [
        ("intent_firmware", "lab[2-3]", f"update the 15b3:1021 firmware on lab[2-3] from {old} to {new}"),
        ("intent_kernel", "lab3",
         "set iommu=pt on the kernel command line of lab3 (now iommu=off) and reboot")]
    assert found[0]["parts"] == "2 of 2 NICs"
    md = (tmp_path / "report" / "report.md").read_text()
    section = md.split("## Against the intended build")[1].split("\n## ")[0]
    assert section.count("\n- ") == 2 and "update the 15b3:1021 firmware on lab\\[2-3\\]" in section, md
    html = (tmp_path / "report" / "report.html").read_text()
    assert html.count("so-intent") == 2 and "Against the intended build" in html


def test_gpu_profile_fails_gpu_less_hosts(lab, tmp_path):
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab1"])
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "h200-8x-nvlink@2")
    assert rc == 1
    r = by_key(res)
    for crit in ("gpu_count", "ecc_enabled", "nvidia_driver_version", "pcie_link"):
        assert r[(crit, "lab1")]["status"] == "FAIL", r[(crit, "lab1")]
        assert "lab1: no NVIDIA GPU" in r[(crit, "lab1")]["message"]
        assert "h200-8x-nvlink@2" in r[(crit, "lab1")]["message"]


def test_wrong_class_profile_runs_no_heavy_measurement(lab, tmp_path):
    """h100-8x-nvlink on the CPU-only lab hosts: the class checks FAIL, and the all-reduces
    (which swept to 8 GiB on CPU ranks) and P2P are NOT RUN, naming the class guard."""
    hosts = ["lab1", "lab2", "lab3"]
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), hosts)
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "h100-8x-nvlink")
    assert rc == 1 and res["verdict"] == "FAIL", out
    r = by_key(res)
    guard = "not run: class guard of profile h100-8x-nvlink (8 x NVIDIA H100 80GB HBM3"
    for h in hosts:
        for crit in ("gpu_model", "gpu_count", "nvlink_up"):
            assert r[(crit, h)]["status"] == "FAIL", r[(crit, h)]
        for crit in ("allreduce_busbw", "allreduce_correct", "nccl_transport", "p2p_bandwidth"):
            rec = r[(crit, h)]
            assert rec["status"] == "NOT RUN" and rec["message"].startswith(guard), rec
            assert f"failed for {h}: GPU model none is not NVIDIA H100 80GB HBM3" in rec["message"]
    multi = r[("multinode_allreduce", "all hosts")]
    assert multi["status"] == "NOT RUN" and multi["message"].startswith(guard), multi
    assert all(f"{h}: GPU model none" in multi["message"] for h in hosts)
    assert "rows" not in json.dumps(multi)  # nothing was swept


def test_unknown_host_key_rejected_unless_accepted(lab, tmp_path):
    inv = tmp_path / "inv.yaml"
    lab.write_inventory(inv, python=sys.executable)
    text = "\n".join(ln for ln in inv.read_text().splitlines() if not ln.startswith("known_hosts"))
    inv.write_text(text)
    only = _only(inv, ["lab1"])
    rc, res, out = accept(tmp_path, "--inventory", str(only), "--profile", "local")
    assert rc == 2, out  # ERROR-only: README, Exit codes
    judged = [r for r in res["results"] if r["status"] != "N.A."]  # N.A.: no pair for one host
    assert judged and all(r["status"] == "ERROR" and "unknown host key" in r["message"] for r in judged)
    rc, res, out = accept(tmp_path, "--inventory", str(only), "--profile", "local",
                          "--accept-new-host-keys", "-k", "allreduce_correct", "--partial")
    assert rc == 0 and by_key(res)[("allreduce_correct", "lab1")]["status"] == "PASS", out


def test_hung_probe_is_killed_on_its_host_and_others_run(lab, tmp_path):
    marker = f"signoff-hang-{os.getpid()}"
    inv = hung_lab2(lab, tmp_path, marker)
    # long enough for a healthy host's torch import on a loaded CI machine
    # two families: each family's probe on lab2 costs its 20 s timeout, and there are a dozen
    rc, res, out = accept(tmp_path, "--inventory", str(inv), "--profile", "local",
                          "--probe-timeout", "20", "-k", "version_parity or allreduce_busbw", timeout=600)
    r = by_key(res)
    assert r[("version_parity", "lab1")]["status"] == "PASS"
    hung = r[("version_parity", "lab2")]
    assert hung["status"] == "ERROR" and "overran its 20 s timeout" in hung["message"]
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == "", f"hung probe still running on the host: {left}"


def hung_lab2(lab, tmp_path, marker: str) -> Path:
    """An inventory of lab1 and lab2, where lab2's Python hangs (a process named `marker`)."""
    slow = tmp_path / "slowpython"
    slow.write_text(f"#!/bin/bash\nexec -a {marker} sleep 600\n")
    slow.chmod(0o755)
    return _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                                     overrides={"lab2": {"python": str(slow)}}), ["lab1", "lab2"])


def _only(inv: Path, names: list[str]) -> Path:
    """A copy of an inventory that keeps only some hosts."""
    import yaml

    data = yaml.safe_load(inv.read_text())
    data["hosts"] = [h for h in data["hosts"] if h["name"] in names]
    out = inv.with_name(f"{inv.stem}-{'-'.join(names)}.yaml")
    out.write_text(yaml.safe_dump(data))
    return out


def test_interrupted_run_keeps_results_and_leaves_nothing(lab, tmp_path):
    marker = f"signoff-intr-{os.getpid()}"
    inv = hung_lab2(lab, tmp_path, marker)
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/", "--report-dir", str(rd),
                          "-p", "no:cacheprovider", "--inventory", str(inv), "--profile", "local",
                          "--probe-timeout", "300"], cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    log = rd / "results.jsonl"  # each result a line as it comes (results.json: at the end)
    while time.time() < deadline:  # wait until lab1 has a result and lab2's probe hangs
        if log.exists() and b'{"type":"result"' in log.read_bytes():
            break
        time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"]
    assert any(r["host"] == "lab1" and r["status"] in ("PASS", "N.A.") for r in res["results"])
    assert res["hosts"]["lab1"]["python"]
    assert not os.path.exists(res["hosts"]["lab1"]["workdir"]), "temp dir left behind"
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout
    assert left == "", f"probe still running on the host after Ctrl-C: {left}"


def test_ssh_config_alias_and_hostlist(lab, tmp_path):
    """--hosts with a Slurm range resolves through ~/.ssh/config (HostName, User, IdentityFile,
    UserKnownHostsFile), as ssh would."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("".join(
        f"Host node0{i}\n  HostName {h.address}\n  User root\n  IdentityFile {lab.user_key}\n"
        f"  UserKnownHostsFile {lab.known_hosts}\n" for i, h in enumerate(lab.hosts, 1)))
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "--partial", "--hosts",
                        "node[01-02]", "--python", sys.executable, "--profile", "local",
                        "--report-dir", str(rd), "-p", "no:cacheprovider"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HOME": str(home)})
    res = load_results(rd / "results.json")
    assert p.returncode == 0, p.stdout
    assert {r["host"] for r in res["results"]} == {"node01", "node02"}
    assert res["hosts"]["node01"]["python"] and res["verdict"] == "PASS"
    # the run's first lines: the preflight of the hosts' sysinfo, folded (signoff/preflight.py)
    assert f"  node[01-02]: python {sys.executable} (" in p.stdout, p.stdout
    # `signoff plan` on the same hosts (issue 24): hosts, the profile auto picks from their
    # sysinfo, the checks and the time to expect; nothing measured, no report directory
    where = tmp_path / "plan"
    where.mkdir()
    p = subprocess.run([sys.executable, "-m", "signoff", "plan", "--hosts", "node[01-04]", "--python",
                        sys.executable], cwd=where, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "HOME": str(home)})
    # no data_iface: the network's checks will ERROR, so the plan's gate exits plan.PREDICTS_ERROR
    assert p.returncode == 6 and "ERROR: no data interface named" in p.stdout, p.stdout + p.stderr
    assert "hosts: 4 from --hosts node[01-04]: node[01-04]  (SSH)" in p.stdout, p.stdout
    assert "--profile auto picks local on these hosts (asked for their sysinfo)" in p.stdout, p.stdout
    assert "per host, on each of node[01-04]:" in p.stdout and "  version_parity " in p.stdout
    assert "per pair (4): node01->node02, " in p.stdout and "long measurements" in p.stdout
    assert list(where.iterdir()) == []  # no reports/ written


def _reading(runid: str) -> bool:
    """The storage probe's `read` phase of this run is running (past claim and prepare)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"storage.py" in cmd and b"read" in cmd and runid.encode() in cmd:
            return True
    return False


def _storage_runid(shared: Path) -> str | None:
    dirs = sorted(shared.glob(".signoff-*-lab1"))
    return dirs[0].name[len(".signoff-"):-len("-lab1")] if dirs else None


def test_ctrl_c_twice_writes_the_reports_and_cleans_up_within_seconds(lab, tmp_path):
    """People press Ctrl-C again when the first seems slow: the second must not cost the
    reports, the verdict or the cleanup of the hosts (probes, temp dirs, storage marks)."""
    from test_storage import marked
    from test_storage_lab import _readers

    shared = tmp_path / "shared"
    shared.mkdir()
    prof = tmp_path / "long.yaml"
    prof.write_text("extends: local\ncriteria:\n  storage_read_seq: {min: 0.1, unit: GB/s, "
                    "source: test, size: 32M, jobs: 2, iodepth: 4, runtime: 120}\n")
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab1", "lab2"])
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/", "-k", "storage",
                          "--report-dir", str(rd), "-p", "no:cacheprovider", "--inventory", str(inv),
                          "--profile", str(prof), "--storage-path", str(shared)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:  # never leave the run going: the lab's teardown would SIGKILL its SSH sessions
        runid, deadline = None, time.time() + 90
        while time.time() < deadline and not (runid and _reading(runid)):
            time.sleep(0.1)
            runid = _storage_runid(shared)
        assert runid and _reading(runid), "the storage read never started"
        time.sleep(1)
        workdirs = [json.loads(f.read_text())["workdir"] for f in (rd / "hosts").glob("*.json")]
        assert len(workdirs) == 2 and all(os.path.isdir(w) for w in workdirs)
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        second = time.monotonic()
        out, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    took = time.monotonic() - second
    assert took < 15, f"exited {took:.0f} s after the second Ctrl-C\n{out}"
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"], out
    assert (rd / "report.html").exists() and (rd / "junit.xml").exists(), out
    assert "Sign-off verdict" in (rd / "report.html").read_text()
    assert marked(shared) == [], f"storage marks left behind\n{out}"
    assert [w for w in workdirs if os.path.exists(w)] == [], f"temp dirs left behind\n{out}"
    assert _readers(runid) == [], "storage probe still running after Ctrl-C twice"


def _running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def _lock_dir(lab, name: str) -> Path:
    """The run lock of a lab host (signoff.fleet.KEEPER: root's, in /run/signoff, named by the
    machine's boot and the host's network namespace)."""
    ino = os.stat(f"/run/netns/{lab.host(name).netns}").st_ino
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return Path(f"/run/signoff/lock.{boot}.{ino}")


def _start(inv: Path, rd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/", "--report-dir", str(rd),
                             "-p", "no:cacheprovider", "--inventory", str(inv), "--profile", "local",
                             *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_for_result(rd: Path, timeout: float = 90) -> dict:
    deadline = time.time() + timeout
    log = rd / "results.jsonl"  # what has arrived: results.json is written at the start and end
    while time.time() < deadline:  # until lab1 has a result (lab2's probe hangs meanwhile)
        doc = results_log._empty({})
        for line in (log.read_text().splitlines() if log.exists() else []):
            try:
                results_log._apply(doc, json.loads(line))
            except ValueError:
                pass  # a line still being written
        if doc["results"]:
            return doc
        time.sleep(0.3)
    raise AssertionError("the run never reported a result")


def test_sigkilled_controller_probes_die_and_next_run_lists_leftovers(lab, tmp_path):
    """kill -9 of the controller: its probes die on the hosts with their SSH channels (not
    10 s later still running), the lock it held does not block the next run (released by
    its keeper, or stale when the keeper died too), and the next run names the temp dirs
    the killed one left, on the terminal, in results.json and in the report."""
    marker = f"signoff-kill-{os.getpid()}"
    inv = hung_lab2(lab, tmp_path, marker)
    rd = tmp_path / "killed"
    p = _start(inv, rd, "--probe-timeout", "300")
    try:
        res = _wait_for_result(rd)
        assert _running(marker)
        lock1, lock2 = _lock_dir(lab, "lab1"), _lock_dir(lab, "lab2")
        assert res["meta"]["run"] in (lock1 / "owner").read_text()
        os.kill(int((lock1 / "pid").read_text().split()[0]), signal.SIGKILL)  # lab1's keeper dies first
        time.sleep(0.5)
    finally:
        p.kill()
        p.wait()
    deadline = time.time() + 10
    while time.time() < deadline and (leftovers(res) or lock2.exists()
                                      or _running(marker)):
        time.sleep(0.2)
    left = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    assert left == "" and leftovers(res) == [], f"probes still running 10 s after kill -9: {left}"
    assert not lock2.exists(), "the keeper did not release lab2's lock when its channel went"
    assert lock1.exists(), "lab1's lock should be stale (its keeper was killed), not removed"
    dirs = {h: f["workdir"] for h, f in res["hosts"].items() if "workdir" in f}
    assert dirs and all(os.path.isdir(d) for d in dirs.values())
    try:
        inv2 = _only(lab.write_inventory(tmp_path / "inv2.yaml", python=sys.executable), ["lab1", "lab2"])
        rc, res2, out = accept(tmp_path, "acceptance/test_versions.py", "--inventory", str(inv2),
                               "--profile", "local")
        assert rc == 0 and res2["verdict"] == "PASS", out  # the stale lock did not block lab1
        html = (tmp_path / "report" / "report.html").read_text()
        for host, d in dirs.items():
            assert any(d in w for w in res2["leftovers"][host]), res2.get("leftovers")
            # the terminal names the newest few: another test's killed run on this shared /tmp
            # may be newer (every dir is in results.json and the report, asserted here)
            assert (f"probe temp dir {d} of a run that is gone" in out
                    or "leftovers of runs that are gone (" in out) and "signoff clean" in out, out
            assert d in html
    finally:
        subprocess.run(["rm", "-rf", *dirs.values()])


def test_second_run_on_the_same_hosts_is_refused_naming_the_first(lab, tmp_path):
    marker = f"signoff-lock-{os.getpid()}"
    first = _start(hung_lab2(lab, tmp_path, marker), tmp_path / "first", "--probe-timeout", "300")
    try:
        owner = _wait_for_result(tmp_path / "first")["meta"]["run"]
        inv = _only(lab.write_inventory(tmp_path / "inv2.yaml", python=sys.executable), ["lab1", "lab2"])
        t0 = time.monotonic()
        rc, res, out = accept(tmp_path, "acceptance/test_versions.py", "--inventory", str(inv),
                              "--profile", "local")
        assert time.monotonic() - t0 < 60, "refusing must not wait (default --lock-wait 0)"
    finally:
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)
    assert rc == 2 and res["verdict"] == "ERROR", out  # ERROR-only: README, Exit codes
    for r in res["results"]:
        assert r["status"] == "ERROR", r
        assert f"{r['host']}: in use by another signoff run: run {owner} by " in r["message"], r
        assert "since 20" in r["message"] and "--lock-wait" in r["message"]


def test_a_lock_another_local_user_planted_is_named_never_quoted_nor_counted(lab, tmp_path):
    """Any local user may make a lock name in the shared /tmp first, naming pid 1 (alive) and an
    owner of their choosing: every run ERRORed "in use by another signoff run", quoting it; then
    (round 4) ERRORed naming its owner. The run lock is in root's /run/signoff now (issue 51 item
    2; tests/test_run_lock_lab.py plants the rest): the names the lock had before, planted by
    another user, change nothing, and the planted text is nowhere."""
    import pwd
    pw = pwd.getpwnam("nobody")
    said = "run 20991231T000000Z-planted-1 by mallory@elsewhere since 2099-12-31T00:00:00Z"
    planted = [Path(f"/tmp/signoff-lock.{os.stat(f'/run/netns/{lab.host(h).netns}').st_ino}{uid}")
               for h, uid in (("lab1", ""), ("lab2", f".{os.getuid()}"))]  # both names of older versions
    plant = "; ".join(f"mkdir {d} && echo '{said}' > {d}/owner && echo 1 > {d}/pid" for d in planted)
    subprocess.run(["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
                    "sh", "-c", plant], check=True, timeout=30)
    try:
        assert all(d.stat().st_uid == pw.pw_uid for d in planted)
        inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab1", "lab2"])
        rc, res, out = accept(tmp_path, "acceptance/test_versions.py", "--inventory", str(inv),
                              "--profile", "local")
        assert rc == 0 and res["verdict"] == "PASS", out
        assert "foreign_locks" not in res, res["foreign_locks"]
        rd = tmp_path / "report"
        for text in (out, json.dumps(res), (rd / "report.html").read_text(), (rd / "report.md").read_text(),
                     (rd / "junit.xml").read_text()):
            assert "mallory" not in text and "in use by another signoff run" not in text
        assert all((d / "owner").read_text() == said + "\n" for d in planted)  # left alone
        assert not _lock_dir(lab, "lab1").exists()  # this run's own lock, removed at its end
    finally:
        subprocess.run(["rm", "-rf", *map(str, planted)])


def test_a_host_that_does_not_answer_the_cleanup_is_named_not_waited_for(lab, tmp_path):
    """Cleanup is bounded: a host whose sshd stops answering mid-run holds up the end of the
    run CLEANUP_S at most, and the run says what it left there (temp dir, run lock)."""
    from signoff import inventory
    from signoff.fleet import CLEANUP_S, Fleet

    inv = inventory.load(_only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab3"]))
    f = Fleet(inv)
    assert f.facts("lab3")["python"]
    wd, lock = f.sessions["lab3"].workdir, _lock_dir(lab, "lab3")
    assert os.path.isdir(wd) and lock.is_dir()
    ns = lab.host("lab3").netns
    sshd = [int(p) for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True,
                                           text=True).stdout.split()
            if Path(f"/proc/{p}/comm").read_text().strip() == "sshd"]
    assert sshd
    for pid in sshd:
        os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        f.close()
        took = time.monotonic() - t0
    finally:
        for pid in sshd:
            os.kill(pid, signal.SIGCONT)
    assert took < CLEANUP_S + 5, f"cleanup waited {took:.0f} s for a host that does not answer"
    left = f.notes["left_behind"]["lab3"]
    assert any(f"probe temp dir {wd}" in w and f"no answer to the cleanup within {CLEANUP_S} s" in w
               for w in left), left
    assert any(f"run lock {lock}" in w for w in left), left
    subprocess.run(["rm", "-rf", wd])
    deadline = time.time() + 10  # its SSH connection closed: the keeper releases the lock
    while lock.exists() and time.time() < deadline:
        time.sleep(0.2)
    assert not lock.exists()


def test_lock_wait_waits_for_the_other_run_then_measures(lab, tmp_path):
    marker = f"signoff-wait-{os.getpid()}"
    first = _start(hung_lab2(lab, tmp_path, marker), tmp_path / "first", "--probe-timeout", "300")
    try:
        _wait_for_result(tmp_path / "first")
        inv = _only(lab.write_inventory(tmp_path / "inv2.yaml", python=sys.executable), ["lab1", "lab2"])
        rd = tmp_path / "report"
        second = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "--partial",
                                   "--report-dir", str(rd), "-p", "no:cacheprovider", "--inventory", str(inv),
                                   "--profile", "local", "--lock-wait", "120"], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(8)
        assert second.poll() is None, "the second run should be waiting for the lock"
        first.send_signal(signal.SIGINT)
        first.wait(timeout=60)
        out, _ = second.communicate(timeout=120)
    finally:
        for p in (first, locals().get("second")):
            if p is not None and p.poll() is None:
                p.kill()
    res = load_results(rd / "results.json")
    assert second.returncode == 0 and res["verdict"] == "PASS", out


def test_ctrl_c_during_a_probe_in_the_main_thread_stops_at_once(lab, tmp_path):
    """Fabric answered Ctrl-C by waiting for the remote command's output to end: the run
    stopped only when the probe did (its --probe-timeout; 58 s in the field)."""
    marker = f"signoff-main-{os.getpid()}"
    py = tmp_path / "hangs_on_allreduce"
    py.write_text(f'#!/bin/bash\n[ "$1" = allreduce.py ] && exec -a {marker} sleep 600\n'
                  f'exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=str(py)), ["lab1"])
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/test_interconnect.py", "-k",
                          "allreduce_busbw", "--report-dir", str(rd), "-p", "no:cacheprovider",
                          "--inventory", str(inv), "--profile", "local", "--probe-timeout", "300"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not _running(marker):
            time.sleep(0.2)
        assert _running(marker), "the probe never started"
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    assert time.monotonic() - t0 < 15, f"exited {time.monotonic() - t0:.0f} s after Ctrl-C\n{out}"
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"], out
    assert not _running(marker), "probe still running"
    assert not os.path.exists(res["hosts"]["lab1"]["workdir"])


def test_calibrated_from_two_golden_runs_a_faulted_run_fails_and_its_rerun_completes_it(lab, tmp_path):
    """Issue 45 items 4 and 5, on lab1 and lab2, the whole sheet each time. Two golden runs;
    `signoff calibrate` of both sets each criterion's margin from their run-to-run spread (the
    multi-node all-reduce's too) and says it. A third run under that profile with lab2's link
    shaped to 500 Mbit/s (a real fault: tc; the lab's pair floor is 1 Gb/s) FAILs; `signoff run
    --rerun` of it (~15 s where a whole sheet takes ~45-90 s here), no hosts or profile
    named, measures only the checks that did not pass: 0 once the link is not shaped (a rerun while
    the fault is still there ends 1: tests/test_fleet_lab.py's outlier), its results the whole sheet
    (the third run's, stamped with its run, and its own)."""
    from test_network_lab import shaped

    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        h.name: {"data_iface": h.veth_host} for h in lab.hosts}), ["lab1", "lab2"])
    # the lab's, with one all-reduce size on each host (26 -> 3 s), and the run-to-run tolerance of
    # the figures local.yaml's baseline: lacks, as measured here (2026-12-05, lab[1-2] under other
    # sessions' lab runs): two runs that agreed within 1 % (0.599, 0.605 GB/s) made a floor the next
    # run's first attempt missed (0.289, then 0.63: unstable)
    quick = tmp_path / "lab-quick.yaml"
    quick.write_text(f"extends: {ROOT / 'tests/profiles/lab.yaml'}\n" + """\
baseline:
  criteria:
    multinode_allreduce_busbw: 95%  # 0.138-0.605 GB/s over 4 healthy runs, spread 77 %
    net_pair_bandwidth: 95%         # 4.45-12.1 Gb/s over 4 healthy runs, spread 63 %
    # the other collectives across the 2 hosts, as lab-quick's floors below say: as loose
    multinode_allgather_busbw: 95%
    multinode_reduce_scatter_busbw: 95%
    multinode_sendrecv_busbw: 95%
    multinode_alltoall_busbw: 95%
    rail_alltoall_busbw: 95%
criteria:
  allreduce_busbw: {min: 0.05, unit: GB/s, size: 1M, sweep: [1M, 1M], source: as quick.yaml}
  # not what this test is about, and below what a healthy 2-host run read here beside other
  # sessions' lab runs (reduce-scatter 0.038 GB/s against lab.yaml's 0.04, 2026-12-05)
  multinode_reduce_scatter_busbw: &low {min: 0.01, unit: GB/s, source: "provisional: below it"}
  multinode_allgather_busbw: *low
  multinode_sendrecv_busbw: *low
  multinode_alltoall_busbw: *low
  rail_alltoall_busbw: *low
""")
    golden = []
    for name in ("a", "b"):
        for again in ("", "-again"):  # a golden run the VM's disk stalled (stalled()): one more
            rc, res, out = accept(tmp_path / (name + again), "--inventory", str(inv), "--profile", str(quick))
            missed = [r for r in (res or {"results": []})["results"] if r["status"] not in ("PASS", "N.A.")]
            if not missed or not all(stalled(r) for r in missed):
                break
        assert rc == 0 and not res["meta"]["partial"], out[-3000:]
        golden.append(tmp_path / (name + again) / "report")
    site = tmp_path / "site.yaml"
    p = subprocess.run([sys.executable, "-m", "signoff", "calibrate", *map(str, golden), "--out", str(site)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    import yaml
    crit = yaml.safe_load(site.read_text())["criteria"]
    runs = [load_results(g)["meta"]["run"] for g in golden]
    multi = crit["multinode_allreduce_busbw"]
    assert all(f"{r} (" in multi["source"] for r in runs), multi  # both runs named
    said = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("multinode_allreduce_busbw:"))
    assert "run-to-run spread" in multi["source"] and "over 2 runs" in said, p.stdout
    assert all(f"{r} (" in crit["multinode_alltoall_busbw"]["source"] for r in runs)  # and the all-to-all

    with shaped(lab, {"lab2": "500mbit"}):
        rc, third, out = accept(tmp_path / "c", "--inventory", str(inv), "--profile", str(site))
        assert rc == 1 and not third["meta"]["partial"], out[-3000:]
        failed = {r["test"] for r in third["results"] if r["status"] in ("FAIL", "ERROR", "NOT RUN")}
        assert "acceptance/test_network.py::test_net_pair_bandwidth[lab2->lab1]" in failed, failed
    rc, fixed, out = rerun(tmp_path / "c" / "report", tmp_path / "fixed")
    assert rc == 0 and fixed["verdict"] == "PASS" and not fixed["meta"]["partial"], out[-3000:]
    mine = fixed["meta"]["run"]
    again = {r["test"] for r in fixed["results"] if r["run"] == mine}
    assert again == failed, (again, failed)  # only what did not pass was measured again
    keys = {(r["criterion"], r["host"]) for r in fixed["results"]}
    assert keys == {(r["criterion"], r["host"]) for r in third["results"]}  # the whole sheet
    assert {r["run"] for r in fixed["results"] if r["test"] not in failed} == {third["meta"]["run"]}
    assert Path(fixed["meta"]["profile_path"]) == site.resolve() and "lab[1-2]" in fixed["meta"]["inventory"]
    line = f"results carried from run {third['meta']['run']}: {len(keys) - len(failed)} ("
    assert line in out and line in (tmp_path / "fixed" / "report.md").read_text(), out[-3000:]


def rerun(earlier: Path, rd: Path) -> tuple[int, dict, str]:
    """`signoff run --rerun earlier` as typed: no hosts, inventory or profile (the earlier run's)."""
    p = subprocess.run([sys.executable, "-m", "signoff", "run", "--rerun", str(earlier), "--report-dir",
                        str(rd), "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    return p.returncode, load_results(rd / "results.json"), p.stdout + p.stderr
