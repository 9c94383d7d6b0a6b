"""UNSEEN (issue 52 item 3): what a rented machine's form cannot show is listed, never a PASS and
never a misleading ERROR. Pure parts first (the verdict, the exit code, every output's words,
results.json and its rebuild, --unseen-error), then the checks that raise it, on the recorded 2x
H200 of tests/test_health_recorded.py read as a VM slice in a container (its sysinfo's form;
this machine has no DCGM and no InfiniBand port, as such a slice), and `signoff plan`'s lines."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_cli import LOCK_WAIT
from test_health_recorded import ROOT
from test_xid_recorded import recorded_facts, recorded_host

from signoff import junit, preflight, profiles, report, results, unseen
from signoff.check import cannot_show
from signoff.recorder import _status
from signoff.results import Results, exit_code, verdict

XID = unseen.XID_ASK
DCGM = "a DCGM diagnostic run (dcgmi diag -r 3) on the host"
HOSTILE = "<img src=x onerror=alert(1)>"


def rec(status, host="lab1", criterion="gpu_model", **kw):
    return {"test": f"acceptance/test_x.py::test_{criterion}[{host}]", "criterion": criterion, "host": host,
            "status": status, "message": kw.pop("message", ""), **kw}


def seen(host="lab1", criterion="xid_history", ask=XID, why="a container, run as tenant, not root"):
    return rec("UNSEEN", host, criterion, ask=ask, why=why,
               message=f"{unseen.PREFIX} {unseen.message(ask, why)}")


def doc_of(records, verdict_word=None) -> dict:
    return {"meta": {"profile": "h200-8x-nvlink@2", "hosts": sorted({r["host"] for r in records})},
            "verdict": verdict_word or verdict(records), "hosts": {}, "results": records}


def test_unseen_never_changes_a_pass_and_alone_is_incomplete():
    ok = [rec("PASS"), seen(), seen(criterion="dcgm_diag", ask=DCGM, why="no DCGM in this VM")]
    assert verdict(ok) == "PASS"
    assert exit_code({**doc_of(ok), "meta": {}}) == (0, "PASS")
    assert verdict([seen(), rec("N.A.")]) == "INCOMPLETE"
    assert exit_code({**doc_of([seen()]), "meta": {}})[0] == results.EXIT_INCOMPLETE
    assert verdict([seen(), rec("ERROR")]) == "ERROR" and verdict([seen(), rec("FAIL")]) == "FAIL"
    # one phase's UNSEEN is outranked by a judgement, outranks N.A.
    assert results.worse("UNSEEN", "FAIL") == "FAIL" and results.worse("N.A.", "UNSEEN") == "UNSEEN"
    assert results.worse("UNSEEN", "NOT RUN") == "NOT RUN"
    assert unseen.verdict_suffix(doc_of(ok)) == (f"; 2 checks this machine cannot show: ask the provider for "
                                                 f"{XID}, {DCGM}")
    many = doc_of([rec("PASS"), seen(), seen("lab2")])
    assert unseen.verdict_suffix(many) == f"; 2 checks these machines cannot show: ask the provider for {XID}"


def test_every_output_says_what_to_ask_for_and_a_hostile_host_stays_text(tmp_path):
    recs = [rec("PASS"), seen(), seen(HOSTILE, why=f"a container {HOSTILE}"),
            seen("lab2", "dcgm_diag", DCGM, "no DCGM in this VM")]
    doc = doc_of(recs)
    page = str(report.cover("PASS", doc))
    assert "What this machine cannot show: ask the provider for ..." in page
    assert "3 checks these machines cannot show: ask the provider for" in page
    assert HOSTILE not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    shown = XID.replace("'", "&#x27;")  # one line per ask and why, its hosts folded
    assert f"<b>{shown}</b> (xid_history on lab1): a container, run as tenant, not root</li>" in page
    md = report.markdown(doc)
    assert md.splitlines()[0] == ("# GPU cluster sign-off: PASS; 3 checks these machines cannot show: ask "
                                  f"the provider for {XID}, {DCGM}")
    assert "## What this machine cannot show" in md
    assert f"- UNSEEN dcgm_diag on lab2: ask the provider for {DCGM} (no DCGM in this VM)" in md
    junit.write(tmp_path / "junit.xml", doc)
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite.get("skipped") == "3" and suite.get("errors") == "0"
    said = [c for c in suite.findall("testcase") if c.get("name") == "verdict"][0]
    assert {p.get("name"): p.get("value") for p in said.iter("property")}["cannot_show"] == \
        f"3 checks these machines cannot show: ask the provider for {XID}, {DCGM}"
    skipped = [c.find("skipped") for c in suite.findall("testcase") if c.find("skipped") is not None]
    assert {s.get("type") for s in skipped} == {"UNSEEN"}
    props = {p.get("name"): p.get("value") for c in suite.findall("testcase") for p in c.iter("property")}
    assert props["ask"] in (XID, DCGM)


def test_results_json_keeps_ask_and_why_and_a_rebuild_gives_them_back(tmp_path):
    r = Results(tmp_path / "results.json", {"profile": "h200-8x-nvlink@2"})
    for x in (rec("PASS"), seen(), seen("lab2")):
        r.add(x)
    assert r.finish(partial=None) == "PASS"
    got = results.load(tmp_path)
    assert [(x["status"], x.get("ask"), x.get("why")) for x in got["results"]][1:] == \
        [("UNSEEN", XID, "a container, run as tenant, not root")] * 2
    assert got["meta"]["exit_code"] == 0
    (tmp_path / "results.json").unlink()
    assert results.main(["rebuild", str(tmp_path)]) == 0
    back = results.load(tmp_path)
    assert [x.get("ask") for x in back["results"]] == [None, XID, XID]
    assert "1 check" not in (tmp_path / "report.md").read_text()
    assert "2 checks these machines cannot show" in (tmp_path / "report.md").read_text()


def test_unseen_error_makes_it_an_error_with_the_same_ask():
    call = pytest.CallInfo.from_call(lambda: cannot_show("the NVLink fabric state", "a slice"), "call")
    rep = SimpleNamespace(passed=False, skipped=True,
                          longrepr=("signoff/check.py", 1, f"Skipped: {call.excinfo.value.msg}"))
    assert _status(rep, call) == ("UNSEEN", "UNSEEN: this machine cannot show it (a slice): ask the provider "
                                            "for the NVLink fabric state")
    strict = "a slice: cannot be shown here (--unseen-error): ask the provider for the NVLink fabric state"
    assert _status(rep, call, unseen_error=True) == ("ERROR", strict)
    # a skip whose text poses as ours (a host's words) is no UNSEEN
    fake = pytest.CallInfo.from_call(lambda: pytest.skip("UNSEEN: x"), "call")
    assert _status(SimpleNamespace(passed=False, skipped=True, longrepr=("f", 1, "Skipped: UNSEEN: x")),
                   fake)[0] == "NOT RUN"


FORM = {"kinds": ["vm", "container"], "vm": {"name": "kvm", "by": ["cpuinfo: hypervisor flag"]},
        "container": {"name": "docker", "by": ["/.dockerenv"]}, "root": False, "user": "tenant",
        "kernel_log": {"readable": False, "why": "dmesg: read kernel buffer failed: Operation not permitted"},
        "nics": [{"name": "eth0", "driver": "virtio_net", "speed_mbps": None, "virtual": False, "vf": False}]}


def test_the_form_decides_unseen_and_bare_metal_stays_an_error():
    vm = {"preflight": {"form": FORM}}
    metal_root = {"preflight": {"form": {"kinds": [], "root": True, "kernel_log": {"readable": False}}}}
    assert unseen.dcgm_unseen(vm, 3) == (DCGM, "no DCGM in this VM (kvm) and container (docker)")
    assert unseen.dcgm_unseen(metal_root, 3) is None and unseen.dcgm_unseen({}, 3) is None
    ask, why = unseen.xid_unseen(vm, "recorded log: no such file")
    assert ask == XID and why.startswith("a VM (kvm) and container (docker), run as tenant, not root: the "
                                         "kernel log is not readable here (dmesg: read kernel buffer failed")
    assert unseen.xid_unseen(metal_root, "dmesg: Operation not permitted") is None  # root on metal: fix it
    vm_user = {"preflight": {"form": {"kinds": ["vm"], "vm": {"name": "kvm"}, "root": False, "user": "u"}}}
    assert unseen.xid_unseen(vm_user, "dmesg: read kernel buffer failed: Operation not permitted") == \
        (XID, "a VM (kvm), run as u, not root: the kernel log is not readable here (dmesg: read kernel "
              "buffer failed: Operation not permitted)")
    assert unseen.xid_unseen(vm_user, "journalctl: no kernel messages") is None  # not a permission


def test_bare_metal_run_as_a_user_is_an_error_with_its_fix_never_unseen():
    """On bare metal the operator is the provider: a log the user may not read is the run's to fix."""
    denied = "dmesg: read kernel buffer failed: Operation not permitted"
    for metal in ({"preflight": {"form": {"kinds": [], "root": False, "user": "u"}}},
                  {"preflight": {"form": {"kinds": [], "root": False, "kernel_log": {"readable": False}}}}):
        assert unseen.xid_unseen(metal, denied) is None
        assert unseen.xid_fix(metal, denied) == ("; the kernel log needs a permission this user lacks: run "
                                                 "as root, or as a user in the adm or systemd-journal group")
    assert unseen.xid_fix({"preflight": {"form": {"kinds": [], "root": True}}}, denied) == ""
    assert unseen.xid_fix({"preflight": {"form": FORM}}, denied) == ""  # a VM's: UNSEEN instead


