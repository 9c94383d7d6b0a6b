"""The intent family's option (--intent FILE; else the inventory's intent: key), the file read and
checked before any host is touched, and the findings over every host, once (results.json's
meta.intent: the cover's "Against the intended build")."""

from __future__ import annotations

import os

import pytest

from signoff import InputError, rerun
from signoff.intent import judge, spec
from signoff.state import STATE

INTENT = pytest.StashKey[object]()


def pytest_addoption(parser):
    parser.getgroup("signoff").addoption(
        "--intent", default=None, metavar="FILE",
        help="the intended build (YAML: versions or ranges, firmware per model, kernel parameters, GPUs, "
             "NICs, BAR1, cabling): every host judged against it, one finding per fault with its fix "
             "(wins over the inventory's intent:; docs/running.md, The intended build)")


@pytest.hookimpl
def pytest_signoff_check_options(config, inventory, profile):
    arg = config.getoption("intent")
    if arg is not None and not arg.strip():
        raise InputError("--intent is empty (an unset variable?): name the intent file or leave --intent out")
    path = arg or getattr(inventory, "intent", None) or _earlier(config)
    names = {h.name for h in inventory.hosts} | set(getattr(inventory, "excluded", ()))
    config.stash[INTENT] = spec.load(path, names) if path else None


def _earlier(config) -> str | None:
    """A rerun (--rerun DIR, --lf) of a run judged against an intent file is judged against it
    again: without it, the intent checks that FAILed would come back N.A. and the verdict PASS."""
    again = rerun.of(config, False)
    then = ((again or {}).get("earlier") or {}).get("meta") or {}
    path = (then.get("intent") or {}).get("file") if isinstance(then.get("intent"), dict) else None
    if path and not os.path.isfile(path):
        raise InputError(f"--rerun {again['dir']}: run {again['run']} was judged against intent file {path}, "
                         f"which is not here: name it with --intent")
    return path


@pytest.fixture(scope="session")
def intent(pytestconfig) -> spec.Intent | None:
    return pytestconfig.stash.get(INTENT, None)


@pytest.fixture(scope="session")
def intent_findings(pytestconfig, fleet, intent):
    """Every host's differences correlated once: one finding per physical fault (results.json's
    meta.intent, which the cover lists)."""
    def compute():
        found = judge.findings(intent, fleet.all_facts())
        state = pytestconfig.stash.get(STATE, None)
        if state is not None and state.results is not None:
            state.results.set_meta(intent={**intent.meta(), "findings": found})
        return found
    return fleet.once("intent findings", compute) if intent is not None else []


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    meta = (doc.get("meta") or {}).get("intent")
    if not meta:
        return []
    return [{"check": "intent_versions, intent_firmware, intent_kernel, intent_hardware, intent_cabling",
             "tool": f"intent file {meta['file']} (sha256 {meta['sha256'][:12]})",
             "how": "each host's sysinfo (NVML: driver, CUDA, VBIOS, BAR1, GPUs; torch and its NCCL; the "
                    "NICs' firmware and models (sysfs, lspci); /proc/cmdline; nvidia_uvm's parameters; "
                    "lldpctl where it runs) compared with the file: exact values, or ranges as PEP 440 "
                    "specifiers (packaging); one finding per fault, its hosts folded"}]
