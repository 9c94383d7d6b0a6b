"""pytest plugin: options, host parametrisation, fixtures, status of every check,
results.json, and the report sections."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path

import pytest

from signoff import (
    InputError,
    baseline,
    causes,
    families,
    hookspecs,
    hostlist,
    inventory,
    junit,
    paths,
    profiles,
    pytest_adapter,
    report,
    retry,
    sheet,
    slurm,
)
from signoff.check import NA_PREFIX, Check
from signoff.fleet import CLEANUP_S, MAX_PARALLEL, Fleet, HostSession, ProbeError, lacks, new_run_id
from signoff.report import FOLDED
from signoff.report import status_class as report_status_class
from signoff.results import ALL, STATUSES, Results, not_reported, split_nodeid, verdict_text, worse
from signoff.transport import HostUnreachable

# Each family's options, fixtures and hooks (signoff/<family>/plugin.py).
pytest_plugins = families.plugins()

ROOT = paths.root()  # holds acceptance/: the clone's top, or the installed sheet (signoff/paths.py)
OUR_ERRORS = (HostUnreachable, ProbeError, InputError)


@dataclass
class State:
    inventory: inventory.Inventory
    profile: profiles.Profile | None  # None until --profile auto has seen the hosts
    profile_arg: str
    class_base: profiles.Profile | None = None  # --profile BASE (abstract): its variant is picked
    pick: str = ""  # how the profile was picked from the hosts' NVML (auto or a class base)
    report_dir: Path | None = None
    results: Results | None = None
    status: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    messages: dict = field(default_factory=dict)
    duration: dict = field(default_factory=dict)
    run_id: str = ""  # in every host's run lock
    job: str | None = None  # the Slurm allocation whose srun steps run the host commands
    slurm: slurm.Slurm | None = None  # its steps of this run (the fleet's)
    interrupts: int = 0  # Ctrl-C / SIGTERM received
    stopping: bool = False  # the checks are over (or interrupted): only cleanup is left
    base: dict | None = None  # --baseline's results.json
    tolerance: float | None = None  # --baseline-tolerance; else the profile's baseline:
    fleet: Fleet | None = None  # once the first check has started it (the fleet fixture)


STATE = pytest.StashKey[State]()


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hookspecs)


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
                help="leave these hosts out (after --hosts and --tags); results.json meta.excluded "
                     "names them")
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
    inv, inside = _narrowed(config, inv, where), set(nodes)
    outside = [h.name for h in inv.hosts if h.name not in inside]
    if outside:
        raise InputError(f"--inventory {path}: {hostlist.fold(outside)} not in Slurm job {job}'s nodes "
                         f"({hostlist.fold(nodes)})")
    return inv


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    try:
        _check_options(config)
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
    except InputError as exc:
        raise pytest.UsageError(str(exc)) from None
    state = State(inv, prof, arg, klass, run_id=new_run_id(), base=base, tolerance=tolerance,
                  job=slurm.allocation()[0] if launcher(config) == "slurm" else None)
    config.stash[STATE] = state
    if not _is_acceptance_run(config):
        return
    _refuse_xdist(config)
    # signoff's own section says every problem, grouped by cause (a fault on 300 hosts is one
    # line): pytest's traceback per failure and "FAILED ..." per check would be 300 lines more.
    # --tb and -r given on the command line still apply.
    if config.option.tbstyle == "auto":
        config.option.tbstyle = "no"
    if config.option.reportchars == "fE":  # pytest's default
        config.option.reportchars = ""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    rd = Path(config.getoption("report_dir") or paths.reports_dir() / stamp)
    try:
        _start_clean(rd)
        (rd / "hosts").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"--report-dir {rd}: cannot create it: {exc.strerror}") from None
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
        # set when this machine's probes run in signoff's own environment, not a training one
        **({"probe_env": inv.hosts[0].probe_env} if inv.hosts and inv.hosts[0].probe_env else {}),
        "run": state.run_id,
        "launcher": {"launcher": "slurm", "job": state.job} if state.job else {"launcher": "ssh"},
        "operator": report.operator(),
        "suite_version": report.suite_version(),
    })
    config.pluginmanager.register(Recorder(state, config), "signoff-recorder")
    # A scheduler's SIGTERM should clean the hosts up like Ctrl-C does.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _interrupt(state))


# What a run writes in its report directory; a reused --report-dir loses an earlier run's
# (never mixed into this one: its hosts/*.json would be read as this run's hosts)
RUN_FILES = ("results.json", "results.jsonl", "junit.xml", "report.html", "report.md")
RUN_DIRS = ("hosts", "soak")


def _start_clean(rd: Path) -> None:
    for name in RUN_FILES:
        (rd / name).unlink(missing_ok=True)
    for name in RUN_DIRS:
        shutil.rmtree(rd / name, ignore_errors=True)


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


def pytest_sessionstart(session):
    state = session.config.stash.get(STATE, None)
    if state and state.results and state.inventory.excluded:  # said, so no one takes them as checked
        state.results.set_meta(excluded=state.inventory.excluded)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if STATE in session.config.stash:
        session.config.stash[STATE].stopping = True  # teardown is cleanup: see _interrupt


SELECTED = pytest.StashKey[dict]()


def selected_hosts(session, tests: tuple[str, ...]) -> list[str]:
    """The hosts that have a selected check among the test functions named `tests` (-k may
    select a few): the hosts a family measures at once. Test names are unique in acceptance/
    (each is a criterion of the sign-off sheet)."""
    cache = session.stash.setdefault(SELECTED, {})  # each check asks: once per run, not per check
    if tests not in cache:
        names: dict[str, None] = {}
        for item in session.items:
            spec = getattr(item, "callspec", None)
            if spec and "host" in spec.params and spec.params["host"] not in names and \
                    getattr(item, "originalname", item.name) in tests:
                names[spec.params["host"]] = None
        cache[tests] = list(names)
    return cache[tests]


ROW = pytest.StashKey[Path]()  # the file whose row our lines broke: written again (Recorder)


class Terminal:
    """Lines on the terminal while the checks wait (capture suspended for them): say(line),
    and progress(line, final): one line updated in place on a terminal; on a non-tty (a log)
    a line every PROGRESS_EVERY_S at most, and the final one."""

    PROGRESS_EVERY_S = 5.0

    def __init__(self, config):
        self.config = config
        self.tr = config.pluginmanager.get_plugin("terminalreporter")
        self.capman = config.pluginmanager.get_plugin("capturemanager")
        self.open = False  # our progress line is the terminal's current line, unfinished
        self.width = 0  # the current line's width when we last wrote it
        self.last = 0.0

    def _quiet(self):
        return self.capman.global_and_fixture_disabled() if self.capman else contextlib.nullcontext()

    def _ours(self) -> bool:
        """Whether the current line is still our open progress line (nothing written since)."""
        return self.open and pytest_adapter.line_width(self.config) == self.width

    def _fresh_line(self) -> None:
        self.tr.ensure_newline()
        if pytest_adapter.line_width(self.config):  # pytest's dots (-q) or our open line
            self.tr.line("")

    def say(self, line: str) -> None:
        if self.tr is None:
            return
        with self._quiet():
            row = pytest_adapter.row(self.tr)  # the file whose results pytest is writing on this row
            self._fresh_line()
            self.open = False
            self.tr.write_line(line)
            if row is not None:  # its row again before pytest's next letter (Recorder)
                self.config.stash[ROW] = row

    def progress(self, line: str, final: bool) -> None:
        if self.tr is None:
            return
        if not self.tr.isatty():
            if final or time.monotonic() - self.last >= self.PROGRESS_EVERY_S:
                self.last = time.monotonic()
                self.say(line)
            return
        with self._quiet():
            if not self._ours():
                self._fresh_line()
            self.tr.rewrite(line, erase=True)
            if final:
                self.tr.line("")
            self.open, self.width = not final, pytest_adapter.line_width(self.config)


def parametrized(config) -> dict[str, list[tuple]]:
    """{fixture: [(value, id), ...]}: `host` (every inventory host), then the families' own."""
    inv = config.stash[STATE].inventory
    out = {"host": [(h.name, h.name) for h in inv.hosts]}
    for extra in config.hook.pytest_signoff_parametrize(config=config, inventory=inv):
        out.update(extra)
    return out


