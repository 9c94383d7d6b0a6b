"""signoff.report at 1 and at 1,000 hosts: the summary stays one screen (bounded HTML), names
the hosts that need a look folded into ranges, and its min / median / max are right."""

from __future__ import annotations

import re
import statistics

from signoff import report
from signoff.results import ALL
from signoff.versions.report import versions_matrix

BUSBW = {"expected": ">= 100 GB/s", "unit": "GB/s", "source": "thresholds.md"}
TEMP = {"expected": "<= 85 C", "unit": "C", "source": "thresholds.md"}


def rec(criterion, host, status="PASS", measured=None, **kw):
    return {"test": f"acceptance/t.py::test_{criterion}[{host}]", "criterion": criterion, "host": host,
            "status": status, "message": "" if status == "PASS" else f"{host}: {criterion} {status}",
            "measured": measured, **kw}


def cluster(n: int) -> tuple[list[str], list[dict]]:
    """n hosts: busbw 100 + i/10 GB/s on host i, but host 17 and hosts 500-509 FAIL low and
    host 999 ERRORs (nothing measured); GPU temperature 40 + i % 30 C, host 3 too hot;
    gpu_model a string; ecc N.A. on every host."""
    names = [f"node{i:04d}" for i in range(1, n + 1)]
    bad = {17, *range(500, 510)}
    recs = []
    for i, h in enumerate(names, 1):
        if i == 999:
            recs.append(rec("allreduce_busbw", h, "ERROR", None, **BUSBW))
        elif i in bad:
            recs.append(rec("allreduce_busbw", h, "FAIL", 10.0 + i / 1000, **BUSBW))
        else:
            recs.append(rec("allreduce_busbw", h, "PASS", 100 + i / 10, **BUSBW))
        recs.append(rec("gpu_temp", h, "FAIL" if i == 3 else "PASS", 99 if i == 3 else 40 + i % 30, **TEMP))
        recs.append(rec("gpu_model", h, "PASS", "NVIDIA H200", expected="every GPU NVIDIA H200"))
        recs.append(rec("ecc_enabled", h, "N.A."))
    return names, recs


def summary_rows(records) -> dict[str, list[str]]:
    html = report.criteria_summary(records)
    out = {}
    for m in re.finditer(r"<tr><th>([^<]+)</th>(.*?)</tr>", html):
        out[m.group(1)] = re.findall(r"<td[^>]*>(.*?)</td>", m.group(2))
    return out


# cells: PASS FAIL ERROR N.A. NOT-RUN min median max unit worst threshold source
def test_summary_at_1000_hosts_is_bounded_and_names_the_failing_hosts_folded():
    names, recs = cluster(1000)
    summary = report.criteria_summary(recs)
    assert len(summary) < 20_000, len(summary)  # one row per criterion, whatever the hosts
    whole = report.summary_table(recs)
    assert len(whole) < 200_000, len(whole)
    assert whole.count("<th>node") == 0  # no host x criterion matrix of 1,000 columns
    cells = summary_rows(recs)["allreduce_busbw"]
    assert cells[:5] == ["988", "11", "1", "0", "0"]
    assert "<b>FAIL</b> node[0017,0500-0509]" in cells[9]
    assert "<b>ERROR</b> node0999" in cells[9]
    assert "lowest: node0017 10.02, node0500 10.5, node0501 10.5" in cells[9]
    measured = [r["measured"] for r in recs if r["criterion"] == "allreduce_busbw" and r["measured"]]
    assert cells[5:9] == [f"{min(measured):.4g}", f"{statistics.median(measured):.4g}",
                          f"{max(measured):.4g}", "GB/s"]
    assert cells[5] == "10.02" and cells[7] == "200"
    # the failing hosts' messages are listed, per criterion (not every host)
    assert "node0505: allreduce_busbw FAIL" in whole
    assert "<h3>allreduce_busbw: 12 hosts not passed</h3>" in whole


