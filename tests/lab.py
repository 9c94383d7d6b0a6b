"""A multi-host test lab on one machine: one network namespace with a real sshd per host.

The controller-side veth ends share a Linux bridge in the root namespace, which holds
the controller address (.1); host N gets .N+1.  Needs root, iproute2 and openssh-server.
Stdlib + subprocess only, so it can be imported before anything else is installed.

    with Lab(tmp_path, n_hosts=3) as lab:
        lab.write_inventory(tmp_path / "inventory.yaml", python=sys.executable)
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import ipaddress
import itertools
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

SSHD = "/usr/sbin/sshd"
START_TIMEOUT_S = 10.0
_labs_in_process = itertools.count()
# Serialises name/subnet claims between concurrent labs (xdist workers, parallel runs).
_LOCK_FILE = (
    pathlib.Path("/run/lock" if os.path.isdir("/run/lock") else tempfile.gettempdir())
    / "signoff-lab.lock"
)


@dataclasses.dataclass(frozen=True)
class LabHost:
    name: str  # "lab1".."labN"
    address: str
    netns: str
    veth_controller: str  # in the root namespace, enslaved to the bridge
    veth_host: str  # inside netns


class Lab:
    def __init__(
        self,
        workdir: pathlib.Path,
        n_hosts: int = 3,
        prefix: str | None = None,
        subnet: str | None = None,
        containers: tuple[str, ...] = (),
    ):
        if not 1 <= n_hosts <= 250:
            raise ValueError(f"n_hosts must be 1..250, got {n_hosts}")
        self.workdir = pathlib.Path(workdir).resolve()
        self.n_hosts = n_hosts
        # Fixed length (8 chars), so two default prefixes can't alias ("ab"+"12c" == "ab1"+"2c").
        # The pid keeps xdist workers and parallel runs apart, the counter labs of one process.
        self.prefix = prefix or f"lb{os.getpid() % 0x100000:05x}{next(_labs_in_process) % 16:x}"
        if not re.fullmatch(r"[A-Za-z0-9_]+", self.prefix):
            raise ValueError(f"prefix must be alphanumeric/underscore: {self.prefix!r}")
        self.bridge = f"{self.prefix}br"
        if max(len(self.bridge), len(f"{self.prefix}{n_hosts}c")) > 15:  # IFNAMSIZ - 1
            raise ValueError(
                f"prefix {self.prefix!r} too long: interface names must stay <= 15 chars"
            )
        self._fixed_subnet = subnet is not None
        self._set_subnet(ipaddress.ip_network(subnet) if subnet else self._free_subnet())
        self.user_key = self.workdir / "user_key"
        self.known_hosts = self.workdir / "known_hosts"
        self.authorized_keys = self.workdir / "authorized_keys"
        self._links: list[str] = []  # root-namespace links we created (only these are deleted)
        self._netns: list[str] = []
        self._shaped: set[str] = set()
        self._sshds: dict[str, subprocess.Popen] = {}  # host name -> its sshd
        self._owner_pid: int | None = None
        # Hosts run as a container would be (issue 52): their sshd in a mount namespace of its own
        # with Docker's 64 MB /dev/shm and a /run holding podman's /.containerenv marker; a user
        # other than root logs in with keys it can read (_keys_dir).
        self.containers = tuple(containers)
        self._keys_dir: pathlib.Path | None = None

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> Lab:
        if self._owner_pid is not None:
            return self
        if os.geteuid() != 0:
            raise RuntimeError("Lab needs root (network namespaces, veths, sshd)")
        missing = [t for t in (SSHD, "ip", "tc", "ssh", "ssh-keygen") if not shutil.which(t)]
        if missing:
            raise RuntimeError(
                f"Lab needs {', '.join(missing)} (apt-get install openssh-server iproute2)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._owner_pid = os.getpid()
        atexit.register(self.close)  # safety net if the caller forgets / an exception escapes
        try:
            self._make_keys()
            with _locked():
                self._claim()
                self._make_network()
            self._write_known_hosts()
            self._start_sshds()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Remove everything this lab created; idempotent, never raises."""
        if self._owner_pid != os.getpid():  # never started, already closed, or a forked child
            return
        for name in list(self._sshds):
            with contextlib.suppress(Exception):
                self.stop_sshd(name)
        # Processes started over ssh (iperf3 -s, ...) outlive sshd and would pin the namespace.
        leftovers = []
        for ns in self._netns:
            out = _run(["ip", "netns", "pids", ns]).stdout
            leftovers += [int(p) for p in out.split() if p.isdigit()]
        for pid in leftovers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _wait_dead(leftovers, 3.0)
        for dev in sorted(self._shaped):
            _run(["tc", "qdisc", "del", "dev", dev, "root"])
        self._shaped.clear()
        for link in reversed(self._links):  # deleting a veth end removes its peer (and qdiscs)
            _run(["ip", "link", "del", link])
        self._links.clear()
        for ns in reversed(self._netns):
            _run(["ip", "netns", "del", ns])
        self._netns.clear()
        if self._keys_dir is not None:
            shutil.rmtree(self._keys_dir, ignore_errors=True)
            self._keys_dir = None
        self._owner_pid = None
        atexit.unregister(self.close)

    def __enter__(self) -> Lab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # ---------------------------------------------------------------- helpers for tests

    def ssh(
        self, host: LabHost | str, command: str, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        """Run command on host with the system ssh client (for debugging/tests); no check."""
        h = self.host(host)
        return subprocess.run(
            ["ssh", *self.ssh_options(), f"root@{h.address}", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def ssh_options(self) -> list[str]:
        opts = {
            "IdentitiesOnly": "yes", "BatchMode": "yes", "StrictHostKeyChecking": "yes",
            "UserKnownHostsFile": self.known_hosts, "GlobalKnownHostsFile": "/dev/null",
            "ConnectTimeout": 5, "LogLevel": "ERROR",
        }  # fmt: skip
        # -F /dev/null: ignore the ~/.ssh/config of whoever runs the tests.
        return ["-F", "/dev/null", "-i", str(self.user_key), *_dash_o(opts)]

    def stop_sshd(self, host: LabHost | str) -> None:
        """Kill host's listening sshd: its address still answers, port 22 now gets RST."""
        h = self.host(host)
        proc = self._sshds.pop(h.name, None)
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._pidfile(h).unlink(missing_ok=True)

    def shape(self, host: LabHost | str, rate: str) -> None:
        """Limit host's link to rate (tc syntax, e.g. "100mbit") in both directions."""
        h = self.host(host)
        tbf = ["root", "tbf", "rate", rate, "burst", "64kb", "latency", "50ms"]
        # Egress of the controller end limits traffic to the host, egress in the ns traffic from it.
        _run(["tc", "qdisc", "replace", "dev", h.veth_controller, *tbf], check=True)
        self._shaped.add(h.veth_controller)
        _run(["tc", "-n", h.netns, "qdisc", "replace", "dev", h.veth_host, *tbf], check=True)

    def write_inventory(
        self,
        path: pathlib.Path,
        python: str,
        overrides: dict[str, dict] | None = None,
        extra_hosts: list[dict] | None = None,
    ) -> pathlib.Path:
        overrides = overrides or {}
        unknown = set(overrides) - {h.name for h in self.hosts}
        if unknown:
            raise ValueError(f"overrides for unknown lab hosts: {sorted(unknown)}")
        inventory = {
            "known_hosts": str(self.known_hosts),
            "defaults": {
                "user": "root",
                "port": 22,
                "identity_file": str(self.user_key),
                "python": str(python),
            },
            "hosts": [
                {"name": h.name, "address": h.address, "tags": ["lab"], **overrides.get(h.name, {})}
                for h in self.hosts
            ]
            + list(extra_hosts or []),
        }
        path = pathlib.Path(path)
        path.write_text("\n".join(_yaml(inventory)) + "\n")
        return path

    def host(self, host: LabHost | str) -> LabHost:
        name = host.name if isinstance(host, LabHost) else host
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no lab host {name!r}")

    def sshd_pid(self, host: LabHost | str) -> int | None:
        return _read_pid(self._pidfile(self.host(host)))

    # ---------------------------------------------------------------- internals

    def _set_subnet(self, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        if net.version != 4 or net.num_addresses < self.n_hosts + 3:
            raise ValueError(f"subnet {net} is not IPv4 or too small for {self.n_hosts} hosts")
        self.subnet = net
        addrs = net.hosts()
        self.controller_address = str(next(addrs))
        p = self.prefix
        self.hosts = [
            LabHost(f"lab{i}", str(next(addrs)), f"{p}-lab{i}", f"{p}{i}c", f"{p}{i}h")
            for i in range(1, self.n_hosts + 1)
        ]

    def _free_subnet(self) -> ipaddress.IPv4Network:
        start = os.getpid() % 200
        for k in range(200):
            net = ipaddress.ip_network(f"10.231.{(start + k) % 200 + 20}.0/24")
            if not _subnet_in_use(net):
                return net
        raise RuntimeError("no free 10.231.20-219.0/24 subnet for the lab")

    def _claim(self) -> None:
        """Under the lock: check names and subnet are free, then take them (create the bridge)."""
        names = [self.bridge] + [n for h in self.hosts for n in (h.veth_controller, h.veth_host)]
        taken = [n for n in names if _run(["ip", "link", "show", "dev", n]).returncode == 0]
        existing_ns = set(_run(["ip", "netns", "list"]).stdout.split())
        taken += [h.netns for h in self.hosts if h.netns in existing_ns]
        if taken:
            raise RuntimeError(f"lab names already in use (leftover of a crashed run?): {taken}")
        if _subnet_in_use(self.subnet):
            if self._fixed_subnet:
                raise RuntimeError(f"subnet {self.subnet} is already in use on this machine")
            self._set_subnet(self._free_subnet())
        _run(["ip", "link", "add", self.bridge, "type", "bridge"], check=True)
        self._links.append(self.bridge)
        cidr = f"{self.controller_address}/{self.subnet.prefixlen}"
        _run(["ip", "addr", "add", cidr, "dev", self.bridge], check=True)
        _run(["ip", "link", "set", self.bridge, "up"], check=True)

    def _make_network(self) -> None:
        plen = self.subnet.prefixlen
        for h in self.hosts:
            _run(["ip", "netns", "add", h.netns], check=True)
            self._netns.append(h.netns)
            veth = ["type", "veth", "peer", "name", h.veth_host, "netns", h.netns]
            _run(["ip", "link", "add", h.veth_controller, *veth], check=True)
            self._links.append(h.veth_controller)
            _run(["ip", "link", "set", h.veth_controller, "master", self.bridge, "up"], check=True)
            _run(
                ["ip", "-n", h.netns, "addr", "add", f"{h.address}/{plen}", "dev", h.veth_host],
                check=True,
            )
            _run(["ip", "-n", h.netns, "link", "set", h.veth_host, "up"], check=True)
            _run(["ip", "-n", h.netns, "link", "set", "lo", "up"], check=True)

    def _make_keys(self) -> None:
        _keygen(self.user_key, "signoff-lab-user")
        self.authorized_keys.write_text(_pub(self.user_key).read_text())
        for h in self.hosts:  # one key per host, so known_hosts is a real check
            _keygen(self._hostkey(h), f"signoff-lab-{h.name}")

    def _write_known_hosts(self) -> None:
        lines = []
        for h in self.hosts:
            keytype, key = _pub(self._hostkey(h)).read_text().split()[:2]
            lines.append(f"{h.address} {keytype} {key}\n")
        self.known_hosts.write_text("".join(lines))

    def _start_sshds(self) -> None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege-separation chroot
        for h in self.hosts:
            self._pidfile(h).unlink(missing_ok=True)
            self._sshd_log(h).unlink(missing_ok=True)
            opts = {
                "ListenAddress": h.address, "Port": 22, "PidFile": self._pidfile(h),
                "AuthorizedKeysFile": self.authorized_keys, "PermitRootLogin": "prohibit-password",
                "PasswordAuthentication": "no", "KbdInteractiveAuthentication": "no",
                "UsePAM": "no", "StrictModes": "no",  # workdir is usually under /tmp
                "LogLevel": "ERROR",
                "MaxStartups": 100, "MaxSessions": 100,  # the suite opens many channels at once
                "Subsystem": "sftp internal-sftp",  # -f /dev/null has none; fabric put/get need it
            }  # fmt: skip
            files = ["-h", str(self._hostkey(h)), "-E", str(self._sshd_log(h))]
            # -D: sshd stays our child (ip netns exec execs it), so we reap it and see it exit;
            # a daemonised one is reparented to PID 1 and lingers as a zombie until reaped.
            inside = []  # a container's mounts, made inside the netns (a /run of its own hides /run/netns)
            if h.name in self.containers:
                opts["AuthorizedKeysFile"] = self._readable_keys()
                inside = _CONTAINER
            cmd = [*_NO_BASHRC, "ip", "netns", "exec", h.netns, *inside, SSHD, "-D", "-f", "/dev/null",
                   *files]
            with open(self._sshd_log(h), "ab") as log:  # early errors (bad option) go there too
                self._sshds[h.name] = subprocess.Popen(
                    [*cmd, *_dash_o(opts)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True,  # a terminal's Ctrl-C goes to pytest; close() stops us
                )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        pending = list(self.hosts)
        while pending:
            for h in pending:
                rc = self._sshds[h.name].poll()
                if rc is not None:
                    raise RuntimeError(f"sshd for {h.name} exited (rc={rc}): {self._log_text(h)}")
            # Port open and pid file written (sshd writes it just after binding).
            pending = [h for h in pending if not (_accepts(h.address, 22) and self.sshd_pid(h))]
            if pending and time.monotonic() > deadline:
                details = "\n".join(f"{h.name} ({h.address}): {self._log_text(h)}" for h in pending)
                raise RuntimeError(
                    f"sshd not accepting on port 22 after {START_TIMEOUT_S:.0f}s:\n{details}"
                )
            if pending:
                time.sleep(0.05)

    def _readable_keys(self) -> pathlib.Path:
        """authorized_keys where a user other than root can read it (sshd reads it as the user;
        the workdir is usually under pytest's 0700 tmp): a 0755 dir of its own, removed by close()."""
        if self._keys_dir is None:
            self._keys_dir = pathlib.Path(tempfile.mkdtemp(prefix="signoff-lab-keys-"))
            self._keys_dir.chmod(0o755)
            shutil.copy(self.authorized_keys, self._keys_dir / "authorized_keys")
            (self._keys_dir / "authorized_keys").chmod(0o644)
        return self._keys_dir / "authorized_keys"

    def _hostkey(self, h: LabHost) -> pathlib.Path:
        return self.workdir / f"{h.name}.hostkey"

    def _pidfile(self, h: LabHost) -> pathlib.Path:
        return self.workdir / f"{h.name}.sshd.pid"

    def _sshd_log(self, h: LabHost) -> pathlib.Path:
        return self.workdir / f"{h.name}.sshd.log"

    def _log_text(self, h: LabHost) -> str:
        try:
            return self._sshd_log(h).read_text().strip() or "(sshd log empty)"
        except OSError:
            return "(no sshd log)"


class SilentListener:
    """A TCP port that accepts connections and never sends a byte (a hung sshd, or another
    service on the port); `accepted` counts the connections made to it."""

    def __init__(self, address: str = "127.0.0.1"):
        self.sock = socket.create_server((address, 0))
        self.address, self.port = self.sock.getsockname()[:2]
        self.accepted, self._conns = 0, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # closed
            while True:
                self._conns.append(self.sock.accept()[0])
                self.accepted += 1

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() above
        self.sock.close()
        for c in self._conns:
            c.close()

    def __enter__(self) -> SilentListener:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -------------------------------------------------------------------- module helpers


# Logins must not source the user's ~/.bashrc: on this image it runs `pyenv init`, whose rehash
# takes a lock that a login killed mid-way leaves behind, and every later login then waits 60 s
# for it. sshd runs in its own mount namespace where an empty file hides ~/.bashrc.
_BASHRC = pathlib.Path.home() / ".bashrc"
_NO_BASHRC = (
    ["unshare", "--mount", "--propagation", "private", "sh", "-c",
     'mount --bind /dev/null "$1" && shift && exec "$@"', "sh", str(_BASHRC)]
    if _BASHRC.is_file() else []
)  # fmt: skip


# A container's view, for the hosts named in Lab(containers=...): in a mount namespace of their
# own, Docker's default 64 MB /dev/shm (docs.docker.com, docker run --shm-size) and a fresh /run
# with podman's marker file /run/.containerenv (and the /run/sshd sshd needs). The host's kernel
# log stays the machine's: a user other than root cannot read it (kernel.dmesg_restrict).
_CONTAINER = [
    "unshare", "--mount", "--propagation", "private", "sh", "-c",
    "mount -t tmpfs -o size=64m,mode=1777 shm /dev/shm && mount -t tmpfs -o mode=755 run /run"
    " && mkdir -m 755 /run/sshd && : > /run/.containerenv && exec \"$@\"", "sh",
]  # fmt: skip


def _dash_o(opts: dict) -> list[str]:
    return [x for k, v in opts.items() for x in ("-o", f"{k}={v}")]


def _run(cmd: list[str], check: bool = False) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc={r.returncode}): {r.stderr.strip()}")
    return r


@contextlib.contextmanager
def _locked():
    with open(_LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _subnet_in_use(net: ipaddress.IPv4Network) -> bool:
    """True if a root-namespace address, or a route as specific as net, overlaps it."""
    for link in json.loads(_run(["ip", "-j", "-4", "addr", "show"], check=True).stdout or "[]"):
        for a in link.get("addr_info", []):
            if ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False).overlaps(net):
                return True
    for route in json.loads(
        _run(["ip", "-j", "-4", "route", "show", "table", "all"], check=True).stdout or "[]"
    ):
        with contextlib.suppress(KeyError, ValueError):
            r = ipaddress.ip_network(route["dst"], strict=False)  # "default" -> ValueError, skipped
            # Broader routes (e.g. a 10.0.0.0/8 VPN) don't matter: our connected /24 wins locally.
            if r.prefixlen >= net.prefixlen and r.overlaps(net):
                return True
    return False


def _pub(key: pathlib.Path) -> pathlib.Path:
    return key.with_name(key.name + ".pub")  # not with_suffix: "lab1.hostkey" has one


def _keygen(path: pathlib.Path, comment: str) -> None:
    for p in (path, _pub(path)):  # ssh-keygen would ask before overwriting
        p.unlink(missing_ok=True)
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
         check=True)  # fmt: skip


def _accepts(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=0.5):
            return True
    except OSError:
        return False


def _read_pid(pidfile: pathlib.Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Running and not a zombie (orphans linger as zombies until PID 1 reaps them)."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _wait_dead(pids: list[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _yaml(obj, pad: str = ""):
    """Block-style YAML lines; scalars are JSON, which YAML parses identically."""

    def scalar(v):
        return json.dumps(str(v) if isinstance(v, os.PathLike) else v, default=str)

    def key(k):
        k = str(k)
        return k if _PLAIN_KEY.fullmatch(k) and k.lower() not in _YAML_WORDS else json.dumps(k)

    def nested(v):  # needs block style; lists of scalars go inline: ["lab"]
        if isinstance(v, dict):
            return bool(v)
        return isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v)

    if isinstance(obj, dict):
        for k, v in obj.items():
            if nested(v):
                yield f"{pad}{key(k)}:"
                yield from _yaml(v, pad + "  ")
            else:
                yield f"{pad}{key(k)}: {scalar(v)}"
    elif isinstance(obj, list):
        for v in obj:
            if nested(v):
                sub = list(_yaml(v, pad + "  "))
                yield f"{pad}- {sub[0][len(pad) + 2 :]}"
                yield from sub[1:]
            else:
                yield f"{pad}- {scalar(v)}"
    else:
        yield pad + scalar(obj)