def pytest_generate_tests(metafunc):
    for fixture, cases in parametrized(metafunc.config).items():
        if fixture in metafunc.fixturenames:
            metafunc.parametrize(fixture, [v for v, _ in cases], ids=[i for _, i in cases],
                                 indirect=fixture == "host")


@dataclass
class HostView:
    """What a test sees of one host: its sysinfo facts and a run()/probe() on it."""
    name: str
    facts: dict
    session: HostSession

    def run(self, command: str, timeout: float = 60):
        return self.session.run(command, timeout)

    def probe(self, name: str, *args, **kw) -> dict:
        return self.session.probe(name, *args, **kw)

    def cached_probe(self, name: str, *args, **kw) -> dict:
        return self.session.cached_probe(name, *args, **kw)

    @property
    def gpus(self) -> list[dict]:
        return self.facts["nvidia"].get("gpus", []) if self.facts["nvidia"]["available"] else []

    @property
    def hardware(self) -> dict:
        g = self.gpus
        return {"gpu_model": g[0]["name"] if g else None, "gpu_count": len(g),
                "nvlink": any(x["nvlink"]["links"] for x in g)}

    @property
    def hidden_gpus(self) -> str | None:
        """Why GPUs on this host are invisible, when the PCI bus has some but NVML none."""
        nv = self.facts["nvidia"]
        pci = nv.get("pci_devices") or 0
        if self.gpus or not (pci or nv.get("driver_loaded")):
            return None
        if self.lacks_nvml:
            torch = " (and torch)" if "torch" in lacks(self.facts) else ""
            return (f"{pci} NVIDIA GPU(s) on the PCI bus, but the probes' interpreter "
                    f"{self.facts['python_executable']} lacks nvidia-ml-py{torch}, so NVML cannot be "
                    f"read: it is not the training environment; name that with --python PATH or the "
                    f"inventory's python: for {self.name}")
        return (f"{pci} NVIDIA GPU(s) on the PCI bus but NVML sees none "
                f"({nv.get('error') or 'no device'}; probe Python {self.facts['python_executable']})")

    @property
    def lacks_nvml(self) -> bool:
        """The probes' interpreter cannot import nvidia-ml-py (a wrong environment, not a fault)."""
        return "nvidia-ml-py" in lacks(self.facts)

    def __str__(self) -> str:
        return self.name


