"""XIDs on a fresh node and during the run (issue 29 item 2, issue 32 items 1, 2, 8) on the
recorded 2x H200 of tests/test_health_recorded.py: recorded kernel logs and journals carry their
own times, and the recorded sysinfo its host's clock at the run's start, so nothing here reads
this machine's clock or uptime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_cli import LOCK_WAIT
from test_health_recorded import ROOT, judged, recorded_facts, recorded_host, sysinfo_probe

from signoff import InputError, profiles
from signoff.gpu import judge
from signoff.results import load as load_results

CLOCK = 1_764_633_600.0  # the recorded host's clock when the run began (sysinfo's "clock")
BOOTED = "2025-12-01T23:59:00Z"  # CLOCK - 60 s
UP_10_DAYS = 10 * 86400
XID_13 = "NVRM: Xid (PCI:0000:00:07): 13, pid=4242, Graphics Exception"
XID_79 = "NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', GPU has fallen off the bus."


def dmesg(path: Path, btime: float, lines) -> Path:
    """A recorded dmesg (`[seconds since boot] text`) after its machine's `btime` line; each
    line (epoch, text)."""
    path.write_text(f"btime {int(btime)}\n"
                    + "".join(f"[{t - int(btime):12.6f}] {text}\n" for t, text in lines))
    return path


def fresh_node(tmp_path: Path, lines=()) -> Path:
    """The recorded H200 booted a minute before the run (a VM just handed over): its dmesg holds
    this boot only."""
    log = dmesg(tmp_path / "kern.log", CLOCK - 60, [(CLOCK - 60, "Linux version 6.1.0 (recorded)"),
                                                    (CLOCK - 56, "NVRM: loading NVIDIA UNIX Open Kernel "
                                                                 "Module for x86_64  570.195.03"), *lines])
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    return inv


def site_profile(tmp_path: Path, xid: str) -> str:
    prof = tmp_path / "site.yaml"
    prof.write_text(f"extends: h200-8x-nvlink@2\ncriteria:\n  xid_fatal: {xid}\n")
    return str(prof)


def test_fresh_node_passes_xid_history_stating_what_its_log_covers(tmp_path):
    """issue 29 item 2: a node booted a minute before PASSes under the shipped 168 h window (before:
    ERROR "covers the last 1 min only"), and what its log covers is said in the check's details,
    on the report's cover (report.html, report.md) and in the terminal."""
    inv = fresh_node(tmp_path)
    rd = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_health.py", "-k", "xid_history",
                        "--partial", "--inventory", str(inv), "--profile", "h200-8x-nvlink@2",
                        "--report-dir", str(rd), "-p", "no:cacheprovider",
                        *LOCK_WAIT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    r = {x["criterion"]: x for x in load_results(rd / "results.json")["results"]}["xid_history"]
    assert r["status"] == "PASS", r
    said = f"covers 1 min: node booted at {BOOTED}; recorded log {tmp_path / 'kern.log'} starts there"
    assert r["details"]["covers"] == said and said in r["message"] + r["note"], r
    assert r["note"] == f"kernel log {said}: the rest of the 168 h window is unseen"
    assert f"xid_history on gpunode: kernel log {said}" in (rd / "report.md").read_text()
    assert "Said with the verdict" in (rd / "report.md").read_text()
    assert f"xid_history on gpunode: kernel log {said}" in (rd / "report.html").read_text()
    assert f"note: xid_history on gpunode: kernel log {said}" in p.stdout


def test_fresh_node_under_require_history_is_an_error(tmp_path):
    """A burn-in site's profile keeps the strict form: 168 h of log or no verdict."""
    prof = site_profile(tmp_path, "{require_history: 168h}")
    r = judged(tmp_path, fresh_node(tmp_path), "-k", "xid_history", profile=prof)["xid_history"]
    assert r["status"] == "ERROR", r
    assert "covers the last 1 min only (from 2025-12-01T23:59:00Z), not the last 168 h (require_history)" \
        in r["message"] and "or drop require_history" in r["message"], r


def test_fresh_node_with_a_fatal_xid_since_boot_fails(tmp_path):
    r = judged(tmp_path, fresh_node(tmp_path, [(CLOCK - 30, XID_79)]), "-k", "xid_history")["xid_history"]
    assert r["status"] == "FAIL" and "XID 79 x1 on PCI:0000:00:06" in r["message"], r
    assert "(covers 1 min: node booted at" in r["message"], r


