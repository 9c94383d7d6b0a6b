"""Evidence per failed host (issue 54 item 1), in process: the host-side probe with STAND-IN tools
(no GPU, no driver here: nvidia-smi, lspci and nvidia-bug-report.sh are small scripts on its PATH)
within its time and size budget, the folder, archive, index and RMA page a failed host gets from
its records and documents, every host string inert there, and the cover's and report.md's line.
A real run on the lab's hosts: tests/test_health_lab.py (one sick host) and tests/test_dcgm_lab.py
(RMA pages of the GPUs a DCGM failure names)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from signoff import InputError, report
from signoff.evidence import collect, plugin, rma

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "signoff" / "evidence" / "probe_evidence.py"
BUDGET = {"mode": "failed", "seconds": 120.0, "bytes": 50 * 10 ** 6}
HOSTILE = "<script>alert(1)</script>\x1b[31m../../x"


def tool(bin_dir: Path, name: str, body: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def probe(tmp_path: Path, *args: str, env: dict | None = None) -> dict:
    """probe_evidence.py as a host runs it: in a dir of the run's own (its cwd), the stand-ins first
    on PATH; its one JSON document."""
    cwd = tmp_path / "run"
    cwd.mkdir(exist_ok=True)
    p = subprocess.run([sys.executable, str(PROBE), *args], cwd=cwd, capture_output=True, text=True,
                       timeout=60, env={"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", **(env or {})})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def running(pid: str) -> bool:
    """A process that is neither gone nor a zombie (killed, not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def pieces(doc: dict) -> dict:
    return {p["name"]: p for p in doc["pieces"]}


def text(p: dict) -> str:
    return base64.b64decode(p["b64"]).decode()


def test_probe_with_stand_in_tools_keeps_each_piece_within_its_size_budget(tmp_path):
    """A recorded kernel log (dmesg's seconds since boot and its btime), a stand-in nvidia-smi of
    3000 bytes, lspci of the vendors' functions, a bug report of 2000 gzipped bytes: 3600 bytes of
    budget keep the kernel lines (with their UTC times) and nvidia-smi whole, cut lspci, and skip the
    bug report whole (a cut gzip is no evidence), each said; nothing is left in the run's dir."""
    (tmp_path / "bin").mkdir()
    tool(tmp_path / "bin", "nvidia-smi", "head -c 3000 /dev/zero | tr '\\0' s")
    tool(tmp_path / "bin", "lspci", 'echo "lspci $*"; head -c 400 /dev/zero | tr "\\0" l')
    tool(tmp_path / "bin", "nvidia-bug-report.sh",
         'head -c 2000 /dev/urandom | gzip -1 > "$2.gz"; head -c 2000 /dev/urandom >> "$2.gz"')
    log = tmp_path / "kern.log"
    log.write_text("btime 1765000000\n[  100.500000] NVRM: Xid (PCI:0000:28:00): 79, pid=1, GPU has fallen "
                   "off the bus.\n[  101.000000] usb 1-1: new device\n")
    doc = probe(tmp_path, "--budget-s", "30", "--budget-bytes", "3600", "--bdf", "00000000:28:00.0",
                env={"SIGNOFF_KERNEL_LOG": str(log)})
    p = pieces(doc)
    assert p["kernel-log"]["status"] == "ok" and p["kernel-log"]["lines"] == 1, p["kernel-log"]
    assert "2025-12-06T05:48:20Z 1765000100.5 NVRM: Xid (PCI:0000:28:00): 79" in text(p["kernel-log"])
    assert "usb" not in text(p["kernel-log"])
    assert p["nvidia-smi-q"]["status"] == "ok" and p["nvidia-smi-q"]["bytes"] == 3000
    left = 3600 - 3000 - p["kernel-log"]["bytes"]
    assert p["lspci"]["status"] == "cut" and p["lspci"]["bytes"] == left, p["lspci"]
    assert text(p["lspci"]).startswith("### lspci -vvv -d 10de:\nlspci -vvv -d 10de:")
    bug = p["nvidia-bug-report"]
    assert bug["status"] == "skipped" and "over what the size budget has left (0 bytes)" in bug["why"]
    assert "b64" not in bug
    assert os.listdir(tmp_path / "run") == []  # its temp dir removed


def test_probe_kills_a_hung_bug_report_at_the_time_budget_and_leaves_nothing(tmp_path):
    """A stand-in nvidia-bug-report.sh that hangs (and its child): killed, group and all, when the
    time budget ends; said 'timed out', no log kept, its temp dir gone, no process left."""
    (tmp_path / "bin").mkdir()
    pids = tmp_path / "pids"
    tool(tmp_path / "bin", "nvidia-bug-report.sh", f'sleep 300 & echo $! >> {pids}; echo $$ >> {pids}; wait')
    t0 = time.monotonic()
    doc = probe(tmp_path, "--budget-s", "4", env={"SIGNOFF_KERNEL_LOG": str(tmp_path / "missing.log")})
    took = time.monotonic() - t0
    p = pieces(doc)
    assert p["nvidia-bug-report"]["status"] == "timed out" and "no log kept" in p["nvidia-bug-report"]["why"]
    assert p["kernel-log"]["status"] == "failed" and "missing.log" in p["kernel-log"]["why"]
    assert took < 30, took  # the budget's 4 s, not the stand-in's 300
    end = time.monotonic() + 10  # a killed process is gone once the kernel has reaped it
    while (alive := [p for p in pids.read_text().split() if running(p)]) and time.monotonic() < end:
        time.sleep(0.1)
    assert not alive, alive
    assert os.listdir(tmp_path / "run") == []


@pytest.mark.parametrize("name", ["lab3", "gpu-01.example.com", "../../etc", "a/b", ".hidden", "x.tar.gz",
                                  "..", HOSTILE, "gpu\n01", "ünï", "-rf", "a" * 300])
def test_safe_name_makes_every_host_string_one_plain_file_name(name):
    got = collect.safe_name(name)
    assert got and len(got) <= 64 + 9 and "/" not in got and got not in (".", "..")
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in got), got
    assert got[0] not in ".-" and not got.endswith(".tar.gz")
    assert (got == name) == (name in ("lab3", "gpu-01.example.com"))  # a plain name stays itself


