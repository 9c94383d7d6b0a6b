"""Each host against the intended build (pure): its differences, each one physical fault (a host
whose 8 GPUs carry one wrong VBIOS is one difference, not 8), and the fleet's findings: one
difference seen on several hosts is one finding, its hosts folded, with one fix sentence."""

from __future__ import annotations

from dataclasses import dataclass, field

from signoff import hostlist
from signoff.intent.spec import UVM, Intent, Match
from signoff.versions.parity import FIELDS

SECTIONS = {"intent_versions": "versions", "intent_firmware": "firmware", "intent_kernel": "kernel",
            "intent_hardware": "hardware", "intent_cabling": "cabling"}
NO_INTENT = "no intent file (--intent FILE, or the inventory's intent: key): nothing to judge it against"
ABSENT = "absent"


@dataclass(frozen=True)
class Diff:
    """One way a host is not as intended. The fix is a sentence around the hosts' names:
    fix[0] + 'gpu[03-05]' + fix[1] (never str.format: a host's text may hold braces)."""
    criterion: str
    subject: str  # "ConnectX-7 firmware", "kernel parameter iommu"
    value: str  # as the host has it
    intended: str
    fix: tuple[str, str]
    parts: str = ""  # which of the host's parts: "8 of 8 GPUs"

    def key(self) -> tuple:
        return (self.criterion, self.subject, self.value, self.intended, self.fix)

    def sentence(self, who: str) -> str:
        return f"{self.fix[0]}{who}{self.fix[1]}"

    def line(self, host: str) -> str:
        """The host's own message: what, its value and the intended one, and its fix."""
        on = f" on {self.parts}" if self.parts else ""
        return f"{self.subject} {self.value}{on}, intended {self.intended}: {self.sentence(host)}"


@dataclass
class Verdict:
    diffs: list[Diff] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # a fact unreadable: ERROR, never PASS
    na: str | None = None
    judged: list[str] = field(default_factory=list)  # what was found as intended (the PASS's words)


def _to(m: Match) -> str:
    return str(m) if m.exact else f"a version within {m}"


def _of(facts: dict, *keys):
    for k in keys:
        facts = facts.get(k) if isinstance(facts, dict) else None
    return facts


# what the versions family's parity (by majority) leaves to the intent where it pins it: the intent wins
PARITY = {"driver": ("nvidia_driver", "driver_branch"), "cuda": ("cuda_driver",), "torch": ("torch",),
          "torch_cuda": ("torch_cuda",), "nccl": ("nccl",)}


def pinned(intent: Intent | None) -> set[str]:
    """The parity fields (signoff/versions/parity.py FIELDS) the intent judges instead. VBIOS and
    NIC firmware are per model: for_parity() leaves the models the intent names out of them."""
    if intent is None:
        return set()
    return {f for k in intent.versions for f in PARITY[k]}


def for_parity(intent: Intent | None, facts):
    """The host's facts as version parity reads them: the GPUs and NICs of the models the intent
    names VBIOS or firmware for left out (intent_firmware judges those); a model it does not name
    stays judged by majority. NICs whose model was not read stay in (intent_firmware ERRORs)."""
    if intent is None or not isinstance(facts, dict) or not (intent.vbios or intent.nic_firmware):
        return facts
    out = dict(facts)
    nv = facts.get("nvidia")
    if intent.vbios and isinstance(nv, dict):
        out["nvidia"] = {**nv, "gpus": [g for g in nv.get("gpus") or [] if g.get("name") not in intent.vbios]}
    fw, nics = _of(facts, "stack", "nic_firmware"), nic_list(facts)
    if intent.nic_firmware and isinstance(fw, dict) and nics is not None:
        named = {x for n in nics if any(_nic_matches(n, m) for m in intent.nic_firmware)
                 for x in n.get("names") or []}
        out["stack"] = {**facts["stack"], "nic_firmware": {k: v for k, v in fw.items() if k not in named}}
    return out


def parity_note(intent: Intent | None) -> str:
    """What version parity leaves to the intent file, said on its check ('' for nothing)."""
    skip = pinned(intent)
    said = [FIELDS[f][0] for f in FIELDS if f in skip]
    if intent is not None and intent.vbios:
        said.append(f"VBIOS of {', '.join(intent.vbios)}")
    if intent is not None and intent.nic_firmware:
        said.append(f"firmware of {', '.join(intent.nic_firmware)}")
    if not said:
        return ""
    return (f"{', '.join(said)}: judged against the intent file (intent_versions, intent_firmware), not the "
            f"majority; other models by majority")


