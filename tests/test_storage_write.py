"""Storage writes: the write probe on this machine's disk (fio and the built-in writer), its
read-back naming a corrupted byte's file and offset, its free-space refusal, the aggregate of a
one-pass write of every host at once, and every GPU class's write thresholds."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import profiles
from signoff.storage import judge

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "signoff" / "storage" / "probe_storage_write.py"


def _module():
    spec = importlib.util.spec_from_file_location("probe_storage_write_t", PROBE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def probe(state: Path, *args: str) -> dict:
    state.mkdir(exist_ok=True)
    p = subprocess.run([sys.executable, str(PROBE), *args], cwd=state, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.splitlines()[-1])


def _args(tmp_path, workload="seq", **kw):
    return argparse.Namespace(workload=workload, bs="1M", jobs=2, iodepth=4, size="8M", files=8,
                              file_size="64K", start_at=0, runid="t", state_dir=str(tmp_path), **kw)


def _corrupt(path: str, offset: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        old = os.pread(fd, 1, offset)
        os.pwrite(fd, bytes([old[0] ^ 0xFF]), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("workload", ["seq", "small"])
def test_the_built_in_read_back_counts_each_wrong_byte_and_names_its_file_and_offset(tmp_path, workload):
    m = _module()
    d = tmp_path / "w"
    d.mkdir()
    a = _args(tmp_path, workload)
    files = [(str(d / rel), size) for rel, size in m.layout(a)]
    seed = b"seed"
    direct, _ = m.direct_write_ok(str(d))
    doc = m.builtin_write(files, a, direct, seed)
    assert doc["bytes"] == sum(s for _, s in files)
    assert m.builtin_verify(files, direct, seed, str(d))["bad_bytes"] == 0
    _corrupt(files[1][0], 12345)
    _corrupt(files[1][0], 40000)
    v = m.builtin_verify(files, direct, seed, str(d))
    assert v["bad_bytes"] == 2 and v["bytes_checked"] == doc["bytes"], v
    assert v["mismatches"] == [{"file": files[1][0], "offset": 12345, "bytes": 2}], v


@pytest.mark.skipif(not shutil.which("fio"), reason="fio not installed")
def test_fio_read_back_names_the_4k_block_a_corrupted_byte_is_in(tmp_path):
    m = _module()
    d = tmp_path / "w"
    d.mkdir()
    a = _args(tmp_path)
    files = [(str(d / rel), size) for rel, size in m.layout(a)]
    doc = m.fio_write(files, a)
    assert doc["tool"] == "fio" and doc["bytes"] == 8 << 20 and doc["intervals"], doc
    assert m.fio_verify(files, a)["bad_bytes"] == 0
    _corrupt(files[0][0], 3 * 4096 + 100)
    v = m.fio_verify(files, a)
    assert v["bad_bytes"] == 4096 and v["mismatches"] == [
        {"file": files[0][0], "offset": 3 * 4096, "bytes": 4096}], v
    assert not [f for f in os.listdir(tmp_path) if f.startswith("fiow-")]  # its job files gone


@pytest.mark.parametrize("tool", ["fio", "builtin"])
def test_a_write_is_read_back_and_removed_and_clean_leaves_nothing(tmp_path, tool):
    if tool == "fio" and not shutil.which("fio"):
        pytest.skip("fio not installed")
    data = tmp_path / "data"
    data.mkdir()
    common = ["--path", str(data), "--runid", "r1", "--host", "h1", "--tool", tool]
    c = probe(tmp_path / "s", "claim", *common, "--need", "16M", "--need-files", "40")
    assert c["dir"] == str(data / ".signoff-r1-h1-write") and c["free"] > 0, c
    assert probe(tmp_path / "s", "look", *common)["writers"] == [".signoff-r1-h1-write"]
    for w in ("seq", "small"):
        doc = probe(tmp_path / "s", "write", *common, "--workload", w, "--size", "16M", "--jobs", "2",
                    "--files", "32", "--file-size", "64K")
        assert doc["tool"] == tool and doc["gbps"] > 0 and doc["removed"], doc
        assert doc["verify"]["bad_bytes"] == 0 and doc["verify"]["bytes_checked"] == doc["bytes_per_pass"]
        assert os.listdir(data / ".signoff-r1-h1-write") == []
    probe(tmp_path / "s", "clean", *common)
    assert os.listdir(data) == [] and os.listdir(tmp_path / "s") == []


def test_too_little_free_space_is_refused_naming_path_free_and_needed_bytes(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    doc = probe(tmp_path / "s", "claim", "--path", str(data), "--runid", "r1", "--host", "h1",
                "--need", "100T")
    assert doc["error"].startswith(f"refusing to write 100.0 TiB (109951162777600 bytes) to {data}: "), doc
    assert re.search(r": [\d.]+ [KMGT]iB \(\d+ bytes\) free of .*, and 10% \(\d+ bytes\) must stay free "
                     r"\(--storage-min-free\)", doc["error"]), doc
    assert os.listdir(data) == []


def test_the_aggregate_write_is_every_byte_over_the_time_until_the_last_host_is_done():
    """A host 10x slower drags the checkpoint: the aggregate is all bytes over its end, each
    host's share its own rate; hosts that did not start together show in the coverage."""
    got = judge.makespan({"a": [[0.0, 1.0, 1e9]], "b": [[0.0, 1.0, 1e9]], "c": [[0.0, 10.0, 1e9]]})
    assert got["aggregate"] == pytest.approx(0.3) and got["seconds"] == 10.0
    assert got["per_host"] == pytest.approx({"a": 1.0, "b": 1.0, "c": 0.1})
    assert got["coverage"] == 1.0 and judge.starved({h: round(v, 3) for h, v in got["per_host"].items()},
                                                    0.5) == ["c read 0.1"]
    late = judge.makespan({"a": [[0.0, 1.0, 1e9]], "b": [[1.2, 2.2, 1e9]]})
    assert late["coverage"] == pytest.approx(1 - 1.2 / 2.2) and late["coverage"] < judge.MIN_OVERLAP


