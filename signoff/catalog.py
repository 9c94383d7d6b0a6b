"""What the sign-off sheet holds, for a person (`signoff list checks`, `plan`, `run --only`):
each test function of acceptance/, its file and family, and what of a profile it judges against,
read from the tests' source (as signoff/sheet.py reads the sheet) without importing them."""

from __future__ import annotations

import ast
import difflib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from signoff import InputError, families, paths, sheet

# What a check is parametrised by, as signoff/sheet.py scopes it: every host, every host pair of
# the network family; neither: once, over all hosts at once. `plan` gets the real list from the
# plugin; this is the default for a listing made without one.
PARAMS = ("host", "pair")
SCOPES = {"host": "per host", "pair": "per host pair", None: "once, all hosts at once"}


@dataclass(frozen=True)
class Entry:
    criterion: str  # the test function's name less test_: the sheet's criterion
    file: str  # its acceptance file's name less test_ and .py (gpu_health)
    family: str  # the family that judges it (signoff/<family>/), else its file's name
    scope: str | None  # host, pair, ...; None: one check over all hosts
    thresholds: tuple[str, ...]  # the profile.threshold() names it is judged against
    hardware: tuple[str, ...]  # the profile's hardware: keys it reads (the class checks)


def _used(fn: ast.FunctionDef) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """profile.threshold("x") and profile.hardware.get("k") in a test's body, in order."""
    thr, hw = [], []
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            continue
        target, arg = ast.unparse(node.func), node.args[0].value
        if target.endswith("profile.threshold"):
            thr.append(arg)
        elif target.endswith("profile.hardware.get"):
            hw.append(arg)
    return tuple(dict.fromkeys(thr)), tuple(dict.fromkeys(hw))


def checks(acceptance: Path | None = None, params=PARAMS) -> list[Entry]:
    """Every check of the sheet in its order (files sorted, then as written)."""
    acc = acceptance or paths.acceptance_dir()
    scopes = dict(sheet.checks(acc, params))
    known = families.criteria()
    out = []
    for f in sorted(acc.glob("test_*.py")):
        stem = f.stem.removeprefix("test_")
        tests = [n for n in ast.parse(f.read_text()).body
                 if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
        used = {n.name: _used(n) for n in tests}
        # a test's family: its own criterion's, else the first threshold's; the file's: its
        # tests' most common one (a check without a threshold, gpu_model, is its file's)
        own = {n: next((known[c]["family"] for c in (n[5:], *used[n][0]) if c in known), None)
               for n in used}
        common = Counter(v for v in own.values() if v).most_common(1)
        fam = common[0][0] if common else stem
        for n in tests:
            out.append(Entry(n.name[5:], stem, own[n.name] or fam, scopes.get(n.name[5:]), *used[n.name]))
    return out


@cache
def _criteria_of() -> dict[str, str]:
    return {e.criterion: e.thresholds[0] for e in checks()
            if e.criterion not in families.criteria() and len(e.thresholds) == 1}


def criterion_of(check: str) -> str:
    """The criterion a check's records (results.json's `criterion`: the check's name) are judged
    by: its own name, or for a check named otherwise (multinode_allreduce, row_remap, nic_link)
    the one threshold it reads. The one mapping baseline (tolerances, spreads) and calibrate use."""
    return _criteria_of().get(check, check)


def groups(entries: list[Entry]) -> dict[str, list[str]]:
    """`--only` names: each family (the files holding its checks) and each file by its own name."""
    out: dict[str, list[str]] = {}
    for e in entries:
        for key in (e.family, e.file):
            if e.file not in out.setdefault(key, []):
                out[key].append(e.file)
    return out


def select(only: str, acceptance: Path | None = None) -> list[str]:
    """pytest's targets for `--only a,b`, in sheet order: the acceptance files of the families
    and files named, and `<file>::test_<check>` for a check named (`signoff list checks`)."""
    acc = acceptance or paths.acceptance_dir()
    entries = checks(acc)
    by = groups(entries)
    crits = {e.criterion for e in entries}
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in by and n not in crits]
    if unknown or not names:
        near = {n: m[0] for n in unknown if (m := difflib.get_close_matches(n, [*by, *crits], n=1))}
        hint = "; did you mean " + ", ".join(near[n] if len(unknown) == 1 else f"{near[n]} (for {n})"
                                             for n in near) + "?" if near else ""
        raise InputError(f"--only {only}: {'unknown ' + ', '.join(unknown) if unknown else 'names nothing'}"
                         f"{hint} (families: {', '.join(sorted({e.family for e in entries}))}; "
                         f"files: {', '.join(dict.fromkeys(e.file for e in entries))}; "
                         "checks: signoff list checks)")
    files = {f for n in names for f in by.get(n, ())}
    out = [target(e, acc, whole=e.file in files) for e in entries if e.file in files or e.criterion in names]
    return list(dict.fromkeys(out))  # a whole file once


def target(entry: Entry, acc: Path, whole: bool) -> str:
    """pytest's argument for an entry's file (whole) or for its check alone."""
    path = str(acc / f"test_{entry.file}.py")
    return path if whole else f"{path}::test_{entry.criterion}"


def picked(entries: list[Entry], targets: list[str], acceptance: Path | None = None) -> list[Entry]:
    """The entries select()'s targets run (all of them for the acceptance directory)."""
    acc = acceptance or paths.acceptance_dir()
    want = set(targets)
    if str(acc) in want:
        return entries
    return [e for e in entries if {target(e, acc, True), target(e, acc, False)} & want]


def judged_by(entry: Entry, profile, origin=None, sources: bool = True) -> list[str]:
    """What a profile holds for a check: each hardware key and threshold it reads, with its
    source, or (given origin(criterion) -> file) the file that set its limit."""
    out = []
    for key in entry.hardware:
        val = profile.hardware.get(key)
        out.append(f"hardware.{key}: {'any' if val is None else val}")
    for name in entry.thresholds:
        if name in profile.criteria:
            t = profile.criteria[name]
            where = f" [{origin(name)}]" if origin and origin(name) else ""
            out.append(f"{name} {t.expected}{where}" + (f" (source: {t.source})" if sources else ""))
        elif name in profile.uncalibrated:
            why = f" ({profile.uncalibrated[name]})" if sources else ""
            out.append(f"{name}: uncalibrated, ERRORs{why}")
        elif entry.hardware and not any(profile.hardware.get(k) for k in entry.hardware):
            # a check of hardware the class lacks is N.A. before it reads a threshold
            # (mnnvl_allreduce without hardware.nvlink_domain): none is needed, none ERRORs
            out.append(f"{name}: none in profile {profile.name}, N.A. without "
                       + " or ".join(f"hardware.{k}" for k in entry.hardware))
        else:
            out.append(f"{name}: no threshold in profile {profile.name}, ERRORs")
    return out or [_judged_without_threshold(entry)]


def _judged_without_threshold(entry: Entry) -> str:
    """What a check that reads no threshold is judged against: its family's JUDGED_BY (the intent
    checks: the intent file), else "no threshold"."""
    from signoff import families
    mod = next((m for m in families.modules() if families.name(m) == entry.family), None)
    return getattr(mod, "JUDGED_BY", None) or "no threshold"
