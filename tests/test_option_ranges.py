"""The families' options judged before any host (issue 24): each range with the flag's name,
through the pytest_signoff_check_options hooks as the core calls them (an InputError there is
a usage error, exit 4), and --help says each default."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

from signoff import InputError, profiles
from signoff.network import plugin as network_plugin
from signoff.soak import judge as soak
from signoff.soak import plugin as soak_plugin
from signoff.storage import plugin as storage_plugin


class Options:
    """What the families' addoption hooks declare, their defaults as config.getoption gives them."""

    def __init__(self):
        self.declared = {}

    def getgroup(self, name):
        return self

    def addoption(self, flag, **attrs):
        self.declared[flag] = attrs


def declared() -> dict:
    opts = Options()
    for mod in (network_plugin, soak_plugin, storage_plugin):
        mod.pytest_addoption(opts)
    return opts.declared


def check(pytestconfig, profile=None, **given):
    """Every family's hook, as registered with this pytest (the core's call), on the defaults
    with `given` (dest names) instead."""
    defaults = {f.lstrip("-").replace("-", "_"): a.get("default") for f, a in declared().items()}
    mine = {**defaults, **given}
    def getoption(d, *default):
        return mine[d] if d in mine else pytestconfig.getoption(d, *default)
    config = SimpleNamespace(getoption=getoption, stash=pytest.Stash())  # a family keeps what it read there
    inventory = SimpleNamespace(hosts=[SimpleNamespace(name="node1")])
    pytestconfig.hook.pytest_signoff_check_options(config=config, inventory=inventory, profile=profile)


def test_defaults_pass(pytestconfig):
    check(pytestconfig)
    check(pytestconfig, profile=profiles.load("h200-8x-nvlink@1"))


@pytest.mark.parametrize("text, why", [
    ("5", "--soak-duration 5 s: expected 10 s..48 h"),
    ("9.5s", "--soak-duration 9.5 s: expected 10 s..48 h"),
    ("100h", "--soak-duration 100 h: expected 10 s..48 h"),
    ("48h1s", "--soak-duration 172801 s: expected 10 s..48 h"),
])
def test_a_soak_duration_out_of_range_is_refused_at_start(pytestconfig, text, why):
    """It ERRORed every soak check after the other families ran, blaming the profile."""
    with pytest.raises(InputError, match=f"^{why}$"):
        check(pytestconfig, soak_duration=soak.duration_arg(text))


@pytest.mark.parametrize("text", ["10s", "48h", "1h30m"])
def test_a_soak_duration_in_range_passes(pytestconfig, text):
    check(pytestconfig, soak_duration=soak.duration_arg(text))
    check(pytestconfig, profile=profiles.load("h200-8x-nvlink@4"), soak_duration=soak.duration_arg(text))


def test_a_soak_duration_the_profiles_sampling_cannot_fill_names_both(pytestconfig, tmp_path):
    p = tmp_path / "slow.yaml"
    p.write_text(textwrap.dedent("""
        extends: local
        soak: {interval: 5s}
    """))
    with pytest.raises(InputError, match=r"^--soak-duration 30 s with profile slow's soak: interval: 5 s "
                                         r"must be .* at most a tenth of the duration"):
        check(pytestconfig, profile=profiles.load(str(p)), soak_duration=30.0)
    check(pytestconfig, profile=profiles.load(str(p)), soak_duration=60.0)


@pytest.mark.parametrize("given, why", [
    ({"net_port": 80}, "--net-port 80: expected 1024-65533"),
    ({"net_port": 65534}, "--net-port 65534: expected 1024-65533"),
    ({"collective_timeout": 0}, "--collective-timeout 0: expected seconds > 0"),
    ({"net_pairs_max": -1}, "--net-pairs-max -1: expected a number of pairs >= 0"),
    ({"storage_min_free": "lots"}, "--storage-min-free"),
])
def test_other_numeric_options_name_their_flag(pytestconfig, given, why):
    with pytest.raises(InputError, match=f"^{why}"):
        check(pytestconfig, **given)


def test_help_says_every_family_options_default():
    """--net-port and --collective-timeout said none; the default said is the one applied."""
    for flag, attrs in declared().items():
        if attrs.get("action") == "store_true":
            continue
        default = attrs["default"]
        said = {None: "default", "10%": "default 10%%"}.get(default, f"default {default}")
        assert said in attrs["help"], (flag, attrs["help"])
    assert "default: the profile's, else 5 min" in declared()["--soak-duration"]["help"]
