"""Threshold profiles (``thresholds/*.yaml``): a hardware class and, per criterion,
a limit with unit and source. Validated at load: a criterion without a threshold is an
error, never a silent pass."""

from __future__ import annotations

import copy
import functools
import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from signoff import InputError, families, outlier, paths, retry, yamlfile
from signoff.units import parse_fraction, version_tuple

PROFILE_DIR = paths.thresholds_dir()  # the clone's, or the installed sheet's (signoff/paths.py)
CORE_KEYS = {"name", "extends", "abstract", "description", "hardware", "criteria", "baseline",
             "fleet_min", "slices"}  # slices: measured figures of N-GPU slices (signoff/slices.py)
HARDWARE_KEYS = {"gpu_model", "gpu_count", "interconnect", "mig", "nvls",
                 "nvlinks", "pcie_gen", "pcie_width",  # per GPU: NVLinks, PCIe link of the class
                 "pci_ids", "host_link", "nvlink_domain",
                 # the GPUs' NVLinks end at NVSwitches whose fabric manager registers each GPU
                 # (HGX boards, NVL72 trays): NVML's GPU fabric state is judged (test_fabric.py)
                 "nvlink_fabric",
                 # false: the class's normal state lacks it (GeForce RTX 4090: no GPU peer access,
                 # ECC off): its checks are N.A. saying so, never a FAIL (docs/thresholds.md)
                 "peer_access", "ecc",
                 # true: the class breaks without it (RTX PRO 6000: BAR1 as large as the GPU's memory,
                 # nvidia_uvm uvm_disable_hmm=1): judged there, N.A. elsewhere (test_gpu_health.py)
                 "large_bar", "uvm_disable_hmm"}
INTERCONNECTS = {"nvlink", "pcie", "any"}
# How the class's GPUs reach the host CPU: PCIe, or NVLink-C2C (Grace: GB200, GB300), where no
# PCIe link to the host exists to judge (pcie_link N.A., host_link_bandwidth at C2C figures).
HOST_LINKS = {"pcie", "c2c"}
# The name some drivers give a GPU they have no product name for (GB200 on early R570 drivers):
# the class is then told by `hardware.pci_ids`, the PCI device ids of its GPUs (matches()).
GENERIC_NAMES = ("NVIDIA Graphics Device",)
LIMIT_KEYS = ("min", "max", "equals")
# A threshold proper: its limit, unit and source (and provisional rule) describe one figure, so a
# child sets them together or not at all; every other key of a criterion (size, runtime,
# attempts...) is inherited one by one.
THRESHOLD_KEYS = (*LIMIT_KEYS, "unit", "source", "provisional", "derived")
# On a criterion: `provisional: "derived: <rule>"` marks a threshold derived from another
# class's figures by a stated rule (no public figure for this class); judged like any other,
# shown beside the figure (PROVISIONAL below). `uncalibrated: "<why, how to calibrate>"` alone says
# that no figure or rule holds for the class: the check ERRORs with that text (docs/thresholds.md).
# `derived: <rule>` (where the criterion's family offers rules: CRITERIA "derived", rule -> unit)
# makes the limit a fraction of a figure each host reports in the run (its own line rate), worked
# out by the family's check; it goes with the limit, so a child's own figure drops it.
PROVISIONAL = "provisional threshold: calibrate on a known-good node"


def top_keys() -> set[str]:
    """The profile's own keys and the sections families own (soak:)."""
    return CORE_KEYS | set(families.sections())


