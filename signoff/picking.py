"""Which profile a run's hosts are of: --profile auto over every shipped class (and, for fewer
GPUs than a class on a rented VM or container, its slices: signoff/slices.py), --profile <class
base> over its variants."""

from __future__ import annotations

from pathlib import Path

from signoff import InputError, hostlist, slices
from signoff.profiles import GENERIC_NAMES, PROFILE_DIR, Profile, available, concrete, load, matches


def variants(base: Profile) -> list[Profile]:
    """The concrete profiles beside a class base (in its own directory) that extend it: what
    `--profile BASE` picks from by the hosts' NVML (pick_variant)."""
    where, own = Path(base.path).parent, Path(base.path).resolve()
    return [p for p in (load(n, where) for n in concrete(where))
            if any(Path(f).resolve() == own for f in p.files[:-1])]


def in_class(hw: dict, candidates: list[Profile]) -> list[Profile]:
    """The candidates whose class a host's hardware is of (no GPU: those that need none)."""
    if not hw.get("gpu_count"):
        return [p for p in candidates if not p.gpu_required]
    return [p for p in candidates if p.gpu_required and not matches(p, hw)]


def model_text(hw: dict) -> str:
    """The GPU model as NVML names it, with its PCI device id where the name is a generic one."""
    model = hw.get("gpu_model")
    if model in GENERIC_NAMES:
        return f"{model} (PCI device {hw.get('pci_device_id') or 'unread'})"
    return str(model)


def hardware_text(hw: dict) -> str:
    link = "NVLink" if hw.get("nvlink") else "no NVLink"
    return f"{hw.get('gpu_count')} x {model_text(hw)} ({link})" if hw.get("gpu_count") else "no GPU"


def form_text(hw: dict) -> str:
    """Where the host runs, as its form facts say (HostView.hardware's `rented`, `pci_gpus`)."""
    if hw.get("rented") is None:
        return "on a host whose form was not read (bare metal, a VM or a container?)"
    if not hw["rented"]:
        return "on bare metal"
    return "in a VM" if hw.get("pci_gpus") is not None else "in a container"


def not_a_slice(hw: dict, found: list[Profile]) -> str | None:
    """Why a host of fewer GPUs than the classes of `found` (its slices) is not picked as one of
    them: a slice is what a VM or a container is rented as; on bare metal (or an unread form) the
    same count is an 8-GPU server with a GPU off the bus, as it is in a VM whose PCI bus has a
    GPU NVML does not list (a container's bus is the host's: pci_gpus None). None: a slice."""
    n, pci = hw.get("gpu_count"), hw.get("pci_gpus")
    what = f"{hardware_text(hw)} {form_text(hw)} is " + " or ".join(
        f"{n} of {s.slice_of}'s {s.full_count}" for s in found) + " GPUs"
    ask = " or ".join(f"--profile {s.name}" for s in found)
    bus = f"its PCI bus shows {pci} NVIDIA GPUs where NVML lists {n}"
    if not hw.get("rented"):
        return (f"{what}: a GPU missing (fallen off the bus, disabled)? A slice is a VM's or a container's; "
                f"to judge this host as one anyway pass {ask}" + (f" ({bus})" if pci and pci > n else ""))
    if pci and pci > n:
        return (f"{what}, but {bus}: a GPU missing (fallen off the bus, failed by its driver)? To judge "
                f"this host as a slice anyway pass {ask}")
    return None


def pick_variant(base: Profile, hosts: dict[str, dict]) -> tuple[Profile, str]:
    """`--profile BASE` (a class base): the variant the majority of the hosts of its class are
    of, by their NVML hardware (`hosts`: name -> gpu_model, gpu_count, nvlink), as --profile auto
    picks among every profile; and the line that says so. A host of none of its variants does
    not vote: judged by the pick, it FAILs its class checks, as under any profile of another
    class. No host of any variant: refused, naming each host's hardware; a host of a variant's
    slice count that is no rented slice (not_a_slice) does not vote, and refuses alone."""
    kids = variants(base)
    votes: dict[str, list[str]] = {}
    picked: dict[str, Profile] = {}
    refused: dict[str, str] = {}  # hosts of a slice's count that are not rented slices
    for name, hw in hosts.items():
        found = in_class(hw, kids)
        if not found:  # N GPUs of a variant: a slice where the host is a rented one
            found = slices.candidates(hw, kids)[0]
            if found and (why := not_a_slice(hw, found)):
                refused[name] = why
                continue
        picked.update((p.name, p) for p in found)
        if len(found) > 1:
            raise InputError(f"--profile {base.name}: {name}'s {hardware_text(hw)} is of several of "
                             f"its variants: {', '.join(p.name for p in found)}; pass --profile NAME")
        if found:
            votes.setdefault(found[0].name, []).append(name)
    if not votes and refused:
        raise InputError(f"--profile {base.name}: " + "; ".join(f"{n}'s {w}" for n, w in refused.items()))
    if not votes:
        raise InputError(f"--profile {base.name}: no host is of a variant of this class ("
                         + ", ".join(f"{k.name}: {k.describe_class()}" for k in kids) + "): "
                         + "; ".join(f"{n}: {hardware_text(hw)}" for n, hw in hosts.items())
                         + " (pass the profile of their class, or --profile auto)")
    pick = max(votes, key=lambda k: len(votes[k]))  # the first of a tie, in host order
    prof = picked[pick]
    models = sorted({model_text(hosts[n]) if hosts[n].get("gpu_model") else "no GPU" for n in votes[pick]})
    line = f"{base.name}: picked {pick} from the hosts' NVML ({', '.join(models)})"
    others = [n for n in hosts if n not in votes[pick]]
    if others:
        line += (f" on {len(votes[pick])} of {len(hosts)} hosts; {hostlist.fold(others)}: not of it "
                 f"(FAIL its class checks)")
    return prof, line


def auto_select(hw: dict, base_dir: Path = PROFILE_DIR) -> Profile:
    """Pick the one concrete profile whose class matches the hardware; no GPU -> local; fewer
    GPUs than a class of the model: its slice, where the host is a rented one (not_a_slice)."""
    if not hw.get("gpu_count"):
        return load("local", base_dir)
    classes = [p for p in (load(n, base_dir) for n in available(base_dir))
               if not p.abstract and p.gpu_required]
    found, tried = [p for p in classes if not matches(p, hw)], []
    if not found:  # no class of this many GPUs: N GPUs of a larger class of the model (a slice)
        found, tried = slices.candidates(hw, classes)
        if found and (why := not_a_slice(hw, found)):
            raise InputError(f"--profile auto: {why}")
    if len(found) != 1:
        what = hardware_text(hw)
        if not found:
            raise InputError(f"--profile auto: no profile in {base_dir} matches {what}"
                             + (f" (slices tried: {'; '.join(tried)})" if tried else "")
                             + "; pass --profile NAME or add a profile for this class")
        raise InputError(f"--profile auto: several profiles match {what}: "
                         f"{', '.join(p.name for p in found)}; pass --profile NAME")
    return found[0]