def test_a_log_that_lost_part_of_this_boot_is_an_error(tmp_path):
    """A node up 10 days whose dmesg (its ring buffer wrapped) holds the last 23 minutes: the
    part of the window since its boot is unseen, so no PASS."""
    log = dmesg(tmp_path / "kern.log", CLOCK - UP_10_DAYS, [(CLOCK - 1380, "usb 1-1: new device")])
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    r = judged(tmp_path, inv, "-k", "xid_history")["xid_history"]
    assert r["status"] == "ERROR", r
    assert "covers the last 23 min only (from 2025-12-01T23:37:00Z), not the last 168 h" in r["message"], r


def test_an_xid_the_runs_own_load_raised_fails_naming_it(tmp_path):
    """issue 32 item 2: the kernel log read again at the end; an XID after the run's start (the
    host's clock) FAILs whatever its code; one before it is the history check's."""
    log = dmesg(tmp_path / "kern.log", CLOCK - UP_10_DAYS, [(CLOCK - UP_10_DAYS, "Linux version 6.1.0"),
                                                          (CLOCK - 3600, XID_13), (CLOCK + 30, XID_79),
                                                          (CLOCK + 40, XID_13)])
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    r = judged(tmp_path, inv, "-k", "xid_during_run")["xid_during_run"]
    assert r["status"] == "FAIL" and r["measured"] == 2, r
    assert "XID 79 on PCI:0000:00:06 at 2025-12-02T00:00:30Z (30 s into the run)" in r["message"], r
    assert "XID 13 on PCI:0000:00:07 at 2025-12-02T00:00:40Z (40 s into the run)" in r["message"], r
    assert "2025-12-01T23:00" not in r["message"] and "likely cause: a GPU" in r["message"], r


def test_no_xid_during_the_run_passes_and_is_read_after_every_other_check(tmp_path):
    log = dmesg(tmp_path / "kern.log", CLOCK - UP_10_DAYS, [(CLOCK - UP_10_DAYS, "Linux version 6.1.0"),
                                                          (CLOCK - 3600, XID_13)])
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    rd = tmp_path / "report"
    subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "--partial", "--inventory", str(inv),
                    "--profile", "h200-8x-nvlink@2", "--report-dir", str(rd), "-p", "no:cacheprovider",
                    "-k", "xid_during_run or gpu_model or xid_history", *LOCK_WAIT],
                   cwd=ROOT, capture_output=True, text=True, timeout=300)
    res = load_results(rd / "results.json")["results"]
    assert [r["criterion"] for r in res][-1] == "xid_during_run", res
    r = {x["criterion"]: x for x in res}
    assert r["xid_during_run"]["status"] == "PASS" and r["xid_during_run"]["measured"] == 0, r
    assert r["xid_history"]["status"] == "PASS" and r["xid_history"]["details"]["counts"] == {"13": 1}, r


def test_a_log_that_lost_the_runs_start_is_an_error(tmp_path):
    """dmesg's ring buffer wrapped during the run: its first line is after the run's start."""
    log = dmesg(tmp_path / "kern.log", CLOCK - UP_10_DAYS, [(CLOCK + 600, "usb 1-1: new device")])
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": log})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    r = judged(tmp_path, inv, "-k", "xid_during_run")["xid_during_run"]
    assert r["status"] == "ERROR" and "not the run since 2025-12-02T00:00:00Z" in r["message"], r


