"""What `signoff plan` and `signoff show-profile` print: the hosts, the profile (which one
--profile auto picks, asking the hosts for their sysinfo), the checks per host, pair and cluster
with the thresholds they are judged against, and what the long measurements will take. Nothing
is measured and no report is written."""

from __future__ import annotations

import re
from pathlib import Path

from signoff import catalog, causes, families, hostlist, paths, preflight, profiles

FOLD = 12  # pair ids listed before "and N more"
# `signoff plan`'s exit code when the run would ERROR or FAIL its class guard (the lines under
# "will ERROR or be N.A."): apart from the run's 0-4 and pytest's 5 (no tests collected)
PREDICTS_ERROR = 6


def shown(path) -> str:
    """A profile file as the user knows it: thresholds/x.yaml for the shipped ones."""
    p = Path(str(path))
    try:
        return str(p.resolve().relative_to(paths.root()))
    except (ValueError, OSError):
        return str(path)


def _at(where) -> str:
    return f"  [{shown(where)}]" if where else ""


def _value(v) -> str:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return ", ".join(map(_value, v)) if isinstance(v, (list, tuple)) else str(v)


def criterion_lines(prof: profiles.Profile, name: str, entry: dict) -> list[str]:
    """One criterion: its threshold and the file of its limit, its source, then its other keys."""
    if "uncalibrated" in entry:
        return [f"  {name}: uncalibrated (its check ERRORs): {entry['uncalibrated']['value']}"
                f"{_at(entry['uncalibrated']['from'])}"]
    limit = next((k for k in profiles.LIMIT_KEYS if k in entry), None)
    t = prof.criteria.get(name)
    head = t.expected if t else f"{limit} {entry[limit]['value']}" if limit else "no limit"
    home = entry[limit]["from"] if limit else None
    out = [f"  {name}: {head}{_at(home)}"]

    def at(key):  # a key set by another file than the limit says which
        return _at(entry[key]["from"]) if entry[key]["from"] != home else ""
    if "source" in entry:
        out.append(f"      source: {entry['source']['value']}{at('source')}")
    rest = [k for k in entry if k not in (*profiles.LIMIT_KEYS, "unit", "source", "provisional")]
    if rest:
        out.append("      " + "; ".join(f"{k} {_value(entry[k]['value'])}{at(k)}" for k in rest))
    return out


def profile_text(prof: profiles.Profile) -> str:
    r = profiles.resolved(prof)  # every key of every criterion, with the file that set it
    chain = " < ".join(shown(f) for f in reversed(r.get("extends") or [])) or shown(r["path"])
    lines = [f"profile {r['profile']}: {r['description']}"
             + ("  (abstract: a class base: --profile picks its variant from the hosts' NVML)"
                if r["abstract"] else ""),
             f"  class: {prof.describe_class()}",
             f"  files: {chain}  (after each limit: the file that set it; a key set by another file: which)",
             "hardware: " + ", ".join(f"{k} {_value(v)}" for k, v in r["hardware"].items() if v is not None)]
    for key, sec in r.get("sections", {}).items():
        lines.append(f"{key}: " + ", ".join(f"{k} {_value(v)}" for k, v in sec.items()))
    if r.get("baseline"):
        b = r["baseline"]
        lines.append(f"baseline: tolerance {b.get('tolerance', 'default')}"
                     + "".join(f", {k} {v}" for k, v in (b.get("criteria") or {}).items()))
    lines.append("criteria:")
    for name, entry in r["criteria"].items():
        lines += criterion_lines(prof, name, entry)
    return "\n".join(lines)


def by_variant(entry, kids: list[profiles.Profile]) -> str:
    """What a check is judged against under a class base whose variant the hosts pick: each item
    (hardware key, threshold) once where every variant has the same, else each variant's."""
    per = []
    for k in kids:
        crits = profiles.resolved(k)["criteria"]
        per.append(catalog.judged_by(entry, k, lambda n, c=crits: next(
            (shown(c[n][key]["from"]) for key in profiles.LIMIT_KEYS if c.get(n, {}).get(key)), None),
            sources=False))
    out = []
    for i in range(max(map(len, per))):
        items = [p[i] if i < len(p) else "none" for p in per]
        bare = {re.sub(r" \[[^\]]*\]$", "", x) for x in items}  # less the file that set it
        if len(set(items)) == 1:
            out.append(items[0])
        elif len(bare) == 1:  # the same limit, set in each variant's file
            files = [m.group(1) for x in items if (m := re.search(r" \[([^\]]*)\]$", x))]
            out.append(f"{bare.pop()} [{' / '.join(dict.fromkeys(files))}]")
        else:
            out.append(" | ".join(f"{k.name}: {x}" for k, x in zip(kids, items)))
    return "; ".join(out)


