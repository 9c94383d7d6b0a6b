"""The soak's streaming path for real: lines reach the controller while the probe still runs
(LocalTransport and SSH to lab hosts), every host soaks at once, the samples reach the host's
file before the probe ends and results.json keeps them when the run is cut short (or rebuilt
from the files when the controller is killed); and the GPU-less host's
verdict under a GPU profile and under `local`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from lab import SSHD, Lab
from test_lab_acceptance import accept, by_key

from signoff import inventory
from signoff.fleet import Fleet, HostSession
from signoff.inventory import LOCAL, Host
from signoff.results import Results, rebuild
from signoff.results import load as load_results
from signoff.soak.run import SoakRunner
from signoff.transport import LocalTransport

# Stands in for signoff/soak/probe_soak.py: the same line protocol, no GPU. SOAK_MARK names its
# processes so that a test can tell whether one survived.
FAKE_PROBE = textwrap.dedent("""\
    import json, sys, time
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    n, dt = int(float(args["--duration"]) / float(args["--interval"])), float(args["--interval"])
    def out(d):
        print(json.dumps(d), flush=True)
    out({"type": "header", "gpus": [{"index": 0, "name": "FAKE"}, {"index": 1, "name": "FAKE"}],
         "started": time.time()})
    for k in range(n + 1):
        out({"type": "sample", "t": k * dt, "temp": [40 + k, 41 + k], "mem_temp": [35, 36],
             "power": [690.0, 688.5], "sm_clock": [1755, 1740], "reasons": [4, 4],
             "util": [100, 100], "tflops": [700.0, 698.0], "ecc_corr": [0, 0], "ecc_unc": [0, 0]})
        if k == 2:
            out({"type": "event", "event": "xid", "t": k * dt, "gpu": 1, "xid": 79, "source": "nvml"})
        time.sleep(dt)
    out({"probe": "soak", "samples": n + 1, "xid": [], "xid_readable": True, "gpu_errors": {}})
