"""The wheel carries the sign-off sheet: acceptance/ and thresholds/ stay at the top of the
repository (they are what a user reads and edits) and are mapped into the package as
signoff/_sheet/acceptance and signoff/_sheet/thresholds; signoff/paths.py finds either.
Everything else is in pyproject.toml."""

import os
import subprocess

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
COMMIT_FILE = ".signoff-commit"  # signoff/report.py reads it (bench/copy_tree.sh writes one too)


class BuildPy(build_py):
    """A copy installed from a clone (`pip install .`, not editable) names the commit it was built
    from: `git describe` of the clone's own .git (never a repository around it), else the
    .signoff-commit a copy without .git carries, into the wheel's signoff/_sheet/. An editable
    install reads the clone's .git at run time instead."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        try:
            described = subprocess.run(["git", "--git-dir", os.path.join(HERE, ".git"), "--work-tree", HERE,
                                        "describe", "--always", "--dirty", "--tags"],
                                       capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            described = ""
        if not described and os.path.exists(os.path.join(HERE, COMMIT_FILE)):
            with open(os.path.join(HERE, COMMIT_FILE)) as f:
                described = f.read().strip()
        if described:
            with open(os.path.join(self.build_lib, "signoff", "_sheet", COMMIT_FILE), "w") as f:
                f.write(described + "\n")

SHEET = {"signoff._sheet.acceptance": "acceptance", "signoff._sheet.thresholds": "thresholds"}

setup(
    cmdclass={"build_py": BuildPy},
    packages=[*find_packages(include=["signoff*"]), *SHEET],
    package_dir=SHEET,
    package_data={"signoff": ["*/probe_*.py", "*/*.jinja2"],  # the report's templates (signoff/render.py)
                  "signoff._sheet.thresholds": ["*.yaml"]},
)
