"""HTML fragments for the pytest-html report, each rendered from its template (signoff/templates/,
signoff/render.py) with the data below: the cover (verdict, what failed and why, counts,
who ran what when), per-criterion summary (and the host x criterion matrix on small clusters),
notes on the hosts, the methodology, the hardware inventory, the profile used; and report.md,
the same cover in Markdown. The families add their own sections (pytest_signoff_report_sections)
and methodology (pytest_signoff_methodology)."""

from __future__ import annotations

import getpass
import re
import socket
import statistics
import subprocess
from collections import Counter
from pathlib import Path

from markupsafe import Markup

from signoff import causes, families, hostlist, paths, profiles, retry, safefile, unseen
from signoff.printable import printable
from signoff.render import render
from signoff.results import ALL, STATUSES, VERDICT_MEANS, verdict_text, version_text
from signoff.units import figure, figures_in

# A figure's bar in its check's verdict colour (the tables' so-PASS, so-FAIL ... in darker tones)
VERDICT_COLOURS = {"PASS": "tab:green", "FAIL": "tab:red", "ERROR": "tab:orange", "N.A.": "tab:gray",
                   "UNSEEN": "tab:purple", "NOT RUN": "gold"}

ROOT = paths.root()  # the clone's top, or the installed sheet (signoff/_sheet): shown_path's base


def suite_version() -> str:
    """The package version, with `git describe` where the suite runs from a checkout."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        v = version("signoff")
    except PackageNotFoundError:  # a clone run without `pip install`: its pyproject says
        m = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M) \
            if (ROOT / "pyproject.toml").exists() else None
        v = m.group(1) if m else ""
    try:
        # the clone's own .git only: an installed copy inside someone's repository is not theirs
        git = subprocess.run(["git", "--git-dir", str(ROOT / ".git"), "--work-tree", str(ROOT),
                              "describe", "--always", "--dirty", "--tags"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        git = ""
    if not git:  # a copy without .git (bench/copy_tree.sh), or an installed one (setup.py's BuildPy)
        git = copied_commit(ROOT)
    return f"{v} (git {git})" if v and git else v or (f"git {git}" if git else "unknown")


COMMIT_FILE = ".signoff-commit"  # bench/copy_tree.sh: the commit a copy without .git was made of


def copied_commit(top) -> str:
    """The commit a copy of the tree with no .git was made from (a machine reaching no git
    server, e.g. a GPU node sent the tree by bench/copy_tree.sh), as `git describe` said it when
    the copy was made; '' where none was written."""
    try:
        text = (Path(top) / COMMIT_FILE).read_text().strip()
    except OSError:
        return ""
    return text if re.fullmatch(r"[\w.+-]{1,80}", text) else ""


def operator() -> str:
    """Who ran it: user@controller."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "?"
    return f"{user}@{socket.gethostname()}"


def shown_path(path) -> str:
    """A controller file named as a provider can read it: relative to the suite
    (thresholds/h200-8x.yaml), else its name only (the controller's directories are no one
    else's business)."""
    p = Path(str(path))
    try:
        return str(p.resolve().relative_to(ROOT))
    except (ValueError, OSError):
        return p.name


def status_class(status: str) -> str:
    return "so-" + status.replace(".", "").replace(" ", "")


CAUSE = "; likely cause: "


def split_cause(message: str) -> tuple[str, str]:
    """A check's message is 'host: what = value, expected ...; likely cause: ...'."""
    what, _, cause = (message or "").partition(CAUSE)
    return what, cause


def problem_groups(records: list[dict]) -> list[dict]:
    """FAIL, ERROR, NOT RUN records folded by cause (signoff.causes): one cover line per status,
    checks and cause, whatever the number of hosts. A host's checks that said one same thing
    (unreachable, locked, no GPU) are one line, and the hosts whose checks did so for the same
    cause (the message less its host's name, temp dir, addresses and figures) one line too;
    distinct causes of one check are each their own line. A cause every host shares (the class of
    another profile, a lock another run holds, a floor no host reaches: causes.shared) is one line
    for every check, pair and check across hosts that said it and, for a FAIL, its likely cause
    the profile's (the group's "shared": no host's hardware)."""
    hosts = list(dict.fromkeys(r["host"] for r in records
                               if r["host"] != ALL and not causes.is_pair(r["host"])))
    judged: dict = {}  # host -> its checks' statuses; then what a host of ERRORs only said
    for r in records:
        if r["status"] not in ("N.A.", unseen.STATUS):  # neither judged: ERRORs and these said nothing
            judged.setdefault(r["host"], set()).add(r["status"])
    spoke: dict = {h: set() for h, s in judged.items() if s == {"ERROR"} and h in hosts}
    for r in records:
        if r["host"] in spoke and r["status"] == "ERROR":
            spoke[r["host"]].add(r.get("message") or "")
    # one ERROR on every check: a host that did not answer, said on its own
    common = causes.shared(records, hosts, down=[h for h, s in spoke.items() if len(s) == 1])
    taken = {i for c in common for i in c.members}
    out = []
    for c in common:
        rs = [records[i] for i in c.members]
        who = [h for h in c.hosts if h in hosts] or c.hosts
        out.append({"criterion": causes.checks_label(c.checks), "status": c.status, "shared": c,
                    "records": rs, "cause": causes.Cause(who, c.members, c.text, True, False)})
    same: dict = {}  # (status, host, message) -> the host's checks that said it
    for i, r in enumerate(records):
        if r["status"] in PROBLEMS and i not in taken:
            same.setdefault((r["status"], r["host"], r.get("message") or ""), []).append(r)
    said: dict = {}  # (status, the checks) -> [(host, message, its records)]
    for (status, host, msg), rs in same.items():
        checks = tuple(dict.fromkeys(r["criterion"] for r in rs))
        said.setdefault((status, checks), []).append((host, msg, rs))
    for (status, names), items in said.items():
        label = causes.checks_label(list(names))
        for c in causes.fold([(host, msg) for host, msg, _ in items]):
            out.append({"criterion": label, "status": status, "cause": c,
                        "records": [r for i in c.members for r in items[i][2]]})
    # a failed pair: the side at fault, where the pairs show it (signoff.causes.pair_sides)
    sides = causes.pair_sides([r for r in records if causes.is_pair(r["host"])], causes.named_slow(records))
    for g in out:
        at = {sides[r["host"]] for r in g["records"] if sides.get(r["host"])}
        if at:
            g["side"] = "the side at fault: " + ", ".join(f"{h}'s {way}" for h, way in sorted(at))
    # the widest first (one cause on 300 hosts before a slow pair), then FAIL before ERROR
    return sorted(out, key=lambda g: (-len({r["host"] for r in g["records"]}), PROBLEMS.index(g["status"]),
                                      g["criterion"]))