# issue 32 item 1: `codes` validated in every window
@pytest.mark.parametrize("xid, where", [
    ("{window: boot, codes: []}", "xid_fatal.codes: expected a list of XID numbers, got []"),
    ("{window: boot, codes: ['79', '48']}", "xid_fatal.codes: expected a list of XID numbers"),
    ("{window: 168h, codes: ['79']}", "xid_fatal.codes: expected a list of XID numbers"),
    ("{window: boot, require_history: 168h}", "xid_fatal.require_history: expected a duration within "
                                              "window (boot)"),
    ("{require_history: 200h}", "xid_fatal.require_history: expected a duration within window (168h)"),
    ("{require_history: 0h}", "xid_fatal.require_history"),
    ("{window: forever}", "xid_fatal.window: expected a duration like 168h, or boot"),
])
def test_xid_keys_are_checked_in_every_window(tmp_path, xid, where):
    site_profile(tmp_path, xid)
    with pytest.raises(InputError, match=where.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        profiles.load(str(tmp_path / "site.yaml"))


def test_xid_keys_accepted():
    for xid in ("{window: boot, codes: [79]}", "{require_history: 168h}", "{require_history: 24h}"):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            t = profiles.load(site_profile(Path(d), xid)).threshold("xid_fatal")
            assert t.extra["codes"] and t.extra["window"]


def journalctl(bin_dir: Path, journal: list[dict]) -> None:
    """A journalctl that answers from a recorded journal (entries: t, transport, scope, text) as
    the real one does for the options the probe passes: --system/--user, _TRANSPORT=,
    --since/--until (local time), -n, -o short-unix."""
    bin_dir.mkdir()
    rec = bin_dir / "journal.json"
    rec.write_text(json.dumps(journal))
    exe = bin_dir / "journalctl"
    exe.write_text(f"#!{sys.executable}\n" + textwrap.dedent(f"""\
        import json, sys, time
        a, entries = sys.argv[1:], json.load(open({str(rec)!r}))
        at = lambda o: time.mktime(time.strptime(a[a.index(o) + 1], "%Y-%m-%d %H:%M:%S"))
        if "--system" in a: entries = [e for e in entries if e["scope"] == "system"]
        if "--user" in a: entries = [e for e in entries if e["scope"] == "user"]
        for m in [x for x in a if x.startswith("_TRANSPORT=")]:
            entries = [e for e in entries if e["transport"] == m.split("=", 1)[1]]
        if "--since" in a: entries = [e for e in entries if e["t"] >= at("--since")]
        if "--until" in a: entries = [e for e in entries if e["t"] <= at("--until")]
        if "-n" in a: entries = entries[-int(a[a.index("-n") + 1]):]
        for e in entries: print("%.6f gpunode %s: %s" % (e["t"], e.get("tag", "kernel"), e["text"]))
        """))
    exe.chmod(0o755)


def test_journal_coverage_is_proven_by_kernel_entries_of_the_system_journal_only(tmp_path, monkeypatch):
    """issue 32 item 8: a user's journal entry from before the window (and a service's) proves
    nothing of the kernel's messages; the volatile journal's kernel entries start at this boot."""
    boot = CLOCK - 60
    journalctl(tmp_path / "bin", [
        {"t": CLOCK - 30 * 86400, "transport": "journal", "scope": "user", "tag": "bash", "text": "old"},
        {"t": CLOCK - 20 * 86400, "transport": "syslog", "scope": "system", "tag": "cron", "text": "old"},
        {"t": boot, "transport": "kernel", "scope": "system", "text": "Linux version 6.1.0 (recorded)"},
        {"t": boot + 4, "transport": "kernel", "scope": "system", "text": XID_13}])
    probe = sysinfo_probe(monkeypatch, tmp_path)
    monkeypatch.delenv("SIGNOFF_KERNEL_LOG", raising=False)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    monkeypatch.setenv("SIGNOFF_JOURNAL_DIR", str(tmp_path / "no-var-log-journal"))
    monkeypatch.setattr(probe, "_boot_time", lambda: (int(boot), None))
    doc = probe.kernel_xids(CLOCK - 168 * 3600)
    assert doc["source"] == "journal" and doc["counts"] == {"13": 1} and doc["persistent"] is False, doc
    assert doc["covers_from"] == boot, doc  # before: the user's entry made it the window's start
    assert judge.log_cover(doc, CLOCK) == (f"covers 1 min: node booted at {BOOTED}; no persistent journal "
                                           f"(journald keeps this boot only without /var/log/journal)")


def test_a_quiet_kernel_in_a_fake_journal_that_covers_the_run_is_no_xid_where_dmesg_is_refused(tmp_path):
    """issue 42 item 9: the journal (a stand-in: no journald here) holds kernel messages from
    before the run and none since: no XID. It once read as unreadable and fell back to dmesg, which
    a user allowed the journal is refused (dmesg_restrict=1): xid_during_run ERRORed on every
    quiet node. dmesg is refused for real: the probes run without CAP_SYSLOG."""
    journalctl(tmp_path / "bin", [
        {"t": CLOCK - UP_10_DAYS, "transport": "kernel", "scope": "system", "text": "Linux version 6.1.0"},
        {"t": CLOCK - 3600, "transport": "kernel", "scope": "system", "text": "usb 1-1: new device"},
        {"t": CLOCK + 60, "transport": "journal", "scope": "system", "tag": "sshd", "text": "login"}])
    inv = recorded_host(tmp_path, {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"})
    recorded_facts(tmp_path, lambda f: f.update(clock=CLOCK))
    if os.geteuid() == 0:  # root reads dmesg whatever dmesg_restrict says; a user without CAP_SYSLOG not
        py = tmp_path / "recordedpython"
        py.write_text(py.read_text().replace(f"exec {sys.executable}",
                                             f"exec setpriv --bounding-set -syslog {sys.executable}"))
    r = judged(tmp_path, inv, "-k", "xid_during_run")["xid_during_run"]
    assert r["status"] == "PASS" and r["measured"] == 0, r
    assert r["details"]["source"] == "journal" and r["details"]["covers_from"] == CLOCK, r  # never dmesg


def test_what_a_short_log_covers_is_said_by_its_source():
    doc = {"since": CLOCK - 168 * 3600, "covers_from": CLOCK - 60, "boot": CLOCK - 60}
    assert judge.log_cover({**doc, "source": "dmesg (this boot)"}, CLOCK) == \
        f"covers 1 min: node booted at {BOOTED}; no journal: dmesg holds this boot only"
    assert judge.log_cover({**doc, "source": "journal", "persistent": True}, CLOCK + 7200) == \
        f"covers 2.0 h: node booted at {BOOTED}; the persistent journal holds no kernel message before it"
    assert judge.log_cover({**doc, "covers_from": doc["since"], "source": "journal"}, CLOCK) is None
    assert judge.log_short({**doc, "source": "dmesg (this boot)"}, CLOCK, doc["boot"]) is None
    assert judge.log_short({**doc, "source": "dmesg (this boot)"}, CLOCK, doc["since"]) == \
        f"the last 1 min only (from {BOOTED})"


def test_notes_are_one_cover_line_per_criterion_hosts_folded():
    from signoff import report
    rec = lambda h, note: {"criterion": "xid_history", "host": h, "status": "PASS", "note": note}  # noqa: E731
    lines = report.note_lines([rec("node01", "covers 1 min: a"), rec("node02", "covers 2 min: b"),
                               {"criterion": "gpu_model", "host": "node01", "status": "PASS"}])
    assert lines == ["xid_history on 2 hosts node[01-02]: as on node01, covers 1 min: a "
                     "(each host's in results.json)"]
    assert report.note_lines([rec("node01", "covers 1 min: a")]) == ["xid_history on node01: covers 1 min: a"]


# ------------------------------------------------------------------ Blackwell's XIDs (issue 51 item 9)

B300_LOG = ROOT / "tests" / "recorded" / "xid" / "b300-8x-xid145.crafted.journal"
B300_CLOCK = 1_789_084_800.0  # 2026-09-11T00:00:00Z: the crafted log's run (its header)
BLACKWELL = ("b200-8x-nvlink", "b300-8x-nvlink", "gb200-nvl72", "gb300-nvl72")


def b300_pair(facts: dict) -> None:
    """The recorded pair made the B300 pair of NVIDIA/open-gpu-kernel-modules issue 1355: its
    name and PCI addresses (66:00.0, 76:00.0)."""
    facts["clock"] = B300_CLOCK
    for g, bus in zip(facts["nvidia"]["gpus"], ("66", "76")):
        g.update(name="NVIDIA B300 SXM6 AC", pci_device_id="3182", pci_bus_id=f"00000000:{bus}:00.0")


def test_crafted_b300_log_with_xid_145_fails_xid_history_naming_host_gpu_code_and_cause(tmp_path):
    """issue 51 item 9: the crafted B300 log (tests/recorded/xid/, its header says from what):
    XID 145 (NVLink RLW) that the driver calls Fatal on the TP pair. It passed xid_history under
    b300-8x-nvlink (fatal codes 48 .. 95 only); now it FAILs naming host, GPU, code, what the
    driver said and the cause; the Nonfatal 145 of another GPU and the XID 45s are reported."""
    inv = recorded_host(tmp_path, {"SIGNOFF_KERNEL_LOG": B300_LOG})
    recorded_facts(tmp_path, b300_pair)
    r = judged(tmp_path, inv, "-k", "xid_history", profile="b300-8x-nvlink")["xid_history"]
    assert r["status"] == "FAIL" and r["host"] == "gpunode" and r["measured"] == 2, r
    m = r["message"]
    assert "XID 145 x2 on PCI:0000:66:00 (GPU 0), PCI:0000:76:00 (GPU 1): NVLINK_RLW_ERROR, the driver " \
           "said Fatal (RLW_TAGSTATE, sub-code 0, error status 0x00000002)" in m, m
    assert "others: XID 145 x1 Nonfatal, XID 45 x2" in m, m
    assert "likely cause: an NVLink5 error the driver calls fatal" in m, m


def test_nvlink5_xids_are_fatal_as_their_line_says_and_154_as_its_recovery_action(tmp_path, monkeypatch):
    """The probe reads what the driver prints on an NVLink5 line (unit, Fatal / Nonfatal, the
    intrinfo's sub-code, the error status) and XID 154's recovery action; the judge counts the
    catalog rows: 144-150 fatal unless the driver said Nonfatal (a line that says neither is
    fatal: never passed for want of a word), 154 unless the action is None, 137 reported."""
    log = dmesg(tmp_path / "kern.log", CLOCK - 600, [
        (CLOCK - 500, "NVRM: Xid (PCI:0000:00:00): 144, SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 "
                      "0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)"),
        (CLOCK - 400, "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 "
                      "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)"),
        (CLOCK - 300, "NVRM: Xid (PCI:0000:00:00): 150, an MSE line in a form the probe does not know"),
        (CLOCK - 200, "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
                      "(GPU Reset Required)"),
        (CLOCK - 100, "NVRM: Xid (PCI:0008:01:00): 154, GPU recovery action changed from 0x1 (GPU Reset "
                      "Required) to 0x0 (None)"),
        (CLOCK - 50, "NVRM: Xid (PCI:0000:00:00): 137, NVLink: TLC RX PRIV Error")])
    monkeypatch.setenv("SIGNOFF_KERNEL_LOG", str(log))
    doc = sysinfo_probe(monkeypatch, tmp_path).kernel_xids("boot")
    assert doc["kinds"] == {"144": {"Nonfatal": 1}, "149": {"Fatal": 1}, "150": {"unstated": 1},
                            "154": {"1": 1, "0": 1}}, doc["kinds"]
    x149 = next(x for x in doc["xids"] if x["xid"] == 149)
    assert (x149["unit"], x149["severity"], x149["sub_code"], x149["error_status"]) == \
        ("NETIR_LINK_EVT", "Fatal", 37, "0x00000000"), x149  # gpud PR 1160: XID 149.37
    t = profiles.load("b300-8x-nvlink").threshold("xid_fatal")
    assert judge.fatal_xids(doc, t.extra["codes"], t.extra["rows"]) == {149: 1, 150: 1, 154: 1}
    h100 = profiles.load("h100-8x-nvlink").threshold("xid_fatal")
    assert judge.fatal_xids(doc, h100.extra["codes"], h100.extra.get("rows") or {}) == {}
    # an older probe's document (no kinds) or a host's claim of more Nonfatal lines than lines
    assert judge.fatal_xids({**doc, "kinds": None}, [], t.extra["rows"]) == {144: 1, 149: 1, 150: 1, 154: 2}
    assert judge.fatal_xids({**doc, "kinds": {"149": {"Nonfatal": 9}}}, [], {149: "severity"}) == {}


def test_every_blackwell_class_judges_the_catalog_rows_with_a_source():
    """b200, b300, gb200, gb300: NVIDIA's Xid catalog rows of 137, 144-150 and 154, each with its
    rule, the Hopper-era codes still fatal, the source naming the catalog and the B300 report."""
    rows = {137: "reported", **{c: "severity" for c in range(144, 151)}, 154: "recovery"}
    for name in BLACKWELL:
        t = profiles.load(name).threshold("xid_fatal")
        assert t.extra["rows"] == rows and t.extra["codes"] == [48, 63, 64, 74, 79, 92, 94, 95], name
        assert t.extra["window"] == "168h" and t.value == 0, name
        assert "analyzing-xid-catalog" in t.source and "open-gpu-kernel-modules issue 1355" in t.source, name
        assert "leptonai/gpud PR 1160" in t.source, name


@pytest.mark.parametrize("rows, where", [
    ("{145: fatal_maybe}", "xid_fatal.rows.145: expected one of fatal, severity, recovery, reported"),
    ("{'145': severity}", "xid_fatal.rows: expected XID numbers as keys"),
    ("[145]", "xid_fatal.rows: expected a mapping of XID number to rule"),
    ("{79: severity}", "xid_fatal.rows.79: also in codes"),
])
def test_xid_rows_are_checked(tmp_path, rows, where):
    site_profile(tmp_path, f"{{codes: [79], rows: {rows}}}")
    with pytest.raises(InputError, match=where.replace(".", r"\.")):
        profiles.load(str(tmp_path / "site.yaml"))