SLICE = "h200-8x-nvlink@2"  # a slice of a class with an NVLink fabric and 8 InfiniBand ports
METAL = {"preflight": {"form": {"kinds": [], "root": True, "user": "root",
                                "nics": [{"name": "eth0", "driver": "ixgbe"}]}}}


def test_fake_fabric_state_nvml_reports_on_a_slice_is_judged_and_none_unseen_only_in_a_vm():
    """Fake GPU fabric facts (no NVSwitch here): a state NVML reports on a slice is the class's to
    judge, whatever the form; none reported is UNSEEN in a VM, the class's ERROR on bare metal."""
    prof, vm = profiles.load(SLICE), {"preflight": {"form": FORM}}
    not_started = {0: {"state": 1, "status": 0}, 1: {"state": 1, "status": 0}}
    none = {0: {"state": 0, "error": "NotSupported"}, 1: None}
    assert unseen.fabric_class(prof).name == "h200-8x-nvlink"
    assert unseen.fabric_unseen(prof, vm, not_started) is None  # judged: NOT_STARTED FAILs
    assert unseen.fabric_unseen(prof, vm, none) == (unseen.FABRIC_ASK, "a slice of 2 of the 8 GPUs of "
                                                    "h200-8x-nvlink: the fabric manager runs outside this "
                                                    "machine")
    assert unseen.fabric_unseen(prof, METAL, none) is None and unseen.fabric_unseen(prof, {}, none) is None
    assert unseen.fabric_unseen(profiles.load("h200-8x-nvlink"), vm, none) is None  # the class: no slice