def build(facts: dict) -> dict | None:
    """The host's build facts (probe_build.py, through sysinfo's preflight), None if not read."""
    b = _of(facts, "preflight", "build")
    return b if isinstance(b, dict) else None


# intent key -> (label, how sysinfo's document holds it, where its error is)
VERSIONS = {
    "driver": ("NVIDIA driver", ("nvidia", "driver"), ("nvidia", "error")),
    "cuda": ("CUDA driver API", ("nvidia", "cuda_driver"), ("nvidia", "error")),
    "torch": ("torch", ("torch", "version"), ("torch", "error")),
    "torch_cuda": ("torch CUDA build", ("torch", "cuda"), ("torch", "error")),
    "nccl": ("NCCL (torch's)", ("torch", "nccl"), ("torch", "error")),
}


def versions(intent: Intent, facts: dict) -> Verdict:
    v = Verdict()
    for key, want in intent.versions.items():
        label, at, err = VERSIONS[key]
        found = _of(facts, *at)
        if found is None and key in ("torch_cuda", "nccl") and _of(facts, "torch", "version"):
            found = "none"  # a torch without CUDA (a CPU build): no CUDA, no NCCL
        if found is None:
            v.errors.append(f"{label} unknown ({_of(facts, *err) or 'not reported'}), intended {want}")
            continue
        ok = want.ok(found) if found != "none" else False
        if ok is None:
            v.errors.append(f"{label} {found} is no version the range {want} can judge")
        elif ok:
            v.judged.append(f"{label} {found}")
        else:
            v.diffs.append(Diff("intent_versions", label, str(found), str(want),
                                (f"update {label} on ", f" from {found} to {_to(want)}")))
    return v


def _parts(bad: list, of: int, noun: str, names: list[str]) -> str:
    return f"{len(bad)} of {of} {noun}" + (f" ({', '.join(names)})" if len(bad) < of else "")


def _firmware_of(v: Verdict, criterion: str, what: str, noun: str, items: list[tuple[str, object]],
                 model: str, want: Match) -> None:
    """items: (part's name, its firmware) of one model on one host -> one Diff per wrong value."""
    unread = [n for n, fw in items if fw is None]
    if unread:
        v.errors.append(f"{model} {what} unreadable on {', '.join(unread)}")
    by: dict[str, list[str]] = {}
    for n, fw in items:
        if fw is not None:
            by.setdefault(str(fw), []).append(n)
    for fw, names in sorted(by.items()):
        ok = want.ok(fw)
        if ok:
            v.judged.append(f"{model} {what} {fw} ({len(names)} {noun})")
        elif ok is None:
            v.errors.append(f"{model} {what} {fw} is no version the range {want} can judge")
        else:
            v.diffs.append(Diff(criterion, f"{model} {what}", fw, str(want),
                                (f"update the {model} {what} on ", f" from {fw} to {_to(want)}"),
                                _parts(names, len(items), noun, names)))


def _nic_matches(nic: dict, model: str) -> bool:
    return model in (nic.get("model"), nic.get("ids"), nic.get("lspci"))


def nic_list(facts: dict) -> list[dict] | None:
    b = build(facts)
    nics = b.get("nics") if b else None
    return nics if isinstance(nics, list) else None


def firmware(intent: Intent, facts: dict) -> Verdict:
    v = Verdict()
    if intent.vbios:
        gpus = _of(facts, "nvidia", "gpus") or []
        if not gpus:
            v.errors.append(f"no NVIDIA GPU seen ({_of(facts, 'nvidia', 'error') or 'NVML lists none'}): "
                            f"its VBIOS not read")
        models = sorted({str(g.get("name")) for g in gpus})
        for model, want in intent.vbios.items():
            mine = [(f"GPU {g.get('index')}", g.get("vbios")) for g in gpus if g.get("name") == model]
            if mine:
                _firmware_of(v, "intent_firmware", "VBIOS", "GPUs", mine, model, want)
        if gpus and not set(models) & set(intent.vbios):
            v.diffs.append(Diff("intent_firmware", "GPU model", ", ".join(models), ", ".join(intent.vbios),
                                ("check the GPUs of ", f": {', '.join(models)}, where the intent file names "
                                                       f"VBIOS for {', '.join(intent.vbios)} only")))
    if intent.nic_firmware:
        nics = nic_list(facts)
        fw = _of(facts, "stack", "nic_firmware") or {}
        if nics is None:
            v.errors.append("the host's NICs were not read (sysinfo's preflight has no build part)")
            return v
        for model, want in intent.nic_firmware.items():
            mine = [(n["names"][0] if n.get("names") else str(n.get("pci")),
                     next((fw[x] for x in n.get("names") or [] if fw.get(x)), None))
                    for n in nics if _nic_matches(n, model)]
            if mine:
                _firmware_of(v, "intent_firmware", "firmware", "NICs", mine, model, want)
        if not any(_nic_matches(n, m) for n in nics for m in intent.nic_firmware):
            have = ", ".join(sorted({str(n.get("model")) for n in nics})) or "none"
            v.diffs.append(Diff("intent_firmware", "NIC model", have, ", ".join(intent.nic_firmware),
                                ("check the NICs of ", f": none is a {' or '.join(intent.nic_firmware)} "
                                                       f"(the NICs seen: {have})")))
    return v