def _on_facts(state: State):
    def record(name: str, facts: dict):
        if state.report_dir:
            tmp = state.report_dir / "hosts" / f".{name}.json"
            tmp.write_text(json.dumps(facts, indent=1))
            os.replace(tmp, state.report_dir / "hosts" / f"{name}.json")
        if state.results:
            state.results.set_host(name, facts)
    return record


def _on_note(state: State):
    def record(section: str, name: str, what: list[str]):
        if state.results:
            state.results.set_live(section, name, what)
    return record


@pytest.fixture(scope="session")
def fleet(request, pytestconfig):
    state = pytestconfig.stash[STATE]
    job = state.slurm = slurm.Slurm(state.job, slurm.allocation()[1], state.run_id) if state.job else None
    f = Fleet(state.inventory, pytestconfig.getoption("accept_new_host_keys"),
              pytestconfig.getoption("connect_timeout"), pytestconfig.getoption("probe_timeout"),
              on_facts=_on_facts(state), on_note=_on_note(state), run=state.run_id,
              lock_wait=pytestconfig.getoption("lock_wait"),
              max_parallel=pytestconfig.getoption("max_parallel"), slurm=job)
    f.progress = Terminal(pytestconfig).progress
    for name in state.inventory.hosts if job else ():
        if name.name in job.dead:  # DOWN/DRAIN before the run: named in the report
            f.note("slurm", name.name, job.dead[name.name])
    f.start()
    state.fleet = f
    try:  # the hosts are cleaned also when the run stops here (no host answered, Ctrl-C)
        _stop_if_none_answered(request.session, state, f)
        yield f
    finally:
        state.stopping = True
        f.close()  # removes every per-run temp dir, also after failures and Ctrl-C; notes what not
        if job and state.results:
            state.results.set_meta(launcher=job.meta())


