"""Storage checks run for real over SSH on lab hosts that share this machine's filesystem:
the aggregate read of every host at once, bad paths, a full filesystem, read-only mode (a
dataset large enough, and one too small), a RAM-backed path, a path with ';', ':' and a space,
a filesystem out of inodes, and Ctrl-C in the middle of a read."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, _only, accept, by_key
from test_storage import marked, snapshot

from signoff import profiles
from signoff.hostlist import fold
from signoff.results import load as load_results
from signoff.storage.judge import MIN_OVERLAP

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py


ODD = "odd;dir:with spaces"  # fio splits names on ':' and ends a value at ';'


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """Mounts first (lab hosts get a copy of the mount table when their sshd starts), then
    the lab: a read-only dataset (under a name with ';', ':' and a space) as large as the
    `local` profile asks, a smaller one, a 16 MiB tmpfs (too small), a 256 MiB tmpfs (RAM),
    and a 512 MiB ext4 with 64 inodes (bytes to spare, inodes not)."""
    base = tmp_path_factory.mktemp("storage")
    d = {k: base / k for k in ("data", "few", "full", "ram", "shared", "inodes", "slow")}
    d["ro"] = base / f"ro {ODD}"
    for p in d.values():
        p.mkdir()
    for data, big, small in ((d["data"], 3, 520), (d["few"], 1, 10)):
        (data / "sub").mkdir()
        for i in range(big):
            (data / f"big{i}.bin").write_bytes(os.urandom(48 << 20 if small > 10 else 4 << 20))
        for i in range(small):
            (data / "sub" / f"img{i}.jpg").write_bytes(os.urandom(20000 + 53 * i))
    img = base / "inodes.img"
    with open(img, "wb") as f:
        f.truncate(512 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-N", "64", "-F", str(img)], check=True)
    slow = base / "slow.img"  # its own loop device: the writes' slowed disk (blkio throttle)
    with open(slow, "wb") as f:  # sparse; room for local's claim (128 MiB aggregate + 10 % free)
        f.truncate(512 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(slow)], check=True)
    mounts = [["--bind", "-o", "ro", str(d["data"]), str(d["ro"])],
              ["-t", "tmpfs", "-o", "size=16m", "tmpfs", str(d["full"])],
              ["-t", "tmpfs", "-o", "size=256m", "tmpfs", str(d["ram"])],
              ["-o", "loop", str(img), str(d["inodes"])],
              ["-o", "loop", str(slow), str(d["slow"])]]
    done = []
    try:
        for m in mounts:
            subprocess.run(["mount", *m], check=True)
            done.append(m[-1])
        with Lab(base / "lab", n_hosts=3) as lab:
            yield lab, d
    finally:
        for m in reversed(done):
            subprocess.run(["umount", m], check=False)


def aggregate(res) -> dict:
    return next(v for (c, _), v in by_key(res).items() if c == "storage_read_aggregate")


def test_every_host_reads_the_shared_directory_at_once(env, tmp_path):
    lab, d = env
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
    for _ in range(2):
        rc, res, out = accept(tmp_path, "-k", "storage", "--partial", "--inventory", str(inv),
                              "--profile", "local", "--storage-path", str(d["shared"]),
                              "--storage-tool", "fio")
        # The lab hosts' disk is this VM's one disk, read and written by the other xdist workers'
        # tests at the same moment: one fio attempt once stalled 30x (0.043 then 1.26 GB/s, fresh
        # clone cb7d80e), FAILed as unstable as it should on a cluster. The stall is this
        # machine's, not the lab's hosts': one run more, which must PASS.
        bad = [x for x in (res or {"results": []})["results"] if x["status"] != "PASS"]
        if not bad or any(x["status"] != "FAIL" or "unstable:" not in x["message"] for x in bad):
            break
    # the aggregate write's start together is the load's too: a one-pass 128 MiB write lasts
    # 0.1-0.5 s here, and a loaded machine started one host's fio 0.4 s after the others'
    # (coverage 33 %), an ERROR saying so, as it should be; never a FAIL
    skew = [x for x in (res or {"results": []})["results"] if x["criterion"] == "storage_write_aggregate"
            and x["status"] == "ERROR" and "they did not write at the same moment" in x["message"]]
    assert rc in (0, 2) and res["verdict"] in ("PASS", "ERROR") and \
        all(x["status"] == "PASS" for x in res["results"] if x not in skew), out
    r = by_key(res)
    for h in ("lab1", "lab2", "lab3"):
        for c in ("storage_read_seq", "storage_read_small"):
            x = r[(c, h)]
            assert x["status"] == "PASS", x  # its figure is the load's: judged by the floor only
            assert x["details"]["tool"] == "fio" and x["details"]["path"] == str(d["shared"])
            assert x["details"]["params"]["direct"] and x["details"]["cache"]["defeated"]
    assert r[("storage_read_seq", "lab1")]["details"]["params"]["bs"] == 1 << 20
    assert "aggregate write" in (tmp_path / "report" / "report.html").read_text()
    assert r[("storage_read_small", "lab1")]["details"]["files"] == 512
    agg = aggregate(res)
    assert agg["status"] == "PASS", agg
    det = agg["details"]
    assert sorted(det["per_host_in_window"]) == ["lab1", "lab2", "lab3"]
    assert det["window_s"] > 0 and det["coverage"] >= MIN_OVERLAP, det
    assert agg["measured"] == pytest.approx(sum(det["per_host_in_window"].values()), abs=0.01)
    assert all(abs(o) < 1 for o in det["clock_offsets_s"].values())
    # the writes: this shared path's hosts each write alone, one after another (local's
    # alone_sample 4); every host's bytes read back, none wrong; then the checkpoint pattern
    for c in ("storage_write_seq", "storage_write_small"):
        for h in ("lab1", "lab2", "lab3"):
            x = r[(c, h)]
            assert x["status"] == "PASS" and x["details"]["verify"]["bad_bytes"] == 0, x
            assert x["details"]["written"].startswith("alone, one host after another"), x
        (a0, a1), (b0, b1) = [(r[(c, h)]["details"]["t_start"], r[(c, h)]["details"]["t_end"])
                              for h in ("lab1", "lab2")]
        assert a1 <= b0 or b1 <= a0, (a0, a1, b0, b1)
    # no write beside a read (a read measured while the disk is written is a false figure): every
    # read, alone or all hosts at once, ended before the first write began (one clock: one kernel)
    reads = [(r[(c, h)]["details"]["t_start"], r[(c, h)]["details"]["t_end"])
             for c in ("storage_read_seq", "storage_read_small") for h in ("lab1", "lab2", "lab3")]
    reads += [tuple(x["spans"]) for x in det["per_host"].values()]
    wagg = next(v for (c, _), v in r.items() if c == "storage_write_aggregate")
    writes = [(r[(c, h)]["details"]["t_start"], r[(c, h)]["details"]["t_end"])
              for c in ("storage_write_seq", "storage_write_small") for h in ("lab1", "lab2", "lab3")]
    writes += [tuple(x["spans"]) for x in wagg["details"]["per_host"].values()]
    assert max(b for _, b in reads) <= min(a for a, _ in writes), (reads, writes)
    for h in ("lab1", "lab2", "lab3"):
        v = r[("storage_write_verify", h)]
        assert v["status"] == "PASS" and v["measured"] == 0 and v["details"]["bytes_checked"] > 0, v
    assert wagg["status"] == "PASS" or skew, wagg
    assert sorted(wagg["details"]["per_host_in_window"]) == ["lab1", "lab2", "lab3"]
    assert marked(d["shared"]) == []
    html = (tmp_path / "report" / "report.html").read_text()
    assert "aggregate read" in html and "GB/s in the window" in html


def _windows(r, c, hosts):
    return {h: (r[(c, h)]["details"]["t_start"], r[(c, h)]["details"]["t_end"]) for h in hosts}


def test_a_shared_path_is_read_alone_on_a_sample_and_every_host_gets_an_honest_status(env, tmp_path):
    """The lab hosts share this machine's filesystem: each sees the others' test directories
    in the path. With alone_sample 1 the seq and small reads run alone on lab1 plus the
    slowest share of the aggregate, one after another; the others are N.A. naming the sample,
    their shares judged in the aggregate (which says who was read alone)."""
    lab, d = env
    path = d["shared"] / "sample"
    path.mkdir()
    prof = tmp_path / "sample.yaml"
    # floors of 0.1 MB/s: this test judges who reads alone, not the VM's disk, which stalled
    # once beside the suite (lab1's small files read below 0.05 GB/s, fresh clone de404aa)
    prof.write_text(
        "extends: local\ncriteria:\n"
        "  storage_read_seq: {min: 0.0001, unit: GB/s, source: test, size: 128M, jobs: 2, "
        "iodepth: 8, runtime: 1, alone_sample: 1}\n"
        "  storage_read_small: {min: 0.0001, unit: GB/s, source: test, files: 512, "
        "file_size: 64K, jobs: 4, runtime: 1, alone_sample: 1}\n")
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable)
    rc, res, out = accept(tmp_path, "-k", "storage_read", "--partial", "--inventory", str(inv),
                          "--profile", str(prof), "--storage-path", str(path))
    r, hosts = by_key(res), ("lab1", "lab2", "lab3")
    # the aggregate itself is judged in the test above; on a loaded 2-core machine its start
    # together may miss (an ERROR saying so), which says nothing about the sample
    agg = aggregate(res)
    assert agg["status"] == "PASS" or "did not read at the same moment" in agg["message"], agg
    plans = aggregate(res)["details"]["alone_reads"]
    for c, w in (("storage_read_seq", "seq"), ("storage_read_small", "small")):
        plan = plans[w]
        alone = plan["read_alone"]
        assert plan["at_once"] == [] and set(plan["shared"]) == set(hosts), plan
        assert "holds the test directories of" in plan["shared"]["lab1"]
        assert alone[0] == "lab1" and 1 <= len(alone) <= 2, plan
        (sample,) = plan["sample"].values()
        assert "alone_sample 1 spread over the 3 hosts, plus the slowest share" in sample["how"]
        for h in hosts:
            x = r[(c, h)]
            if h in alone:
                assert x["status"] == "PASS" and x["measured"] > 0, x
                assert x["details"]["read"].startswith("alone, one host after another"), x
            else:  # never a PASS unmeasured
                assert x["status"] == "N.A." and x["measured"] is None, x
                assert f"{h}: shared filesystem ({path} holds the test directories of" in x["message"]
                assert f"read alone on the sample {fold(sample['hosts'])} (" in x["message"], x
                assert "this host's share judged in storage_read_aggregate" in x["message"], x
        if len(alone) == 2:  # alone: one after the other
            (a0, a1), (b0, b1) = _windows(r, c, alone).values()
            assert a1 <= b0 or b1 <= a0, (a0, a1, b0, b1)
    assert sorted(aggregate(res)["details"]["per_host_in_window"]) == list(hosts)
    assert marked(path) == []


def test_hosts_on_their_own_disks_read_at_once(env, tmp_path):
    """Each host's path a directory of its own (no host sees another's test directory, and
    not a network filesystem): every host reads at the same moment, one phase per workload."""
    lab, d = env
    own = {h: d["shared"] / f"own-{h}" for h in ("lab1", "lab2", "lab3")}
    for p in own.values():
        p.mkdir()
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={h: {"storage_path": str(p)} for h, p in own.items()})
    rc, res, out = accept(tmp_path, "-k", "storage_read_seq or storage_read_small", "--partial",
                          "--inventory", str(inv), "--profile", "local")
    r = by_key(res)
    for c in ("storage_read_seq", "storage_read_small"):
        for h in own:
            x = r[(c, h)]
            assert x["status"] == "PASS" and x["details"]["path"] == str(own[h]), x
            assert x["details"]["read"].startswith("at once with the 2 other host(s) on their own"), x
        # a host that missed under load is read again (retry policy) and judged on that reread:
        # said so, and the hosts read once are the ones whose windows must overlap
        once = {h: p for h, p in own.items() if not r[(c, h)]["details"].get("attempts")}
        assert all("after a miss again" in r[(c, h)]["details"]["read"] for h in set(own) - set(once))
        w = _windows(r, c, once).values()
        assert len(w) < 2 or max(a for a, _ in w) < min(b for _, b in w), f"{c}: reads did not overlap: {w}"
    assert all(marked(p) == [] for p in own.values())


def test_a_read_that_misses_is_read_again_and_one_that_passes_or_is_no_figure_is_not(env, tmp_path):
    """Retry policy (attempts: 2): lab1 and lab2 share a path, so each reads alone and, missing
    a sequential threshold beyond any disk, again right away: FAIL, best of 2 attempts with both
    figures; their small-file read passes, measured once. lab3's RAM path is no storage figure:
    an ERROR, never read again, and so is the aggregate it spoils."""
    lab, d = env
    path = d["shared"] / "retry"
    path.mkdir()
    prof = tmp_path / "retry.yaml"
    prof.write_text(
        "extends: local\ncriteria:\n"
        "  storage_read_seq: {min: 10000, unit: GB/s, source: 'test: beyond any disk', attempts: 2, "
        "size: 64M, jobs: 2, iodepth: 4, runtime: 1}\n"
        "  storage_read_small: {min: 0.0001, unit: GB/s, source: test, attempts: 2, files: 256, "
        "file_size: 64K, jobs: 2, runtime: 1}\n"  # passes once on any disk: lab1's missed 0.01 twice
        # when the VM's disk stalled beside the suite (fresh clone, 2026-12-03 13:05)
        "  storage_read_aggregate: {min: 10000, unit: GB/s, per: cluster, node_min: null, source: test, "
        "attempts: 2, runtime: 1}\n")
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        "lab1": {"storage_path": str(path)}, "lab2": {"storage_path": str(path)},
        "lab3": {"storage_path": str(d["ram"])}})
    rc, res, out = accept(tmp_path, "-k", "storage_read", "--inventory", str(inv), "--profile", str(prof))
    assert rc == 1, out
    r = by_key(res)
    for h in ("lab1", "lab2"):
        seq, small = r[("storage_read_seq", h)], r[("storage_read_small", h)]
        # far beyond max_spread of its floor: final at once, saying why (issue 51 item 16)
        assert seq["status"] == "FAIL" and seq["details"]["attempts"] is None, seq
        assert "% below the floor 10000 GB/s, beyond max_spread 10 %: no attempt that agrees with it could " \
               f"pass) = {seq['measured']} GB/s" in seq["message"], seq
        assert seq["details"]["read"].startswith("alone, one host after another"), seq
        assert small["status"] == "PASS" and small["details"]["attempts"] is None, small
        assert "best of" not in small["message"], small
    for c in ("storage_read_seq", "storage_read_small", "storage_read_aggregate"):
        x = r[(c, "lab3" if c != "storage_read_aggregate" else "all hosts")]
        assert x["status"] == "ERROR" and "the page cache could not be bypassed" in x["message"], x
        assert x["details"]["attempts"] is None and "best of" not in x["message"], x
    assert marked(path) == [] and marked(d["ram"]) == []


def test_hosts_on_their_own_disks_that_miss_read_again_at_once(env, tmp_path):
    """Own disks (retry policy, attempts: 2): the hosts that missed read again together, as
    their first read, each FAIL with both attempts."""
    lab, d = env
    own = {h: d["shared"] / f"again-{h}" for h in ("lab1", "lab2", "lab3")}
    for p in own.values():
        p.mkdir()
    prof = tmp_path / "again.yaml"
    prof.write_text(
        "extends: local\ncriteria:\n"
        "  storage_read_seq: {min: 10000, unit: GB/s, source: 'test: beyond any disk', attempts: 2, "
        "size: 64M, jobs: 2, iodepth: 4, runtime: 1}\n")
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                              overrides={h: {"storage_path": str(p)} for h, p in own.items()})
    rc, res, out = accept(tmp_path, "-k", "storage_read_seq", "--inventory", str(inv), "--profile",
                          str(prof))
    for h in own:  # far below the floor: final at once (issue 51 item 16; the reread: tests/test_retry.py)
        x = by_key(res)[("storage_read_seq", h)]
        assert x["status"] == "FAIL" and x["details"]["attempts"] is None, x
        assert ", measured once: " in x["message"], x
        assert x["details"]["read"].startswith("at once with the 2 other host(s) on their own disks")
        assert "after a miss again" not in x["details"]["read"]
    assert all(marked(p) == [] for p in own.values())


def test_bad_path_read_only_mount_and_full_filesystem_are_refused(env, tmp_path):
    lab, d = env
    before = snapshot(d["data"])
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        "lab1": {"storage_path": str(d["shared"] / "nope")},
        "lab2": {"storage_path": str(d["ro"])},
        "lab3": {"storage_path": str(d["full"])}})
    rc, res, out = accept(tmp_path, "-k", "storage", "--inventory", str(inv), "--profile", "local")
    assert rc == 2, out  # ERROR-only: README, Exit codes
    r = by_key(res)
    want = {"lab1": f"lab1: storage path {d['shared'] / 'nope'} does not exist",
            "lab2": f"lab2: storage path {d['ro']} is not writable (read-only mount): pass "
                    "--storage-readonly to measure the files already there without writing",
            "lab3": "lab3: refusing to write "}
    for h, msg in want.items():
        for c in ("storage_read_seq", "storage_read_small"):
            assert r[(c, h)]["status"] == "ERROR" and r[(c, h)]["message"].startswith(msg), r[(c, h)]
    for h, msg in want.items():
        for c in ("storage_write_seq", "storage_write_small", "storage_write_verify"):
            assert r[(c, h)]["status"] == "ERROR" and r[(c, h)]["message"].startswith(msg), r[(c, h)]
    assert r[("storage_write_seq", "lab3")]["message"].startswith(
        f"lab3: refusing to write 128.0 MiB (134217728 bytes) to {d['full']}: 16.0 MiB (16777216 bytes) "
        "free of 16.0 MiB, and 10% (1677721 bytes) must stay free"), r[("storage_write_seq", "lab3")]
    full = r[("storage_read_seq", "lab3")]["message"]
    assert f"to {d['full']}: it would leave 0 B free of 16.0 MiB, below the safe margin" in full
    agg = aggregate(res)
    assert agg["status"] == "ERROR" and all(h in agg["message"] for h in ("lab1", "lab2", "lab3"))
    assert os.listdir(d["full"]) == [] and os.statvfs(d["full"]).f_bfree == \
        os.statvfs(d["full"]).f_blocks, "something was written to the full filesystem"
    assert snapshot(d["data"]) == before


def test_read_only_dataset_is_measured_and_ram_is_not_storage(env, tmp_path):
    lab, d = env
    before = snapshot(d["data"])
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        "lab1": {"storage_path": str(d["ro"]), "storage_readonly": True},
        "lab2": {"storage_path": str(d["ram"])},
        "lab3": {"storage_path": str(d["few"]), "storage_readonly": True}})
    rc, res, out = accept(tmp_path, "-k", "storage", "--inventory", str(inv), "--profile", "local")
    assert rc == 2, out  # ERROR-only: README, Exit codes
    r = by_key(res)
    seq, small = r[("storage_read_seq", "lab1")], r[("storage_read_small", "lab1")]
    assert seq["status"] == "PASS" and seq["details"]["readonly"] and seq["details"]["tool"] == "fio"
    assert seq["details"]["path"] == str(d["ro"]) and seq["details"]["params"]["names_linked"] == 3
    # the dataset's large files hold what the profile asks (128 MiB): 3 x 48 MiB
    assert seq["details"]["files"] == 3 and seq["details"]["bytes_per_pass"] == 144 << 20, seq
    assert small["status"] == "PASS" and small["details"]["tool"] == "builtin"
    assert small["details"]["files"] == 512 and "arbitrary sizes" in small["details"]["fallback"]
    for c in ("storage_read_seq", "storage_read_small"):
        x = r[(c, "lab2")]
        assert x["status"] == "ERROR" and x["measured"] > 0, x
        assert "is not a storage figure: the page cache could not be bypassed (tmpfs is " \
               "RAM-backed" in x["message"]
    # a dataset smaller than the profile asks is not measured: how much is there, and where
    few = {c: r[(c, "lab3")] for c in ("storage_read_seq", "storage_read_small")}
    assert few["storage_read_seq"]["status"] == "ERROR" and few["storage_read_seq"]["message"] == (
        f"lab3: storage path {d['few']} holds 4.0 MiB in 1 file of at least 1.0 MiB; the profile "
        "asks to read 128.0 MiB (size): read-only mode reads only the files already there, so point "
        "it at a larger dataset or lower size"), few
    assert few["storage_read_small"]["status"] == "ERROR" and few["storage_read_small"]["message"] \
        .startswith(f"lab3: storage path {d['few']} holds 11 readable non-empty files; the profile "
                    "asks to read 512 (files)"), few
    agg = aggregate(res)
    assert agg["status"] == "ERROR" and "lab3: storage path" in agg["message"], agg
    # read-only hosts write nothing and say so (never PASS); a RAM path's write is no storage figure
    for h in ("lab1", "lab3"):
        for c in ("storage_write_seq", "storage_write_small", "storage_write_verify"):
            x = r[(c, h)]
            assert x["status"] == "N.A." and x["measured"] is None, x
            assert f"{h}: the inventory's storage_readonly: this run writes nothing to " in x["message"], x
    # the RAM path holds the reads' files: the writes' 128 MiB are refused there (a RAM path's
    # write figure is an ERROR too: tests/test_storage_write.py), never a PASS
    x = r[("storage_write_seq", "lab2")]
    assert x["status"] == "ERROR" and x["message"].startswith("lab2: refusing to write 128.0 MiB"), x
    assert snapshot(d["data"]) == before
    assert marked(d["ram"]) == []


def test_odd_path_is_measured_by_fio_and_inodes_running_out_is_named(env, tmp_path):
    """A shared path with ';', ':' and a space is read by fio on every host; the host whose
    path has no inodes left ERRORs saying so, and so does the aggregate: never a FAIL."""
    lab, d = env
    odd = d["shared"] / ODD
    odd.mkdir()
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        "lab1": {"storage_path": str(odd)}, "lab2": {"storage_path": str(odd)},
        "lab3": {"storage_path": str(d["inodes"])}})
    free = os.statvfs(d["inodes"])
    for _ in range(2):
        rc, res, out = accept(tmp_path, "-k", "storage_read", "--inventory", str(inv), "--profile", "local",
                              "--storage-tool", "fio")
        # the VM's one disk stalled in one attempt (0.011 then 0.771 GB/s, fresh clone 0a77ae6):
        # "unstable" is the right verdict on a cluster and this machine's own: one run more
        failed = [x for x in (res or {"results": []})["results"] if x["status"] == "FAIL"]
        if not failed or any("unstable:" not in x["message"] for x in failed):
            break
    assert rc == 2, out  # ERROR-only: README, Exit codes
    r = by_key(res)
    for h in ("lab1", "lab2"):
        for c in ("storage_read_seq", "storage_read_small"):
            x = r[(c, h)]
            assert x["status"] == "PASS", x  # its figure is the load's: judged by the floor only
            assert x["details"]["tool"] == "fio" and x["details"]["path"] == str(odd), x
            assert x["details"]["params"]["names_linked"] > 0
    for c in ("storage_read_seq", "storage_read_small"):
        x = r[(c, "lab3")]
        assert x["status"] == "ERROR" and x["message"] == (
            f"lab3: refusing to create 516 files in {d['inodes']}: it has "
            f"{free.f_favail} free inodes of {free.f_files} (df -i), and 10% (6) must stay free; "
            "free inodes, use fewer files in the profile, or pass --storage-readonly to measure "
            "existing files"), x
    agg = aggregate(res)
    assert agg["status"] == "ERROR" and agg["message"].startswith(
        "all hosts: the aggregate read needs every host: lab3: refusing to create 516 files"), agg
    assert marked(odd) == [] and marked(d["inodes"]) == []
    assert os.statvfs(d["inodes"]).f_favail == free.f_favail


def test_ctrl_c_during_the_read_leaves_no_files_and_no_probe(env, tmp_path):
    lab, d = env
    shared = d["shared"] / "intr"
    shared.mkdir()
    prof = tmp_path / "long.yaml"
    prof.write_text("extends: local\ncriteria:\n  storage_read_seq: {min: 0.1, unit: GB/s, "
                    "source: test, size: 64M, jobs: 2, iodepth: 4, runtime: 60}\n")
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable), ["lab1", "lab2"])
    rd = tmp_path / "report"
    p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/", "-k", "storage_read",
                          "--report-dir", str(rd), "-p", "no:cacheprovider", "--inventory", str(inv),
                          "--profile", str(prof), "--storage-path", str(shared)],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runid, deadline = None, time.time() + 300  # files written, then the aggregate first (slow under load)
    # the read itself (`storage.py read`, its readers or fio), not the claim or prepare steps before
    # it: one of those, seen then gone, read as a reader (fresh clone 45416c1)
    while time.time() < deadline and not (runid and _readers(runid, reading=True)):
        time.sleep(0.1)
        dirs = sorted(shared.glob(".signoff-*-lab1"))
        runid = dirs[0].name[len(".signoff-"):-len("-lab1")] if dirs else None
    assert runid and _readers(runid, reading=True), "the storage read never started"
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"]
    assert marked(shared) == [], "test files left behind"
    assert _readers(runid) == [], "storage probe still running after Ctrl-C"


def _readers(runid: str, reading: bool = False) -> list[int]:
    """Processes of this run's storage probe (reading: of its read only: the probe's read
    command, its forked readers or fio)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        probe = ("storage.py\0read\0", "storage.py read ") if reading else ("storage.py",)
        if runid in cmd and any(p in cmd for p in probe) or f"fio-{runid}-" in cmd:
            out.append(int(pid))
    return out