def ask(config, state) -> tuple[profiles.Profile | None, dict, str]:
    """The hosts' sysinfo (the run's first step: temp dir, sysinfo probe with its preflight,
    cleanup; never the run lock: asking beside a run that holds it is harmless, and a plan must
    not wait for it or say "no host answered") and the profile: --profile's, or what auto (or a
    class base) picks on them by the plugin's own vote. (profile, host -> sysinfo or its error,
    why no profile was picked: the run's pick fails the same way, and then every check ERRORs)."""
    from signoff import InputError, fixtures, slurm
    from signoff.fleet import Fleet
    job = slurm.Slurm(state.job, slurm.allocation()[1], state.run_id) if state.job else None
    fleet = Fleet(state.inventory, config.getoption("accept_new_host_keys"),
                  config.getoption("connect_timeout"), config.getoption("probe_timeout"),
                  run=state.run_id, max_parallel=config.getoption("max_parallel"), slurm=job,
                  storage_path=config.getoption("storage_path"), lock=False)
    try:
        fleet.start()
        facts = fleet.all_facts()
        try:
            return fixtures.pick_profile(state, fleet), facts, ""  # the run's own vote
        except InputError as exc:
            return None, facts, str(exc)
    finally:
        fleet.close()


# The families whose checks are N.A. on a host without a GPU (their `gpus` fixture): on hosts
# that have none, their measurement costs no time and is not planned as if it ran
GPU_ONLY = ("signoff.dcgm", "signoff.soak", "signoff.rails")
# a duration as the families' estimates say it: 15 s, 5 min, 2 h
DURATION = re.compile(r"(\d+(?:\.\d+)?) (s|min|h)\b")


def _estimates(config, prof, picked: set[str], cols: dict, pairs: list,
               facts: dict | None = None) -> list[str]:
    """The long measurements' own time (start-up, retries and the other checks come on top):
    each family's estimate(), where it has one (signoff/families.py); with the hosts' answers
    (`facts`), a GPU-only family on hosts without a GPU is said N.A., no time."""
    gpu_hosts = None if facts is None else [
        n for n, f in facts.items() if isinstance(f, dict) and ((f.get("nvidia") or {}).get("gpus"))]
    out = []
    for mod in families.modules():
        lines = mod.estimate(config, prof, picked, [p for p in pairs if p]) \
            if getattr(mod, "estimate", None) else []
        if lines and gpu_hosts == [] and mod.__name__ in GPU_ONLY:
            out.append(f"{mod.__name__.rsplit('.', 1)[-1]}: N.A. on these hosts (no GPU on any): no time")
            continue
        out += lines
    return out


def seconds(line: str) -> float | None:
    """An estimate line's own time: the durations after its last ': ' (its parenthesised notes and
    what follows ' of ' left out: '15 s of --collective-timeout 600 s' is 15 s); None if none."""
    text = line
    while (stripped := re.sub(r"\([^()]*\)", "", text)) != text:
        text = stripped
    tail = text.rsplit(": ", 1)[-1].split(" of ", 1)[0]
    found = DURATION.findall(tail)
    return sum(float(v) * {"s": 1, "min": 60, "h": 3600}[u] for v, u in found) if found else None


def total_line(est: list[str]) -> str | None:
    """'total: about 2 min 20 s of measurement' over the estimates (the N.A. ones cost none)."""
    if not est:
        return None
    times = [seconds(x) for x in est if "N.A. on these hosts" not in x]
    known = sum(t for t in times if t is not None)
    unknown = sum(t is None for t in times)
    m, s = divmod(round(known), 60)
    said = f"{m} min {s} s" if m else f"{s} s"
    return (f"total: {'at least ' if unknown else 'about '}{said} of these measurements"
            + (f" ({unknown} of unknown time)" if unknown else ""))


def rerun_ids(again: dict | None, picked: list[catalog.Entry], cols: dict) -> dict[str, list[str]] | None:
    """--rerun's checks among the picked ones: criterion -> the ids it runs again on ([''] for a
    check over all hosts), in the sheet's order; None without --rerun. A host or pair these
    options no longer name is left out, as the run leaves it (no such check to collect)."""
    if not again:
        return None
    ids: dict[str, list[str]] = {}
    for test in again["tests"]:
        name, _, param = test.split("::")[-1].partition("[")
        ids.setdefault(name.removeprefix("test_"), []).append(param.removesuffix("]"))
    kept = {e.criterion: [i for i in ids.get(e.criterion, []) if not e.scope or i in cols.get(e.scope, [])]
            for e in picked}
    return {c: i for c, i in kept.items() if i}


