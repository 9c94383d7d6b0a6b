"""The health checks' pure judgements: counter growth, checksum votes, HBM bandwidth,
thermal thresholds in either NVML form, GPU-NIC relation."""

from __future__ import annotations

from datetime import datetime, timezone
from statistics import median

from signoff.versions.parity import majority

# nvidia-smi topo -m's relations, closest first
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")


# A log's first line and /proc/stat's btime (whole seconds) differ by a moment at boot.
COVER_SLACK_S = 60


def utc(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _span(start: float, end: float) -> str:
    age = max(0.0, end - start)
    return f"{age / 3600:.1f} h" if age >= 3600 else f"{age / 60:.0f} min"


def log_short(doc: dict, end: float, need_from: float) -> str | None:
    """What a kernel log read up to `end` (the run's start, the host's clock) covers when it
    does not reach `need_from` ('the last 23 min only (from 2026-12-02T01:13:00Z)'), else
    None. Unknown coverage (no line at all) is short too."""
    start = doc.get("covers_from")
    if isinstance(start, (int, float)) and start <= need_from + COVER_SLACK_S:
        return None
    if not isinstance(start, (int, float)):
        return "an unknown span (no line of it could be dated)"
    return f"the last {_span(start, end)} only (from {utc(start)})"


# What the kernel log loses, as log_cover() and the preflight (signoff/gpu/__init__.py) say it.
NO_PERSISTENT = "no persistent journal (journald keeps this boot only without /var/log/journal)"
NO_JOURNAL = "no journal: dmesg holds this boot only"
# test_error_counters' N.A. (acceptance/test_health.py), said by the preflight before the run
NOTHING_TO_WATCH = "no InfiniBand port, GPU or data_iface (inventory) to watch"


def log_cover(doc: dict, end: float) -> str | None:
    """What a kernel log that reaches back less than its window (from doc['since']) covers,
    and why, said with the verdict ('covers 1 min: node booted at ...; no persistent
    journal'); None where it covers the window."""
    start, since = doc.get("covers_from"), doc.get("since")
    if not isinstance(start, (int, float)) or not isinstance(since, (int, float)) or \
            start <= since + COVER_SLACK_S:
        return None
    boot = doc.get("boot")
    booted = (f"node booted at {utc(boot)}" if isinstance(boot, (int, float))
              and abs(start - boot) <= COVER_SLACK_S else f"from {utc(start)}")
    if doc.get("source") == "journal":
        why = ("the persistent journal holds no kernel message before it" if doc.get("persistent")
               else NO_PERSISTENT)
    elif str(doc.get("source", "")).startswith("dmesg"):
        why = NO_JOURNAL
    else:
        why = f"{doc.get('source')} starts there"
    return f"covers {_span(start, end)}: {booted}; {why}"


# How an XID row of NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)
# is judged (xid_fatal.rows): fatal every time; severity: unless the driver's line says Nonfatal
# (144-150, NVLink5: the catalog's "XID 144-150 Decode" sheet sets it per unit, sub-code and error
# status, and the driver prints it); recovery: unless the action XID 154 names is None; reported
XID_RULES = ("fatal", "severity", "recovery", "reported")
# The catalog's mnemonics of the rows the Blackwell classes add
XID_NAMES = {137: "NVLINK_PRIV_ERR", 144: "NVLINK_SAW_ERROR", 145: "NVLINK_RLW_ERROR",
             146: "NVLINK_TLW_ERROR", 147: "NVLINK_TREX_ERROR", 148: "NVLINK_NVLPW_CTRL_ERROR",
             149: "NVLINK_NETIR_ERROR", 150: "NVLINK_MSE_ERROR", 154: "GPU_RECOVERY_ACTION_CHANGED"}
# nvmlDeviceGpuRecoveryAction_t (NVML API reference; nvidia-ml-py NVML_GPU_RECOVERY_ACTION_*)
RECOVERY_ACTIONS = {0: "None", 1: "GPU reset", 2: "node reboot", 3: "drain P2P", 4: "drain and reset",
                    5: "recover IMEX domain", 6: "bus reset", 7: "system reboot"}


def _kinds(doc: dict, code: str) -> dict[str, int]:
    """The probe's count of one XID's lines by kind (the host's document: counts only)."""
    kinds = doc.get("kinds")
    got = kinds.get(code) if isinstance(kinds, dict) else None
    return {k: v for k, v in got.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0} \
        if isinstance(got, dict) else {}


def fatal_xids(doc: dict, codes: list[int], rows: dict[int, str]) -> dict[int, int]:
    """The fatal lines of each XID code of the kernel log's document: every line of `codes`; of
    `rows`, as its rule says. A line whose kind the probe did not record (an older probe) or could
    not read counts as fatal: never passed for want of a word."""
    out = {}
    for code, n in sorted(((int(c), n) for c, n in doc["counts"].items()), key=lambda cn: cn[0]):
        rule = rows.get(code) or ("fatal" if code in codes else "reported")
        kinds = _kinds(doc, str(code))
        spared = kinds.get("Nonfatal", 0) if rule == "severity" else kinds.get("0", 0) if rule == "recovery" \
            else n if rule == "reported" else 0
        if n - spared > 0:
            out[code] = n - spared
    return out


def _line_fatal(x: dict, rule: str) -> bool:
    return rule == "fatal" or rule == "severity" and x.get("severity") != "Nonfatal" or \
        rule == "recovery" and x.get("recovery") != 0


def xid_history(doc: dict, codes: list[int], rows: dict[int, str], gpus: list[dict]) -> tuple[dict, str, str]:
    """The kernel log's XIDs judged: (fatal lines per code, what they are, the others):
    'XID 145 x2 on PCI:0000:66:00 (GPU 0), ...: NVLINK_RLW_ERROR, the driver said Fatal (...)',
    'XID 145 x1 Nonfatal, XID 45 x2'."""
    fatal = fatal_xids(doc, codes, rows)
    said, others = [], []
    for c, n in ((int(k), n) for k, n in doc["counts"].items()):
        rule = rows.get(c) or ("fatal" if c in codes else "reported")
        mine = [x for x in doc["xids"] if x.get("xid") == c and _line_fatal(x, rule)]
        if c in fatal:
            devices = sorted({str(x.get("device")) for x in mine})
            said.append(f"XID {c} x{fatal[c]} on {xid_devices(devices, gpus)}{xid_kind_text(c, mine)}")
        if n > fatal.get(c, 0):
            spared = {"severity": " Nonfatal", "recovery": " action None"}.get(rule, "") if c in fatal else ""
            others.append(f"XID {c} x{n - fatal.get(c, 0)}{spared}")
    return fatal, ", ".join(said), ", ".join(others)


def xid_kind_text(code: int, lines: list[dict]) -> str:
    """What the catalog and the driver said of a fatal XID's kept lines: ': NVLINK_RLW_ERROR, the
    driver said Fatal (RLW_TAGSTATE, sub-code 0, error status 0x00000002)'."""
    name = XID_NAMES.get(code)
    said = []
    for x in lines:
        if x.get("severity") == "Fatal":  # the host's words, bounded
            t = (f"the driver said Fatal ({str(x.get('unit'))[:40]}, sub-code {str(x.get('sub_code'))[:8]}, "
                 f"error status {str(x.get('error_status') or '?')[:10]})")
        elif isinstance(x.get("recovery"), int) and x["recovery"] != 0:
            t = f"recovery action {RECOVERY_ACTIONS.get(x['recovery'], hex(x['recovery']))}"
        elif 144 <= code <= 150 or code == 154:
            t = "the line does not say its severity or action"
        else:
            continue
        if t not in said:
            said.append(t)
    parts = ([name] if name else []) + said[:3]
    return f": {', '.join(parts)}" if parts else ""


def xid_devices(devices: list[str], gpus: list[dict]) -> str:
    """'PCI:0000:66:00 (GPU 0), ...': the XID's PCI address, with the GPU NVML lists there."""
    index = {}
    for g in gpus:
        bdf = str(g.get("pci_bus_id") or "").lower()  # 00000000:66:00.0
        dom, _, rest = bdf.partition(":")
        if rest:
            index[f"pci:{dom[-4:]}:{rest.rsplit('.', 1)[0]}"] = g.get("index")
    return ", ".join(d + (f" (GPU {index[d.lower()]})" if d.lower() in index else "") for d in devices) or "?"


def xid_cause(fatal: dict[int, int]) -> str:
    if any(144 <= c <= 150 for c in fatal):
        return ("an NVLink5 error the driver calls fatal: the GPU needs a reset (NVIDIA's Xid catalog, "
                "RESET_GPU); NCCL can hang on every GPU pair until then")
    if 154 in fatal:
        return "the driver asks for a GPU reset or a reboot (XID 154, after another XID): see that XID"
    return "a failing GPU, HBM or NVLink: see NVIDIA's XID catalog for the code"


def counter_growth(before: dict, after: dict, ifaces: list[str]) -> tuple[list[str], list[str]]:
    """(what grew or went back, what could not be read in either snapshot), named by port:
    every InfiniBand port, the interfaces `ifaces`, every GPU's PCIe replay counter."""
    grew, unread = [], []

    def compare(where: str, b, a):
        if not _count(b) or not _count(a):  # unread, or not a number (a host's own text)
            unread.append(where)
        elif a > b:
            grew.append(f"{where} +{a - b} ({b} -> {a})")
        elif a < b:
            grew.append(f"{where} went back from {b} to {a} (reset during the run)")

    for kind, label in (("infiniband", "InfiniBand {} {}"), ("net", "{} {}")):
        bk, ak = _map(before.get(kind)), _map(after.get(kind))
        for port in sorted(set(bk) | set(ak)) if kind == "infiniband" else ifaces:
            b, a = bk.get(port), ak.get(port)
            if not isinstance(b, dict) or not isinstance(a, dict):  # absent, or not a port's counters
                side = "end" if isinstance(b, dict) else "start"
                unread.append(label.format(port, f"(absent in the {side} snapshot)"))
                continue
            for counter in sorted(set(b) | set(a)):
                compare(label.format(port, counter), b.get(counter), a.get(counter))
    bg, ag = _map(before.get("pcie_replay")), _map(after.get("pcie_replay"))
    for gpu in sorted(set(bg) | set(ag), key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g)):
        compare(f"GPU {gpu} PCIe replay counter", bg.get(gpu), ag.get(gpu))
    return grew, unread


