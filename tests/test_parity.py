"""signoff.parity: version parity across hosts by majority."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from signoff.versions.parity import (
    FIELDS,
    deviations,
    fields,
    majority,
    odd_cells,
    same_machine,
    same_machines,
    versions,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"


@pytest.fixture
def make_facts():
    def make(torch="2.5.1", driver="580.95.05", python="3.11.9") -> dict:
        return {"nvidia": {"driver": driver, "cuda_driver": "13.0"},
                "torch": {"version": torch, "cuda": "12.4", "nccl": "2.21.5"},
                "python": python, "os": "Ubuntu 22.04", "kernel": "6.8.0"}
    return make


def test_versions_reads_every_field(make_facts):
    v = versions(make_facts())
    assert set(v) == set(FIELDS)
    assert (v["torch"], v["nvidia_driver"], v["nccl"]) == ("2.5.1", "580.95.05", "2.21.5")


def test_majority():
    assert majority({"a": 1, "b": 1, "c": 2}) == (1, True)
    assert majority({"a": 1, "b": 2}) == (None, False)
    assert majority({}) == (None, True)


def test_one_odd_host_is_named_with_its_field(make_facts):
    per_host = {"n1": versions(make_facts()), "n2": versions(make_facts(torch="2.4.0")),
                "n3": versions(make_facts())}
    assert deviations(per_host, "n1") == [] and deviations(per_host, "n3") == []
    assert deviations(per_host, "n2") == ["torch 2.4.0 differs from 2.5.1 on 2 hosts n[1,3]"]
    assert odd_cells(per_host) == {("n2", "torch")}


def test_two_differing_hosts_have_no_majority(make_facts):
    per_host = {"a": versions(make_facts(driver="570.1")), "b": versions(make_facts())}
    for h in per_host:
        assert deviations(per_host, h) == [
            "NVIDIA driver has no majority value (570.1 on 1 host a; 580.95.05 on 1 host b)",
            "GPU driver branch has no majority value (570 on 1 host a; 580 on 1 host b)"]
    assert odd_cells(per_host) == {(h, f) for h in "ab" for f in ("nvidia_driver", "driver_branch")}


def test_identical_hosts_have_no_deviation(make_facts):
    per_host = {h: versions(make_facts()) for h in ("a", "b", "c", "d")}
    assert all(deviations(per_host, h) == [] for h in per_host)
    assert odd_cells(per_host) == set()


def test_unknown_everywhere_is_not_a_deviation():
    facts = {"nvidia": {}, "torch": {}}  # no GPU, no torch: every field reads None
    per_host = {h: versions(facts) for h in ("a", "b", "c")}
    assert set(per_host["a"].values()) == {None}
    assert all(deviations(per_host, h) == [] for h in per_host)
    assert odd_cells(per_host) == set()


def test_same_machine_recorded_h200s_with_a_shared_gpu_injected():
    """Two recorded H200 machines (reports/examples) differ; one GPU UUID copied from one to
    the other (injected: two entries reaching one machine) is named."""
    a, b = (json.loads((EXAMPLES / n / "results.json").read_text())["hosts"]["localhost"]
            for n in ("h200-2x", "h200-1x"))
    assert same_machine(a, b) == []
    b = copy.deepcopy(b)
    b["nvidia"]["gpus"][0]["uuid"] = a["nvidia"]["gpus"][1]["uuid"]
    assert same_machine(a, b) == ["GPU GPU-4c3dab12-3a9b-bb74-546d-ef6a19dca265"]


def test_same_machine_needs_machine_id_boot_and_netns_equal():
    m = {"machine_id": "m1", "boot_id": "b1", "netns": "net:[1]"}
    one = {"machine": m, "nvidia": {"gpus": []}}
    assert same_machine(one, copy.deepcopy(one)) == ["machine-id m1, boot b1, network namespace net:[1]"]
    for key, other in (("boot_id", "b2"), ("netns", "net:[2]"), ("machine_id", "m2")):
        # a cloned image (own boot), a lab namespace of one kernel (own netns): other machines
        assert same_machine(one, {"machine": {**m, key: other}}) == []
    assert same_machine({}, {}) == []  # unknown is never "the same"


def test_parity_at_1000_hosts_folds_the_others_and_is_linear(make_facts):
    """300 of 1,000 hosts on another driver: each odd host's message names the majority's 700
    hosts folded, not one by one; the table is computed once for every host's check."""
    ok, odd = versions(make_facts()), versions(make_facts(driver="570.124.06"))
    per_host = {f"node{i:04d}": odd if i <= 300 else ok for i in range(1, 1001)}
    table = fields(per_host)
    assert deviations(per_host, "node0001", table) == [
        "NVIDIA driver 570.124.06 differs from 580.95.05 on 700 hosts node[0301-1000]",
        "GPU driver branch 570 differs from 580 on 700 hosts node[0301-1000]"]
    assert deviations(per_host, "node0999", table) == []


def test_same_machines_names_each_shared_identity_once_with_its_hosts():
    m = {"machine_id": None, "boot_id": "b1", "netns": "net:[1]"}
    facts = {f"lab{i}": {"machine": m, "nvidia": {"gpus": [{"uuid": f"GPU-{i}"}]}} for i in (1, 2, 3)}
    facts["lab4"] = {"machine": {**m, "boot_id": "b4"}, "nvidia": {"gpus": [{"uuid": "GPU-1"}]}}
    facts["lab5"] = ValueError("unreachable")  # an error, not a machine
    same = same_machines(facts)
    assert same["lab2"] == ["machine-id unknown, boot b1, network namespace net:[1] on 3 hosts lab[1-3]"]
    assert same["lab1"] == ["machine-id unknown, boot b1, network namespace net:[1] on 3 hosts lab[1-3]",
                            "GPU GPU-1 on 2 hosts lab[1,4]"]
    assert same["lab4"] == ["GPU GPU-1 on 2 hosts lab[1,4]"] and "lab5" not in same