def only_text(picked: list[catalog.Entry], targets: list[str]) -> str:
    """What --only named: its files whole, its checks by name."""
    whole = {Path(t).stem.removeprefix("test_") for t in targets if "::" not in t}
    return ", ".join(sorted({e.file if e.file in whole else e.criterion for e in picked}))


def predictions(inventory, facts: dict, prof) -> list[tuple[str, str]]:
    """What the hosts' answers say a run will ERROR or FAIL besides the families' preflight: a
    host that did not answer, a host of another class than the profile."""
    from signoff.fixtures import HostView
    out = []
    for h in inventory.hosts:
        f = facts.get(h.name)
        if isinstance(f, Exception):
            out.append((h.name, f"every check ERROR (its own, its pairs', those over all hosts): "
                                f"{str(f).removeprefix(f'{h.name}: ')}"))
            continue
        view = HostView(h.name, f, None)
        why = profiles.matches(prof, view.hardware) if prof is not None and not view.hidden_gpus else []
        if why:
            out.append((h.name, f"the class checks FAIL: {'; '.join(why)} (profile {prof.name}: "
                                f"{prof.describe_class()}); its measurements at that class's sizes NOT RUN"))
    return out


def text(config, state, targets: list[str], contact: bool = True) -> str:
    return planned(config, state, targets, contact)[0]


