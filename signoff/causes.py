"""Hosts folded by cause, the one implementation behind every output that names hosts by what
went wrong on them: the terminal's summary, the cover and report.md (report.problem_groups),
report.html's tables of hosts not passed, the lines of a run that no host answered, and the
profile pick's refusals.

Two hosts' messages are one cause when they are the same once what varies from host to host
is stood in: the host's own name and address, its temp dirs, times, other addresses and
ports, figures. Messages that still differ are distinct causes, each its own line: never one
cause behind another host's (an uncorrectable ECC error behind an out-of-memory kill)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from signoff import hostlist
from signoff.inventory import LOCAL
from signoff.results import ALL  # the host of a check across hosts

# What makes one host's message differ from another's for the same cause: its temp dir,
# addresses and ports, times, figures (kept in each check's details and results.json).
_VARYING = [(re.compile(r"/tmp/signoff\.\w{8}"), "/tmp/signoff.*"),
            # a run lock is named by its host's boot and network namespace (signoff.fleet.KEEPER)
            (re.compile(r"(signoff-lock|/lock)\.[0-9a-f][0-9a-f.-]*"), r"\1.*"),
            (re.compile(r"\b\d{4}-\d\d-\d\dT[\d:.]+Z?"), "<time>"),
            (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<address>"),
            (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])"), "#")]
# Codes are not figures: XID 79 (reseat) and XID 48 (RMA) are two causes, so are exit 1 and exit
# 137; the code after XID (the kernel's 'Xid (PCI:...): 79' too), exit, signal, errno is kept.
_CODE = re.compile(r"\b(xid|exit(?: code| status)?|signal|errno)(?: \([^()]*\))?:? ?(-?\d+)\b", re.I)
_KEPT = str.maketrans("0123456789-", "\ue000\ue001\ue002\ue003\ue004\ue005\ue006\ue007\ue008\ue009\ue00a")
_BACK = {v: k for k, v in _KEPT.items()}
_NAME, _ADDR = "\x00name", "\x00addr"  # a host's own name and address, folded back in to say them
_IN_A_NAME = re.compile(r"[\w.-]")  # a character of a longer name around a host's


def stand_in(text: str, word: str, token: str) -> str:
    """`word` (a host name or address, whole: not node1 in node10) replaced by `token`. No
    regular expression of the word's: 1,000 hosts' would each be compiled (re caches 512)."""
    out, i = [], 0
    while word and (j := text.find(word, i)) >= 0:
        end = j + len(word)
        if (j and _IN_A_NAME.match(text[j - 1])) or (end < len(text) and _IN_A_NAME.match(text[end])):
            out.append(text[i:j + 1])  # inside a longer name: kept
            i = j + 1
            continue
        out += [text[i:j], token]
        i = end
    return "".join(out) + text[i:]


def _own(message: str | None, host: str, address: str | None = None) -> str:
    """The message less its 'host: ' prefix, the host's own name and address stood in."""
    text = (message or "").removeprefix(f"{host}: ")
    if address and address not in (host, LOCAL):
        text = stand_in(text, address, _ADDR)
    return stand_in(text, host, _NAME) if host else text


def normalised(message: str | None, host: str, address: str | None = None) -> str:
    """A message with what varies from host to host for one cause taken out: the host's name
    and address, temp dirs, addresses, ports, times and figures."""
    return _normal(_own(message, host, address))


def _normal(own: str) -> str:
    m = own.replace(_NAME, "<host>").replace(_ADDR, "<address>")
    # a code's digits out of the figures' reach (private-use stand-ins), then back
    m = _CODE.sub(lambda c: c.group(0)[:c.start(2) - c.start()] + c.group(2).translate(_KEPT), m)
    for pattern, token in _VARYING:
        m = pattern.sub(token, m)
    return m.translate(_BACK)


def codes(text: str) -> list[str]:
    """The codes a message names, each once: ['XID 79', 'exit 137'] (a line that says a span of
    figures for many hosts says them beside it)."""
    return list(dict.fromkeys(f"{c.group(1)} {c.group(2)}" for c in _CODE.finditer(text or "")))


@dataclass
class Cause:
    """One cause and the hosts that said it."""
    hosts: list[str]  # each once, in the order given
    members: list[int]  # which of the items given said it
    text: str  # the message less its host's prefix: names and addresses folded back in where
    # every host said the same but for them (alike), else the first host's own
    alike: bool
    named: bool  # the text names its hosts itself (no 'hosts: ' in front needed)


