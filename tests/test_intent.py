"""The intended build (signoff/intent), in process: the intent file's checks and their messages,
each host judged against it, one finding per physical fault with its fix and its hosts folded,
the probe's reads (a FAKE sysfs and /proc: no NIC here), the cover's section. The lab run (real
sshd hosts, the real sysinfo and build probes) is tests/test_lab_acceptance.py's
test_intent_file_wrong_firmware_and_kernel_parameter_each_one_finding_with_its_fix."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from signoff import InputError, inventory, report
from signoff.check import Check
from signoff.intent import judge, plugin, spec
from signoff.versions import parity

ROOT = Path(__file__).resolve().parent.parent
H100 = "NVIDIA H100 80GB HBM3"
GOOD_FW, BAD_FW, GOOD_VBIOS = "28.41.1000", "28.39.1002", "96.00.99.00.01"


def write(tmp_path, text: str, name="intent.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def facts(vbios=(GOOD_VBIOS,) * 8, fw=(GOOD_FW,) * 8, cmdline="ro iommu=pt pcie_port_pm=off",
          driver="570.133.20", torch="2.7.1+cu128", bar1=131072, hmm="Y") -> dict:
    """A sysinfo document of an 8-GPU host with 8 ConnectX-7 (what probe_sysinfo and probe_build print)."""
    return {
        "nvidia": {"available": True, "driver": driver, "cuda_driver": "12.8", "error": None,
                   "gpus": [{"index": i, "name": H100, "vbios": v, "bar1": {"total_mib": bar1}}
                            for i, v in enumerate(vbios)],
                   "uvm": {"disable_hmm": hmm, "error": None}},
        "torch": {"version": torch, "cuda": "12.8", "nccl": "2.26.2"},
        "stack": {"nic_firmware": {f"mlx5_{i}": f for i, f in enumerate(fw)}},
        "preflight": {"build": {
            "cmdline": {"text": cmdline, "error": None},
            "nics": [{"names": [f"mlx5_{i}", f"ibp{i}"], "pci": f"0000:{0x17 + i:02x}:00.0",
                      "ids": "15b3:1021", "lspci": "MT2910 Family [ConnectX-7]", "model": "ConnectX-7"}
                     for i in range(len(fw))],
            "lldp": {"available": False, "neighbours": {}, "error": "lldpctl not installed (lldpd)"}}},
    }


INTENT = f"""description: the contract's build, rev 3
versions:
  driver: ">=570.86, <580"
  torch: "2.7.1"
  nccl: "2.26.2"
firmware:
  vbios: {{"{H100}": "{GOOD_VBIOS}"}}
  nic: {{ConnectX-7: "{GOOD_FW}"}}
kernel:
  iommu: pt
  pcie_port_pm: "off"
  uvm_disable_hmm: true
hardware:
  gpus: 8
  nics: {{ConnectX-7: 8}}
  bar1_mib: 131072
