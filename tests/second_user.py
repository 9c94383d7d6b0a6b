"""A real second local user of this machine: an unprivileged account (made once, with useradd, if
absent; no home, no login shell), so that what another user of a shared host can do to a run is
done for real, with that user's own rights. Needs root: used by lab tests (tests/conftest.py)."""

from __future__ import annotations

import os
import pwd
import subprocess

NAME = "signoff-mallory"


def second_user() -> pwd.struct_passwd:
    """The account, made if absent (another test worker may be making it at the same moment)."""
    try:
        return pwd.getpwnam(NAME)
    except KeyError:
        pass
    r = subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", "--user-group", NAME],
                       capture_output=True, text=True, timeout=60)
    try:
        return pwd.getpwnam(NAME)
    except KeyError:
        raise RuntimeError(f"useradd {NAME} failed (exit {r.returncode}): {r.stderr.strip()}") from None


def as_user(pw: pwd.struct_passwd, *cmd: str, home: str = "/nonexistent") -> list[str]:
    """`cmd` run as that user alone: its uid and gid, no other group, a plain environment."""
    return ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups",
            "env", "-i", f"PATH={os.defpath}:/usr/sbin:/sbin", f"HOME={home}", f"USER={pw.pw_name}", *cmd]


def run_as(pw: pwd.struct_passwd, *cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(as_user(pw, *cmd), capture_output=True, text=True, timeout=60, check=check, **kw)


RENTER = "signoff-renter"


def renter() -> pwd.struct_passwd:
    """The unprivileged login of a rented container (issue 52): a shell and a home of its own (its
    run lock lives there), no group beyond its own; made once with useradd if absent. Its password
    is "*" (none matches), not useradd's "!": sshd without PAM refuses a locked account's keys."""
    try:
        return pwd.getpwnam(RENTER)
    except KeyError:
        pass
    r = subprocess.run(["useradd", "--create-home", "--home-dir", f"/home/{RENTER}", "--shell", "/bin/sh",
                        "--user-group", "--password", "*", RENTER],
                       capture_output=True, text=True, timeout=60)
    try:
        return pwd.getpwnam(RENTER)
    except KeyError:
        raise RuntimeError(f"useradd {RENTER} failed (exit {r.returncode}): {r.stderr.strip()}") from None