def fold(items: list[tuple[str, str | None]], addresses: dict[str, str | None] | None = None,
         exact: bool = False) -> list[Cause]:
    """(host, message) pairs folded by cause, the widest first (then in the order given);
    `exact`: only messages the same but for the host's own name and address (the preflight,
    where a version or line rate that differs is the news)."""
    addresses = addresses or {}
    by: dict[str, list[int]] = {}
    own, raw, keys = [], [], {}
    for i, (host, message) in enumerate(items):
        own.append(_own(message, host, addresses.get(host)))
        raw.append((message or "").removeprefix(f"{host}: "))
        # one text said by several hosts word for word is one cause, the names in it too (each
        # host's own name stood in would tell 'lab1: no GPU; lab2: no GPU' on lab1 from lab2's)
        key = keys.setdefault(raw[-1], own[-1] if exact else _normal(own[-1]))
        by.setdefault(key, []).append(i)
    out = []
    for members in by.values():
        hosts = list(dict.fromkeys(items[i][0] for i in members))
        word_for_word = len(members) > 1 and len({raw[i] for i in members}) == 1
        text = raw[members[0]] if word_for_word else own[members[0]]
        alike = word_for_word or len({own[i] for i in members}) == 1
        named = _NAME in text
        who = hosts if alike else hosts[:1]
        text = text.replace(_NAME, _fold_any(who))
        if _ADDR in text:
            text = text.replace(_ADDR, _fold_any(a for h in who if (a := addresses.get(h))))
        out.append(Cause(hosts, members, text, alike, named))
    return sorted(out, key=lambda c: -len(c.hosts))


def cause_lines(why: dict[str, str] | list[tuple[str, str]], addresses: dict[str, str | None] | None = None,
                front: bool = False, exact: bool = False) -> list[str]:
    """One line per cause, its hosts folded, the widest first: 'unreachable: DNS: cannot
    resolve nosuch[001-050] (Name or service not known)', 'lab[2-3]: unreachable: connection
    refused by 10.0.0.[2-3]:22 (...)'; the hosts named in front where the cause does not name
    them (always, `front`); a cause whose figures differ by host said as on its first host.
    `why` may hold several messages per host as (host, message) pairs; `exact`: see fold()."""
    out = []
    for c in fold(list(why.items() if isinstance(why, dict) else why), addresses, exact):
        line = c.text if c.named and c.alike and not front else f"{_fold_any(c.hosts)}: {c.text}"
        out.append(line if c.alike else f"{line} (as on {c.hosts[0]}; each host's own in results.json)")
    return out


def causes(why: dict[str, str]) -> str:
    """Per-host causes in one line, each cause once, its hosts folded in front: 'lab[1-3]: in use by ...'."""
    return "; ".join(cause_lines(why, front=True))


# --- the run's own causes: what every host said alike is no host's ------------------------------

PROBLEMS = ("FAIL", "ERROR", "NOT RUN")
# FAILs whose evidence is the host's own hardware event (an XID in its log, an ECC error, a row
# remap, DCGM's verdict on its GPUs, wrong bits, counters that grew): on every host alike they are
# still each host's fault, never the profile's, so they are never folded into a shared cause
OWN_EVIDENCE = frozenset({"xid_history", "xid_during_run", "ecc_uncorrectable", "row_remap", "dcgm_diag",
                          "sdc", "error_counters", "soak_errors", "allreduce_correct", "collectives_correct"})
# Which part of a host a message names (GPU 3, link 5, port 1, rank 2, a PCI address) is no figure:
# two hosts whose GPU 3 and GPU 5 fail are two faults, not one cause every host shares
_IDENT = re.compile(r"\b(?:GPUs?|links?|ports?|ranks?|lanes?|slots?|trays?|NVLinks?|devices?|NICs?) "
                    r"\d+(?:(?:, | and |-|->)\d+)*", re.I)
_PCI = re.compile(r"\b[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\b")


def _parts_kept(text: str) -> str:
    """`text` with the digits of the parts it names out of the figures' reach (as _normal keeps a
    code's): _normal takes out figures, never which GPU, link or port."""
    for pattern in (_IDENT, _PCI):
        text = pattern.sub(lambda m: m.group(0).translate(_KEPT), text)
    return text