def params(cmdline: str) -> dict[str, str | None]:
    """The kernel's parameters of a /proc/cmdline: key -> value (None: a bare flag), the last one
    of a key repeated; what follows ' -- ' is init's, not the kernel's."""
    out: dict[str, str | None] = {}
    for word in cmdline.split(" -- ")[0].split():
        key, eq, val = word.partition("=")
        out[key] = val if eq else None
    return out


def _shown(key: str, val) -> str:
    return f"without {key}" if val is ABSENT else key if val is None else f"{key}={val}"


def kernel(intent: Intent, facts: dict) -> Verdict:
    v = Verdict()
    b = build(facts) or {}
    line = _of(b, "cmdline", "text")
    have = params(line) if isinstance(line, str) else None
    for key, want in intent.kernel.items():
        if key == UVM:
            _uvm(v, _of(facts, "nvidia", "uvm") or {}, want)
            continue
        if have is None:
            v.errors.append(f"kernel command line unread ({_of(b, 'cmdline', 'error') or 'no build facts'}): "
                            f"{key} not judged")
            continue
        got = have.get(key, ABSENT)
        now = _shown(key, got)
        if want is True and got is ABSENT:
            d = (f"add {key} to the kernel command line of ", " and reboot")
        elif want is False and got is not ABSENT:
            d = (f"remove {key} from the kernel command line of ", f" (now {now}) and reboot")
        elif isinstance(want, str) and got != want:
            d = (f"set {key}={want} on the kernel command line of ",
                 " and reboot" if got is ABSENT else f" (now {now}) and reboot")
        else:
            v.judged.append(now)
            continue
        intended = key if want is True else f"without {key}" if want is False else f"{key}={want}"
        v.diffs.append(Diff("intent_kernel", "kernel command line", now, intended, d))
    return v


def _uvm(v: Verdict, uvm: dict, want: bool) -> None:
    got = uvm.get("disable_hmm")
    if got not in ("Y", "N"):
        v.errors.append(f"{UVM} unread ({uvm.get('error') or got or 'not reported'})")
        return
    yn = "Y" if want else "N"
    if got == yn:
        v.judged.append(f"{UVM}={got}")
        return
    v.diffs.append(Diff("intent_kernel", f"nvidia_uvm parameter {UVM}", got, yn,
                        (f"set nvidia_uvm's {UVM}={yn} on ", f" (now {got}: options nvidia_uvm {UVM}="
                                                           f"{int(want)} in /etc/modprobe.d/, then reboot)")))


def hardware(intent: Intent, facts: dict) -> Verdict:
    v = Verdict()
    hw = intent.hardware
    nv = _of(facts, "nvidia") or {}
    gpus = nv.get("gpus") or []
    if ("gpus" in hw or "bar1_mib" in hw) and not nv.get("available"):
        v.errors.append(f"GPUs not read ({nv.get('error') or 'NVML unavailable'})")
    elif "gpus" in hw:
        n, want = len(gpus), hw["gpus"]
        if n == want:
            v.judged.append(f"{n} GPUs")
        else:
            v.diffs.append(Diff("intent_hardware", "GPUs", str(n), str(want),
                                ("count the GPUs of ", f": {n} seen, {want} intended (a GPU off the bus or "
                                                       f"failed: nvidia-smi, lspci, the BMC's event log)")))
    if "bar1_mib" in hw and gpus:
        mine = [(f"GPU {g.get('index')}", _of(g, "bar1", "total_mib")) for g in gpus]
        _bar1(v, mine, hw["bar1_mib"])
    if "nics" in hw:
        nics = nic_list(facts)
        if nics is None:
            v.errors.append("the host's NICs were not read (sysinfo's preflight has no build part)")
        else:
            want = hw["nics"]
            counts = {"NICs": (len(nics), want)} if isinstance(want, int) else \
                {f"{m} NICs": (sum(_nic_matches(n, m) for n in nics), k) for m, k in want.items()}
            for what, (n, k) in counts.items():
                if n == k:
                    v.judged.append(f"{n} {what}")
                else:
                    v.diffs.append(Diff("intent_hardware", what, str(n), str(k),
                                        (f"count the {what} of ", f": {n} seen, {k} intended (a "
                                                                  f"card unseated, failed or off the bus)")))
    return v


