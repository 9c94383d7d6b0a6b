"""The family registry: every criterion declared once by one family, every profile key known,
and a core that imports no family (a new family touches only its folder)."""

import ast
from pathlib import Path

from signoff import families, profiles

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("checkpoint", "dcgm", "fabric", "form", "gpu", "intent", "interconnect", "network", "rails", "roce",
         "soak", "storage", "training", "versions")


def test_every_family_found_with_its_criteria_and_probes():
    assert tuple(families.name(m) for m in families.modules()) == NAMES
    crit = families.criteria()
    assert crit["allreduce_busbw"]["family"] == "interconnect"
    assert crit["soak_gpu_temp"]["family"] == "soak" and crit["power_limit"]["family"] == "gpu"
    assert crit["nvlink_fabric"]["family"] == crit["imex"]["family"] == "fabric"  # no probe: sysinfo's read
    assert crit["dcgm_diag"]["family"] == "dcgm"
    assert crit["checkpoint_intact"]["family"] == "checkpoint"
    assert set(families.probes()) == {"sysinfo", "allreduce", "p2p", "storage", "netinfo",
                                      "netpair", "soak", "train", "loader", "hostlink", "sdc", "hbm",
                                      "cotenants", "dcgm", "form", "roce", "checkpoint", "gdr", "parallel",
                                      "storage_write", "build", "evidence"}
    # what a host gets: each probe as <name>.py, and what they share beside them
    assert set(families.shipped()) == {f"{n}.py" for n in families.probes()} | {"probelib.py"}
    assert profiles.top_keys() >= {"criteria", "hardware", "soak", "training", "checkpoint"}


def test_every_shipped_threshold_belongs_to_a_family():
    for name in profiles.available():
        for crit in profiles.load(name).criteria:
            assert crit in families.criteria(), f"{name}: {crit}"


def test_core_imports_no_family():
    """signoff/*.py may reach a family only through signoff.families (what it declares)."""
    fams = {f"signoff.{n}" for n in NAMES}
    for f in sorted((ROOT / "signoff").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            mods = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module == "signoff":
                mods = [f"signoff.{a.name}" for a in node.names]
            bad = [m for m in mods if any(m == x or m.startswith(x + ".") for x in fams)]
            assert not bad, f"{f.name} imports {bad}: go through signoff.families"
