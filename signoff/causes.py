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

# What makes one host's message differ from another's for the same cause: its temp dir,
# addresses and ports, times, figures (kept in each check's details and results.json).
_VARYING = [(re.compile(r"/tmp/signoff\.\w{8}"), "/tmp/signoff.*"),
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
    own = []
    for i, (host, message) in enumerate(items):
        own.append(_own(message, host, addresses.get(host)))
        by.setdefault(own[-1] if exact else _normal(own[-1]), []).append(i)
    out = []
    for members in by.values():
        hosts = list(dict.fromkeys(items[i][0] for i in members))
        text, alike = own[members[0]], len({own[i] for i in members}) == 1
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


def _fold_any(names) -> str:
    names = list(dict.fromkeys(names))
    try:
        return hostlist.fold(names)
    except Exception:  # noqa: BLE001 - names NodeSet cannot fold (IPv6, 'all hosts'): listed as they are
        return ",".join(names)
