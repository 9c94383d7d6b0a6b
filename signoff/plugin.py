"""pytest plugin: the options, their checks, the inventory and profile a run starts from, its
report directory and signals. Its parts: fixtures.py (the checks' fixtures), recorder.py (every
check's status and the run's outputs), terminal.py, state.py (docs/architecture.md)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from signoff import (
    InputError,
    baseline,
    evidence,
    families,
    fixtures,
    hookspecs,
    hostlist,
    inventory,
    manifest,
    openmetrics,
    paths,
    profiles,
    recorder,
    report,
    rerun,
    safefile,
    slurm,
)
from signoff.fleet import CLEANUP_S, MAX_PARALLEL, new_run_id
from signoff.printable import printable
from signoff.recorder import Recorder
from signoff.results import Results
from signoff.state import ROOT, STATE, State

# Each family's options, fixtures and hooks (signoff/<family>/plugin.py); the evidence per failed
# host (signoff/evidence: no family, it judges nothing)
pytest_plugins = [*families.plugins(), "signoff.evidence.plugin"]

def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)
    # the checks' fixtures and the recorder's hooks: registered, not named in pytest_plugins
    # (already imported here, pytest could not rewrite their asserts and would warn)
    for part in (fixtures, recorder):
        if not pluginmanager.has_plugin(part.__name__):
            pluginmanager.register(part, part.__name__)


def pytest_addoption(parser):
    g = parser.getgroup("signoff", "GPU cluster acceptance")
    g.addoption("--profile", default="auto",
                help="threshold profile: a name in thresholds/, a YAML path, or 'auto' (default)")
    g.addoption("--hosts", default=None,
                help="hosts to check, comma list with Slurm ranges: node[01-16],gpu[1,3-5]; "
                     "with --inventory (or inside a Slurm allocation), those of its hosts")
    g.addoption("--inventory", default=None, help="inventory YAML (hosts, users, keys, python)")
    g.addoption("--tags", default=None, metavar="TAG[,TAG]",
                help="only the inventory's hosts that carry any of these tags (its hosts' tags:)")
    g.addoption("--exclude-hosts", default=None, metavar="RANGE",
                help="leave these hosts out (after --hosts and --tags); every output names the "
                     "hosts left out and why (results.json meta.excluded)")
    g.addoption("--launcher", choices=("auto", "ssh", "slurm"), default="auto",
                help="how host commands run: ssh (Fabric), slurm (srun steps inside this Slurm "
                     "allocation, its nodes the hosts; --hosts narrows them), auto (default): slurm "
                     "when SLURM_JOB_ID and SLURM_JOB_NODELIST are set and neither --hosts nor "
                     "--inventory is given, else ssh")
    g.addoption("--python", default=None,
                help="interpreter the probes use on --hosts hosts and on this machine: the training "
                     "environment (default python3 on PATH; on this machine, if that has no torch, "
                     "signoff's own environment, said so in every report)")
    g.addoption("--ssh-user", default=None, help="SSH user for --hosts hosts")
    g.addoption("--accept-new-host-keys", action="store_true", default=False,
                help="trust unknown SSH host keys (default: reject hosts not in known_hosts)")
    g.addoption("--connect-timeout", type=float, default=10,
                help="SSH connect timeout, s (default %(default)s)")
    g.addoption("--probe-timeout", type=float, default=180,
                help="a probe running longer is killed on its host, s (default %(default)s)")
    g.addoption("--max-parallel", type=int, default=MAX_PARALLEL,
                help=f"hosts measured at once in each measuring phase (default {MAX_PARALLEL})")
    g.addoption("--lock-wait", type=float, default=0,
                help="wait this long (s) for another signoff run's lock on a host; default 0: "
                     "refuse the host (its checks ERROR, naming the other run)")
    g.addoption("--partial", action="store_true", default=False,
                help="accept a subset of the checks (-k, one file) as a PASS; without it a "
                     "partial run's verdict is INCOMPLETE")
    g.addoption("--unseen-error", action="store_true", default=False,
                help="every check this machine's form cannot show (UNSEEN: a VM slice's NVLink fabric, "
                     "DCGM on a VM, a container's kernel log) is an ERROR instead, saying what to ask "
                     "the provider for (exit 2: a site or CI that needs them all)")
    g.addoption("--rerun", default=None, metavar="DIR",
                help="measure again the checks that did not pass (FAIL, ERROR, NOT RUN) in this "
                     "earlier run's report directory, on its hosts and profile unless given; the "
                     "verdict is the whole sheet's, its other results carried (--lf: the newest run's)")
    g.addoption("--baseline", default=None, metavar="PATH/results.json",
                help="compare with an earlier run: figures that regressed beyond "
                     "--baseline-tolerance, hosts that appeared or vanished (cover, results.json)")
    g.addoption("--baseline-tolerance", default=None,
                help="a figure moved the wrong way by more than this regressed, for every criterion "
                     f"(default: the profile's baseline: tolerances, else {100 * baseline.TOLERANCE:g}%%)")
    g.addoption("--fail-on-regression", action="store_true", default=False,
                help="with --baseline: a PASS with regressions exits 1, as a FAIL does (README: "
                     "Exit codes)")
    g.addoption("--report-dir", default=None,
                help="where report.html, results.json and junit.xml go "
                     "(default reports/<UTC timestamp>/)")
    g.addoption("--sign-key", default=None, metavar="PATH",
                help="an SSH private key (or one in ssh-agent) that signs the report directory's "
                     f"{manifest.NAME} (ssh-keygen -Y sign, namespace {manifest.NAMESPACE}): "
                     f"{manifest.SIG}; checked before the run (signoff verify DIR checks both)")
    g.addoption("--metrics-file", default=None, metavar="PATH",
                help=f"also write the run's {openmetrics.FILE} (OpenMetrics: verdict and figures) here, "
                     "atomically: e.g. node_exporter's textfile collector directory")


def _is_acceptance_run(config) -> bool:
    if config.getoption("report_dir"):
        return True
    acc = ROOT / "acceptance"
    for arg in config.args:
        p = Path(arg.split("::")[0]).resolve()
        if p == acc or acc in p.parents or (p == ROOT and not config.args[1:]):
            return True
    return False


def _check_options(config) -> None:
    """Numeric options are judged once, before any host is touched (the families' in
    pytest_signoff_check_options)."""
    if config.getoption("max_parallel") <= 0:
        raise InputError(f"--max-parallel {config.getoption('max_parallel')}: expected hosts > 0")
    if config.getoption("lock_wait") < 0:
        raise InputError(f"--lock-wait {config.getoption('lock_wait')}: expected seconds >= 0")
    for opt in ("connect_timeout", "probe_timeout"):
        if config.getoption(opt) <= 0:
            raise InputError(f"--{opt.replace('_', '-')} {config.getoption(opt)}: expected seconds > 0")
    if config.getoption("sign_key", None) is not None:  # a key it cannot sign with: refused now
        manifest.check_key(config.getoption("sign_key"))
    if config.getoption("metrics_file", None) is not None:
        openmetrics.check_path(config.getoption("metrics_file"))


def _check_baseline_options(config) -> None:
    """--baseline "" (an unset variable) and --fail-on-regression without a baseline would
    switch the regression gate off without a word: refused (exit 4)."""
    arg = config.getoption("baseline")
    if arg is not None and not arg.strip():
        raise InputError("--baseline is empty (an unset variable?): name an earlier run's "
                         "results.json or leave --baseline out")
    if config.getoption("fail_on_regression") and arg is None:
        raise InputError("--fail-on-regression without --baseline: no earlier run to find "
                         "regressions against, so it would fail nothing; add --baseline "
                         "PATH/results.json or leave --fail-on-regression out")


def pytest_collection_modifyitems(config, items):
    """--rerun: the earlier run's checks that did not pass, the rest deselected (said, as -k's)."""
    state = config.stash.get(STATE, None)
    if not state or not state.rerun:
        return
    again = set(state.rerun["tests"])
    keep = [i for i in items if i.nodeid in again]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.nodeid not in again])
        items[:] = keep


def _refuse_xdist(config) -> None:
    """Each xdist worker would build its own fleet and measure every family again, its own
    phase beside the others' (an all-reduce beside a storage read): one process measures all
    hosts at once already, so workers buy nothing."""
    for opt, flag, off in (("numprocesses", "-n", None), ("dist", "--dist", "no")):
        val = config.getoption(opt, off)
        if val not in (off, 0):
            raise pytest.UsageError(
                f"{flag} {val}: pytest-xdist is not supported for acceptance runs: signoff measures "
                f"every host at once in one process (--max-parallel); workers would each measure "
                f"again, beside one another. Run without {flag}.")


def _load_inventory(config) -> inventory.Inventory:
    if config.getoption("hosts") is not None and not config.getoption("hosts").strip():
        raise InputError("--hosts is empty (an unset variable?): name the hosts or leave it out")
    if launcher(config) == "slurm":
        return _slurm_inventory(config)
    if config.getoption("inventory"):
        path = config.getoption("inventory")
        return _narrowed(config, inventory.load(path), f"inventory {path}")
    if config.getoption("hosts"):
        inv = inventory.from_hostlist(config.getoption("hosts"), config.getoption("ssh_user"),
                                      config.getoption("python") or "python3")
        return _narrowed(config, inv, f"--hosts {config.getoption('hosts')}", hosts=False)
    return _narrowed(config, inventory.local_inventory(config.getoption("python")),
                     "this machine (neither --hosts nor --inventory given)", hosts=False)


def _narrowed(config, inv: inventory.Inventory, where: str, hosts: bool = True) -> inventory.Inventory:
    """`inv`'s hosts that --hosts names (unless they are --hosts' own), that carry a --tags tag,
    less --exclude-hosts: one selection for an inventory file and a Slurm allocation alike."""
    return inventory.select(inv, where, config.getoption("hosts") if hosts else None,
                            config.getoption("tags"), config.getoption("exclude_hosts"))


def launcher(config) -> str:
    want = config.getoption("launcher")
    if want != "auto":
        return want
    given = config.getoption("hosts") or config.getoption("inventory")
    return "slurm" if slurm.in_allocation() and not given else "ssh"


def _slurm_inventory(config) -> inventory.Inventory:
    """The allocation's nodes (--hosts, --tags, --exclude-hosts narrow them); with --inventory,
    its hosts' settings (python, data_iface, storage_path), each of them a node of the allocation."""
    job, nodes = slurm.allocation()
    path = config.getoption("inventory")
    if path:
        inv = inventory.load(path)
        inv.source, where = f"Slurm job {job}, --inventory {path}", f"inventory {path}"
    else:
        inv = inventory.from_hostlist(hostlist.fold(nodes), None, config.getoption("python") or "python3")
        inv.source, where = f"Slurm job {job}", f"Slurm job {job}'s nodes"
    listed = {h.name for h in inv.hosts}
    inv, inside = _narrowed(config, inv, where), set(nodes)
    outside = [h.name for h in inv.hosts if h.name not in inside]
    if outside:
        raise InputError(f"--inventory {path}: {hostlist.fold(outside)} not in Slurm job {job}'s nodes "
                         f"({hostlist.fold(nodes)})")
    # the allocation's nodes the inventory lacks are not judged: said, as --exclude-hosts' are
    inv.excluded.update((n, f"in Slurm job {job}'s allocation but not in --inventory {path}")
                        for n in nodes if n not in listed)
    return inv


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    try:
        _check_options(config)
        rerun.defaults(config, _is_acceptance_run(config))  # the earlier run's hosts and profile
        inv = _load_inventory(config)
        arg = config.getoption("profile")
        prof = None if arg == "auto" else profiles.load(arg)
        klass = None
        if prof is not None and prof.abstract:  # its gaps would ERROR on every healthy host: the
            # hosts' NVML picks the variant that extends it (pick_profile), as auto does among all
            if not profiles.variants(prof):
                raise InputError(f"--profile {arg}: {prof.name} is a class base (abstract: true) that "
                                 f"no profile beside it extends: use one that extends it (or --profile auto)")
            klass, prof = prof, None
        config.hook.pytest_signoff_check_options(config=config, inventory=inv, profile=prof)
        _check_baseline_options(config)
        tolerance = baseline.tolerance_arg(config.getoption("baseline_tolerance"))
        base = baseline.load(config.getoption("baseline")) if config.getoption("baseline") else None
        again = rerun.of(config) if _is_acceptance_run(config) else None  # not the suite's own tests/
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = State(inv, prof, arg, klass, run_id=new_run_id(), base=base, tolerance=tolerance,
                  job=slurm.allocation()[0] if launcher(config) == "slurm" else None, rerun=again)
    config.stash[STATE] = state
    # --collect-only lists the checks, as pytest does: no run, so no report directory, exit 0
    if not _is_acceptance_run(config) or config.option.collectonly:
        return
    _refuse_xdist(config)
    # signoff's own section says every problem, grouped by cause (a fault on 300 hosts is one
    # line): pytest's traceback per failure and "FAILED ..." per check would be 300 lines more.
    # --tb and -r given on the command line still apply.
    if config.option.tbstyle == "auto":
        config.option.tbstyle = "no"
    if config.option.reportchars == "fE":  # pytest's default
        config.option.reportchars = ""
    rd = _report_dir(config.getoption("report_dir"))
    state.report_dir = rd
    if hasattr(config.option, "htmlpath") and not config.option.htmlpath:
        config.option.htmlpath = str(rd / "report.html")
        config.option.self_contained_html = True
    state.results = Results(rd / "results.json", {
        "profile": prof.name if prof else klass.name if klass else "auto",  # the pick's, once picked
        "profile_requested": arg,
        **({"profile_variants": [k.name for k in profiles.variants(klass)]} if klass else {}),
        "profile_path": str(prof.path) if prof else None,  # what a calibrated profile extends
        "profile_sha256": profiles.digest(prof) if prof else None,  # its chain's bytes, as judged
        "profile_class": prof.describe_class() if prof else "",
        "inventory": inv.source,
        "hosts": [h.name for h in inv.hosts],
        "probe_python": {h.name: h.python for h in inv.hosts},  # the interpreter each host's probes use
        # --hosts' login, for a rerun of the same hosts (an inventory file keeps its own)
        **({"ssh_user": config.getoption("ssh_user")} if config.getoption("ssh_user") else {}),
        # set when this machine's probes run in signoff's own environment, not a training one
        **({"probe_env": inv.hosts[0].probe_env} if inv.hosts and inv.hosts[0].probe_env else {}),
        "run": state.run_id,
        "launcher": {"launcher": "slurm", "job": state.job} if state.job else {"launcher": "ssh"},
        "operator": report.operator(),
        "suite_version": report.suite_version(),
        **({"rerun": rerun.meta(again)} if again else {}),
    })
    config.pluginmanager.register(Recorder(state, config), "signoff-recorder")
    # A scheduler's SIGTERM should clean the hosts up like Ctrl-C does.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt(state))


