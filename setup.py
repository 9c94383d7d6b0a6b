"""The wheel carries the sign-off sheet: acceptance/ and thresholds/ stay at the top of the
repository (they are what a user reads and edits) and are mapped into the package as
signoff/_sheet/acceptance and signoff/_sheet/thresholds; signoff/paths.py finds either.
Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

SHEET = {"signoff._sheet.acceptance": "acceptance", "signoff._sheet.thresholds": "thresholds"}

setup(
    packages=[*find_packages(include=["signoff*"]), *SHEET],
    package_dir=SHEET,
    package_data={"signoff": ["*/probe_*.py"], "signoff._sheet.thresholds": ["*.yaml"]},
)
