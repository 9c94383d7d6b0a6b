"""Lab tests (marked `lab`) need root and Debian's sshd; elsewhere they skip with the reason."""

import os

import pytest
from lab import SSHD


def pytest_collection_modifyitems(items):
    why = ("lab needs root (network namespaces, sshd, mount)" if os.geteuid() != 0 else
           f"{SSHD} missing: install openssh-server (make system)" if not os.path.exists(SSHD) else None)
    if why:
        for item in items:
            if item.get_closest_marker("lab"):
                item.add_marker(pytest.mark.skip(reason=why))
