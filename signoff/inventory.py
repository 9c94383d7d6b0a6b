"""Hosts under test: from ``--hosts`` (hostlist) or ``--inventory FILE`` (YAML)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from signoff import InputError, yamlfile
from signoff.hostlist import check_name, expand, fold

HOST_KEYS = {"name", "address", "port", "user", "identity_file", "python", "tags", "env",
             "data_iface"}
HOST_KEYS |= {"storage_path", "storage_readonly"}  # the directory the storage checks read
TOP_KEYS = {"hosts", "defaults", "known_hosts", "intent"}  # intent: the intended build (signoff/intent)
LOCAL = "local"


@dataclass(frozen=True)
class Host:
    name: str
    address: str | None = None  # None: ssh to `name` (ssh_config may map it)
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    python: str = "python3"  # the interpreter the probes use: the user's training env
    tags: tuple = field(default_factory=tuple)
    env: dict = field(default_factory=dict)  # set for every probe (e.g. NCCL_SOCKET_IFNAME)
    storage_path: str | None = None  # directory the storage checks read (--storage-path wins)
    storage_readonly: bool = False  # measure the files there, write nothing
    data_iface: str | None = None  # the interface inter-node traffic is measured on
    # Set when the probes run in signoff's own environment instead of a training environment:
    # what every report says of it ("signoff's own (torch 2.13.0), not a training environment")
    probe_env: str | None = None

    def __post_init__(self):
        check_name(self.name, "host")  # a name becomes a file name (hosts/<name>.json): never a path

    @property
    def local(self) -> bool:
        return self.address == LOCAL

    def __str__(self) -> str:
        return self.name


@dataclass
class Inventory:
    hosts: list[Host]
    known_hosts: str | None = None
    source: str = "default"
    # host -> why the run leaves it out (--hosts, --tags, --exclude-hosts, a Slurm node the
    # --inventory lacks): every output names them, so no one takes them as checked
    excluded: dict[str, str] = field(default_factory=dict)
    intent: str | None = None  # the intent file it names (resolved against its directory); --intent wins


def select(inv: Inventory, where: str, hosts: str | None = None, tags: str | None = None,
           exclude: str | None = None) -> Inventory:
    """The run's hosts out of `inv` (an inventory file, a Slurm allocation, a --hosts list),
    in its order: those `hosts` names (a hostlist), then those that carry any of `tags`
    (TAG[,TAG]), then all but `exclude` (a hostlist; blank: none). A name or tag that `inv`
    lacks is refused naming `where` (what `inv` is): a typo must never quietly shrink a
    sign-off, nor an exclusion leave nothing to sign off. Each host of `inv` left out is in
    the result's `excluded` with why."""
    chosen, said, excluded = list(inv.hosts), [], {}
    if hosts is not None:
        named = set(expand(hosts))
        have = {h.name for h in inv.hosts}
        if named - have:
            raise InputError(f"--hosts {hosts}: {fold(named - have)} not in {where} ({fold(have)})")
        excluded.update((h.name, f"not in --hosts {hosts}") for h in chosen if h.name not in named)
        chosen = [h for h in chosen if h.name in named]
        said.append(f"--hosts {hosts}")
    if tags is not None:
        want = {t.strip() for t in tags.split(",") if t.strip()}
        if not want:
            raise InputError("--tags is empty (an unset variable?): name the tags or leave it out")
        known = list(dict.fromkeys(t for h in inv.hosts for t in h.tags))
        unknown = sorted(want - set(known))
        if unknown:
            raise InputError(f"--tags {tags}: no host of {where} has tag {', '.join(unknown)} ("
                             + (f"its tags: {', '.join(known)})" if known else
                                "its hosts have no tags: an inventory's hosts have them, tags: [...])"))
        excluded.update((h.name, f"not tagged {tags} (its tags: {', '.join(h.tags) or 'none'})")
                        for h in chosen if not want & set(h.tags))
        chosen = [h for h in chosen if want & set(h.tags)]
        if not chosen:  # only --hosts can leave none: each known tag is some host's
            raise InputError(f"--hosts {hosts} --tags {tags}: none of those hosts has any of those tags")
        said.append(f"--tags {tags}")
    if exclude is not None and exclude.strip():  # blank: nothing to leave out (an empty CI variable)
        drop = set(expand(exclude))
        run = [h.name for h in chosen]
        outside = drop - set(run)
        if outside:
            raise InputError(f"--exclude-hosts {exclude}: {fold(outside)} not among this run's hosts "
                             f"({fold(run)})")
        excluded.update((n, "excluded by --exclude-hosts") for n in run if n in drop)
        chosen = [h for h in chosen if h.name not in drop]
        if not chosen:
            raise InputError(f"--exclude-hosts {exclude} leaves no host to check (this run's hosts: "
                             f"{fold(run)})")
        said.append(f"--exclude-hosts {exclude}")
    if not said:
        return inv
    return Inventory(chosen, inv.known_hosts, f"{inv.source}: {' '.join(said)}", excluded, inv.intent)


