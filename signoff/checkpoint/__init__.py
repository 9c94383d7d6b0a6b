"""Checkpoint save and restore: a real torch.save of a model and its AdamW state (the training
step's model, or as many of its layers as the profile's `checkpoint: size_gb` takes) on every
host at once into the storage path, fsync'ed, its pages dropped from the cache, then torch.load'ed
onto the same device and compared bit for bit (probe_checkpoint); seconds and GB/s judged per
class, and what a checkpoint every `interval_min` costs the run (judge.py)."""

from signoff import InputError

CRITERIA = {
    "checkpoint_save": {"type": "number"},  # GB/s: torch.save + fsync of the file and its directory
    "checkpoint_restore": {"type": "number"},  # GB/s: torch.load from disk (cache dropped) onto the device
    "checkpoint_intact": {"type": "number", "ops": ("max",)},  # tensors read back different
}
PLUGIN = "signoff.checkpoint.plugin"

# size_gb null: the training step's model (signoff/training's `training:` section) as it is;
# interval_min: how often a run saves (the cover's cost); steps: AdamW steps before the save, so
# the optimizer's moments are real numbers, not zeros
DEFAULTS = {"size_gb": None, "interval_min": 30, "steps": 2}


def merge_section(inherited: dict, section, where: str) -> dict:
    """The profile's `checkpoint:` over its parent's; every key checked, unknown ones refused."""
    if not isinstance(section, dict):
        raise InputError(f"{where}: expected a mapping of {', '.join(DEFAULTS)}")
    out = {**DEFAULTS, **inherited}
    for key, val in section.items():
        if key not in DEFAULTS:
            raise InputError(f"{where}.{key}: unknown key (allowed: {', '.join(DEFAULTS)})")
        number = not isinstance(val, bool) and isinstance(val, (int, float))
        if key == "steps" and not (number and isinstance(val, int) and val >= 1):
            raise InputError(f"{where}.steps: expected an integer >= 1, got {val!r}")
        if key != "steps" and not (number and val > 0 or key == "size_gb" and val is None):
            raise InputError(f"{where}.{key}: expected a number > 0"
                             f"{' (or null: the training step model)' if key == 'size_gb' else ''}, "
                             f"got {val!r}")
        out[key] = val
    return out


SECTIONS = {"checkpoint": merge_section}


def section(profile) -> dict:
    """The profile's checkpoint section with every default filled in."""
    return merge_section(profile.section("checkpoint"), {}, f"profile {profile.name}: checkpoint")


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: the checkpoint's bytes, written and read back at the class's floors."""
    from signoff.checkpoint.judge import plan_line
    if not {"checkpoint_save", "checkpoint_restore", "checkpoint_intact"} & set(picked):
        return []
    return [plan_line(prof)]
