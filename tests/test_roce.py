"""Lossless RoCE (issue 53 item 3): the roce probe reads a ConnectX port's PFC, trust, ECN and counters
(recorded public captures of mlnx_qos and ethtool -S, a sysfs tree laid out as the MLNX_OFED manual
gives it), and acceptance/test_roce.py's checks PASS, FAIL on purpose (PFC off on the priority in a
recorded capture, ECN off, another trust mode, a host unlike the others, loss counters growing) and
are N.A. on InfiniBand ports and hosts without RDMA. Counter snapshots and other hosts are fakes
(named so): no public capture of a ConnectX's pause and CNP counters over a run exists."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import InputError, families, preflight, profiles
from signoff.check import Check
from signoff.fixtures import HostView
from signoff.fleet import ProbeError
from signoff.roce import judge
from signoff.roce import plugin as roce_plugin

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "tests" / "recorded" / "roce"
PROBE = ROOT / "signoff" / "roce" / "probe_roce.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


probe = _load(PROBE, "signoff_roce_probe")


def recorded(name: str) -> str:
    """A capture without its header (the '#' lines say where it comes from)."""
    return "\n".join(ln for ln in (REC / name).read_text().splitlines() if not ln.startswith("#"))


# ------------------------------------------------------------------ the probe, on recorded captures


def test_recorded_mlnx_qos_doc2792_reads_trust_dscp_and_pfc_off_on_priority_3():
    assert probe.parse_mlnx_qos(recorded("mlnx_qos-doc2792.txt")) == ("dscp", [1, 0, 1, 0, 0, 0, 1, 1])


def test_recorded_mlnx_qos_after_pfc_on_3_reads_pfc_on_3_alone():
    assert probe.parse_mlnx_qos(recorded("mlnx_qos-doc2792-pfc3.txt")) == (None, [0, 0, 0, 1, 0, 0, 0, 0])


def test_mlnx_qos_of_the_current_tool_with_tabs_reads_alike():
    """mlnx-tools' pretty_print: tabs and padded columns (python/mlnx_qos)."""
    text = ("DCBX mode: OS controlled\nPriority trust state: pcp\nCable len: 7\nPFC configuration:\n"
            "\tpriority    0   1   2   3   4   5   6   7\n\tenabled     0   0   0   1   0   0   0   0   \n"
            "\tbuffer      0   0   0   1   0   0   0   0   \n")
    assert probe.parse_mlnx_qos(text) == ("pcp", [0, 0, 0, 1, 0, 0, 0, 0])


def test_recorded_byteps_ethtool_prio_lines_hold_no_pause_counter():
    """A PFC-less mlx5 port prints no per-priority pause counter: none is made up."""
    assert probe.parse_ethtool(recorded("ethtool-S-prio-byteps179.txt")) == {}


def test_dcb_pfc_and_app_parsers_read_iproute2s_lines():
    assert probe.parse_dcb_pfc("pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:on "
                               "4:off 5:off 6:off 7:off\n") == [0, 0, 0, 1, 0, 0, 0, 0]
    assert probe.parse_dcb_pfc("pfc-cap 8\n") is None
    assert probe.parse_dcb_trust("dscp-prio 24:3 26:3 48:6\n") == "dscp"
    assert probe.parse_dcb_trust("") == "pcp" and probe.parse_dcb_trust(None) is None


def sysfs(root: Path, layer: str = "Ethernet", np=(0, 0, 0, 1, 0, 0, 0, 0), rp=(0, 0, 0, 1, 0, 0, 0, 0),
          hw: dict | None = None) -> Path:
    """A ConnectX port's sysfs as the MLNX_OFED manual lays it out (ECN per priority), values ours."""
    port = root / "class/infiniband/mlx5_0/ports/1"
    (port / "gid_attrs/ndevs").mkdir(parents=True)
    (port / "link_layer").write_text(layer + "\n")
    (port / "gid_attrs/ndevs/0").write_text("eth2\n")
    (port / "hw_counters").mkdir()
    hw = hw or {"np_cnp_sent": 0, "rp_cnp_handled": 0, "out_of_sequence": 0, "packet_seq_err": 0}
    for k, v in hw.items():
        (port / "hw_counters" / k).write_text(f"{v}\n")
    for point, vals in (("roce_np", np), ("roce_rp", rp)):
        d = root / "class/net/eth2/ecn" / point / "enable"
        d.mkdir(parents=True)
        for p, v in enumerate(vals):
            (d / str(p)).write_text(f"{v}\n")
    return root