@contextlib.contextmanager
def throttled(lab, host: str, path, iops: int = 1):
    """host's sshd (and so every probe it starts) in a blkio cgroup whose writes to the disk
    behind `path` (its own loop device) go at `iops` writes a second: a real slow disk for that
    host, its figures set by the workload's sizes (a write of 32 KiB a second is 0.00003 GB/s)."""
    st = os.stat(path)
    cg = f"/sys/fs/cgroup/blkio/signoff-lab-slow-{os.getpid()}"
    os.mkdir(cg)
    pid = lab.sshd_pid(host)
    try:
        with open(f"{cg}/blkio.throttle.write_iops_device", "w") as f:
            f.write(f"{os.major(st.st_dev)}:{os.minor(st.st_dev)} {iops}")
        with open(f"{cg}/cgroup.procs", "w") as f:
            f.write(str(pid))
        yield
    finally:
        with open("/sys/fs/cgroup/blkio/cgroup.procs", "w") as f:
            f.write(str(pid))
        for _ in range(50):  # its probes' processes leave the cgroup as they end
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)


def corrupting(tmp_path, under) -> dict:
    """The FAKE corrupting disk (tests/fakes/corrupt_writes.c, LD_PRELOAD): this kernel has no
    device-mapper (no dm-flakey); byte 4000 of every write of 4 KiB or more under `under` set
    to 0xff before the kernel gets it, as dm-flakey's `corrupt_bio_byte 4000 w 255 0` would."""
    if not shutil.which("gcc"):  # `make system` installs it: CI never skips this
        from conftest import lab_required
        (pytest.fail if lab_required() else pytest.skip)(
            "gcc is needed to build the fake corrupting disk (LD_PRELOAD): make system")
    so = tmp_path / "corrupt_writes.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    str(Path(__file__).parent / "fakes" / "corrupt_writes.c"), "-ldl"], check=True)
    return {"LD_PRELOAD": str(so), "CORRUPT_UNDER": str(under), "CORRUPT_BYTE": "4000",
            "CORRUPT_VALUE": "255"}


