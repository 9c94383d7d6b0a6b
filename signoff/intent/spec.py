"""The intent file: what the contract says each host is (docs/running.md, The intended build).
Every key is checked here, once, before any host is touched: one InputError naming the file and
the key; a key it does not know is refused (a typo must never leave a part unjudged)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from signoff import InputError, yamlfile

TOP = {"description", "versions", "firmware", "kernel", "hardware", "cabling"}
# key -> what it is, where sysinfo reads it (signoff/intent/judge.py VERSIONS)
VERSIONS = {"driver": "the NVIDIA driver", "cuda": "the CUDA driver API (nvidia-smi's CUDA Version)",
            "torch": "torch", "torch_cuda": "torch's CUDA build", "nccl": "NCCL (torch's)"}
FIRMWARE = {"vbios": "the GPUs' VBIOS, per GPU model", "nic": "the NICs' firmware, per NIC model"}
HARDWARE = {"gpus": "GPUs per host", "nics": "NICs per host (a number, or per NIC model)",
            "bar1_mib": "each GPU's BAR1 size in MiB (a number, or a range: '>=65536')"}
UVM = "uvm_disable_hmm"  # nvidia_uvm's module parameter (sysfs), the one kernel key not on the command line
KERNEL_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}")
RANGE_OPS = ("<", ">", "=", "!", "~")


@dataclass(frozen=True)
class Match:
    """An intended value: exact ('570.133.20') or a range ('>=570.86, <580', packaging's
    SpecifierSet, PEP 440): `ok(found)` says whether a host's value is one."""
    text: str

    @property
    def exact(self) -> bool:
        return not self.text.startswith(RANGE_OPS)

    def ok(self, found) -> bool | None:
        """True, False, or None where `found` cannot be compared with a range (not a version).
        ethtool's firmware-version of a ConnectX carries its board id: '28.41.1000 (MT_0000000838)'
        is 28.41.1000."""
        found = str(found).strip()
        found = found.split()[0] if found.endswith(")") and " (" in found else found
        if self.exact:
            try:  # 2.6.0+cu124 is torch 2.6.0; 96.00.99 is 96.0.99
                return Version(found) in SpecifierSet("==" + self.text)
            except (InvalidVersion, InvalidSpecifier):
                return found == self.text
        try:
            return SpecifierSet(self.text).contains(Version(found), prereleases=True)
        except InvalidVersion:
            return None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Intent:
    path: str
    sha256: str
    description: str = ""
    versions: dict = field(default_factory=dict)  # key -> Match
    vbios: dict = field(default_factory=dict)  # GPU model -> Match
    nic_firmware: dict = field(default_factory=dict)  # NIC model -> Match
    kernel: dict = field(default_factory=dict)  # parameter -> str | bool
    hardware: dict = field(default_factory=dict)  # gpus: int, nics: int | {model: int}, bar1_mib: Match
    cabling: dict = field(default_factory=dict)  # host -> {port: {"switch", "port"}}

    def source(self) -> str:
        return f"intent file {self.path} (sha256 {self.sha256[:12]})"

    def sets(self, section: str) -> bool:
        """Whether it says anything of `section` (versions, firmware, kernel, hardware, cabling)."""
        return bool(self.vbios or self.nic_firmware if section == "firmware" else getattr(self, section))

    def meta(self) -> dict:
        """What results.json's meta says of it (the cover's section reads it)."""
        return {"file": self.path, "sha256": self.sha256, "description": self.description}


def _mapping(v, where: str, allowed: dict | set | None = None) -> dict:
    if not isinstance(v, dict):
        raise InputError(f"{where}: expected a mapping, got {v!r}")
    if allowed is not None:
        unknown = sorted(str(k) for k in set(v) - set(allowed))
        if unknown:
            raise InputError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")
    return v


def match(v, where: str, numbers: bool = False) -> Match:
    """A quoted version or range; a YAML number is refused (12.10 would read as 12.1) unless
    `numbers` (a size)."""
    if numbers and isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return Match(str(v))
    if not isinstance(v, str) or not v.strip():
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        hint = " (a number: quote it, '12.8')" if number else ""
        raise InputError(f"{where}: expected a quoted version or a range such as '>=570.86, <580', "
                         f"got {v!r}{hint}")
    text = v.strip()
    if text.startswith(RANGE_OPS):
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier as exc:
            raise InputError(f"{where}: {text!r} is not a range packaging reads (PEP 440 specifiers, "
                             f"comma-separated: '>=570.86, <580'): {exc}") from None
        if not len(spec):
            raise InputError(f"{where}: {text!r} is an empty range")
    return Match(text)


