"""Where a probe's probelib comes from, on a real lab host over sshd (issue 42 item 3): the
probes run in one 0700 temp dir under /tmp, and /tmp is anyone's to write. Under python -P or
-I (or PYTHONSAFEPATH=1) the probe's own dir is not on sys.path, and the old fallback found
/tmp/probelib.py, planted by user nobody, and ran it as root."""

from __future__ import annotations

import contextlib
import os
import pwd
import sys
from pathlib import Path

import pytest
from lab import Lab

from signoff import families
from signoff.fleet import HostSession
from signoff.inventory import Host
from signoff.transport import SSHTransport

pytestmark = pytest.mark.lab  # skipped without root/sshd: tests/conftest.py
# every probe that loads probelib
PROBES = ("hbm", "allreduce", "p2p", "soak", "hostlink", "train", "parallel")
PLANTED = "/tmp/probelib.py"  # the run dir's parent: over ssh, SIGNOFF_TMPDIR is never set


def test_planted_tmp_probelib_is_never_imported_under_safe_path_or_isolated_python(tmp_path):
    shipped = families.shipped()
    assert {n[:-3] for n, f in shipped.items() if n != "probelib.py" and "probelib" in f.read_text()} == \
        set(PROBES)  # a new probe that loads probelib is tested here too
    marker = tmp_path / "planted-probelib-ran"
    isolated = tmp_path / "python-I"
    isolated.write_text(f'#!/bin/sh\nexec {sys.executable} -I "$@"\n')
    isolated.chmod(0o755)
    # O_EXCL: never clobber (nor remove, below) a /tmp/probelib.py this test did not make; one
    # an earlier, killed run of it left (its marker's name in it) is removed first
    with contextlib.suppress(OSError):
        if "planted-probelib-ran" in Path(PLANTED).read_text():
            os.unlink(PLANTED)
    fd = os.open(PLANTED, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n")
        nobody = pwd.getpwnam("nobody")
        os.chown(PLANTED, nobody.pw_uid, nobody.pw_gid)
        with Lab(tmp_path / "lab", n_hosts=1) as lab:
            h, ran, failed = lab.hosts[0], [], []
            for how, python, env in (("PYTHONSAFEPATH=1", sys.executable, {"PYTHONSAFEPATH": "1"}),
                                     ("python -I", str(isolated), {})):
                host = Host(name=h.name, address=h.address, user="root", identity_file=str(lab.user_key),
                            python=python, env=env)
                s = HostSession(host, SSHTransport(host, known_hosts=str(lab.known_hosts)))
                try:
                    for name in PROBES:
                        r = s.probe_result(name, "--help", timeout=120)  # probelib loads before argparse
                        assert os.path.dirname(s.workdir) == "/tmp", s.workdir
                        if marker.exists():
                            ran.append(f"{name}.py under {how}")
                            marker.unlink()
                        if "Traceback" in r.stderr:  # the shipped probelib.py was not found
                            failed.append(f"{name}.py under {how}: {r.stderr[-300:]}")
                finally:
                    s.cleanup()
        assert not ran and not failed, (ran, failed)
    finally:
        os.unlink(PLANTED)