_WORD = re.compile(r"[\w.]+(?:-[\w.]+)*")  # a name as a message holds it: 'gpu-01' whole, 'lab1->lab2' two
# A FAIL every host gave alike: more likely what judged them than every host at once (issue 51 item 15)
FIGURE_HINT = ("every host alike: more likely the profile (another class, or a floor these hosts do not "
               "reach: one calibrated from one run) than each host's hardware")
RULE_HINT = ("every host alike: more likely the profile (another class) or a setting every host shares than "
             "each host's hardware")
PAIRS_HINT = ("every pair alike: more likely the profile (another class, or a floor these hosts do not "
              "reach: one calibrated from one run) or the switch they share than one host's link")


def hint(status: str, figures: bool, pairs: bool = False) -> str:
    """What a cause every host (pair) shares likely is: '' for an ERROR (its message says what to fix)."""
    return "" if status != "FAIL" else PAIRS_HINT if pairs else FIGURE_HINT if figures else RULE_HINT


@dataclass
class Shared:
    """A cause every host of the run said alike (or every pair of a check, or a check across
    hosts naming every host): the run's, one line, never a host's to drain."""
    status: str
    checks: list[str]  # each once, in the order said
    hosts: list[str]  # the hosts (or pairs) that said it
    text: str  # as the first said it, less its 'host: ' prefix
    members: list[int]  # the records it stands for (of its hosts, pairs and checks across hosts)
    figures: bool  # FAILed on a figure (a number measured), not a rule

    @property
    def of_pairs(self) -> bool:
        return all(is_pair(h) for h in self.hosts)

    @property
    def hint(self) -> str:
        return hint(self.status, self.figures, self.of_pairs)


def _generic(text: str, names: set[str]) -> str:
    """`text` with every name of the run stood in, not only its own host's, and what varies from
    host to host: one key for one cause whichever hosts it names ('lab1: no data interface' on
    lab1->lab2, 'lab2: ...' on lab2->lab3)."""
    return _normal(_WORD.sub(lambda m: "<host>" if m.group(0) in names else m.group(0), text))


def _raw(r: dict) -> str:
    return (r.get("message") or "").removeprefix(f"{r['host']}: ")


_ITS_GPU = re.compile(r" GPU \d+$")


def named(lines: list[str], hosts) -> dict[str, list[str]]:
    """host -> the lines of a check across hosts that name it: those opening with a host of the
    run ('lab2: ...', 'tray03 GPU 2: ...'), or a folded set of them ('tray[3-4]: ...'), as its
    judge writes each line about one host or tray. Only the opening is read: what follows may be
    a host's own text."""
    run, out = set(hosts), {}
    for line in lines:
        head, sep, _ = line.partition(": ")
        head = _ITS_GPU.sub("", head)  # 'tray03 GPU 2: in no NVLink domain'
        if not sep or " " in head:
            continue
        try:
            who = hostlist.expand(head) if "[" in head else [head]
        except Exception:  # noqa: BLE001 - not a fold of names: no one's
            continue
        if who and set(who) <= run:
            for h in who:
                out.setdefault(h, []).append(line)
    return out