def test_safe_names_of_two_hosts_never_meet():
    names = ["a/b", "a_b", "a?b", "x", "x.tar.gz", "x.tar.gz.tar.gz"]
    got = [collect.safe_name(n) for n in names]
    assert len(set(got)) == len(got), got
    archives, folders = {g + ".tar.gz" for g in got}, set(got)
    assert not archives & folders  # no host's archive is another host's folder


def _doc(host="gpu1", message=None, serial="1650000000001") -> dict:
    gpus = [{"index": i, "name": "NVIDIA H200", "serial": s, "uuid": f"GPU-{i:08d}-aaaa", "pci_bus_id": bus,
             "vbios": "96.00.9F.00.01"} for i, (s, bus) in
            enumerate([("1650000000000", "00000000:18:00.0"), (serial, "00000000:28:00.0")])]
    facts = {"hostname": host, "kernel": "6.8.0", "nvidia": {"driver": "570.86.15", "gpus": gpus},
             "stack": {"nic_firmware": {"mlx5_0": "28.39.1002"}}}
    return {"meta": {"run": "20261207T000000Z-ctl-1", "hosts": [host, "gpu2"],
                     "started": "2026-12-07T00:00:00Z", "finished": "2026-12-07T00:10:00Z"},
            "hosts": {host: facts, "gpu2": {**facts, "hostname": "gpu2"}},
            "results": [{"test": f"acceptance/test_dcgm.py::test_dcgm_diag[{host}]", "criterion": "dcgm_diag",
                         "host": host, "status": "FAIL", "measured": 1, "unit": "GPUs", "expected": "<= 0",
                         "message": message or f"{host}: GPU 1 (serial {serial}): Hardware test memory Fail"},
                        {"test": "acceptance/test_dcgm.py::test_dcgm_diag[gpu2]", "criterion": "dcgm_diag",
                         "host": "gpu2", "status": "PASS", "message": ""}]}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _fresh(smi: bytes = b"==== NVSMI LOG ====\n") -> dict:
    return {"probe": "evidence", "pieces": [
        {"name": "kernel-log", "command": "journalctl -k -b", "status": "ok", "elapsed_s": 0.1,
         "b64": _b64(b"2026-12-07T00:05:00Z 1796601900.0 NVRM: Xid (PCI:0000:28:00): 79, fallen off\n")},
        {"name": "nvidia-smi-q", "command": "nvidia-smi -q", "status": "ok", "elapsed_s": 1.2,
         "b64": _b64(smi)},
        {"name": "lspci", "command": "lspci -vvv", "status": "absent", "why": "lspci not on PATH"},
        {"name": "nvidia-bug-report", "command": "nvidia-bug-report.sh", "status": "ok", "elapsed_s": 41.0,
         "b64": _b64(gzip.compress(b"nvidia-bug-report.sh Version: 570.86.15\n"))}]}


