"""results.json: every measurement of the run, rewritten atomically as results come in,
so an interrupted run keeps what finished."""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

ALL = "all hosts"  # the host column of a cluster-wide check
STATUSES = ("PASS", "FAIL", "ERROR", "N.A.", "NOT RUN")
_RANK = {"PASS": 0, "N.A.": 1, "NOT RUN": 2, "FAIL": 3, "ERROR": 4}


def split_nodeid(nodeid: str) -> tuple[str, str]:
    """'acceptance/test_gpu.py::test_ecc_enabled[node01]' -> ('ecc_enabled', 'node01')."""
    name = re.sub(r"@[^\[\]@]*$", "", nodeid.split("::")[-1])  # xdist loadgroup appends @group
    m = re.fullmatch(r"test_(\w+?)(?:\[(.*)\])?", name)
    if not m:
        return name, ALL
    return m.group(1), m.group(2) or ALL


def worse(a: str | None, b: str) -> str:
    return b if a is None or _RANK[b] > _RANK[a] else a


def verdict(records: list[dict]) -> str:
    """PASS only when every check that applies ran and passed: a check that did not run
    is never a pass."""
    statuses = [r["status"] for r in records]
    if not statuses or all(s == "N.A." for s in statuses):
        return "INCOMPLETE"
    if any(s in ("FAIL", "ERROR") for s in statuses):
        return "FAIL"
    if any(s == "NOT RUN" for s in statuses):
        return "INCOMPLETE"
    return "PASS"


class Results:
    def __init__(self, path: Path, meta: dict):
        self.path = Path(path)
        self.doc = {"meta": {**meta, "started": now()}, "verdict": None, "hosts": {},
                    "results": []}
        self._lock = threading.Lock()
        self.write()

    def set_host(self, name: str, facts: dict) -> None:
        with self._lock:
            self.doc["hosts"][name] = facts
        self.write()

    def set_meta(self, **kv) -> None:
        with self._lock:
            self.doc["meta"].update(kv)
        self.write()

    def set_live(self, section: str, name: str, value, write: bool = True) -> None:
        """Progress of a long check, updated while it runs (e.g. a soak's samples per host);
        `value` must not be mutated afterwards (it is serialised from another thread)."""
        with self._lock:
            self.doc.setdefault(section, {})[name] = value
        if write:
            self.write()

    def add(self, record: dict) -> None:
        with self._lock:
            self.doc["results"].append(record)
        self.write()

    def finish(self, interrupted: bool = False, partial: str | None = None,
               allow_partial: bool = False) -> str:
        """A partial selection (-k, one file) is never a sign-off PASS unless asked for."""
        with self._lock:
            v = "INCOMPLETE" if interrupted else verdict(self.doc["results"])
            if partial and v == "PASS" and not allow_partial:
                v = "INCOMPLETE"
            self.doc["verdict"] = v
            self.doc["meta"].update(finished=now(), interrupted=interrupted, partial=partial)
        self.write()
        return self.doc["verdict"]

    def write(self) -> None:
        with self._lock:
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(self.doc, indent=1, default=str))
            os.replace(tmp, self.path)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