def tools(qos: str, ethtool: str = ""):
    """The host's tools answering with recorded text (mlnx_qos, ethtool); dcb absent."""
    def run(argv, timeout=10):
        if argv[0] == "mlnx_qos":
            return qos, None
        if argv[0] == "ethtool":
            return ethtool, None
        return None, f"{argv[0]}: not found"
    return run


def test_recorded_doc2792_port_read_through_sysfs(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "SYS", str(sysfs(tmp_path)))
    doc = probe.read(tools(recorded("mlnx_qos-doc2792.txt"), recorded("ethtool-S-prio-byteps179.txt")))
    (p,) = doc["ports"]
    assert (p["port"], p["link_layer"], p["netdev"]) == ("mlx5_0/1", "Ethernet", "eth2")
    assert (p["trust"], p["trust_from"], p["pfc_from"]) == ("dscp", "mlnx_qos", "mlnx_qos")
    assert p["pfc"] == [1, 0, 1, 0, 0, 0, 1, 1]
    assert p["ecn"]["roce_np"][3] == p["ecn"]["roce_rp"][3] == 1
    assert p["counters"] == {"np_cnp_sent": 0, "rp_cnp_handled": 0, "out_of_sequence": 0, "packet_seq_err": 0}
    end = probe.counters_now(tools(""))
    assert [q["port"] for q in end["ports"]] == ["mlx5_0/1"] and "trust" not in end["ports"][0]


def test_probe_alone_prints_one_json_document_without_the_tools(tmp_path):
    """Run as shipped: mlnx_qos, dcb, ethtool absent here, which it says (never raises)."""
    env = {**os.environ, "SIGNOFF_SYSFS": str(sysfs(tmp_path)), "PATH": str(tmp_path)}
    out = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, env=env, timeout=30)
    (p,) = json.loads(out.stdout)["ports"]
    assert p["pfc"] is None and p["trust"] is None and "mlnx_qos" in p["qos_error"]
    assert p["counters"]["out_of_sequence"] == 0 and "ethtool" in p["counters_error"]


def test_sysinfo_preflight_carries_the_roce_facts(tmp_path, monkeypatch):
    """sysinfo's preflight() loads roce.py shipped beside it: the run's start snapshot."""
    ship = tmp_path / "ship"
    ship.mkdir()
    for name, src in families.shipped().items():
        shutil.copy(src, ship / name)
    monkeypatch.setenv("SIGNOFF_SYSFS", str(sysfs(tmp_path / "sys")))
    sysinfo = _load(ship / "sysinfo.py", "sysinfo_shipped_roce")
    (p,) = sysinfo.preflight(str(tmp_path), "", False)["roce"]["ports"]
    assert (p["port"], p["netdev"], p["ecn"]["roce_rp"][3], p["counters"]["packet_seq_err"]) == \
        ("mlx5_0/1", "eth2", 1, 0)


# ------------------------------------------------------------------ the checks


class Item:
    def __init__(self, name: str):
        self.name = self.originalname = name
        self.user_properties: list = []


class Fleet:
    """What test_roce_uniform asks of the fleet: every host's facts, computed once."""

    def __init__(self, facts: dict):
        self.facts = facts

    def all_facts(self):
        return self.facts

    def once(self, key, compute):
        return compute()


class Counters:
    """The end-of-run snapshot (fake: no public capture over a run), per host."""

    def __init__(self, docs: dict):
        self.docs = docs

    def counters(self, host):
        return self.docs[host]


def run_check(name: str, facts: dict, prof="local", others: dict | None = None, end: dict | None = None):
    acc = _load(ROOT / "acceptance" / "test_roce.py", "acceptance_test_roce")
    item = Item(f"test_{name}")
    kw = {"host": HostView("node1", facts, None), "check": Check(item, "node1"),
          "profile": profiles.load(prof) if isinstance(prof, str) else prof}
    if name == "roce_uniform":
        kw["fleet"] = Fleet({"node1": facts, **(others or {})})
    if name in ("roce_loss", "roce_congestion"):
        kw["roce"] = Counters({"node1": end})
    try:
        getattr(acc, f"test_{name}")(**kw)
        status, msg = "PASS", ""
    except pytest.fail.Exception as exc:
        status, msg = "FAIL", str(exc)
    except pytest.skip.Exception as exc:
        status, msg = "N.A.", str(exc)
    except (ProbeError, InputError) as exc:
        status, msg = "ERROR", str(exc)
    rec = next((v for k, v in item.user_properties if k == "signoff"), {})
    return status, msg, rec