def test_summary_direction_names_the_highest_where_lower_is_better():
    _, recs = cluster(1000)
    cells = summary_rows(recs)["gpu_temp"]
    assert cells[:2] == ["999", "1"]
    vals = [99 if i == 3 else 40 + i % 30 for i in range(1, 1001)]
    assert cells[5:8] == ["40", f"{statistics.median(vals):.4g}", "99"]
    assert "<b>FAIL</b> node0003" in cells[9] and "highest: node0003 99, " in cells[9]


def test_summary_counts_non_numeric_and_na_criteria_without_values():
    _, recs = cluster(1000)
    rows = summary_rows(recs)
    assert rows["gpu_model"][:5] == ["1000", "0", "0", "0", "0"] and rows["gpu_model"][5:8] == ["", "", ""]
    assert rows["ecc_enabled"][:5] == ["0", "0", "0", "1000", "0"] and rows["ecc_enabled"][9] == ""


def test_one_host_keeps_the_matrix():
    _, recs = cluster(1)
    html = report.summary_table(recs)
    assert "<th>node0001</th>" in html  # the host x criterion matrix
    cells = summary_rows(recs)["allreduce_busbw"]
    assert cells[:5] == ["1", "0", "0", "0", "0"]
    assert cells[5:8] == ["100.1", "100.1", "100.1"]
    assert cells[9] == ""  # nothing to single out on one passing host


def test_hosts_text_cuts_long_folds():
    odd = [f"node{2 * i:04d}" for i in range(1000)]  # no two adjacent: the fold is a long list
    text = report.hosts_text(odd)
    assert len(text) < report.FOLD_MAX + 30 and text.endswith(" more")
    assert report.hosts_text([f"node{i:03d}" for i in range(1, 513)]) == "node[001-512]"


def facts(kernel="6.1.0", gpus=8):
    return {"python": "3.11.2", "os": "Debian 12", "kernel": kernel, "torch": {"version": "2.5"},
            "nvidia": {"driver": "580", "cuda_driver": "13.0",
                       "gpus": [{"name": "NVIDIA H200"}] * gpus}}


def test_versions_at_1000_hosts_are_values_with_their_hosts():
    hosts = {f"node{i:04d}": facts(kernel="6.8.0" if i == 42 else "6.1.0") for i in range(1, 1001)}
    hosts["node0777"] = {"error": "node0777: unreachable"}
    html = versions_matrix(hosts)
    assert len(html) < 20_000, len(html)
    assert "<td><b>6.1.0</b>: 998 hosts, node[0001-0041,0043-0776,0778-1000]</td>" in html
    assert "<td class='so-odd'><b>6.8.0</b>: 1 hosts, node0042</td>" in html
    assert "1 hosts, node0777</td>" in html and "node0777: unreachable" in html
    assert "<b>8 x NVIDIA H200</b>: 999 hosts" in html


def test_versions_of_few_hosts_stay_per_host():
    html = versions_matrix({"a1": facts(), "a2": facts(kernel="6.8.0"), "a3": facts()})
    assert "<th>a1</th><th>a2</th><th>a3</th>" in html
    assert html.count("class='so-odd'>6.8.0") == 1


def test_verdict_names_the_hosts_folded():
    html = report.verdict_block("PASS", {"hosts": [f"node{i:04d}" for i in range(1, 1001)]})
    assert "hosts: node[0001-1000];" in html


def test_matrix_up_to_16_hosts_and_a_cluster_wide_check_is_not_a_17th():
    _, recs = cluster(16)
    recs.append(rec("multinode_allreduce", ALL, "PASS", 1.5, **BUSBW))
    assert "<th>node0016</th>" in report.summary_table(recs)
    _, recs = cluster(17)
    assert "<th>node0017</th>" not in report.summary_table(recs)
    assert "<b>FAIL</b> node0017" in report.summary_table(recs)
