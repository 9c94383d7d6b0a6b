"""Judgement against the fleet (signoff/outlier.py): the median of the run's hosts of the class,
the fleet_min keys of a profile, and a check that clears its absolute floor yet FAILs as an
outlier. The same on 8 real lab hosts: tests/test_fleet_lab.py."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest

from signoff import InputError, outlier, profiles, rerun
from signoff.check import Check
from signoff.network.judge import pair_cause

CLASS = """
hardware: {gpu_model: "NVIDIA X", gpu_count: 8, interconnect: nvlink}
criteria:
  hbm_bandwidth: {min: 3.0, unit: TB/s, source: "docs A"}
  p2p_bandwidth: {min: 100, unit: GB/s, fleet_min: 0.8, source: "docs B"}
"""
FLEET = {"node1": 4.0, "node2": 4.1, "node3": 3.9, "node4": 3.3, "node5": 4.05}


def load(tmp_path, text: str, name="cls"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(text))
    return profiles.load(str(p))


def test_below_fleet_min_of_the_median_is_an_outlier_and_the_others_are_within():
    res = outlier.compare("node4", FLEET, 0.9)
    assert res["status"] == "outlier" and res["median"] == 4.0 and res["floor"] == 3.6 and res["n"] == 5
    assert res["compared"] == "node[1-5]"
    assert outlier.describe(res, "TB/s") == ("below 0.9 x the median 4 TB/s (3.6) of 5 hosts of its class "
                                             "in this run (node[1-5])")
    assert {outlier.compare(n, FLEET, 0.9)["status"] for n in FLEET if n != "node4"} == {"within"}


def test_fewer_than_three_hosts_of_the_class_is_na_and_says_so():
    res = outlier.compare("node1", {"node1": 1.0, "node2": 4.0, "node3": float("nan")}, 0.9)
    assert res["status"] == "N.A." and res["n"] == 2  # a NaN is no figure
    assert "2 hosts of its class in this run (needs 3)" in outlier.describe(res, "TB/s")


def test_a_profile_of_no_class_compares_only_where_it_sets_fleet_min(tmp_path):
    local = profiles.load("local")
    assert local.criteria["allreduce_busbw"].fleet_min is None
    res = outlier.compare("a", {"a": 1, "b": 9, "c": 9}, None, "local")
    assert res["status"] == "N.A." and "profile local names no hardware class" in outlier.describe(res, "")
    mine = load(tmp_path, "extends: local\nfleet_min: 0.7\n")
    assert mine.criteria["allreduce_busbw"].fleet_min == 0.7


def test_fleet_min_defaults_per_class_is_inherited_and_set_per_criterion(tmp_path):
    p = load(tmp_path, CLASS)
    assert p.criteria["hbm_bandwidth"].fleet_min == outlier.FLEET_MIN == 0.9
    assert p.criteria["p2p_bandwidth"].fleet_min == 0.8
    child = load(tmp_path, f"extends: {tmp_path / 'cls.yaml'}\nfleet_min: 0.85\n", "child")
    assert child.criteria["hbm_bandwidth"].fleet_min == 0.85  # the child's default
    assert child.criteria["p2p_bandwidth"].fleet_min == 0.8  # the criterion's own stays
    h100 = profiles.load("h100-8x-nvlink")
    assert h100.criteria["allreduce_busbw"].fleet_min == 0.9  # a shipped class: on by default
    assert h100.criteria["nvidia_driver_version"].fleet_min is None  # a version: never


@pytest.mark.parametrize("text, key", [
    ("fleet_min: 0\n", "cls.yaml: fleet_min"),  # 0 never fails, over 1 always would
    ("fleet_min: 1.5\n", "cls.yaml: fleet_min"),
    ("fleet_min: '90%'\n", "cls.yaml: fleet_min"),
    ("criteria:\n  hbm_bandwidth: {min: 3, unit: TB/s, fleet_min: -1, source: x}\n",
     "criteria.hbm_bandwidth.fleet_min"),
    ("criteria:\n  soak_gpu_temp: {max: 80, unit: C, fleet_min: 0.9, source: x}\n",
     "criteria.soak_gpu_temp.fleet_min: unknown key"),
])
def test_a_fleet_min_that_cannot_judge_is_refused_naming_file_and_key(tmp_path, text, key):
    with pytest.raises(InputError, match=key.replace(".", r"\.")):
        load(tmp_path, "hardware: {gpu_model: X}\n" + text)


def check_of(host: str) -> Check:
    return Check(SimpleNamespace(user_properties=[]), host)


def test_an_outlier_that_clears_the_absolute_floor_fails_naming_median_figure_and_hosts(tmp_path):
    t = load(tmp_path, CLASS).threshold("hbm_bandwidth")
    c = check_of("node4")
    with pytest.raises(pytest.fail.Exception) as exc:
        c.expect(3.3, t, "GPU 0 (the slowest) copy", cause=lambda: "degraded HBM", fleet=FLEET)
    msg = str(exc.value)
    assert msg.startswith("node4: GPU 0 (the slowest) copy = 3.3 TB/s: a fleet outlier, below 0.9 x the "
                          "median 4 TB/s (3.6) of 5 hosts of its class in this run (node[1-5])"), msg
    assert "the absolute threshold (>= 3.0 TB/s, cls) is met" in msg
    assert msg.endswith("likely cause: degraded HBM")
    rec = c.item.user_properties[-1][1]
    assert rec["measured"] == 3.3 and rec["details"]["fleet"]["status"] == "outlier"
    ok = check_of("node1")
    ok.expect(4.0, t, fleet=FLEET)  # within: passes, the comparison kept
    assert ok.item.user_properties[-1][1]["details"]["fleet"]["status"] == "within"


def test_a_rule_check_is_judged_against_the_fleet_too(tmp_path):
    t = load(tmp_path, CLASS).threshold("p2p_bandwidth")
    figures = {"n1": 300, "n2": 310, "n3": 200, "n4": 305}
    with pytest.raises(pytest.fail.Exception, match="n3: p2p_bandwidth = 200 GB/s: a fleet outlier, below"):
        check_of("n3").require([], 200, "every GPU pair >= 100 GB/s", t.source, fleet=(t, figures))
    check_of("n1").require([], 300, "every GPU pair >= 100 GB/s", t.source, fleet=(t, figures))


def test_the_host_in_every_slow_pair_is_the_cause_not_its_neighbours(tmp_path):
    t = load(tmp_path, CLASS).threshold("p2p_bandwidth")  # any threshold with fleet_min 0.8
    ring = [(f"h{i}", f"h{i % 5 + 1}") for i in range(1, 6)]
    figures = {f"{a}->{b}": 300 for a, b in ring}
    figures["h2->h3"] = figures["h3->h4"] = 200
    assert pair_cause(("h2", "h3"), ring, figures, t).startswith("host h3: every pair of it is slow")
    figures["h3->h4"] = 300  # one slow pair between two hosts that are fine elsewhere: the link
    assert pair_cause(("h2", "h3"), ring, figures, t) == "a slow link, NIC, cable or switch port on this path"


def _run(d, doc: dict):
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(doc))
    return str(d)


def test_a_fake_rerun_of_a_rerun_keeps_the_first_runs_fleet_and_the_soaks_gpu_pool(tmp_path):
    """signoff/rerun.py on fake results.json: the fleet (details.fleet.figure) and the soak's
    per-GPU model_median pool of an earlier run reach a rerun, and a rerun of that rerun, whose
    own records are the failed hosts' alone; the soak's pool leaves out the hosts soaked again."""
    gpus = {"nvidia": {"gpus": [{"name": "X"}, {"name": "X"}]}}

    def rec(host, status, fig, tflops=None):
        d = {"fleet": {"status": "within", "figure": fig}}
        if tflops:
            d = {"tflops": tflops, "model_median": 50.0}
        return {"test": f"acceptance/test_x.py::test_x[{host}]", "criterion": "soak_gemm_tflops" if tflops
                else "train_throughput", "host": host, "status": status, "measured": fig, "details": d}
    first = {"verdict": "FAIL", "meta": {"run": "R1"}, "hosts": {h: gpus for h in ("a", "b", "c")},
             "results": [rec("a", "PASS", 10.0), rec("b", "PASS", 11.0), rec("c", "FAIL", 4.0),
                         rec("a", "PASS", 0, {"0": 50.0, "1": 51.0}),
                         rec("c", "FAIL", 0, {"0": 20.0, "1": 49.0})]}
    again = rerun.load(_run(tmp_path / "r1", first))
    assert again["fleets"] == {"train_throughput": {"a": 10.0, "b": 11.0, "c": 4.0}}
    assert rerun.pool(again, "soak_gemm_tflops", "X", {"c"}) == [50.0, 51.0]
    figures, where = rerun.fleet(again, "train_throughput", {"c": 5.0})
    assert figures == {"a": 10.0, "b": 11.0, "c": 5.0} and where == {"run": "R1", "dir": "r1", "earlier": 2,
                                                                     "again": 1}
    res = outlier.compare("c", figures, 0.9)
    res["rerun"] = where
    assert outlier.describe(res, "TFLOP/s") == (
        "below 0.9 x the median 10 TFLOP/s (9) of 3 hosts of its class against the fleet of run R1 (r1): "
        "2 of its figures, 1 measured again in this rerun (a,b,c)")
    # the rerun's own results.json holds c alone; its meta.rerun carries R1's fleet on
    meta = {"run": "R2", "rerun": {k: v for k, v in again.items() if k != "tests"}}  # as plugin.py writes it
    second = {"verdict": "FAIL", "meta": meta, "hosts": {"c": gpus},
              "results": [rec("c", "FAIL", 5.0), rec("c", "FAIL", 0, {"0": 21.0, "1": 49.0})]}
    twice = rerun.load(_run(tmp_path / "r2", second))
    assert twice["fleets"]["train_throughput"] == {"a": 10.0, "b": 11.0, "c": 5.0}
    assert rerun.pool(twice, "soak_gemm_tflops", "X", set()) == [50.0, 51.0, 21.0, 49.0]
    assert rerun.fleet(None, "train_throughput", {"c": 5.0}) == ({"c": 5.0}, None)  # no rerun: as given