def port(qos_file="mlnx_qos-doc2792-pfc3.txt", trust="dscp", np=(0, 0, 0, 1, 0, 0, 0, 0),
         counters=None) -> dict:
    """An Ethernet RDMA port as the probe reports it: PFC from a recorded mlnx_qos capture."""
    _, pfc = probe.parse_mlnx_qos(recorded(qos_file))
    return {"port": "mlx5_0/1", "link_layer": "Ethernet", "netdev": "eth2", "trust": trust,
            "trust_from": "mlnx_qos", "pfc": pfc, "pfc_from": "mlnx_qos", "qos_error": None,
            "ecn": {"roce_np": list(np), "roce_rp": [0, 0, 0, 1, 0, 0, 0, 0]},
            "counters": counters if counters is not None else {"out_of_sequence": 5, "packet_seq_err": 0,
                                                                 "rx_discards_phy": 2},
            "counters_error": None}


def facts(*ports: dict) -> dict:
    return {"preflight": {"roce": {"probe": "roce", "ports": list(ports)}}}


GOOD = facts(port())


def test_recorded_pfc_on_3_with_ecn_and_dscp_passes_every_setting():
    for crit in ("roce_pfc", "roce_ecn", "roce_trust"):
        status, msg, rec = run_check(crit, GOOD)
        assert status == "PASS", (crit, msg)
    assert run_check("roce_pfc", GOOD)[2]["measured"] == "1/1 ports"


def test_recorded_pfc_off_on_3_fails_naming_port_netdev_and_priorities():
    status, msg, _ = run_check("roce_pfc", facts(port("mlnx_qos-doc2792.txt")))
    assert status == "FAIL"
    assert "mlx5_0/1 (eth2) PFC on priorities 0,2,6,7, not 3 (read by mlnx_qos)" in msg
    assert "go-back-N" in msg and "nic-configuration-operator" in msg


def test_fake_ecn_off_on_the_priority_fails_naming_the_point():
    status, msg, _ = run_check("roce_ecn", facts(port(np=(0, 0, 0, 0, 0, 0, 0, 0))))
    assert status == "FAIL" and "mlx5_0/1 (eth2) ECN roce_np off on priority 3 (on: none)" in msg


def test_recorded_doc2792_trust_under_a_pcp_site_profile_fails(tmp_path):
    (tmp_path / "site.yaml").write_text(
        "extends: local\ndescription: a site trusting PCP\ncriteria:\n"
        "  roce_trust: {equals: pcp, unit: '(trust mode)', source: 'site policy'}\n")
    trust, _ = probe.parse_mlnx_qos(recorded("mlnx_qos-doc2792.txt"))
    site = profiles.load(str(tmp_path / "site.yaml"))
    status, msg, _ = run_check("roce_trust", facts(port(trust=trust)), site)
    assert status == "FAIL" and "mlx5_0/1 (eth2) trusts dscp, not pcp" in msg


def test_infiniband_ports_and_no_rdma_are_na_saying_so_and_no_facts_errors():
    ib = facts({"port": "mlx5_0/1", "link_layer": "InfiniBand"})
    for crit in ("roce_pfc", "roce_ecn", "roce_trust", "roce_uniform", "roce_loss", "roce_congestion"):
        status, msg, _ = run_check(crit, ib, end={"ports": []})
        assert status == "N.A." and "mlx5_0/1 InfiniBand" in msg and "Ethernet ports only" in msg, crit
        status, msg, _ = run_check(crit, facts(), end={"ports": []})
        assert status == "N.A." and "no RDMA port" in msg, crit
    status, msg, _ = run_check("roce_pfc", {"preflight": {}})
    assert status == "ERROR" and "no RoCE facts" in msg


def test_unreadable_settings_error_never_pass():
    p = {**port(), "pfc": None, "trust": None, "qos_error": "mlnx_qos: not found; dcb: not found",
         "ecn": {"roce_np": [None] * 8, "roce_rp": [None] * 8}}
    for crit, words in (("roce_pfc", "PFC unreadable"), ("roce_trust", "trust mode unreadable"),
                        ("roce_ecn", "ECN enable files absent")):
        status, msg, _ = run_check(crit, facts(p))
        assert status == "ERROR" and words in msg and "mlx5_0/1 (eth2)" in msg, crit


def test_fake_host_unlike_the_others_fails_naming_it_and_the_difference():
    others = {f"node{i}": GOOD for i in (2, 3, 4)}
    odd = facts(port("mlnx_qos-doc2792.txt"))
    status, msg, _ = run_check("roce_uniform", odd, others=others)
    assert status == "FAIL"
    assert ("node1 has PFC on 0,2,6,7, ECN np 3 rp 3, trust dscp; the other 3 host(s) (node2, node3, node4) "
            "have PFC on 3, ECN np 3 rp 3, trust dscp") in msg
    assert run_check("roce_uniform", GOOD, others=others)[0] == "PASS"
    status, _, rec = run_check("roce_uniform", odd, others={"node2": GOOD})  # a tie blames no one
    assert status == "PASS" and "no majority" in rec["note"]
    assert run_check("roce_uniform", GOOD)[0] == "N.A."