def _map(v) -> dict:
    """A snapshot's map as the probe prints it, else none (a host's document of another shape)."""
    return v if isinstance(v, dict) else {}


def _count(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# sysinfo's per-link NVLink counters (probe_sysinfo.NVLINK_ERRORS, NVLink5's NVLINK5_ERRORS)
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data", "rcv_errors", "link_integrity",
                   "recovery_events")
# what error_counter_growth's `counters` may name: an uncorrected ECC error is never allowed
GROWTH_KINDS = (*(f"nvlink_{c}" for c in NVLINK_COUNTERS), "ecc_corrected")


def gpu_counter_growth(before: dict, after: dict, allow: dict | None = None) -> dict:
    """Each GPU's per-link NVLink error counters and volatile ECC counts, the end against the
    start: grew (GPU, link and counter named), allowed (grew no more than `allow[kind]`, the
    profile's error_counter_growth), unread (nothing to compare: the check ERRORs), unsupported
    ((GPU, counter, NVML's NotSupported): said). A GPU whose links are up but none of whose
    counters NVML reads is unread: never a silent PASS. A start snapshot without these keys
    (a sysinfo older than them) has nothing to compare."""
    out = {"grew": [], "allowed": [], "unread": [], "unsupported": []}
    allow = allow or {}
    why = {**(before.get("not_read") or {}), **(after.get("not_read") or {})}

    def compare(where: str, gpu: str, what: str, kind: str, b, a) -> bool:
        if b is None or a is None:
            reason = why.get(where) or f"absent in the {'start' if b is None else 'end'} snapshot"
            if "NotSupported" in reason:
                out["unsupported"].append((gpu, what, reason))
            else:
                out["unread"].append(f"{where} ({reason})")
            return False
        if a < b:
            out["grew"].append(f"{where} went back from {b} to {a} (reset during the run)")
        elif a > b:
            grew = f"{where} +{a - b} ({b} -> {a})"
            out["allowed" if a - b <= allow.get(kind, -1) else "grew"].append(grew)
        return True

    for kind in ("nvlink", "ecc"):
        if kind in before and not isinstance(after.get(kind), dict):
            out["unread"].append(f"GPU {'NVLink' if kind == 'nvlink' else 'ECC'} counters (absent in "
                                 f"the end snapshot)")
    for gpu, links in sorted((before.get("nvlink") or {}).items(), key=lambda x: int(x[0])):
        ends = (after.get("nvlink") or {}).get(gpu) or {}
        active = read = 0
        for link, b in sorted(links.items(), key=lambda x: int(x[0])):
            where, a = f"GPU {gpu} NVLink {link}", ends.get(link) or {}
            if b.get("active") is None:
                out["unread"].append(f"{where} state ({why.get(where + ' state', 'unreadable')})")
                continue
            if not b["active"]:
                continue  # down from the start: nvlink_up's to judge
            active += 1
            if a.get("active") is not True:
                (out["grew"] if a.get("active") is False else out["unread"]).append(
                    f"{where} went down during the run (active at the start)" if a.get("active") is False
                    else f"{where} (absent or unreadable in the end snapshot)")
                continue
            for c in NVLINK_COUNTERS:
                if c in b or c in a:  # each GPU has one set: the DL counters, or NVLink5's
                    read += compare(f"{where} {c}", gpu, f"NVLink {c}", f"nvlink_{c}", b.get(c), a.get(c))
        if active and not read:
            out["unread"].append(f"GPU {gpu} NVLink error counters: none read on its {active} active "
                                 f"link(s)")
    for gpu, b in sorted((before.get("ecc") or {}).items(), key=lambda x: int(x[0])):
        a = (after.get("ecc") or {}).get(gpu) or {}
        for c in ("corrected", "uncorrected"):
            compare(f"GPU {gpu} volatile ECC {c}", gpu, f"volatile ECC {c}", f"ecc_{c}", b.get(c), a.get(c))
    for where, reason in (before.get("not_read") or {}).items():  # NVLink5: the DL counters, once a GPU
        if where.endswith(" NVLink DL counters"):
            out["unsupported"].append((where.split()[1], "NVLink DL counters (replay, recovery, CRC)",
                                       reason))
    return out


