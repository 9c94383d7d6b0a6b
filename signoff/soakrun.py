"""Controller side of the soak: every host's soak probe started at once, its sample lines
taken as they arrive, appended to `<report>/soak/<host>.jsonl` and, every few seconds, into
results.json's `soak` section (state, maxima so far, the samples: all of them up to
`keep`, then every 2nd, 4th, ... so the file stays small on a 24 h soak). An interrupted
run keeps everything measured until then."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from signoff.soak import Series, human_duration

TRACKED = ("temp", "mem_temp", "power")


class HostSoak:
    """What one host's soak has sent so far; `doc` is the probe's final document."""

    def __init__(self, name: str):
        self.name = name
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
        self.lock = threading.Lock()


class SoakRunner:
    def __init__(self, fleet, plan: dict, report_dir: Path | None = None, results=None,
                 startup_s: float = 180, flush_s: float = 5.0, keep: int = 900,
                 probe: str = "soak"):
        self.fleet, self.plan, self.results = fleet, plan, results
        self.dir = Path(report_dir) / "soak" if report_dir else None
        self.startup_s, self.flush_s, self.keep, self.probe = startup_s, flush_s, keep, probe
        self.hosts: dict[str, HostSoak] = {}
        self._futures: dict = {}
        self._pool: ThreadPoolExecutor | None = None
        self._flush_lock = threading.Lock()
        self._last_flush = 0.0
        self._closing = False
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
        if self.dir:
            self.dir.mkdir(parents=True, exist_ok=True)
        self._pool = ThreadPoolExecutor(max_workers=max(1, min(64, len(names))))
        for name in names:
            hs = self.hosts[name] = HostSoak(name)
            if self.dir:
                hs.file = (self.dir / f"{name}.jsonl").open("a", buffering=1)
            self._futures[name] = self._pool.submit(self._run, hs)
        self._flush(force=True)

    def _run(self, hs: HostSoak) -> HostSoak:
        session = self.fleet.sessions[hs.name]
        try:
            doc = session.probe_stream(self.probe, *self.args(), timeout=self.timeout,
                                       on_line=lambda line: self._line(hs, line))
        except BaseException as exc:
            hs.state, hs.error = ("interrupted", "the run was stopped") if self._closing else \
                ("error", str(exc))
            self._write(hs, {"type": "error", "error": str(exc)})
            self._flush(force=True)
            raise
        hs.doc = doc
        hs.state = "error" if "error" in doc else "done"
        hs.error = doc.get("error")
        self._write(hs, {"type": "result", **doc})
        self._flush(force=True)
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
        kind = msg.get("type")
        if kind == "header":
            hs.header, hs.state = msg, "running"
            hs.series = Series(len(msg.get("gpus") or []))
        elif kind == "sample" and hs.series is not None:
            with hs.lock:
                hs.series.add(msg)
                hs.count += 1
                hs.last_t = msg["t"]
                if (hs.count - 1) % hs.stride == 0:
                    hs.kept.append(msg)
                if len(hs.kept) > 2 * self.keep:
                    hs.kept, hs.stride = hs.kept[::2], hs.stride * 2
                for f in TRACKED:
                    vals = msg.get(f) or []
                    cur = hs.max.setdefault(f, [None] * len(vals))
                    hs.max[f] = [v if c is None or (v is not None and v > c) else c
                                 for c, v in zip(cur, vals)]
        elif kind == "event":
            hs.events.append(msg)
        else:
            return  # the final document: the probe call returns it
        self._append(hs, line)
        self._flush()

    def live(self, hs: HostSoak) -> dict:
        """A snapshot for results.json (new objects: never mutated after hand-over)."""
        with hs.lock:
            return {
                "state": hs.state, "error": hs.error,
                "elapsed_s": hs.last_t, "duration_s": self.plan["duration"],
                "warmup_s": self.plan["warmup"], "interval_s": self.plan["interval"],
                "samples": hs.count, "every_nth_sample_kept": hs.stride,
                "file": f"soak/{hs.name}.jsonl" if self.dir else None,
                "gpus": (hs.header or {}).get("gpus"),
                "max": {f: list(v) for f, v in hs.max.items()},
                "events": list(hs.events[:100]),
                "series": list(hs.kept),
            }

    def _flush(self, force: bool = False) -> None:
        if self.results is None:
            return
        now = time.monotonic()
        if not force and now - self._last_flush < self.flush_s:
            return
        with self._flush_lock:
            if not force and now - self._last_flush < self.flush_s:
                return
            self._last_flush = now
            for name, hs in list(self.hosts.items()):
                self.results.set_live("soak", name, self.live(hs), write=False)
            self.results.write()

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
        self._flush(force=True)
        for hs in self.hosts.values():
            if hs.file:
                with hs.lock:
                    hs.file.close()
                    hs.file = None
