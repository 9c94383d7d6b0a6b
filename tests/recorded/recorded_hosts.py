"""pytest plugin: a run's hosts are recorded hosts answered in this process, not machines.

For a run at a scale no machine here can host (1,000 hosts: tests/test_report_scale_recorded.py).
Loaded with `-p recorded_hosts` (tests/recorded on PYTHONPATH) and SIGNOFF_RECORDED_HOSTS naming
a JSON document {"record": <one host's recorded documents, as respond.py takes them>,
"hosts": {name: {"sysinfo": {key: value, ...}, probe: document}}}: every inventory host is
answered from the record, its own sysinfo keys put over the record's (a host's identity, a
fault), its own documents of other probes in place of the record's. The
controller runs for real — inventory, fleet, run lock, temp dir, shipping, parsing, judging,
results and the report — only the host's side is the recording: the lock is granted, the temp
dir named, nothing is copied or run anywhere (but the kernel log's XID reading, done once by
the real sysinfo probe on the recorded log). Each host's sysinfo gets its own machine identity
(boot id, GPU UUIDs and serials from its name), as distinct machines have.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import respond

from signoff import families, fleet
from signoff.transport import CommandResult, Transport

ENV = "SIGNOFF_RECORDED_HOSTS"
SUFFIX = "; rc=$?; rm -f .pid.$$; exit $rc"  # the end of every probe command (HostSession._command)


def deep_update(doc: dict, keys: dict) -> None:
    for k, v in keys.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            deep_update(doc[k], v)
        else:
            doc[k] = v


class Recording:
    """The record, each host's own sysinfo, and the one real XID reading they share."""

    def __init__(self, path: str):
        doc = json.loads(Path(path).read_text())
        self.record, self.hosts = doc["record"], doc["hosts"]
        self._xids: dict[tuple, str] = {}
        self._lock = threading.Lock()

    def host(self, name: str) -> dict:
        rec = dict(self.record)
        facts = copy.deepcopy(rec["sysinfo"])
        tag = hashlib.sha1(name.encode()).hexdigest()
        facts["hostname"] = name
        facts["machine"] = {**facts.get("machine", {}), "machine_id": tag[:32],
                            "boot_id": f"{tag[:8]}-{tag[8:12]}-{tag[12:16]}-{tag[16:20]}-{tag[20:32]}"}
        for i, g in enumerate(facts["nvidia"].get("gpus", [])):
            g["uuid"] = f"GPU-{tag[:8]}-{tag[8:12]}-{tag[12:16]}-{tag[16:20]}-{tag[20:30]}{i:02x}"
            g["serial"] = str(int(tag[:10], 16) * 16 + i)
        deep_update(facts, self.hosts.get(name, {}).get("sysinfo", {}))
        rec["sysinfo"] = facts
        # the host's own documents of other probes (its recorded dcgmi output) over the record's
        rec.update({k: v for k, v in self.hosts.get(name, {}).items() if k != "sysinfo"})
        return rec

    def xids(self, args: list[str], log: str) -> str:
        """The real probe's reading of the recorded kernel log, once per run and arguments."""
        key = (tuple(args), log)
        with self._lock:
            if key not in self._xids:
                probe = families.probes()["sysinfo"]
                p = subprocess.run([sys.executable, str(probe), *args], capture_output=True, text=True,
                                   timeout=120, env={**os.environ, "SIGNOFF_KERNEL_LOG": log})
                self._xids[key] = p.stdout
            return self._xids[key]


class RecordedTransport(Transport):
    """A recorded host: the fleet's own commands answered as a host answers them, probes with
    the recorded documents (respond.answer)."""

    def __init__(self, host, recording: Recording):
        super().__init__(host)
        self.rec, self.recording = recording.host(host.name), recording

    def run(self, command: str, timeout: float) -> CommandResult:
        out = ""
        if command.startswith("d=$(mktemp"):  # MKTEMP: the run's temp dir
            out = f"/tmp/signoff.rec{abs(hash(self.host.name)) % 10**8:08d}\n"
        elif command == "date +%s.%N":  # the host's clock (the storage read's common start)
            out = f"{time.time():.9f}\n"
        elif command.endswith(SUFFIX):  # a probe
            out = self.probe(command[:-len(SUFFIX)])
        return CommandResult(command, 0, out, "", timeout, 0.0)

    def run_stream(self, command: str, timeout: float, on_line) -> CommandResult:
        if 'echo "keeper $me"' in command:  # KEEPER: granted (nothing is signalled: run() answers)
            on_line("keeper 1 1")
            on_line("locked 1 /run/signoff/lock.0.1")
            return CommandResult(command, 0, "", "", timeout, 0.0)
        r = self.run(command, timeout)
        for ln in r.stdout.splitlines():
            on_line(ln)
        return r

    def probe(self, command: str) -> str:
        words = shlex.split(command)  # cd WD && <pid file> && env K=V ... PYTHON NAME.py ARGS
        i = words.index("env") + 1
        env = {}
        while "=" in words[i]:
            k, v = words[i].split("=", 1)
            env[k] = v
            i += 1
        name, args = words[i + 1][:-3], words[i + 2:]
        try:
            return "".join(ln + "\n" for ln in respond.answer(self.rec, name, args, env))
        except respond.Xids as log:
            return self.recording.xids(args, str(log))

    def put(self, local: Path, remote: str) -> None:
        pass  # nothing is shipped: the recording answers


def pytest_configure(config):
    recording = Recording(os.environ[ENV])
    fleet.open_transport = lambda host, *a, **k: RecordedTransport(host, recording)