# Every artifact a run writes in its report directory, files and directories (each family's
# raw files: its REPORT_DIRS), in one list: a reused --report-dir moves them all together to
# earlier/<its run id>/ (never mixed into this run: its hosts/*.json would be read as this run's
# hosts), and a name planted there is never written through (signoff/safefile.py).
RUN_FILES = ("results.json", "results.jsonl", "junit.xml", "report.html", "report.md",
             report.EXCLUDE_FILE, report.DRAIN_FILE, openmetrics.FILE, manifest.NAME, manifest.SIG)
RUN_DIRS = ("hosts", evidence.DIR,
            *(d for mod in families.modules() for d in getattr(mod, "REPORT_DIRS", ())))


def _report_dir(arg: str | None) -> Path:
    """The run's report directory, made if missing (0755) and refused where another user could
    put a link in it (safefile.refused(): owned by someone else, writable by group or others,
    or below a directory that is); the default reports/<UTC stamp>/ is a fresh directory of
    the clone's reports/ (the clone's own, as its code is)."""
    top = paths.reports_dir()
    rd = Path(arg) if arg else top  # as given: the paths the run prints are the user's
    try:
        if arg:  # what exists is checked before anything is made in it
            full = Path(os.path.abspath(rd))
            missing = [p for p in (*reversed(full.parents), full) if not os.path.lexists(p)]
            why = safefile.refused(missing[0].parent, parent=True) if missing else None
            for p in () if why else missing:
                safefile.subdir(p)
            why = why or safefile.refused(full)
        else:
            rd = _fresh(top)
            why = safefile.refused(rd, trusted=top if paths.checkout() else None)
        if why:
            raise pytest.UsageError(f"--report-dir {rd}: refused: {why} (another user could plant a "
                                    f"link there that this run would write through): name a directory "
                                    f"of your own that no one else can write to")
        _start_clean(rd)
        safefile.subdir(rd / "hosts")
    except OSError as exc:
        raise pytest.UsageError(f"--report-dir {rd}: cannot write into it: {exc.strerror or exc}") from None
    return rd


