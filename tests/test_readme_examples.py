"""The README's inventory is a file of the repository (examples/), quoted verbatim, and it
loads with signoff's own loader (issue 31 item 1)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from signoff.inventory import HOST_KEYS, TOP_KEYS, Host, load
from signoff.transport import SSHTransport

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
INVENTORY = "examples/cluster.yaml"

def readme_block(path: str) -> str:
    """The first fenced block after the README's first mention of `path`."""
    at = README.index(f"`{path}`")
    m = re.compile(r"^```[a-z]*\n(.*?)^```$", re.S | re.M).search(README, at)
    assert m, f"README: no code block after `{path}`"
    return m.group(1)


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.S | re.M)


@pytest.mark.parametrize("path", [INVENTORY])
def test_readme_quotes_the_file(path):
    assert readme_block(path) == (ROOT / path).read_text()


def test_example_inventory_loads_with_every_key():
    inv = load(ROOT / INVENTORY)
    assert len(inv.hosts) > 1
    for h in inv.hosts:  # without them every network check ERRORs, storage reads the temp dir
        assert h.data_iface and h.storage_path and h.python != "python3", h
    text = (ROOT / INVENTORY).read_text()
    doc = yaml.safe_load(text)
    used = set(doc["defaults"]).union(*doc["hosts"])
    assert used == HOST_KEYS, f"unshown: {HOST_KEYS - used}"  # a new key belongs in the example
    # known_hosts commented out: the file it names must exist, and ~/.ssh/known_hosts serves
    assert set(doc) | {"known_hosts"} == TOP_KEYS and re.search(r"^# known_hosts: ", text, re.M)


@pytest.mark.skipif(not shutil.which("ssh-keygen"), reason="no ssh-keygen (openssh-client)")
def test_hashed_known_hosts_are_found(tmp_path):
    """README's recipe (ssh-keyscan -H) writes hashed names, and [address]:port for a port
    other than 22: the host-key loading SSHTransport does finds both."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")],
                   check=True)
    key = (tmp_path / "k.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"gpu001 {' '.join(key)}\n[10.0.1.16]:2222 {' '.join(key)}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert "gpu001" not in known.read_text()  # hashed, as ssh-keyscan -H writes
    for host, name in [(Host(name="gpu001"), "gpu001"),
                       (Host(name="gpu016", address="10.0.1.16", port=2222), "[10.0.1.16]:2222")]:
        t = SSHTransport(host, known_hosts=str(known))
        assert t.conn.client.get_host_keys().lookup(name), name
