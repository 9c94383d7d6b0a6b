"""--rerun DIR completes its run (issue 45 item 4): it takes the earlier run's hosts and profile
unless told otherwise (signoff/rerun.py defaults(), through the plugin's own parse of the options:
signoff/cli.py configured(), no host contacted), and its verdict is the whole sheet's (carry()).
The whole flow on lab hosts: tests/test_lab_acceptance.py, test_calibrated_from_two_golden_runs_..."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from signoff import InputError, cli, rerun
from signoff.results import ALL

ROOT = Path(__file__).resolve().parent.parent
H200 = str(ROOT / "thresholds" / "h200-8x-nvlink.yaml")


def earlier(tmp_path: Path, **meta) -> Path:
    """An earlier run's report directory: node02's version_parity FAILed."""
    d = tmp_path / "earlier"
    d.mkdir()
    (d / "results.json").write_text(json.dumps({"verdict": "FAIL", "meta": {"run": "r1", **meta}, "results": [
        {"test": "acceptance/test_versions.py::test_version_parity[node02]", "criterion": "version_parity",
         "host": "node02", "status": "FAIL"}]}))
    return d


def configured(*argv) -> tuple[list[str], str, str]:
    """(the hosts, where they came from, the profile) as the plugin takes them from argv."""
    return cli.configured(list(argv), lambda config, state: (
        [h.name for h in state.inventory.hosts], state.inventory.source, config.getoption("profile")))


def test_the_earlier_runs_hosts_and_profile_unless_told_otherwise(tmp_path):
    d = earlier(tmp_path, hosts=["node01", "node02", "node03"],
                inventory="--hosts node[01-04]: --exclude-hosts node04", profile="h200-8x-nvlink",
                profile_requested="h200-8x-nvlink", profile_path=H200,
                probe_python={f"node0{i}": "/opt/venv/bin/python" for i in (1, 2, 3)}, ssh_user="ops")
    hosts, source, profile = configured("--rerun", str(d))
    assert hosts == ["node01", "node02", "node03"] and profile == H200, (hosts, profile)
    assert source == "--hosts node[01-03]"
    assert cli.configured(["--rerun", str(d)], lambda config, state: state.inventory.hosts[0].python) \
        == "/opt/venv/bin/python"  # the earlier run's probes' interpreter
    assert cli.configured(["--rerun", str(d)], lambda config, state: state.inventory.hosts[0].user) \
        == "ops"  # and its --ssh-user
    assert cli.configured(["--rerun", str(d), "--ssh-user", "root"],
                          lambda config, state: state.inventory.hosts[0].user) == "root"
    # told otherwise: the hosts and profile given
    told = configured("--rerun", str(d), "--hosts", "node09", "--profile", "local")
    assert (told[0], told[2]) == (["node09"], "local")


def test_an_inventory_run_reruns_its_file_narrowed_to_the_hosts_it_ran(tmp_path):
    inv = tmp_path / "cluster.yaml"
    inv.write_text("hosts:\n  - {name: a, address: 10.0.0.1}\n  - {name: b, address: 10.0.0.2}\n"
                   "  - {name: c, address: 10.0.0.3}\n")
    d = earlier(tmp_path, hosts=["a", "c"], inventory=f"{inv}: --tags gpu", profile="local",
                profile_requested="local")
    hosts, source, profile = configured("--rerun", str(d))
    assert hosts == ["a", "c"] and source == f"{inv}: --hosts a,c" and profile == "local", (hosts, source)
    inv.unlink()  # the file the earlier run read is gone: said, never this machine instead
    with pytest.raises(InputError, match=rf"--rerun \S+: run r1's inventory {inv}: --tags gpu is not "
                                         r"here: name --inventory \(or --hosts\) for the rerun"):
        configured("--rerun", str(d))


def record(test: str, status: str, **kw) -> dict:
    crit, host = test.split("[")[0].removeprefix("test_"), test.split("[")[1][:-1] if "[" in test else ALL
    return {"test": f"acceptance/t.py::{test}", "criterion": crit, "host": host, "status": status, **kw}


def test_the_verdict_is_the_whole_sheets_each_record_stamped_with_its_run():
    then = {"meta": {"run": "r1", "profile": "lab", "profile_sha256": "x"},
            "hosts": {"h1": {}, "h2": {}, "h3": {}},
            "results": [record("test_a[h1]", "PASS"), record("test_b[h2]", "FAIL"),
                        record("test_c[h1]", "N.A."), record("test_d", "PASS"),
                        record("test_a[h3]", "PASS"),  # h3 left out now
                        record("test_e[h1]", "PASS", run="r0")]}  # a rerun's: carried from r0 before
    again = {"run": "r1", "earlier": then}
    now = {"meta": {"run": "r2", "profile": "lab", "profile_sha256": "x"}, "hosts": {"h2": {"os": 1}},
           "results": [record("test_b[h2]", "PASS", run="r2")]}
    kept, facts, said = rerun.carry(again, now, {"h1", "h2"})
    assert [(r["test"].split("::")[1], r["status"], r["run"]) for r in kept] == [
        ("test_a[h1]", "PASS", "r1"), ("test_c[h1]", "N.A.", "r1"), ("test_d", "PASS", "r1"),
        ("test_e[h1]", "PASS", "r0")]
    assert facts == {"h1": {}}  # h2's are this run's own
    assert said == ("results carried from run r1: 4 (3 PASS, 1 N.A.); measured in this rerun: 1 "
                    "(1 PASS: b on h2)")
    # judged by other thresholds: nothing carried, and said why
    kept, _, said = rerun.carry(again, {**now, "meta": {**now["meta"], "profile_sha256": "y"}}, {"h1", "h2"})
    assert kept == [] and said.startswith("not merged with run r1's results: it was judged by profile lab, "
                                          "this rerun by lab (the same name, other thresholds"), said


def test_unseen_error_reruns_the_unseen_and_carries_none_as_a_pass(tmp_path):
    """--unseen-error: an earlier run's UNSEEN did not pass either, so it is rerun (not "nothing to
    rerun"), and one not measured again is carried as the ERROR the option makes of it."""
    import types
    d = tmp_path / "earlier"
    d.mkdir()
    ask = "the NVLink fabric state"
    then = {"verdict": "PASS", "meta": {"run": "r1", "profile": "lab", "profile_sha256": "x"},
            "hosts": {"h1": {}, "h2": {}},
            "results": [record("test_a[h1]", "PASS"), record("test_f[h1]", "UNSEEN", ask=ask, why="a slice"),
                        record("test_f[h2]", "UNSEEN", ask=ask, why="a slice")]}
    (d / "results.json").write_text(json.dumps(then))
    with pytest.raises(InputError, match="passed or was N.A. or UNSEEN: nothing to rerun"):
        rerun.load(str(d))

    def option(strict):
        return types.SimpleNamespace(stash=pytest.Stash(), getoption=lambda name, default=None: {
            "rerun": str(d), "unseen_error": strict}.get(name, default))
    with pytest.raises(InputError, match="nothing to rerun"):
        rerun.of(option(False))
    again = rerun.of(option(True))
    assert again["tests"] == ["acceptance/t.py::test_f[h1]", "acceptance/t.py::test_f[h2]"]
    assert again["statuses"] == {"UNSEEN": 2} and again["unseen_error"] is True
    now = {"meta": {"run": "r2", "profile": "lab", "profile_sha256": "x"}, "hosts": {"h1": {}},
           "results": [record("test_f[h1]", "ERROR", run="r2")]}  # h2's not measured again
    kept, _, said = rerun.carry(again, now, {"h1", "h2"})
    assert [(r["test"].split("::")[1], r["status"]) for r in kept] == [("test_a[h1]", "PASS"),
                                                                     ("test_f[h2]", "ERROR")]
    assert kept[1]["message"] == f"a slice: cannot be shown here (--unseen-error): ask the provider for {ask}"
    assert "1 ERROR" in said
