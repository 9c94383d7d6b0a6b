"""Checkpoint save and restore for real over SSH on lab hosts (CPU, gloo's hosts): one run of
`pytest acceptance/` whose three hosts each show one outcome: lab1 saves below a floor set far
above what any disk here reaches (FAIL checkpoint_save; its restore and read-back PASS), lab2's
storage path is read-only (N.A., nothing written), lab3's file has a byte flipped after its
fsync (a fault injected by the probe, SIGNOFF_CHECKPOINT_CORRUPT: checkpoint_intact FAILs naming
host, file and tensor). The passing run is tests/test_walkthrough.py's (the whole sheet, 4 hosts)."""

from __future__ import annotations

import sys

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py

FLOOR = 1000  # GB/s: no disk of this VM comes near (0.06-0.19 GB/s measured: docs/measurements.md)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=3) as lab:
        yield lab


def test_fake_corrupting_disk_and_slow_save_fail_by_name_readonly_writes_nothing(lab, tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides={
        h: {"storage_path": str(store), **extra} for h, extra in (
            ("lab1", {}), ("lab2", {"storage_readonly": True}),
            ("lab3", {"env": {"SIGNOFF_CHECKPOINT_CORRUPT": "1"}}))})
    prof = tmp_path / "slow.yaml"
    prof.write_text(f"extends: {ROOT}/tests/profiles/lab.yaml\ncriteria:\n  checkpoint_save:\n"
                    f"    min: {FLOOR}\n    unit: GB/s\n    source: 'test: above any disk here'\n")
    rc, res, out = accept(tmp_path, "acceptance/test_checkpoint.py", "--inventory", str(inv),
                          "--profile", str(prof))
    r = by_key(res)
    assert rc == 1, out
    for h in ("lab1", "lab3"):  # a save below the floor FAILs with its figure and the path
        save = r[("checkpoint_save", h)]
        assert save["status"] == "FAIL", save["message"]
        assert save["message"].startswith(f"{h}: torch.save and fsync of a "), save["message"]
        assert str(store) in save["message"]
        assert f"expected >= {FLOOR} GB/s" in save["message"] and "likely cause: a slow or shared disk" \
            in save["message"], save["message"]
        assert save["details"]["fsynced"] and save["details"]["device"] == "cpu"
        assert 0 < save["measured"] < FLOOR / 10
        # the cover's cost line: said of the slowest host, the same on both
        assert "checkpoint every 30 min costs " in save["note"] and "% of the run on the slowest of 2 hosts" \
            in save["note"], save["note"]
    assert r[("checkpoint_restore", "lab1")]["status"] == "PASS", r[("checkpoint_restore", "lab1")]["message"]
    assert r[("checkpoint_intact", "lab1")]["status"] == "PASS", r[("checkpoint_intact", "lab1")]["message"]
    assert r[("checkpoint_intact", "lab1")]["measured"] == 0
    # lab3: the flipped byte is found, by host, file and tensor; nothing else differs
    bad = r[("checkpoint_intact", "lab3")]
    assert bad["status"] == "FAIL" and bad["measured"] == 1, bad["message"]
    assert bad["message"].startswith(f"lab3: {store}/.signoff-"), bad["message"]
    assert "/checkpoint.pt: tensor model.0." in bad["message"] and "1 of its" in bad["message"] \
        and "bytes differ" in bad["message"], bad["message"]
    assert "likely cause: the disk or filesystem under" in bad["message"]
    assert "SIGNOFF_CHECKPOINT_CORRUPT" in bad["details"]["injected"]
    # lab2: read-only, nothing written, each check N.A. saying so
    for c in ("checkpoint_save", "checkpoint_restore", "checkpoint_intact"):
        na = r[(c, "lab2")]
        assert na["status"] == "N.A." and "is read-only in this run" in na["message"], na["message"]
    assert not list(store.iterdir()), "checkpoint files left behind"
    assert "Checkpoint save and restore" in (tmp_path / "report" / "report.html").read_text()