def _stop_if_none_answered(session, state: State, fleet: Fleet) -> None:
    """When no host answered at fleet start (DNS, refused, auth, timeout, its run lock, its
    sysinfo), nothing can be measured: the run ends here, with a line per cause, instead of
    every check taking its turn to say so (50 unresolvable hosts were 9,066 lines). Every
    selected check is recorded ERROR with its own host's cause (Recorder.stopped), and pytest
    stops (pytest.exit: sessionfinish still writes results.json, report.md and junit.xml)."""
    if not fleet.names or fleet.answered():  # the first host's answer: no waiting for a hung one
        return
    facts = fleet.all_facts()  # every one failed: their causes
    why = {n: str(e) for n, e in facts.items()}
    addresses = {h.name: h.address for h in state.inventory.hosts}
    lines = causes.cause_lines(why, addresses)
    recorder = session.config.pluginmanager.get_plugin("signoff-recorder")
    if recorder is not None:
        said = {}
        for item in session.items:
            spec = getattr(item, "callspec", None)
            params = spec.params if spec else {}
            mine = [params["host"]] if "host" in params else list(params.get("pair") or ())
            if len(mine) == 1 and mine[0] in why:
                said[item.nodeid] = why[mine[0]]
            else:  # a pair's two hosts, or every host for a cluster-wide check
                sub = {n: why[n] for n in mine if n in why}
                said[item.nodeid] = "no host answered: " + "; ".join(
                    causes.cause_lines(sub, addresses) if sub else lines)
        recorder.stopped(said)
    say = Terminal(session.config).say
    say(f"signoff: none of the {len(why)} hosts answered; the run stops, each check ERROR with its "
        f"host's cause:")
    for line in lines[:report.COVER_LINES]:
        say(f"  {line}")
    if len(lines) > report.COVER_LINES:
        say(f"  and {len(lines) - report.COVER_LINES} more causes: results.json")
    pytest.exit(f"no host answered: {len(why)} hosts, {len(lines)} "
                f"cause{'s' if len(lines) > 1 else ''}", returncode=pytest.ExitCode.TESTS_FAILED)


@pytest.fixture(scope="session")
def profile(pytestconfig, fleet) -> profiles.Profile:
    state = pytestconfig.stash[STATE]
    picking = state.profile is None
    prof = pick_profile(state, fleet)
    if picking:  # which variant (or class) the hosts' NVML picked, said before any check of it
        Terminal(pytestconfig).say(f"profile {state.pick}")
    return prof


def pick_profile(state: State, fleet: Fleet) -> profiles.Profile:
    """The run's profile: --profile's, or under auto the majority class of the hosts' sysinfo,
    under a class base its variant of the majority of its hosts (`signoff plan` asks the same vote)."""
    if state.profile is None:
        asked = f"--profile {state.profile_arg}"
        facts = fleet.all_facts()
        views = [HostView(n, f, None) for n, f in facts.items() if isinstance(f, dict)]
        # A host whose GPUs NVML cannot see is left out of the vote (a broken driver must not
        # make a GPU cluster look like a CPU one); its own checks say why (the gpus fixture).
        seen = [v.hardware for v in views if not v.hidden_gpus]
        if not seen:
            hidden = {v.name: v.hidden_gpus for v in views if v.hidden_gpus}
            if hidden:
                fix = "" if all(v.lacks_nvml for v in views if v.hidden_gpus) else "fix NVML or "
                raise InputError(f"{asked}: {causes.causes(hidden)}; {fix}pass --profile")
            why = {n: str(e) for n, e in facts.items() if isinstance(e, Exception)}
            raise InputError(f"{asked}: no host answered, so no hardware class to match: "
                             f"{causes.causes(why)}")
        if state.class_base is not None:
            state.profile, state.pick = profiles.pick_variant(
                state.class_base, {v.name: v.hardware for v in views if not v.hidden_gpus})
        else:
            # The majority's class picks the profile; an odd host then fails its class checks.
            key, _ = Counter(tuple(sorted(h.items())) for h in seen).most_common(1)[0]
            state.profile = profiles.auto_select(dict(key))
            state.pick = f"auto: picked {state.profile.name} from the hosts' NVML " \
                         f"({profiles.hardware_text(dict(key))})"
        if state.results:
            state.results.set_meta(profile=state.profile.name, profile_path=str(state.profile.path),
                                   profile_sha256=profiles.digest(state.profile),
                                   profile_class=state.profile.describe_class(), profile_pick=state.pick)
    return state.profile


@pytest.fixture
def host(request, fleet) -> HostView:
    name = request.param
    return HostView(name, fleet.facts(name), fleet.sessions[name])


@pytest.fixture
def attach(request):
    """attach(kind, content, name): a figure ('png', base64) or 'html' in this test's row
    of the HTML report; a no-op where pytest-html is not installed or not loaded (-p no:html)."""
    try:
        if not request.config.pluginmanager.hasplugin("html"):
            raise ImportError("pytest-html not loaded")
        from pytest_html import extras as kinds
        extras = request.getfixturevalue("extras")
    except (ImportError, pytest.FixtureLookupError):
        return lambda kind, content, name="": None

    def add(kind: str, content: str, name: str = ""):
        if kind == "html":  # html extras carry no name: title it inline
            extras.append(kinds.html(f"<div><b>{name}</b>{content}</div>"))
        else:
            extras.append(getattr(kinds, kind)(content, name=name))
    return add


