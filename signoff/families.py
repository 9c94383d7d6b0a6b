"""The criterion families: every package under signoff/ whose __init__ declares CRITERIA.

A family's __init__ (light: no controller imports, the profile loader reads it) declares
  CRITERIA   {criterion: {"type": "number"|"version"|"name", "ops": ("min",) by default, "extra": keys}}
  check_extra(criterion, extra, where)   optional: validate a threshold's extra keys (InputError)
  check_profile(profile, where)   optional: validate the loaded profile as a whole (its class too)
  SECTIONS   optional {top-level profile key: merge(inherited, section, where) -> dict}
  PLUGIN     optional: its pytest plugin module (options, fixtures, the pytest_signoff_* hooks)
  REPORT_DIRS   optional: the report dir's directories it writes (a reused one moves them: plugin.RUN_DIRS)
  rebuild(report_dir, doc)   optional: what `python -m signoff.results rebuild` adds for it
  bound(doc)   optional: its sections in results.json's form, less what its per-host files hold
  load(report_dir, doc)   optional: bound()'s inverse, what signoff.results.load() reads back
  estimate(config, profile, picked, pairs)   optional: `signoff plan`'s lines for its long
             measurements (picked: the criteria that will run; pairs: the host pairs)
  PREFLIGHT_LAST   optional: True puts its preflight part after the others' on the host's line
  preflight(ctx, host, facts)   optional: (what the host's sysinfo says of its part, e.g. "data_iface
             ib0 (400 Gb/s)"; the checks of its own that will ERROR or be N.A. there and why, in
             the check's words), for the preflight of `signoff plan` and a run (signoff/preflight.py)
and its probes are signoff/<family>/probe_<name>.py, shipped to every host as <name>.py, beside
what they share (signoff/probelib.py).
Adding a family touches its folder, a profile and one acceptance file (docs/architecture.md)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from types import ModuleType

PKG = Path(__file__).resolve().parent


@cache
def modules() -> tuple[ModuleType, ...]:
    found = []
    for m in sorted(pkgutil.iter_modules([str(PKG)]), key=lambda m: m.name):
        if m.ispkg:
            mod = importlib.import_module(f"signoff.{m.name}")
            if hasattr(mod, "CRITERIA"):
                found.append(mod)
    return tuple(found)


def name(mod: ModuleType) -> str:
    return mod.__name__.rsplit(".", 1)[-1]


@cache
def criteria() -> dict[str, dict]:
    """Every criterion a profile may set, with the family that judges it."""
    out: dict[str, dict] = {}
    for mod in modules():
        for crit, spec in mod.CRITERIA.items():
            if crit in out:  # a programming error, caught by the suite's own tests
                raise RuntimeError(f"criterion {crit} declared by {out[crit]['family']} and {name(mod)}")
            out[crit] = {**spec, "family": name(mod)}
    return out


def family(criterion: str) -> ModuleType:
    return next(m for m in modules() if criterion in m.CRITERIA)


@cache
def sections() -> dict:
    """Top-level profile keys the families own (e.g. soak:), and how each is merged."""
    return {key: merge for mod in modules() for key, merge in getattr(mod, "SECTIONS", {}).items()}


def plugins() -> list[str]:
    return [mod.PLUGIN for mod in modules() if getattr(mod, "PLUGIN", None)]


def probes() -> dict[str, Path]:
    """Probe name -> file: every family's probe_<name>.py."""
    return {f.stem.removeprefix("probe_"): f for f in sorted(PKG.glob("*/probe_*.py"))}


def shipped() -> dict[str, Path]:
    """File name on the host -> file: every probe as <name>.py, and probelib.py beside them."""
    return {**{f"{n}.py": f for n, f in probes().items()}, "probelib.py": PKG / "probelib.py"}


def estimates(config, profile, picked, pairs) -> list[str]:
    """`signoff plan`'s time of every family's long measurements, in the families' order."""
    return [ln for mod in modules() if getattr(mod, "estimate", None)
            for ln in mod.estimate(config, profile, picked, pairs)]


def timings(config, profile, picked, inventory, facts) -> tuple[list[str], list[tuple]]:
    """`signoff plan`'s time of the runs over all hosts that the hosts' answers tell (their line
    rate), and the warnings where one cannot fit its timeout, in the families' order."""
    lines, late = [], []
    for mod in modules():
        if getattr(mod, "timing", None):
            s, w = mod.timing(config, profile, picked, inventory, facts)
            lines += s
            late += w
    return lines, late


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """Every family's preflight of one host, in the families' order (signoff/preflight.py)."""
    said, warned = [], []
    # a family may ask to come last (PREFLIGHT_LAST: the form's long line closes the host's)
    for mod in sorted(modules(), key=lambda m: bool(getattr(m, "PREFLIGHT_LAST", False))):
        if getattr(mod, "preflight", None):
            try:
                s, w = mod.preflight(ctx, host, facts)
            except (AttributeError, TypeError, KeyError, ValueError, IndexError) as exc:
                # a host's sysinfo of a shape no probe of ours prints (a hostile or broken host):
                # its own line says so; the other hosts' preflight, and the run, go on
                s, w = [], [f"{mod.__name__.rsplit('.', 1)[-1]}: its part of this host's sysinfo is not "
                            f"what the probe prints ({type(exc).__name__}: {exc}): its checks ERROR"]
            said += s
            warned += w
    return said, warned
