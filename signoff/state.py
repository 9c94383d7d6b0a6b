"""A run's state, shared by the plugin's parts (plugin.py: options and launch; fixtures.py;
recorder.py) through pytest's stash."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from signoff import InputError, inventory, paths, profiles, slurm
from signoff.fleet import Fleet, ProbeError
from signoff.results import Results
from signoff.transport import HostUnreachable

ROOT = paths.root()  # holds acceptance/: the clone's top, or the installed sheet (signoff/paths.py)
OUR_ERRORS = (HostUnreachable, ProbeError, InputError)


@dataclass
class State:
    inventory: inventory.Inventory
    profile: profiles.Profile | None  # None until --profile auto has seen the hosts
    profile_arg: str
    class_base: profiles.Profile | None = None  # --profile BASE (abstract): its variant is picked
    pick: str = ""  # how the profile was picked from the hosts' NVML (auto or a class base)
    report_dir: Path | None = None
    results: Results | None = None
    status: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    messages: dict = field(default_factory=dict)
    duration: dict = field(default_factory=dict)
    run_id: str = ""  # in every host's run lock
    job: str | None = None  # the Slurm allocation whose srun steps run the host commands
    slurm: slurm.Slurm | None = None  # its steps of this run (the fleet's)
    interrupts: int = 0  # Ctrl-C / SIGTERM received
    stopping: bool = False  # the checks are over (or interrupted): only cleanup is left
    base: dict | None = None  # --baseline's results.json
    tolerance: float | None = None  # --baseline-tolerance; else the profile's baseline:
    fleet: Fleet | None = None  # once the first check has started it (the fleet fixture)
    rerun: dict | None = None  # --rerun (or --lf): the earlier run's checks to run again


STATE = pytest.StashKey[State]()

