"""signoff.inventory: hosts from a YAML file or a --hosts hostlist."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from signoff import InputError
from signoff.hostlist import expand
from signoff.inventory import LOCAL, Host, from_hostlist, load, local_inventory, torch_version

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def write_inv(tmp_path):
    def write(text: str, name: str = "inv.yaml") -> Path:
        p = tmp_path / name
        p.write_text(text)
        return p
    return write


def test_defaults_merge_and_entries_override(write_inv):
    path = write_inv("""
defaults: {user: ops, port: 2222, identity_file: ~/.ssh/id_gpu, python: /opt/env/bin/python}
hosts:
  - {name: a, address: 10.0.0.1, tags: [rack1, h200]}
  - {name: b, user: root, port: 22}
""")
    inv = load(path)
    a, b = inv.hosts
    assert (a.name, a.address, a.user, a.port) == ("a", "10.0.0.1", "ops", 2222)
    assert a.tags == ("rack1", "h200")
    assert (b.user, b.port, b.address, b.tags) == ("root", 22, None, ())
    assert a.identity_file == str(Path.home() / ".ssh/id_gpu")
    assert a.python == "/opt/env/bin/python"
    assert inv.source == str(path)


def test_hostlist_name_in_an_entry_expands(write_inv):
    inv = load(write_inv("hosts:\n  - {name: 'gpu[01-03]', user: u, tags: [x]}\n  - {name: cpu}\n"))
    assert [h.name for h in inv.hosts] == ["gpu01", "gpu02", "gpu03", "cpu"]
    assert all(h.user == "u" and h.tags == ("x",) for h in inv.hosts[:3])


def test_known_hosts_is_relative_to_the_inventory_file(write_inv, tmp_path):
    sub = tmp_path / "site"
    (sub / "keys").mkdir(parents=True)
    (sub / "keys/known").write_text("")
    inv = load(write_inv("known_hosts: keys/known\nhosts: [{name: a}]\n", name="site/inv.yaml"))
    assert inv.known_hosts == str(sub / "keys/known")
    inv = load(write_inv(f"known_hosts: {sub}/keys/known\nhosts: [{{name: a}}]\n"))
    assert inv.known_hosts == str(sub / "keys/known")
    assert load(write_inv("hosts: [{name: a}]\n")).known_hosts is None


@pytest.mark.parametrize("known, why", [("keys/knwon", "no such file"), ("keys", "is a directory")])
def test_a_known_hosts_file_that_is_not_there_is_refused(write_inv, tmp_path, known, why):
    (tmp_path / "keys").mkdir()
    path = write_inv(f"known_hosts: {known}\nhosts: [{{name: a}}]\n")
    with pytest.raises(InputError) as exc:
        load(path)
    assert str(exc.value) == f"inventory {path}: known_hosts: {tmp_path / known}: {why}" + (
        ", not a file" if known == "keys" else "")


def test_from_hostlist_and_local():
    inv = from_hostlist("n[1-2],local", user="me", python="py3")
    assert [h.name for h in inv.hosts] == ["n1", "n2", "local"]
    assert [h.local for h in inv.hosts] == [False, False, True]
    assert all(h.user == "me" and h.python == "py3" for h in inv.hosts)
    assert "n[1-2],local" in inv.source
    # the python3 on PATH if it has torch (a training environment), else signoff's own (this venv)
    (only,) = local_inventory().hosts
    assert only.address == LOCAL and only.local
    if torch_version(shutil.which("python3")):
        assert only.python == os.path.abspath(shutil.which("python3")) and only.probe_env is None
    else:
        assert only.python == sys.executable and only.probe_env.startswith("signoff's own (torch ")
    (given,) = local_inventory(sys.executable).hosts  # --python: that one, whatever it is
    assert given.python == os.path.abspath(sys.executable) and given.probe_env is None


@pytest.mark.parametrize("text, where", [
    ("hosts:\n  - {name: a}\n  - {name: b, adress: 1.2.3.4}\n", "hosts[1]: unknown key 'adress'"),
    ("hosts:\n  - {address: 1.2.3.4}\n", "hosts[0].name: missing"),
    ("hosts:\n  - {name: a, port: 70000}\n", "hosts[0] (a).port"),
    ("hosts:\n  - {name: a, port: '22x'}\n", "hosts[0] (a).port"),
    ("hosts:\n  - {name: a, tags: gpu}\n", "hosts[0] (a).tags"),
    ("hosts:\n  - {name: 'n[1-2]'}\n  - {name: n2}\n", "hosts[1]: duplicate host name 'n2'"),
    ("hosts: []\n", "hosts: expected a non-empty list"),
    ("defaults: {}\n", "hosts: expected a non-empty list"),
    ("defaults: {name: x}\nhosts: [{name: a}]\n", "defaults: unknown key 'name'"),
    ("host: [{name: a}]\n", "unknown key 'host'"),
    ("hosts:\n  - {name: 'n[1-2]', address: 1.2.3.4}\n", "hosts[0]: a hostlist name"),
    # the entry named by its name, not its index alone (#29 item 8)
    ("hosts:\n  - {name: nodeA, address: ''}\n", "hosts[0] (nodeA).address: empty"),
    ("hosts:\n  - {name: a}\n  - {name: nodeB, address: '  '}\n", "hosts[1] (nodeB).address: empty"),
    ("hosts:\n  - {name: a, address: }\n", "hosts[0] (a).address: empty"),
    ("defaults: {address: ''}\nhosts:\n  - {name: a}\n", "hosts[0] (a).address: empty"),
    ("hosts:\n  - {name: '/../../../../tmp/X', address: 1.2.3.4}\n", "hosts[0].name: hostlist '/../"),
    ("hosts:\n  - {name: 'a/b'}\n", "hosts[0].name: hostlist 'a/b': '/' cannot be in a host name"),
    ("hosts:\n  - {name: 'n[1-100000000]'}\n", "hosts[0].name: hostlist 'n[1-100000000]': "),
    ("hosts:\n  - {name: a, address: 10.0.0.1}\n  - {name: b, address: 10.0.0.1, user: x}\n",
     "hosts[1] (b) and hosts[0] (a) both reach 10.0.0.1:22"),
    ("hosts:\n  - {name: a, address: h, port: 22}\n  - {name: b}\n  - {name: c, address: h}\n",
     "hosts[2] (c) and hosts[0] (a) both reach h:22"),
    ("hosts:\n  - {name: a}\n  - {name: b, address: a}\n", "hosts[1] (b) and hosts[0] (a) both reach a:22"),
])
def test_errors_name_file_and_key_path(write_inv, text, where):
    path = write_inv(text)
    with pytest.raises(InputError) as exc:
        load(path)
    assert f"inventory {path}" in str(exc.value)
    assert where in str(exc.value)


def test_boolean_port_is_rejected(write_inv):
    with pytest.raises(InputError, match=r"hosts\[0\] \(a\)\.port"):
        load(write_inv("hosts:\n  - {name: a, port: true}\n"))


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(InputError, match="file not found") as exc:
        load(path)
    assert str(path) in str(exc.value)


def test_invalid_yaml(write_inv):
    path = write_inv("hosts: [{name: a\n")
    with pytest.raises(InputError, match="not valid YAML") as exc:
        load(path)
    assert str(path) in str(exc.value)
    # where in the file: its name and line, not PyYAML's "<unicode string>"
    assert f'in "{path}", line 2' in str(exc.value) and "<unicode string>" not in str(exc.value)


def test_invalid_profile_yaml_names_its_file_and_line(tmp_path):
    from signoff import profiles
    path = tmp_path / "p.yaml"
    path.write_text("extends: local\ncriteria: {gpu_count: [\n")
    with pytest.raises(InputError, match="not valid YAML") as exc:
        profiles.load(str(path))
    assert f'in "{path}", line ' in str(exc.value) and "<unicode string>" not in str(exc.value)


@pytest.mark.parametrize("entry, key", [
    ("{name: n1, identity_file: [a, b]}", "hosts[0].identity_file"),
    ("{name: n1, address: [local]}", "hosts[0].address"),
    ("{name: n1, python: {a: 1}}", "hosts[0].python"),
    ("{name: 'n[3-1]'}", "hosts[0].name"),
])
def test_wrong_types_name_the_key(tmp_path, entry, key):
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - {entry}\n")
    with pytest.raises(InputError, match=re.escape(f"inventory {inv}: {key}")):
        load(inv)


def test_same_address_on_other_ports_is_two_hosts(write_inv):
    inv = load(write_inv("hosts:\n  - {name: a, address: h, port: 2201}\n"
                         "  - {name: b, address: h, port: 2202}\n"))
    assert [(h.name, h.port) for h in inv.hosts] == [("a", 2201), ("b", 2202)]


def test_a_bad_host_name_is_refused_wherever_a_host_is_made(tmp_path):
    with pytest.raises(InputError, match=r"--hosts|hostlist '/\.\./x'"):
        from_hostlist("/../x")
    with pytest.raises(InputError, match=r"host: '\.\./\.\./tmp/X' is not a host name"):
        Host(name="../../tmp/X")


def test_a_path_as_host_name_is_refused_before_any_file_is_written(tmp_path):
    """The issue's case: this name made the controller write /tmp/<X>.json outside the report."""
    target = Path(f"/tmp/signoff-escape-{os.getpid()}")
    name = "/" + "../" * 16 + str(target)[1:]  # up to / from any report dir
    inv = tmp_path / "inv.yaml"
    inv.write_text(f"hosts:\n  - {{name: '{name}', address: local}}\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "--partial",
                        "--inventory", str(inv), "--report-dir", str(tmp_path / "r"),
                        "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    written = target.with_suffix(".json").exists()
    target.with_suffix(".json").unlink(missing_ok=True)
    assert not written and p.returncode == 4, p.stdout + p.stderr
    assert f"inventory {inv}: hosts[0].name: hostlist '{name}': '/' cannot be" in p.stderr


# --hosts, --tags, --exclude-hosts: which of an inventory's hosts a run takes (issue 24, item 3)
CLUSTER = ("hosts:\n  - {name: 'node[01-04]', tags: [rack1]}\n"
           "  - {name: 'node[05-06]', tags: [rack2, h200]}\n  - {name: ctl}\n")


def names(inv) -> list[str]:
    return [h.name for h in inv.hosts]


def test_hosts_narrow_an_inventory_and_a_name_it_lacks_is_refused_naming_the_file(write_inv, capsys):
    from signoff import cli
    from signoff.inventory import select
    path = write_inv(CLUSTER)
    inv = select(load(path), f"inventory {path}", hosts="node[02,05],ctl")
    assert names(inv) == ["node02", "node05", "ctl"] and inv.source == f"{path}: --hosts node[02,05],ctl"
    assert inv.hosts[1].tags == ("rack2", "h200")  # each host keeps the inventory's settings
    with pytest.raises(InputError) as exc:
        select(load(path), f"inventory {path}", hosts="node[05-08]")
    assert str(exc.value) == f"--hosts node[05-08]: node[07-08] not in inventory {path} (ctl,node[01-06])"
    # through the plugin, as a run takes its options (it was refused: "both given: use one")
    rc, out = cli.main(["plan", "--inventory", str(path), "--hosts", "node0[1-2]", "--no-contact"]), \
        capsys.readouterr().out
    assert rc == 0 and f"hosts: 2 from {path}: --hosts node0[1-2]: node[01-02]" in out, out


def test_tags_select_the_hosts_that_carry_any_and_an_unknown_tag_is_refused(write_inv):
    from signoff.inventory import select
    path = write_inv(CLUSTER)
    assert names(select(load(path), "i", tags="h200")) == ["node05", "node06"]
    assert names(select(load(path), "i", tags="rack1, h200")) == [f"node0{i}" for i in range(1, 7)]
    assert names(select(load(path), "i", hosts="node0[3-6]", tags="rack1")) == ["node03", "node04"]
    with pytest.raises(InputError) as exc:
        select(load(path), f"inventory {path}", tags="h100,rack1")
    assert str(exc.value) == (f"--tags h100,rack1: no host of inventory {path} has tag h100 "
                              f"(its tags: rack1, rack2, h200)")
    with pytest.raises(InputError, match=r"--hosts ctl --tags rack1: none of those hosts has any of those"):
        select(load(path), "i", hosts="ctl", tags="rack1")
    with pytest.raises(InputError, match=r"--tags is empty"):
        select(load(path), "i", tags=" , ")
    with pytest.raises(InputError, match=r"no host of --hosts n\[1-2\] has tag gpu \(its hosts have no tags"):
        select(from_hostlist("n[1-2]"), "--hosts n[1-2]", tags="gpu")


def test_exclude_hosts_leaves_them_out_and_refuses_outsiders_and_an_empty_run(write_inv):
    from signoff.inventory import select
    path = write_inv(CLUSTER)
    inv = select(load(path), "i", tags="rack1", exclude="node0[2-3]")
    assert names(inv) == ["node01", "node04"] and list(inv.excluded) == ["node05", "node06", "ctl",
                                                                         "node02", "node03"]
    assert inv.source == f"{path}: --tags rack1 --exclude-hosts node0[2-3]"
    assert select(load(path), "i", exclude=" ").excluded == {}  # an empty CI variable: nothing left out
    with pytest.raises(InputError) as exc:  # node05 is the inventory's, not this run's (--tags)
        select(load(path), "i", tags="rack1", exclude="node0[4-5],gpu9")
    assert str(exc.value) == ("--exclude-hosts node0[4-5],gpu9: gpu9,node05 not among this run's hosts "
                              "(node[01-04])")
    with pytest.raises(InputError) as exc:
        select(from_hostlist("n[1-2]"), "--hosts n[1-2]", exclude="n[1-2]")
    assert str(exc.value) == "--exclude-hosts n[1-2] leaves no host to check (this run's hosts: n[1-2])"


def test_select_says_why_each_host_it_leaves_out(write_inv):
    """Every host of the inventory the run does not judge, with why (issue 32 item 11): a
    misspelt tag on one host left it out of the verdict without a word."""
    from signoff.inventory import select
    path = write_inv(CLUSTER.replace("{name: 'node[05-06]', tags: [rack2, h200]}",
                                     "{name: node05, tags: [rakc1]}\n  - {name: node06, tags: [rack1]}"))
    inv = select(load(path), "i", hosts="node0[1-6]", tags="rack1", exclude="node04")
    assert names(inv) == ["node01", "node02", "node03", "node06"]
    assert inv.excluded == {"ctl": "not in --hosts node0[1-6]",
                            "node05": "not tagged rack1 (its tags: rakc1)",
                            "node04": "excluded by --exclude-hosts"}
    assert select(load(path), "i", tags="rack1").excluded == {
        "node05": "not tagged rack1 (its tags: rakc1)", "ctl": "not tagged rack1 (its tags: none)"}
    assert select(load(path), "i").excluded == {}  # the whole inventory: none left out


SLURM_JOB = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[01-06]"}


@pytest.mark.parametrize("args, env, said", [
    (["--exclude-hosts", "node0[1-2]"], {}, "node[01-02]: excluded by --exclude-hosts"),
    (["--tags", "rack1"], {}, "node03: not tagged rack1 (its tags: rakc1)"),
    (["--launcher", "slurm"], SLURM_JOB,
     "node[05-06]: in Slurm job 4242's allocation but not in --inventory {path}"),
], ids=["exclude-hosts", "misspelt-tag", "slurm-node-not-in-inventory"])
def test_hosts_left_out_are_named_on_every_output(write_inv, tmp_path, args, env, said):
    """The terminal, the cover, report.md, results.json and junit.xml each name the hosts the
    run leaves out and why, folded by cause (issue 32 item 11); a -k that selects no check: no
    host is contacted, and the outputs are written as a run's (--collect-only writes none)."""
    from html import escape

    from signoff.report import md_text
    path, rd = write_inv("hosts:\n  - {name: 'node[01-02]', tags: [rack1]}\n"
                         "  - {name: node03, tags: [rakc1]}\n  - {name: node04, tags: [rack1]}\n"), \
        tmp_path / "report"
    said = said.format(path=path)
    p = subprocess.run([sys.executable, "-m", "pytest", "acceptance/test_versions.py", "-k", "nosuch",
                        "-q", "-p", "no:cacheprovider", "--report-dir", str(rd), "--inventory", str(path),
                        *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**{k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}, **env})
    assert p.returncode != 4, p.stdout + p.stderr
    term = p.stdout.split("signoff ===", 1)[-1]
    assert re.search(r"not checked: \d+ hosts?, the verdict is of the others only:\n +"
                     + re.escape(said) + "\n", term), term
    meta = json.loads((rd / "results.json").read_text())["meta"]
    host, _, why = said.partition(": ")
    assert all(meta["excluded"][h] == why for h in expand(host)), meta["excluded"]
    assert escape(said) in (rd / "report.html").read_text()
    assert md_text(said) in (rd / "report.md").read_text()
    junit = ET.parse(rd / "junit.xml").getroot()
    props = [e.get("value") for e in junit.iter("property") if e.get("name") == "not_checked"]
    assert len(props) == 2 and all(said in v for v in props), props  # the suite's and the verdict's


def test_the_excluded_hosts_are_named_in_results_json(write_inv, tmp_path):
    """A run's record says which hosts were left out on purpose (meta.excluded), and the
    inventory it names says how they were chosen."""
    path, rd = write_inv(CLUSTER), tmp_path / "report"

    def pytest(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "-q", "-p", "no:cacheprovider",
                               "--inventory", str(path), "--exclude-hosts", "node0[1-4]", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    p = pytest("--collect-only")
    assert "test_gpu_count[node05]" in p.stdout and "[node01]" not in p.stdout, p.stdout + p.stderr
    pytest("-k", "nosuch", "--report-dir", str(rd))  # a run that contacts no host (selects no check)
    meta = json.loads((rd / "results.json").read_text())["meta"]
    assert meta["excluded"] == dict.fromkeys(["node01", "node02", "node03", "node04"],
                                             "excluded by --exclude-hosts")
    assert meta["hosts"] == ["node05", "node06", "ctl"]
    assert meta["inventory"] == f"{path}: --exclude-hosts node0[1-4]"
