"""The checkpoint family without hosts: the probe run for real on this machine's CPU and disk
(saved, fsync'ed, dropped from the cache, read back bit for bit, removed; a byte flipped on the
disk found by tensor; too little space refused before anything is written; SIGTERM mid-run
leaves nothing), why every tensor is compared (torch.load takes a flipped byte silently), the
model's size, the cost line, the profile's `checkpoint:` section and plan's line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signoff import InputError, profiles
from signoff.checkpoint import judge, merge_section, section

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "signoff" / "checkpoint" / "probe_checkpoint.py"
SMALL = ["--layers", "3", "--d-model", "32", "--heads", "2", "--ffn", "64"]


def probe(tmp_path, *args, env=None) -> dict:
    p = subprocess.run([sys.executable, str(PROBE), "--path", str(tmp_path), "--host", "h1", *SMALL, *args],
                       capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_probe_saves_fsyncs_reads_back_every_tensor_and_removes_its_files(tmp_path):
    doc = probe(tmp_path, "--need", "1000000")
    assert "error" not in doc, doc
    assert doc["device"] == "cpu" and doc["fsynced"] and doc["file"].startswith(f"{tmp_path}/.signoff-")
    assert doc["file"].endswith("-h1/checkpoint.pt") and doc["removed"] == [os.path.dirname(doc["file"])]
    assert not list(tmp_path.iterdir())  # nothing left
    # 3 layers of 12 parameters, each with AdamW's step, exp_avg and exp_avg_sq
    assert doc["tensors"] == 3 * 12 * 4 and doc["intact"] == {"compared": 144, "differing": {}, "missing": [],
                                                               "extra": []}
    assert doc["params"] == 3 * judge.layer_params(32, 64)  # the size arithmetic is torch's count
    assert doc["state_bytes"] == doc["params"] * judge.STATE_BYTES_PER_PARAM + 3 * 12 * 4  # + fp32 steps
    assert doc["bytes"] > doc["state_bytes"] and doc["save"]["gbps"] > 0 and doc["restore"]["gbps"] > 0
    assert doc["cache"]["dropped"] and doc["cache"]["resident"] <= judge.MAX_RESIDENT, doc["cache"]
    assert judge.count(doc) == 0 and judge.differing(doc) == [] and judge.not_disk(doc, "restore") is None


def test_fake_corrupting_disk_is_found_by_tensor(tmp_path):
    """SIGNOFF_CHECKPOINT_CORRUPT (tests only) flips one byte of the file after its fsync."""
    doc = probe(tmp_path, env={"SIGNOFF_CHECKPOINT_CORRUPT": "1"})
    assert "record checkpoint/data/0" in doc["injected"]
    assert doc["intact"]["differing"] == {"model.0.self_attn.in_proj_weight": f"1 of its {32 * 3 * 32 * 4} "
                                                                             f"bytes differ"}
    assert judge.count(doc) == 1
    assert judge.differing(doc) == [f"{doc['file']}: tensor model.0.self_attn.in_proj_weight differs "
                                    f"(1 of its 12288 bytes differ)"]
    assert not list(tmp_path.iterdir())


def test_too_little_space_is_refused_before_anything_is_written(tmp_path):
    doc = probe(tmp_path, "--need", str(50 << 20), "--min-free", "100000T")
    assert doc["error"].startswith(f"refusing to write a 52.4 MB checkpoint to {tmp_path}: ") \
        and " free of " in doc["error"] and "must stay free (--storage-min-free)" in doc["error"] \
        and " needed; free space, set a smaller checkpoint.size_gb" in doc["error"], doc["error"]
    assert "torch" not in doc and doc["removed"] == [] and not list(tmp_path.iterdir())


def test_sigterm_mid_run_removes_what_it_wrote(tmp_path):
    p = subprocess.Popen([sys.executable, str(PROBE), "--path", str(tmp_path), "--layers", "300", "--d-model",
                          "64", "--heads", "2", "--ffn", "128"], stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not list(tmp_path.iterdir()) and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    assert list(tmp_path.iterdir()), "the probe made no directory"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    doc = json.loads(out)
    assert p.returncode == 128 + signal.SIGTERM and doc["error"] == "interrupted by signal 15", doc
    assert doc["removed"] and not list(tmp_path.iterdir())


def test_torch_load_takes_a_flipped_byte_silently(tmp_path):
    """Why checkpoint_intact compares every tensor (nvidia-base.yaml's source): torch's zip
    records carry a CRC-32 that torch.load does not check."""
    torch = pytest.importorskip("torch")
    f = tmp_path / "c.pt"
    torch.save({"w": torch.arange(256, dtype=torch.float32)}, f)
    data = bytearray(f.read_bytes())
    at = data.index(torch.tensor([100.0]).numpy().tobytes())
    data[at] ^= 0x01
    f.write_bytes(bytes(data))
    back = torch.load(f, weights_only=True)["w"]
    assert back[100].item() != 100.0 and torch.equal(back[:100], torch.arange(100, dtype=torch.float32))


def test_size_from_the_training_step_or_the_profile():
    train = {"layers": 12, "d_model": 2048, "heads": 16, "ffn": 8192}
    s = judge.sizing(train, None)  # the H200 anchor's model: 604 M parameters (docs/h200.md)
    assert s["layers"] == 12 and round(s["params"] / 1e6) == 604 and s["bytes"] == s["params"] * 12
    big = judge.sizing(train, 12)  # bench/checkpoint_gpu.sh's 12 GB: 20 of the same layers
    assert big["layers"] == 20 and 11.5e9 < big["bytes"] < 12.5e9 and big["from"] == "checkpoint.size_gb 12"
    assert judge.sizing(train, 0.001)["layers"] == 1  # never no layer
    local = profiles.load("local")
    assert section(local)["size_gb"] == 0.008 and judge.sizing({**train, "d_model": 64, "ffn": 128}, 0.008)[
        "layers"] == 20


def test_cost_line_is_the_slowest_hosts():
    docs = {h: {"bytes": 7_250_000_000, "save": {"seconds": s}, "restore": {"seconds": 4.0}}
            for h, s in (("gpu1", 5.0), ("gpu2", 21.6), ("gpu3", 9.0))}
    slow = judge.slowest({**docs, "gpu4": ValueError("no figure")})
    assert slow == "gpu2" and round(judge.cost(21.6, 30), 4) == 0.0119
    assert judge.cost_line(slow, docs[slow], 30, 3) == (
        "a 7.25 GB checkpoint every 30 min costs 1.186 % of the run on the slowest of 3 hosts (gpu2): "
        "21.6 s to save it (fsync'ed), 4 s to read it back after a failure")


def test_ram_backed_path_or_a_cached_file_is_no_disk_figure():
    doc = {"path": "/dev/shm", "fs": {"fstype": "tmpfs"}, "cache": {"dropped": False, "note": "x"}}
    assert "RAM-backed" in judge.not_disk(doc, "save") and "RAM-backed" in judge.not_disk(doc, "restore")
    doc = {"path": "/data", "fs": {"fstype": "zfs"}, "cache": {"dropped": False, "note": "zfs caches in ARC"}}
    assert judge.not_disk(doc, "save") is None
    assert judge.not_disk(doc, "restore") == ("the page cache was not emptied of the file before the read "
                                              "(zfs caches in ARC)")


def test_checkpoint_section_checked():
    assert merge_section({}, {"size_gb": 12, "interval_min": 60}, "p") == {"size_gb": 12, "interval_min": 60,
                                                                            "steps": 2}
    for bad, said in (({"size": 1}, "p.size: unknown key"),
                      ({"size_gb": 0}, "p.size_gb: expected a number > 0"),
                      ({"interval_min": True}, "p.interval_min: expected a number > 0"),
                      ({"steps": 0}, "p.steps: expected an integer >= 1"), ([], "p: expected a mapping")):
        with pytest.raises(InputError, match=said):
            merge_section({}, bad, "p")


def test_plan_line_says_size_and_time_at_the_floors(tmp_path):
    line = judge.plan_line(profiles.load("h200-8x-nvlink"))
    assert line == ("checkpoint: a 7.252 GB torch.save (the training step's model) fsync'ed and read back on "
                    "every host at once (at most, at the floors 1 and 2 GB/s, the model's build and steps on "
                    "top): 11 s")
    p = tmp_path / "none.yaml"  # a class whose floors a site removed: no time to say
    p.write_text("extends: local\ncriteria:\n  checkpoint_save: {uncalibrated: 'no figure'}\n")
    assert judge.plan_line(profiles.load(str(p))).endswith(": of unknown time (no checkpoint_save / "
                                                           "checkpoint_restore floor)")


def test_shipped_beside_the_storage_probe_it_refuses_as_the_storage_probes_do(tmp_path):
    """Shipped (families.shipped(): checkpoint.py beside storage.py, run with -I), the probe
    loads the storage probe by its path and refuses a path with its words (one resolve, not two)."""
    import shutil

    from signoff import families
    ship = tmp_path / "ship"
    ship.mkdir()
    for name in ("checkpoint.py", "storage.py"):
        shutil.copy(families.shipped()[name], ship / name)
    (tmp_path / "afile").write_text("x")
    p = subprocess.run([sys.executable, "-I", str(ship / "checkpoint.py"), "--path", str(tmp_path / "afile")],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert json.loads(p.stdout)["error"] == f"storage path {tmp_path / 'afile'} is not a directory", p