def unsupported_text(items: list[tuple[str, str, str]]) -> str:
    """gpu_counter_growth's unsupported, one line per counter and reason: 'NVLink crc_data on
    GPU 0, 1 (NVMLError_NotSupported: Not Supported)'."""
    by: dict[tuple[str, str], list[str]] = {}
    for gpu, what, reason in items:
        gpus = by.setdefault((what, reason), [])
        gpus += [] if gpu in gpus else [gpu]
    return "; ".join(f"{what} on GPU {', '.join(gpus)} ({reason})" for (what, reason), gpus in by.items())


def sdc_host(doc: dict) -> tuple[list[str], dict]:
    """A host's checksums: the devices whose result differs from the host's majority, or
    whose repeats differed, and the host's consensus per op (None: no majority)."""
    fails, consensus = [], {}
    devs = doc["devices"]
    broken = {d: v["error"] for d, v in devs.items() if "error" in v}
    fails += [f"GPU {d} could not compute: {why}" for d, why in broken.items()]
    ok = {d: v for d, v in devs.items() if d not in broken}
    for op in doc["ops"]:
        sums = {d: v[op]["sha256"] for d, v in ok.items()}
        fails += [f"{_dev(d, v)} {op} gave different bits on a repeat of the same input"
                  for d, v in ok.items() if not v[op]["repeats_equal"]]
        value, clear = majority(sums)
        consensus[op] = value if clear else None
        if len(sums) < 2:
            continue
        if not clear:
            spread = "; ".join(f"GPU {d}={s[:12]}" for d, s in sums.items())
            fails.append(f"{op}: no majority among the GPUs ({spread})")
            continue
        fails += [f"{_dev(d, ok[d])} {op} result {s[:12]} differs from the other GPUs' {value[:12]}"
                  for d, s in sums.items() if s != value]
    return fails, consensus


