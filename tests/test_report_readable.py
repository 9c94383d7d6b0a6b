"""What the page shows is true and readable (issue 45 item 7): pairs are not called hosts, no
'measured 1-1 ,', the NIC column says what the netinfo probe read (veths, bonds, VLANs too),
bars in their verdict's colour, `signoff list profiles` shows the class bases, `signoff run
--help` shows signoff's options first, a reused --report-dir keeps the earlier run."""

from __future__ import annotations

import json

import matplotlib.colors as mcolors

from signoff import cli, plugin, report
from signoff.storage import report as storage_report


def _pair(a, b, gbps):
    return {"test": f"acceptance/test_network.py::test_net_pair_bandwidth[{a}->{b}]", "host": f"{a}->{b}",
            "criterion": "net_pair_bandwidth", "status": "FAIL", "measured": gbps, "unit": "Gb/s",
            "expected": ">= 1 Gb/s",
            "message": f"{a}->{b}: iperf3 throughput = {gbps} Gb/s, expected >= 1 Gb/s"}


def test_pairs_are_called_pairs_and_a_span_whose_ends_read_alike_is_one_figure():
    recs = [_pair("lab3", "lab1", 0.096), _pair("lab3", "lab2", 0.097)]
    (who, what, _), = [report.problem_line(g) for g in report.problem_groups(recs)]
    assert who == "2 pairs lab3->lab[1-2]" and what == "measured 0.096-0.097 Gb/s, expected >= 1 Gb/s", who
    same = [{"test": f"acceptance/test_gpu_health.py::test_remap[h{i}]", "host": f"h{i}",
             "criterion": "remap", "status": "FAIL", "measured": v, "unit": "", "expected": "== 0",
             "message": f"h{i}: {v} pending, expected == 0"} for i, v in enumerate((1.00001, 1.00002))]
    (who, what, _), = [report.problem_line(g) for g in report.problem_groups(same)]
    assert who == "2 hosts h[0-1]" and what == "measured 1, expected == 0", what  # not 'measured 1-1 ,'


def test_the_nic_column_names_the_virtual_ports_the_probe_read():
    eth = [{"name": "veth3", "operstate": "up", "speed_mbps": 10000, "addresses": ["10.0.0.3"],
            "virtual": True},
           {"name": "lo", "operstate": "unknown", "speed_mbps": None, "addresses": ["127.0.0.1"],
            "virtual": True}]
    doc = {"hosts": {"lab3": {"hostname": "lab3"}},
           "results": [{"criterion": "nic_link", "host": "lab3", "details": {"ethernet": eth}}]}
    html = report.inventory_section(doc)
    assert "veth3 (virtual: no PCI device) 10000 Mb/s up 10.0.0.3" in html and "not probed" not in html, html
    assert "127.0.0.1" not in html


def test_a_bar_is_drawn_in_its_verdicts_colour(monkeypatch):
    drawn = []
    monkeypatch.setattr(storage_report, "png", lambda fig: drawn.append(fig) or "")
    recs = [{"criterion": "storage_read_seq", "host": h, "status": s, "measured": v}
            for h, s, v in (("lab1", "PASS", 2.0), ("lab2", "FAIL", 0.5))]
    storage_report.per_host_figure(recs, None)
    bars = drawn[0].axes[0].patches
    assert [mcolors.to_hex(b.get_facecolor()) for b in bars] == [
        mcolors.to_hex(report.VERDICT_COLOURS["PASS"]), mcolors.to_hex(report.VERDICT_COLOURS["FAIL"])]


def test_list_profiles_shows_the_class_bases_and_their_variants(capsys):
    assert cli.main(["list", "profiles"]) == 0
    out = capsys.readouterr().out
    assert ("a100-8x-nvlink         8x NVIDIA A100 SXM4 with NVSwitch (e.g. DGX A100, Azure ND A100 v4)  "
            "[class base: --profile a100-8x-nvlink picks a100-40gb-8x-nvlink or a100-80gb-8x-nvlink by "
            "the hosts' NVML]") in out, out


def test_run_help_shows_signoffs_own_options_before_pytests(capsys):
    assert cli.main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    ours, pytests = out.index("GPU cluster acceptance:"), out.index("pytest's own options:")
    assert ours < out.index("--profile=PROFILE") < pytests < out.index("general:"), out[:2000]
    assert out.count("GPU cluster acceptance:") == 1


def test_a_reused_report_dir_keeps_the_earlier_run(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps({"meta": {"run": "20261205T000000Z-ctl-7"}}))
    (tmp_path / "report.md").write_text("# the earlier verdict\n")
    (tmp_path / "hosts").mkdir()
    plugin._start_clean(tmp_path)
    kept = tmp_path / "earlier" / "20261205T000000Z-ctl-7"
    assert (kept / "report.md").read_text() == "# the earlier verdict\n" and (kept / "hosts").is_dir()
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "report.md").exists()
    assert f"held an earlier run: moved to {kept}" in capsys.readouterr().err



def test_the_sources_say_which_version_of_the_suite_their_paths_are_of():
    # no public address to link a recorded run to: every cited figure is in its source's own text
    # (tests/test_profile_sources.py), and the page names the version whose files the paths mean
    from signoff import profiles
    doc = {"meta": {"suite_version": "0.1.0 (git abc1234)"}, "results": []}
    page = report.methodology(doc, profiles.load("h200-8x-nvlink"), [])
    assert ("a path it cites (docs/..., thresholds/...) is a file of this suite's repository as of the "
            "version this run names: signoff 0.1.0 (git abc1234).") in page, page[-800:]
