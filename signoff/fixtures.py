"""The checks' fixtures: host parametrisation, the fleet (every host measured at once), the
profile (picked from the hosts' NVML under auto or a class base), host, attach, check."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

import pytest

from signoff import InputError, causes, hostlist, preflight, profiles, render, report, safefile, slurm
from signoff.check import Check
from signoff.fleet import Fleet, HostSession, lacks
from signoff.results import ALL, split_nodeid
from signoff.state import STATE, State
from signoff.terminal import Terminal

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



def measurer(request, fleet, profile, measures: dict):
    """The families' measuring fixtures (interconnect's `measure`, training's `training`):
    get(what, host, every=()) is the host's document of measures[what] = (family, tests, probe),
    measured at once on every host with a selected check among `tests` and on `every` (a
    cluster-wide check's hosts: test_multinode_allreduce's node_bound rule asks each node's own
    all-reduce; one host at a time, 1,000 hosts would cost 1,000 all-reduces end to end)."""
    def get(what: str, host, every=()) -> dict:
        family, tests, probe = measures[what]
        return fleet.measured(family, host if isinstance(host, str) else host.name,
                              lambda n: probe(HostView(n, fleet.facts(n), fleet.sessions[n]), profile),
                              [*selected_hosts(request.session, tests), *every])
    return get


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
        """What the vote picks the class by (hashable values). `rented`: the form's kinds say VM or
        container (None: no form read); `pci_gpus`: NVIDIA GPUs on the PCI bus, None in a container
        (its sysfs is the host's whole bus): fewer GPUs than a class is a slice only when rented
        and no GPU on the bus is missing from NVML (signoff/picking.py)."""
        g = self.gpus
        form = (self.facts.get("preflight") or {}).get("form")
        kinds = form.get("kinds") if isinstance(form, dict) else None
        kinds = kinds if isinstance(kinds, list) else None
        pci = self.facts["nvidia"].get("pci_devices")
        # the PCI device id tells the class where NVML gives a generic name (profiles.GENERIC_NAMES)
        return {"gpu_model": g[0]["name"] if g else None, "gpu_count": len(g),
                "nvlink": any(x["nvlink"]["links"] for x in g),
                "pci_device_id": g[0].get("pci_device_id") if g else None,
                "rented": None if kinds is None else bool({"vm", "container"} & set(kinds)),
                "pci_gpus": pci if isinstance(pci, int) and "container" not in (kinds or ()) else None}

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
            safefile.write(state.report_dir / "hosts" / f"{name}.json", json.dumps(facts, indent=1))
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
              max_parallel=pytestconfig.getoption("max_parallel"), slurm=job,
              storage_path=pytestconfig.getoption("storage_path"))
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


# How long the run's preflight lines wait for the hosts' sysinfo (a GPU host's takes seconds):
# a host slower than that is left out of them, never waited for (its checks say why).
PREFLIGHT_WAIT_S = 10


@pytest.fixture(scope="session")
def profile(request, pytestconfig, fleet) -> profiles.Profile:
    state = pytestconfig.stash[STATE]
    picking = state.profile is None
    prof = pick_profile(state, fleet)
    say = Terminal(pytestconfig).say
    if picking:  # which variant (or class) the hosts' NVML picked, said before any check of it
        say(f"profile {state.pick}")
    # what each host will give the checks, and which will ERROR or be N.A. for it (signoff plan's)
    picked = {split_nodeid(i.nodeid)[0] for i in request.session.items}
    answers = fleet.answers(PREFLIGHT_WAIT_S)
    for line in preflight.lines(pytestconfig, state.inventory, answers, prof, picked):
        say(line)
    if len(answers) < len(fleet.names):
        say(f"  not answered within {PREFLIGHT_WAIT_S} s: "
            f"{hostlist.fold([n for n in fleet.names if n not in answers])} (their checks say why)")
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
    of the HTML report; a no-op where pytest-html is not installed or not loaded (-p no:html).
    'html' content is a fragment rendered from a template (signoff.render: a table, a list, text in
    <pre>); a plain str is shown as text, never markup."""
    try:
        if not request.config.pluginmanager.hasplugin("html"):
            raise ImportError("pytest-html not loaded")
        from pytest_html import extras as kinds
        extras = request.getfixturevalue("extras")
    except (ImportError, pytest.FixtureLookupError):
        return lambda kind, content, name="": None

    def add(kind: str, content: str, name: str = ""):
        if kind == "html":  # html extras carry no name: title it inline (xdist sends a plain str)
            extras.append(kinds.html(str(render.extra(name, content))))
        else:
            extras.append(getattr(kinds, kind)(content, name=name))
    return add


@pytest.fixture
def check(request) -> Check:
    spec = getattr(request.node, "callspec", None)
    state = request.config.stash.get(STATE, None)
    return Check(request.node, spec.id if spec else ALL, state.rerun if state else None)