def shared(records: list[dict], hosts: list[str], down=()) -> list[Shared]:
    """The causes every host shares: a FAIL, ERROR or NOT RUN that every host judged (two or
    more; N.A. is no judgement; a host in `down` did not answer at all and is said on its own)
    said for one cause, the names of every host stood in, on every host of each check that said
    it (20 hosts without a GPU beside one with 7 GPUs: theirs, not the run's); likewise every
    pair of a pair check. A check across hosts, or a pair, whose message holds such a cause is
    that cause too, as is one whose own lines name every host (details' at_fault or culprits).
    Each record in one at most; indexes into `records`."""
    down = set(down)
    run = [h for h in hosts if h not in down] or list(hosts)  # every host down: their causes too
    names, inside = set(hosts), set(run)
    keys: dict[str, str] = {}  # a message -> its key (a host's checks often say one same thing)

    def key(i):
        raw = _raw(records[i])
        if raw not in keys:
            keys[raw] = _generic(_parts_kept(raw), names)
        return keys[raw]

    judged: dict[tuple, set] = {}  # (check, of pairs) -> the hosts or pairs judged on it
    said: dict[tuple, dict[tuple, set]] = {}  # (status, key) -> (check, of pairs) -> who said it
    members: dict[tuple, list[int]] = {}
    for i, r in enumerate(records):
        ends = pair_ends(r["host"])
        if r.get("status") in ("N.A.", "UNSEEN") or (r["host"] not in inside
                                                      and not (ends and set(ends) <= inside)):
            continue
        judged.setdefault((r["criterion"], bool(ends)), set()).add(r["host"])
        if r["status"] in PROBLEMS and not (r["status"] == "FAIL" and r["criterion"] in OWN_EVIDENCE):
            k = (r["status"], key(i))
            said.setdefault(k, {}).setdefault((r["criterion"], bool(ends)), set()).add(r["host"])
            members.setdefault(k, []).append(i)
    everyone = {h for (_, of_pairs), who in judged.items() if not of_pairs for h in who}
    found: dict[tuple, Shared] = {}  # (status, key) -> its cause

    def add(k, i, who):
        r = records[i]
        s = found.setdefault(k, Shared(k[0], [], [], _raw(r), [], False))
        s.checks += [r["criterion"]] if r["criterion"] not in s.checks else []
        s.hosts += [h for h in who if h not in s.hosts]
        s.members.append(i)
        s.figures |= k[0] == "FAIL" and isinstance(r.get("measured"), (int, float))

    def within(status, text):
        """The widest cause found that `text` says (a pair's 'no host answered: lab1: <it>; ...')."""
        ks = [k for k in found if k[0] == status and k[1] and k[1] in text]
        return max(ks, key=lambda k: len(k[1])) if ks else None

    for k, on in said.items():  # every host, on every host of each of its checks
        by_hosts = {h for (_, of_pairs), who in on.items() if not of_pairs for h in who}
        if by_hosts and len(everyone) > 1 and by_hosts == everyone and all(
                who == judged[c] for c, who in on.items() if not c[1]):
            for i in members[k]:
                add(k, i, [records[i]["host"]])
    for k, on in said.items():  # every pair of each of its checks: a host-wide cause in it, or its own
        if k not in found and all(c[1] and len(who) > 1 and who == judged[c] for c, who in on.items()):
            for i in members[k]:
                add(within(*k) or k, i, [records[i]["host"]])
    taken = {i for s in found.values() for i in s.members}
    for i, r in enumerate(records):  # the checks across hosts and pairs that say a cause found
        if i in taken or r["host"] in inside or r.get("status") not in PROBLEMS:
            continue
        details = r.get("details") or {}
        about = set(details.get("at_fault") or ()) | set(details.get("culprits") or ())
        if len(inside) > 1 and about >= inside:
            add((r["status"], key(i)), i, run)
        elif k := within(r["status"], key(i)):
            add(k, i, [])
    return sorted(found.values(), key=lambda s: (-len(s.hosts), PROBLEMS.index(s.status)))


def checks_label(names: list[str]) -> str:
    """'gpu_temp', '5 checks (gpu_model, ecc_enabled, mig_mode, a and 1 more)'."""
    return names[0] if len(names) == 1 else f"{len(names)} checks ({', '.join(names[:4])}" \
        + (f" and {len(names) - 4} more)" if len(names) > 4 else ")")


def _fold_any(names) -> str:
    names = list(dict.fromkeys(names))
    try:
        return hostlist.fold(names)
    except Exception:  # noqa: BLE001 - names NodeSet cannot fold (IPv6, 'all hosts'): listed as they are
        return ",".join(names)


# --- per host: which host each problem is on, and what to do about it (the provider's page) ----

PAIR = "->"  # a host pair's name: 'lab3->lab1', the sender first (signoff.network.judge.pair_id)

# What a provider does about a host, by the sheet's file its check is in (acceptance/test_<file>.py).
ACTIONS = {
    "network": "check its NIC, cable or switch port",
    "gpu_health": "check its GPUs (nvidia-smi -q; reseat or replace the GPU the message names)",
    "health": "check its GPUs (nvidia-smi -q; reseat or replace the GPU the message names)",
    "interconnect": "check its NVLink/NVSwitch and GPU placement (nvidia-smi topo -m, nvidia-smi nvlink -s)",
    "fabric": "check its NVSwitch fabric (nvidia-fabricmanager, nvidia-smi -q)",
    "dcgm": "run dcgmi diag -r 3 on it and follow DCGM's message",
    "soak": "check its cooling and power under sustained load",
    "storage": "check its local disks or the shared mount it reads",
    "training": "check its GPUs, CPUs and software (the likely cause names which)",
    "versions": "align its driver and software versions with the other hosts'",
}
UNREACHABLE = "make it reachable (SSH, the inventory's address, its sshd) and run again"
SIDE_ACTION = "check its NIC, cable or switch port"