"""


def test_a_fault_on_several_hosts_is_one_finding_with_one_fix_and_a_hosts_gpus_one_fault(tmp_path):
    """gpu[03-05] on the old NIC firmware (all 8 NICs): one finding, not 3 hosts x 8 NICs; gpu07's 8
    GPUs on one wrong VBIOS: one finding, not 8; gpu02 without iommu=pt: one; gpu01 as intended."""
    it = spec.load(write(tmp_path, INTENT))
    fleet = {f"gpu0{i}": facts() for i in range(1, 8)}
    for h in ("gpu03", "gpu04", "gpu05"):
        fleet[h] = facts(fw=(BAD_FW,) * 8)
    fleet["gpu07"] = facts(vbios=("96.00.30.00.01",) * 8)
    fleet["gpu02"] = facts(cmdline="ro pcie_port_pm=off")
    found = judge.findings(it, fleet)
    assert [(f["criterion"], f["who"], f["fix"]) for f in found] == [
        ("intent_firmware", "gpu[03-05]",
         f"update the ConnectX-7 firmware on gpu[03-05] from {BAD_FW} to {GOOD_FW}"),
        ("intent_firmware", "gpu07", f"update the {H100} VBIOS on gpu07 from 96.00.30.00.01 to {GOOD_VBIOS}"),
        ("intent_kernel", "gpu02", "set iommu=pt on the kernel command line of gpu02 and reboot"),
    ]
    assert found[0]["parts"] == "8 of 8 NICs" and found[0]["hosts"] == ["gpu03", "gpu04", "gpu05"]
    assert found[0]["line"] == (f"ConnectX-7 firmware {BAD_FW}, intended {GOOD_FW}, on 3 hosts gpu[03-05] "
                                f"(8 of 8 NICs each): update the ConnectX-7 firmware on gpu[03-05] from "
                                f"{BAD_FW} to {GOOD_FW}")
    # each host's own check: one line per fault, its value, the intended one and its own fix
    v = judge.judge(it, fleet["gpu07"], "gpu07", "intent_firmware")
    assert [d.line("gpu07") for d in v.diffs] == [
        f"{H100} VBIOS 96.00.30.00.01 on 8 of 8 GPUs, intended {GOOD_VBIOS}: update the {H100} VBIOS on "
        f"gpu07 from 96.00.30.00.01 to {GOOD_VBIOS}"]
    assert judge.judge(it, fleet["gpu01"], "gpu01", "intent_firmware").diffs == []
    # two of a host's GPUs on another VBIOS: one fault, those GPUs named
    one = judge.judge(it, facts(vbios=(GOOD_VBIOS,) * 6 + ("96.00.30.00.01",) * 2), "h", "intent_firmware")
    assert [d.parts for d in one.diffs] == ["2 of 8 GPUs (GPU 6, GPU 7)"]


def test_a_fleet_uniformly_on_the_wrong_firmware_fails_and_parity_leaves_it_to_the_intent(tmp_path):
    it = spec.load(write(tmp_path, INTENT))
    fleet = {f"gpu{i:02d}": facts(fw=(BAD_FW,) * 8, driver="565.57.01") for i in range(1, 17)}
    found = judge.findings(it, fleet)
    assert [(f["who"], f["fix"]) for f in found] == [
        ("gpu[01-16]",
         "update NVIDIA driver on gpu[01-16] from 565.57.01 to a version within >=570.86, <580"),
        ("gpu[01-16]", f"update the ConnectX-7 firmware on gpu[01-16] from {BAD_FW} to {GOOD_FW}")]
    # by majority, every host agrees: PASS; the intent judges those fields instead
    per_host = {h: parity.versions(f | {"python": "3.12"}) for h, f in fleet.items()}
    assert parity.deviations(per_host, "gpu01") == []
    assert judge.pinned(it) >= {"nvidia_driver", "driver_branch", "torch", "nccl"}
    fleet["gpu01"] = facts(fw=(GOOD_FW,) * 8, driver="565.57.01")  # the one right host
    assert parity.deviations({h: parity.versions(f) for h, f in fleet.items()}, "gpu01")
    per_host = {h: parity.versions(judge.for_parity(it, f)) for h, f in fleet.items()}  # its models left out
    assert not parity.deviations(per_host, "gpu01", skip=judge.pinned(it))


class ParityFleet:
    """What test_version_parity reads of the fleet: its hosts' sysinfo documents (fake hosts)."""

    def __init__(self, docs: dict):
        self.docs, self.names, self.cache = docs, list(docs), {}

    def once(self, key, make):
        return self.cache.setdefault(key, make())

    def all_facts(self):
        return self.docs


def version_parity(it, docs: dict, host: str):
    """acceptance/test_versions.py's test_version_parity in process: (status, message, record)."""
    spec_ = importlib.util.spec_from_file_location("acceptance_test_versions", ROOT / "acceptance" /
                                                   "test_versions.py")
    acc = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(acc)
    item = SimpleNamespace(name="test_version_parity", originalname="test_version_parity", user_properties=[])
    try:
        acc.test_version_parity(SimpleNamespace(name=host), ParityFleet(docs), Check(item, host), it)
        status, msg = "PASS", ""
    except pytest.fail.Exception as exc:
        status, msg = "FAIL", str(exc)
    return status, msg, next((v for k, v in item.user_properties if k == "signoff"), {})