def test_a_slowed_disk_fails_the_writes_and_a_fake_corrupting_disk_fails_verify_naming_host_file_offset(
        env, tmp_path):
    """One run, a fault per host: lab1 healthy; lab2's disk throttled to one write a second (blkio,
    a real limit on its own loop device); lab3 behind the FAKE corrupting disk (LD_PRELOAD, named as
    such: no dm-flakey in this kernel). local's floors, small sizes: lab2 writes each workload in
    2-3 s at 10-40x below its floor, FAILs it and starves the aggregate; lab3's read-back FAILs naming
    the host, the file and the offset; nothing is left. The healthy hosts' figures of a few KiB
    are the load's (PASS in the test above, at local's sizes): judged, not asserted."""
    lab, d = env
    own = {"lab1": d["shared"] / "w-lab1", "lab2": d["slow"], "lab3": d["shared"] / "w-lab3"}
    for p in (own["lab1"], own["lab3"]):
        p.mkdir()
    prof = tmp_path / "small.yaml"  # local's floors; 2 writes of 32 KiB, 2 files of 4 KiB
    prof.write_text("extends: local\ncriteria:\n"
                    "  storage_write_seq: {size: 64K, bs: 32K, jobs: 1}\n"
                    "  storage_write_small: {files: 2, file_size: 4K, bs: 4K, jobs: 1}\n"
                    "  storage_write_aggregate: {size: 64K}\n")
    floor = {c: profiles.load(str(prof)).threshold(c) for c in
             ("storage_write_seq", "storage_write_small", "storage_write_aggregate")}
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        "lab1": {"storage_path": str(own["lab1"])}, "lab2": {"storage_path": str(own["lab2"])},
        "lab3": {"storage_path": str(own["lab3"]), "env": corrupting(tmp_path, own["lab3"])}})
    with throttled(lab, "lab2", d["slow"], iops=1):
        rc, res, out = accept(tmp_path, "-k", "storage_write", "--inventory", str(inv), "--profile",
                              str(prof), "--storage-tool", "fio")
    assert rc == 1, out
    r = by_key(res)
    for c in ("storage_write_seq", "storage_write_small"):
        slow = r[(c, "lab2")]  # the fault at least 10x below the floor (issue 55 item 3's rule)
        assert slow["status"] == "FAIL" and 0 < 10 * slow["measured"] <= floor[c].value, slow
        for h in ("lab1", "lab3"):  # measured and judged (lab3 writes fast: only its bytes are wrong)
            assert r[(c, h)]["status"] in ("PASS", "FAIL") and r[(c, h)]["measured"] > 0, r[(c, h)]
    assert r[("storage_write_verify", "lab1")]["status"] == "PASS"
    assert r[("storage_write_verify", "lab2")]["status"] == "PASS"  # slow, but every byte right
    bad = r[("storage_write_verify", "lab3")]
    assert bad["status"] == "FAIL" and bad["measured"] > 0, bad
    first = bad["details"]["read_back"]["seq"]["mismatches"][0]
    assert first["file"].startswith(f"{own['lab3']}/.signoff-") and first["offset"] % 4096 == 0, first
    assert bad["message"].startswith(f"lab3: {bad['measured']} of ") and \
        f"{first['file']} at offset {first['offset']} (4096 bytes wrong, seq write)" in bad["message"], bad
    agg = next(v for (c, _), v in r.items() if c == "storage_write_aggregate")
    share = agg["details"]["per_host_in_window"]["lab2"]
    node_min = floor["storage_write_aggregate"].extra["node_min"]
    assert agg["status"] == "FAIL" and "below the per-host minimum: " in agg["message"], agg
    assert "lab2 wrote" in agg["message"] and 0 < 10 * share <= node_min, agg
    assert all(marked(p) == [] for p in own.values())