def pair_ends(name: str) -> tuple[str, str] | None:
    """(sender, receiver) of a pair's name, None for a host's."""
    a, sep, b = (name or "").partition(PAIR)
    return (a, b) if sep and a and b else None


def is_pair(name: str) -> bool:
    return pair_ends(name) is not None


def family_of(record: dict) -> str:
    """'network' of acceptance/test_network.py::test_x[h]."""
    m = re.search(r"test_(\w+)\.py::", record.get("test") or "")
    return m.group(1) if m else ""


def _fig(v) -> str:
    from signoff.units import figure
    return figure(v) if isinstance(v, float) else str(v)


def named_slow(records: list[dict]) -> dict[str, list[dict]]:
    """host -> the cluster-wide records (the all-reduce, all-to-all, rails across nodes) whose
    bisection named it slow: 2-host runs of every ring pair, the host in every slow one."""
    out: dict[str, list[dict]] = {}
    for r in records:
        if r.get("status") != "FAIL":
            continue
        bis = (r.get("details") or {}).get("bisection") or {}
        found = [bis] if "slow_hosts" in bis else [b for b in bis.values() if isinstance(b, dict)]
        for b in found:
            ran = {e for p in b.get("pairs") or {} for e in (pair_ends(p) or ())}
            if ran and ran <= set(b.get("slow_hosts") or []):  # every host slow: no one host (load)
                continue
            for h in b.get("slow_hosts") or []:
                if r not in out.setdefault(h, []):
                    out[h].append(r)
    return out


def pair_sides(records: list[dict], suspects: dict | None = None) -> dict[str, tuple[str, str] | None]:
    """Each FAILed pair -> (host, 'transmit' | 'receive'): the side at fault where the pairs show
    it, else None. A sender whose other pairs pass is not at fault, nor a receiver whose other
    pairs pass: so a slow pair whose sender sends slowly to every peer while its receiver takes
    from others at speed is the sender's. Where neither end has another pair to clear it (a ring
    of 3), the end more checks name in `suspects` (named_slow(): the collectives' bisections) decides."""
    suspects = suspects or {}
    ok_tx, ok_rx = set(), set()
    for r in records:
        ends = pair_ends(r.get("host", ""))
        if ends and r.get("status") == "PASS":
            ok_tx.add(ends[0])
            ok_rx.add(ends[1])
    out: dict[str, tuple[str, str] | None] = {}
    for r in records:
        ends = pair_ends(r.get("host", ""))
        if not ends or r.get("status") != "FAIL":
            continue
        a, b = ends
        tx, rx = a not in ok_tx, b not in ok_rx  # each end's side, not cleared by another pair
        if tx and rx:  # the end more of the collectives' bisections name, if one is
            na, nb = len(suspects.get(a) or ()), len(suspects.get(b) or ())
            tx, rx = na > nb, nb > na
        out[r["host"]] = (a, "transmit") if tx and not rx else (b, "receive") if rx and not tx else None
    return out


@dataclass
class Finding:
    """One thing wrong on a host: its status, the checks that said it, what it is, the figures
    it stands on, and what to do."""
    status: str
    checks: list[str]
    what: str
    evidence: str
    action: str


@dataclass
class HostFindings:
    """The findings of one host, or of hosts whose findings are the same cause (folded)."""
    hosts: list[str]
    findings: list[Finding]
    exclude: bool  # a judged fault (FAIL) or a host that alone could not be measured


def _what(r: dict) -> tuple[str, str]:
    """(what, likely cause) of a record's message, its host's prefix off."""
    what, _, cause = (r.get("message") or "").partition("; likely cause: ")
    return what.removeprefix(f"{r['host']}: ").strip(), cause.strip()