OWN_ENV = "signoff's own (torch {torch}), not a training environment"


def torch_version(python: str) -> str | None:
    """The torch `python` has installed (without importing it: that takes seconds), or None."""
    try:
        r = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


def local_inventory(python: str | None = None) -> Inventory:
    """The embedded default: this machine, no SSH. Its probes run in `python` (--python: the
    user's training environment); without --python in the python3 on PATH, unless that has no
    torch and signoff's own environment (this interpreter, with the [probe] extra that `make
    accept` installs) has: then in that one, said so on every page (Host.probe_env)."""
    if python is not None:
        found = shutil.which(python)
        if not found:
            raise InputError(f"--python {python}: not found on PATH ({os.environ.get('PATH', '')}): name "
                             f"the training environment's interpreter, e.g. --python /opt/venv/bin/python")
        return _this_machine(found)
    found = shutil.which("python3")
    if found and torch_version(found):
        return _this_machine(found)
    own = torch_version(sys.executable)
    if own:
        return _this_machine(sys.executable, probe_env=OWN_ENV.format(torch=own),
                             source=f"default: this machine; python3 on PATH "
                                    f"({os.path.abspath(found) if found else 'none'}) has no torch")
    if not found:
        raise InputError(f"no python3 on PATH ({os.environ.get('PATH', '')}) and signoff's own "
                         f"environment has no torch: name the training environment's interpreter "
                         f"(--python /opt/venv/bin/python), or run `make accept`, which builds one")
    return _this_machine(found)


def _this_machine(python: str, probe_env: str | None = None, source: str = "default") -> Inventory:
    return Inventory([Host(name="localhost", address=LOCAL, python=os.path.abspath(python),
                           probe_env=probe_env)], source=source)


def from_hostlist(text: str, user: str | None = None, python: str = "python3") -> Inventory:
    hosts = [
        Host(name=n, address=LOCAL if n == LOCAL else None, user=user, python=python)
        for n in expand(text)
    ]
    return Inventory(hosts, source=f"--hosts {text}")


def _check_keys(mapping, allowed, where):
    if not isinstance(mapping, dict):
        raise InputError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise InputError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")


STRING_KEYS = ("name", "address", "user", "identity_file", "python", "data_iface", "storage_path")