def test_fake_nic_facts_a_slice_without_infiniband_is_unseen_only_in_a_vm_or_container():
    prof = profiles.load(SLICE)
    assert unseen.nic_unseen(prof, {"preflight": {"form": FORM}}, [], "eth0")[1] == \
        "a slice with the provider's NIC eth0 (virtio_net)"
    assert unseen.nic_unseen(prof, METAL, [], "eth0") is None  # bare metal: its IB driver did not load
    assert unseen.nic_unseen(prof, {}, [], None) is None


def test_a_hostile_form_gives_bounded_words_to_every_unseen():
    """A form of megabytes (names, user, the log's why, a thousand NICs) reaches the skip, results.json,
    junit, the cover and the plan only cut: each value as signoff/form/judge.py text(), two NICs."""
    big = HOSTILE * 200_000
    nics = [{"name": f"{big[:30_000]}{i}", "driver": big} for i in range(1000)]
    hostile = {"preflight": {"form": {
        "kinds": ["vm", "container"], "vm": {"name": big}, "container": {"name": big}, "root": False,
        "user": big, "kernel_log": {"readable": False, "why": big}, "nics": nics}}}
    why = [unseen.xid_unseen(hostile, big)[1], unseen.dcgm_unseen(hostile, 3)[1],
           unseen.nic_unseen(profiles.load(SLICE), hostile, [], None)[1]]
    assert all(len(w) < 400 for w in why), [len(w) for w in why]
    assert why[2].endswith(" and 998 more") and why[2].count("(") == 2, why[2]
    assert all("\x1b" not in w for w in why)
    assert len(unseen.text(big, 120)) == 120


