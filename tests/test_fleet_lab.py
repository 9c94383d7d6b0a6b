"""Judgement against the fleet, for real on 8 lab hosts (iperf3 over veth): every link shaped
with tc to 200 Mbit/s and one host's to 160 (80 %), all far above the absolute floor. Only the
fleet's median can tell that host from the others."""

from __future__ import annotations

import sys

import pytest
from lab import Lab
from test_lab_acceptance import ROOT, accept, by_key

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
LAB = str(ROOT / "tests" / "profiles" / "lab.yaml")
SLOW = "lab3"


def test_host_at_80_percent_of_the_fleet_fails_as_an_outlier_and_the_others_pass(tmp_path):
    prof = tmp_path / "floor.yaml"
    # 5 s a pair: at 2 s a healthy pair read 0.162 Gb/s beside the walk-through (a fresh clone
    # at 2089d3e), 0.81 of its 200 Mb/s where its peers read 0.18-0.19, below the 0.9 x median
    # floor; at 5 s beside two busy loops, 0.188-0.191 (3 runs) and the slow host's 0.151-0.153
    prof.write_text(f"extends: {LAB}\ncriteria:\n  net_pair_bandwidth: {{min: 0.02, unit: Gb/s, streams: 2, "
                    "duration: 5, attempts: 1, fleet_min: 0.9, source: 'below the shaped 0.16-0.2 Gb/s'}\n")
    with Lab(tmp_path / "lab", n_hosts=8) as lab:
        for h in lab.hosts:
            lab.shape(h, "160mbit" if h.name == SLOW else "200mbit")
        inv = lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable,
                                  overrides={h.name: {"data_iface": h.veth_host} for h in lab.hosts})
        rc, res, out = accept(tmp_path, "acceptance/test_network.py", "-k", "pair",
                              "--inventory", str(inv), "--profile", str(prof))
    assert rc == 1, out
    pairs = {k[1]: v for k, v in by_key(res).items() if k[0] == "net_pair_bandwidth"}
    assert len(pairs) == 8, pairs  # the ring
    for pid, r in pairs.items():
        fleet = r["details"]["fleet"]
        assert fleet["n"] == 8 and r["measured"] > 0.02, r  # every pair clears the absolute floor
        if SLOW in pid.split("->"):
            assert r["status"] == "FAIL" and fleet["status"] == "outlier", r
            assert "a fleet outlier, below 0.9 x the median" in r["message"], r["message"]
            assert "of 8 pairs of its class in this run" in r["message"], r["message"]
            assert "the absolute threshold (>= 0.02 Gb/s" in r["message"], r["message"]
            assert f"likely cause: host {SLOW}: every pair of it is slow" in r["message"], r["message"]
        else:
            assert r["status"] == "PASS" and fleet["status"] == "within", r