def _host(entry: dict, defaults: dict, where: str, already: int = 0) -> list[Host]:
    _check_keys(entry, HOST_KEYS, where)
    merged = {**defaults, **entry}
    for key in STRING_KEYS:
        if merged.get(key) is not None and not isinstance(merged[key], (str, int)) \
                or isinstance(merged.get(key), bool):
            raise InputError(f"{where}.{key}: expected a string, got {merged[key]!r}")
    if not merged.get("name"):
        raise InputError(f"{where}.name: missing (every host needs a name)")
    entry_where, where = where, f"{where} ({merged['name']})"  # by its name too: one looks for nodeA
    if "address" in merged and not str(merged["address"] or "").strip():
        raise InputError(f"{where}.address: empty (give the host's address, or leave the key out "
                         f"to connect to its name)")
    port = merged.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise InputError(f"{where}.port: expected an integer 1-65535, got {port!r}")
    tags = merged.get("tags") or []
    if not isinstance(tags, list):
        raise InputError(f"{where}.tags: expected a list, got {tags!r}")
    env = merged.get("env") or {}
    if not isinstance(env, dict) or not all(str(k).isidentifier() for k in env):
        raise InputError(f"{where}.env: expected a mapping of VARIABLE: value, got {env!r}")
    spath = merged.get("storage_path")
    if spath is not None and not str(spath).startswith("/"):
        raise InputError(f"{where}.storage_path: expected an absolute directory, got {spath!r}")
    if not isinstance(merged.get("storage_readonly", False), bool):
        raise InputError(f"{where}.storage_readonly: expected true or false, "
                         f"got {merged['storage_readonly']!r}")
    try:
        names = expand(str(merged["name"]), already)
    except InputError as exc:  # the message quotes the name
        raise InputError(f"{entry_where}.name: {exc}") from None
    if len(names) > 1 and merged.get("address"):
        raise InputError(f"{entry_where}: a hostlist name ({merged['name']}) cannot share one address")
    return [
        Host(
            name=n,
            address=str(merged["address"]) if merged.get("address") else None,
            port=port,
            user=merged.get("user"),
            identity_file=str(Path(merged["identity_file"]).expanduser())
            if merged.get("identity_file") else None,
            python=str(merged.get("python") or "python3"),
            tags=tuple(str(t) for t in tags),
            env={str(k): str(v) for k, v in env.items()},
            storage_path=str(spath) if spath is not None else None,
            storage_readonly=bool(merged.get("storage_readonly", False)),
            data_iface=str(merged["data_iface"]) if merged.get("data_iface") else None,
        )
        for n in names
    ]


def load(path: str | Path) -> Inventory:
    path = Path(path)
    try:
        with path.open() as stream:  # a YAML error then names the file, not '<unicode string>'
            data = yamlfile.load(stream)
    except FileNotFoundError:
        raise InputError(f"inventory {path}: file not found") from None
    except yaml.YAMLError as exc:
        raise InputError(f"inventory {path}: not valid YAML: {exc}") from None
    _check_keys(data, TOP_KEYS, f"inventory {path}")
    defaults = data.get("defaults") or {}
    _check_keys(defaults, HOST_KEYS - {"name"}, f"inventory {path}: defaults")
    entries = data.get("hosts")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"inventory {path}: hosts: expected a non-empty list of hosts")
    hosts: list[Host] = []
    names, targets = {}, {}  # name / address:port -> the entry that has it
    for i, entry in enumerate(entries):
        where = f"inventory {path}: hosts[{i}]"
        for h in _host(entry, defaults, where, len(hosts)):
            if h.name in names:
                raise InputError(f"{where}: duplicate host name {h.name!r}")
            # Two names for one address: every check of the second would measure the first.
            target = f"{h.address or h.name}:{h.port or 22}"
            if target in targets:
                raise InputError(f"{where} ({h.name}) and {targets[target]} both reach {target}: "
                                 f"one machine under two names (a typo in an address?)")
            names[h.name], targets[target] = where, f"hosts[{i}] ({h.name})"
            hosts.append(h)
    known = data.get("known_hosts")
    if known is not None and not isinstance(known, str):
        raise InputError(f"inventory {path}: known_hosts: expected a file path, got {known!r}")
    if known is not None:
        known = Path(known).expanduser()
        known = str(known if known.is_absolute() else path.parent / known)
        # A named file that is not there is a typo; silently skipping it would turn every
        # host into an "unknown host key".
        if not Path(known).is_file():
            why = "is a directory, not a file" if Path(known).is_dir() else "no such file"
            raise InputError(f"inventory {path}: known_hosts: {known}: {why}")
    intent = data.get("intent")
    if intent is not None and (not isinstance(intent, str) or not intent.strip()):
        raise InputError(f"inventory {path}: intent: expected the intent file's path, got {intent!r}")
    if intent is not None:  # a relative path is the inventory's neighbour, as known_hosts is
        intent = Path(intent).expanduser()
        intent = str(intent if intent.is_absolute() else path.parent / intent)
    return Inventory(hosts, known_hosts=known, source=str(path), intent=intent)