def test_parity_leaves_only_the_models_the_intent_names_to_it(tmp_path):
    """The intent names VBIOS for the H100 and firmware for ConnectX-7: a model it does not name (an
    L4's VBIOS, a BlueField-3's firmware) stays judged by majority, and the host odd on it FAILs."""
    it = spec.load(write(tmp_path, INTENT))

    def host(l4="95.04.29.00.01", bf3="32.41.1000", h100=GOOD_VBIOS, cx7=GOOD_FW):
        f = facts(vbios=(h100,) * 8, fw=(cx7,) * 8)
        f["nvidia"]["gpus"].append({"index": 8, "name": "NVIDIA L4", "vbios": l4})
        f["stack"]["nic_firmware"]["mlx5_8"] = bf3
        bf = {"names": ["mlx5_8"], "pci": "0000:a0:00.0", "ids": "15b3:a2dc", "lspci": "BlueField-3",
              "model": "BlueField-3"}
        f["preflight"]["build"]["nics"].append(bf)
        return f

    docs = {f"gpu0{i}": host() for i in range(1, 5)}
    docs["gpu02"] = host(l4="95.04.18.00.01")
    docs["gpu03"] = host(bf3="32.39.1002")
    docs["gpu04"] = host(h100="96.00.30.00.01", cx7=BAD_FW)  # the named models: the intent's, not parity's
    status, msg, rec = version_parity(it, docs, "gpu02")
    assert status == "FAIL" and "VBIOS 95.04.18.00.01 differs from 95.04.29.00.01 on 3 hosts" in msg, msg
    status, msg, _ = version_parity(it, docs, "gpu03")
    assert status == "FAIL" and "NIC firmware 32.39.1002 differs from 32.41.1000 on 3 hosts" in msg, msg
    status, msg, rec = version_parity(it, docs, "gpu04")
    assert status == "PASS", msg
    assert f"VBIOS of {H100}, firmware of ConnectX-7: judged against the intent file" in rec["note"], rec


def test_versions_exact_or_ranges_and_every_section_judged_or_said(tmp_path):
    it = spec.load(write(tmp_path, INTENT))
    assert judge.judge(it, facts(), "h", "intent_versions").judged == [
        "NVIDIA driver 570.133.20", "torch 2.7.1+cu128", "NCCL (torch's) 2.26.2"]  # +cu128 is 2.7.1
    for crit in judge.SECTIONS:
        v = judge.judge(it, facts(), "h", crit)
        assert not v.diffs and not v.errors, (crit, v)
    assert judge.judge(it, facts(), "h", "intent_cabling").na == f"the intent file {it.path} sets no cabling"
    bad = judge.judge(it, facts(driver="580.65.06", torch="2.6.0", bar1=256, hmm="N"), "h", "intent_versions")
    assert [d.line("h") for d in bad.diffs] == [
        "NVIDIA driver 580.65.06, intended >=570.86, <580: update NVIDIA driver on h from 580.65.06 to a "
        "version within >=570.86, <580",
        "torch 2.6.0, intended 2.7.1: update torch on h from 2.6.0 to 2.7.1"]
    hw = judge.judge(it, facts(bar1=256, vbios=(GOOD_VBIOS,) * 7, fw=(GOOD_FW,) * 7), "h", "intent_hardware")
    assert [d.line("h") for d in hw.diffs] == [
        "GPUs 7, intended 8: count the GPUs of h: 7 seen, 8 intended (a GPU off the bus or failed: "
        "nvidia-smi, lspci, the BMC's event log)",
        "BAR1 256 MiB on 7 of 7 GPUs, intended 131072 MiB: enable large BAR1 (Above 4G decoding, Resizable "
        "BAR) in the BIOS of h: BAR1 256 MiB, 131072 MiB intended",
        "ConnectX-7 NICs 7, intended 8: count the ConnectX-7 NICs of h: 7 seen, 8 intended (a card unseated, "
        "failed or off the bus)"]
    k = judge.judge(it, facts(cmdline="ro iommu=off pcie_port_pm=off", hmm="N"), "h", "intent_kernel")
    assert [d.sentence("h") for d in k.diffs] == [
        "set iommu=pt on the kernel command line of h (now iommu=off) and reboot",
        "set nvidia_uvm's uvm_disable_hmm=Y on h (now N: options nvidia_uvm uvm_disable_hmm=1 in "
        "/etc/modprobe.d/, then reboot)"]


def test_unreadable_facts_are_errors_never_a_pass_and_no_intent_is_na(tmp_path):
    it = spec.load(write(tmp_path, INTENT))
    f = facts()
    f["torch"] = {"version": None, "error": "torch not importable: No module named 'torch'"}
    f["nvidia"]["gpus"][3]["vbios"] = None
    f["preflight"]["build"]["cmdline"] = {"text": None, "error": "/proc/cmdline unreadable"}
    assert judge.judge(it, f, "h", "intent_versions").errors == [
        "torch unknown (torch not importable: No module named 'torch'), intended 2.7.1",
        "NCCL (torch's) unknown (torch not importable: No module named 'torch'), intended 2.26.2"]
    assert judge.judge(it, f, "h", "intent_firmware").errors == [f"{H100} VBIOS unreadable on GPU 3"]
    assert judge.judge(it, f, "h", "intent_kernel").errors[0].startswith(
        "kernel command line unread (/proc/cmdline unreadable): iommu not judged")
    for crit in judge.SECTIONS:
        assert judge.judge(None, facts(), "h", crit).na == judge.NO_INTENT


