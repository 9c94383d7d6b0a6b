"""signoff.prom (issue 54 item 4): the verdict and every figure per host and criterion as
OpenMetrics text, read back with prometheus_client's parsers (OpenMetrics, and the Prometheus
text format node_exporter's textfile collector reads), from a recorded run's results.json; a
hostile host's and profile's strings stay inert, label values and all. The file a real run
writes is checked in tests/test_manifest.py::test_a_signed_run_verifies_untouched_and_fails_each_edit."""

from __future__ import annotations

import copy
import math
from pathlib import Path

from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as prometheus_text_families

from signoff import openmetrics
from signoff.printable import printable
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
DOC = load_results(ROOT / "reports/examples/cluster-4host-slow")


def samples(text: str) -> dict:
    """name -> [(labels, value)], by the OpenMetrics parser (which raises on anything malformed)."""
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge", fam
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_the_recorded_runs_verdict_and_every_figure_parse_back():
    text = openmetrics.text(DOC)
    assert text.endswith("\n# EOF\n")
    got = samples(text)
    assert got["signoff_verdict"] == [({"profile": "local", "verdict": v}, float(v == "FAIL"))
                                      for v in ("PASS", "FAIL", "ERROR", "INCOMPLETE")]
    assert got["signoff_exit_code"] == [({"profile": "local"}, 1.0)]
    checks = {(lb["host"], lb["criterion"]): lb["status"] for lb, _ in got["signoff_check"]}
    assert checks == {(r["host"], r["criterion"]): r["status"] for r in DOC["results"]}
    # every numeric figure, per host and criterion, with its unit
    figures = {(lb["host"], lb["criterion"]): (v, lb["unit"], lb["status"])
               for lb, v in got["signoff_measured"]}
    want = {(r["host"], r["criterion"]): (r["measured"], r["unit"], r["status"]) for r in DOC["results"]
            if isinstance(r.get("measured"), (int, float))}
    assert figures == want and len(want) == 60
    assert figures[("lab3->lab4", "net_pair_bandwidth")] == (0.576, "x line rate", "FAIL")
    # a numeric threshold is its own gauge; a rule in words has none
    limits = {(lb["host"], lb["criterion"]): (lb["bound"], v) for lb, v in got["signoff_threshold"]}
    assert limits[("lab1", "allreduce_busbw")] == ("min", 0.04)
    assert limits[("all hosts", "multinode_allreduce")] == ("min", 0.051)  # a provisional one
    assert ("lab1", "sdc") not in limits and ("all hosts", "storage_read_aggregate") not in limits
    counts = {lb["status"]: v for lb, v in got["signoff_checks"]}
    assert counts == {"PASS": 80, "FAIL": 7, "ERROR": 0, "N.A.": 142, "UNSEEN": 0, "NOT RUN": 0}
    # the Prometheus text format (node_exporter's textfile collector) reads the same samples
    flat = {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in prometheus_text_families(text) for s in fam.samples}
    assert len(flat) == sum(map(len, got.values())) and "# TYPE signoff_verdict gauge\n" in text


HOSTILE = 'gpu"1\\\n} 0\n# EOF\nsignoff_verdict{verdict="PASS"} 1\x1b[2K\u202e\udcff'


def test_hostile_host_and_profile_strings_stay_inert():
    doc = copy.deepcopy(DOC)
    doc["meta"]["profile"] = HOSTILE
    doc["meta"]["run"] = HOSTILE
    doc["results"][0].update(host=HOSTILE, measured=float("nan"), unit=HOSTILE)
    doc["results"][1].update(host=HOSTILE + "2", measured=float("inf"))
    text = openmetrics.text(doc)
    assert "\x1b" not in text and "\u202e" not in text
    # "# EOF" inside a value is text: the one line of its own is the last
    assert [ln for ln in text.splitlines() if ln.startswith("# EOF")] == ["# EOF"]
    got = samples(text)  # one sample per line, nothing injected
    assert got["signoff_verdict"][1] == ({"profile": printable(HOSTILE).replace("\udcff", "\\udcff"),
                                          "verdict": "FAIL"}, 1.0)
    inert = printable(HOSTILE).replace("\udcff", "\\udcff")
    measured = [(lb, v) for lb, v in got["signoff_measured"] if lb["host"].startswith(inert)]
    assert [lb["host"] for lb, _ in measured] == [inert, inert + "2"] and measured[0][0]["unit"] == inert
    assert math.isnan(measured[0][1]) and measured[1][1] == math.inf
    assert len(got["signoff_verdict"]) == 4 and all(lb["verdict"] != "PASS" or v == 0
                                                    for lb, v in got["signoff_verdict"])
    assert len(text.splitlines()) == 2 * 10 + sum(map(len, got.values())) + 1  # HELP, TYPE, samples, EOF