HELD = {"xids during the run": {"probe": "xids", "xids": [
    {"t": 1796601800.0, "line": "NVRM: Xid (PCI:0000:28:00): 48, pid=7, DBE (0x1)"}]},
    "dcgm": {"rc": 226, "stdout": "{}"}}


def written(tmp_path, doc, host="gpu1", got=None, held=HELD, budget=BUDGET) -> tuple[dict, Path]:
    hosts = collect.hosts_for(doc, budget["mode"])
    entry = collect.write_host(tmp_path, doc, host, collect.records_by_host(doc, [host])[host],
                               collect.why_by_host(doc, [host], budget["mode"])[host],
                               _fresh() if got is None else got, held,
                               {"dcgm": ("2026-12-07T00:01:00Z", "2026-12-07T00:04:00Z")}, budget)
    assert host in hosts
    return entry, tmp_path / "evidence"


def test_a_failed_hosts_folder_archive_index_and_rma_page(tmp_path):
    """gpu1's DCGM FAIL names GPU 1: its folder holds its record, sysinfo, the run's documents, the
    XID lines with their times, what was collected fresh, one RMA page (GPU 1's, none for GPU 0);
    the archive holds exactly the folder; gpu2 (PASS) gets nothing."""
    doc = _doc()
    assert collect.hosts_for(doc, "failed") == ["gpu1"]
    assert collect.hosts_for(doc, "all") == ["gpu1", "gpu2"] and collect.hosts_for(doc, "none") == []
    entry, ev = written(tmp_path, doc)
    assert entry == {"folder": "evidence/gpu1", "archive": "evidence/gpu1.tar.gz",
                     "gpus": ["rma-1650000000001.html"],
                     "fresh": {"kernel-log": "ok", "nvidia-smi-q": "ok", "lspci": "absent",
                               "nvidia-bug-report": "ok"}}
    files = sorted(p.relative_to(ev / "gpu1").as_posix() for p in (ev / "gpu1").rglob("*") if p.is_file())
    assert files == ["fresh/kernel-log.txt", "fresh/nvidia-bug-report.log.gz", "fresh/nvidia-smi-q.txt",
                     "index.json", "index.md", "kernel-xids.txt", "records.json", "rma-1650000000001.html",
                     "run/dcgm.json", "run/xids-during-the-run.json", "sysinfo.json"], files
    with tarfile.open(ev / "gpu1.tar.gz") as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert sorted(members) == [f"gpu1/{f}" for f in files]
    assert all(members[f"gpu1/{f}"] == (ev / "gpu1" / f).read_bytes() for f in files)
    assert gzip.decompress(members["gpu1/fresh/nvidia-bug-report.log.gz"]).startswith(b"nvidia-bug-report.sh")
    assert json.loads((ev / "gpu1" / "records.json").read_text())[0]["criterion"] == "dcgm_diag"
    assert (ev / "gpu1" / "kernel-xids.txt").read_text() == \
        "2026-12-07T00:03:20Z 1796601800.0 NVRM: Xid (PCI:0000:28:00): 48, pid=7, DBE (0x1)\n"
    idx = (ev / "gpu1" / "index.md").read_text()
    assert "- FAIL dcgm_diag: GPU 1 (serial 1650000000001): Hardware test memory Fail" in idx
    assert "- GPU 1: NVIDIA H200, serial 1650000000001, PCI 00000000:28:00.0, VBIOS 96.00.9F.00.01" in idx
    assert "- NIC mlx5_0: firmware 28.39.1002" in idx
    assert "- lspci: absent: lspci not on PATH (lspci -vvv)" in idx
    assert "- fresh/nvidia-bug-report.log.gz: ok, " in idx and ", 41.0 s" in idx
    page = (ev / "gpu1" / "rma-1650000000001.html").read_text()
    for want in ("<td>1650000000001</td>", "<td>00000000:28:00.0</td>", "<td>NVIDIA H200</td>",
                 "<td>96.00.9F.00.01</td>", "Hardware test memory Fail", "dcgm: 2026-12-07T00:01:00Z to",
                 "NVRM: Xid (PCI:0000:28:00): 48", "NVRM: Xid (PCI:0000:28:00): 79",
                 "<li>fresh/nvidia-smi-q.txt</li>", "evidence/gpu1.tar.gz"):
        assert want in page, want
    assert "1650000000000" not in page  # GPU 0's serial: not this board's page


