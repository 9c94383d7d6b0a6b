"""Storage writes, controller side: each host claims its write dir (free space checked first),
writes the sequential and the small-file workload alone (hosts on their own disks at once, a
shared filesystem's hosts one after another on a sample), then every host at once (the
checkpoint pattern: each host its own files in the shared dir, started together, the aggregate
all bytes over the time until the last host was done: judge.makespan). Every write is read back
on its host before its files go (probe_storage_write). The files are under
<path>/.signoff-<runid>-<host>-write/: StorageRun.close() stops the probes and removes them
whatever happened, as it does the reads'."""

from __future__ import annotations

import threading
import time

from signoff import InputError
from signoff.fleet import ProbeError
from signoff.hostlist import fold
from signoff.printable import printable
from signoff.storage.judge import NotReadAlone, knobs, makespan, scaled, spread
from signoff.units import parse_size

CRIT = {"seq": "storage_write_seq", "small": "storage_write_small", "agg": "storage_write_aggregate"}


def from_memory(got: list[tuple[str, dict]]) -> str | None:
    """Why this host's read-backs (workload, verify) checked memory, not the storage: the cache
    still held what was written after the drop (a RAM-backed path, ZFS's ARC, pages fadvise left),
    or the probe could not tell; None where every one read the disk."""
    why = []
    for wl, v in got:
        c = v.get("cache")
        if not isinstance(c, dict) or not isinstance(c.get("disk"), bool):
            why.append(f"{wl} write: the probe said nothing of what the cache held")
        elif not c["disk"]:
            why.append(f"{wl} write: {printable(c.get('note') or 'the cache still held the files')}")
    return "; ".join(why) or None


class ReadOnly(Exception):
    """--storage-readonly (or the inventory's storage_readonly): nothing written, N.A."""


