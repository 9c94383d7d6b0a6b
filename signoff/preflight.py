"""The preflight: before anything is measured, per host, what the run's probes will find there
(the probe interpreter and its torch and NCCL, the storage path and its filesystem, the data
interface and its line rate, the tools and which fallback serves), and each check that will
ERROR or be N.A. for it, in the words of that check. It reads the sysinfo every run (and
`signoff plan`'s contact) gathers first, whose `preflight` key the other families' probe
functions fill (signoff/gpu/probe_sysinfo.py preflight()); each family says its part
(families.preflight). Hosts whose lines are the same fold into one line with a host range."""

from __future__ import annotations

import re
from dataclasses import dataclass

from signoff import causes, families

# a warning that predicts an ERROR, or a FAIL (a host of another class): `signoff plan` exits
# plan.PREDICTS_ERROR on one; an N.A. or a note ("judged over this boot only") does not
PREDICTS = re.compile(r"\b(ERRORs?|FAILs?)\b")
CONTROLLER = ("no --hosts or --inventory: the controller itself (this machine) is the host judged, "
              "not a cluster node")


@dataclass(frozen=True)
class Context:
    """What a family's preflight judges a host's facts by: the run's options, its profile,
    the criteria that will run (--only, -k) and how many hosts the run has."""
    config: object
    profile: object
    picked: frozenset
    hosts: int

    def checks(self, *names: str) -> list[str]:
        """Those of `names` that will run."""
        return [n for n in names if n in self.picked]


def lines(config, inventory, facts: dict, profile, picked, extra=(), fatal: list | None = None) -> list[str]:
    """The preflight block: a line per group of hosts alike, then the warnings (every host's
    sysinfo in `facts`, or its error: a host that did not answer is said elsewhere). extra: more
    (host, warning) pairs (`signoff plan`'s: an unreachable host, another class, a collective
    longer than its timeout); fatal: gets the warning lines that predict an ERROR or a FAIL."""
    ctx = Context(config, profile, frozenset(picked), len(inventory.hosts))
    said, warned = {}, []
    for h in inventory.hosts:
        f = facts.get(h.name)
        if not isinstance(f, dict):
            continue
        parts, warns = families.preflight(ctx, h, f)
        tools = (f.get("preflight") or {}).get("tools")
        if tools:  # what each family's fallback is chosen by (said in its part)
            parts.append("tools: " + (", ".join(t for t, ok in tools.items() if ok) or "none")
                         + "".join(f"; no {t}" for t, ok in tools.items() if not ok))
        said[h.name] = "; ".join(parts)
        warned += [(h.name, w) for w in warns]
    warned += list(extra)
    out = ["preflight (what each host's sysinfo found; nothing measured):"]
    out += [f"  {ln}" for ln in causes.cause_lines(said, front=True, exact=True)] or ["  no host answered"]
    warnings = [f"  {line}" for line in causes.cause_lines(warned, front=True, exact=True)]
    if inventory.source.startswith("default"):
        warnings.insert(0, f"  {CONTROLLER}")
    if fatal is not None:
        fatal += [w.strip() for w in warnings if PREDICTS.search(w)]
    if warnings:
        out += ["will ERROR or be N.A. in a run, or judge less than you may think (fix before it):",
                *warnings]
    return out