def test_exact_and_range_matches_as_packaging_reads_them():
    assert spec.Match("28.41.1000").ok("28.41.1000 (MT_0000000838)")  # ethtool -i of a ConnectX
    assert not spec.Match("28.41.1000").ok("28.39.1002 (MT_0000000838)")
    assert spec.Match("2.7.1").ok("2.7.1+cu128") and not spec.Match("2.7.1").ok("2.7.10")
    assert spec.Match("92.00.19.00.0A").ok("92.00.19.00.0A")  # no version: compared as text
    r = spec.Match(">=570.86, <580")
    assert r.ok("570.133.20") and not r.ok("580.65.06") and not r.ok("565.57.01") and r.ok("abc") is None


def test_kernel_parameters_as_the_kernel_reads_its_command_line():
    assert judge.params("BOOT_IMAGE=/vmlinuz ro quiet iommu=off iommu=pt a=b=c -- init=/x --flag") == {
        "BOOT_IMAGE": "/vmlinuz", "ro": None, "quiet": None, "iommu": "pt", "a": "b=c"}


@pytest.mark.parametrize("text, message", [
    ("nonsense: 1\nkernel: {iommu: pt}\n",
     "intent {p}: unknown key 'nonsense' (allowed: cabling, description, firmware, hardware, kernel, "
     "versions)"),
    ("versions: {drivr: '570'}\n",
     "intent {p}: versions: unknown key 'drivr' (allowed: cuda, driver, nccl, torch, torch_cuda)"),
    ("versions: {cuda: 12.8}\n", "intent {p}: versions.cuda: expected a quoted version or a range such as "
                                 "'>=570.86, <580', got 12.8 (a number: quote it, '12.8')"),
    ("versions: {driver: '>=570.86, <<580'}\n", "intent {p}: versions.driver: '>=570.86, <<580' is not"),
    ("firmware: {nic: {ConnectX-7: 28.41}}\n", "intent {p}: firmware.nic.ConnectX-7: expected a quoted"),
    ("firmware: {nic: {}}\n", "intent {p}: firmware.nic: empty (name a model and its version"),
    ("firmware: {bios: {}}\n", "intent {p}: firmware: unknown key 'bios' (allowed: nic, vbios)"),
    ("kernel: {iommu: [pt]}\n", "intent {p}: kernel.iommu: expected the value it must have"),
    ("kernel: {'bad key': 1}\n", "intent {p}: kernel: 'bad key' is not a kernel parameter name"),
    ("kernel: {uvm_disable_hmm: maybe}\n", "intent {p}: kernel.uvm_disable_hmm: expected true or false"),
    ("hardware: {gpus: -1}\n", "intent {p}: hardware.gpus: expected a whole number >= 0, got -1"),
    ("hardware: {nics: {ConnectX-7: eight}}\n", "intent {p}: hardware.nics.ConnectX-7: expected a whole"),
    ("hardware: {gpu: 8}\n", "intent {p}: hardware: unknown key 'gpu' (allowed: bar1_mib, gpus, nics)"),
    ("cabling: {gpu09: {ib0: {switch: leaf1, port: '1/1'}}}\n", "intent {p}: cabling.gpu09: no such host in"),
    ("cabling: {gpu01: {ib0: {switch: leaf1}}}\n", "intent {p}: cabling.gpu01.ib0: expected switch: and"),
    ("description: only words\n", "intent {p}: sets nothing to judge"),
    ("- a list\n", "intent {p}: expected a mapping, got ['a list']"),
    ("versions: [\n", "intent {p}: not valid YAML"),
])
def test_every_key_is_checked_with_one_message_naming_the_file_and_key(tmp_path, text, message):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        spec.load(p, {"gpu01"})
    assert str(e.value).startswith(message.format(p=p)), str(e.value)