class Writes:
    def __init__(self, store):
        self.s = store
        self._lock = threading.RLock()
        self._claims: dict | None = None
        self._alone: dict[str, dict] = {}
        self._agg: dict | None = None

    def readonly(self, name: str) -> str | None:
        """Why this host writes nothing, or None."""
        t = self.s.target(name)
        if not t.readonly:
            return None
        opt = "--storage-readonly" if self.s.readonly_opt else "the inventory's storage_readonly"
        return f"{name}: {opt}: this run writes nothing to {t.path}, so no write is measured or read back"

    def _args(self, workload: str) -> list[str]:
        k = knobs(self.s.profile.threshold(CRIT[workload]))
        if workload == "small":
            return ["--files", str(k["files"]), "--file-size", str(k["file_size"]), "--bs", str(k["bs"]),
                    "--jobs", str(k["jobs"])]
        seq = knobs(self.s.profile.threshold("storage_write_seq")) if workload == "agg" else k
        return ["--size", str(k["size"]), "--bs", str(seq["bs"]), "--jobs", str(seq["jobs"]),
                "--iodepth", str(seq["iodepth"])]

    def _bytes(self, workload: str) -> int:
        k = knobs(self.s.profile.threshold(CRIT[workload]))
        if workload == "small":
            return k["files"] * (parse_size(k["file_size"]) + 4096)
        return parse_size(k["size"])

    def _common(self, name: str) -> list[str]:
        return ["--path", self.s.target(name).path, "--runid", self.s.runid, "--host", name,
                "--min-free", self.s.min_free, "--tool", self.s.tool]

    def _probe(self, name: str, *args: str, timeout: float) -> dict:
        doc = self.s.fleet.sessions[name].probe("storage_write", *args, timeout=timeout)
        if "error" in doc:
            raise ProbeError(f"{name}: {doc['error']}")
        return doc

    def claims(self) -> dict:
        """Every writing host checks its free space for the largest workload and makes its write
        dir (before any host writes: then each sees who else writes in the same directory)."""
        with self._lock:
            if self._claims is None:
                sizes = []
                for w in CRIT:
                    try:
                        k = knobs(self.s.profile.threshold(CRIT[w]))
                        sizes.append((self._bytes(w), k.get("files", k.get("jobs", 16))))
                    except InputError:  # the profile does not ask for this write
                        pass
                need = max((b for b, _ in sizes), default=0)
                files = max((f for _, f in sizes), default=0)
                writers = [n for n in self.s.names if not self.readonly(n)]

                def claim(n):
                    self.s._touched.add(n)  # StorageRun.close() removes its write dir, whatever happens
                    return self._probe(n, "claim", *self._common(n), "--need", str(need),
                                       "--need-files", str(files), timeout=self.s._timeout())
                claims = self.s._each(claim, writers)
                ok = [n for n in writers if isinstance(claims[n], dict)]
                # every host has claimed: now each sees the others' write dirs in a shared path
                looks = self.s._each(lambda n: self._probe(n, "look", *self._common(n),
                                                           timeout=self.s._timeout()), ok)
                for n in ok:
                    if isinstance(looks[n], Exception):
                        claims[n] = looks[n]
                    else:
                        claims[n]["writers"] = looks[n]["writers"]
                self._claims = claims
            return self._claims

    def ready(self, name: str) -> dict:
        why = self.readonly(name)
        if why:
            raise ReadOnly(why)
        got = self.claims()[name]
        if isinstance(got, Exception):
            raise got
        return got

    def shared(self) -> dict[str, str | None]:
        """Why each claimed host's path is shared (another host's write dir there, or a network
        filesystem), None for its own disk."""
        owner = {c["dir"].rsplit("/", 1)[-1]: n for n, c in self.claims().items() if isinstance(c, dict)}
        out = {}
        for n, c in self.claims().items():
            if isinstance(c, Exception):
                continue
            seen = [owner[d] for d in c.get("writers") or [] if owner.get(d, n) != n]
            fs = c.get("fs") or {}
            out[n] = (f"{c['path']} holds the write directories of {fold(seen)} too" if seen else
                      f"{c['path']} is {fs.get('fstype')} from {fs.get('source')}, a network filesystem"
                      if fs.get("network") else None)
        return out

    def _write(self, n: str, workload: str, start_at: float = 0) -> dict:
        extra = ["--start-at", f"{start_at:.3f}"] if start_at else []
        wait = max(0.0, start_at - time.time()) if start_at else 0.0
        # written and read back: twice the bytes at the controller's >= 50 MB/s
        return self._probe(n, "write", *self._common(n), "--workload", workload, *self._args(workload),
                           *extra, timeout=self.s._timeout(2 * self._bytes(workload)) + wait)

    def alone(self, workload: str) -> dict:
        """host -> its write of the workload (document, error, or NotReadAlone for a host of a
        shared filesystem outside the sample), measured once for all hosts."""
        with self._lock:
            if workload in self._alone:
                return self._alone[workload]
            claims = self.claims()
            why = self.shared()
            sample_n = knobs(self.s.profile.threshold(CRIT[workload]))["alone_sample"]
            docs: dict = {n: e for n, e in claims.items() if isinstance(e, Exception)}
            local = [n for n in why if why[n] is None]
            docs.update(self.s._each(lambda n: self._write(n, workload), local))
            for d in docs.values():
                if isinstance(d, dict):
                    d["written"] = ("at once with the other hosts on their own disks" if len(local) > 1
                                    else "alone")
            groups: dict[str, list[str]] = {}
            for n in self.s.names:
                if why.get(n):
                    fs = claims[n]["fs"]
                    groups.setdefault(f"{fs.get('fstype')} {fs.get('source')}", []).append(n)
            for members in groups.values():
                pick = spread(members, sample_n)
                for n in pick:  # one after another: each alone on the shared filesystem
                    docs.update(self.s._each(lambda h: self._write(h, workload), [n]))
                    if isinstance(docs[n], dict):
                        docs[n]["written"] = f"alone, one host after another: {why[n]}; written alone: " \
                                             f"{fold(pick)} (alone_sample {sample_n})"
                for n in members:
                    if n not in pick:
                        docs[n] = NotReadAlone(
                            f"{n}: shared filesystem ({why[n]}): written alone on the sample {fold(pick)} "
                            f"(alone_sample {sample_n}); this host's share judged in storage_write_aggregate")
            self._alone[workload] = docs
            return docs

    def write(self, name: str, workload: str) -> dict:
        self.ready(name)
        got = self.alone(workload)[name]
        if isinstance(got, Exception):
            raise got
        return got

    def limit(self):
        facts = self.s.fleet.all_facts()
        gpus = sum(len(f["nvidia"].get("gpus", [])) for f in facts.values()
                   if isinstance(f, dict) and f.get("nvidia", {}).get("available"))
        return scaled(self.s.profile.threshold("storage_write_aggregate"), len(self.writers()), gpus)

    def writers(self) -> list[str]:
        return [n for n in self.s.names if not self.readonly(n)]

    def aggregate(self) -> dict:
        """Every writing host writes its own files at the same moment (a common start in each
        host's clock), once: {"docs", "overlap", "offsets"} or {"errors", "docs"}."""
        with self._lock:
            if self._agg is None:
                names = self.writers()
                claims = self.claims()
                bad = {n: claims[n] for n in names if isinstance(claims[n], Exception)}
                if bad:
                    self._agg = {"errors": bad}
                    return self._agg
                offsets = self.s.clock_offsets(names)
                ok = [n for n in names if not isinstance(offsets[n], Exception)]
                start = time.time() + 1.0 + 0.02 * len(ok)
                docs = self.s._each(lambda n: self._write(n, "agg", start + offsets[n]), ok)
                docs.update({n: offsets[n] for n in names if n not in ok})
                bad = {n: e for n, e in docs.items() if isinstance(e, Exception)}
                if bad:
                    self._agg = {"errors": bad, "docs": {n: d for n, d in docs.items() if n not in bad}}
                    return self._agg
                for n, d in docs.items():
                    d["intervals"] = [[t0 - offsets[n], t1 - offsets[n], b] for t0, t1, b in d["intervals"]]
                self._agg = {"docs": docs, "offsets": offsets,
                             "overlap": makespan({n: d["intervals"] for n, d in docs.items()})}
            return self._agg

    def verified(self, name: str) -> list[tuple[str, dict]]:
        """This host's read-backs: (workload, verify) of every write it made (its alone writes and
        its part of the aggregate), the workloads the profile asks for measured first."""
        self.ready(name)
        out = []
        for w in CRIT:
            if CRIT[w] not in self.s.profile.criteria:
                continue
            got = (self.aggregate().get("docs") or {}).get(name) if w == "agg" else self.alone(w).get(name)
            if isinstance(got, dict):
                out.append((w, got["verify"]))
        if not out:
            errs = [self.alone(w).get(name) for w in ("seq", "small") if CRIT[w] in self.s.profile.criteria]
            err = next((e for e in errs if isinstance(e, ProbeError)), None)
            agg_err = (self.aggregate().get("errors") or {}).get(name)
            if err or agg_err:
                raise err or agg_err
            raise ProbeError(f"{name}: nothing written here to read back (the profile asks for no "
                             f"storage_write_seq, _small or _aggregate)")
        return out
