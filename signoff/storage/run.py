"""Storage read throughput, controller side: where each host's test directory is, the run id
that marks the suite's files, the workload knobs a profile sets, the start-together read of
every host and its aggregate over the overlapping window, and the cleanup by marker name.

The host side is ``probe_storage.py`` (claim, prepare, read, clean)."""

from __future__ import annotations

import os
import secrets
import shlex
import threading
import time
from dataclasses import dataclass

from signoff import InputError, retry
from signoff.fleet import CLEANUP_S, SAME_PROCESS, Fleet, ProbeError, bounded, threads
from signoff.hostlist import fold
from signoff.profiles import Profile, Threshold
from signoff.storage.judge import (
    NotReadAlone,
    aggregate_gbps,
    alone_gbps,
    knobs,
    overlap,
    scaled,
    spread,
    starved,
)
from signoff.transport import HostUnreachable
from signoff.units import parse_size

MARK = ".signoff-"
# Threads waiting on remote commands at once (not a cap on the hosts: past it they queue), a
# generous default where the fleet has no --max-parallel of its own: 1,000 hosts in one wave.
MAX_PARALLEL = 1024


def new_runid() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


def min_free(text: str) -> str:
    t = str(text).strip()
    try:
        if t.endswith("%"):
            if not 0 <= float(t[:-1]) < 100:
                raise ValueError
        else:
            parse_size(t)
    except ValueError:
        raise InputError(f"--storage-min-free {text!r}: expected a percentage (10%) or a size "
                         f"(50G)") from None
    return t


@dataclass(frozen=True)
class Target:
    path: str  # "@tmp": the host's temp dir, resolved on the host
    readonly: bool


# Ask the storage probes still running in this run's temp dir to stop (SIGTERM: they remove
# what they wrote), and wait a little for them; then remove every entry of this run by name.
TERM_PROBES = ("me=$(ps -o pgid= -p $$ | tr -d ' '); for f in {wd}/.pid.*; do p=${{f##*.}}; "
               "[ \"$p\" = '*' ] && continue; " + SAME_PROCESS +
               "g=$(ps -o pgid= -p $p 2>/dev/null | tr -d ' '); "
               "[ -z \"$g\" ] || [ \"$g\" = \"$me\" ] && continue; kill -TERM -$g 2>/dev/null; "
               "i=0; while kill -0 -$g 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); "
               "done; done; true")
# -H: a storage path that is a symlink is followed (the entries are in the directory it names)
CLEAN = "find -H {path} -mindepth 1 -maxdepth 1 -name {pattern} -exec rm -rf -- {{}} + ; true"


