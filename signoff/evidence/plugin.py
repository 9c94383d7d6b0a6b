"""--evidence and its hooks: the hosts picked and collected from at the last check's teardown (the
measurements are over, the fleet and its run locks still open: the fleet closes in that teardown,
right after), meta.evidence set before the run's reports are written (the cover and report.md name
each host's archive), the folders and archives written after them and before the manifest
(plugin.py's pytest_unconfigure: the manifest lists them)."""

from __future__ import annotations

import sys

import pytest

from signoff import InputError, hostlist, recorder
from signoff.evidence import BUDGET_MB, BUDGET_S, MODES, collect
from signoff.printable import printable
from signoff.state import STATE

KEY = pytest.StashKey[dict]()


def pytest_addoption(parser):
    g = parser.getgroup("signoff")
    g.addoption("--evidence", choices=MODES, default="failed",
                help="what to keep per host for the provider's RMA, in the report dir's evidence/<host>/ "
                     "and evidence/<host>.tar.gz: failed (default: every host exclude.hostlist names, "
                     "collected from once after the measurements), all (every host), none")
    g.addoption("--evidence-budget", type=float, default=BUDGET_S, metavar="SECONDS",
                help=f"the time a host's collection after the run may take (nvidia-smi -q, lspci -vvv, "
                     f"the kernel log, nvidia-bug-report.sh; a piece past it is skipped, said; "
                     f"default {BUDGET_S:g})")
    g.addoption("--evidence-max-mb", type=float, default=BUDGET_MB, metavar="MB",
                help=f"the bytes a host's collection may bring back, MB (a piece past it is cut or "
                     f"skipped, said; default {BUDGET_MB:g})")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    for opt in ("evidence_budget", "evidence_max_mb"):
        v = config.getoption(opt)
        if not v > 0 or v != v:
            raise InputError(f"--{opt.replace('_', '-')} {v}: expected a number > 0")


def budget(config) -> dict:
    return {"mode": config.getoption("evidence"), "seconds": config.getoption("evidence_budget"),
            "bytes": int(config.getoption("evidence_max_mb") * 10 ** 6)}


def _state(config):
    state = config.stash.get(STATE, None)
    if state is None or state.report_dir is None or state.results is None:
        return None
    return state


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """Before the last check's teardown (which closes the fleet): the hosts' fresh evidence."""
    if nextitem is None:
        try:
            _collect(item.config, item)
        except Exception as exc:  # noqa: BLE001 - evidence never costs the verdict or the cleanup
            item.config.stash.setdefault(KEY, {})["error"] = f"{type(exc).__name__}: {exc}"
    return (yield)


def _collect(config, item) -> None:
    state = _state(config)
    b = budget(config)
    if state is None or b["mode"] == "none" or state.fleet is None or state.stopping:
        return
    doc = collect.with_records(state.results.doc, _pending(item))
    hosts = collect.hosts_for(doc, b["mode"])
    store = config.stash.setdefault(KEY, {})
    if not hosts:
        return
    progress = state.fleet.progress or (lambda line, final: None)
    progress(f"evidence: collecting from {hostlist.fold(hosts)} (at most {b['seconds']:g} s, "
             f"{b['bytes'] // 10 ** 6} MB a host)", True)
    store["fresh"] = collect.fresh(state.fleet, hosts, b["seconds"], b["bytes"])


def _pending(item) -> list[dict]:
    """The last check's record as the recorder will add it after this teardown: its worst phase so
    far (recorder.PHASES) and what it measured (its "signoff" user property)."""
    phases = item.stash.get(recorder.PHASES, None)
    if phases is None:
        return []
    measured = next((v for k, v in reversed(item.user_properties) if k == "signoff"), None)
    return [collect.record(item.nodeid, phases[0], phases[1], measured if isinstance(measured, dict) else {})]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """meta.evidence before the reports (the cover names each archive); the files after them."""
    config = session.config
    state = _state(config)
    b = budget(config)
    if state is None or b["mode"] == "none":
        return (yield)
    hosts = collect.hosts_for(state.results.doc, b["mode"])
    config.stash.setdefault(KEY, {})["announced"] = hosts
    if hosts:
        state.results.set_meta(evidence=collect.meta(collect.planned(hosts), b["mode"], b))
    try:
        return (yield)
    finally:
        _write(config, state, b)


def _write(config, state, b: dict) -> None:
    store = config.stash.get(KEY, {})
    doc = state.results.doc
    hosts = list(dict.fromkeys([*store.get("announced", []), *collect.hosts_for(doc, b["mode"])]))
    if not hosts:
        return
    recs = collect.records_by_host(doc, hosts)
    why = collect.why_by_host(doc, hosts, b["mode"])
    fresh = store.get("fresh") or {}
    fleet = state.fleet
    written = {}
    for h in hosts:
        got = fresh.get(h) or (
            f"not collected: {store['error']}" if store.get("error") else
            "not collected: the run was interrupted before its last check"
            if doc["meta"].get("interrupted") else
            "not collected: the host's fault was known only after the hosts were released")
        held = fleet.documents(h) if fleet is not None else {}
        windows = {k: v[h] for k, v in (fleet.windows if fleet is not None else {}).items() if h in v}
        try:
            written[h] = collect.write_host(state.report_dir, doc, h, recs[h], why[h], got, held, windows, b)
        except Exception as exc:  # noqa: BLE001 - one host's evidence costs neither the others nor the verdict
            written[h] = {"error": f"{type(exc).__name__}: {exc}"}
            _failed(config, f"evidence of {h} could not be written: {type(exc).__name__}: {exc}")
    # what was written, each fresh piece's status
    state.results.set_meta(evidence=collect.meta(written, b["mode"], b))
    try:
        state.results.write()  # results.json names what was written (the manifest then covers it)
    except OSError as exc:
        _failed(config, f"results.json could not be written again: {exc}")


def _failed(config, line: str) -> None:
    rec = config.pluginmanager.get_plugin("signoff-recorder")
    if rec is not None:
        rec.failed(line)
    else:
        sys.stderr.write(printable(line) + "\n")