def _count(v, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InputError(f"{where}: expected a whole number >= 0, got {v!r}")
    return v


def _name(v, where: str) -> str:
    if not isinstance(v, (str, int)) or isinstance(v, bool) or not str(v).strip():
        raise InputError(f"{where}: expected a name, got {v!r}")
    return str(v).strip()


def _models(v, where: str) -> dict:
    out = {}
    for model, want in _mapping(v, where).items():
        out[_name(model, f"{where} (a model)")] = match(want, f"{where}.{model}")
    if not out:
        raise InputError(f"{where}: empty (name a model and its version, or leave the key out)")
    return out


def _kernel(v, where: str) -> dict:
    out = {}
    for key, want in _mapping(v, where).items():
        if not isinstance(key, str) or not KERNEL_KEY.fullmatch(key):
            raise InputError(f"{where}: {key!r} is not a kernel parameter name (letters, digits, _ . -)")
        if key == UVM:
            if want not in (True, False, "Y", "N", 1, 0):
                raise InputError(f"{where}.{key}: expected true or false (nvidia_uvm's Y or N), got {want!r}")
            out[key] = want in (True, "Y", 1)
        elif isinstance(want, bool):  # true: on the command line (any value), false: not on it
            out[key] = want
        elif isinstance(want, (str, int)) and str(want).strip() and not re.search(r"\s", str(want)):
            out[key] = str(want)
        else:
            raise InputError(f"{where}.{key}: expected the value it must have (one word: pt, off, 1), "
                             f"true (present) or false (absent), got {want!r}")
    return out


def _hardware(v, where: str) -> dict:
    out = {}
    for key, want in _mapping(v, where, HARDWARE).items():
        w = f"{where}.{key}"
        if key == "gpus":
            out[key] = _count(want, w)
        elif key == "nics":
            out[key] = _count(want, w) if not isinstance(want, dict) else \
                {_name(m, f"{w} (a model)"): _count(n, f"{w}.{m}") for m, n in want.items()}
        else:
            out[key] = match(want, w, numbers=True)
    return out


def _cabling(v, where: str, hosts: set[str] | None) -> dict:
    out = {}
    for host, ports in _mapping(v, where).items():
        h = _name(host, f"{where} (a host)")
        if hosts is not None and h not in hosts:
            raise InputError(f"{where}.{h}: no such host in the inventory (a typo would leave its cabling "
                             f"unjudged)")
        out[h] = {}
        for port, peer in _mapping(ports, f"{where}.{h}").items():
            w = f"{where}.{h}.{port}"
            peer = _mapping(peer, w, {"switch", "port"})
            if set(peer) != {"switch", "port"}:
                raise InputError(f"{w}: expected switch: and port: (the neighbour LLDP should show)")
            out[h][_name(port, w)] = {k: _name(peer[k], f"{w}.{k}") for k in ("switch", "port")}
    return out


def load(path: str | Path, hosts: set[str] | None = None) -> Intent:
    """The intent file at `path`, checked; `hosts`: the inventory's names its cabling may name."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"intent {path}: file not found") from None
    except OSError as exc:
        raise InputError(f"intent {path}: cannot read it: {exc.strerror or exc}") from None
    try:
        data = yamlfile.load(raw)
    except yaml.YAMLError as exc:
        raise InputError(f"intent {path}: not valid YAML: {exc}") from None
    where = f"intent {path}"
    _mapping(data, where, TOP)
    if not set(data) - {"description"}:
        raise InputError(f"{where}: sets nothing to judge (keys: {', '.join(sorted(TOP - {'description'}))})")
    versions = {k: match(v, f"{where}: versions.{k}") for k, v in
                _mapping(data.get("versions") or {}, f"{where}: versions", VERSIONS).items()}
    fw = _mapping(data.get("firmware") or {}, f"{where}: firmware", FIRMWARE)
    desc = data.get("description") or ""
    if not isinstance(desc, str):
        raise InputError(f"{where}: description: expected text, got {desc!r}")
    return Intent(
        path=str(path), sha256=hashlib.sha256(raw).hexdigest(), description=desc.strip(), versions=versions,
        vbios=_models(fw["vbios"], f"{where}: firmware.vbios") if "vbios" in fw else {},
        nic_firmware=_models(fw["nic"], f"{where}: firmware.nic") if "nic" in fw else {},
        kernel=_kernel(data.get("kernel") or {}, f"{where}: kernel"),
        hardware=_hardware(data.get("hardware") or {}, f"{where}: hardware"),
        cabling=_cabling(data.get("cabling") or {}, f"{where}: cabling", hosts))