def _bar1(v: Verdict, mine: list[tuple[str, object]], want: Match) -> None:
    unread = [n for n, mib in mine if mib is None]
    if unread:
        v.errors.append(f"BAR1 unreadable on {', '.join(unread)}")
    by: dict[str, list[str]] = {}
    for n, mib in mine:
        if mib is not None:
            by.setdefault(str(mib), []).append(n)
    for mib, names in sorted(by.items()):
        if want.ok(mib):
            v.judged.append(f"BAR1 {mib} MiB ({len(names)} GPUs)")
        else:
            v.diffs.append(Diff("intent_hardware", "BAR1", f"{mib} MiB", f"{want} MiB",
                                ("enable large BAR1 (Above 4G decoding, Resizable BAR) in the BIOS of ",
                                 f": BAR1 {mib} MiB, {want} MiB intended"),
                                _parts(names, len(mine), "GPUs", names)))


def cabling(intent: Intent, facts: dict, host: str) -> Verdict:
    v = Verdict()
    ports = intent.cabling.get(host)
    if not ports:
        v.na = f"the intent file {intent.path} names no cabling for {host}"
        return v
    lldp = _of(build(facts) or {}, "lldp") or {}
    if not lldp.get("available"):  # the intent names this host's cabling: unread is no pass
        v.errors.append(f"LLDP not read on {host} ({lldp.get('error') or 'no build facts'}): the cabling of "
                        f"{', '.join(ports)} not judged")
        return v
    seen = lldp.get("neighbours") or {}
    for port, want in ports.items():
        n = seen.get(port)
        intended = f"{want['switch']} port {want['port']}"
        now = f"{n.get('switch')} port {n.get('port')}" if n else "no LLDP neighbour"
        if n and str(n.get("switch")).casefold() == want["switch"].casefold() and \
                want["port"].casefold() in (str(n.get("port")).casefold(), str(n.get("descr")).casefold()):
            v.judged.append(f"{port} to {intended}")
            continue
        v.diffs.append(Diff("intent_cabling", f"{port}'s neighbour", now, intended,
                            ("cable ", f"'s {port} to {intended} (now: {now})")))
    return v


def judge(intent: Intent | None, facts: dict, host: str, criterion: str) -> Verdict:
    """The host's verdict of one intent_* criterion."""
    section = SECTIONS[criterion]
    if intent is None:
        return Verdict(na=NO_INTENT)
    if not intent.sets(section):
        return Verdict(na=f"the intent file {intent.path} sets no {section}")
    if section == "cabling":
        return cabling(intent, facts, host)
    return JUDGES[section](intent, facts)


JUDGES = {"versions": versions, "firmware": firmware, "kernel": kernel, "hardware": hardware}


def findings(intent: Intent, facts: dict[str, dict]) -> list[dict]:
    """Every difference of every host that answered, one finding per physical fault: the same
    difference on several hosts is one finding, its hosts folded, with one fix sentence; the
    widest first."""
    by: dict[tuple, tuple[Diff, dict]] = {}
    for host, f in facts.items():
        if not isinstance(f, dict):
            continue  # a host that did not answer: its own checks ERROR
        for criterion in SECTIONS:
            for d in judge(intent, f, host, criterion).diffs:
                by.setdefault(d.key(), (d, {}))[1][host] = d.parts
    out = []
    for d, hosts in by.values():
        who = hostlist.fold(hosts)
        parts = set(hosts.values())
        out.append({"criterion": d.criterion, "subject": d.subject, "value": d.value, "intended": d.intended,
                    "hosts": sorted(hosts), "who": who, "parts": parts.pop() if len(parts) == 1 else "",
                    "fix": d.sentence(who)})
        out[-1]["line"] = finding_line(out[-1])
    return sorted(out, key=lambda x: (-len(x["hosts"]), list(SECTIONS).index(x["criterion"]), x["subject"]))


def finding_line(f: dict) -> str:
    """A finding as the cover says it: what, on which hosts, the value and the intended one, the fix."""
    on = f" ({f['parts']} each)" if f.get("parts") else ""
    n = len(f["hosts"])
    return (f"{f['subject']} {f['value']}, intended {f['intended']}, on {n} host{'s' if n != 1 else ''} "
            f"{f['who']}{on}: {f['fix']}")