""")


@pytest.fixture
def fake_probe(tmp_path, monkeypatch):
    d = tmp_path / "probes"
    d.mkdir()
    (d / "soak.py").write_text(FAKE_PROBE)
    monkeypatch.setattr("signoff.families.probes", lambda: {"soak": d / "soak.py"})
    return d


def plan(duration, interval):
    """Shorter than a real soak may be (soak.plan's limits): the runner does not care."""
    return {"duration": duration, "warmup": 0.0, "interval": interval, "matrix": 64, "notes": []}


def live(path):
    """results.json's soak section as load() reads it back (the samples from soak/<host>.jsonl)."""
    return load_results(path).get("soak", {})


def logged(report_dir):
    """The soak's entries in results.jsonl so far, per host, in order."""
    out: dict = {}
    for line in (report_dir / "results.jsonl").read_text().splitlines():
        c = json.loads(line)
        if c["type"] == "live" and c["section"] == "soak":
            out.setdefault(c["name"], []).append(c["value"])
    return out


def samples(report_dir, name):
    path = report_dir / "soak" / f"{name}.jsonl"
    if not path.exists():
        return []
    return [m for m in map(json.loads, path.read_text().splitlines()) if m.get("type") == "sample"]


# ------------------------------------------------ transport

def test_local_stream_hands_over_each_line_as_it_is_printed():
    t = LocalTransport(Host(name="ctl", address=LOCAL))
    got = []
    start = time.monotonic()
    r = t.run_stream("for i in 1 2 3; do echo line$i; sleep 0.4; done; echo err >&2; exit 3", 10,
                     lambda line: got.append((line, time.monotonic() - start)))
    took = time.monotonic() - start
    assert [g[0] for g in got] == ["line1", "line2", "line3"]
    assert took - got[0][1] > 0.6  # the first line came while the command still ran
    assert (r.rc, r.stdout, r.stderr) == (3, "line1\nline2\nline3\n", "err\n")


def test_local_stream_overrun_is_killed_and_keeps_only_the_tail():
    t = LocalTransport(Host(name="ctl", address=LOCAL))
    got = []
    start = time.monotonic()
    # 3 s, not 1: beside the suite a 1 s bound once ended the shell before seq printed a line
    # (0 of 5000 got, fresh clone dc30391); the sleep still overruns it by 27 s
    r = t.run_stream("seq 1 5000; sleep 30", 3, got.append)
    assert r.timed_out and time.monotonic() - start < 10
    assert len(got) == 5000 and r.stdout.splitlines()[-1] == "5000"
    assert len(r.stdout.splitlines()) == 200  # a 24 h stream costs no memory


# ------------------------------------------------ runner, local host

def test_samples_stream_to_the_host_file_and_results_json_gets_them_at_the_end(fake_probe, tmp_path):
    fleet = Fleet(inventory.local_inventory(), lock_wait=300)  # beside other local runs
    res = Results(tmp_path / "results.json", {})
    start = (tmp_path / "results.json").read_text()
    runner = SoakRunner(fleet, plan(3, 0.15), tmp_path, res)
    try:
        runner.start(["localhost"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(samples(tmp_path, "localhost")) < 3:
            time.sleep(0.1)
        assert samples(tmp_path, "localhost")[0]["temp"] == [40, 41]
        assert not runner._futures["localhost"].done()  # the probe is still going
        # results.jsonl says the state, not the samples (they are in the host's file)
        mid = logged(tmp_path)["localhost"]
        assert [m["state"] for m in mid] == ["starting", "running"] and "series" not in mid[-1]
        assert mid[-1]["file"] == "soak/localhost.jsonl"
        assert (tmp_path / "results.json").read_text() == start  # no whole-document rewrite
        hs = runner.wait("localhost")
    finally:
        runner.close()
        fleet.close()
    assert hs.state == "done" and hs.doc["samples"] == 21 and len(hs.series) == 21
    assert hs.events[0]["xid"] == 79
    res.finish()
    end = live(tmp_path / "results.json")["localhost"]
    assert end["state"] == "done" and end["samples"] == 21 and end["max"]["temp"] == [60, 61]
    assert len(end["series"]) == 21 and end["series"][0]["temp"] == [40, 41]
    assert len(logged(tmp_path)["localhost"]) == 3  # starting, running, done: no more
    # results.json points to the host's file instead of holding the samples; load() reads back
    # exactly the ones the run kept (its last results.jsonl entry)
    raw = json.loads((tmp_path / "results.json").read_text())["soak"]["localhost"]
    assert "series" not in raw and raw["file"] == "soak/localhost.jsonl"
    assert end == logged(tmp_path)["localhost"][-1]
    lines = (tmp_path / "soak" / "localhost.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 21 + 1 + 1  # header, samples, event, result
    assert json.loads(lines[-1])["type"] == "result"


def test_a_killed_soak_is_rebuilt_from_the_host_files(fake_probe, tmp_path):
    fleet = Fleet(inventory.local_inventory(), lock_wait=300)  # beside other local runs
    res = Results(tmp_path / "results.json", {})
    runner = SoakRunner(fleet, plan(30, 0.05), tmp_path, res)
    try:
        runner.start(["localhost"])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(samples(tmp_path, "localhost")) < 30:
            time.sleep(0.1)
        # the controller dies here (SIGKILL): no close(), no finish(); what is on disk remains
        doc = rebuild(tmp_path)
    finally:
        runner.close()
        fleet.close()
    got = doc["soak"]["localhost"]
    on_disk = samples(tmp_path, "localhost")
    assert got["state"] == "killed" and "killed" in got["error"]
    assert got["samples"] >= 30 and got["samples"] <= len(on_disk)
    assert len(got["series"]) == got["samples"] and got["series"][0]["temp"] == [40, 41]
    assert got["max"]["temp"][0] == 40 + got["samples"] - 1 and got["events"][0]["xid"] == 79
    assert doc["verdict"] == "INCOMPLETE" and doc["meta"]["killed"]


def test_long_soaks_keep_every_nth_sample_in_results_json(fake_probe, tmp_path):
    fleet = Fleet(inventory.local_inventory(), lock_wait=300)  # beside other local runs
    res = Results(tmp_path / "results.json", {})
    runner = SoakRunner(fleet, plan(1, 0.002), tmp_path, res, keep=50)
    try:
        runner.start(["localhost"])
        hs = runner.wait("localhost")
    finally:
        runner.close()
        fleet.close()
    res.finish()
    end = live(tmp_path / "results.json")["localhost"]
    assert len(hs.series) == 501  # all of them for the judgement
    assert 50 <= len(end["series"]) <= 100 and end["every_nth_sample_kept"] == 8
    assert [s["t"] for s in end["series"][:2]] == [0.0, 0.016]
    assert end == logged(tmp_path)["localhost"][-1]  # every 8th, read back from soak/localhost.jsonl


# ------------------------------------------------ runner, SSH lab: all hosts at once, interrupted

@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if os.geteuid() != 0 or not os.path.exists(SSHD):
        pytest.skip("lab needs root and sshd")
    with Lab(tmp_path_factory.mktemp("soaklab"), n_hosts=2) as lab:
        yield lab


@pytest.mark.lab
def test_every_host_soaks_at_once_and_an_interrupted_soak_keeps_its_samples(lab, fake_probe,
                                                                           tmp_path):
    inv = inventory.load(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable))
    fleet = Fleet(inv)
    res = Results(tmp_path / "results.json", {})
    runner = SoakRunner(fleet, plan(60, 0.1), tmp_path, res)
    runner.start(["lab1", "lab2"])
    deadline = time.monotonic() + 90  # the first call on a host connects and copies the probes
    while time.monotonic() < deadline and not all(
            len(samples(tmp_path, n)) >= 3 for n in ("lab1", "lab2")):
        time.sleep(0.1)
    assert all(len(samples(tmp_path, n)) >= 3 for n in ("lab1", "lab2")), "no samples in 90 s"
    both = logged(tmp_path)
    assert {n: h[-1]["state"] for n, h in both.items()} == {"lab1": "running", "lab2": "running"}
    wd = {n: s.workdir for n, s in fleet.sessions.items()}
    # what Ctrl-C does: the runner gives up, the fleet's cleanup kills the probes on the hosts
    runner.close()
    fleet.close()
    res.finish(interrupted=True)
    end = live(tmp_path / "results.json")
    for name in ("lab1", "lab2"):
        assert end[name]["samples"] >= 3 and end[name]["state"] in ("interrupted", "error")
        assert len(end[name]["series"]) == end[name]["samples"]
        assert len((tmp_path / "soak" / f"{name}.jsonl").read_text().splitlines()) >= 4
    left = subprocess.run(["pgrep", "-f", "soak.py --duration 60"], capture_output=True, text=True)
    mine = [p for p in left.stdout.split() if any(_cwd(p).startswith(w) for w in wd.values())]
    assert mine == [], "soak probes survived the cleanup"


N_WIDE = 66  # past the 64 threads the soak's pool used to hold: hosts 65, 66 came in a second wave
SOAK_S = 8


@pytest.mark.lab
def test_66_fake_gpu_hosts_have_their_soak_started_at_once(fake_probe, tmp_path, monkeypatch):
    """66 lab hosts (sshd each), the fake soak probe (no GPU here): every host's soak is
    started within a second by the controller; the probes' own start stamps (the hosts
    share this machine's clock) are measured and reported."""
    if os.geteuid() != 0 or not os.path.exists(SSHD):
        pytest.skip("lab needs root and sshd")
    called: dict[str, float] = {}
    real = HostSession.probe_stream

    def stamped(self, *args, **kw):
        called[self.host.name] = time.monotonic()
        return real(self, *args, **kw)
    monkeypatch.setattr(HostSession, "probe_stream", stamped)
    with Lab(tmp_path / "lab", n_hosts=N_WIDE) as wide:
        inv = inventory.load(wide.write_inventory(tmp_path / "inv.yaml", python=sys.executable))
        fleet = Fleet(inv)
        res = Results(tmp_path / "results.json", {})
        names = [h.name for h in inv.hosts]
        runner = SoakRunner(fleet, plan(SOAK_S, 0.5), tmp_path, res)
        try:
            # Connected, probe in place, as after the run's sysinfo (which comes before the
            # soak). The hosts share this filesystem: their temp dirs are made here, since 66
            # mktemp scans of one shared /tmp for leftovers cost O(hosts^2) forks.
            for n in names:
                wd = tmp_path / "wd" / n
                wd.mkdir(parents=True)
                (wd / "soak.py").write_text(FAKE_PROBE)
                fleet.sessions[n].workdir = str(wd)
            with ThreadPoolExecutor(N_WIDE) as pool:
                warm = dict(zip(names, pool.map(lambda n: fleet.sessions[n].run("true", 120), names)))
            assert all(r.ok for r in warm.values()), {n: r.rc for n, r in warm.items() if not r.ok}
            t0, m0 = time.time(), time.monotonic()
            runner.start(names)
            ended = {n: runner.wait(n) for n in names}
        finally:
            runner.close()
            fleet.close()
    assert {n: hs.state for n, hs in ended.items()} == {n: "done" for n in names}
    # the controller: every host's probe call made at once (a capped pool made 65, 66 wait
    # for the first soak to end, SOAK_S later)
    # Every call in one wave: a host left to a second wave starts SOAK_S (8 s) late. Alone on
    # this 2-core machine the 66 calls came within 0.19-0.6 s of start(); with another test
    # file beside it (make test runs two at once) up to 1.7 s: the bound is half of SOAK_S.
    late = {n: round(t - m0, 2) for n, t in called.items() if t - m0 > SOAK_S / 2}
    assert len(called) == N_WIDE and not late, f"soaks started in a second wave: {late}"
    # The hosts: each probe stamps its own start. On this 2-core machine the 66 probes' starts
    # spread over ~16 s (about 4 a second, the same with the runner's calls made within 0.6 s):
    # 66 SSH exec requests, sshd sessions and Python start-ups share the CPU with the
    # controller's 66 streams, so the spread measures the machine, not the runner, and is
    # reported, not bounded. The runner-side start above is what a capped pool breaks.
    started = {n: hs.header["started"] for n, hs in ended.items()}
    print(f"soak: probe calls within {max(called.values()) - m0:.3f} s of start(); probes started "
          f"{min(started.values()) - t0:.2f} s after it, spread "
          f"{max(started.values()) - min(started.values()):.2f} s")
    assert all(t >= t0 for t in started.values())


def _cwd(pid: str) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


@pytest.mark.lab
def test_ssh_stream_arrives_line_by_line(lab, tmp_path):
    inv = inventory.load(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable))
    fleet = Fleet(inv)
    got = []
    start = time.monotonic()
    try:
        r = fleet.sessions["lab1"].t.run_stream(
            "for i in 1 2 3; do echo l$i; sleep 0.5; done", 10,
            lambda line: got.append((line, time.monotonic() - start)))
    finally:
        fleet.close()
    assert [g[0] for g in got] == ["l1", "l2", "l3"] and r.rc == 0
    assert got[1][1] - got[0][1] > 0.3  # not delivered in one piece at the end


# ------------------------------------------------ GPU-less host: the verdict depends on the profile

@pytest.fixture
def local_inv(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump({"hosts": [{"name": "ctl", "address": "local",
                                            "python": sys.executable}]}))
    return p


CRITERIA = ("soak_gpu_temp", "soak_mem_temp", "soak_throttle", "soak_clock_stability",
            "soak_gemm_tflops", "soak_gemm_straggler", "soak_errors")


def test_gpu_less_host_fails_every_soak_check_under_a_gpu_profile(local_inv, tmp_path):
    rc, res, out = accept(tmp_path, "-k", "test_soak", "--inventory", str(local_inv),
                          "--profile", "h200-8x-nvlink@4", "--lock-wait", "300", timeout=420)
    assert rc == 1, out
    r = by_key(res)
    for c in CRITERIA:
        assert r[(c, "ctl")]["status"] == "FAIL", r[(c, "ctl")]
        assert r[(c, "ctl")]["message"].startswith("ctl: no NVIDIA GPU")
    assert res["verdict"] == "FAIL" and "soak" not in res  # nothing was soaked


def test_gpu_less_host_is_not_applicable_under_local(local_inv, tmp_path):
    rc, res, out = accept(tmp_path, "-k", "test_soak", "--inventory", str(local_inv),
                          "--profile", "local", "--lock-wait", "300", timeout=420)  # ctl: this machine
    r = by_key(res)
    assert {r[(c, "ctl")]["status"] for c in CRITERIA} == {"N.A."}, out
    assert res["verdict"] == "INCOMPLETE" and rc == 3  # N.A. alone is never a pass
