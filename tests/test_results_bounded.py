"""results.json bounded at 1,000 hosts (issue 30): what every record of a criterion and status
has alike is stated once (`common`), the soak's samples stay in soak/<host>.jsonl, and
nothing measured is lost: signoff.results.load(), `signoff rebuild` and --baseline read back
every record, figure and series as the run had them (bench/report_scale.py measures the sizes)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from signoff import baseline, calibrate, junit
from signoff.results import Results, bounded, dumps, load, rebuild

SOURCE = "0.9 x 4.24 TB/s, the device-to-device copy measured on 1x H200 (docs/reference-figures.md)"


def record(i: int, status: str = "PASS", **kw) -> dict:
    """An hbm_bandwidth record of host n<i>: its own figures, a threshold and settings alike."""
    host, own = f"n{i:04d}", round(4.1 + i / 1000, 3)
    return {"test": f"acceptance/test_health.py::test_hbm_bandwidth[{host}]", "criterion": "hbm_bandwidth",
            "host": host, "status": status, "launcher": "ssh", "message": "", "duration_s": 0.003,
            "measured": own, "expected": ">= 3.816 TB/s", "unit": "TB/s", "source": SOURCE,
            "details": {"per_gpu": [own, 4.2], "params": {"bytes": 1 << 30, "repeats": 20},
                        "fleet": {"median": 4.15, "floor": 0.9, "fleet_min": 3.735, "n": 200,
                                  "figure": own, "status": "within"},
                        "class": ["NVIDIA H200", "2.11.0+cu130"],
                        "hosts_compared": [f"n{j:04d}" for j in range(200)]},
            **kw}


def run(tmp_path, records: list[dict], soak: dict | None = None) -> Results:
    hosts = sorted({r["host"] for r in records})
    res = Results(tmp_path / "results.json", {"profile": "h200-8x-nvlink@1", "hosts": hosts})
    for r in records:
        res.set_host(r["host"], {"hostname": r["host"], "nvidia": {"driver": "580.159.04"}})
        res.add(r)
    for name, value in (soak or {}).items():
        res.set_live("soak", name, value)
    res.finish()
    return res


def odd_ones() -> list[dict]:
    """Values alike but for their type, or alike but on one host: never merged into one."""
    out = [record(i) for i in range(200)]
    out[3]["details"]["params"]["repeats"] = 20.0  # 20.0 is no 20
    out[4]["details"]["class"] = ("NVIDIA H200", "2.11.0+cu130")  # a tuple: a list in JSON, as the rest
    out[5]["launcher"] = True  # True is no "ssh"
    out[6]["details"]["fleet"]["median"] = float("nan")  # written "NaN", never alike
    out[7]["details"].pop("params")  # a key the others have: not stated for it
    out[8]["details"]["hosts_compared"] = out[8]["details"]["hosts_compared"][:-1]
    out += [record(i, "FAIL", message=f"n{i:04d}: 3.1 TB/s, expected >= 3.816 TB/s") for i in (900, 901, 902)]
    out += [{"test": "acceptance/test_versions.py::test_version_parity", "criterion": "version_parity",
             "host": "all hosts", "status": "PASS", "measured": None, "details": {}}]
    return out


def test_records_alike_are_stated_once_and_read_back_whole(tmp_path):
    res = run(tmp_path, odd_ones())
    raw = json.loads((tmp_path / "results.json").read_text())
    said = raw["common"]["hbm_bandwidth"]["PASS"]
    assert said["source"] == SOURCE and said["expected"] == ">= 3.816 TB/s" and "launcher" not in said
    fleet = {"floor": 0.9, "fleet_min": 3.735, "n": 200, "status": "within"}  # n0006's median is NaN
    assert said["details"]["fleet"] == fleet
    assert said["details"]["class"] == ["NVIDIA H200", "2.11.0+cu130"] and "per_gpu" not in said["details"]
    assert "hosts_compared" not in said["details"]  # n0008's differs: each record keeps its own
    first = raw["results"][0]
    assert set(first) == {"test", "criterion", "host", "status", "launcher", "measured", "unit", "details"}
    # per-host figures kept, and what is not alike on every host (n0003's 20.0 repeats, n0007 without params)
    assert set(first["details"]) == {"per_gpu", "params", "fleet", "hosts_compared"}
    assert first["details"]["per_gpu"] == [4.1, 4.2]
    assert first["details"]["fleet"] == {"median": 4.15, "figure": 4.1}
    assert "FAIL" in raw["common"]["hbm_bandwidth"]
    assert raw["results"][200]["message"].startswith("n0900: 3.1")
    # nothing lost: load() gives the run's document back, record for record (types too)
    want = json.loads(dumps(res.doc))
    got = load(tmp_path)
    assert got == want and "common" not in got
    assert [type(r["details"]["params"]["repeats"]) for r in got["results"][2:4]] == [int, float]
    assert got["results"][5]["launcher"] is True and "params" not in got["results"][7]["details"]
    assert got["results"][6]["details"]["fleet"]["median"] == "NaN"


def test_a_document_without_anything_alike_has_no_common_and_loads_as_written(tmp_path):
    run(tmp_path, [record(1), record(2, "FAIL")])
    raw = json.loads((tmp_path / "results.json").read_text())
    assert "common" not in raw and load(tmp_path) == raw
    assert bounded({"meta": {}, "results": []}) == {"meta": {}, "results": []}


def test_rebuild_gives_the_bounded_results_json_and_reads_back_every_record(tmp_path):
    res = run(tmp_path, odd_ones())
    written = (tmp_path / "results.json").read_text()
    doc = rebuild(tmp_path)  # `signoff rebuild`: from results.jsonl, the same document and file
    assert (tmp_path / "results.json").read_text() == written
    assert json.loads(dumps(doc)) == load(tmp_path)
    assert len(doc["results"]) == len(res.doc["results"]) == 204


def test_baseline_and_calibrate_read_every_figure_from_the_bounded_form(tmp_path):
    """--baseline PATH: each host's figure and the threshold stated once in `common` (its
    direction: >=) are read back, so a regression on one host of 200 is found."""
    (tmp_path / "then").mkdir()
    run(tmp_path / "then", [record(i) for i in range(200)])
    assert "common" in json.loads((tmp_path / "then" / "results.json").read_text())
    now = [record(i) for i in range(200)]
    now[42]["measured"] = 3.9  # -5.9 %: still PASS, a regression beyond 5 %
    base = baseline.load(str(tmp_path / "then"))
    assert base["results"][42]["expected"] == ">= 3.816 TB/s" and base["results"][42]["measured"] == 4.142
    got = baseline.compare({"meta": {}, "results": now}, base, 0.05, "then")
    assert [(x["host"], x["change_pct"]) for x in got["regressions"]] == [("n0042", -5.8)]
    assert got["compared"] == 200 and not got["appeared"] and not got["vanished"]
    docs = [baseline.load(str(tmp_path / "then"))] * 2
    assert baseline.spreads(docs)["hbm_bandwidth"]["spread"] == 0  # the same run twice moves nothing
    crit, _ = calibrate.calibrate(base, calibrate.profiles.load("h200-8x-nvlink@1"), 0.9)
    assert "the slowest 4.1 TB/s on n0000" in crit["hbm_bandwidth"]["source"]  # every host's figure read


def soak_entry(name: str, n: int, stride: int) -> dict:
    return {"state": "done", "error": None, "samples": n, "every_nth_sample_kept": stride,
            "file": f"soak/{name}.jsonl", "gpus": [{"index": 0}], "max": {"temp": [40 + (n - 1) % 30]},
            "series": [{"type": "sample", "t": float(i), "temp": [40 + i % 30]} for i in range(0, n, stride)]}


def test_a_large_soak_series_is_not_lost(tmp_path):
    """A 24 h soak's samples (86,400 a GPU at 1 s) are not copied into results.json: every one
    is in soak/<host>.jsonl, which the entry names, and load() reads back the kept ones."""
    n, stride = 20_000, 32
    (tmp_path / "soak").mkdir()
    lines = [{"type": "header", "gpus": [{"index": 0}]}]
    lines += [{"type": "sample", "t": float(i), "temp": [40 + i % 30]} for i in range(n)]
    lines += [{"type": "event", "xid": 79}, {"type": "result", "samples": n}]
    (tmp_path / "soak" / "h1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = run(tmp_path, [record(1)], {"h1": soak_entry("h1", n, stride)})
    raw = json.loads((tmp_path / "results.json").read_text())
    assert "series" not in raw["soak"]["h1"] and raw["soak"]["h1"]["file"] == "soak/h1.jsonl"
    assert (tmp_path / "results.json").stat().st_size < 10_000
    got = load(tmp_path)["soak"]["h1"]
    assert got == res.doc["soak"]["h1"] and len(got["series"]) == -(-n // stride)
    assert rebuild(tmp_path)["soak"]["h1"] == got  # rebuild from results.jsonl: its entry whole
    assert load(tmp_path)["soak"]["h1"] == got
    every = [json.loads(x) for x in (tmp_path / "soak" / "h1.jsonl").read_text().splitlines()]
    assert sum(x["type"] == "sample" for x in every) == n  # every sample, the kept and the rest


def test_results_json_grows_by_each_hosts_own_figures_only(tmp_path):
    """What is alike costs once: 2,000 hosts cost about 2,000 x their own figures, not x the
    200-host class list and the threshold text each record used to repeat."""
    sizes = {}
    for n in (200, 2000):
        d = tmp_path / str(n)
        d.mkdir()
        recs = [record(i) for i in range(n)]
        for r in recs:
            r["details"]["hosts_compared"] = [f"n{j:04d}" for j in range(n)]  # a class of n hosts
        run(d, recs)
        sizes[n] = (d / "results.json").stat().st_size
    per_host = (sizes[2000] - sizes[200]) / 1800
    assert per_host < 600, sizes  # a record's own line (~230 B), its host's facts, its name in the list


def test_junit_states_a_criterions_threshold_once_and_each_testcase_its_own_figure(tmp_path):
    doc = {"meta": {"profile": "h200-8x-nvlink@1"}, "verdict": "FAIL",
           "results": [record(i) for i in range(50)] + [record(99, "FAIL", message="n0099: 3.1 TB/s",
                                                                expected=">= 3.9 TB/s")]}
    junit.write(tmp_path / "junit.xml", doc)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    suite = {p.get("name"): p.get("value") for p in root.find("testsuite/properties")}
    assert suite["source:hbm_bandwidth"] == SOURCE and suite["expected:hbm_bandwidth"] == ">= 3.816 TB/s"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    props = {n: {p.get("name"): p.get("value") for p in c.iter("property")} for n, c in cases.items()}
    assert props["test_hbm_bandwidth[n0007]"] == {"measured": "4.107"}  # host: in the name; the rest once
    assert props["test_hbm_bandwidth[n0099]"] == {"measured": "4.199", "expected": ">= 3.9 TB/s"}
    fail = cases["test_hbm_bandwidth[n0099]"].find("failure")
    assert fail.get("type") == "FAIL" and fail.get("message") == fail.text == "n0099: 3.1 TB/s"
    assert (tmp_path / "junit.xml").read_text().count("\n") > 51  # a testcase a line
