"""UNSEEN: what this machine's form cannot show (issue 52 item 3). A rented VM slice has no
fabric manager, a VM often no DCGM, a container no kernel log: such a check is neither a PASS
(nothing was judged) nor an ERROR of the run (there is nothing here to fix), but a thing to ask
the provider for. A check raises it with signoff.check.cannot_show(ask, why); it travels as a
pytest skip with PREFIX (as N.A. does), its ask and why kept in the record; the verdict stands
without it (every check N.A. or UNSEEN: INCOMPLETE), each output says how many and what to ask
for, and --unseen-error makes every one an ERROR. Also here: the rules of the form (facts'
preflight.form) the checks decide by, and the plan's line for each."""

from __future__ import annotations

import functools
import re

import pytest

from signoff.printable import printable

STATUS = "UNSEEN"
PREFIX = "UNSEEN:"
OPTION = "--unseen-error"
ASK = "ask the provider for"
MAX_NICS = 2  # as signoff/form/describe.py: a host's NIC list is its own to lengthen


def text(v, n: int = 60) -> str:
    """A value a host wrote, inert and bounded (signoff/form/judge.py's text(), the core's own copy:
    it reaches the skip's message, results.json, junit, the cover and the plan)."""
    s = printable(v)
    return s if len(s) <= n else s[:n - 3] + "..."


class CannotShow(pytest.skip.Exception):
    """pytest's skip, carrying what to ask the provider for and why this machine cannot show it
    (the recorder reads both: a skip's text alone could be a host's words posing as ours)."""

    def __init__(self, ask: str, why: str):
        super().__init__(f"{PREFIX} {message(ask, why)}")
        self.ask, self.why = ask, why


def message(ask: str, why: str) -> str:
    return f"this machine cannot show it ({why}): {ASK} {ask}"


def error_message(ask: str, why: str) -> str:
    """The ERROR's text under --unseen-error: the same ask, said as a run that did not measure."""
    return f"{why}: cannot be shown here ({OPTION}): {ASK} {ask}"


# ------------------------------------------------------------------ the machine's form


def form(facts) -> dict:
    """The sysinfo's preflight.form (signoff/form: the machine's form), {} where an older probe
    recorded none."""
    pf = (facts or {}).get("preflight") if isinstance(facts, dict) else None
    got = (pf or {}).get("form") if isinstance(pf, dict) else None
    return got if isinstance(got, dict) else {}


def kinds(facts) -> list[str]:
    """'vm', 'container' (both where both); [] on bare metal or where the form is unknown."""
    got = form(facts).get("kinds")
    return [k for k in got if k in ("vm", "container")] if isinstance(got, list) else []


def kind_text(facts) -> str:
    """'VM (kvm)', 'container (docker)', 'VM (kvm) and container (docker)'."""
    f = form(facts)
    out = []
    for k, word in (("vm", "VM"), ("container", "container")):
        if k in kinds(facts):
            name = (f.get(k) or {}).get("name") if isinstance(f.get(k), dict) else None
            out.append(f"{word} ({text(name, 24)})" if name else word)
    return " and ".join(out)


def dcgm_unseen(facts, level) -> tuple[str, str] | None:
    """(ask, why) where DCGM is missing on a VM or in a container: the provider's host runs it,
    not the tenant (on bare metal a missing DCGM is the run's to fix: an ERROR)."""
    where = kind_text(facts)
    if not where:
        return None
    return (f"a DCGM diagnostic run (dcgmi diag -r {level}) on the host",
            f"no DCGM in this {where}")


PERMISSION = re.compile(r"permission|not permitted|EPERM|EACCES", re.I)
XID_ASK = "the host's XID log (the NVRM: Xid lines of its kernel log, over xid_fatal's window)"
XID_FIX = "run as root, or as a user in the adm or systemd-journal group"


def _log_denied(facts, error: str) -> bool:
    f = form(facts)
    log = f.get("kernel_log") if isinstance(f.get("kernel_log"), dict) else {}
    unreadable = log.get("readable") is False and f.get("root") is not True
    return unreadable or bool(PERMISSION.search(error or ""))