def _dev(d: str, v: dict) -> str:
    return "the CPU" if v.get("name") == "cpu" else f"GPU {d}"


def sdc_fleet(consensus: dict[str, dict], host: str) -> tuple[list[str], list[str]]:
    """Hosts of one class (same device, torch, CUDA, size): `host`'s results against the
    majority of those hosts', per op: (where it differs from a majority, ties). A tie (two
    hosts, one result each) names no culprit: the healthy one is never blamed."""
    fails, ties = [], []
    for op, mine in consensus[host].items():
        sums = {h: c.get(op) for h, c in consensus.items() if c.get(op)}
        if mine is None or len(sums) < 2:
            continue
        value, clear = majority(sums)
        if not clear:
            ties.append(f"{op}: no majority among the hosts of its class "
                        f"({'; '.join(f'{h}={s[:12]}' for h, s in sorted(sums.items()))})")
        elif mine != value:
            others = sorted(h for h, s in sums.items() if s == value)
            fails.append(f"{op} result {mine[:12]} differs from {value[:12]} on {', '.join(others)}")
    return fails, ties


def hbm_outliers(gpus: dict[str, float], min_ratio: float) -> tuple[float, list[str]]:
    """(host median, GPUs below min_ratio x the median, named)."""
    med = median(gpus.values())
    return med, [f"GPU {g} {v:g} TB/s = {v / med:.2f} x the host's median {med:g} TB/s"
                 for g, v in gpus.items() if v < min_ratio * med]


