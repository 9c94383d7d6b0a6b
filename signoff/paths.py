"""Where the sign-off sheet lives: acceptance/ (the checks), thresholds/ (the profiles), reports/.

From a clone they are the repository's own top-level directories. An installed wheel carries
the first two under signoff/_sheet/ (setup.py maps them there, so the repository keeps its
layout), and its runs write ./reports/ of the current directory, never into site-packages."""

from __future__ import annotations

from pathlib import Path

PKG = Path(__file__).resolve().parent
SHIPPED = PKG / "_sheet"  # the wheel's copy: acceptance/, thresholds/


def checkout() -> Path | None:
    """The repository this package is imported from (a clone, an editable install), else None."""
    top = PKG.parent
    ok = all((top / p).exists() for p in ("pyproject.toml", "acceptance", "thresholds"))
    return top if ok else None


def root() -> Path:
    """The directory holding acceptance/ and thresholds/."""
    return checkout() or SHIPPED


def acceptance_dir() -> Path:
    return root() / "acceptance"


def thresholds_dir() -> Path:
    return root() / "thresholds"


def reports_dir() -> Path:
    """Where a run's reports/<UTC stamp>/ goes by default: the clone's reports/ (as ever),
    else ./reports of the directory the command runs in."""
    return (checkout() or Path.cwd()) / "reports"