def test_the_committed_example_loads_and_the_option_and_inventory_key_name_it(tmp_path):
    ex = spec.load(ROOT / "examples" / "intent.yaml", {"gpu001"})
    assert ex.versions and ex.vbios and ex.nic_firmware and ex.kernel and ex.hardware and ex.cabling
    # the inventory's intent: is its neighbour; a --hosts narrowing keeps it
    (tmp_path / "build.yaml").write_text(INTENT)
    inv = write(tmp_path, "intent: build.yaml\nhosts: [{name: 'gpu[01-02]'}]\n", "inv.yaml")
    loaded = inventory.load(inv)
    assert loaded.intent == str(tmp_path / "build.yaml")
    assert inventory.select(loaded, "inv", hosts="gpu01").intent == loaded.intent
    with pytest.raises(InputError, match=r"intent: expected the intent file's path, got \['x'\]"):
        inventory.load(write(tmp_path, "intent: [x]\nhosts: [{name: a}]\n", "bad.yaml"))

    def options(**given):
        return SimpleNamespace(getoption=lambda name, default=None: given.get(name, default), stash={})
    config = options()
    plugin.pytest_signoff_check_options(config=config, inventory=loaded, profile=None)
    assert config.stash[plugin.INTENT].path == loaded.intent
    config = options(intent=str(ROOT / "examples" / "intent.yaml"))  # --intent wins
    with pytest.raises(InputError, match="cabling.gpu001: no such host in the inventory"):
        plugin.pytest_signoff_check_options(config=config, inventory=loaded, profile=None)
    with pytest.raises(InputError, match="--intent is empty"):
        plugin.pytest_signoff_check_options(config=options(intent=" "), inventory=loaded, profile=None)
    config = options()
    plugin.pytest_signoff_check_options(config=config, inventory=inventory.select(loaded, "x"), profile=None)
    bare = inventory.from_hostlist("gpu01")
    plugin.pytest_signoff_check_options(config=config, inventory=bare, profile=None)
    assert config.stash[plugin.INTENT] is None  # none given: every intent check N.A.


def _probe():
    spec_ = importlib.util.spec_from_file_location("probe_build", ROOT / "signoff/intent/probe_build.py")
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)
    return mod


def fake_nic_sysfs(root: Path, fws: list[str]) -> Path:
    """A FAKE sysfs of ConnectX-7 cards (15b3:1021), each an RDMA device of one port with its PCI function."""
    for i, fw in enumerate(fws):
        pci = root / f"devices/pci0000:00/0000:{0x17 + i:02x}:00.0"
        pci.mkdir(parents=True)
        (pci / "vendor").write_text("0x15b3\n")
        (pci / "device").write_text("0x1021\n")
        ib = root / f"class/infiniband/mlx5_{i}"
        ib.mkdir(parents=True)
        (ib / "fw_ver").write_text(fw + "\n")
        (ib / "ports/1").mkdir(parents=True)  # one port up, as a cabled card's
        for f, text in (("state", "4: ACTIVE"), ("rate", "400 Gb/sec (4X NDR)"),
                        ("link_layer", "InfiniBand")):
            (ib / "ports/1" / f).write_text(text + "\n")
        (ib / "device").symlink_to(pci)
    (root / "class/net").mkdir(parents=True, exist_ok=True)
    return root


def test_fake_sysfs_and_proc_the_probe_reads_nics_by_pci_function_and_the_command_line(tmp_path, monkeypatch):
    probe = _probe()
    monkeypatch.setattr(probe, "SYS", str(fake_nic_sysfs(tmp_path / "sys", [GOOD_FW, BAD_FW])))
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cmdline").write_text("ro iommu=pt\n")
    monkeypatch.setattr(probe, "PROC", str(tmp_path / "proc"))
    monkeypatch.setattr(probe, "pci_names", lambda: {"0000:17:00.0": ("Mellanox Technologies",
                                                                      "MT2910 Family [ConnectX-7]")})
    doc = probe.read()
    assert doc["cmdline"] == {"text": "ro iommu=pt", "error": None}
    assert [(n["names"], n["pci"], n["ids"], n["model"]) for n in doc["nics"]] == [
        (["mlx5_0"], "0000:17:00.0", "15b3:1021", "ConnectX-7"),  # lspci's name, else the PCI IDs
        (["mlx5_1"], "0000:18:00.0", "15b3:1021", "15b3:1021")]
    assert doc["lldp"]["available"] in (True, False)