def _fresh(top: Path) -> Path:
    """reports/<UTC stamp>/, made now (two runs in the same second get two)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    top.mkdir(parents=True, exist_ok=True)
    for i in range(100):
        rd = top / (f"{stamp}-{i}" if i else stamp)
        try:
            os.mkdir(rd, safefile.DIR_MODE)
            return rd
        except FileExistsError:
            continue
    raise FileExistsError(f"{top}/{stamp}: 100 runs this second")


def _start_clean(rd: Path) -> None:
    """A reused --report-dir: an earlier run's files are moved to earlier/<its run id>/ (said on
    stderr), never silently overwritten; nothing of it is left to mix into this run, and nothing
    planted at a name the run writes is left to write through (a link is moved or removed)."""
    earlier = None
    if any(os.path.lexists(rd / n) for n in ("results.json", "results.jsonl")):
        try:
            run = json.loads(safefile.read_text(rd / "results.json"))["meta"]["run"]
        except (OSError, ValueError, KeyError, TypeError):
            run = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-unnamed")
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(run)).lstrip(".") or "unnamed"
        top = safefile.subdir(rd / "earlier")
        for earlier in (top / f"{name}{f'-{i}' if i else ''}" for i in range(1000)):
            try:  # a directory of its own, made now: never one planted
                os.mkdir(earlier, safefile.DIR_MODE)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"{top}/{name}: 1000 earlier runs of that name")
    for name in (*RUN_FILES, *RUN_DIRS):
        path = rd / name
        if not os.path.lexists(path):
            continue
        if earlier is not None:
            os.rename(path, earlier / name)  # a link is moved as the link, never followed
        elif stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    if earlier is not None:
        sys.stderr.write(f"signoff: --report-dir {rd} held an earlier run: moved to {earlier}\n")


def _interrupt(state: State):
    """The first Ctrl-C (or SIGTERM) stops the run. Later ones (people press it again when
    the first seems slow), and any during the cleanup, are only acknowledged: they must
    not cost the reports, the verdict or the cleanup, which is bounded anyway."""
    def handler(signum, frame):
        state.interrupts += 1
        if not state.stopping:
            state.stopping = True
            raise KeyboardInterrupt(f"signal {signum}")
        os.write(2, f"\nsignoff: stopping already: writing the reports and cleaning up the hosts "
                    f"(at most {2 * CLEANUP_S} s)\n".encode())
    return handler


@pytest.hookimpl(tryfirst=True)  # before pytest-html's, which writes report.html a first time
def pytest_sessionstart(session):
    state = session.config.stash.get(STATE, None)
    if state and state.report_dir:
        html_safely(session.config, state.report_dir)
    if state and state.results and state.inventory.excluded:  # said, so no one takes them as checked
        state.results.set_meta(excluded=dict(state.inventory.excluded))


def html_safely(config, rd: Path) -> None:
    """pytest-html writes report.html with a plain open("w"); in the report dir it goes through
    safefile.write instead, as every other file of the run (its writer is pytest-html 4's
    BaseReport._write_report: a later pytest-html without it writes as before)."""
    for p in config.pluginmanager.get_plugins():
        path = getattr(p, "_report_path", None)
        if callable(getattr(p, "_write_report", None)) and path is not None and \
                Path(path).parent == Path(os.path.abspath(rd)):
            p._write_report = lambda text, path=Path(path): safefile.write(path, text)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if STATE in session.config.stash:
        session.config.stash[STATE].stopping = True  # teardown is cleanup: see _interrupt


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_unconfigure(config):
    """The report directory's last files, after every other one (pytest-html's report.html,
    results.json, junit.xml, --junitxml's, each family's): signoff.prom, then the manifest of
    them all, signed with --sign-key (the outermost wrapper: after every plugin's unconfigure)."""
    try:
        return (yield)
    finally:
        state = config.stash.get(STATE, None)
        if state is not None and state.report_dir is not None and state.results is not None:
            _seal(config, state)


def _seal(config, state: State) -> None:
    """signoff.prom (and --metrics-file), then MANIFEST.sha256 (and its .sig). A failure is said
    on the terminal and the verdict stands; signoff.prom's also in results.json, which the
    manifest then covers."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    rec = config.pluginmanager.get_plugin("signoff-recorder")
    doc, rd = state.results.doc, state.report_dir
    try:
        openmetrics.write(rd, doc, config.getoption("metrics_file", None))
    except Exception as exc:  # the verdict and the other files stand
        line = f"{openmetrics.FILE} could not be written: {type(exc).__name__}: {exc}"
        if rec is not None:
            rec.failed(line)
        _say(tr, line)
    key = config.getoption("sign_key", None)
    try:
        said = manifest.write(rd, doc["meta"] | {"verdict": doc.get("verdict")}, key)
    except Exception as exc:
        _say(tr, f"{manifest.NAME} could not be written{' or signed' if key else ''}: "
                 f"{type(exc).__name__}: {exc}")
        return
    if key:  # asked for: said (an unsigned manifest is every run's, docs/outputs.md)
        _say(tr, f"signoff: {rd}/{said}", red=False)


def _say(tr, line: str, red: bool = True) -> None:
    if tr is not None:
        tr.write_line(printable(line), **({"red": True} if red else {}))
    else:
        sys.stderr.write(printable(line) + "\n")