@dataclass(frozen=True)
class Threshold:
    criterion: str
    op: str  # min | max | equals
    value: object
    unit: str
    source: str
    profile: str
    extra: dict = field(default_factory=dict)
    provisional: str = ""  # "derived: <rule>" where no public figure exists for the class
    fleet_min: float | None = None  # judged against the fleet's median too (signoff/outlier.py)

    def ok(self, measured) -> bool:
        a, b = measured, self.value
        if families.criteria()[self.criterion]["type"] == "version":
            a, b = version_tuple(a), version_tuple(b)
        if self.op == "min":
            if self.extra.get("branches"):  # its own branch's minimum, not only the oldest's
                own = self.branch_minimum(measured)
                return own is not None and a >= b and a >= version_tuple(own)
            return a >= b
        if self.op == "max":
            return a <= b
        return a == b

    def branch_minimum(self, measured) -> str | None:
        """The minimum of the driver's own branch (its major number); for a branch newer than
        every listed one, the newest minimum; None for an older branch the list lacks."""
        mins = self.extra["branches"]
        major = version_tuple(measured)[:1]
        for m in mins:
            if version_tuple(m)[:1] == major:
                return m
        newest = max(mins, key=version_tuple)
        return newest if major > version_tuple(newest)[:1] else None

    @property
    def expected(self) -> str:
        sign = {"min": ">=", "max": "<=", "equals": "=="}[self.op]
        if self.extra.get("branches"):
            return (f">= its branch's minimum ({' / '.join(self.extra['branches'])}; a newer branch "
                    f">= {max(self.extra['branches'], key=version_tuple)}) {self.unit}").strip()
        text = f"{sign} {self.value} {self.unit}".strip()
        return f"{text} ({PROVISIONAL})" if self.provisional else text

    def __str__(self) -> str:
        return f"expected {self.expected} ({self.profile}, source: {self.source})"


@dataclass
class Profile:
    name: str
    path: str
    description: str = ""
    abstract: bool = False
    hardware: dict = field(default_factory=dict)
    criteria: dict[str, Threshold] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    sections: dict = field(default_factory=dict)  # family sections (soak: the sustained load)
    baseline: dict = field(default_factory=dict)  # --baseline tolerances: tolerance, criteria
    uncalibrated: dict[str, str] = field(default_factory=dict)  # criterion -> why none, how to set
    own_fleet_min: float | None = None  # top-level fleet_min: (inherited) default of its criteria
    files: list[str] = field(default_factory=list)  # chain's files, the root first
    # criterion -> its entry merged over the chain ({key: value}) and, per key, the file that set it
    specs: dict[str, dict] = field(default_factory=dict)
    origins: dict[str, dict[str, str]] = field(default_factory=dict)
    fleet_min_from: str = ""  # the file that set the top-level fleet_min
    # "<class>@<N>": N GPUs of the class (signoff/slices.py): the class's name and its GPU count
    slice_of: str = ""
    full_count: int | None = None
    slices: dict = field(default_factory=dict)  # N -> {criterion: (entry, where)}: `slices:`

    def threshold(self, criterion: str) -> Threshold:
        """The threshold for a criterion; a missing one is an error, not a pass."""
        if criterion not in self.criteria:
            why = f" ({self.uncalibrated[criterion]})" if criterion in self.uncalibrated else ""
            raise InputError(
                f"profile {self.name} ({self.path}) has no threshold for {criterion!r}{why}: "
                f"add criteria.{criterion} with a limit, unit and source"
            )
        return self.criteria[criterion]

    def section(self, key: str) -> dict:
        """A family's section of the profile (e.g. soak:), {} where the profile sets none."""
        return self.sections.get(key, {})

    @property
    def gpu_required(self) -> bool:
        return bool(self.hardware.get("gpu_model") or self.hardware.get("gpu_count"))

    def describe_class(self) -> str:
        hw = self.hardware
        if not self.gpu_required:
            return "any hardware (GPUs optional)"
        return f"{hw.get('gpu_count') or 'any number of'} x {hw.get('gpu_model')}, " \
               f"interconnect {hw.get('interconnect', 'any')}" \
               + (", host link NVLink-C2C" if hw.get("host_link") == "c2c" else "") \
               + (f", NVLink domain {hw['nvlink_domain']} GPUs" if hw.get("nvlink_domain") else "")


def _where(path, key):
    return f"profile {path}: {key}"


