"""The soak family's option and its measuring fixture: every soaked host's load started at
once, streamed, then waited for by each check."""

from __future__ import annotations

import pytest

from signoff import InputError
from signoff.check import class_guard
from signoff.fixtures import HostView, selected_hosts
from signoff.fleet import ProbeError
from signoff.profiles import matches
from signoff.soak import CRITERIA, report
from signoff.soak import judge as soak
from signoff.soak.run import SoakRunner
from signoff.state import STATE
from signoff.terminal import Terminal

# acceptance/test_soak.py: one test per criterion; test_health.py's thermal margin judges the soak too
TESTS = tuple(f"test_{c}" for c in CRITERIA) + ("test_thermal_margin",)


def pytest_addoption(parser):
    parser.getgroup("signoff").addoption(
        "--soak-duration", type=soak.duration_arg, default=None,
        help=f"sustained-load time instead of the profile's soak.duration (90s, 10m, 24h; "
             f"{soak.human_duration(soak.MIN_DURATION)}..{soak.human_duration(soak.MAX_DURATION)}; "
             f"default: the profile's, else {soak.human_duration(soak.SOAK_DEFAULTS['duration'])})")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    """--soak-duration judged before any host: its range, and with a named profile the soak it
    makes with that profile's warm-up and sampling interval (auto: judged once the profile is)."""
    duration = config.getoption("soak_duration")
    if duration is None:
        return
    flag = f"--soak-duration {soak.human_duration(duration)}"
    if not soak.MIN_DURATION <= duration <= soak.MAX_DURATION:
        raise InputError(f"{flag}: expected {soak.human_duration(soak.MIN_DURATION)}.."
                         f"{soak.human_duration(soak.MAX_DURATION)}")
    if profile is not None:
        try:
            soak.plan(profile.section("soak"), duration)
        except ValueError as exc:
            raise InputError(f"{flag} with profile {profile.name}'s soak: {exc}") from None


@pytest.fixture(scope="session")
def soak_run(request, fleet, profile):
    """Every soaked host's soak, all started at the first soak test, in parallel."""
    config = request.config
    try:
        plan = soak.plan(profile.section("soak"), config.getoption("soak_duration"))
    except ValueError as exc:
        given = config.getoption("soak_duration")  # --profile auto: judged here, the flag named
        flag = f" with --soak-duration {soak.human_duration(given)}" if given is not None else ""
        raise InputError(f"profile {profile.name} soak.{exc}{flag}") from None
    state = config.stash[STATE]
    runner = SoakRunner(fleet, plan, state.report_dir, state.results,
                        startup_s=config.getoption("probe_timeout"))
    runner.say = Terminal(config).say
    facts = fleet.all_facts()
    views = [HostView(n, facts[n], None) for n in selected_hosts(request.session, TESTS)
             if isinstance(facts.get(n), dict)]
    # a host that fails the class guard is not soaked (its tests are NOT RUN, naming the guard)
    runner.profile = profile
    fleet.settle()  # the per-host measurements have ended: they would distort the soak
    runner.start([v.name for v in views if v.gpus and not matches(profile, v.hardware)])
    if plan["notes"]:
        runner.say("soak: " + "; ".join(plan["notes"]))
    if runner.hosts:
        runner.say(f"soak: {soak.human_duration(plan['duration'])} of bf16 GEMM on "
                   f"{', '.join(runner.hosts)} (NVML sampled every {plan['interval']:g} s)")
    yield runner
    runner.close()


def soaked(host, soak_run):
    class_guard(soak_run.profile, [host], "soaked")
    if host.name not in soak_run.hosts:
        raise ProbeError(f"{host}: no soak was started on this host")
    every = max(10.0, min(60.0, soak_run.plan["duration"] / 20))
    hs = soak_run.wait(host.name, progress=soak_run.say, every=every)
    if hs.error:
        raise ProbeError(f"{host}: soak probe: {hs.error}")
    if hs.series is None or len(hs.series) < 2:
        raise ProbeError(f"{host}: the soak probe sent no samples")
    plan = soak_run.plan
    span = hs.series.t[-1] - hs.series.t[0]
    if span < plan["duration"] - 2 * plan["interval"] - 1:  # the last sample lands an interval early
        raise ProbeError(f"{host}: the soak's samples span {span:.0f} s of the planned "
                         f"{plan['duration']:g} s: it ended early, so the load was not sustained "
                         f"and cannot be judged")
    seen = len(hs.header.get("gpus") or [])
    if seen != len(host.gpus):  # judged on fewer GPUs, a judgement could pass having measured none
        raise ProbeError(f"{host}: the soak probe's NVML saw {seen} GPU(s) where sysinfo reports "
                         f"{len(host.gpus)}: the soak did not load and sample every GPU")
    return hs


@pytest.hookimpl
def pytest_signoff_report_sections(doc, profile):
    return report.soak_section(doc, profile)


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    return report.methodology(doc)