def test_a_host_that_sends_more_than_its_budget_is_cut_here_too(tmp_path):
    """The probe keeps its budget; a host that does not (a hostile one) is cut by the controller,
    said in the index; a piece that is not base64, or named by the host, is never written."""
    got = _fresh(smi=b"s" * 5000)
    got["pieces"] += [{"name": "../../../etc/cron.d/x", "b64": _b64(b"* * * * * root sh")},
                      {"name": "lspci", "command": "lspci", "status": "ok", "b64": "%%% not base64"}]
    entry, ev = written(tmp_path, _doc(), got=got, budget={**BUDGET, "bytes": 1000})
    smi = ev / "gpu1" / "fresh" / "nvidia-smi-q.txt"
    kernel = (ev / "gpu1" / "fresh" / "kernel-log.txt").stat().st_size
    assert smi.stat().st_size == 1000 - kernel and entry["fresh"]["nvidia-smi-q"] == "cut"
    assert not (ev / "gpu1" / "fresh" / "nvidia-bug-report.log.gz").exists()  # nothing left of the budget
    assert entry["fresh"]["nvidia-bug-report"] == "skipped"
    assert entry["fresh"]["lspci"] == "failed"
    idx = (ev / "gpu1" / "index.md").read_text()
    assert f"cut at {1000 - kernel} bytes here: the size budget" in idx and "its bytes were not base64" in idx
    assert not any("cron" in str(p) for p in tmp_path.rglob("*"))