def test_every_gpu_class_judges_the_writes_against_a_cited_figure():
    """nvidia-base gives every class the write checks: a figure with its public source (or its
    stated derived: rule); the read-back tolerates no wrong byte."""
    names = [p.stem for p in (ROOT / "thresholds").glob("*.yaml") if p.stem not in ("local", "nvidia-base")]
    assert len(names) > 10
    for n in names:
        prof = profiles.load(n)
        for c in ("storage_write_seq", "storage_write_small", "storage_write_aggregate"):
            t = prof.criteria[c]
            assert t.value > 0 and t.unit == "GB/s" and "togethercomputer/skills PR 46" in t.source, (n, c)
        assert prof.criteria["storage_write_small"].provisional.startswith("derived: ")
        v = prof.criteria["storage_write_verify"]
        assert v.value == 0 and not v.ok(1) and v.ok(0), n


def test_plan_lists_the_writes_and_their_time():
    from signoff import storage
    prof = profiles.load("h200-8x-nvlink")
    lines = storage.estimate(None, prof, {"storage_write_seq", "storage_write_verify"}, [])
    assert lines == ["storage writes: seq 8.59 GB (<= 16 s at the floor, read back), small 0.537 GB "
                     "(<= 1 s at the floor, read back), aggregate 8.59 GB (<= 3 s at the floor, read back) "
                     "(each written once, read back, removed; a shared filesystem's hosts write alone one "
                     "after another: up to alone_sample of them)"], lines


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_write_to_a_ram_backed_path_is_flagged_and_its_check_errors(tmp_path):
    """tmpfs: the files live in the page cache, no storage figure (the check ERRORs on `ram`)."""
    import tempfile
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        common = ["--path", shm, "--runid", "r1", "--host", "h1"]
        probe(tmp_path / "s", "claim", *common, "--need", "4M")
        doc = probe(tmp_path / "s", "write", *common, "--workload", "seq", "--size", "4M", "--jobs", "1")
        assert doc["ram"] is True and doc["fs"]["fstype"] == "tmpfs" and doc["verify"]["bad_bytes"] == 0, doc
        probe(tmp_path / "s", "clean", *common)
        assert os.listdir(shm) == []


def test_a_figure_below_a_lab_floor_keeps_its_digits():
    """local's small-write floor is 0.0001 GB/s (a tenth of the loaded lab's worst): a figure
    rounded to 3 decimals would judge a healthy 0.0004 as 0, a FAIL; below 0.1 GB/s a figure keeps
    3 significant digits, above it the 3 decimals it always had."""
    assert judge.figure(0.000412345) == 0.000412 and judge.figure(2.7123e-06) == 2.71e-06
    assert judge.figure(0.0123456) == 0.0123 and judge.figure(1.23456) == 1.235
    assert judge.figure(12.3456) == 12.346
    t = profiles.load("local").threshold("storage_write_small")
    assert t.ok(judge.figure(0.0004)) and not t.ok(judge.figure(0.00004))


