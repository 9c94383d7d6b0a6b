"""Quick checks of the namespace lab itself (tests/lab.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from lab import Lab, alive

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=3) as lab:
        yield lab


def _sh(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def test_hosts_answer_over_ssh_and_reach_each_other(lab):
    for h in lab.hosts:
        r = lab.ssh(h, "hostname -I")
        assert r.returncode == 0, r.stderr
        assert h.address in r.stdout.split(), r.stdout
    keys = [line.split()[2] for line in lab.known_hosts.read_text().splitlines()]
    assert len(set(keys)) == len(lab.hosts)  # one host key each: known_hosts is a real check

    lab2 = lab.hosts[1].address
    if shutil.which("ping"):
        r = lab.ssh("lab1", f"ping -c1 -W2 {lab2}")
    else:  # iputils-ping not installed: a TCP connect to lab2's sshd proves the same
        r = lab.ssh("lab1", f"timeout 2 bash -c 'exec 3<>/dev/tcp/{lab2}/22'")
    assert r.returncode == 0, r.stdout + r.stderr


def test_shape_installs_tbf_both_ways(lab):
    h = lab.hosts[2]
    lab.shape(h, "100mbit")
    outside = _sh("tc", "qdisc", "show", "dev", h.veth_controller)
    inside = _sh("tc", "-n", h.netns, "qdisc", "show", "dev", h.veth_host)
    for out in (outside, inside):
        assert "tbf" in out and "100Mbit" in out, out


def test_close_leaves_nothing_behind(tmp_path):
    lab = Lab(tmp_path, n_hosts=2).start()
    pids = [lab.sshd_pid(h) for h in lab.hosts]
    assert all(p and alive(p) for p in pids), pids
    lab.shape("lab1", "50mbit")

    lab.stop_sshd("lab2")  # a host whose sshd is down: refused at once, not a timeout
    assert not alive(pids[1])
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((lab.hosts[1].address, 22), timeout=2).close()

    lab.close()
    lab.close()  # idempotent
    netns = _sh("ip", "netns", "list")
    links = _sh("ip", "-br", "link", "show")
    for h in lab.hosts:
        assert h.netns not in netns
        assert h.veth_controller not in links
    assert lab.bridge not in links
    assert not any(alive(p) for p in pids), pids


def test_inventory_is_yaml_the_suite_can_read(lab, tmp_path):
    yaml = pytest.importorskip("yaml")
    path = lab.write_inventory(
        tmp_path / "inventory.yaml",
        python="/usr/bin/python3",
        overrides={"lab2": {"python": "/opt/other/python"}},
        extra_hosts=[{"name": "ghost", "address": "10.231.255.254"}],
    )
    inv = yaml.safe_load(path.read_text())
    assert inv["known_hosts"] == str(lab.known_hosts)
    key, py = str(lab.user_key), "/usr/bin/python3"
    assert inv["defaults"] == {"user": "root", "port": 22, "identity_file": key, "python": py}
    assert [h["name"] for h in inv["hosts"]] == ["lab1", "lab2", "lab3", "ghost"]
    assert inv["hosts"][0] == {"name": "lab1", "address": lab.hosts[0].address, "tags": ["lab"]}
    assert inv["hosts"][1]["python"] == "/opt/other/python"
