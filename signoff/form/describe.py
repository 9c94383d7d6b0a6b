"""What was rented, in words: each host's form (bare metal, a VM, a container, both), the slice
of its class, its NVLink fabric, its NICs and disk as the provider gives them, from the host's
form facts (facts["preflight"]["form"], probe_form.py). rented() gives the cover's lines, hosts
of one form folded into one; line() the preflight's. Plain text, bounded: every value a host
wrote is made inert (printable) and cut; the report escapes it again."""

from __future__ import annotations

import functools
from collections import defaultdict

from signoff.form.judge import form_of, size, text

MAX_LINES = 8  # the cover's forms: the rest are in results.json
MAX_LINE = 400
MAX_NICS = 2


def _hints(form: dict, ks: list[str]) -> list[str]:
    """The weak markers of a kind the probe did not decide (probe_form.py: hints), each said with
    what else it is on bare metal: "DMI: Amazon EC2, a .metal instance?"."""
    out = []
    for k in ("vm", "container"):
        part = form.get(k)
        got = part.get("hints") if isinstance(part, dict) and k not in ks else None
        for h in got[:4] if isinstance(got, list) else ():
            h = str(h)
            if h.startswith("dmi: "):
                out.append(f"DMI: {text(h[5:], 40)}, a .metal instance?")
            elif h.startswith("pci: "):
                out.append(f"{text(h[5:], 40)} on PCI, a DPU's virtio emulation?")
            else:
                out.append(f"{text(h, 40)} set, no container marker")
    return out


def kinds(form: dict) -> str:
    """'bare metal', 'a VM (kvm)', 'a container (docker)', 'a VM (kvm) and a container (docker)';
    the hints of a kind not decided after it: 'bare metal (DMI: Amazon EC2, a .metal instance?)'."""
    ks = [k for k in form.get("kinds") or [] if k in ("vm", "container")]
    hints = "; ".join(_hints(form, ks))
    if not ks:
        return f"bare metal ({hints or 'no VM or container marker'})"
    words = []
    for k in ks:
        name = (form.get(k) or {}).get("name")
        words.append(("a VM" if k == "vm" else "a container") + (f" ({text(name, 24)})" if name else ""))
    return " and ".join(words) + (f" ({hints})" if hints else "")


def _nic(n: dict) -> str:
    speed = n.get("speed_mbps")
    known = isinstance(speed, (int, float)) and not isinstance(speed, bool) and speed > 0
    rate = f"{speed / 1000:g} Gb/s" if known else "speed not advertised"
    vf = ", an SR-IOV VF" if n.get("vf") else ""
    drv = n.get("driver") or ("virtual, no device" if n.get("virtual") else "no driver")
    # by driver, not name: hosts of one form fold into one line whatever their NICs are called
    return f"NIC {text(drv, 24)} ({rate}{vf})"


def nics(form: dict) -> str:
    """The NICs worth naming: the ones on a device first (a bridge or a veth is plumbing), at most two."""
    all_ = [n for n in form.get("nics") or [] if isinstance(n, dict)]
    shown = [n for n in all_ if n.get("driver") not in ("bridge", None)] or all_
    if not shown:
        return "no NIC"
    more = len(shown) - MAX_NICS
    return "; ".join(_nic(n) for n in shown[:MAX_NICS]) + (f" and {more} more" if more > 0 else "")


def disk(form: dict) -> str:
    d = form.get("disk") or {}
    if not isinstance(d, dict) or not (d.get("device") or d.get("kind")):
        return "disk not identified"
    if d.get("kind") in ("network", "ram"):
        return f"storage path {text(d.get('path'), 60)} on a {d['kind']} filesystem"
    rot = " (the kernel says rotational)" if d.get("rotational") else ""
    return (f"disk {text(d.get('device') or '?', 24)} {text(d.get('driver') or 'no driver', 24)} "
            f"({text(d.get('kind') or 'kind unknown', 24)}){rot}")