def problem_line(g: dict) -> tuple[str, str, str]:
    """(who, what, cause) of one group: the host(s); measured vs threshold; likely cause."""
    rs = g["records"]
    r = rs[0]
    hosts = {x["host"] for x in rs}
    who = hosts_text(hosts) if len(hosts) == 1 else f"{len(hosts)} {_noun(hosts)} {hosts_text(hosts)}"
    unit = r.get("unit") or ""
    vals = sorted(x["measured"] for x in rs if _number(x.get("measured")))
    common = g.get("shared")
    if common:  # one cause every host said: its hosts, not the pairs and checks across them it holds
        hosts = set(g["cause"].hosts)
        who = f"{len(hosts)} {_noun(hosts)} {hosts_text(hosts)}"
        one = len(common.checks) == 1 and len({x.get("unit") for x in rs}) == 1
        span = _span(vals, unit) if one else ""
        what, cause = split_cause(common.text)
        if span:
            what = f"measured {span}" + (f", expected {r['expected']}" if r.get("expected") else "")
        cause = "; ".join(x for x in (cause, common.hint) if x)
        return who, figures_in(what), figures_in(cause)
    if len({x["host"] for x in rs}) == 1:
        what, cause = split_cause(r.get("message") or "")
        what = what.removeprefix(f"{r['host']}: ")
        src = r.get("source")
        if src:  # the citation is in the Methodology: the cover says value and limit
            what = re.sub(rf" \([^()]*, source: {re.escape(src)}\)$|; {re.escape(src)}\)$",
                          lambda m: ")" if m.group(0).startswith(";") else "", what)
    else:  # one cause (problem_groups): its text, hosts folded in where it names them
        c = g["cause"]
        what, cause = split_cause(c.text)
        span = _span(vals, unit)
        if span:  # the codes the cause names (XID 79) are no figures: said with the span
            named = causes.codes(what)
            what = (f"measured {span}" + (f", expected {r['expected']}" if r.get("expected") else "")
                    + (f" ({', '.join(named)})" if named else ""))
        elif not c.alike:  # one cause, each host's own paths
            what += f" (as on {c.hosts[0]}; each host's own paths and figures in its details)"
    if g.get("side"):
        cause = f"{g['side']}; {cause}" if cause else g["side"]
    return who, figures_in(what), figures_in(cause)


def _noun(names) -> str:
    """'pairs' for host pairs ('lab3->lab1'), else 'hosts': a pair is no host."""
    return "pairs" if names and all(causes.is_pair(n) for n in names) else "hosts"


def _span(vals: list, unit: str = "") -> str:
    """'0.096-0.1 Gb/s', '0.096 Gb/s' where both ends read alike, '' of no figure (never '0-0 ')."""
    if not vals:
        return ""
    lo, hi = _fmt(vals[0]), _fmt(vals[-1])
    return f"{lo if lo == hi else f'{lo}-{hi}'} {unit}".strip()


COVER_LINES = 20  # a provider reads the first screen: the rest one click away

# The hosts to take out of service, machine-readable, in the report dir beside report.md:
# a ClusterShell NodeSet (folded hostlist) and the Slurm lines that drain them.
EXCLUDE_FILE, DRAIN_FILE = "exclude.hostlist", "drain.sh"
_SLURM_NAME = re.compile(r"[\w.\-\[\],]+")  # what a drain line names unquoted-safe (a fold's brackets)


def by_host(doc: dict) -> tuple[list[dict], list[str], list[str]]:
    """The provider's page: per host (hosts of one same cause folded), its name(s), identity
    (hostname, machine id, GPU serials), and one line per finding: 'lab3: transmit side slow on
    every pair it sends (lab3->lab1 0.096 Gb/s; expected >= 1 Gb/s): check its NIC, cable or switch
    port (FAIL net_pair_bandwidth)'; the lines no host is at fault for; the hosts to exclude."""
    groups, unplaced = causes.host_findings(doc)
    facts = doc.get("hosts") or {}
    kept = evidence_of(doc)
    out = []
    for g in groups:
        who = hosts_text(g.hosts)
        many = len(g.hosts) > 1
        ident = ([f"{h}: {host_identity(facts[h])}" for h in g.hosts if h in facts]
                 if len(g.hosts) <= MATRIX_MAX_HOSTS else
                 [f"{len(g.hosts)} hosts: each one's identity in report.html's Hardware signed off"])
        # where each host's RMA evidence is (signoff/evidence): a line a host
        if len(g.hosts) <= MATRIX_MAX_HOSTS:
            ident += [f"{h}: evidence {kept[h]}" for h in g.hosts if h in kept]
        elif any(h in kept for h in g.hosts):
            ident.append(f"evidence of each: {EVIDENCE_DIR}/<host>.tar.gz")
        lines = [f"{who}: {f.what}"
                 + (f" ({f.evidence}{f', as on {g.hosts[0]}' if many else ''})" if f.evidence else "")
                 + f": {f.action} ({f.status} {_checks(f.checks)})".replace(" )", ")")
                 for f in g.findings]
        out.append({"hosts": g.hosts, "who": who, "exclude": g.exclude, "identity": ident,
                    "lines": [figures_in(x) for x in lines]})
    return out, unplaced, causes.to_exclude(groups)


EVIDENCE_DIR = "evidence"  # signoff.evidence.DIR: what --evidence keeps per host


def evidence_of(doc: dict) -> dict[str, str]:
    """host -> where its evidence is ('evidence/lab3.tar.gz (folder evidence/lab3/)'): meta.evidence,
    which signoff/evidence/plugin.py sets before the reports are written."""
    ev = (doc.get("meta") or {}).get("evidence") or {}
    return {h: f"{e['archive']} (folder {e['folder']}/)" for h, e in (ev.get("hosts") or {}).items()
            if isinstance(e, dict) and e.get("archive") and e.get("folder")}


def evidence_md(doc: dict) -> list[str]:
    """report.md's Evidence: a line per host (the first COVER_LINES; the rest in evidence/)."""
    kept = evidence_of(doc)
    if not kept:
        return []
    ev = doc["meta"]["evidence"]
    b = ev.get("budget") or {}
    mb = b.get("bytes", 0) // 10 ** 6
    out = ["## Evidence", "", f"Kept per host for the provider's RMA (--evidence {ev.get('mode')}; "
           f"collected from each host after the run within {b.get('seconds', 0):g} s and {mb} MB): each "
           f"folder's index.md says what is in it, an rma-<serial>.html a GPU to send back.", ""]
    out += [f"- {md_text(h)}: {md_text(where)}" for h, where in list(kept.items())[:COVER_LINES]]
    if len(kept) > COVER_LINES:
        out.append(f"- {len(kept) - COVER_LINES} more hosts: {EVIDENCE_DIR}/")
    return out + [""]