def test_fake_loss_counters_growing_fail_and_still_pass():
    end = {"ports": [{"port": "mlx5_0/1", "counters": {"out_of_sequence": 5, "packet_seq_err": 0,
                                                       "rx_discards_phy": 2}}]}
    assert run_check("roce_loss", GOOD, end=end)[0] == "PASS"
    grown = copy.deepcopy(end)
    grown["ports"][0]["counters"].update(out_of_sequence=105, rx_discards_phy=1)
    status, msg, rec = run_check("roce_loss", GOOD, end=grown)
    assert status == "FAIL" and rec["measured"] == 100
    assert "mlx5_0/1 (eth2) out_of_sequence +100 (5 -> 105)" in msg
    assert "rx_discards_phy went back from 2 to 1 (reset during the run)" in msg


def test_recorded_pfc_less_port_lacks_its_pause_counters_so_a_pause_bound_errors(tmp_path):
    (tmp_path / "site.yaml").write_text(
        "extends: local\ndescription: a site bounding pauses\ncriteria:\n  roce_congestion: {max: 1000, "
        "unit: frames, counters: ['rx_prio{p}_pause', np_cnp_sent], source: 'site policy: measured healthy "
        "runs x 2'}\n")
    c = probe.parse_ethtool(recorded("ethtool-S-prio-byteps179.txt"))
    site = profiles.load(str(tmp_path / "site.yaml"))
    status, msg, _ = run_check("roce_congestion", facts(port(counters=c)), site,
                               end={"ports": [{"port": "mlx5_0/1", "counters": c}]})
    assert status == "ERROR" and "mlx5_0/1 (eth2) rx_prio3_pause (not in ethtool -S nor hw_counters)" in msg
    grown = {"rx_prio3_pause": 5000, "np_cnp_sent": 10}
    start = {"rx_prio3_pause": 0, "np_cnp_sent": 0}
    status, msg, _ = run_check("roce_congestion", facts(port(counters=start)), site,
                               end={"ports": [{"port": "mlx5_0/1", "counters": grown}]})
    assert status == "FAIL" and "rx_prio3_pause +5000 (0 -> 5000)" in msg and "np_cnp_sent" not in msg


def test_congestion_has_no_public_bound_so_it_is_na_on_a_roce_host_saying_so():
    status, msg, _ = run_check("roce_congestion", GOOD, end={"ports": []})
    assert status == "N.A." and "no public bound exists; a site sets roce_congestion" in msg


def test_a_missing_threshold_errors_never_passes(tmp_path):
    (tmp_path / "p.yaml").write_text("extends: local\ndescription: x\ncriteria:\n  roce_pfc: null\n")
    status, msg, _ = run_check("roce_pfc", GOOD, profiles.load(str(tmp_path / "p.yaml")))
    assert status == "ERROR" and "no threshold for 'roce_pfc'" in msg


def test_a_slow_allreduce_names_pfc_or_ecn_off():
    prof = profiles.load("local")
    all_facts = {"node1": GOOD, "node2": facts(port("mlnx_qos-doc2792.txt")), "node3": ProbeError("down"),
                 "node4": facts(port(np=(0,) * 8))}
    cause = judge.slow_fabric_cause(all_facts, prof)
    assert cause.startswith("lossless RoCE not configured (node2: PFC off on priority 3; node4: ECN off on "
                            "priority 3)")
    assert judge.slow_fabric_cause({"node1": GOOD, "node2": facts()}, prof) == ""


def test_fake_hostile_text_stays_inert_and_bounded():
    evil = {**port(trust="\x1b[2J" + "x" * 500), "port": "\x1b]0;pwn\x07" * 40, "netdev": "e\nth"}
    status, msg, _ = run_check("roce_trust", facts(evil))
    assert status == "FAIL" and "\x1b" not in msg and "\x07" not in msg and len(msg) < 2000
    assert "\x1b" not in judge.settings(facts(evil)["preflight"]["roce"])


def test_profile_rejects_a_bad_priority_trust_or_counter(tmp_path):
    for body, err in (("roce_pfc: {equals: 9, unit: p, source: s}", "expected a priority 0-7"),
                      ("roce_trust: {equals: vlan, unit: t, source: s}", "expected pcp or dscp"),
                      ("roce_loss: {max: 0, unit: n, source: s, counters: [rx_bytes]}",
                       "counters: expected")):
        (tmp_path / "p.yaml").write_text(f"extends: local\ndescription: x\ncriteria:\n  {body}\n")
        with pytest.raises(InputError, match=err):
            profiles.load(str(tmp_path / "p.yaml"))