def test_ctrl_c_during_a_write_leaves_no_files_and_no_probe(env, tmp_path):
    """Ctrl-C while lab2 writes to its slowed disk (64 MiB at one write a second: minutes): the run
    ends INCOMPLETE, the write directory is gone and no write probe or fio is left."""
    lab, d = env
    inv = _only(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                                    overrides={"lab2": {"storage_path": str(d["slow"])}}), ["lab2"])
    rd = tmp_path / "report"
    with throttled(lab, "lab2", d["slow"], iops=1):
        p = subprocess.Popen([sys.executable, "-m", "pytest", "acceptance/", "-k", "storage_write_seq",
                              "--report-dir", str(rd), "-p", "no:cacheprovider", "--inventory", str(inv),
                              "--profile", "local", "--storage-tool", "fio"],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            runid = _writing(p, d["slow"], "lab2", rd)
            p.send_signal(signal.SIGINT)
            p.wait(timeout=60)
        finally:
            if p.poll() is None:  # a failed wait: the run is stopped as a user would, then killed
                p.send_signal(signal.SIGINT)
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"]
    assert marked(d["slow"]) == [], "test files left behind"
    assert _writers(runid) == [], "storage write probe still running after Ctrl-C"


def _writing(p, path, host: str, rd, within: float = 300) -> str:
    """The run id once `host`'s write is under way in `path` (its files there and its write probe
    running), polled: a loaded machine takes longer to get there, never a figure. The run ending
    first (a refusal, an error) fails at once with what its checks said."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for w in path.glob(f".signoff-*-{host}-write"):
            runid = w.name[len(".signoff-"):-len(f"-{host}-write")]
            if list(w.glob("seq/seq.*")) and _writers(runid):
                return runid
        if p.poll() is not None:
            said = [f"{x['criterion']} {x['status']}: {x['message']}" for x in
                    load_results(rd / "results.json")["results"]] if (rd / "results.json").exists() else []
            pytest.fail(f"the run ended (exit {p.returncode}) before {host}'s write was under way: {said}")
        time.sleep(0.1)
    pytest.fail(f"{host}'s write was not under way within {within:.0f} s")


def _writers(runid: str) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
        except OSError:
            continue
        if runid in cmd and "storage_write.py" in cmd or f"fiow-{runid}-" in cmd:
            out.append(int(pid))
    return out