def limits(form: dict) -> str:
    sh = (form.get("shm") or {}).get("bytes")
    ml = form.get("memlock") or {}
    log = form.get("kernel_log") or {}
    user = text(form.get("user") or "?", 24)
    user += " (root)" if form.get("root") and form.get("user") != "root" else ""
    return (f"user {user}; dmesg {'readable' if log.get('readable') else 'not readable'}; "
            f"/dev/shm {size(sh) if sh is not None else 'unread'}; memlock {size(ml.get('soft'))}")


def line(form: dict) -> str:
    """The preflight's form line of one host."""
    return f"{kinds(form)}; {limits(form)}; {nics(form)}; {disk(form)}"


def _slice(meta: dict, gpus: int) -> str:
    prof = str(meta.get("profile") or "")
    if "@" not in prof:
        return f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "no GPU"
    cls, _, n = prof.partition("@")
    full = _full_count(prof)
    of = f" of the {full} GPUs" if full else ""
    return f"a slice of {text(n, 8)}{of} of {text(cls, 40)}"


@functools.lru_cache(maxsize=8)
def _full_count(prof: str) -> int | None:
    """The class's GPUs of a slice profile (its full_count), read once: every host of a run of
    1,000 names the same profile."""
    try:
        from signoff import profiles
        return getattr(profiles.load(prof), "full_count", None)
    except Exception:  # noqa: BLE001 - a results.json of another checkout: said without it
        return None


def _fabric(facts: dict) -> str:
    gpus = [g for g in (facts.get("nvidia") or {}).get("gpus") or [] if isinstance(g, dict)]
    if not gpus:
        return ""
    fab = any((g.get("fabric") or {}).get("supported") for g in gpus)
    links = sum(((g.get("nvlink") or {}).get("up") or 0) for g in gpus if isinstance(g.get("nvlink"), dict))
    return ("NVLink fabric visible" if fab else "no NVLink fabric visible") + \
        (f", {links} NVLinks up" if links else ", no NVLink up")


def _storage(doc: dict, names: list[str]) -> str:
    figs = [r.get("measured") for r in doc.get("results") or [] if isinstance(r, dict)
            and r.get("criterion") == "storage_read_seq" and r.get("host") in names
            and isinstance(r.get("measured"), (int, float)) and not isinstance(r.get("measured"), bool)]
    if not figs:
        return ""
    unit = next((text(r.get("unit") or "", 12) for r in doc["results"] if isinstance(r, dict)
                 and r.get("criterion") == "storage_read_seq"), "")
    lo, hi = min(figs), max(figs)
    return f", storage_read_seq {lo:.3g}{'' if lo == hi else f'-{hi:.3g}'} {unit}".rstrip()


def rented(doc: dict) -> list[str]:
    """The cover's "what was rented" lines from a results document (results.json's form): hosts of
    one form in one line, e.g. "node[1-2]: a VM (kvm) and a container (docker); a slice of 2 of the
    8 GPUs of h100-8x-nvlink; no NVLink fabric visible, no NVLink up; NIC virtio_net (speed not
    advertised); disk vda virtio_blk (virtual) (the kernel says rotational), storage_read_seq 1.53 GB/s".
    Hosts without form facts (an older sysinfo) are left out."""
    from signoff import hostlist
    meta = doc.get("meta") or {}
    groups: dict[str, list[str]] = defaultdict(list)
    for name, facts in (doc.get("hosts") or {}).items():
        if not isinstance(facts, dict):
            continue
        form = form_of(facts)
        if not form:
            continue
        try:
            gpus = len((facts.get("nvidia") or {}).get("gpus") or [])
            parts = [kinds(form), _slice(meta, gpus), _fabric(facts), nics(form), disk(form)]
        except (AttributeError, TypeError, ValueError):  # facts of a shape no probe of ours prints
            parts = ["form facts unreadable"]
        groups["; ".join(p for p in parts if p)].append(str(name))
    out = []
    for said, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        try:
            who = hostlist.fold(names)
        except Exception:  # noqa: BLE001 - names no hostlist takes: listed as they are
            who = ",".join(names)
        out.append(text(f"{who}: {said}{_storage(doc, names)}", MAX_LINE))
    if len(out) > MAX_LINES:
        out = out[:MAX_LINES] + [f"and {len(out) - MAX_LINES} more forms (results.json, each host's "
                                 f"preflight.form)"]
    return out