def test_plan_says_unseen_before_anything_runs_and_error_under_the_option():
    from signoff import dcgm, fabric, gpu
    prof = profiles.load("h200-8x-nvlink@2")
    facts = {"nvidia": {"gpus": [{"index": 0}, {"index": 1}]}, "torch": {"version": "2.11.0"},
             "preflight": {"form": FORM, "tools": {"journalctl": False},
                           "dcgm": {"dcgmi": False, "error": "dcgmi not installed"}}}
    host = SimpleNamespace(name="gpunode", python="python3", data_iface=None)

    def warned(family, option=False):
        config = SimpleNamespace(getoption=lambda name, default=None:
                                 option if name == "unseen_error" else default)
        ctx = preflight.Context(config, prof, frozenset({"dcgm_diag", "xid_history", "xid_during_run",
                                                         "nvlink_fabric"}), 1)
        return family.preflight(ctx, host, facts)[1]
    said = warned(dcgm) + warned(gpu) + warned(fabric)
    assert said[0] == (f"dcgm_diag UNSEEN (this machine cannot show it: no DCGM in this VM (kvm) and "
                       f"container (docker): dcgmi not installed): ask the provider for {DCGM}")
    assert any(x.startswith("xid_history, xid_during_run UNSEEN (this machine cannot show it: a VM (kvm)")
               for x in said), said
    assert said[-1] == ("nvlink_fabric UNSEEN (this machine cannot show it: a slice of 2 of the 8 GPUs of "
                        "h200-8x-nvlink: the fabric manager runs outside this machine): ask the provider "
                        f"for {unseen.FABRIC_ASK}")
    assert not [x for x in said if preflight.PREDICTS.search(x)]  # no exit 6 for what the form cannot show
    strict = warned(dcgm, True) + warned(gpu, True) + warned(fabric, True)
    assert len([x for x in strict if preflight.PREDICTS.search(x) and "(--unseen-error)" in x]) == 3, strict