def test_host_strings_stay_inert_in_file_names_pages_and_index(tmp_path):
    """A host name, GPU serial and message full of markup, escapes and ../: every file stays under
    evidence/ with a plain name, the RMA page shows the markup as text (autoescaped) and the escape
    as \\x1b, the index holds no control character."""
    host, serial = f"gpu1{HOSTILE}", f"16500{HOSTILE}"
    doc = _doc(host, message=f"{host}: GPU 1 (serial {serial}): {HOSTILE} Fail", serial=serial)
    entry, ev = written(tmp_path, doc, host=host)
    name = collect.safe_name(host)
    assert entry["archive"] == f"evidence/{name}.tar.gz" and "/" not in name
    assert all(ev in p.parents for p in tmp_path.rglob("*") if p != ev)
    (page_file,) = [g.removeprefix("rma-").removesuffix(".html") for g in entry["gpus"]]
    assert re.fullmatch(r"gpu0-[0-9a-f]{8}", page_file), page_file  # never the host's words, even made plain
    page = (ev / name / f"rma-{page_file}.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\\x1b[31m" in page
    idx = (ev / name / "index.md").read_text()
    assert "\x1b" not in idx and "\\x1b\\[31m" in idx and "\\<script>" in idx  # Markdown that stays text
    with tarfile.open(ev / f"{name}.tar.gz") as tar:
        assert all(m.name.startswith(f"{name}/") and ".." not in m.name.split("/") and m.isfile()
                   for m in tar.getmembers())


def test_rma_pages_only_for_the_gpus_a_failure_names():
    facts = _doc()["hosts"]["gpu1"]
    assert [g["index"] for g in rma.named(facts, [{"message": "gpu1: GPU 1 had XIDs"}])] == [1]
    assert [g["index"] for g in rma.named(facts, [{"message": "NVRM: Xid (PCI:0000:18:00): 79"}])] == [0]
    assert [g["index"] for g in rma.named(facts, [{"message": "serial 1650000000001 failed"}])] == [1]
    assert rma.named(facts, [{"message": "gpu1: transmit side slow on every pair"}]) == []
    assert rma.named(facts, [{"host": "GPU 1", "message": "GPU 1: transmit side slow"}]) == []
    assert rma.named(facts, [{"message": "GPU 10 and GPU 11 failed"}]) == []  # no GPU 1 in "GPU 10"
    assert rma.named({"nvidia": {"gpus": ["not a dict", {"index": "x"}]}}, [{"message": "GPU 1"}]) == []


def test_the_cover_and_report_md_say_where_each_hosts_evidence_is():
    doc = _doc()
    doc["meta"]["evidence"] = collect.meta(collect.planned(["gpu1"]), "failed", BUDGET)
    entries, _, hosts = report.by_host(doc)
    assert hosts == ["gpu1"] and "gpu1: evidence evidence/gpu1.tar.gz (folder evidence/gpu1/)" in \
        entries[0]["identity"]
    md = report.markdown(doc)
    assert "## Evidence" in md and "- gpu1: evidence/gpu1.tar.gz (folder evidence/gpu1/)" in md
    assert "within 120 s and 50 MB" in md
    del doc["meta"]["evidence"]
    assert "## Evidence" not in report.markdown(doc)


def test_probe_args_pass_only_device_shaped_names_to_the_host():
    facts = _doc()["hosts"]["gpu1"]
    facts["nvidia"]["gpus"].append({"index": 2, "pci_bus_id": "$(reboot)"})
    facts["gpu_nic"] = {"nics": [{"name": "mlx5_0"}, {"name": "x; rm -rf /"}]}
    args = collect.probe_args(facts, 120, 5 * 10 ** 7)
    assert args == ["--budget-s", "120", "--budget-bytes", "50000000", "--bdf", "00000000:18:00.0",
                    "--bdf", "00000000:28:00.0", "--nic", "mlx5_0"]


def test_fake_sysfs_a_nic_named_by_its_rdma_device_or_its_interface_gets_its_pci_function(tmp_path,
                                                                                           monkeypatch):
    """A FAKE /sys/class (no NIC here): mlx5_0 under infiniband/, ens1np0 (an Ethernet NIC, no RDMA)
    only under net/: each its device link's PCI function, so lspci -s reads it; an unknown name none."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("probe_evidence_sysfs", PROBE)
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    for cls, name, bdf in (("infiniband", "mlx5_0", "0000:17:00.0"), ("net", "ens1np0", "0000:18:00.1")):
        (tmp_path / "devices" / bdf).mkdir(parents=True)
        (tmp_path / cls / name).mkdir(parents=True)
        (tmp_path / cls / name / "device").symlink_to(tmp_path / "devices" / bdf)
    classes = (str(tmp_path / "infiniband"), str(tmp_path / "net"))
    monkeypatch.setattr(ev, "NIC_CLASSES", classes, raising=False)  # raising=False: fails on HEAD, not errors
    assert ev.nic_bdf("mlx5_0") == "0000:17:00.0"
    assert ev.nic_bdf("ens1np0") == "0000:18:00.1"
    assert ev.nic_bdf("ens9") is None


@pytest.mark.parametrize("opt,value", [("evidence_budget", 0), ("evidence_max_mb", -1),
                                       ("evidence_budget", float("nan"))])
def test_an_evidence_budget_of_no_time_or_bytes_is_refused(opt, value):
    opts = {"evidence_budget": 120.0, "evidence_max_mb": 50.0, opt: value}
    config = SimpleNamespace(getoption=lambda name: opts[name])
    with pytest.raises(InputError, match=f"--{opt.replace('_', '-')} "):
        plugin.pytest_signoff_check_options(config, None, None)


def test_plan_says_the_evidence_and_its_budget():
    run = [sys.executable, "-m", "signoff", "plan", "--profile", "local", "--hosts", "h[1-2]", "--no-contact"]
    p = subprocess.run([*run, "--evidence", "all", "--evidence-budget", "200"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert "\nevidence: collected from every host after the run (budget 200 s, 50 MB a host; --evidence)\n" \
        in p.stdout, p.stdout + p.stderr
    p = subprocess.run([*run, "--evidence", "none"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "\nevidence:" not in p.stdout, p.stdout + p.stderr