@pytest.fixture
def check(request) -> Check:
    spec = getattr(request.node, "callspec", None)
    return Check(request.node, spec.id if spec else ALL)


def _status(rep, call) -> tuple[str, str]:
    if rep.passed:
        return "PASS", ""
    if rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reason = reason.removeprefix("Skipped: ")
        return ("N.A." if reason.startswith(NA_PREFIX) else "NOT RUN"), reason
    exc = call.excinfo
    # an explicit judgement (assert / pytest.fail), also from a fixture, is a FAIL
    if exc.errisinstance((AssertionError, pytest.fail.Exception)):
        return "FAIL", str(exc.value)
    return "ERROR", str(exc.value) if exc.errisinstance(OUR_ERRORS) else exc.exconly()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """A check of a host that did not answer at fleet start ERRORs with that host's own cause
    (DNS, refused, auth, its lock), whatever fixture failed first: pytest sets the session's
    fixtures up before the check's `host`, so a profile that --profile auto could not pick
    from the hosts that answered would otherwise speak for an unreachable host."""
    try:
        return (yield)
    except pytest.exit.Exception:  # an Exception too: the run stopping (no host answered)
        raise
    except Exception as exc:
        own = _own_cause(item)
        if own is None or own is exc:
            raise
        raise own from None


def _own_cause(item) -> Exception | None:
    """What the fleet's start raised for this check's host (None: it answered, or no host)."""
    state = item.config.stash.get(STATE, None)
    spec = getattr(item, "callspec", None)
    name = spec.params.get("host") if spec else None
    if state is None or state.fleet is None or name not in state.fleet.sessions:
        return None
    got = state.fleet.all_facts().get(name)
    return got if isinstance(got, Exception) else None


PHASES = pytest.StashKey[tuple]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    rep = (yield).get_result()
    status, message = _status(rep, call)
    exc = call.excinfo.value if call.excinfo is not None else None
    tries, stderr = getattr(exc, "attempts", None), getattr(exc, "stderr", None)
    if (tries or stderr) and not any(k == "signoff" for k, _ in item.user_properties):
        # what broke keeps the figures measured before it and its probe's own last words
        kept = ("signoff", {"measured": None, "expected": "", "unit": "", "source": "", "details": {
            **({"attempts": tries, "spread_pct": retry.spread_pct(tries)} if tries else {}),
            **({"stderr": stderr[-4000:]} if stderr else {})}})
        item.user_properties.append(kept)
        rep.user_properties.append(kept)
    if call.excinfo is not None and call.excinfo.errisinstance(OUR_ERRORS):
        rep.longrepr = message  # the cause, not a traceback through our plumbing
    # The worst phase is the check's status, stated once, on the teardown report: a status
    # per phase let JUnit consumers read the (passing) teardown's as the check's.
    prev = item.stash.get(PHASES, None)
    if prev is None or worse(prev[0], status) != prev[0]:
        if prev and prev[0] != "PASS":  # e.g. a FAIL, then a teardown ERROR: keep both reasons
            message = f"{message} (before that, {prev[0]}: {prev[1]})"
        item.stash[PHASES] = (status, message)
    if rep.when == "teardown":
        rep.user_properties.append(("signoff_status", list(item.stash[PHASES])))
        rep.signoff_status = item.stash[PHASES][0]  # pytest's letter, word and count (Recorder)


