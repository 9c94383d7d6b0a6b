"""Controller side of the soak: every host's soak probe started at once (one thread per
host: the load is the whole hall's), its sample lines taken as they arrive and appended to
`<report>/soak/<host>.jsonl`. results.jsonl gets the host's soak state when it changes
(starting, running, ended); at the end results.json's `soak` section gets the maxima and
the samples: all of them up to `keep`, then every 2nd, 4th, ... so it stays small on a
24 h soak. An interrupted run keeps everything measured: a killed one too (`replay`)."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from signoff import safefile
from signoff.soak.judge import Series, human_duration

TRACKED = ("temp", "mem_temp", "power")


class HostSoak:
    """What one host's soak has sent so far; `doc` is the probe's final document."""

    def __init__(self, name: str, keep: int = 900):
        self.name, self.keep = name, keep
        self.state = "starting"
        self.header: dict | None = None
        self.series: Series | None = None
        self.events: list[dict] = []
        self.doc: dict | None = None
        self.error: str | None = None
        self.count = 0
        self.last_t = 0.0
        self.kept: list[dict] = []
        self.stride = 1
        self.max: dict[str, list] = {}
        self.bad_lines = 0
        self.file = None
        self.published_final = False  # its samples are in results.jsonl: the soak ended
        self.lock = threading.Lock()

    def take(self, msg: dict) -> bool:
        """One line of the probe's stream (also when replayed from soak/<host>.jsonl);
        False for what is not a header, sample or event (the final document)."""
        kind = msg.get("type")
        if kind == "header":
            self.header, self.state = msg, "running"
            self.series = Series(len(msg.get("gpus") or []))
        elif kind == "sample" and self.series is not None:
            with self.lock:
                self.series.add(msg)
                self.count += 1
                self.last_t = msg["t"]
                if (self.count - 1) % self.stride == 0:
                    self.kept.append(msg)
                if len(self.kept) > 2 * self.keep:
                    self.kept, self.stride = self.kept[::2], self.stride * 2
                for f in TRACKED:
                    vals = msg.get(f) or []
                    cur = self.max.setdefault(f, [None] * len(vals))
                    self.max[f] = [v if c is None or (v is not None and v > c) else c
                                   for c, v in zip(cur, vals)]
        elif kind == "event":
            self.events.append(msg)
        else:
            return False
        return True

    def live(self, plan: dict, series: bool, file: str | None) -> dict:
        """A snapshot for results.json (new objects: never mutated after hand-over); the
        samples only in the final one (`series`), the rest is small."""
        with self.lock:
            return {
                "state": self.state, "error": self.error,
                "elapsed_s": self.last_t, "duration_s": plan["duration"],
                "warmup_s": plan["warmup"], "interval_s": plan["interval"],
                "samples": self.count, "every_nth_sample_kept": self.stride,
                "file": file,
                "gpus": (self.header or {}).get("gpus"),
                "max": {f: list(v) for f, v in self.max.items()},
                "events": list(self.events[:100]),
                **({"series": list(self.kept)} if series else {}),
            }


def replay(report_dir: Path, name: str, live: dict, keep: int = 900) -> dict:
    """The final `soak` entry of a host whose soak the controller did not see end (it was
    killed): its last state from results.jsonl, its samples from soak/<host>.jsonl."""
    hs = HostSoak(name, keep)
    path = Path(report_dir) / (live.get("file") or f"soak/{name}.jsonl")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return {**live, "state": "killed", "series": [],
                "error": f"the run was killed; {path}: {exc.strerror}"}
    ended = ("killed", "the run was killed before this soak ended")
    for line in lines:
        try:
            msg = json.loads(line)
            if not hs.take(msg) and msg.get("type") in ("result", "error"):  # it ended, unpublished
                ended = ("error", msg["error"]) if msg.get("error") else ("done", None)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError):
            hs.bad_lines += 1  # the line the kill cut short
    plan = {"duration": live.get("duration_s"), "warmup": live.get("warmup_s"),
            "interval": live.get("interval_s")}
    hs.state, hs.error = ended
    return hs.live(plan, series=True, file=live.get("file"))


def kept_samples(report_dir: Path, live: dict) -> list[dict]:
    """The samples a finished soak's entry kept (HostSoak.take: the first `samples` of the
    stream, every `every_nth_sample_kept`-th from the first), from its file: results.json
    leaves them out (soak.bound). [] where the file cannot be read."""
    samples, started = [], False
    try:
        lines = (Path(report_dir) / live["file"]).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue  # the line a kill cut short
        kind = msg.get("type") if isinstance(msg, dict) else None
        started = started or kind == "header"
        if kind == "sample" and started:
            samples.append(msg)
    return samples[:live.get("samples", len(samples))][::max(1, live.get("every_nth_sample_kept") or 1)]


class SoakRunner:
    def __init__(self, fleet, plan: dict, report_dir: Path | None = None, results=None,
                 startup_s: float = 180, keep: int = 900, probe: str = "soak"):
        self.fleet, self.plan, self.results = fleet, plan, results
        self.dir = Path(report_dir) / "soak" if report_dir else None
        self.startup_s, self.keep, self.probe = startup_s, keep, probe
        self.hosts: dict[str, HostSoak] = {}
        self._futures: dict = {}
        self._pool: ThreadPoolExecutor | None = None
        self._closing = False
        self._publish_lock = threading.Lock()
        self.t0 = None
        self.say = lambda line: None  # where progress lines go (the terminal, in acceptance/)

    @property
    def timeout(self) -> float:
        """Host-side limit: start-up (torch, CUDA, calibration) + the load + the final reads."""
        return self.startup_s + self.plan["duration"] + 60

    def args(self) -> list[str]:
        p = self.plan
        return ["--duration", f"{p['duration']:g}", "--interval", f"{p['interval']:g}",
                "--matrix", str(p["matrix"])]

    def start(self, names: list[str]) -> None:
        """Start every host's soak at once (call once; later calls are no-ops)."""
        if self._pool is not None:
            return
        self.t0 = time.monotonic()
        if self.dir and names:  # no soaked host (CPU-only): no empty soak/ in the report dir
            safefile.subdir(self.dir)
        # A thread per host, never a bounded pool: a host left for a second wave would soak
        # after the others, and the hall would never be under full load at once.
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(names)))
        for name in names:
            hs = self.hosts[name] = HostSoak(name, self.keep)
            if self.dir:
                hs.file = safefile.open_new(self.dir / f"{name}.jsonl", buffering=1)
            self._publish(hs)
        for name in names:
            self._futures[name] = self._pool.submit(self._run, self.hosts[name])
        # A later family waits for the soak as for any family, even where no check waited for
        # it (a soak check that ERRORed before soaked()): nothing else runs beside the load.
        self.fleet.register("soak", self._futures)

    def _run(self, hs: HostSoak) -> HostSoak:
        session = self.fleet.sessions[hs.name]
        try:
            doc = session.probe_stream(self.probe, *self.args(), timeout=self.timeout,
                                       on_line=lambda line: self._line(hs, line))
        except BaseException as exc:
            hs.state, hs.error = ("interrupted", "the run was stopped") if self._closing else \
                ("error", str(exc))
            self._write(hs, {"type": "error", "error": str(exc)})
            self._publish(hs, final=True)
            raise
        hs.doc = doc
        hs.state = "error" if "error" in doc else "done"
        hs.error = doc.get("error")
        self._write(hs, {"type": "result", **doc})
        self._publish(hs, final=True)
        return hs

    def _write(self, hs: HostSoak, msg: dict) -> None:
        self._append(hs, json.dumps(msg, separators=(",", ":")))

    @staticmethod
    def _append(hs: HostSoak, line: str) -> None:
        with hs.lock:
            if hs.file:  # None once closed (Ctrl-C)
                hs.file.write(line + "\n")

    def _line(self, hs: HostSoak, line: str) -> None:
        if not line.startswith("{"):
            return
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            hs.bad_lines += 1
            return
        was = hs.state
        if hs.take(msg):
            self._append(hs, line)
            if hs.state != was:
                self._publish(hs)

    def live(self, hs: HostSoak, final: bool = False) -> dict:
        return hs.live(self.plan, final, f"soak/{hs.name}.jsonl" if self.dir else None)

    def _publish(self, hs: HostSoak, final: bool = False) -> None:
        """The host's soak state into results.jsonl when it changes; its samples (thinned)
        once, when it ended: the samples as they come are in soak/<host>.jsonl."""
        if self.results is None:
            return
        with self._publish_lock:  # nothing may follow (and replace) the final entry
            if not hs.published_final:
                hs.published_final = final
                self.results.set_live("soak", hs.name, self.live(hs, final))

    def wait(self, name: str, progress=None, every: float = 30.0) -> HostSoak:
        """This host's soak once it ended (raises what its probe call raised); `progress`
        gets a line every `every` s meanwhile."""
        fut = self._futures[name]
        while True:
            try:
                return fut.result(timeout=every)
            except FutureTimeout:
                if progress:
                    progress(self.progress_line())

    def peers(self, figure) -> dict:
        """figure(series) of every soaked host whose soak sent samples (signoff/outlier.py);
        a host whose soak failed, or ran beside another process, is left out (its own checks
        say why)."""
        out = {}
        for name in list(self._futures):
            try:
                hs = self.wait(name)
            except Exception:  # noqa: BLE001 - its own checks report it
                continue
            if not hs.error and hs.series is not None and len(hs.series) >= 2 and \
                    not (hs.doc or {}).get("cotenants"):
                out[name] = figure(hs.series)
        return out

    def progress_line(self) -> str:
        d = self.plan["duration"]
        parts = []
        for name, hs in self.hosts.items():
            hot = max((v for v in hs.max.get("temp", []) if v is not None), default=None)
            mem = max((v for v in hs.max.get("mem_temp", []) if v is not None), default=None)
            parts.append(f"{name} {hs.state} {hs.last_t:.0f}/{d:.0f} s"
                         + (f", max GPU {hot:g} °C" if hot is not None else "")
                         + (f", memory {mem:g} °C" if mem is not None else ""))
        return f"soak ({human_duration(d)}): " + "; ".join(parts)

    def close(self) -> None:
        # Do not wait for soaks still running (Ctrl-C): the fleet's cleanup kills them.
        self._closing = True
        if self._pool:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for hs in self.hosts.values():
            if hs.state in ("starting", "running"):
                hs.state = "interrupted"
            self._publish(hs, final=True)
        for hs in self.hosts.values():
            if hs.file:
                with hs.lock:
                    hs.file.close()
                    hs.file = None