def planned(config, state, targets: list[str], contact: bool = True) -> tuple[str, list[str]]:
    """The plan's text, and the lines of it that predict an ERROR or a FAIL of the class guard
    (the plan's exit code: PREDICTS_ERROR where there is one)."""
    from signoff import fixtures, report, rerun
    inv = state.inventory
    names = [h.name for h in inv.hosts]
    cases = fixtures.parametrized(config)
    cols = {f: [i for _, i in c] for f, c in cases.items()}
    everything = catalog.checks(params=tuple(cols))
    picked = catalog.picked(everything, targets)  # --only's files and checks
    earlier = state.rerun or rerun.of(config)  # a plan is no acceptance run: the plugin left it
    again = rerun_ids(earlier, picked, cols)
    if again is not None:  # --rerun: only the earlier run's checks that did not pass, as a run selects
        picked = [e for e in picked if e.criterion in again]
    prof = state.profile
    if state.job:
        launcher = f"srun steps of Slurm job {state.job}"
    elif all(h.local for h in inv.hosts):
        launcher = "this machine, no SSH"
    else:
        launcher = "SSH"
    lines = ["signoff plan: what `signoff run` with these options would do (nothing is measured, "
             "no report written)",
             f"hosts: {len(names)} from {inv.source}: {hostlist.fold(names)}  ({launcher})"]
    kids = profiles.variants(state.class_base) if state.class_base else []
    facts, unpicked, fatal = None, "", []
    if contact:
        picking = prof is None
        prof, facts, unpicked = ask(config, state)
        silent = {n: str(e) for n, e in facts.items() if isinstance(e, Exception)}
        no_answer = f"; no answer from {causes.causes(silent)}" if silent else ""
        if unpicked:  # the run's pick fails alike: every check of it ERRORs with these words
            lines.append(f"--profile {state.profile_arg} picks no profile on these hosts (asked for their "
                         f"sysinfo){no_answer}")
        elif picking:
            lines.append(f"--profile {state.profile_arg} picks {prof.name} on these hosts (asked for their "
                         f"sysinfo){no_answer}")
            lines.append(f"  {state.pick}")
        else:
            lines.append(f"asked the hosts for their sysinfo{no_answer or ': every host answered'}")
    elif prof is None and kids:
        lines.append(f"--profile {state.profile_arg}: a class base: the variant is picked at the start of "
                     f"the run from the hosts' NVML (the majority of its hosts) among "
                     + ", ".join(f"{k.name} ({k.describe_class()})" for k in kids)
                     + "; a host of none of them FAILs the pick's class checks; without --no-contact "
                       "the plan asks them. Thresholds below: each variant's where they differ")
    elif prof is None:
        lines.append("--profile auto: picked at the start of the run from the hosts' sysinfo "
                     "(no GPU: local); without --no-contact the plan asks them")
    crits = profiles.resolved(prof)["criteria"] if prof else {}

    def origin(name):  # the file that set a criterion's limit (signoff show-profile: every key)
        spec = crits.get(name, {})
        return next((shown(spec[k]["from"]) for k in profiles.LIMIT_KEYS
                     if spec.get(k, {}).get("from")), None)
    n_checks = sum(len(again[e.criterion]) for e in picked) if again is not None else \
        sum(len(cols.get(e.scope, [])) if e.scope else 1 for e in picked)
    narrowed = f" (--only: {only_text(picked, targets)})" if again is None else ""
    lines.append(f"checks: {len(picked)} of the sheet's {len(everything)} criteria, {n_checks} checks"
                 + (narrowed if len(picked) < len(everything) else ""))
    if again is not None:
        lines.append(f"  {report.rerun_text({'rerun': earlier})}: "
                     + "; ".join(f"{c} on {hostlist.fold(ids) if ids != [''] else 'all hosts'}"
                                 for c, ids in again.items()))
    if again is not None:  # the verdict is the whole sheet's: the earlier run's results merged (rerun.py)
        then = ((earlier.get("earlier") or {}).get("meta") or {})
        if then.get("partial") and not config.getoption("partial"):
            lines.append(f"  run {earlier['run']} judged a part of the sheet: this rerun's verdict, merged "
                         f"with it, is INCOMPLETE unless --partial is given")
        else:
            lines.append(f"  the verdict is the whole sheet's: run {earlier['run']}'s results with these "
                         f"checks measured again (no --partial needed)")
    elif len(picked) < len(everything) and not config.getoption("partial"):
        lines.append("  a run of a part of the sheet is INCOMPLETE unless --partial is given")
    if prof is not None or kids:
        head = profile_text(prof or state.class_base).split("\n", 1)[0]
        lines.append(head.replace("profile ", "profile: ", 1))
    if facts is not None:  # before the checks: what each host gives them, what will ERROR or N.A.
        crit = {e.criterion for e in picked}
        extra = [("all hosts", f"every check ERROR: {unpicked}")] if unpicked else []
        extra += predictions(inv, facts, prof)
        timing, late = families.timings(config, prof, crit, inv, facts)
        lines += preflight.lines(config, inv, facts, prof, crit, extra=[*extra, *late], fatal=fatal)
    for scope in dict.fromkeys(e.scope for e in picked):
        ids = cols.get(scope, [])
        if again is not None:  # only the ids the rerun names, in the sheet's order
            named = {i for e in picked if e.scope == scope for i in again[e.criterion]}
            ids = [i for i in ids if i in named]
        if scope == "host":
            lines.append(f"per host, on each of {hostlist.fold(ids if again is not None else names)}:")
        elif scope is None:
            lines.append("once, over all hosts at once:")
        else:
            more = f" and {len(ids) - FOLD} more" if len(ids) > FOLD else ""
            lines.append(f"per {scope} ({len(ids)}): {', '.join(ids[:FOLD])}{more}:")
        width = max(len(e.criterion) for e in picked)
        for e in picked:
            if e.scope == scope:
                what = "; ".join(catalog.judged_by(e, prof, origin, sources=False)) if prof else \
                    by_variant(e, kids) if kids else \
                    ", ".join([*(f"hardware.{k}" for k in e.hardware), *e.thresholds]) or "no threshold"
                lines.append(f"  {e.criterion:{width}}  {e.family:12} {what}")
    ests = {each.name: _estimates(config, each, {e.criterion for e in picked}, cols,
                                  [p for p, _ in cases.get("pair", [])], facts)
            + (timing if facts is not None else [])
            for each in ([prof] if prof is not None else kids)}
    if len({tuple(e) for e in ests.values()}) > 1:  # a class base's variants: each's sizes
        for name, est in ests.items():
            lines.append(f"long measurements under {name} (their own time; start-up, retries "
                         f"and the other checks come on top):")
            lines += [f"  {x}" for x in [*est, *filter(None, [total_line(est)])]]
    elif ests and (est := next(iter(ests.values()))):
        lines.append("long measurements (their own time; start-up, retries and the other checks "
                     "come on top):")
        lines += [f"  {x}" for x in [*est, *filter(None, [total_line(est)])]]
    kept = config.getoption("evidence", "none")
    if kept != "none":  # signoff/evidence: after the checks, on the hosts that failed (or every host)
        who = "every host" if kept == "all" else "the failed hosts"
        lines.append(f"evidence: collected from {who} after the run (budget "
                     f"{config.getoption('evidence_budget'):g} s, {config.getoption('evidence_max_mb'):g} MB "
                     f"a host; --evidence)")
    if fatal:
        lines.append(f"exit code {PREDICTS_ERROR}: the run would ERROR or FAIL its class guard "
                     f"({len(fatal)} line{'s' if len(fatal) > 1 else ''} under \"will ERROR or be N.A.\"); "
                     f"fix them first (README: Exit codes)")
    return "\n".join(lines), fatal