def test_preflight_says_the_settings_and_the_fail_before_anything_runs():
    ctx = preflight.Context(None, profiles.load("local"), frozenset(families.criteria()), 2)
    from signoff import roce
    said, warned = roce.preflight(ctx, "node1", facts(port("mlnx_qos-doc2792.txt")))
    assert said == ["roce: PFC on 0,2,6,7, ECN np 3 rp 3, trust dscp on 1 Ethernet RDMA port(s)"]
    assert warned == ["roce_pfc FAILs: mlx5_0/1 (eth2) PFC on priorities 0,2,6,7, not 3 (read by mlnx_qos)"]
    assert roce.preflight(ctx, "node1", facts()) == ([], [])  # no RDMA: nothing said (the lab's veths)


def test_counter_checks_run_late_but_before_the_gpu_families_last():
    class It:
        def __init__(self, n):
            self.name = self.originalname = n
    # the gpu family's hook not yet run: its own checks still at the start
    items = [It(n) for n in ("test_error_counters", "test_roce_loss", "test_a", "test_roce_congestion",
                             "test_b", "test_xid_during_run")]
    roce_plugin.pytest_collection_modifyitems(None, None, items)
    assert [i.name for i in items] == ["test_a", "test_b", "test_roce_loss", "test_roce_congestion",
                                       "test_error_counters", "test_xid_during_run"]


def test_methodology_says_the_tools_only_where_a_host_had_roce():
    na = {"results": [{"criterion": "roce_pfc", "status": "N.A."}]}
    assert roce_plugin.pytest_signoff_methodology(na, None) == []
    failed = {"results": [{"criterion": "roce_pfc", "status": "FAIL"}]}
    rows = roce_plugin.pytest_signoff_methodology(failed, None)
    assert [r["check"] for r in rows] == ["roce_pfc, roce_ecn, roce_trust, roce_uniform",
                                          "roce_loss, roce_congestion"]


def test_inbox_driver_without_the_ecn_files_errors_saying_where_ecn_lives():
    """The kernel's mlx5 has no per-priority ECN enable (debugfs cc_params only): ERROR saying so."""
    p = {**port(), "ecn": {"roce_np": [None] * 8, "roce_rp": [None] * 8}}
    status, msg, _ = run_check("roce_ecn", facts(p))
    assert status == "ERROR" and "inbox mlx5 driver has none" in msg and "cc_params" in msg


def test_no_mlnx_qos_reads_pfc_from_the_kernels_dcb(tmp_path, monkeypatch):
    """mlnx_qos absent (an inbox driver): iproute2's `dcb pfc show` gives PFC (its line format)."""
    monkeypatch.setattr(probe, "SYS", str(sysfs(tmp_path)))

    def run(argv, timeout=5):
        if argv[:2] == ["dcb", "pfc"]:
            return "pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off " \
                   "7:off\n", None
        if argv[:2] == ["dcb", "app"]:
            return "dscp-prio 24:3 26:3\n", None
        return None, f"{argv[0]}: not found"
    (p,) = probe.read(run)["ports"]
    assert (p["pfc"], p["pfc_from"], p["trust"], p["trust_from"]) == ([0, 0, 0, 1, 0, 0, 0, 0], "dcb pfc",
                                                                      "dscp", "dcb app")


def test_report_section_shows_each_counters_growth_per_host():
    """Pause frames and CNPs shown whatever roce_congestion's verdict (fake growth: no capture over a run)."""
    from signoff.roce import report
    rec = {"criterion": "roce_loss", "host": "node2", "status": "PASS", "details": {
        "before": {"mlx5_0/1": {"rx_prio3_pause": 0, "np_cnp_sent": 10, "out_of_sequence": 5}},
        "after": {"mlx5_0/1": {"rx_prio3_pause": 5000, "np_cnp_sent": 12, "out_of_sequence": 5}}}}
    got = report.rows([rec])
    assert [(r["counter"], r["growth"], r["kind"]) for r in got] == [
        ("rx_prio3_pause", 5000, "congestion"), ("np_cnp_sent", 2, "congestion"),
        ("out_of_sequence", 0, "loss")]
    html = str(report.section([rec, {**rec, "host": "<b>x</b>"}]))
    assert "Lossless RoCE" in html and "+5000" in html and "<b>x</b>" not in html
    assert report.section([]) == ""