def xid_unseen(facts, error: str) -> tuple[str, str] | None:
    """(ask, why) where the kernel log is unreadable for want of a permission a VM's or a
    container's tenant is not given (in a container, or run as a user who is not root). On bare
    metal the operator is the provider: an unreadable log is a fault to fix (None: the check
    ERRORs, xid_fix() saying how), as it is for root in a VM."""
    f = form(facts)
    log = f.get("kernel_log") if isinstance(f.get("kernel_log"), dict) else {}
    root = f.get("root")
    container = "container" in kinds(facts)
    if not kinds(facts) or not _log_denied(facts, error) or not (container or root is False):
        return None
    where = [f"a {kind_text(facts)}"]
    if root is False:
        where.append(f"run as {text(f.get('user') or 'a user', 24)}, not root")
    said = text(log.get("why") or error, 120)
    return XID_ASK, (f"{', '.join(where)}: the kernel log is not readable here"
                     + (f" ({said})" if said else ""))


def xid_fix(facts, error: str) -> str:
    """The fix said with the ERROR where the log was denied on bare metal to a user who is not
    root ('' otherwise): the operator can give the permission."""
    if kinds(facts) or form(facts).get("root") is True or not _log_denied(facts, error):
        return ""
    return f"; the kernel log needs a permission this user lacks: {XID_FIX}"


def slice_class(profile):
    """(the class profile, slice GPUs, class GPUs) of a slice profile ("<class>@<N>": its
    slice_of), None for any other profile."""
    of = getattr(profile, "slice_of", "") or ""
    if not of:
        return None
    cls = _class(of)
    full = getattr(profile, "full_count", None) or cls.hardware.get("gpu_count")
    return cls, profile.hardware.get("gpu_count"), full


@functools.lru_cache(maxsize=16)
def _class(name: str):
    """A slice's class profile, read once (each host's check and the plan's lines ask for it)."""
    from signoff import profiles
    return profiles.load(name)


def slice_text(profile, cls, n, full) -> str:
    return f"a slice of {n or '?'} of the {full or '?'} GPUs of {cls.name}"


FABRIC_ASK = "the NVLink fabric state of the server (nvidia-smi -q Fabric, the fabric manager's log)"


def fabric_class(profile):
    """The class profile where `profile` is a slice of a class with an NVLink fabric (its rule
    judges any fabric state NVML reports on the slice), else None."""
    got = slice_class(profile)
    return got[0] if got is not None and got[0].hardware.get("nvlink_fabric") else None


def fabric_reported(fabs) -> bool:
    """Whether NVML reports a fabric state for any GPU (signoff/fabric/judge.py unread(): a
    state neither absent nor 0, not supported)."""
    vals = fabs.values() if isinstance(fabs, dict) else fabs or []
    return any(isinstance(f, dict) and f.get("state") not in (None, 0) for f in vals)


def fabric_unseen(profile, facts, fabs) -> tuple[str, str] | None:
    """(ask, why) on a slice of a class with an NVLink fabric, in a VM or a container, where NVML
    reports no fabric state: the fabric manager runs on the provider's host, outside the slice.
    A state NVML reports is judged by the class's rule; on bare metal none is the class's ERROR."""
    if fabric_class(profile) is None or fabric_reported(fabs) or not kinds(facts):
        return None
    return FABRIC_ASK, (f"{slice_text(profile, *slice_class(profile))}: the fabric manager runs outside "
                        f"this machine")


def class_ib_ports(profile):
    """(the class, its nic_rate threshold) where `profile` is a slice of a class whose nic_rate
    fixes InfiniBand ports, else None."""
    got = slice_class(profile)
    if got is None:
        return None
    t = got[0].criteria.get("nic_rate")
    if t is None or t.extra.get("fabric") != "infiniband" or t.extra.get("derived"):
        return None
    return got[0], t


