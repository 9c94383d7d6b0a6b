"""The `signoff` command (signoff/cli.py): run, plan, list, show-profile, clean, calibrate,
rebuild, from the clone and installed from a wheel outside it."""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from signoff import InputError, catalog, cli, paths, sheet
from signoff.fleet import KEEPER_S, HostSession
from signoff.inventory import LOCAL, Host
from signoff.transport import LocalTransport

ROOT = Path(__file__).resolve().parent.parent
LOCK_WAIT = ("--lock-wait", "300")  # this machine's run lock: wait for a concurrent test's run


def signoff(*args, cwd=ROOT, env=None, exe=(sys.executable, "-m", "signoff"), timeout=180):
    return subprocess.run([*exe, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def main(capsys, *args) -> tuple[int, str, str]:
    rc = cli.main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_the_clone_is_the_sheet():
    assert paths.checkout() == ROOT
    assert paths.acceptance_dir() == ROOT / "acceptance" and paths.thresholds_dir() == ROOT / "thresholds"
    assert paths.reports_dir() == ROOT / "reports"


def test_list_profiles_shows_classes_and_their_bases(capsys):
    rc, out, _ = main(capsys, "list", "profiles")
    names = [ln.split()[0] for ln in out.splitlines() if not ln.startswith(" ")]  # less slices' lines
    shipped = sorted(p.stem for p in (ROOT / "thresholds").glob("*.yaml"))
    abstract = [n for n in shipped
                if re.search(r"(?m)^abstract: true", (ROOT / f"thresholds/{n}.yaml").read_text())]
    assert rc == 0 and abstract and names == shipped
    # a class base says it is one and what it picks from (issue 45 item 7), a class does not
    based = {ln.split()[0] for ln in out.splitlines() if "[class base: " in ln}
    assert based == set(abstract), based
    assert re.search(r"(?m)^a100-8x-nvlink .*\[class base: --profile a100-8x-nvlink picks "
                     r"a100-40gb-8x-nvlink or a100-80gb-8x-nvlink by the hosts' NVML\]$", out)
    assert re.search(r"(?m)^h200-8x-nvlink +8x NVIDIA H200 SXM with NVSwitch .*\[8 x NVIDIA H200, "
                     r"interconnect nvlink\]\n +slices: h200-8x-nvlink@1 \.\. @7 ", out)  # N of its GPUs
    # the Blackwell classes (issue 43), the Grace trays with their C2C host link and NVLink domain
    assert {"b200-8x-nvlink", "b300-8x-nvlink", "gb200-nvl72", "gb300-nvl72"} <= set(names)
    assert re.search(r"(?m)^gb200-nvl72 .*\[4 x NVIDIA GB200, interconnect nvlink, host link NVLink-C2C, "
                     r"NVLink domain 72 GPUs\]$", out), out
    assert re.search(r"(?m)^b300-8x-nvlink .*\[8 x NVIDIA B300 SXM6 AC, interconnect nvlink\]$", out), out


def test_list_checks_is_the_sheet_with_thresholds(capsys):
    rc, out, _ = main(capsys, "list", "checks")
    lines = out.splitlines()
    assert rc == 0 and [ln.split()[0] for ln in lines] == [c for c, _ in sheet.checks(ROOT / "acceptance",
                                                                                    ("host", "pair"))]
    # each check's file: what --only's check names and files select (test_only_names_...)
    assert re.search(r"(?m)^net_pair_bandwidth +network +acceptance/test_network\.py +per host pair$", out)
    assert re.search(r"(?m)^storage_read_aggregate +storage +acceptance/test_storage\.py +once, all hosts "
                     r"at once$", out)
    assert re.search(r"(?m)^gpu_model +gpu +acceptance/test_gpu_health\.py +per host$", out)
    rc, out, _ = main(capsys, "list", "checks", "--profile", "h200-8x-nvlink@1")
    rows = {ln.split()[0]: ln for ln in out.splitlines()}
    assert "p2p_bandwidth >= 335 GB/s (source: Azure/azurehpc-health-checks" in rows["p2p_bandwidth"]
    assert rows["gpu_count"].endswith("hardware.gpu_count: 1")
    assert rows["ecc_uncorrectable"].endswith("no threshold")
    assert "hardware.ecc: any" in rows["ecc_enabled"]  # N.A. where the class has no ECC (RTX 4090)
    assert "nic_rate >= 1.0 x the fleet's rate (provisional" in rows["nic_link"]  # derived: no class NIC
    assert main(capsys, "list", "checks", "--profile", "nosuch")[0] == cli.USAGE_ERROR


def test_only_names_families_files_and_checks(capsys):
    acc = ROOT / "acceptance"
    assert catalog.select("gpu") == [f"{acc}/test_gpu_health.py", f"{acc}/test_health.py"]
    assert catalog.select("health, storage") == [f"{acc}/test_health.py", f"{acc}/test_storage.py"]
    # a check by the name signoff list checks prints: that test alone (every host of it); its
    # file once where the file is named too
    assert catalog.select("storage_read_seq,gpu_model") == [f"{acc}/test_gpu_health.py::test_gpu_model",
                                                            f"{acc}/test_storage.py::test_storage_read_seq"]
    assert catalog.select("storage,storage_read_seq") == [f"{acc}/test_storage.py"]
    with pytest.raises(InputError, match=r"--only gpux: unknown gpux; did you mean gpu\? \(families: "
                                         r"checkpoint, dcgm, fabric, form, gpu, intent, .*files: checkpoint, "
                                         r"dcgm, fabric, form, gpu_health, health, intent, .*; "
                                         r"checks: signoff list checks\)"):
        catalog.select("gpux")
    rc, out, _ = main(capsys, "plan", "--no-contact", "--profile", "local", "--only", "gpu_model,storage")
    assert rc == 0 and "checks: 8 of the sheet's" in out and "(--only: gpu_model, storage)" in out, out
    p = signoff("run", "--only", "gpu_model", "--profile", "local", "--collect-only", "-q")
    assert p.returncode == 0 and re.search(r"^acceptance/test_gpu_health\.py::test_gpu_model\[localhost\]\n\n"
                                           r"1 test collected", p.stdout, re.M), p.stdout + p.stderr
    rc, _, err = main(capsys, "run", "--only", "gpu_modle,nosuchthing")
    assert rc == cli.USAGE_ERROR and ("--only gpu_modle,nosuchthing: unknown gpu_modle, nosuchthing; did "
                                      "you mean gpu_model (for gpu_modle)? (families") in err, err


def test_show_profile_says_where_each_key_comes_from(tmp_path, capsys):
    child = tmp_path / "site.yaml"
    child.write_text("extends: local\ndescription: ours\ncriteria:\n"
                     "  storage_read_seq: {min: 0.5, unit: GB/s, source: ours}\n")
    rc, out, _ = main(capsys, "show-profile", str(child))
    assert rc == 0 and out.startswith("profile site: ours\n")
    assert f"files: {child} < thresholds/local.yaml < thresholds/nvidia-base.yaml" in out
    block = re.split(r"\n  (?=\S)", out.split("  storage_read_seq: ", 1)[1])[0]
    # the limit is the child's; local's size and runtime still apply, said with their file
    assert block.startswith(f">= 0.5 GB/s  [{child}]")
    assert re.search(r"size 128M  \[thresholds/local\.yaml\]", block)
    assert re.search(r"runtime 1  \[thresholds/local\.yaml\]", block)
    rc, out, _ = main(capsys, "show-profile", "nvidia-base")
    assert rc == 0 and "(abstract: a class base: --profile picks its variant from the hosts' NVML)" \
        in out.splitlines()[0]


def reports(where: Path) -> set[Path]:
    return set((where / "reports").glob("2*"))


def test_plan_lists_hosts_checks_thresholds_and_writes_nothing(tmp_path, clone_reports):
    before = reports(ROOT)
    p = signoff("plan", "--hosts", "node[01-04]", "--profile", "h200-8x-nvlink", "--only", "network,soak",
                "--soak-duration", "2h", "--no-contact", cwd=tmp_path)  # no such hosts to ask
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "hosts: 4 from --hosts node[01-04]: node[01-04]  (SSH)" in out
    es = catalog.checks()
    files = {f for name in ("network", "soak") for f in catalog.groups(es)[name]}
    assert f"checks: {sum(e.file in files for e in es)} of the sheet's" in out
    assert "a run of a part of the sheet is INCOMPLETE" in out
    assert "per pair (4): node01->node02, node02->node03, node03->node04, node04->node01:" in out
    assert re.search(r"(?m)^  nic_link +network +nic_rate >= 400 Gb/s "
                     r"\[thresholds/h200-8x-nvlink\.yaml\]$", out)
    assert re.search(r"(?m)^  multinode_allreduce +network +hardware\.nvls: True; "
                     r"multinode_allreduce_busbw", out)
    assert re.search(r"(?m)^  multinode_transport +network +.*multinode_transport == NET \(NCCL transport\) "
                     r"\[thresholds/nvidia-base\.yaml\]$", out)
    assert "soak: 2 h of load on every host at once (--soak-duration)" in out
    assert "host pairs: 4 pairs in 2 rounds of 5 s: 10 s" in out
    assert "storage_read" not in out and "train_" not in out
    assert reports(ROOT) == before and list(tmp_path.iterdir()) == []


def test_plan_with_rerun_lists_only_what_did_not_pass(tmp_path):
    """--rerun narrows a plan as it narrows the run: the earlier run's checks that did not pass,
    their hosts, pairs, and the run named (not the whole sheet, as before)."""
    earlier = tmp_path / "a"
    earlier.mkdir()
    res = [("test_versions.py::test_version_parity[node02]", "FAIL"),
           ("test_versions.py::test_version_parity[node01]", "PASS"),
           ("test_versions.py::test_version_parity[node04]", "ERROR"),
           ("test_versions.py::test_version_parity[node09]", "FAIL"),  # not in --hosts now: left out
           ("test_network.py::test_net_pair_bandwidth[node03->node04]", "FAIL"),
           ("test_network.py::test_multinode_allreduce", "NOT RUN"),
           ("test_network.py::test_nic_link[node01]", "N.A.")]
    (earlier / "results.json").write_text(json.dumps({
        "verdict": "FAIL", "meta": {"run": "r1"},
        "results": [{"test": "acceptance/" + t, "status": s} for t, s in res]}))
    p = signoff("plan", "--hosts", "node[01-04]", "--profile", "h200-8x-nvlink", "--rerun", str(earlier),
                "--no-contact", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert re.search(r"checks: 3 of the sheet's \d+ criteria, 4 checks\n", p.stdout), p.stdout
    assert ("  Rerun of run r1 (a): its 5 checks that did not pass (3 FAIL, 1 ERROR, 1 NOT RUN): "
            "net_pair_bandwidth on node03->node04; multinode_allreduce on all hosts; "
            "version_parity on node[02,04]") in p.stdout, p.stdout
    assert "per host, on each of node[02,04]:\n  version_parity " in p.stdout, p.stdout
    assert "per pair (1): node03->node04:\n  net_pair_bandwidth " in p.stdout, p.stdout
    sheet = p.stdout.split("profile: ", 1)[1].split("long measurements")[0]
    listed = re.findall(r"(?m)^  (\w+) +\w+ ", sheet)
    assert sorted(listed) == ["multinode_allreduce", "net_pair_bandwidth", "version_parity"], p.stdout


def test_plan_auto_asks_the_hosts(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults: {{python: {sys.executable}}}\n"
                   "hosts:\n  - {name: here, address: local}\n"
                   "  - {name: gone, address: 127.0.0.1, port: 1}\n")
    p = signoff("plan", "--inventory", str(inv), *LOCK_WAIT, cwd=tmp_path)
    assert p.returncode == 6 and "gone: every check ERROR" in p.stdout, p.stderr  # plan.PREDICTS_ERROR
    assert re.search(r"--profile auto picks local on these hosts \(asked for their sysinfo\); "
                     r"no answer from gone: unreachable: .*refused", p.stdout), p.stdout
    n = len(sheet.checks(ROOT / "acceptance"))
    assert f"checks: {n} of the sheet's {n} criteria, " in p.stdout
    p = signoff("plan", "--no-contact", cwd=tmp_path)
    assert "--profile auto: picked at the start of the run" in p.stdout and "profile: " not in p.stdout


@pytest.mark.parametrize("args, said", [
    (("--profile", "tests/profiles/nosuch.yaml"), "profile 'tests/profiles/nosuch.yaml': no such file"),
    (("--hosts", " "), "--hosts is empty"),
    (("--report-dir", "x"), "--report-dir: plan and clean write no report"),
    (("--no-such-flag",), "unrecognized arguments: --no-such-flag"),
])
def test_plan_refuses_what_a_run_refuses(tmp_path, args, said):
    p = signoff("plan", "--no-contact", *args, cwd=tmp_path)
    assert p.returncode == cli.USAGE_ERROR and said in p.stderr, p.stderr
    assert list(tmp_path.iterdir()) == []


def test_run_passes_options_through_and_rebuild_wraps(tmp_path):
    rd = tmp_path / "r"
    p = signoff("run", "--only", "versions", "--partial", "--python", sys.executable, *LOCK_WAIT,
                "--report-dir", str(rd), "-p", "no:html", "-k", "not torch_cuda_build")
    doc = json.loads((rd / "results.json").read_text())
    assert {r["criterion"] for r in doc["results"]} == {
        "version_parity", "host_unique", "nvidia_driver_version", "cuda_driver_version"}
    # every check N.A. on this GPU-less machine: INCOMPLETE, its exit code 3 passed through
    assert doc["verdict"] == "INCOMPLETE" and p.returncode == 3, p.stdout[-2000:]
    (rd / "results.json").unlink()
    p = signoff("rebuild", str(rd))
    assert p.returncode == 0 and json.loads((rd / "results.json").read_text())["results"], p.stderr
    assert signoff("rebuild", str(tmp_path / "nothing")).returncode == 2  # signoff.results' own code


def test_calibrate_wraps_signoff_calibrate(tmp_path):
    p = signoff("calibrate", str(ROOT / "reports/examples/h200-1x"), "--out", str(tmp_path / "site.yaml"))
    assert p.returncode == cli.USAGE_ERROR and "not calibrated: the run has 2 FAIL" in p.stderr
    assert "--margin" in signoff("calibrate", "--help").stdout


def keeper(tmp: Path, name: str, pid: int | str) -> Path:
    d = tmp / f"signoff.{name}"
    d.mkdir(mode=0o700)  # as mktemp makes it
    start = Path(f"/proc/{pid}/stat").read_text().split()[21] if Path(f"/proc/{pid}").exists() else "1"
    (d / ".keeper").write_text(f"{pid} {start}\n")
    return d


def test_clean_removes_dead_runs_dirs_and_their_probes(tmp_path):
    live = subprocess.Popen(["sleep", str(KEEPER_S)])
    probe = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a probe of a dead run
    innocent = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        alive = keeper(tmp_path, "AAAAAAAA", live.pid)
        dead = keeper(tmp_path, "BBBBBBBB", live.pid)  # its pid now another process's (wrapped)
        (dead / ".keeper").write_text(f"{live.pid} 1\n")
        (dead / f".pid.{probe.pid}").write_text(Path(f"/proc/{probe.pid}/stat").read_text().split()[21])
        # a pid file whose pid is now another process (pids wrap): that one is never killed
        (dead / f".pid.{innocent.pid}").write_text("1\n")
        old = tmp_path / "signoff.CCCCCCCC"  # an older version's dir without a keeper, 20 min old
        old.mkdir(mode=0o700)
        os.utime(old, (old.stat().st_atime - 1200, old.stat().st_mtime - 1200))
        new = tmp_path / "signoff.DDDDDDDD"  # without a keeper yet: just made by a starting run
        new.mkdir()
        p = signoff("clean", env={"SIGNOFF_TMPDIR": str(tmp_path)})
        assert p.returncode == 0, p.stderr
        assert p.stdout.splitlines() == [f"localhost: removed {dead}", f"localhost: removed {old}"]
        assert sorted(tmp_path.iterdir()) == [alive, new]
        assert probe.wait(10) == -9  # its process group killed, as a run's own cleanup does
        assert innocent.poll() is None
        p = signoff("clean", env={"SIGNOFF_TMPDIR": str(tmp_path)})
        assert p.stdout == "localhost: nothing left by dead runs\n"
    finally:
        live.kill()
        probe.kill()
        innocent.kill()


def start_time(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().split()[21]


def as_nobody(*cmd: str) -> list[str]:
    """`cmd` as the local user nobody (a second user of this machine)."""
    pw = pwd.getpwnam("nobody")
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", *cmd]


def test_clean_as_root_never_signals_what_another_local_user_names(monkeypatch):
    """User nobody plants what looks like dead runs' dirs in the shared temp dir, with pid files
    naming root's processes (a start time is world-readable): its own dir, a link to a root dir
    of that shape, and a pid file in a root dir it can write to (mode 777, not mktemp's 700).
    Root's `signoff clean` signals none of them, removes none of those dirs and says each one it
    left alone and why; a pid file of root's own dead run naming nobody's process is spared and
    said; that dead run's dir is removed and its probe killed. Neither the per-run sweep nor a
    run's own cleanup takes nobody's dir for one of the run's."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv (util-linux) to act as a second local user")
    shared = Path(tempfile.mkdtemp(prefix="signoff-test-", dir="/tmp"))  # /tmp/pytest-of-root is 0700
    shared.chmod(0o1777)  # as /tmp
    victim = subprocess.Popen(["sleep", "300"], start_new_session=True)  # root's, named by nobody
    theirs = subprocess.Popen(as_nobody("sleep", "300"), start_new_session=True)  # nobody's own
    probe = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a probe of root's dead run
    procs = (victim, theirs, probe)
    try:
        planted, link, writable = (shared / f"signoff.{n * 8}" for n in "EFG")
        target = shared / "root-dir"  # a dir of root's with a dead run's shape, outside the sweep
        target.mkdir(mode=0o700)
        (target / ".keeper").write_text("4194305 1\n")
        (target / f".pid.{victim.pid}").write_text(start_time(victim.pid))
        writable.mkdir()
        writable.chmod(0o777)
        (writable / ".keeper").write_text("4194305 1\n")
        plant = (f"set -e; mkdir -m 700 {planted}; echo 4194305 1 > {planted}/.keeper; "
                 f"echo {start_time(victim.pid)} > {planted}/.pid.{victim.pid}; ln -s {target} {link}; "
                 f"echo {start_time(victim.pid)} > {writable}/.pid.{victim.pid}")
        subprocess.run(as_nobody("sh", "-c", plant), check=True, timeout=30)
        assert planted.stat().st_uid == link.lstat().st_uid == pwd.getpwnam("nobody").pw_uid
        esc = shared / "signoff.\x1b[2J\x1b[HX"  # a name that clears the operator's screen
        subprocess.run(as_nobody("mkdir", "-m", "700", str(esc)), check=True, timeout=30)
        dead = keeper(shared, "DDDDDDDD", 4194305)  # root's own dead run
        (dead / f".pid.{probe.pid}").write_text(start_time(probe.pid))
        (dead / f".pid.{theirs.pid}").write_text(start_time(theirs.pid))  # not root's process
        monkeypatch.setenv("SIGNOFF_TMPDIR", str(shared))
        s = HostSession(Host(name="localhost", address=LOCAL, python=sys.executable),
                        LocalTransport(Host(name="localhost", address=LOCAL)))
        s.workdir = str(shared / "signoff.HHHHHHHH")  # the run's own: none
        said = s._sweep()  # only root's dead run, nothing of nobody's
        assert len(said) == 1 and said[0].startswith(f"probe temp dir {dead} of a run that is gone"), said
        s.workdir = str(planted)  # a run's own cleanup, were its workdir nobody's
        assert not s.kill_probes()
        s.cleanup()
        assert planted.is_dir() and victim.poll() is None
        p = signoff("clean", "--hosts", "local")
        assert p.returncode == 0, p.stderr
        assert sorted(p.stdout.splitlines()) == sorted([
            f"local: removed {dead}",
            f"local: did not signal pid {theirs.pid} of {dead}: another user's process",
            f"local: left {planted} alone: owner nobody, not root",
            f"local: left {link} alone: a symbolic link",
            f"local: left {writable} alone: mode 777, not 700",
            f"local: left {shared}/signoff.\\x1b[2J\\x1b[HX alone: owner nobody, not root"]), p.stdout
        assert victim.poll() is None and theirs.poll() is None  # never signalled
        assert probe.wait(10) == -9  # root's own dead run's probe: its group killed
        assert sorted(shared.iterdir()) == sorted([planted, link, writable, target, esc])
        assert (planted / f".pid.{victim.pid}").exists() and (target / f".pid.{victim.pid}").exists()
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(10)
        shutil.rmtree(shared)


def test_clean_names_a_host_it_cannot_reach(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text("hosts:\n  - {name: gone, address: 127.0.0.1, port: 1}\n")
    p = signoff("clean", "--inventory", str(inv), "--connect-timeout", "5")
    assert p.returncode == 1 and re.fullmatch(r"gone: unreachable: .*refused.*\n", p.stdout), p.stdout


def test_make_accept_calls_the_command():
    p = subprocess.run(["make", "-n", "accept", "PROFILE=h200-8x-nvlink@1", "HOSTS=node[01-02]",
                        "ARGS=--partial -x"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ".venv/bin/signoff run --profile h200-8x-nvlink@1  --hosts node[01-02] --partial -x" in p.stdout, \
        p.stdout


def test_readme_hardware_table_is_the_shipped_profiles():
    """README's "Which profile for which hardware": one row per concrete profile, its own words."""
    from signoff import profiles
    text = (ROOT / "README.md").read_text().split("### Which profile for which hardware", 1)[1]
    table = re.search(r"\n(\|.*\n)+", text).group(0).strip().splitlines()[2:]  # the first table's rows
    rows = [re.split(r"(?<!\\)\|", ln)[1:-1] for ln in table]
    got = {r[4].strip(" `"): [c.strip() for c in r[:4]] for r in rows}
    want = {}
    for name in profiles.available():
        p = profiles.load(name)
        if not p.abstract:
            hw = p.hardware
            model = f"`{hw['gpu_model']}`".replace("|", "\\|") if hw.get("gpu_model") else "any, or none"
            if hw.get("pci_ids"):  # the ids that tell the class where NVML names it generically
                model += f" (PCI {', '.join(hw['pci_ids'])})"
            want[name] = [p.description, model, str(hw.get("gpu_count") or "any"), hw.get("interconnect")]
    assert got == want


def copy_of_the_clone(dst: Path) -> Path:
    """What `git clone` gives plus this tree's uncommitted changes: no venv, history, reports."""
    shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(
        ".venv", ".git", "reports", "build", "*.egg-info", "__pycache__", ".ruff_cache", ".whl"))
    return dst


def installed(clone: Path, venv: Path) -> tuple[Path, str]:
    """`pip install` of a copy of the clone (at `clone`) into a fresh venv at `venv`, as a user
    installs it; returns the venv's python and its site-packages. No download: the venv reaches
    this venv's packages through a .pth file, pip builds without isolation and installs no deps."""
    src = copy_of_the_clone(clone)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin/python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-build-isolation", "--no-index", str(src)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return py, site


@pytest.mark.install
def test_installed_outside_the_repository(tmp_path):
    """`pip install <clone>` into a fresh venv, then the command in a directory of its own: the
    sheet comes from the package, the report goes to ./reports, and nothing around the venv (a
    pytest.ini, a conftest.py, a git repository) leaks in. No download: installed()."""
    work = tmp_path / "work"
    py, site = installed(tmp_path / "clone", work / "venv")
    # a user's project around the venv: none of it may reach the run
    (work / "pytest.ini").write_text("[pytest]\naddopts = --no-such-option\n")
    (work / "conftest.py").write_text("raise SystemExit('the conftest.py of the current directory ran')\n")
    for git in (["init", "-q"], ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
                                "--allow-empty", "-m", "theirs"]):
        subprocess.run(["git", "-C", str(work), *git], check=True)
    exe = (str(work / "venv/bin/signoff"),)
    where = subprocess.run([py, "-c", "import signoff.paths as p; print(p.checkout(), p.root())"],
                           capture_output=True, text=True, cwd=work).stdout.split()
    assert where == ["None", f"{site}/signoff/_sheet"]

    p = signoff("list", "profiles", exe=exe, cwd=work)
    assert p.returncode == 0 and re.search(r"(?m)^local +The local machine", p.stdout), p.stderr
    p = signoff("plan", "--profile", "local", exe=exe, cwd=work)
    assert p.returncode == 0 and "hosts: 1 from default" in p.stdout, p.stderr
    assert re.search(r"(?m)^  storage_read_seq +storage +storage_read_seq >= 0\.05 GB/s "
                     r"\[thresholds/local\.yaml\]$", p.stdout)
    assert not (work / "reports").exists()

    p = signoff("run", "--profile", "local", "--only", "health", "--partial", *LOCK_WAIT, exe=exe, cwd=work)
    made = list((work / "reports").glob("2*"))
    assert p.returncode == 0 and len(made) == 1, p.stdout[-3000:] + p.stderr[-2000:]
    doc = json.loads((made[0] / "results.json").read_text())
    assert doc["verdict"] == "PASS" and doc["meta"]["profile"] == "local"
    health = [e.criterion for e in catalog.checks() if e.file == "health"]
    assert sorted(r["criterion"] for r in doc["results"]) == sorted(health)
    assert doc["meta"]["suite_version"] == "0.1.0"  # not `git describe` of the repository around it
    assert (made[0] / "report.html").exists() and not list(Path(site).rglob("reports"))


def test_plan_says_a_reruns_verdict_is_the_whole_sheets(tmp_path):
    """Issue 51 item 19: under --rerun, plan said "INCOMPLETE unless --partial", and the rerun then
    gave the whole sheet's PASS (its verdict merges the earlier run's results: signoff/rerun.py).
    Plan says what happens; a rerun of a run that judged a part of the sheet stays INCOMPLETE."""
    earlier = tmp_path / "a"
    earlier.mkdir()
    doc = {"verdict": "FAIL", "meta": {"run": "r1"}, "results": [
        {"test": "acceptance/test_versions.py::test_version_parity[node02]", "status": "FAIL"}]}
    (earlier / "results.json").write_text(json.dumps(doc))
    p = signoff("plan", "--hosts", "node[01-04]", "--profile", "h200-8x-nvlink", "--rerun", str(earlier),
                "--no-contact", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "INCOMPLETE" not in p.stdout, p.stdout
    assert ("  the verdict is the whole sheet's: run r1's results with these checks measured again (no "
            "--partial needed)") in p.stdout, p.stdout
    doc["meta"]["partial"] = "40 checks of the sign-off sheet not judged"
    (earlier / "results.json").write_text(json.dumps(doc))
    p = signoff("plan", "--hosts", "node[01-04]", "--profile", "h200-8x-nvlink", "--rerun", str(earlier),
                "--no-contact", cwd=tmp_path)
    assert ("  run r1 judged a part of the sheet: this rerun's verdict, merged with it, is INCOMPLETE unless "
            "--partial is given") in p.stdout, p.stdout


def test_plan_estimates_only_what_runs_on_these_hosts_and_a_total(tmp_path):
    """Issue 51 item 19: on GPU-less hosts plan said DCGM "about 15 min" and a 5-min soak, both
    N.A. in the run (2 min): a GPU-only family costs no time there, and a total is given. Asked
    for real (this machine, no GPU: the local profile)."""
    from signoff import plan
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"defaults: {{python: {sys.executable}}}\nhosts:\n  - {{name: here, address: local}}\n")
    p = signoff("plan", "--inventory", str(inv), "--profile", "local", *LOCK_WAIT, cwd=tmp_path)
    est = p.stdout.split("long measurements (their own time; start-up, retries and the other checks come "
                         "on top):\n", 1)[1].splitlines()
    est = [x for x in est[:next((i for i, x in enumerate(est) if not x.startswith("  ")), len(est))]]
    assert "  dcgm: N.A. on these hosts (no GPU on any): no time" in est, p.stdout
    assert "  soak: N.A. on these hosts (no GPU on any): no time" in est, p.stdout
    assert not any("15 min" in x or "5 min of load" in x for x in est), est
    total = [x for x in est if x.startswith("  total: ")]
    assert total and "min" not in total[0], est  # storage's seconds, not 20 min
    # the total: each line's own time, its notes and what follows ' of ' left out
    assert plan.seconds("multi-node all-reduce: the 1M-4M sweep (and all-to-all) over 3 hosts (3 ranks): at "
                        "least 12 s of --collective-timeout 600 s (8 collectives a size)") == 12
    assert plan.seconds("storage reads: seq 1 s, small 1 s, aggregate 2 s (a shared filesystem: 3 s)") == 4
    assert plan.seconds("dcgm: dcgmi diag -r 3 on every GPU host at once: about 15 min (NVIDIA's figure for "
                        "r3; timeout 30 min)") == 900
    assert plan.total_line(["host pairs: 3 pairs in 3 rounds of 5 s: 15 s", "soak: 5 min of load on every "
                            "host at once (profile x)", "multi-node all-reduce: the sweep's time unknown"]) \
        == "total: at least 5 min 15 s of these measurements (1 of unknown time)"