def _read(path: Path) -> dict:
    data = copy.deepcopy(_parsed(str(path), *_stamp(path)))  # the caller's own copy
    if not isinstance(data, dict):
        raise InputError(f"profile {path}: expected a mapping at top level")
    unknown = sorted(set(data) - top_keys())
    if unknown:
        raise InputError(f"{_where(path, unknown[0])}: unknown key "
                         f"(allowed: {', '.join(sorted(top_keys()))})")
    return data


def _stamp(path: Path) -> tuple:
    try:
        st = path.stat()
    except OSError:
        return (None, None, None)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _parsed(path: str, *stamp):
    """A profile file's YAML, parsed once per version of the file (its inode, mtime and size):
    --profile auto loads every class, each re-reading nvidia-base.yaml's chain (0.6 s a run)."""
    try:
        with open(path) as stream:  # a YAML error then names the file, not '<unicode string>'
            return yamlfile.load(stream)
    except yaml.YAMLError as exc:
        raise InputError(f"profile {path}: not valid YAML: {exc}") from None


def _resolve(name_or_path: str, base_dir: Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or "/" in name_or_path:
        cand = p if p.is_absolute() or p.exists() else base_dir / p
        if not cand.is_file():
            names = ", ".join(concrete(base_dir)) or "none"
            raise InputError(f"profile {name_or_path!r}: no such file {cand} (profiles here: {names})")
        return cand
    # a name: beside the file that names it (or the shipped ones), the shipped ones (a user's
    # profile may extend one), then ./thresholds/ of the current directory, where `signoff
    # calibrate --out thresholds/site.yaml` of an installed signoff writes a site profile
    looked = list(dict.fromkeys([base_dir / f"{name_or_path}.yaml", PROFILE_DIR / f"{name_or_path}.yaml",
                                 Path.cwd() / "thresholds" / f"{name_or_path}.yaml"]))
    found = next((c for c in looked if c.is_file()), None)
    if found is None:
        from signoff.slices import RENAMED
        names = ", ".join(concrete(base_dir)) or "none"
        now = RENAMED.get(name_or_path)
        cls, _, n = (now or "").partition("@")
        raise InputError(f"profile {name_or_path!r}: no such file (looked for "
                         f"{' and '.join(map(str, looked))})"
                         + (f"; {name_or_path} is now {now} ({n} of {cls}'s 8 GPUs, a slice)" if now else "")
                         + "; a profile elsewhere: pass its path, --profile PATH.yaml (profiles here: "
                         + f"{names})")
    return found


def naming(path) -> str:
    """What --profile names the profile file `path` by: its name where that finds this very file
    (thresholds/ shipped, or of the current directory), else its absolute path."""
    path = Path(path).resolve()
    try:
        if _resolve(path.stem, PROFILE_DIR).resolve() == path:
            return path.stem
    except InputError:
        pass
    return str(path)


def _check_hardware(hw, path):
    if not isinstance(hw, dict):
        raise InputError(f"{_where(path, 'hardware')}: expected a mapping")
    for key, val in hw.items():
        w = _where(path, f"hardware.{key}")
        if key not in HARDWARE_KEYS:
            raise InputError(f"{w}: unknown key (allowed: {', '.join(sorted(HARDWARE_KEYS))})")
        if key == "gpu_model" and val is not None:
            try:
                re.compile(str(val))
            except re.error as exc:
                raise InputError(f"{w}: not a valid regular expression: {exc}") from None
        if key in ("gpu_count", "nvlinks", "pcie_gen", "pcie_width") and val is not None \
                and (isinstance(val, bool) or not isinstance(val, int) or val < 1):
            raise InputError(f"{w}: expected a positive integer or null, got {val!r}")
        if key == "interconnect" and val not in INTERCONNECTS:
            raise InputError(f"{w}: expected one of {sorted(INTERCONNECTS)}, got {val!r}")
        if key in ("mig", "nvls", "peer_access", "ecc", "nvlink_fabric", "large_bar", "uvm_disable_hmm") \
                and val is not None \
                and not isinstance(val, bool):
            raise InputError(f"{w}: expected true, false or null, got {val!r}")
        if key == "host_link" and val is not None and val not in HOST_LINKS:
            raise InputError(f"{w}: expected one of {sorted(HOST_LINKS)}, got {val!r}")
        if key == "pci_ids" and val is not None and not (
                isinstance(val, list) and val and all(isinstance(x, str) and re.fullmatch(r"[0-9a-f]{4}", x)
                                                      for x in val)):
            raise InputError(f"{w}: expected a list of PCI device ids, 4 lower-case hex digits "
                             f"each (e.g. [\"2941\"]), got {val!r}")


def _check_domain(hw: dict, path) -> None:
    """`nvlink_domain`: the GPUs of one NVLink domain (an NVL72 rack: 72), or the smaller
    partition a site declares; whole hosts of gpu_count GPUs (checked on the merged hardware:
    a site's profile may set either)."""
    dom, count = hw.get("nvlink_domain"), hw.get("gpu_count")
    if dom is not None and (isinstance(dom, bool) or not isinstance(dom, int) or dom < 1
                            or (count and dom % count)):
        raise InputError(f"{_where(path, 'hardware.nvlink_domain')}: expected the GPUs of one NVLink "
                         f"domain (or the site's partition of it), a positive multiple of gpu_count "
                         f"({count}), got {dom!r}")


def _baseline(inherited: dict, sec, path) -> dict:
    """`baseline: {tolerance: 5%, criteria: {storage_read_seq: 10%}}`: how far a figure may move
    the wrong way against --baseline before it regressed, over the parent's."""
    w = _where(path, "baseline")
    if not isinstance(sec, dict) or set(sec) - {"tolerance", "criteria"} \
            or not isinstance(sec.get("criteria") or {}, dict):
        raise InputError(f"{w}: expected a mapping of tolerance (5%) and criteria (criterion: 10%)")
    out = {**inherited, "criteria": dict(inherited.get("criteria", {}))}
    try:
        if "tolerance" in sec:
            out["tolerance"] = parse_fraction(sec["tolerance"])
        for name, val in (sec.get("criteria") or {}).items():
            if name not in families.criteria():
                raise InputError(f"{w}.criteria.{name}: unknown criterion")
            out["criteria"][name] = parse_fraction(val)
    except ValueError as exc:
        raise InputError(f"{w}: {exc}") from None
    return out


def _threshold(name, spec, path, profile) -> Threshold:
    w = _where(path, f"criteria.{name}")
    known = families.criteria()
    if name not in known:
        raise InputError(f"{w}: unknown criterion (known: {', '.join(sorted(known))})")
    if not isinstance(spec, dict):
        raise InputError(f"{w}: expected a mapping with one of min/max/equals, unit and source")
    allowed = set(LIMIT_KEYS) | {"unit", "source", "provisional"} | set(known[name].get("extra", ())) \
        | ({"derived"} if known[name].get("derived") else set()) \
        | (set(retry.KEYS) if known[name].get("retry") else set()) \
        | ({"fleet_min"} if known[name].get("fleet") else set())  # signoff/retry.py, outlier.py
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise InputError(f"{w}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")
    limits = [k for k in LIMIT_KEYS if k in spec]
    if len(limits) != 1 or spec[limits[0]] is None:
        raise InputError(f"{w}: needs exactly one threshold (min, max or equals); got {limits or 'none'}")
    op, value = limits[0], spec[limits[0]]
    # the direction is the criterion's, not the file's: `max:` on a bandwidth would pass anything
    ops = known[name].get("ops", ("min",))
    if op not in ops:
        raise InputError(f"{w}.{op}: {name} takes {' or '.join(ops)}, not {op}")
    kind = known[name]["type"]
    if kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise InputError(f"{w}.{op}: expected a number, got {value!r}")
    # A floor at or below 0 passes every figure (none is negative); a ceiling below 0 none.
    if kind == "number" and op == "min" and value <= 0:
        raise InputError(f"{w}.min: {value!r} can never fail (no figure is below it): set a floor "
                         f"above 0, or `uncalibrated: \"<why>\"`")
    if kind == "number" and op == "max" and value < 0:
        raise InputError(f"{w}.max: {value!r} can never pass (no count or temperature is below 0)")
    if kind == "name" and (not isinstance(value, str) or not value.strip()):  # e.g. a transport
        raise InputError(f"{w}.{op}: expected a name, got {value!r}")
    if kind == "version" and not isinstance(value, str):  # YAML reads 525.60 as 525.6
        raise InputError(f"{w}.{op}: quote a version ('{value}'), or YAML reads it as a number")
    if kind == "version" and not version_tuple(value):
        raise InputError(f"{w}.{op}: expected a version like '525.60' , got {value!r}")
    for key in ("unit", "source"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise InputError(f"{w}.{key}: missing (every threshold needs a unit and a source)")
    provisional = spec.get("provisional", "")
    if "provisional" in spec and (not isinstance(provisional, str)
                                  or not provisional.startswith("derived:")
                                  or not provisional.removeprefix("derived:").strip()):
        raise InputError(f"{w}.provisional: expected \"derived: <the rule>\" (how the figure was "
                         f"derived from other figures), got {provisional!r}")
    if "derived" in spec:
        _derived(known[name]["derived"], spec, w)
    extra = {k: v for k, v in spec.items() if k not in (*LIMIT_KEYS, "unit", "source", "provisional")}
    if "fleet_min" in extra:
        _fleet_min(extra["fleet_min"], f"{w}.fleet_min")
    if known[name].get("retry"):
        retry.check(extra, w)
    check = getattr(families.family(name), "check_extra", None)
    if check:  # the family's own rules for its extra keys
        check(name, value, extra, w)
    return Threshold(name, op, value, spec["unit"], spec["source"], profile, extra, provisional)


def _derived(rules: dict, spec: dict, w: str) -> None:
    """`derived: <rule>`: one of the family's rules, its unit, a fraction in (0, 1] as `min`
    (above 1 no host could reach its own figure), and the rule said in `provisional:`."""
    rule = spec["derived"]
    if rule not in rules:
        raise InputError(f"{w}.derived: expected one of {', '.join(sorted(rules))}, got {rule!r}")
    if spec.get("unit") != rules[rule]:
        raise InputError(f"{w}.unit: derived: {rule} judges a fraction: unit {rules[rule]!r}, "
                         f"got {spec.get('unit')!r}")
    v = spec.get("min")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise InputError(f"{w}.min: derived: {rule} takes a fraction in (0, 1], e.g. 0.9, got {v!r}")
    if "provisional" not in spec:
        raise InputError(f"{w}.provisional: derived: {rule} needs its rule said "
                         f"(\"derived: <how the figure is worked out>\")")


def _merge(name, spec, inherited: dict, inherited_from: dict, path) -> tuple[dict, dict]:
    """A child's criterion entry over the one it inherits: each key it sets overrides that key
    alone, so the parent's other keys (size, runtime...) still apply; a key set to null drops the
    inherited one (the family's default applies). The threshold proper (limit, unit, source,
    provisional, and the keys its family says qualify the limit, `with_limit`: the aggregate's
    `per`) is one piece: a child that sets any of it sets the limit, unit, source and each such
    key the parent set, since the parent's source cites the parent's figure, not the child's.
    Returns the merged entry and, per key, the file that set it."""
    if not isinstance(spec, dict):
        return spec, {}  # _threshold refuses it, naming the key
    group = {*THRESHOLD_KEYS, *families.criteria().get(name, {}).get("with_limit", ())}
    own = set(spec) & group
    if inherited and own and set(spec) & set(LIMIT_KEYS):  # no limit: _threshold says it needs one
        lacking = [k for k in ("unit", "source") if k not in spec]
        lacking += [k for k in sorted(group - set(THRESHOLD_KEYS)) if k in inherited and k not in spec]
        if lacking:
            qual = sorted(group - set(THRESHOLD_KEYS))
            was = " ".join(f"{k} {inherited[k]}" for k in LIMIT_KEYS if k in inherited)
            was += f" {inherited.get('unit', '')}".rstrip()
            was += "".join(f", {k}: {inherited[k]}" for k in qual if k in inherited)
            raise InputError(
                f"{_where(path, f'criteria.{name}')}: sets {', '.join(sorted(own))} but not "
                f"{', '.join(lacking)}: a threshold's limit, unit, source{''.join(', ' + k for k in qual)} "
                f"go together, never inherited one by one (the inherited {was} is "
                f"{inherited_from.get('source', 'the parent')}'s, with its source); "
                f"set {', '.join(lacking)} too" + (" (null: the family's default)"
                                                    if set(lacking) - {"unit", "source"} else ""))
    keep = {k: v for k, v in inherited.items() if not (own and k in group)}
    merged = {**keep, **spec}
    origin = {k: f for k, f in inherited_from.items() if k in keep}
    for key, val in spec.items():
        if val is None and key not in LIMIT_KEYS:  # `size: null`: the family's default, said
            merged.pop(key)
            origin.pop(key, None)
        else:
            origin[key] = str(path)
    return merged, origin


def resolved(profile: Profile) -> dict:
    """The profile as it applies after `extends`, for a person to read (`signoff show-profile`):

        {"profile": name, "path": its file, "extends": [every file of the chain, the root first],
         "abstract": bool, "description": str,
         "hardware": {key: value},
         "criteria": {criterion: {key: {"value": v, "from": the file that set it}}},
         "sections": {"soak": {...}, ...},        # family sections, merged over the chain
         "baseline": {...}}                       # --baseline tolerances

    Every key of a criterion's entry is listed with the file in the chain that set it (a child
    overrides only the keys it sets). An uncalibrated criterion has the one key `uncalibrated`
    (why no threshold); a criterion the chain drops (`criterion: null`) is absent, as is one no
    file sets: both ERROR when checked. A fleet-judged criterion (docs/thresholds.md) also shows
    the `fleet_min` that applies: its own, the profile's top-level one, or signoff's default for a
    class profile (from "signoff default (signoff/outlier.py)"). Keys no file sets take the
    family's defaults (e.g. storage size), which are not listed. Pure: reads no file."""
    crits = {}
    for cname in sorted(profile.specs):
        entry = {k: {"value": v, "from": profile.origins[cname].get(k, profile.path)}
                 for k, v in profile.specs[cname].items()}
        t = profile.criteria.get(cname)
        if t is not None and known_fleet(cname) and "fleet_min" not in entry and t.fleet_min is not None:
            entry["fleet_min"] = {"value": t.fleet_min, "from": profile.fleet_min_from
                                  or "signoff default (signoff/outlier.py)"}
        crits[cname] = entry
    return {"profile": profile.name, "path": profile.path, "extends": list(profile.files),
            "abstract": profile.abstract, "description": profile.description,
            "hardware": dict(profile.hardware), "criteria": crits,
            "sections": {k: dict(v) for k, v in profile.sections.items()},
            "baseline": dict(profile.baseline)}


def _fleet_min(v, where: str) -> float:
    """A fraction of the fleet's median in (0, 1]: 0 or more than 1 could never fail or always would."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
        raise InputError(f"{where}: expected a fraction of the fleet's median in (0, 1], e.g. 0.9, got {v!r}")
    return float(v)


def _uncalibrated(name, spec, path) -> str | None:
    """`criterion: {uncalibrated: "why, and how to calibrate"}`: the reason, else None."""
    if not isinstance(spec, dict) or "uncalibrated" not in spec:
        return None
    w = _where(path, f"criteria.{name}")
    if name not in families.criteria():
        raise InputError(f"{w}: unknown criterion (known: {', '.join(sorted(families.criteria()))})")
    if set(spec) != {"uncalibrated"}:
        raise InputError(f"{w}.uncalibrated: stands alone (no threshold beside it), got "
                         f"{', '.join(sorted(set(spec) - {'uncalibrated'}))}")
    why = spec["uncalibrated"]
    if not isinstance(why, str) or not why.strip():
        raise InputError(f"{w}.uncalibrated: expected the reason and how to calibrate, got {why!r}")
    return why.strip()


def digest(profile: Profile) -> str:
    """sha256 over the bytes of every file of the profile's chain, the root first: the same
    digest is the same thresholds, wherever the files sit (results.json meta.profile_sha256)."""
    h = hashlib.sha256()
    for f in profile.files:
        h.update(Path(f).read_bytes())
    if profile.slice_of:  # N GPUs of the class: other thresholds than its own
        h.update(f"@{profile.hardware.get('gpu_count')}".encode())
    return h.hexdigest()


def load(name_or_path: str, base_dir: Path = PROFILE_DIR, _seen: tuple = ()) -> Profile:
    from signoff import slices
    whole, n = slices.split(name_or_path)
    if n is not None:  # "<class>@<N>": N GPUs of the class
        return slices.make(load(whole, base_dir, _seen), n)
    path = _resolve(name_or_path, base_dir)
    if str(path) in _seen:
        raise InputError(f"profile {path}: extends itself (chain: {' -> '.join(_seen)})")
    data = _read(path)
    name = str(data.get("name") or path.stem)
    parent = None
    if data.get("extends"):
        try:
            parent = load(str(data["extends"]), path.parent, (*_seen, str(path)))
        except InputError as exc:
            if str(path) in str(exc):
                raise
            raise InputError(f"{_where(path, 'extends')}: {exc}") from None
    hardware = dict(parent.hardware) if parent else {}
    hw = data.get("hardware") or {}
    _check_hardware(hw, path)
    hardware.update(hw)
    _check_domain(hardware, path)
    criteria = {}
    if parent:
        # Inherited thresholds keep their values but are judged under the child's name.
        criteria = {k: replace(t, profile=name) for k, t in parent.criteria.items()}
    uncalibrated = dict(parent.uncalibrated) if parent else {}
    crit = data.get("criteria") or {}
    if not isinstance(crit, dict):
        raise InputError(f"{_where(path, 'criteria')}: expected a mapping of criterion -> threshold")
    specs = {k: dict(v) for k, v in parent.specs.items()} if parent else {}
    origins = {k: dict(v) for k, v in parent.origins.items()} if parent else {}
    for cname, spec in crit.items():
        if spec is None and (cname in criteria or cname in uncalibrated):  # drops an inherited one
            criteria.pop(cname, None)
            uncalibrated.pop(cname, None)
            specs.pop(cname, None)
            origins.pop(cname, None)
            continue
        why = _uncalibrated(cname, spec, path)
        if why is not None:
            criteria.pop(cname, None)
            uncalibrated[cname] = why
            specs[cname], origins[cname] = {"uncalibrated": why}, {"uncalibrated": str(path)}
            continue
        uncalibrated.pop(cname, None)
        inherited = (specs[cname], origins[cname]) if cname in criteria else ({}, {})
        specs[cname], origins[cname] = _merge(cname, spec, *inherited, path)
        criteria[cname] = _threshold(cname, specs[cname], path, name)
    sections = dict(parent.sections) if parent else {}
    for key, merge in families.sections().items():
        if data.get(key) is not None:
            sections[key] = merge(sections.get(key, {}), data[key], _where(path, key))
    fleet_min = parent.own_fleet_min if parent else None
    fleet_min_from = parent.fleet_min_from if parent else ""
    if data.get("fleet_min") is not None:
        fleet_min = _fleet_min(data["fleet_min"], _where(path, "fleet_min"))
        fleet_min_from = str(path)
    # Hosts of a hardware class are compared with each other by default; a profile of no class
    # (local: any CPU machine) only where it sets fleet_min, since its hosts may differ.
    default = fleet_min if fleet_min is not None else \
        outlier.FLEET_MIN if (hardware.get("gpu_model") or hardware.get("gpu_count")) else None
    for cname, t in criteria.items():  # the criterion's own, else the profile's (inherited) default
        if known_fleet(cname):
            criteria[cname] = replace(t, fleet_min=t.extra.get("fleet_min", default))
    base = dict(parent.baseline) if parent else {}
    if data.get("baseline") is not None:
        base = _baseline(base, data["baseline"], path)
    cuts = parent.slices if parent else {}
    if data.get("slices") is not None:
        cuts = slices.section(cuts, data["slices"], path, hardware.get("gpu_count"))
    out = Profile(
        baseline=base,
        name=name,
        path=str(path),
        description=str(data.get("description") or (parent.description if parent else "")),
        abstract=bool(data.get("abstract", False)),
        hardware=hardware,
        criteria=criteria,
        chain=[*(parent.chain if parent else []), name],
        sections=sections,
        uncalibrated=uncalibrated,
        own_fleet_min=fleet_min,
        files=[*(parent.files if parent else []), str(path)],
        specs=specs,
        origins=origins,
        fleet_min_from=fleet_min_from,
        slices=cuts,
        slice_of=parent.slice_of if parent else "",  # a site's profile of a slice is one too
        full_count=parent.full_count if parent else None,
    )
    for mod in families.modules():  # a family's rules over the whole profile (its class too)
        if hasattr(mod, "check_profile"):
            mod.check_profile(out, _where(path, "criteria"))
    return out


def known_fleet(criterion: str) -> bool:
    """Whether a criterion's figure is also judged against the fleet (its family's CRITERIA)."""
    return bool(families.criteria()[criterion].get("fleet"))


def available(base_dir: Path = PROFILE_DIR) -> list[str]:
    """Every profile file's name, the class bases (abstract: true) among them."""
    return sorted(p.stem for p in base_dir.glob("*.yaml"))


def concrete(base_dir: Path = PROFILE_DIR) -> list[str]:
    """The profiles one signs off with: available() less the class bases (`abstract: true`, the
    file's own key: it is not inherited), whose variant --profile picks (variants()). A file
    that does not parse is kept: loading it says what is wrong."""
    out = []
    for name in available(base_dir):
        try:
            data = yaml.safe_load((base_dir / f"{name}.yaml").read_text())
        except (OSError, yaml.YAMLError):
            data = None
        if not (isinstance(data, dict) and data.get("abstract")):
            out.append(name)
    return out


def matches(profile: Profile, hw: dict) -> list[str]:
    """Why a host's hardware (gpu_model, gpu_count, nvlink) is not of the profile's class;
    an empty list means it is."""
    want = profile.hardware
    why = []
    if want.get("gpu_model") and not re.fullmatch(want["gpu_model"], hw.get("gpu_model") or ""):
        ids, dev = want.get("pci_ids"), hw.get("pci_device_id")
        if hw.get("gpu_model") in GENERIC_NAMES and ids:  # no product name: the PCI id decides
            if dev not in ids:
                why.append(f"GPU model {hw['gpu_model']} (PCI device {dev or 'unread'}) is not "
                           f"{want['gpu_model']} (PCI device {' or '.join(ids)})")
        else:
            why.append(f"GPU model {hw.get('gpu_model') or 'none'} is not {want['gpu_model']}")
    if want.get("gpu_count") and hw.get("gpu_count") != want["gpu_count"]:
        why.append(f"{hw.get('gpu_count', 0)} GPUs where {want['gpu_count']} are expected")
    if want.get("interconnect") == "nvlink" and not hw.get("nvlink"):
        why.append("no NVLink where NVLink is required")
    if want.get("interconnect") == "pcie" and hw.get("nvlink"):
        why.append("NVLink present where a PCIe-only class is expected")
    return why


# Picking a profile from the hosts' hardware (--profile auto, a class base): signoff/picking.py
# it reads this module's load and matches, so it comes last
from signoff.picking import auto_select, hardware_text, in_class, model_text, pick_variant, variants  # noqa: E402

__all__ = ["auto_select", "hardware_text", "in_class", "model_text", "pick_variant", "variants"]