# lldpctl -f json0 of one port (lldpd's stable JSON: every value a list of objects)
LLDP_JSON0 = {"lldp": [{"interface": [
    {"name": "ens1np0", "via": "LLDP", "rid": "1", "age": "0 day, 00:10:01",
     "chassis": [{"id": [{"type": "mac", "value": "0c:42:a1:00:00:01"}], "name": [{"value": "leaf01"}],
                  "descr": [{"value": "Cumulus Linux"}]}],
     "port": [{"id": [{"type": "ifname", "value": "swp1"}], "descr": [{"value": "swp1"}],
               "ttl": [{"value": "120"}]}]},
]}]}


def test_recorded_lldp_neighbours_judge_the_cabling_and_no_lldpctl_is_an_error(tmp_path):
    probe = _probe()
    seen = probe.lldp_neighbours(json.loads(json.dumps(LLDP_JSON0)))
    assert seen == {"ens1np0": {"switch": "leaf01", "port": "swp1", "descr": "swp1"}}
    it = spec.load(write(tmp_path, "cabling:\n  gpu01: {ens1np0: {switch: leaf01, port: swp1}, "
                                   "ens2np0: {switch: leaf02, port: swp1}}\n"), {"gpu01", "gpu02"})
    f = facts()
    f["preflight"]["build"]["lldp"] = {"available": True, "neighbours": seen, "error": None}
    v = judge.judge(it, f, "gpu01", "intent_cabling")
    assert v.judged == ["ens1np0 to leaf01 port swp1"]
    assert [d.sentence("gpu01") for d in v.diffs] == [
        "cable gpu01's ens2np0 to leaf02 port swp1 (now: no LLDP neighbour)"]
    assert judge.judge(it, f, "gpu02", "intent_cabling").na == \
        f"the intent file {it.path} names no cabling for gpu02"
    # cabling the intent names for gpu01 that LLDP cannot show: an ERROR naming what was not read
    v = judge.judge(it, facts(), "gpu01", "intent_cabling")
    assert v.na is None and v.errors == [
        "LLDP not read on gpu01 (lldpctl not installed (lldpd)): the cabling of ens1np0, ens2np0 not judged"]


def test_the_cover_and_report_md_list_the_findings_as_inert_text(tmp_path):
    it = spec.load(write(tmp_path, INTENT))
    bad = facts(fw=("28.39.1002\x1b[31m",) * 8)  # a host's text: shown inert
    found = judge.findings(it, {"gpu01": bad, "gpu02": bad})
    meta = {"intent": {**it.meta(), "findings": found}}
    cover = report.intent_cover(meta)
    assert cover["lines"] == [found[0]["line"]] and "on 2 hosts gpu[01-02]" in cover["lines"][0]
    doc = {"meta": {**meta, "hosts": ["gpu01", "gpu02"], "run": "r"}, "results": [], "hosts": {}}
    md = report.markdown(doc)
    assert f"## Against the intended build ({it.path} (sha256 {it.sha256[:12]}))" in md
    assert "update the ConnectX-7 firmware on gpu\\[01-02\\] from 28.39.1002\\x1b\\[31m to 28.41.1000" in md
    assert "\x1b" not in md
    html = report.cover("FAIL", doc)
    assert "Against the intended build" in html and "\x1b" not in html and "so-intent" in html
    assert "Every host judged is as intended" in report.cover("PASS", {
        **doc, "meta": {**doc["meta"], "intent": {**it.meta(), "findings": []}}})


def test_a_rerun_of_a_run_judged_against_an_intent_file_is_judged_against_it_again(tmp_path):
    """Without it, an intent check that FAILed would come back N.A. on the rerun and pass the sheet."""
    from signoff import rerun
    p = write(tmp_path, INTENT)
    hosts = inventory.from_hostlist("gpu01")

    def config(file):
        earlier = {"run": "R1", "dir": "reports/R1", "earlier": {"meta": {"intent": {"file": file}}}}
        return SimpleNamespace(getoption=lambda name, default=None: default, stash={rerun._LOADED: earlier})
    c = config(str(p))
    plugin.pytest_signoff_check_options(config=c, inventory=hosts, profile=None)
    assert c.stash[plugin.INTENT].path == str(p)
    with pytest.raises(InputError, match=r"--rerun reports/R1: run R1 was judged against intent file "
                                         r".*gone\.yaml, which is not here: name it with --intent"):
        plugin.pytest_signoff_check_options(config=config(str(tmp_path / "gone.yaml")), inventory=hosts,
                                            profile=None)
