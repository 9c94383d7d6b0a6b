"""Health checks for real on lab hosts (CPU only): the same seeded fp32 GEMM and reduction on
every host agree, one host's result perturbed (a fault injection, SIGNOFF_SDC_PERTURB) fails
it by name; the data interfaces' real veth counters, read before and after real traffic."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

import pytest
from lab import Lab
from test_lab_acceptance import _only, accept, by_key
from test_network_lab import LAB, inventory

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
HOSTS = ("lab1", "lab2", "lab3")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=3) as lab:
        yield lab


def test_healthy_lab_sdc_agrees_and_counters_do_not_grow(lab, tmp_path):
    # the host pairs' iperf3 runs are the traffic between the two snapshots (their own verdicts
    # are test_network_lab's)
    _, res, out = accept(tmp_path, "acceptance/test_health.py", "acceptance/test_network.py", "-k",
                         "sdc or error_counters or net_pair", "--inventory", inventory(lab, tmp_path),
                         "--profile", LAB)
    r = by_key(res)
    assert all(r[("net_pair_bandwidth", p)]["details"].get("gbps") for p in ("lab1->lab2", "lab2->lab3")), out
    for h in HOSTS:
        sdc = r[("sdc", h)]
        assert sdc["status"] == "PASS", sdc["message"]
        assert sdc["details"]["hosts_compared"] == list(HOSTS) and sdc["details"]["ops"] == ["gemm_fp32",
                                                                                              "reduce_fp32"]
        c = r[("error_counters", h)]
        assert c["status"] == "PASS", c["message"]
        veth = lab.host(h).veth_host
        assert veth in c["expected"] and c["details"]["after"]["net"][veth] is not None


def test_one_host_computing_wrongly_fails_by_name(lab, tmp_path):
    """lab3's fp32 GEMM result has one bit flipped (fault injection): lab3 FAILs, named
    against the majority lab1, lab2; they PASS."""
    inv = inventory(lab, tmp_path, lab3={"env": {"SIGNOFF_SDC_PERTURB": "gemm_fp32"}})
    rc, res, out = accept(tmp_path, "acceptance/test_health.py", "-k", "sdc", "--inventory", inv,
                          "--profile", LAB)
    r = by_key(res)
    assert rc == 1, out
    assert r[("sdc", "lab1")]["status"] == r[("sdc", "lab2")]["status"] == "PASS"
    bad = r[("sdc", "lab3")]
    assert bad["status"] == "FAIL" and "gemm_fp32 result" in bad["message"], bad["message"]
    assert "on lab1, lab2" in bad["message"] and "reduce_fp32" not in bad["message"].split(" (expected")[0]
    assert bad["details"]["injected"] == "gemm_fp32"
    # the one sick host's evidence (issue 54 item 1), collected from it after the run; none of the others'
    rd = tmp_path / "report"
    ev = rd / "evidence"
    assert (rd / "exclude.hostlist").read_text() == "lab3\n"
    assert sorted(os.listdir(ev)) == ["lab3", "lab3.tar.gz"]
    folder = sorted(f"lab3/{p.relative_to(ev / 'lab3').as_posix()}" for p in (ev / "lab3").rglob("*")
                    if p.is_file())
    with tarfile.open(ev / "lab3.tar.gz") as tar:
        assert sorted(m.name for m in tar.getmembers()) == folder
    assert {"lab3/index.md", "lab3/index.json", "lab3/records.json", "lab3/sysinfo.json",
            "lab3/run/silent-data-corruption.json"} <= set(folder), folder
    assert [(r["criterion"], r["host"]) for r in json.loads((ev / "lab3" / "records.json").read_text())] == \
        [("sdc", "lab3")]
    index = json.loads((ev / "lab3" / "index.json").read_text())
    assert index["why"][0].startswith("FAIL sdc: gemm_fp32 result"), index["why"]
    fresh = {p["name"]: p for p in index["fresh"]}  # the probe ran on lab3: each piece said, none missing
    assert set(fresh) == {"kernel-log", "nvidia-smi-q", "lspci", "nvidia-bug-report"}, index["fresh"]
    assert fresh["nvidia-smi-q"]["status"] == fresh["nvidia-bug-report"]["status"] == "absent"  # no driver
    assert fresh["kernel-log"]["status"] in ("ok", "failed")
    assert ("lab3/fresh/kernel-log.txt" in folder) == (fresh["kernel-log"]["status"] == "ok")
    assert list(res["meta"]["evidence"]["hosts"]) == ["lab3"]
    assert "lab3: evidence evidence/lab3.tar.gz (folder evidence/lab3/)" in (rd / "report.md").read_text()
    listed = (rd / "MANIFEST.sha256").read_text()  # written after the evidence: it lists every file
    assert all(f"  evidence/{f}\n" in listed for f in folder) and "  evidence/lab3.tar.gz\n" in listed


def test_two_hosts_that_disagree_are_both_errors_never_the_healthy_one_failed(lab, tmp_path):
    """Two hosts of a class, lab2's GEMM perturbed (fault injection): a 1-1 vote names no
    culprit, so neither FAILs as corrupt; both ERROR saying why (a third host decides)."""
    inv = _only(Path(inventory(lab, tmp_path, lab2={"env": {"SIGNOFF_SDC_PERTURB": "gemm_fp32"}})),
                ["lab1", "lab2"])
    rc, res, out = accept(tmp_path, "acceptance/test_health.py", "-k", "sdc", "--inventory", str(inv),
                          "--profile", LAB)
    r = by_key(res)
    for h in ("lab1", "lab2"):
        sdc = r[("sdc", h)]
        assert sdc["status"] == "ERROR", (h, sdc["message"])
        assert "gemm_fp32: no majority among the hosts of its class (lab1=" in sdc["message"]
        assert "neither is judged; add a third host of the class" in sdc["message"]