def accept(tmp_path: Path, *args: str, form=FORM, change=lambda facts: None) -> tuple:
    """dcgm_diag, the XID checks, nvlink_fabric, nic_link and gpu_model on the recorded 2x H200 as a
    2-GPU slice of h200-8x-nvlink, its sysinfo's form a VM in a container run as a user without the
    kernel log (its recorded log absent); this machine's own DCGM (none) and ports (no InfiniBand)."""
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": tmp_path / "no-access.log"})

    def put(facts):
        facts.setdefault("preflight", {}).update(form=form)
        change(facts)
    recorded_facts(tmp_path, put)
    rd = tmp_path / "report"
    sheet = [f"acceptance/test_{f}.py" for f in ("dcgm", "health", "fabric", "network", "gpu_health")]
    p = subprocess.run([sys.executable, "-m", "pytest", *sheet,
                        "-k", "dcgm_diag or xid or nvlink_fabric or nic_link or gpu_model", "--partial",
                        "--inventory", str(inv), "--profile", "h200-8x-nvlink@2", "--report-dir", str(rd),
                        "-p", "no:cacheprovider", *LOCK_WAIT, *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert (rd / "results.json").exists(), p.stdout[-3000:] + p.stderr[-3000:]
    return p, rd, {r["criterion"]: r for r in results.load(rd)["results"]}


ASKED = {"dcgm_diag": DCGM, "xid_history": XID, "xid_during_run": XID, "nvlink_fabric": unseen.FABRIC_ASK,
         "nic_link": "the server's 8 x 400 Gb/s InfiniBand ports of h200-8x-nvlink"}


def test_recorded_vm_slice_in_a_container_lists_what_it_cannot_show_and_passes(tmp_path):
    p, rd, r = accept(tmp_path)
    assert r["gpu_model"]["status"] == "PASS", r["gpu_model"]
    for crit, ask in ASKED.items():
        assert (r[crit]["status"], r[crit].get("ask")) == ("UNSEEN", ask), r[crit]
    assert r["nvlink_fabric"]["why"] == ("a slice of 2 of the 8 GPUs of h200-8x-nvlink: the fabric manager "
                                         "runs outside this machine")
    assert r["nic_link"]["why"] == "a slice with the provider's NIC eth0 (virtio_net)"
    assert r["dcgm_diag"]["why"].startswith("no DCGM in this VM (kvm) and container (docker): ")
    assert r["xid_history"]["why"].startswith("a VM (kvm) and container (docker), run as tenant, not root")
    assert p.returncode == 0, p.stdout[-3000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("verdict: "))
    assert line.startswith(f"verdict: PASS; 5 checks this machine cannot show: ask the provider for {DCGM}, "
                           f"{XID}, {unseen.FABRIC_ASK}, the server's 8 x 400 Gb/s"), line
    assert "  UNSEEN xid_history, xid_during_run on gpunode: ask the provider for" in p.stdout
    page = (rd / "report.html").read_text()
    assert "What this machine cannot show: ask the provider for ..." in page
    assert "5 checks this machine cannot show" in (rd / "report.md").read_text()


def test_recorded_unseen_error_makes_each_an_error_exit_2(tmp_path):
    p, _, r = accept(tmp_path, "--unseen-error")
    for crit, ask in ASKED.items():
        assert r[crit]["status"] == "ERROR" and r[crit]["message"].endswith(
            f"cannot be shown here (--unseen-error): ask the provider for {ask}"), r[crit]
        assert r[crit]["ask"] == ask
    assert r["gpu_model"]["status"] == "PASS" and p.returncode == 2, p.stdout[-2000:]


def test_recorded_bare_metal_slice_with_fake_fabric_not_started_is_judged_never_unseen(tmp_path):
    """The recorded 2x H200 on bare metal run as a user (no kernel log), its GPUs' fabric NOT_STARTED
    as a fake NVML reports it (fabric_fake: no NVSwitch here): nvlink_fabric FAILs by the class's
    rule, the XID checks ERROR saying the fix, nic_link and dcgm_diag are not UNSEEN."""
    import fabric_fake
    metal = {"kinds": [], "root": False, "user": "ops", "kernel_log": {"readable": False, "why": "EPERM"},
             "nics": [{"name": "eth0", "driver": "ixgbe"}]}

    def fm_down(facts):
        for g, fab in zip(facts["nvidia"]["gpus"], fabric_fake.read([fabric_fake.FM_DOWN] * 2)):
            g["fabric"] = fab
    p, _, r = accept(tmp_path, form=metal, change=fm_down)
    fab = r["nvlink_fabric"]
    assert fab["status"] == "FAIL" and "fabric state not started" in fab["message"], fab
    for crit in ("xid_history", "xid_during_run"):
        assert r[crit]["status"] == "ERROR" and r[crit]["message"].endswith(
            "run as root, or as a user in the adm or systemd-journal group"), r[crit]
    assert r["dcgm_diag"]["status"] == "ERROR" and r["nic_link"]["status"] != "UNSEEN", r["nic_link"]
    assert "UNSEEN" not in {x["status"] for x in r.values()} and p.returncode != 0
    assert r["nic_link"]["message"] == ("N.A.: gpunode: single host and no data_iface named in the "
                                        "inventory"), r["nic_link"]  # as on any host of one


def test_a_host_of_errors_and_unseen_is_one_that_did_not_answer():
    """UNSEEN judges nothing, as N.A.: lab1's one ERROR on every check (and an UNSEEN) is a host
    that did not answer, said on its own, so the FAIL lab2 and lab3 share stays the run's one line."""
    checks = ("gpu_model", "gpu_temp", "hbm_bandwidth")
    down = [rec("ERROR", "lab1", c, message="lab1: unreachable: ssh: connection refused") for c in checks]
    hbm = [rec("FAIL", h, "hbm_bandwidth", measured=2900.0, unit="GB/s", expected=">= 3000 GB/s",
               message=f"{h}: hbm_bandwidth = 2900 GB/s, expected >= 3000 GB/s") for h in ("lab2", "lab3")]
    ok = [rec("PASS", h, c) for h in ("lab2", "lab3") for c in checks[:2]]
    lines = [report.problem_line(g) for g in report.problem_groups(down + hbm + ok + [seen("lab1")])]
    assert [x[0] for x in lines] == ["2 hosts lab[2-3]", "lab1"], lines
    assert lines[0][2].startswith("every host alike: more likely the profile"), lines  # not each host's
    assert lines == [report.problem_line(g) for g in report.problem_groups(down + hbm + ok)]