SMI_ABSOLUTE = {"shutdown": "GPU Shutdown Temp", "slowdown": "GPU Slowdown Temp",
                "gpu_max": "GPU Max Operating Temp", "mem_max": "Memory Max Operating Temp"}
SMI_TLIMIT = {"shutdown": "GPU Shutdown T.Limit Temp", "slowdown": "GPU Slowdown T.Limit Temp",
              "gpu_max": "GPU Max Operating T.Limit Temp"}


def thermal_thresholds(th: dict) -> dict[str, tuple[int | None, str]]:
    """Each threshold in C and the form it was read in: NVML's absolute threshold, else
    nvidia-smi's absolute one, else T.Limit - nvidia-smi's offset (newer drivers), where
    T.Limit = the current temperature + NVML's margin to it. The offsets count below T.Limit:
    an H100 reads shutdown -8, slowdown -2, GPU max 0 at T.Limit 87 C for NVML's absolute
    95 / 89 / 87 C (nvidia-smi -q, thamada/nvidia-smi nvsim/H100SXMx8_smi.py)."""
    smi = th.get("smi") or {}
    tlimit = th["temp"] + th["tlimit_margin"] if None not in (th.get("temp"), th.get("tlimit_margin")) \
        else None
    out = {}
    for key in ("shutdown", "slowdown", "gpu_max", "mem_max"):
        if th.get(key):
            out[key] = (th[key], "NVML")
        elif smi.get(SMI_ABSOLUTE[key]):
            out[key] = (smi[SMI_ABSOLUTE[key]], "nvidia-smi")
        elif key in SMI_TLIMIT and SMI_TLIMIT[key] in smi and tlimit is not None:
            off = smi[SMI_TLIMIT[key]]
            out[key] = (tlimit - off, f"T.Limit {tlimit} C minus offset {off:+d} C")
        else:
            out[key] = (None, "unreadable")
    return out