def _pair_figures(rs: list[dict]) -> str:
    """'lab3->lab1 0.096 Gb/s; expected >= 1 Gb/s' (several: each pair's figure)."""
    got = ", ".join(f"{r['host']} {_fig(r['measured'])}" if r.get("measured") is not None else
                    f"{r['host']}" for r in rs)
    unit, exp = rs[0].get("unit") or "", rs[0].get("expected") or ""
    return f"{got} {unit}".rstrip() + (f"; expected {exp}" if exp else "")


def host_findings(doc: dict) -> tuple[list[HostFindings], list[str]]:
    """The run's problems placed on hosts: each host's own FAIL and ERROR checks, the side at
    fault of a failed pair, the hosts a collective's bisection names slow, the hosts a failed
    collective names as its cause, the hosts a check across hosts names in its own lines
    (details' at_fault: a node on sockets, a tray outside its domain); hosts whose findings read
    the same folded into one entry. Also the lines of what no host is at fault for (a pair whose
    side the pairs do not show, a cause every host shares (shared()): a profile of another class,
    a lock another run holds, a missing threshold, a floor no host reaches; a check across hosts
    that names none)."""
    records = doc.get("results") or []
    facts = doc.get("hosts") or {}
    run_hosts = list(dict.fromkeys([*(doc.get("meta") or {}).get("hosts", []), *facts]))
    per: dict[str, list[Finding]] = {}
    excluded: set[str] = set()
    unplaced: list[str] = []

    def add(host, finding, exclude):
        if finding not in per.setdefault(host, []):
            per[host].append(finding)
        if exclude:
            excluded.add(host)

    said = {h: f["error"] for h, f in facts.items() if isinstance(f, dict) and "error" in f}
    # what every host said alike is the run's (the class of another profile, a lock another run
    # holds, a missing threshold, a floor no host reaches): one line, no host's to drain. A host
    # that did not answer is said as such, alone, unless every host did (as their checks' records)
    recs = [*({"criterion": "", "host": h, "status": "ERROR", "message": e} for h, e in said.items()),
            *records]
    common = shared(recs, run_hosts, down=said)
    taken = {i for c in common for i in c.members}
    common_ids = {id(recs[i]) for i in taken}
    for c in common:
        if c.status == "NOT RUN":
            continue
        who = [h for h in c.hosts if h in run_hosts] or c.hosts
        checks = [x for x in c.checks if x]
        unplaced.append((f"{checks_label(checks)} {c.status}" if checks else "no host answered,")
                        + f" on every {'pair' if c.of_pairs else 'host'} alike ({_fold_any(who)}): {c.text}"
                        + (f"; {c.hint}" if c.hint else ""))
    for h, e in said.items():  # a host that did not answer at the run's start
        if not any(i < len(said) and recs[i]["host"] == h for i in taken):
            add(h, Finding("ERROR", [], f"did not answer: {e}", "", UNREACHABLE), True)
    slow = named_slow(records)
    blamed = {id(r) for rs in slow.values() for r in rs}
    nobody: list[tuple[int, dict]] = []  # checks across hosts that FAILed or ERRORed naming no host
    for i, r in enumerate(recs[len(said):], len(said)):
        if r.get("status") not in ("FAIL", "ERROR") or i in taken or is_pair(r["host"]):
            continue
        if r["host"] in run_hosts:  # a host's own check
            if r["host"] in said:
                continue
            what, cause = _what(r)
            action = UNREACHABLE if "unreachable" in what else \
                ACTIONS.get(family_of(r), "look into it, then run again")
            ev = f"{_fig(r['measured'])} {r.get('unit') or ''}".rstrip() if r.get("measured") is not None \
                else ""
            what += f"; likely cause: {cause}" if cause else ""
            add(r["host"], Finding(r["status"], [r["criterion"]], what, ev, action), True)
            continue
        details = r.get("details") or {}
        lines = {h: ls for h, ls in (details.get("at_fault") or {}).items() if h in run_hosts}
        culprits = [h for h in details.get("culprits") or [] if h in run_hosts and h not in lines]
        for h, ls in lines.items():  # its own lines name the host (a tray outside the domain, sockets)
            what = "; ".join(x.removeprefix(f"{h}: ").removeprefix(f"{h} ") for x in ls)
            cause = _what(r)[1]
            what += f"; likely cause: {cause}" if cause else ""
            add(h, Finding(r["status"], [r["criterion"]], what, "",
                           ACTIONS.get(family_of(r), "look into it, then run again")), True)
        for h in culprits:  # a failed collective across nodes: the hosts it names as its cause
            add(h, Finding(r["status"], [r["criterion"]], f"{r['criterion']} failed on it: "
                           + _what(r)[0], "", "look into it (the message names what it said), then run "
                           "again"), True)
        if not lines and not culprits and id(r) not in blamed:
            nobody.append((i, r))
    for c in fold([("", f"{r['status']} {_what(r)[0]}") for _, r in nobody]):
        rs = [nobody[i][1] for i in c.members]
        label = checks_label(list(dict.fromkeys(r["criterion"] for r in rs)))
        unplaced.append(f"{label} {rs[0]['status']} on {ALL}, naming no one host: {_what(rs[0])[0]}")
    # pairs: the side at fault where the pairs show it
    pairs = [r for r in records if is_pair(r.get("host", ""))]
    sides = pair_sides(pairs, slow)
    mine: dict[tuple[str, str], list[dict]] = {}
    for r in pairs:
        if r["status"] != "FAIL" or id(r) in common_ids:  # every pair alike: said above, no side's
            continue
        side = sides.get(r["host"])
        if side:
            mine.setdefault(side, []).append(r)
        else:
            a, b = pair_ends(r["host"])
            unplaced.append(f"{r['criterion']} {r['host']}: {_pair_figures([r])}: the pairs do not show "
                            f"which side is slow ({a}'s transmit or {b}'s receive, or the path between)")
    for (h, way), rs in mine.items():
        of = [r for r in pairs if pair_ends(r["host"])[0 if way == "transmit" else 1] == h
              and r["status"] in ("PASS", "FAIL")]
        verb = "sends" if way == "transmit" else "receives"
        every = f"every pair it {verb}" if len(rs) == len(of) else \
            f"{len(rs)} of the {len(of)} pairs it {verb}"
        add(h, Finding("FAIL", [rs[0]["criterion"]], f"{way} side slow on {every}", _pair_figures(rs),
                       SIDE_ACTION), True)
    # cluster-wide checks: the hosts their bisection names slow
    for h, rs in slow.items():
        exp = {r.get("expected") for r in rs if len(r.get("expected") or "") <= 30}
        figs = ", ".join(f"{r['criterion']} {_fig(r['measured'])} {r.get('unit') or ''}".rstrip()
                         for r in rs) + (f"; expected {exp.pop()}" if len(exp) == 1 else "")
        add(h, Finding("FAIL", [r["criterion"] for r in rs], "slow in the collectives across nodes: the "
                       "2-host runs of every ring pair name it", figs, SIDE_ACTION), True)
    return _folded(per, excluded, run_hosts), unplaced