def _write(m, tmp_path, monkeypatch, fstype="ext4", direct=False, drop=True):
    """cmd_write on this disk with the built-in writer, O_DIRECT as given, the filesystem's type
    as given; drop=False: the page-drop a no-op (as ZFS's ARC ignores fadvise), mincore real."""
    data = tmp_path / "data"
    data.mkdir()
    a = _args(tmp_path, path_resolved=str(data), host="h1", min_free="1%", tool="builtin")
    a.size, a.jobs = "2M", 1
    os.mkdir(m.write_dir(a))
    monkeypatch.setattr(m, "direct_write_ok", lambda d: (direct, "" if direct else "test: buffered"))
    real = m.st.fs_info
    monkeypatch.setattr(m.st, "fs_info", lambda p: {**real(p), "fstype": fstype})
    if not drop:
        monkeypatch.setattr(m.st, "drop_pages", lambda paths: None)
    return m.cmd_write(a)


def test_a_buffered_read_back_the_page_cache_still_holds_is_no_disk_read_back(tmp_path, monkeypatch):
    """The drop's result is checked (mincore): pages fadvise left, or ZFS (its ARC, O_DIRECT
    ignored before 2.3), say the read-back read memory; the dropped buffered write reads the disk."""
    from signoff.storage import writes
    m = _module()
    held = _write(m, tmp_path, monkeypatch, drop=False)["verify"]
    assert held["bad_bytes"] == 0 and held["cache"]["disk"] is False, held
    assert held["cache"]["resident_fraction"] == 1.0 and "stayed in the page cache" in held["cache"]["note"]
    assert writes.from_memory([("seq", held)]).startswith("seq write: 100% of the files' pages stayed")
    shutil.rmtree(tmp_path / "data")
    monkeypatch.undo()  # the drop real again
    zfs = _write(m, tmp_path, monkeypatch, fstype="zfs", direct=True)["verify"]["cache"]
    assert zfs["disk"] is False and "its own ARC" in zfs["note"], zfs
    shutil.rmtree(tmp_path / "data")
    dropped = _write(m, tmp_path, monkeypatch)["verify"]
    assert dropped["cache"]["disk"] is True and dropped["cache"]["resident_fraction"] < m.MAX_RESIDENT, \
        dropped
    assert writes.from_memory([("seq", dropped)]) is None
    # an older or broken probe that says nothing of the cache: never a PASS
    assert writes.from_memory([("small", {k: v for k, v in dropped.items() if k != "cache"})]) == \
        "small write: the probe said nothing of what the cache held"


def test_a_disk_corrupting_every_block_is_counted_by_block_with_its_first_offset(tmp_path):
    """Every block wrong: compared 4 KiB at a time (no byte-by-byte pass over the whole file),
    the first EXACT bad blocks counted exactly, the rest as whole blocks, said as an estimate."""
    m = _module()
    d = tmp_path / "w"
    d.mkdir()
    files = [(str(d / "seq.0"), 1 << 20)]
    m.builtin_write(files, _args(tmp_path), False, b"seed")
    data = bytearray(Path(files[0][0]).read_bytes())
    for k in range(100, 110):  # block 0: 10 bytes wrong, from offset 100
        data[k] ^= 0xFF
    for off in range(4096, 1 << 20, 4096):  # every other block: its byte 7
        data[off + 7] ^= 0xFF
    Path(files[0][0]).write_bytes(bytes(data))
    v = m.builtin_verify(files, False, b"seed", str(d))
    blocks = 256
    est = (blocks - m.EXACT) * 4096
    assert v["bad_blocks"] == blocks and v["bad_bytes_estimated"] == est, {k: v[k] for k in v if k != "how"}
    assert v["bad_bytes"] == 10 + (m.EXACT - 1) + est and v["bytes_checked"] == 1 << 20
    assert v["mismatches"] == [{"file": files[0][0], "offset": 100, "bytes": v["bad_bytes"]}]
    assert "%d bytes of the rest counted as whole blocks" % est in v["how"], v["how"]


def test_the_cleanup_follows_a_symlinked_storage_path(tmp_path):
    """A SIGKILLed probe's files under a storage_path that is a symlink: the cleanup's find
    descends into the directory it names (find -H), removing this run's entries, no other."""
    import shlex

    from signoff.storage.run import CLEAN
    real = tmp_path / "real"
    (real / ".signoff-r1-h1-write" / "seq").mkdir(parents=True)
    (real / ".signoff-r1-h1-write" / "seq" / "seq.0").write_bytes(b"x")
    (real / ".signoff-r2-h1").mkdir()
    (tmp_path / "link").symlink_to(real)
    subprocess.run(["sh", "-c", CLEAN.format(path=shlex.quote(str(tmp_path / "link")),
                                             pattern=shlex.quote(".signoff-r1-*"))], check=True, timeout=30)
    assert os.listdir(real) == [".signoff-r2-h1"] and (tmp_path / "link").is_symlink()