def nic_unseen(profile, facts, infiniband: list, iface: str | None) -> tuple[str, str] | None:
    """(ask, why) on a slice of a class with fixed InfiniBand ports, in a VM or a container, where
    the host has none: the server's ports are the provider's; the slice has its virtual NIC. On
    bare metal (an InfiniBand driver that did not load) the check judges as on any host."""
    got = class_ib_ports(profile)
    if got is None or infiniband or not kinds(facts):
        return None
    cls, t = got
    nics = [n for n in form(facts).get("nics") or [] if isinstance(n, dict) and n.get("name") != "lo"]
    mine = [n for n in nics if n.get("name") == iface] or nics
    more = len(mine) - MAX_NICS
    said = ", ".join(f"{text(n.get('name'), 24)} ({text(n.get('driver') or 'driver unknown', 24)})"
                     for n in mine[:MAX_NICS]) + (f" and {more} more" if more > 0 else "")
    said = said or text(iface or "no data interface", 24)
    return (f"the server's {t.extra.get('ports', 1)} x {t.value:g} {t.unit} InfiniBand ports of {cls.name}",
            f"a slice with the provider's NIC {said}")


# ------------------------------------------------------------------ said in every output


def records(doc_or_records) -> list[dict]:
    recs = doc_or_records["results"] if isinstance(doc_or_records, dict) else doc_or_records
    return [r for r in recs if r.get("status") == STATUS]


def asks(recs: list[dict]) -> list[str]:
    """What to ask the provider for, each once, in the run's order."""
    return list(dict.fromkeys(str(r.get("ask") or r.get("criterion")) for r in recs))


def verdict_suffix(doc: dict) -> str:
    """'; 3 checks this machine cannot show: ask the provider for A, B, C' ('' where none): said
    after the verdict word on the terminal, in report.md, on the cover and in junit."""
    recs = records(doc)
    if not recs:
        return ""
    hosts = {r.get("host") for r in recs}
    who = "this machine" if len(hosts) == 1 else "these machines"
    return (f"; {len(recs)} check{'s' * (len(recs) != 1)} {who} cannot show: {ASK} "
            + ", ".join(asks(recs)))


def groups(doc: dict) -> list[dict]:
    """The cover's list: per ask and why, its checks and hosts (folded by the caller)."""
    by: dict[tuple, dict] = {}
    for r in records(doc):
        key = (str(r.get("ask") or r.get("criterion")), str(r.get("why") or r.get("message") or ""))
        g = by.setdefault(key, {"ask": key[0], "why": key[1], "checks": [], "hosts": []})
        if r["criterion"] not in g["checks"]:
            g["checks"].append(r["criterion"])
        g["hosts"].append(r["host"])
    return list(by.values())


def rented(doc: dict) -> list[str]:
    """The cover's "what was rented" lines: the form family's (signoff/form/describe.py rented(),
    reached through signoff.families as the core reaches every family); none without it."""
    import importlib

    from signoff import families
    for mod in families.modules():
        if families.name(mod) == "form":
            try:
                describe = importlib.import_module(f"{mod.__name__}.describe").rented
            except (ImportError, AttributeError):
                return []
            return [str(x) for x in describe(doc) or []]
    return []


def plan_line(check: str, ask: str, why: str, config) -> str:
    """A preflight warning in the run's words: UNSEEN (no ERROR word: the plan's exit 6 is for
    what the run would ERROR), or ERROR under --unseen-error."""
    if config is not None and _option(config):
        return f"{check} ERROR ({OPTION}): {why}: {ASK} {ask}"
    return f"{check} UNSEEN (this machine cannot show it: {why}): {ASK} {ask}"


def _option(config) -> bool:
    try:
        return bool(config.getoption("unseen_error", False))
    except (AttributeError, ValueError):
        return False


def cover_items(doc: dict) -> list[dict]:
    """The cover's "What this machine cannot show" items: ask, why, checks, hosts folded."""
    from signoff.report import hosts_text
    out = []
    for g in groups(doc):
        n = len(set(g["hosts"]))
        out.append({"ask": g["ask"], "why": g["why"], "checks": ", ".join(g["checks"]),
                    "who": hosts_text(g["hosts"]) if n == 1 else f"{n} hosts {hosts_text(g['hosts'])}"})
    return out


def lines(doc: dict) -> list[str]:
    """One line per ask and why, hosts folded (the terminal, report.md)."""
    return [f"UNSEEN {x['checks']} on {x['who']}: {ASK} {x['ask']} ({x['why']})" for x in cover_items(doc)]