def _folded(per: dict[str, list[Finding]], excluded: set[str], order: list[str]) -> list[HostFindings]:
    """Hosts whose findings are one cause (alike but for figures, names, addresses; not for the GPU,
    link or port they name) folded."""
    rank = {h: i for i, h in enumerate(order)}
    by: dict[tuple, HostFindings] = {}
    for h in sorted(per, key=lambda h: (rank.get(h, len(rank)), h)):
        # which GPU, link or port is kept: the provider's page says each host's own
        key = (h in excluded, *((f.status, tuple(f.checks), normalised(_parts_kept(f.what), h), f.action)
                                for f in per[h]))
        if key in by:
            by[key].hosts.append(h)
        else:
            by[key] = HostFindings([h], per[h], h in excluded)
    return sorted(by.values(), key=lambda g: (not g.exclude, -len(g.hosts)))


def to_exclude(groups: list[HostFindings]) -> list[str]:
    """The hosts to exclude from a job or drain, in order."""
    return [h for g in groups if g.exclude for h in g.hosts]


def drain_reason(g: HostFindings, run: str = "") -> str:
    """A Slurm drain reason of a host's findings: short, one line, no quote or shell character."""
    first = g.findings[0]
    text = f"signoff{' ' + run if run else ''}: {','.join(first.checks) or 'unreachable'} {first.status}: " \
           f"{first.what}"
    if len(g.findings) > 1:
        text += f" (+{len(g.findings) - 1} more)"
    text = re.sub(r"[^\w .,:;/()>=+%@-]", "_", " ".join(text.split()))
    return text if len(text) <= 120 else text[:117] + "..."