class StorageRun:
    """Per session: claims each host's directory once, prepares each workload on every host
    at once, reads one host or all hosts together, and removes everything at the end."""

    def __init__(self, fleet: Fleet, profile: Profile, path: str | None, readonly: bool,
                 tool: str = "auto", free: str = "10%"):
        self.fleet, self.profile = fleet, profile
        self.path_opt, self.readonly_opt = path, readonly
        self.tool, self.min_free = tool, min_free(free)
        self.runid = new_runid()
        self.names = fleet.names
        self._lock = threading.RLock()  # aggregate() prepares while holding it
        self._claims: dict[str, dict | Exception] | None = None
        self._prepared: dict[str, dict[str, dict | Exception]] = {}
        self._touched: set[str] = set()  # hosts a claim was sent to (write mode)
        self._aggregate: dict | None = None
        self._alone: dict[str, dict] = {}
        self._writes = None

    def writes(self):
        """The write checks' measurements (signoff/storage/writes.py), on this run's hosts and ids."""
        from signoff.storage.writes import Writes
        with self._lock:
            if self._writes is None:
                self._writes = Writes(self)
            return self._writes

    # ------------------------------------------------------------------ configuration

    def target(self, name: str) -> Target:
        h = self.fleet.sessions[name].host
        path = self.path_opt or getattr(h, "storage_path", None) or "@tmp"
        return Target(path, bool(self.readonly_opt or getattr(h, "storage_readonly", False)))

    def _knob_args(self, workload: str) -> list[str]:
        if workload == "seq":
            k = knobs(self.profile.threshold("storage_read_seq"))
            return ["--size", str(k["size"]), "--bs", str(k["bs"]), "--jobs", str(k["jobs"]),
                    "--iodepth", str(k["iodepth"])]
        k = knobs(self.profile.threshold("storage_read_small"))
        return ["--files", str(k["files"]), "--file-size", str(k["file_size"]), "--bs", str(k["bs"]),
                "--jobs", str(k["jobs"])]

    def _bytes(self, workload: str) -> int:
        if workload == "seq":
            return parse_size(knobs(self.profile.threshold("storage_read_seq"))["size"])
        k = knobs(self.profile.threshold("storage_read_small"))
        return k["files"] * (parse_size(k["file_size"]) + 4096)

    def _files(self, workload: str) -> int:
        """Inodes the workload's files take (the small files' directory too)."""
        if workload == "seq":
            return knobs(self.profile.threshold("storage_read_seq"))["jobs"]
        return knobs(self.profile.threshold("storage_read_small"))["files"] + 1

    def _common(self, name: str) -> list[str]:
        t = self.target(name)
        return ["--path", t.path, "--runid", self.runid, "--host", name, "--min-free",
                self.min_free] + (["--readonly"] if t.readonly else [])

    def _timeout(self, n_bytes: int = 0, runtime: float = 0) -> float:
        # writing at >= 50 MB/s; a probe slower than that overruns and is killed on its host
        return self.fleet.probe_timeout + n_bytes / 50e6 + runtime

    def _each(self, fn, names: list[str]) -> dict:
        """fn(name) on every host at once: host -> result, or the error naming the host.
        Always in threads: Ctrl-C then stops the wait at once (invoke, in the main thread,
        would only forward it to the remote command and keep waiting)."""
        out: dict = {}
        cap = getattr(self.fleet, "max_parallel", None) or MAX_PARALLEL
        # On Ctrl-C don't wait for remote commands: close() stops them on their hosts.
        with threads(min(cap, len(names))) as pool:
            futs = {n: pool.submit(fn, n) for n in names}
            for n, f in futs.items():
                try:
                    out[n] = f.result()
                except (HostUnreachable, ProbeError) as exc:
                    out[n] = exc
        return out

    def _probe(self, name: str, *args: str, timeout: float) -> dict:
        doc = self.fleet.sessions[name].probe("storage", *args, timeout=timeout)
        if "error" in doc:
            raise ProbeError(f"{name}: {doc['error']}")
        return doc

    # ------------------------------------------------------------------ phases

    def claims(self) -> dict[str, dict | Exception]:
        """Every host checks its path (and, writing, its free space) and makes its run dir."""
        with self._lock:
            if self._claims is None:
                need = files = 0
                for w in ("seq", "small"):
                    try:
                        need += self._bytes(w)
                        files += self._files(w)
                    except InputError:  # the profile does not ask for this workload
                        pass

                def claim(n):
                    if not self.target(n).readonly:
                        self._touched.add(n)
                    return self._probe(n, "claim", *self._common(n), "--need", str(need),
                                       "--need-files", str(files), timeout=self._timeout())
                self._claims = self._each(claim, self.names)
                for n, c in self._claims.items():  # said on the terminal and in the report
                    for mark in c.get("leftovers") or [] if isinstance(c, dict) else []:
                        self.fleet.note("leftovers", n, f"storage test files {c['path']}/{mark} of "
                                                        f"another run (killed, or still running)")
            return self._claims

    def prepared(self, workload: str) -> dict[str, dict | Exception]:
        """The workload's files on every host (written at once, or picked in read-only mode)."""
        claims = self.claims()
        with self._lock:
            if workload not in self._prepared:
                ok = [n for n in self.names if not isinstance(claims[n], Exception)]
                args = self._knob_args(workload)

                def prep(n):
                    return self._probe(n, "prepare", *self._common(n), "--workload", workload,
                                       "--shard", str(self.names.index(n)),
                                       "--shards", str(len(self.names)), *args,
                                       timeout=self._timeout(self._bytes(workload)))
                res = self._each(prep, ok)
                res.update({n: claims[n] for n in self.names if n not in ok})
                self._prepared[workload] = res
            return self._prepared[workload]

    def ready(self, name: str, workload: str) -> dict:
        got = self.prepared(workload)[name]
        if isinstance(got, Exception):
            raise got
        return got

    def _read_args(self, name: str, workload: str, runtime: int) -> list[str]:
        k = knobs(self.profile.threshold("storage_read_seq" if workload == "seq"
                                         else "storage_read_small"))
        return ["read", "--runid", self.runid, "--workload", workload, "--tool", self.tool,
                "--bs", str(k["bs"]), "--jobs", str(k["jobs"]),
                "--iodepth", str(k.get("iodepth", 1)), "--runtime", str(runtime)]

    def _criterion(self, workload: str) -> str:
        return "storage_read_seq" if workload == "seq" else "storage_read_small"

    def shared(self, workload: str) -> dict[str, str | None]:
        """Why each prepared host's path is shared with other hosts, None for its own disk:
        another host's run directory seen there (each host made its own before any
        prepared), or a network filesystem (NFS may list a new directory only after its
        attribute cache expires; and per-host directories of one export never see each
        other)."""
        owner = {os.path.basename(c["dir"]): n for n, c in self.claims().items()
                 if isinstance(c, dict) and c.get("dir")}
        out = {}
        for n, doc in self.prepared(workload).items():
            if isinstance(doc, Exception):
                continue
            seen = [owner[d] for d in doc.get("run_dirs") or [] if owner.get(d, n) != n]
            fs = doc.get("fs") or {}
            out[n] = (f"{doc['path']} holds the test directories of {fold(seen)} too" if seen else
                      f"{doc['path']} is {fs.get('fstype')} from {fs.get('source')}, a network "
                      f"filesystem" if fs.get("network") else None)
        return out

    def limit(self) -> Threshold:
        """The aggregate minimum for this fleet (storage_read_aggregate, x nodes or GPUs)."""
        facts = self.fleet.all_facts()
        gpus = sum(len(f["nvidia"].get("gpus", [])) for f in facts.values()
                   if isinstance(f, dict) and f.get("nvidia", {}).get("available"))
        return scaled(self.profile.threshold("storage_read_aggregate"), len(self.names), gpus)

    def aggregate(self) -> dict:
        """The aggregate read (every host at once, seq files), once per run: judged by
        test_storage_read_aggregate and, on a shared filesystem, it picks the slowest host.
        Retry policy (signoff/retry.py): after a miss (of the aggregate, or a host below
        node_min) every host reads at once again, up to the attempts; the attempt that passed,
        else the best aggregate, is judged, every attempt's aggregate kept."""
        with self._lock:
            if self._aggregate is None:
                t = self.profile.threshold("storage_read_aggregate")

                def once() -> dict:
                    got = self.read_all("seq", knobs(t)["runtime"])
                    if "docs" in got:
                        got["overlap"] = overlap({n: d["intervals"] for n, d in got["docs"].items()})
                    return got

                def passing(got):  # the aggregate where no host starved, else a miss
                    v = aggregate_gbps(got)
                    shares = {n: round(s, 3) for n, s in got["overlap"]["per_host"].items()} \
                        if v is not None else {}
                    return None if v is None or starved(shares, knobs(t)["node_min"]) else v
                first = once()
                if aggregate_gbps(first) is None:  # an error, no overlap, cached: not noise
                    self._aggregate = first
                else:
                    tries, limit = [first], self.limit()
                    while aggregate_gbps(tries[-1]) is not None and retry.wants_more(tries, passing, limit):
                        tries.append(once())
                    if aggregate_gbps(tries[-1]) is None:  # a later attempt broke: judged as it is
                        self._aggregate = {**tries[-1], "attempts": [aggregate_gbps(d) for d in tries]}
                    else:
                        best, _ = retry.best(tries, passing, limit)
                        if passing(best) is None:  # every attempt starved a host
                            best = max(tries, key=lambda d: aggregate_gbps(d) or -1.0)
                        self._aggregate = retry.kept(best, [aggregate_gbps(d) for d in tries])
            return self._aggregate

    def alone(self, workload: str) -> dict:
        """Every host's 'alone' read of the workload, measured once for all hosts: hosts on
        their own disks read at once (nobody else reads their disk); hosts of a shared
        filesystem one after another, each alone, all of them where they are few or the
        profile judges no host's share, else a sample (alone_sample, spread over the hosts,
        plus the slowest host's share of the aggregate). Returns {"docs": host -> document |
        error | NotReadAlone, "plan": which hosts read how, and why}."""
        with self._lock:
            if workload in self._alone:
                return self._alone[workload]
        prep = self.prepared(workload)
        why = self.shared(workload)
        k = knobs(self.profile.threshold(self._criterion(workload)))
        runtime, sample_n = k["runtime"], k["alone_sample"]
        agg_t = self.profile.criteria.get("storage_read_aggregate")
        judged = agg_t is not None and knobs(agg_t)["node_min"] is not None
        docs: dict = {n: e for n, e in prep.items() if isinstance(e, Exception)}
        local = [n for n in self.names if n in why and why[n] is None]
        groups: dict[str, list[str]] = {}
        for n in self.names:
            if why.get(n):
                fs = prep[n]["fs"]
                groups.setdefault(f"{fs.get('fstype')} {fs.get('source')}", []).append(n)
        plan = {"at_once": local, "read_alone": [], "shared": {n: why[n] for n in self.names if why.get(n)},
                "sample": {}}
        if local:
            got = self._again(self._together(local, workload, runtime)[0],
                              lambda hs: self._together(hs, workload, runtime)[0], workload)
            for d in got.values():
                if isinstance(d, dict):
                    d["read"] = (f"at once with the {len(local) - 1} other host(s) on their own disks: "
                                 f"this path is this host's own (no other host's test directory "
                                 f"seen there, not a network filesystem)" if len(local) > 1 else "alone")
                    d["read"] += "; after a miss again, at once with the others that missed" \
                        if d.get("attempts") and len(local) > 1 else ""
            docs.update(got)

        def one(h):
            return self._probe(h, *self._read_args(h, workload, runtime), timeout=self._timeout(
                self._bytes(workload) if not runtime else 0, runtime))
        for fs_name, members in groups.items():
            if len(members) <= sample_n or not judged:
                pick = list(members)
                how = (f"{len(members)} host(s), no more than alone_sample {sample_n}" if judged else
                       "every host: the profile judges no host's share of the aggregate "
                       "(storage_read_aggregate.node_min)")
            else:
                pick = spread(members, sample_n)
                how = f"alone_sample {sample_n} spread over the {len(members)} hosts"
                ov = self.aggregate().get("overlap")
                shares = {n: v for n, v in (ov or {}).get("per_host", {}).items() if n in members}
                if shares:
                    slow = min(shares, key=shares.get)
                    if slow not in pick:
                        pick.append(slow)
                    how += f", plus the slowest share of the aggregate read ({slow})"
                else:
                    how += " (the aggregate read measured no shares to add the slowest host)"
            plan["sample"][fs_name] = {"hosts": pick, "how": how}
            for n in pick:  # a miss is read again right away, alone as its first read
                got = self._again(self._each(one, [n]), lambda hs: self._each(one, hs), workload)
                if isinstance(got[n], dict):
                    got[n]["read"] = f"alone, one host after another: {why[n]}; read alone: " \
                                     f"{fold(pick)} ({how})"
                docs.update(got)
                plan["read_alone"].append(n)
            for n in members:
                if n not in pick:
                    docs[n] = NotReadAlone(
                        f"{n}: shared filesystem ({why[n]}): read alone on the sample {fold(pick)} "
                        f"({how}); this host's share judged in storage_read_aggregate")
        with self._lock:
            self._alone[workload] = {"docs": docs, "plan": plan}
        return self._alone[workload]

    def _again(self, first: dict, read, workload: str) -> dict:
        """The retry policy (signoff/retry.py) on these hosts' first reads (host -> document or
        error): `read(hosts)` reads the hosts that missed again, at once, until each passed or
        had its attempts; each host's best read judged, every attempt's GB/s kept. An error or a
        read through the page cache is not noise: never read again."""
        t = self.profile.threshold(self._criterion(workload))
        tries = {n: [d] for n, d in first.items() if alone_gbps(d) is not None}

        while again := [n for n in tries if alone_gbps(tries[n][-1]) is not None
                        and retry.wants_more(tries[n], alone_gbps, t)]:
            got = read(again)
            for n in again:
                tries[n].append(got[n])
        out = {}
        for n, docs in tries.items():
            last = docs[-1]
            if isinstance(last, Exception):  # an attempt that broke is the host's result: ERROR
                out[n] = retry.broke(last, [alone_gbps(d) for d in docs[:-1]])
            elif alone_gbps(last) is None:  # read through the page cache: no figure, as judged
                out[n] = retry.kept(last, [alone_gbps(d) for d in docs])
            else:
                out[n] = retry.kept(*retry.best(docs, alone_gbps, t))
        return {**first, **out}

    def plans(self) -> dict:
        """Which hosts each workload read alone, which at once, and why (those measured)."""
        return {w: self._alone[w]["plan"] for w in ("seq", "small") if w in self._alone}

    def read(self, name: str, workload: str) -> dict:
        """This host's 'alone' read (see alone()): its document, or the error, or
        NotReadAlone for a host of a shared filesystem outside the sample."""
        self.ready(name, workload)
        got = self.alone(workload)["docs"][name]
        if isinstance(got, Exception):
            raise got
        # entries of earlier runs that were killed before they could clean up
        got["leftovers"] = self.claims()[name].get("leftovers") or []
        return got

    def clock_offsets(self, names: list[str]) -> dict[str, float]:
        """Each host's clock minus ours (half the round trip is the error)."""
        def offset(n):
            t0 = time.time()
            r = self.fleet.sessions[n].run("date +%s.%N", 30)
            t1 = time.time()
            try:
                return float(r.stdout.strip()) - (t0 + t1) / 2
            except ValueError:
                raise ProbeError(f"{n}: cannot read the host's clock: {r.stderr.strip()}") from None
        return self._each(offset, names)

    def _together(self, names: list[str], workload: str, runtime: int) -> tuple[dict, dict]:
        """These hosts read at the same moment (a common start time in each host's clock):
        host -> document with intervals on the controller's clock, or its error; offsets."""
        offsets = self.clock_offsets(names)
        ok = [n for n in names if not isinstance(offsets[n], Exception)]
        start = time.time() + 1.0 + 0.02 * len(ok)  # time for every SSH command to land

        def read(n):
            return self._probe(n, *self._read_args(n, workload, runtime), "--start-at",
                               f"{start + offsets[n]:.3f}",
                               timeout=self._timeout(runtime=runtime + start - time.time()))
        docs = self._each(read, ok)
        docs.update({n: offsets[n] for n in names if n not in ok})
        for n, d in docs.items():
            if isinstance(d, dict):
                d["intervals"] = [[t0 - offsets[n], t1 - offsets[n], b] for t0, t1, b in d["intervals"]]
        return docs, offsets

    def read_all(self, workload: str, runtime: int) -> dict:
        """Every host reads at the same moment; per-host documents, or the errors."""
        prep = self.prepared(workload)
        bad = {n: e for n, e in prep.items() if isinstance(e, Exception)}
        if bad:
            return {"errors": bad}
        docs, offsets = self._together(self.names, workload, runtime)
        bad = {n: e for n, e in docs.items() if isinstance(e, Exception)}
        if bad:  # with what the others read: the ERROR keeps it
            return {"errors": bad, "docs": {n: d for n, d in docs.items() if n not in bad}}
        return {"docs": docs, "offsets": offsets}

    def close(self) -> None:
        """Stop this run's storage probes, then remove <path>/.signoff-<runid>-* on every
        host a claim went to, whatever happened (a failure, Ctrl-C)."""
        def where(n):
            claim = (self._claims or {}).get(n)
            return claim["path"] if isinstance(claim, dict) else self.target(n).path

        def clean(n):
            s = self.fleet.sessions[n]
            path = "${TMPDIR:-/tmp}" if where(n) == "@tmp" else shlex.quote(where(n))
            if s.workdir:
                s.run(TERM_PROBES.format(wd=shlex.quote(s.workdir)), CLEANUP_S)
            s.run(CLEAN.format(path=path, pattern=shlex.quote(f"{MARK}{self.runid}-*")), CLEANUP_S)
        for n in bounded(clean, sorted(self._touched)):  # a second Ctrl-C must not wait minutes
            self.fleet.note("left_behind", n, f"storage test files {where(n)}/{MARK}{self.runid}-{n}: "
                                              f"no answer to the cleanup within {CLEANUP_S} s")