def nearest_nics(links: dict[str, str]) -> tuple[str | None, list[str]]:
    """A GPU's closest relation to any NIC, and the NICs at it."""
    if not links:
        return None, []
    best = min(links.values(), key=LEVELS.index)
    return best, sorted(n for n, lv in links.items() if lv == best)


# Derived thresholds (a profile of no class, `local`): a fraction of a figure the GPU reports.

def memory_peak(g: dict) -> tuple[float | None, str]:
    """A GPU's peak memory bandwidth in TB/s from NVML: bus width x max memory clock x 2 (data
    moves on both clock edges: 5120-bit x 1215 MHz = 1.555 TB/s on A100 40GB, 384-bit x 9001 MHz
    = 0.864 TB/s on L40S, their datasheets' figures)."""
    m = g.get("memory") or {}
    bits, mhz = m.get("bus_width_bits"), m.get("max_clock_mhz")
    if not bits or not mhz:
        return None, f"GPU {g.get('index')}: NVML gave no memory bus width or max memory clock ({m})"
    return round(bits / 8 * mhz * 1e6 * 2 / 1e12, 3), f"{bits}-bit x {mhz} MHz x 2"


def fractions(figures: dict[str, float], refs: dict[str, tuple[float | None, str]]) -> dict[str, float]:
    """Each GPU's figure / its own reference (GPUs without a readable reference left out)."""
    return {k: round(v / refs[k][0], 3) for k, v in figures.items() if (refs.get(k) or (None,))[0]}


def same_model_thresholds(gpus: list[dict], got: dict) -> dict:
    """Per GPU, the highest each threshold reads on the host's GPUs of its model (`got`: GPU
    index -> thermal_thresholds()); GPUs alone of their model are left out: nothing to compare."""
    models: dict[str, list] = {}
    for g in gpus:
        models.setdefault(g.get("name"), []).append(g["index"])
    want = {}
    for idx in (i for ids in models.values() if len(ids) > 1 for i in ids):
        peers = next(ids for ids in models.values() if idx in ids)
        want[idx] = {k: max((got[p][k][0] for p in peers if got[p][k][0] is not None), default=None)
                     for k in ("shutdown", "slowdown", "gpu_max", "mem_max")}
    return want


# Host setups a class breaks without (hardware.large_bar, hardware.uvm_disable_hmm: RTX PRO 6000)

BAR1_CAUSE = "large BAR / Resizable BAR off in the BIOS: P2P is crippled"
UVM_CAUSE = ("NCCL P2P locks up on this card: set `options nvidia_uvm uvm_disable_hmm=1` (a file in "
             "/etc/modprobe.d), then reload nvidia_uvm or reboot")


def bar1_short(gpus: list[dict], fraction: float) -> tuple[list[str], list[str], float | None]:
    """(GPUs whose BAR1 maps less than `fraction` of their memory, GPUs whose BAR1 or memory
    NVML did not give, the smallest BAR1 / memory read)."""
    bad, unread, ratios = [], [], []
    for g in gpus:
        b = g.get("bar1") or {}
        total, mem = b.get("total_mib"), b.get("memory_mib")
        if not isinstance(total, int) or not isinstance(mem, int) or mem <= 0:
            unread.append(f"GPU {g['index']} ({b.get('error') or 'not read: a sysinfo without BAR1'})")
            continue
        ratios.append(total / mem)
        if total < fraction * mem:
            bad.append(f"GPU {g['index']} BAR1 {total} MiB < {fraction:g} x its memory {mem} MiB")
    return bad, unread, round(min(ratios), 3) if ratios else None


def uvm_hmm(facts: dict) -> tuple[str | None, str | None]:
    """(nvidia_uvm's uvm_disable_hmm as sysfs prints it, None) or (None, why it is unread)."""
    u = (facts.get("nvidia") or {}).get("uvm")
    if not isinstance(u, dict):
        return None, "sysinfo read no nvidia_uvm parameter (a probe older than this check)"
    if not u.get("disable_hmm"):
        return None, f"nvidia_uvm's uvm_disable_hmm unreadable: {u.get('path')}: {u.get('error')}"
    return str(u["disable_hmm"]), None