class Recorder:
    """Controller-side: turns reports into results.json records and report sections.
    Registered only on the controller (never on xdist workers) of an acceptance run."""

    def __init__(self, state: State, config):
        self.state, self.config = state, config
        self.selected: list[str] = []
        self.deselected = 0
        self.final: dict[str, str] = {}  # nodeid -> status, for the HTML rows
        self.local = {h.name: h.local for h in state.inventory.hosts}
        self.outcomes: dict[str, list] = {}  # pytest's own categories of the reports: see _lend
        self.summing = False  # pytest's closing sections are being written (pytest_report_teststatus)

    def launcher(self, host: str) -> str:
        """What ran this check's host commands (the report's methodology says it per check)."""
        if self.state.job:
            return "srun"
        return "local" if self.local.get(host, all(self.local.values())) else "ssh"

    def pytest_report_header(self, config):
        meta = self.state.results.doc["meta"]
        return [f"signoff: {report.probe_env_text(meta)}"] if meta.get("probe_env") else []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        """A check that raised our own error (a host's cause, a profile's gap) is reported with
        that message alone: pytest's traceback of it would show our plumbing, and costs a parse
        of the source per check (~50 ms: minutes on 1,000 hosts that ERROR alike)."""
        if call.excinfo is None or not call.excinfo.errisinstance(OUR_ERRORS):
            return None
        rep = pytest.TestReport.from_item_and_call(item, pytest.CallInfo.from_call(lambda: None, call.when))
        rep.outcome, rep.longrepr = "failed", str(call.excinfo.value)
        rep.duration, rep.start, rep.stop = call.duration, call.start, call.stop
        return rep

    # pytest's progress letter, -v word and closing count of a check, in signoff's statuses
    LETTERS = {"PASS": (".", "green"), "FAIL": ("F", "red"), "ERROR": ("E", "red"),
               "N.A.": ("-", "yellow"), "NOT RUN": ("n", "yellow")}

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report, config):
        """A check is counted once, on its teardown report, with its status (the worst phase's):
        pytest counts phases by its own outcomes, so an ERROR read "failed" (or "error" plus
        "passed"), N.A. and NOT RUN "skipped". Its -r lines (self.summing) name the status too."""
        if not isinstance(report, pytest.TestReport):
            return None
        if self.summing:
            status = self.final.get(report.nodeid)
            if status is None:  # a check cut short before its teardown: pytest's own word
                return None
        elif (status := getattr(report, "signoff_status", None)) is None:
            return "", "", ""  # setup and call: the teardown report speaks for the check
        letter, colour = self.LETTERS[status]
        return status, letter, (status, {colour: True})

    def pytest_deselected(self, items):
        self.deselected += len(items)

    def pytest_collection_finish(self, session):
        self.selected = [i.nodeid for i in session.items]
        self.state.results.select(self.selected)  # a rebuild after SIGKILL marks the rest NOT RUN

    def stopped(self, messages: dict[str, str]) -> None:
        """Checks that will not run because the run stops before them (no host answered):
        each recorded ERROR with why, its host's own cause, never NOT RUN without one."""
        for nid, message in messages.items():
            criterion, host = split_nodeid(nid)
            self.state.results.add({"test": nid, "criterion": criterion, "host": host, "status": "ERROR",
                                    "launcher": self.launcher(host), "message": message,
                                    "duration_s": 0.0})

    def partial(self, records: list[dict]) -> str | None:
        """Why this run is not the whole sign-off sheet, if it is not: every check of
        acceptance/ for every host it applies to must have been judged, whatever the flags."""
        cols = {f: [i for _, i in cases] for f, cases in parametrized(self.config).items()}
        judged = {(r["criterion"], r["host"]) for r in records}
        missing = [e for e in sheet.expected(ROOT / "acceptance", cols) if e not in judged]
        if not missing:
            return None
        self.state.results.set_meta(not_judged=[f"{c}[{h}]" for c, h in missing])
        checks = list(dict.fromkeys(c for c, _ in missing))
        return (f"{len(missing)} checks of the sign-off sheet not judged ("
                + ", ".join(checks[:8]) + (f" and {len(checks) - 8} more" if len(checks) > 8 else "")
                + ")" + (f"; {self.deselected} deselected" if self.deselected else ""))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        row = self.config.stash.get(ROW, None)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if row is not None and tr is not None and tr.verbosity <= 0:
            # our lines (a measuring phase's progress) broke pytest's row of letters: its file's
            # name again, so the next "." is not an orphan line (lines said together stay so)
            del self.config.stash[ROW]
            pytest_adapter.resume_row(tr, row)
        st, nid = self.state, report.nodeid
        kind = (("error" if report.failed else "skipped" if report.skipped else "")
                if report.when in ("setup", "teardown") else report.outcome)  # as _pytest.runner's
        if kind:
            self.outcomes.setdefault(kind, []).append(report)
        st.duration[nid] = st.duration.get(nid, 0.0) + (report.duration or 0.0)
        for key, val in report.user_properties:
            if key == "signoff_status":
                st.status[nid], st.messages[nid] = val
            elif key == "signoff":
                st.measured[nid] = val
        if report.when == "teardown":
            criterion, host = split_nodeid(nid)
            self.final[nid] = st.status.pop(nid, "NOT RUN")
            st.results.add({"test": nid, "criterion": criterion, "host": host,
                            "status": self.final[nid], "launcher": self.launcher(host),
                            "message": st.messages.pop(nid, ""),
                            "duration_s": round(st.duration.pop(nid), 3),
                            **st.measured.pop(nid, {})})

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        st = self.state
        for f in sorted((st.report_dir / "hosts").glob("*.json")):  # facts from xdist workers
            if f.stem not in st.results.doc["hosts"]:
                st.results.set_host(f.stem, json.loads(f.read_text()))
        if st.slurm:  # on Ctrl-C before the fleet's teardown: the steps so far
            st.results.set_meta(launcher=st.slurm.meta())
        # a crashed worker or a second Ctrl-C: never silently absent
        for rec in not_reported(st.results.doc["results"], self.selected,
                                "the check did not report a result"):
            st.results.add(rec)
        if st.base is not None:
            where = report.shown_path(Path(self.config.getoption("baseline")).resolve().parent)
            name = f"run {(st.base.get('meta') or {}).get('run')} ({where})"
            tol = baseline.tolerances(st.tolerance, st.profile)
            st.results.set_meta(baseline=baseline.compare(st.results.doc, st.base, tol, name))
        # a crash (pytest's internal error) is no more a sign-off than a Ctrl-C
        cut = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        st.results.finish(interrupted=cut or st.interrupts > 0,
                          partial=self.partial(st.results.doc["results"]),
                          allow_partial=self.config.getoption("partial"),
                          fail_on_regression=self.config.getoption("fail_on_regression"),
                          usage_error=exitstatus == pytest.ExitCode.USAGE_ERROR)  # e.g. a bad -k
        junit.write(st.report_dir / "junit.xml", st.results.doc)
        (st.report_dir / "report.md").write_text(report.markdown(st.results.doc))
        # the exit code is the verdict's (README: Exit codes), the one results.json and junit.xml
        # state: pytest's own says 1 for an ERROR, 0 for a run of N.A. checks, 2 for a Ctrl-C
        session.exitstatus = st.results.doc["meta"]["exit_code"]

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config):
        # --junitxml PATH: ours replaces pytest's (written before), so both files agree.
        if config.option.xmlpath:
            junit.write(Path(config.option.xmlpath), self.state.results.doc)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells):
        cells.insert(1, "<th>Status</th>")
        if cells and "Links" in str(cells[-1]):  # no check attaches a link: an empty column
            cells.pop()

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report, cells):
        # Our status (ERROR, N.A., NOT RUN) in a column of its own: pytest-html's result column
        # (hidden, report.HIDE_PYTEST) must keep pytest's outcome, which its row filter reads: a
        # row whose outcome it does not know is never shown.
        status = self.final.get(report.nodeid, "")
        if status in FOLDED and self.folded():  # in the summary's counts and distributions
            del cells[:]  # pytest-html leaves out a row without cells
        elif cells:
            cells.insert(1, f'<td class="col-signoff {report_status_class(status)}">{status}</td>')
            if "col-links" in str(cells[-1]):
                cells.pop()

    def folded(self) -> bool:
        """Whether PASS and N.A. rows are left out of the HTML table: a run of more hosts than
        the report's host matrix shows (each row ~0.7 KB: 1,000 hosts x the sheet ~34 MB)."""
        return len(self.state.inventory.hosts) > report.MATRIX_MAX_HOSTS

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_html(self, report, data):
        # A skip's log is pytest's (path, line, reason) tuple: the reason is what a reader needs.
        if report.skipped and isinstance(report.longrepr, tuple):
            data[:] = [escape(report.longrepr[2].removeprefix("Skipped: "))]

    @pytest.hookimpl(optionalhook=True)
    def pytest_metadata(self, metadata, config):
        metadata.clear()  # pytest-html's environment table: the controller's plugins, no one's business

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix, summary, postfix, session):
        doc, prof, hook = self.state.results.doc, self.state.profile, self.config.hook
        # pluggy calls the last registered first: reversed, the families' own order
        sections = hook.pytest_signoff_report_sections(doc=doc, profile=prof)[::-1]
        methods = hook.pytest_signoff_methodology(doc=doc, profile=prof)[::-1]
        prefix.extend([report.cover(doc["verdict"] or "INCOMPLETE", doc), report.HIDE_PYTEST,
                       report.summary_table(doc["results"]),
                       report.folded_note(doc["results"]) if self.folded() else "",
                       report.notes_section(doc), report.retried_section(doc["results"]),
                       *(f"<div class='so-section'>{s}</div>" for s in sections if s),
                       report.methodology(doc, prof, methods),
                       report.inventory_section(doc)])

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report):
        report.title = "GPU cluster sign-off"

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        with self._lend(terminalreporter):
            res = yield  # pytest's --tb sections and -r lines, other plugins' summaries
        self.section(terminalreporter)  # last: right above pytest's closing counts
        return res

    @contextlib.contextmanager
    def _lend(self, tr):
        """pytest's --tb sections and -r lines read its own categories (failed, error, skipped,
        passed), left empty by pytest_report_teststatus: lent to them while they are written, so
        --tb and -r given on the command line still work; the closing counts are signoff's."""
        saved = {k: tr.stats.get(k) for k in self.outcomes}
        for k, reps in self.outcomes.items():
            tr.stats[k] = [*(saved[k] or []), *reps]
        self.summing = True
        try:
            yield
        finally:
            self.summing = False
            for k, was in saved.items():
                if was is None:
                    tr.stats.pop(k, None)
                else:
                    tr.stats[k] = was
            for s in STATUSES:  # the closing counts in this order, not in the order first seen
                if s in tr.stats:
                    tr.stats[s] = tr.stats.pop(s)

    def section(self, tr) -> None:
        doc = self.state.results.doc
        meta = doc["meta"]
        tr.section("signoff")
        counts = Counter(r["status"] for r in doc["results"])
        tr.write_line(f"verdict: {verdict_text(doc['verdict'])}  (profile {doc['meta'].get('profile')}; "
                      + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")")
        if meta.get("profile_pick"):
            tr.write_line(f"  profile {meta['profile_pick']}")
        if doc["meta"].get("probe_env"):
            tr.write_line(f"  {report.probe_env_text(doc['meta'])}", yellow=True)
        if meta.get("partial"):
            tr.write_line(f"  {report.partial_text(meta)}", yellow=True)
        # one line per status, checks and cause, hosts folded: as the cover (a fault on 300
        # hosts is one line, not 300); the rest in report.md
        groups = report.problem_groups(doc["results"])
        for g in groups[:report.COVER_LINES]:
            who, what, cause = report.problem_line(g)
            tr.write_line(f"  {g['status']:5} {g['criterion']} on {who}: {what}"
                          + (f"; likely cause: {cause}" if cause else ""))
        if len(groups) > report.COVER_LINES:
            tr.write_line(f"  and {len(groups) - report.COVER_LINES} more: {self.state.report_dir}/report.md")
        self.regressions(tr, doc)
        for line in report.host_notes(doc):
            tr.write_line(f"  {line}", yellow=True)
        for line in report.note_lines(doc["results"]):  # what a verdict stands on (Check.note)
            tr.write_line(f"  note: {line}")
        tr.write_line(f"exit code {meta.get('exit_code')}: {meta.get('exit_reason')}",
                      **({"green": True} if meta.get("exit_code") == 0 else {"red": True}))
        html = getattr(self.config.option, "htmlpath", None)  # none: pytest-html not loaded
        tr.write_line((f"report: {html}  " if html else "")
                      + f"results: {self.state.report_dir}/results.json")

    def regressions(self, tr, doc: dict) -> None:
        """--baseline in the terminal: the regressions, worst first (the rest in report.md), the
        baseline's warnings (another class, profile, suite version, an incomplete run), the hosts
        that came or went, and whether they fail the run (--fail-on-regression)."""
        base = doc["meta"].get("baseline")
        if not base:
            return
        regs = base.get("regressions") or []
        tr.write_line(f"compared with {base.get('name')} ({report.tolerance_text(base)}): "
                      + (f"{len(regs)} regression{'s' * (len(regs) != 1)}" if regs else "no regression"))
        for x in regs[:report.COVER_LINES]:
            tr.write_line(f"  REGRESSED {x['criterion']} on {x['host']}: {report.regression_text(x)}")
        if len(regs) > report.COVER_LINES:
            tr.write_line(f"  and {len(regs) - report.COVER_LINES} more: {self.state.report_dir}/report.md")
        for line in report.baseline_notes(base):
            tr.write_line(f"  {line}", yellow=True)
        for kind in ("appeared", "vanished"):
            if base.get(kind):
                tr.write_line(f"  hosts {kind} since the baseline: {report.hosts_text(base[kind])}")
        if report.failed_on_regression(doc):
            tr.write_line(f"  {report.failed_on_regression(doc)}", red=True)
