"""--baseline: figures that moved the wrong way beyond the tolerance, per host and criterion;
a pass turned FAIL/ERROR; hosts that appeared or vanished; bad baseline files named."""

from __future__ import annotations

import json

import pytest

from signoff import InputError, baseline


def rec(criterion, host, measured, expected, status="PASS"):
    return {"criterion": criterion, "host": host, "measured": measured, "expected": expected,
            "unit": "GB/s", "status": status}


def doc(hosts, *recs):
    return {"meta": {"run": "r1"}, "hosts": {h: {} for h in hosts}, "results": list(recs)}


def test_regressions_beyond_the_tolerance_in_the_threshold_direction():
    before = doc(["a", "b", "c"], rec("busbw", "a", 100, ">= 50"), rec("busbw", "b", 100, ">= 50"),
                 rec("temp", "a", 70, "<= 85"), rec("temp", "b", 70, "<= 85"),
                 rec("ecc", "a", "8/8", "every GPU"), rec("busbw", "c", 100, ">= 50"))
    after = doc(["a", "b", "d"], rec("busbw", "a", 94, ">= 50"), rec("busbw", "b", 96, ">= 50"),
                rec("temp", "a", 80, "<= 85"), rec("temp", "b", 60, "<= 85"),
                rec("ecc", "a", "7/8", "every GPU", "FAIL"), rec("busbw", "d", 10, ">= 50"))
    got = baseline.compare(after, before, 0.05, "run r1")
    reg = {(x["criterion"], x["host"]): x for x in got["regressions"]}
    assert set(reg) == {("busbw", "a"), ("temp", "a"), ("ecc", "a")}  # b within 5 %, temp b better
    assert reg[("busbw", "a")]["change_pct"] == -6.0 and reg[("temp", "a")]["change_pct"] == 14.3
    assert reg[("ecc", "a")]["was_status"] == "PASS"
    assert got["appeared"] == ["d"] and got["vanished"] == ["c"] and got["compared"] == 5
    assert [x["host"] for x in baseline.compare(after, before, 0.07, "r1")["regressions"]] == ["a", "a"]


def test_bad_baseline_and_tolerance_are_named(tmp_path):
    with pytest.raises(InputError, match="--baseline .*nope.json: cannot read it"):
        baseline.load(str(tmp_path / "nope.json"))
    (tmp_path / "x.json").write_text("{")
    with pytest.raises(InputError, match="x.json: not JSON"):
        baseline.load(str(tmp_path / "x.json"))
    (tmp_path / "results.json").write_text(json.dumps({"meta": {}}))
    with pytest.raises(InputError, match="not a signoff results.json"):
        baseline.load(str(tmp_path))  # a report directory is accepted: its results.json
    assert baseline.tolerance_arg("5%") == 0.05 and baseline.tolerance_arg("0.1") == 0.1
    with pytest.raises(InputError, match="--baseline-tolerance five"):
        baseline.tolerance_arg("five")