def _checks(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 2 else f"{len(names)} checks"


def exclude_files(doc: dict) -> dict[str, str]:
    """{file name: text} of the hosts to exclude or drain: the folded hostlist (empty: none) and
    the Slurm drain lines, one per reason, its hosts folded."""
    groups, _ = causes.host_findings(doc)
    hosts = causes.to_exclude(groups)
    run = str((doc.get("meta") or {}).get("run") or "")
    lines = ["#!/bin/sh", f"# signoff run {printable(run)}: the hosts to drain, as the inventory names them "
             f"(Slurm node names); review, then run", "set -e"]
    by: dict[str, list[str]] = {}
    for g in groups:
        if g.exclude:
            by.setdefault(causes.drain_reason(g, run), []).extend(g.hosts)
    for reason, names in by.items():
        nodes = hostlist.fold(names) if all(_SLURM_NAME.fullmatch(n) for n in names) else None
        lines.append(f'scontrol update nodename="{nodes}" state=drain reason="{reason}"' if nodes else
                     f"# not written, a name a shell line cannot hold: {printable(','.join(names))}")
    return {EXCLUDE_FILE: (hostlist.fold(hosts) + "\n") if hosts else "",
            DRAIN_FILE: "\n".join(lines) + "\n"}


def write_exclude(report_dir, doc: dict) -> None:
    """exclude.hostlist and drain.sh into the report dir (both written: an empty list is news too)."""
    for name, text in exclude_files(doc).items():
        safefile.write(Path(report_dir) / name, text)


def by_host_html(doc: dict) -> str:
    """The cover's per-host section: each failing host, what is wrong, the figures, what to do."""
    entries, unplaced, hosts = by_host(doc)
    if not entries and not unplaced:
        return Markup()
    return render("templates/by_host.jinja2", entries=entries, shown=COVER_LINES, unplaced=unplaced,
                  hosts=hosts_text(hosts) if hosts else "", files=f"{EXCLUDE_FILE}, {DRAIN_FILE}")


def by_host_md(doc: dict) -> list[str]:
    entries, unplaced, hosts = by_host(doc)
    if not entries and not unplaced:
        return []
    out = ["## By host", ""]
    for e in entries[:COVER_LINES]:
        out.append(f"**{md_text(e['who'])}**" + (": exclude or drain" if e["exclude"] else "") + "  ")
        out += [f"{md_text(x)}  " for x in e["identity"]]
        out += [f"- {md_text(x)}" for x in e["lines"]]
        out.append("")
    if len(entries) > COVER_LINES:
        out += [f"{len(entries) - COVER_LINES} more hosts: report.html", ""]
    out += [f"To exclude or drain: **{md_text(hosts_text(hosts))}** ({EXCLUDE_FILE}, {DRAIN_FILE} in the "
            f"report dir)" if hosts else "No host to exclude.", ""]
    if unplaced:
        out += ["Not placed on a host:", "", *(f"- {md_text(x)}" for x in unplaced), ""]
    return out


def note_lines(records: list[dict]) -> list[str]:
    """What checks said with their verdict (Check.note: e.g. a kernel log shorter than its
    window), one line per criterion, hosts folded: the first host's note stands for the rest."""
    by: dict = {}
    for r in records:
        if r.get("note"):
            by.setdefault(r["criterion"], []).append(r)
    out = []
    for c, rs in by.items():
        hosts = [r["host"] for r in rs]
        out.append(f"{c} on {hosts_text(hosts)}: {rs[0]['note']}" if len(rs) == 1 else
                   f"{c} on {len(rs)} {_noun(hosts)} {hosts_text(hosts)}: as on {rs[0]['host']}, "
                   f"{rs[0]['note']} (each host's in results.json)")
    return out


def md_text(text: str) -> str:
    """A message as one line of Markdown that stays text: no line breaks, markup escaped."""
    return re.sub(r"([\\`*<\[\]|])", r"\\\1", " ".join(str(text).split()))


def profile_class_text(meta: dict) -> str:
    """The profile's hardware class in brackets; under --profile auto with no host to vote,
    that none was picked (not an empty '()')."""
    if meta.get("profile_class"):
        return f"({meta['profile_class']})"
    if meta.get("profile_variants"):  # a class base whose variant no host's NVML picked
        return f"(a class base: none of its variants {', '.join(meta['profile_variants'])} picked " \
               f"from the hosts' NVML)"
    return "(none picked: no host's sysinfo to match)" if meta.get("profile") == "auto" else "(no class)"


def excluded_lines(meta: dict) -> list[str]:
    """The hosts of the inventory or allocation this run left out, one line per cause, hosts
    folded: 'lab3: not tagged gpu (its tags: gpux)', 'node[3-4]: excluded by --exclude-hosts'."""
    ex = meta.get("excluded") or {}
    if isinstance(ex, list):  # a results.json from before the causes were kept
        ex = dict.fromkeys(ex, "excluded by --exclude-hosts")
    return causes.cause_lines(ex, front=True)


def excluded_text(meta: dict) -> str:
    """Hosts left out (--hosts, --tags, --exclude-hosts, a Slurm node the --inventory lacks):
    not checked, so this verdict says nothing of them."""
    n = len(meta.get("excluded") or ())
    return (f"Not checked: {n} host{'s' if n != 1 else ''} (the verdict is of the hosts above only): "
            + "; ".join(excluded_lines(meta)))


def run_line(meta: dict) -> str:
    took = ""
    if meta.get("started") and meta.get("finished"):
        from datetime import datetime
        s = int((datetime.fromisoformat(meta["finished"])
                 - datetime.fromisoformat(meta["started"])).total_seconds())
        took = (f" ({s // 3600} h {s % 3600 // 60} min)" if s >= 3600 else
                f" ({s // 60} min {s % 60} s)" if s >= 60 else f" ({s} s)")
    def utc(t):
        return str(t).replace("T", " ").removesuffix("+00:00")
    return (f"run {utc(meta.get('started', '?'))} to {utc(meta.get('finished') or 'not finished')} UTC{took} "
            f"by {meta.get('operator', '?')}; {version_text(meta.get('suite_version'))}")


def host_identity(facts: dict) -> str:
    """Which machine a host name stood for, from its sysinfo: its own hostname, machine-id
    (the boot id where it has none: a VM image without one), GPU serials. An inventory name
    ("localhost", an address) says nothing of the machine to a provider."""
    if not isinstance(facts, dict) or "error" in facts:
        return "did not answer: no identity read"
    m = facts.get("machine") or {}
    serials = [str(g["serial"]) for g in (facts.get("nvidia") or {}).get("gpus") or [] if g.get("serial")]
    out = [f"hostname {facts.get('hostname') or '?'}",
           f"machine-id {m['machine_id']}" if m.get("machine_id") else
           f"no machine-id, boot id {m['boot_id']}" if m.get("boot_id") else "no machine-id"]
    if serials:
        out.append(f"GPU serial{'s' * (len(serials) > 1)} {', '.join(serials)}")
    return ", ".join(out)


def identity_lines(doc: dict) -> list[str]:
    """'localhost: hostname vm, no machine-id, boot id 3707..., GPU serial 1653924098971' per
    host, up to MATRIX_MAX_HOSTS hosts (more: the Hardware signed off table has each)."""
    facts = doc.get("hosts") or {}
    names = [h for h in (doc["meta"].get("hosts") or facts) if h in facts]
    if not names or len(names) > MATRIX_MAX_HOSTS:
        return []
    return [f"{h}: {host_identity(facts[h])}" for h in names]


def probe_env_text(meta: dict) -> str | None:
    """What every page says when the probes ran in signoff's own environment (a bare machine)."""
    if not meta.get("probe_env"):
        return None
    py = ", ".join(sorted(set((meta.get("probe_python") or {}).values())))
    return (f"Probe environment: {meta['probe_env']} ({py}; {meta.get('inventory', '')}): the "
            f"hardware figures are this machine's, the software versions judged are signoff's own; "
            f"pass --python to judge the training environment")


def cover(verdict: str, doc: dict) -> str:
    """The first screen: verdict, what to fix (criterion, hosts, measured vs threshold, likely
    cause), regressions against the baseline, counts, profile and class, who ran it when."""
    meta, records = doc["meta"], doc["results"]
    problems = []
    for g in problem_groups(records):
        who, what, cause = problem_line(g)
        problems.append({"status": g["status"], "cls": status_class(g["status"]), "criterion": g["criterion"],
                         "who": who, "what": what, "cause": cause})
    base = meta.get("baseline") or {}
    counts = Counter(r["status"] for r in records)
    hosts = meta.get("hosts", [])
    return render(
        "templates/cover.jinja2", verdict=verdict, means=VERDICT_MEANS.get(verdict),
        unseen_said=unseen.verdict_suffix(doc).removeprefix("; "), unseen=unseen.cover_items(doc),
        rented=unseen.rented(doc),
        verdict_class=status_class(verdict if verdict in ("PASS", "ERROR") else "FAIL"),
        problems=problems, shown=COVER_LINES, by_host=by_host_html(doc),
        base={"name": base.get("name", "the baseline"), "tolerance": tolerance_text(base),
              "regressions": [{"criterion": x["criterion"], "host": x["host"], "text": regression_text(x)}
                              for x in base.get("regressions", [])],
              "moved": [f"hosts {kind} since the baseline: {hosts_text(base[kind])}"
                        for kind in ("appeared", "vanished") if base.get(kind)],
              "notes": baseline_notes(base)} if base else None,
        failed_on_regression=failed_on_regression(doc), noted=note_lines(records)[:COVER_LINES],
        checks=len(records), counts=[{"status": s, "cls": status_class(s), "n": counts[s]}
                                     for s in STATUSES if counts[s]],
        provisional=provisional_text(prov) if (prov := provisional(records)) else "",
        retried=retried_text(again) if (again := retried(records)) else "",
        profile=str(meta.get("profile")), profile_class=profile_class_text(meta), n_hosts=len(hosts),
        hosts=hosts_text(hosts), identity=identity_lines(doc), profile_pick=meta.get("profile_pick"),
        run_line=run_line(meta), rerun=rerun_text(meta) if meta.get("rerun") else "",
        excluded=excluded_text(meta) if meta.get("excluded") else "", launcher=launcher(meta, records),
        probe_env=probe_env_text(meta) if meta.get("probe_env") else "",
        partial=partial_text(meta) if meta.get("partial") else "", intent=intent_cover(meta))


def intent_cover(meta: dict) -> dict | None:
    """The cover's "Against the intended build" (signoff/intent: results.json's meta.intent): the
    intent file, and one line per finding (one physical fault, its hosts folded, its fix)."""
    it = meta.get("intent")
    if not isinstance(it, dict):
        return None
    return {"file": f"{it.get('file')} (sha256 {str(it.get('sha256'))[:12]})",
            "lines": [str(f.get("line")) for f in it.get("findings") or [] if isinstance(f, dict)]}


def rerun_text(meta: dict) -> str:
    """The line the terminal, the cover and report.md give a --rerun (signoff/rerun.py)."""
    r = meta["rerun"]
    how = ", ".join(f"{n} {s}" for s, n in r["statuses"].items())
    n = r["checks"]
    return (f"Rerun of run {r['run']} ({r['dir']}): its {n} check{'s' * (n != 1)} that did not pass ({how})"
            + (f"; {r['via']}" if r.get("via") else "") + (f"; {r['merge']}" if r.get("merge") else ""))


def partial_text(meta: dict) -> str:
    """The partial note every output carries (a --partial PASS is no sign-off of the sheet)."""
    how = ("accepted by --partial: the verdict judges these checks, not the whole sign-off sheet"
           if meta.get("partial_accepted") else "not a sign-off; pass --partial to accept a subset")
    return f"Partial run ({how}): {meta.get('partial')}"


def failed_on_regression(doc: dict) -> str:
    """Why a PASS exits 1 (--fail-on-regression), or '' where it does not."""
    meta = doc["meta"]
    n = len((meta.get("baseline") or {}).get("regressions") or [])
    if not (meta.get("fail_on_regression") and n and doc.get("verdict") == "PASS"):
        return ""
    return (f"Failed on regression: verdict PASS, but {n} regression{'s' * (n > 1)} against the "
            f"baseline fail this run (--fail-on-regression: exit code 1)")


def baseline_notes(base: dict) -> list[str]:
    """Why the baseline may not compare, the checks no longer shown (UNSEEN now), and the figures
    not compared (unlike units)."""
    from signoff.baseline import unshown_lines
    out = [f"baseline warning: {w}" for w in base.get("warnings") or []] + unshown_lines(base)
    unlike = base.get("unlike_units") or []
    if unlike:
        shown = "; ".join(f"{x['criterion']} on {x['host']} ({x['unit'] or 'no unit'} now, "
                          f"{x['baseline_unit'] or 'no unit'} then)" for x in unlike[:5])
        more = f" and {len(unlike) - 5} more" if len(unlike) > 5 else ""
        out.append(f"not compared, unlike units: {shown}{more}")
    return out


def regression_text(x: dict) -> str:
    if x.get("was_status"):
        moved = (f" (the threshold changed: {x['was_expected']} then, {x['expected']} now)"
                 if x.get("was_expected") else "")
        return f"{x['was_status']} before, {x['status']} now{moved}"
    return (f"{_fmt(x['measured'])} {x.get('unit') or ''} vs {_fmt(x['baseline'])} before "
            f"({x['change_pct']:+.1f} %)")


def tolerance_text(base: dict) -> str:
    """'tolerance 3 %; storage_read_seq 12 % (profile h200-8x-nvlink@1)'."""
    own = "; ".join(f"{c} {_fmt(100 * v)} %" for c, v in sorted((base.get("tolerances") or {}).items()))
    return (f"tolerance {_fmt(100 * base.get('tolerance', 0))} %" + (f"; {own}" if own else "")
            + (f" from {base['tolerance_from']}" if base.get("tolerance_from") else ""))


LAUNCHED = {"ssh": "SSH (Fabric) to each host", "local": "this machine, without SSH"}


def launcher(meta: dict, records: list[dict] = ()) -> str:
    """What ran the checks' host commands (each record's `launcher` says it per check)."""
    got = meta.get("launcher") or {}
    if got.get("launcher") != "slurm":
        used = [LAUNCHED[k] for k in LAUNCHED if any(r.get("launcher") == k for r in records)]
        return "; ".join(used) or LAUNCHED["ssh"]
    steps = got.get("steps") or []
    return (f"srun inside Slurm job {got.get('job')}: every check's probes as tasks of srun steps, one "
            f"step per probe and phase across the nodes ({len(steps)} steps"
            + (f": {steps[0]} to {steps[-1]}" if steps else "") + "), the multi-node all-reduce as one "
            "step of one task per rank")


# Up to this many hosts the report shows every host x criterion cell (and every host's
# versions); above it, per-criterion counts and the hosts that need a look, so that the
# summary stays one screen at 1,000 hosts.
MATRIX_MAX_HOSTS = 16
WORST = 3  # hosts named per criterion at the bad end of its measured values
FOLD_MAX = 160  # characters of folded host names in one cell before "and N more"
PROBLEMS = ("FAIL", "ERROR", "NOT RUN")


def hosts_text(names) -> str:
    """Host names folded into ranges (node[001-512]); cut at FOLD_MAX characters."""
    names = sorted(set(names))
    text = hostlist.fold(names)
    if len(text) <= FOLD_MAX:
        return text
    lo, hi = 1, len(names)  # the most names whose fold fits, then "and N more"
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if len(hostlist.fold(names[:mid])) <= FOLD_MAX else (lo, mid - 1)
    return f"{hostlist.fold(names[:lo])} and {len(names) - lo} more"


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _direction(expected: str) -> int:
    """+1 where higher is better (">= x"), -1 where lower is ("<= x"), 0 otherwise."""
    return {">=": 1, "<=": -1}.get(str(expected or "").split(" ", 1)[0], 0)


def criterion_stats(recs: list[dict]) -> dict:
    """One criterion's records: hosts per status, min/median/max of the numeric measured
    values, and its worst hosts: the non-PASS ones by status, then the bad end of the values."""
    counts = Counter(r["status"] for r in recs)
    values = sorted(((r["measured"], r["host"]) for r in recs if _number(r.get("measured"))),
                    key=lambda x: x[0])
    some = next((r for r in recs if r.get("expected")), recs[0])
    direction = _direction(some.get("expected"))
    worst = {s: [r["host"] for r in recs if r["status"] == s] for s in PROBLEMS}
    bad_end = (values if direction > 0 else values[::-1])[:WORST] if direction and len(values) > 1 else []
    return {"counts": counts, "unit": some.get("unit") or "", "expected": some.get("expected") or "",
            "source": some.get("source") or "", "direction": direction,
            "min": values[0][0] if values else None, "max": values[-1][0] if values else None,
            "median": statistics.median(v for v, _ in values) if values else None,
            "problems": {s: h for s, h in worst.items() if h}, "bad_end": bad_end}


def fleet_stats(recs: list[dict]) -> dict | None:
    """A criterion's judgement against the fleet (signoff/outlier.py): its median, floor, how
    many hosts or pairs were compared and which were outliers; None where none was compared."""
    judged = [r for r in recs if ((r.get("details") or {}).get("fleet") or {}).get("median") is not None]
    if not judged:
        return None
    f = judged[0]["details"]["fleet"]
    return {"median": f["median"], "floor": f["floor"], "fleet_min": f["fleet_min"], "n": f["n"],
            "unit": judged[0].get("unit") or "",
            "outliers": [(r["host"], r["details"]["fleet"].get("figure")) for r in judged
                         if r["details"]["fleet"]["status"] == "outlier"]}


def fleet_text(fs: dict) -> str:
    """'median 191 Gb/s of 8 (outlier below 0.9 x = 172): outliers lab2->lab3 153, ...'."""
    out = ", ".join(f"{h} {_fmt(v)}" for h, v in fs["outliers"][:WORST])
    more = f" (+{len(fs['outliers']) - WORST} more)" if len(fs["outliers"]) > WORST else ""
    which = f"outliers {out}{more}" if out else "no outlier"
    return (f"fleet median {_fmt(fs['median'])} {fs['unit']} of {fs['n']} (outlier below "
            f"{fs['fleet_min']:g} x = {_fmt(fs['floor'])}): {which}")


def _fmt(v) -> str:
    return "" if v is None else figure(v) if isinstance(v, float) else str(v)


def criteria_summary(records: list[dict]) -> str:
    """Per criterion, one row whatever the number of hosts; an UNSEEN column where a check was."""
    shown = [s for s in STATUSES if s != "UNSEEN" or any(r["status"] == s for r in records)]
    by = {}
    for r in records:
        by.setdefault(r["criterion"], []).append(r)
    rows = []
    for c, recs in by.items():
        st = criterion_stats(recs)
        worst = [{"status": s, "text": hosts_text(h)} for s, h in st["problems"].items()]
        if st["bad_end"]:
            end = "lowest" if st["direction"] > 0 else "highest"
            worst.append({"status": None,
                          "text": f"{end}: " + ", ".join(f"{h} {_fmt(v)}" for v, h in st["bad_end"])})
        fs = fleet_stats(recs)
        if fs:
            worst.append({"status": None, "text": fleet_text(fs)})
        rows.append({"criterion": c, "worst": worst, "expected": str(st["expected"]), "source": st["source"],
                     "counts": [{"n": st["counts"][s], "cls": status_class(s)} for s in shown],
                     "min": _fmt(st["min"]), "median": _fmt(st["median"]), "max": _fmt(st["max"]),
                     "unit": st["unit"]})
    return render("templates/criteria_summary.jinja2", statuses=shown, rows=rows)


def host_matrix(records: list[dict]) -> str:
    """Every host x criterion cell: for clusters of up to MATRIX_MAX_HOSTS hosts."""
    hosts = sorted({r["host"] for r in records})
    criteria = list(dict.fromkeys(r["criterion"] for r in records))
    cell = {(r["criterion"], r["host"]): r for r in records}
    units = {}  # a criterion's unit, from any host's record that has one (an ERROR's has none)
    for r in records:
        if r.get("unit"):
            units.setdefault(r["criterion"], r["unit"])

    def one(r):
        return None if r is None else {
            "cls": status_class(r["status"]), "title": r.get("message") or "", "status": r["status"],
            "measured": None if r.get("measured") is None else _fmt(r["measured"])}
    return render("templates/host_matrix.jinja2", hosts=hosts, rows=[
        {"criterion": c, "unit": units.get(c, ""), "cells": [one(cell.get((c, h))) for h in hosts]}
        for c in criteria])


PROBLEM_ROWS = 20  # rows per criterion in the hosts-not-passed tables; the rest one table below


def problem_tables(records: list[dict]) -> str:
    """Per criterion with a host not passed: its hosts, one row per status and cause (the
    message less what varies by host), hosts folded and counted, the measured span: what a
    person must look at on a large cluster, bounded whatever the number of hosts."""
    by: dict = {}
    for r in records:
        if r["status"] in PROBLEMS:
            by.setdefault(r["criterion"], {}).setdefault(r["status"], []).append(r)
    tables = []
    for c, statuses in by.items():
        keys = [(status, cause, [rs[i] for i in cause.members]) for status, rs in statuses.items()
                for cause in causes.fold([(r["host"], r.get("message")) for r in rs])]
        keys.sort(key=lambda k: (PROBLEMS.index(k[0]), -len(k[2])))
        rows = []
        for status, cause, rs in keys[:PROBLEM_ROWS]:
            hosts = [r["host"] for r in rs]
            vals = sorted(r["measured"] for r in rs if _number(r.get("measured")))
            rows.append({"cls": status_class(status), "status": status, "span": _span(vals),
                         "who": hosts_text(hosts) if len(hosts) == 1 else
                         f"{len(hosts)} {_noun(hosts)} {hosts_text(hosts)}",
                         # the hosts column
                         "msg": cause.text if cause.alike else f"as on {cause.hosts[0]}: {cause.text}"})
        tables.append({"criterion": c, "n": sum(len(rs) for rs in statuses.values()), "rows": rows,
                       "more": len(keys) - PROBLEM_ROWS if len(keys) > PROBLEM_ROWS else 0})
    return render("templates/problem_tables.jinja2", tables=tables) if tables else Markup()


def summary_table(records: list[dict]) -> str:
    few = len({r["host"] for r in records} - {ALL}) <= MATRIX_MAX_HOSTS  # the cover lists the problems
    return render("templates/summary.jinja2", any_records=bool(records),
                  criteria=criteria_summary(records) if records else "",
                  matrix=host_matrix(records) if records and few else None,
                  problems=problem_tables(records) if records and not few else "")


RETRIED_SHOWN = 50  # rows of the retried-figures table; the rest are in results.json


FOLDED = ("PASS", "N.A.")  # rows the results table leaves out above MATRIX_MAX_HOSTS hosts


def folded_note(records: list[dict]) -> str:
    """What the results table below leaves out on a run of many hosts: its PASS and N.A. rows."""
    n = sum(r["status"] == "PASS" for r in records)
    na = sum(r["status"] == "N.A." for r in records)
    return render("templates/folded.jinja2", shown=len(records) - n - na, passed=n, na=na)


def provisional(records: list[dict]) -> dict[str, list[str]]:
    """criterion -> the hosts it judged against a provisional threshold (one derived by a rule,
    no public figure: profiles.PROVISIONAL in its expected text), in the run's order."""
    out: dict[str, list[str]] = {}
    for r in records:
        if r.get("status") in ("PASS", "FAIL") and profiles.PROVISIONAL in (r.get("expected") or ""):
            out.setdefault(r["criterion"], []).append(r["host"])
    return out


def provisional_text(prov: dict[str, list[str]]) -> str:
    """'Judged against provisional thresholds (calibrate on a known-good node): p2p_bandwidth
    (lab[1-3]), ...' — what a verdict, a PASS too, rests on without a public figure."""
    return (f"Judged against provisional thresholds ({profiles.PROVISIONAL.split(': ', 1)[1]}: "
            f"signoff calibrate): " + "; ".join(f"{c} ({hosts_text(h)})" for c, h in prov.items()))


def retried(records: list[dict]) -> list[dict]:
    """The records the retry policy measured again, widest spread first."""
    return sorted((r for r in records if len((r.get("details") or {}).get("attempts") or []) > 1),
                  key=lambda r: -(r["details"].get("spread_pct") or 0))


def retried_text(recs: list[dict]) -> str:
    """'3 figures measured again after a miss: 2 PASS (their attempts agree), 1 FAIL'."""
    by = Counter(r["status"] for r in recs)
    return (f"{len(recs)} figure{'s' if len(recs) > 1 else ''} measured again after a miss: "
            + ", ".join(f"{n} {s}" for s, n in by.items())
            + (" (a PASS after a miss: its attempts agree within max_spread)" if by["PASS"] else ""))


def retried_line(r: dict) -> str:
    """'`net_pair_bandwidth` on a->b: PASS, attempts 0.9, 1.1 Gb/s (spread 18 %)'."""
    d = r["details"]
    return (f"`{r['criterion']}` on {r['host']}: {r['status']}, attempts "
            f"{', '.join(_fmt(v) for v in d['attempts'])} {r.get('unit') or ''} (spread "
            f"{_fmt(d.get('spread_pct'))} %)")


def retried_section(records: list[dict]) -> str:
    """Every figure the retry policy measured again (signoff/retry.py): each attempt, the
    spread, the judged (best) figure and the status; the widest spreads first."""
    recs = retried(records)
    if not recs:
        return Markup()
    return render("templates/retried.jinja2", n=len(recs), rows=[
        {"cls": status_class(r["status"]), "criterion": r["criterion"], "host": r["host"],
         "status": r["status"],
         "attempts": ", ".join(_fmt(v) for v in r["details"]["attempts"]),
         "spread": _fmt(r["details"].get("spread_pct")), "measured": _fmt(r.get("measured")),
         "unit": r.get("unit") or ""} for r in recs[:RETRIED_SHOWN]],
        more=len(recs) - RETRIED_SHOWN if len(recs) > RETRIED_SHOWN else 0)


def _source(t) -> str:
    """A threshold's source, and the rule of a provisional one (signoff/profiles.py)."""
    rule = getattr(t, "provisional", "")
    return f"{t.source}; provisional, {rule}" if rule else t.source


def profile_block(profile) -> str:
    return render("templates/profile.jinja2", profile=None if profile is None else {
        "name": profile.name, "description": profile.description, "path": shown_path(profile.path),
        "chain": list(profile.chain), "hardware": ", ".join(f"{k}={v}" for k, v in profile.hardware.items()),
        "rows": [{"criterion": t.criterion, "expected": t.expected, "source": _source(t)}
                 for t in profile.criteria.values()]})


def host_notes(doc: dict) -> list[str]:
    """What the user must hear of besides the checks, one line per host and kind: what this
    run could not clean up, what killed runs left, GPUs already in use before measuring."""
    lines = [f"left behind on {h}: {w}" for h, ws in doc.get("left_behind", {}).items() for w in ws]
    lines += leftover_lines(doc.get("leftovers", {}))
    lines += [f"{w} on {h}" for h, ws in doc.get("foreign_locks", {}).items() for w in ws]
    lines += [f"{w} before the run: its checks ERROR" for ws in doc.get("slurm", {}).values() for w in ws]
    for h, facts in doc.get("hosts", {}).items():
        used = [f"GPU {g['index']}: pid {p['pid']} ({p['name'] or '?'}"
                + (f", {p['used_mib']} MiB)" if p.get("used_mib") is not None else ")")
                for g in (facts.get("nvidia") or {}).get("gpus") or [] for p in g.get("processes") or []]
        if used:
            lines.append(f"GPUs in use on {h} before measuring: {'; '.join(used)}: its GPU "
                         f"measurements are suspect (shared or oversold node)")
    return lines


SHOWN_LEFTOVERS = 3  # paths a leftover line names; report.html keeps every one


def leftover_lines(leftovers: dict[str, list[str]]) -> list[str]:
    """One line per set of leftovers, hosts folded (hosts sharing a /tmp see the same dead
    runs): a handful of paths, else their count; `signoff clean` removes them."""
    by: dict[tuple, list[str]] = {}
    for h, ws in leftovers.items():
        by.setdefault(tuple(ws), []).append(h)
    out = []
    for ws, hosts in by.items():
        where = hosts_text(hosts) if len(hosts) == 1 else f"{len(hosts)} hosts {hosts_text(hosts)}"
        first = "; ".join(ws[:SHOWN_LEFTOVERS])
        what = first if len(ws) <= SHOWN_LEFTOVERS else \
            f"{len(ws)} leftovers of runs that are gone ({first}; every one in report.html)"
        out.append(f"leftover on {where}: {what}: `signoff clean` removes what no live run holds")
    return out


def notes_section(doc: dict) -> str:
    # a host's leftovers in one line (a shared /tmp may hold dozens): every path kept
    lines = [x for x in host_notes(doc) if not x.startswith("leftover on ")]
    lines += [f"leftover on {h} ({len(ws)}): " + "; ".join(ws) + ": remove them once no run of them is alive"
              for h, ws in doc.get("leftovers", {}).items()]
    return render("templates/notes.jinja2", lines=lines) if lines else Markup()


# pytest-html's own counters count pytest outcomes (an ERROR that could not measure shows as
# "Failed", N.A. and NOT RUN as "Skipped"): hidden, the cover's counts shown instead.
HIDE_PYTEST = render("templates/hide_pytest.jinja2")


STATUS_MEANING = {
    "PASS": "measured and within the profile's threshold",
    "FAIL": "measured and outside the threshold (a judgement: the message names value, limit, source)",
    "ERROR": "could not be measured (host unreachable, probe failed or timed out, threshold missing): "
             "never a pass",
    "N.A.": "the profile does not apply this check to this host (e.g. a pair test on a 1-GPU host): "
            "never counted as a pass",
    "UNSEEN": "this machine's form (a VM slice, a container) cannot show it: the cover says what to ask "
              "the provider for; never counted as a pass, yet the run's verdict can be PASS with N "
              "UNSEEN (the verdict line says how many; a CI gate: --unseen-error makes each an ERROR)",
    "NOT RUN": "not measured (the host is outside the profile's hardware class, a run cut short, "
               "a check deselected): the verdict is INCOMPLETE",
}


def methodology(doc: dict, profile, methods: list) -> str:
    """How each family measured (its own methodology hook), units, what each status means,
    and every threshold's source as a citation."""
    sysinfo = {"check": "GPU model, count, health, versions", "tool": "NVML (nvidia-ml-py), torch, sysfs",
               "how": "read once on every host when the run starts, before any load (the sysinfo "
                      "probe); versions compared across hosts"}
    sources, meta = None, doc.get("meta") or {}
    if profile is not None:
        known = families.criteria()
        sources = {"profile": profile.name, "path": shown_path(profile.path),
                   "version": version_text(meta.get("suite_version")), "rows": [
                       {"criterion": t.criterion, "expected": t.expected, "source": _source(t),
                        "attempts": retry.count(t) if known.get(t.criterion, {}).get("retry") else "never"}
                       for t in profile.criteria.values()]}
    return render("templates/methodology.jinja2", methods=[m for fam in [[sysinfo], *methods] for m in fam],
                  statuses=list(STATUS_MEANING.items()), sources=sources)


def _gib(n) -> str:
    return f"{n / 2**30:.0f} GiB" if _number(n) else ""


def inventory_section(doc: dict) -> str:
    """Per host, what a provider needs to find the part: GPUs (model, UUID, serial, VBIOS,
    PCI bus), driver, NICs, CPU, memory, OS, kernel, and the probes' Python."""
    nics = {}
    for r in doc["results"]:  # nic_link's details: the ports the netinfo probe saw
        if r["criterion"] == "nic_link" and isinstance(r.get("details"), dict):
            nics[r["host"]] = r["details"]
    rows = []
    for h, f in sorted(doc.get("hosts", {}).items()):
        if "error" in f:
            rows.append({"name": h, "error": str(f["error"])})
            continue
        nv = f.get("nvidia") or {}
        net = nics.get(h) or {}
        # every port the netinfo probe read, a bond, VLAN, veth or bridge (no PCI device) said so:
        # on such a host those are what was probed, never "not probed"; loopback left out
        ports = [f"{p['name']}{' (virtual: no PCI device)' if p.get('virtual') else ''} "
                 f"{p.get('speed_mbps') or '?'} Mb/s {p.get('operstate')}"
                 + (f" {', '.join(p['addresses'])}" if p.get("addresses") else "")
                 for p in net.get("ethernet") or [] if p.get("name") != "lo"]
        ports += [f"{p['device']}/{p['port']} {p.get('rate')} {p.get('state')}"
                  for p in net.get("infiniband") or []]
        # the host's own strings (/etc/os-release, uname, /proc/cpuinfo): text, as every value in a template
        rows.append({"name": h, "error": None, "identity": host_identity(f),
                     "gpus": [f"GPU {g.get('index')}: {g.get('name')}, {g.get('uuid')}, serial "
                              f"{g.get('serial') or '?'}, VBIOS {g.get('vbios') or '?'}, PCI "
                              f"{g.get('pci_bus_id')}" for g in nv.get("gpus") or []],
                     "software": f"driver {nv.get('driver') or '-'} (CUDA {nv.get('cuda_driver') or '-'}); "
                                 f"torch {(f.get('torch') or {}).get('version') or '-'}; probe Python "
                                 f"{f.get('python')} {f.get('python_executable')}",
                     "nics": "; ".join(ports) or "not probed (no network check ran)",
                     "os": str(f.get("os")), "kernel": str(f.get("kernel")), "cpu": f.get("cpu_model") or "?",
                     "cpu_count": str(f.get("cpu_count")), "memory": _gib(f.get("memory_bytes")) or "?"})
    return render("templates/inventory.jinja2", hosts=rows)


def markdown(doc: dict) -> str:
    """report.md: the cover for a CI job page or a ticket."""
    meta = doc["meta"]
    counts = Counter(r["status"] for r in doc["results"])
    out = [f"# GPU cluster sign-off: {verdict_text(doc.get('verdict') or 'INCOMPLETE')}"
           + md_text(unseen.verdict_suffix(doc)), "",
           *(f"{md_text(x)}  " for x in unseen.rented(doc)),
           *([f"**{md_text(partial_text(meta))}**", ""] if meta.get("partial") else []),
           *([f"**{md_text(failed_on_regression(doc))}**", ""] if failed_on_regression(doc) else []),
           f"Profile **{meta.get('profile')}** {profile_class_text(meta)}; "
           f"hosts: {hosts_text(meta.get('hosts', []))}  ",
           *(f"{md_text(x)}  " for x in identity_lines(doc)),
           *([f"Profile {md_text(meta['profile_pick'])}  "] if meta.get("profile_pick") else []),
           run_line(meta), "",
           *([f"**{md_text(rerun_text(meta))}**", ""] if meta.get("rerun") else []),
           *([f"**{md_text(excluded_text(meta))}**", ""] if meta.get("excluded") else []),
           *([f"**{probe_env_text(meta)}**", ""] if meta.get("probe_env") else []),
           "Checks: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]), "",
           *([f"**{md_text(provisional_text(prov))}**", ""] if (prov := provisional(doc["results"])) else [])]
    groups = problem_groups(doc["results"])
    if groups:
        out += ["## To fix", ""]
        for g in groups[:COVER_LINES]:
            who, what, cause = problem_line(g)
            out.append(f"- **{g['status']}** `{g['criterion']}` on {md_text(who)}: {md_text(what)}"
                       + (f"; likely cause: {md_text(cause)}" if cause else ""))
        if len(groups) > COVER_LINES:
            out.append(f"- {len(groups) - COVER_LINES} more to fix: report.html, results.json")
        out.append("")
    out += by_host_md(doc)
    out += evidence_md(doc)
    intent = intent_cover(meta)
    if intent:
        out += [f"## Against the intended build ({md_text(intent['file'])})", ""]
        out += [f"- {md_text(x)}" for x in intent["lines"][:COVER_LINES]] or \
            ["- every host judged is as intended"]
        out += [f"- {len(intent['lines']) - COVER_LINES} more: report.html, results.json"] \
            if len(intent["lines"]) > COVER_LINES else []
        out.append("")
    cannot = unseen.lines(doc)
    if cannot:
        out += ["## What this machine cannot show", "", *(f"- {md_text(x)}" for x in cannot), ""]
    noted = note_lines(doc["results"])
    if noted:
        out += ["## Said with the verdict", "", *(f"- {md_text(x)}" for x in noted), ""]
    again = retried(doc["results"])
    if again:
        out += ["## Measured again", "", retried_text(again), ""]
        out += [f"- {retried_line(r)}" for r in again[:RETRIED_SHOWN]]
        out += [f"- {len(again) - RETRIED_SHOWN} more in results.json"] if len(again) > RETRIED_SHOWN else []
        out.append("")
    fleet = {c: fs for c in dict.fromkeys(r["criterion"] for r in doc["results"])
             if (fs := fleet_stats([r for r in doc["results"] if r["criterion"] == c]))}
    if fleet:
        out += ["## Judged against the fleet", ""]
        out += [f"- `{c}`: {fleet_text(fs)}" for c, fs in fleet.items()]
        out.append("")
    base = meta.get("baseline")
    if base:
        out += [f"## Compared with {base.get('name')} ({tolerance_text(base)})", ""]
        out += [f"- **REGRESSED** `{x['criterion']}` on {x['host']}: {regression_text(x)}"
                for x in base.get("regressions", [])] or ["- no regression"]
        out += [f"- {n}" for n in baseline_notes(base)]
        out += [f"- hosts {k} since the baseline: {hosts_text(base[k])}"
                for k in ("appeared", "vanished") if base.get(k)]
        out.append("")
    # every line printable: `cat report.md` replays no host's escape sequence
    return ("\n".join(map(printable, out))
            + "\nDetails: report.html (plots, methodology, inventory), results.json.\n")
