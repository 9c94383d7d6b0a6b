"""Sustained-load (soak) judgement as pure functions over recorded sample series.

A soak's samples (one per interval per GPU, as probe_soak.py streams them) are
kept column-wise in a `Series`; each criterion is a function of a Series and profile
values, so it can be tested on recorded or synthetic series. docs/soak.md gives the rules.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import dataclass
from dataclasses import field as dc_field
from statistics import median

# Per-GPU fields of a sample line: {"type": "sample", "t": s since load start, field: [per GPU]}
FIELDS = ("temp", "mem_temp", "power", "sm_clock", "reasons", "util", "tflops", "ecc_corr", "ecc_unc")
UNITS = {"temp": "°C", "mem_temp": "°C", "power": "W", "sm_clock": "MHz", "util": "%",
         "tflops": "TFLOP/s"}

# NVML clock-event (throttle) reason bits, nvmlClocksEventReason* (NVML's nvml.h, as nvidia-ml-py ships them)
REASONS = {
    0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
    0x100: "display_clock",
}
REASON_BITS = {v: k for k, v in REASONS.items()}
# DCGM fails on these; Azure fails any mask other than 0x0/0x1/0x4 (thresholds.md)
FAIL_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
REASON_CAUSE = {
    "hw_slowdown": "HW slowdown asserted (over-temperature or power supply / power brake signal)",
    "sw_thermal": "the driver cut clocks to stay under its thermal limit: cooling insufficient",
    "hw_thermal": "the GPU's thermal sensor forced a slowdown: cooling failing",
    "hw_power_brake": "an external power brake (PSU or rack power) slowed the GPU",
}

# The profile's `soak:` section, with defaults (docs/soak.md)
SOAK_DEFAULTS = {"duration": 300.0, "warmup": 30.0, "interval": 1.0, "matrix": 8192}
SOAK_KEYS = tuple(SOAK_DEFAULTS)
MIN_DURATION, MAX_DURATION = 10.0, 48 * 3600.0


def parse_duration(text) -> float:
    """'90s' / '5m' / '24h' / '1h30m' / 90 -> seconds."""
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, (int, float)):
        return float(text)
    s = str(text).strip().lower().replace(" ", "")
    if re.fullmatch(r"\d+(?:\.\d+)?", s):
        return float(s)
    if not re.fullmatch(r"(?:\d+(?:\.\d+)?(?:h|min|m|s))+", s):
        raise ValueError(f"not a duration: {text!r} (expected e.g. 90s, 5m, 24h, 1h30m)")
    scale = {"h": 3600, "min": 60, "m": 60, "s": 1}
    return float(sum(float(n) * scale[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(h|min|m|s)", s)))


def duration_arg(text) -> float:
    """argparse type of --soak-duration: seconds, or a clear usage error."""
    import argparse
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def human_duration(s: float) -> str:
    s = float(s)
    if s >= 3600 and s % 360 == 0:
        return f"{s / 3600:g} h"
    if s >= 120 and s % 60 == 0:
        return f"{s / 60:g} min"
    return f"{s:g} s"


def check_section(section) -> dict:
    """Validate a profile's `soak:` mapping; returns it in seconds (ValueError names the key)."""
    if not isinstance(section, dict):
        raise ValueError("expected a mapping with " + ", ".join(SOAK_KEYS))
    unknown = sorted(set(section) - set(SOAK_KEYS))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key (allowed: {', '.join(SOAK_KEYS)})")
    out = {}
    for key, val in section.items():
        if key == "matrix":
            if isinstance(val, bool) or not isinstance(val, int) or not 256 <= val <= 65536:
                raise ValueError(f"matrix: expected an integer 256..65536 (GEMM n), got {val!r}")
            out[key] = val
            continue
        try:
            out[key] = parse_duration(val)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return out


def plan(section: dict, duration=None) -> dict:
    """The soak to run: the profile's section over the defaults, an optional duration
    override (--soak-duration). A warm-up that would leave less than 2/3 of a short
    override's load unjudged is shortened to a third of it."""
    p = {**SOAK_DEFAULTS, **(section or {})}
    notes = []
    if duration is not None:
        p["duration"] = parse_duration(duration)
        if p["warmup"] > p["duration"] / 3:
            notes.append(f"warm-up shortened from {p['warmup']:g} s to a third of the "
                         f"{p['duration']:g} s soak")
            p["warmup"] = round(p["duration"] / 3, 1)
    if not MIN_DURATION <= p["duration"] <= MAX_DURATION:
        raise ValueError(f"duration: {p['duration']:g} s is outside {human_duration(MIN_DURATION)}.."
                         f"{human_duration(MAX_DURATION)}")
    if not 0 <= p["warmup"] < p["duration"]:
        raise ValueError(f"warmup: {p['warmup']:g} s must be shorter than the duration "
                         f"{p['duration']:g} s")
    if not 0.2 <= p["interval"] <= min(60.0, p["duration"] / 10):
        raise ValueError(f"interval: {p['interval']:g} s must be 0.2 s..60 s and at most a "
                         f"tenth of the duration")
    p["notes"] = notes
    return p


def check_extra(name: str, extra: dict) -> None:
    """Validate the extra keys of the soak criteria (ValueError names the key)."""
    if "hold" in extra:
        try:
            hold = parse_duration(extra["hold"])
        except ValueError as exc:
            raise ValueError(f"hold: {exc}") from None
        if hold <= 0:
            raise ValueError("hold: must be positive")
    if "reasons" in extra:
        r = extra["reasons"]
        bad = [x for x in (r if isinstance(r, list) else [r]) if x not in REASON_BITS]
        if not isinstance(r, list) or not r or bad:
            raise ValueError(f"reasons: expected a list of {', '.join(REASON_BITS)}; "
                             f"got {bad[0] if bad else r!r}")
    if "correlation" in extra:
        c = extra["correlation"]
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not -1 <= c <= 0:
            raise ValueError(f"correlation: expected a number in -1..0, got {c!r}")


def decode(mask) -> list[str]:
    if mask is None or (isinstance(mask, float) and math.isnan(mask)):
        return []
    m = int(mask)
    return [name for bit, name in REASONS.items() if m & bit] + \
        ([f"0x{m & ~sum(REASONS):x}"] if m & ~sum(REASONS) else [])


def mask_of(names) -> int:
    return sum(REASON_BITS[n] for n in names)


class Series:
    """One host's soak samples, column-wise (NaN where NVML could not read a value)."""

    def __init__(self, n_gpus: int):
        self.n = n_gpus
        self.t = array("d")
        self.cols = {f: [array("d") for _ in range(n_gpus)] for f in FIELDS}

    @classmethod
    def from_samples(cls, samples: list[dict], n_gpus: int | None = None) -> Series:
        n = n_gpus if n_gpus is not None else len(samples[0]["temp"]) if samples else 0
        s = cls(n)
        for x in samples:
            s.add(x)
        return s

    def add(self, sample: dict) -> None:
        self.t.append(float(sample["t"]))
        for f in FIELDS:
            vals = sample.get(f) or []
            for i in range(self.n):
                v = vals[i] if i < len(vals) else None
                self.cols[f][i].append(math.nan if v is None else float(v))

    def __len__(self) -> int:
        return len(self.t)

    def get(self, field: str, gpu: int, start: float = -math.inf) -> tuple[list, list]:
        """(times, values) of one GPU's field from `start` s on, unreadable samples left out."""
        col = self.cols[field][gpu]
        pts = [(t, v) for t, v in zip(self.t, col) if t >= start and not math.isnan(v)]
        return [p[0] for p in pts], [p[1] for p in pts]

    def interval(self) -> float:
        d = [b - a for a, b in zip(self.t, self.t[1:])]
        return median(d) if d else 1.0


def sustained(values: list, n: int) -> float | None:
    """The highest value that `n` consecutive samples all reached: the max over every
    window of n samples of the window's minimum (all samples if fewer than n)."""
    if not values:
        return None
    n = max(1, min(n, len(values)))
    from collections import deque
    dq: deque = deque()
    best = -math.inf
    for i, v in enumerate(values):
        while dq and values[dq[-1]] >= v:
            dq.pop()
        dq.append(i)
        if dq[0] <= i - n:
            dq.popleft()
        if i >= n - 1:
            best = max(best, values[dq[0]])
    return best


def effective_hold(s: Series, hold: float) -> float:
    """The hold window, at most a third of the soak (a 30 s hold on a 60 s soak would
    otherwise take its minimum from the warm-up ramp)."""
    span = (s.t[-1] - s.t[0]) if len(s) > 1 else hold
    return min(hold, round(span / 3, 1)) if span > 0 else hold


def temperatures(s: Series, field: str, hold: float, limit: float | None = None) -> list[dict]:
    """Per GPU: sustained (held `hold` s), max and median of a temperature field over the
    whole load, and the seconds spent above `limit`."""
    n = max(1, round(hold / s.interval()))
    out = []
    for g in range(s.n):
        _, v = s.get(field, g)
        if not v:
            out.append({"gpu": g, "readable": False})
            continue
        sus = sustained(v, n)
        over = sum(1 for x in v if x > limit) if limit is not None else 0
        out.append({"gpu": g, "readable": True, "sustained": sus, "max": max(v),
                    "median": median(v), "seconds_over": round(over * s.interval(), 1)})
    return out


def throttle(s: Series, fail: tuple = FAIL_REASONS) -> list[dict]:
    """Per GPU: samples with each clock-event reason, and the samples with a failing one."""
    fail_mask = mask_of(fail)
    out = []
    for g in range(s.n):
        t, v = s.get("reasons", g)
        counts: dict[str, int] = {}
        bad_t = []
        for ti, m in zip(t, v):
            for name in decode(m):
                counts[name] = counts.get(name, 0) + 1
            if int(m) & fail_mask:
                bad_t.append(ti)
        out.append({"gpu": g, "samples": len(v), "counts": counts,
                    "failing": {n: counts[n] for n in fail if n in counts},
                    "failing_samples": len(bad_t),
                    "first": bad_t[0] if bad_t else None, "last": bad_t[-1] if bad_t else None})
    return out


def pearson(x: list, y: list) -> float:
    n = len(x)
    if n < 3:
        return 0.0
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return 0.0
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sxx * syy)


MIN_SAMPLES = 10


def clock_vs_temp(s: Series, warmup: float, max_drop: float, corr: float) -> list[dict]:
    """The mirrored curves: per GPU after warm-up, the Pearson correlation r between GPU
    temperature and SM clock, and the clock drop from the coolest fifth of the samples to
    the hottest fifth (% of the cool clock). Flagged when r <= corr and drop > max_drop."""
    out = []
    for g in range(s.n):
        pts = [(te, c) for t, te, c in zip(s.t, s.cols["temp"][g], s.cols["sm_clock"][g])
               if t >= warmup and not math.isnan(te) and not math.isnan(c)]
        if len(pts) < MIN_SAMPLES:
            out.append({"gpu": g, "samples": len(pts), "judged": False})
            continue
        temp, clk = [p[0] for p in pts], [p[1] for p in pts]
        r = pearson(temp, clk)
        by_temp = sorted(pts, key=lambda p: p[0])
        q = max(1, len(pts) // 5)
        cool, hot = by_temp[:q], by_temp[-q:]
        cool_clk, hot_clk = median(p[1] for p in cool), median(p[1] for p in hot)
        drop = 100.0 * (cool_clk - hot_clk) / cool_clk if cool_clk else 0.0
        out.append({"gpu": g, "samples": len(pts), "judged": True, "r": round(r, 3),
                    "drop_pct": round(drop, 2), "cool_temp": median(p[0] for p in cool),
                    "hot_temp": median(p[0] for p in hot), "cool_clock": cool_clk,
                    "hot_clock": hot_clk, "clock_min": min(clk), "clock_max": max(clk),
                    "flagged": r <= corr and drop > max_drop})
    return out


def gemm(s: Series, warmup: float) -> dict[int, float | None]:
    """Per GPU: sustained GEMM throughput, the mean TFLOP/s of the samples after warm-up."""
    out = {}
    for g in range(s.n):
        _, v = s.get("tflops", g, warmup)
        out[g] = round(sum(v) / len(v), 1) if v else None
    return out


def stragglers(tflops: dict, min_ratio: float) -> tuple[float, list[dict]]:
    """The host's median GPU and every GPU below min_ratio x that median (by name)."""
    vals = [v for v in tflops.values() if v is not None]
    med = median(vals) if vals else 0.0
    slow = [{"gpu": g, "tflops": v, "ratio": round(v / med, 3) if med else 0.0}
            for g, v in sorted(tflops.items()) if v is None or not med or v / med < min_ratio]
    return med, slow


def errors(s: Series, final: dict) -> tuple[list[str], list[str]]:
    """New uncorrectable ECC errors, XID events and GPUs whose load died during the soak;
    returns (failures, notes). Corrected (single-bit) ECC errors are notes."""
    fails, notes = [], []
    before = {e["gpu"]: e for e in final.get("ecc_before") or []}
    after = {e["gpu"]: e for e in final.get("ecc_after") or []}
    for g in range(s.n):
        new = {}
        for kind, col in (("uncorrected", "ecc_unc"), ("corrected", "ecc_corr")):
            b, a = (before.get(g) or {}).get(kind), (after.get(g) or {}).get(kind)
            _, v = s.get(col, g)
            if b is None and v:
                b = v[0]
            if v:
                a = max(a if a is not None else -math.inf, max(v))
            if b is not None and a is not None and a > b:
                new[kind] = int(a - b)
        if new.get("uncorrected"):
            fails.append(f"GPU {g}: {new['uncorrected']} new uncorrectable ECC error(s)")
        if new.get("corrected"):
            notes.append(f"GPU {g}: {new['corrected']} new corrected ECC error(s)")
        if g in after and after[g].get("remap_pending"):
            fails.append(f"GPU {g}: a row remap is pending after the soak")
    for x in final.get("xid") or []:
        where = f"GPU {x['gpu']}" if x.get("gpu") is not None else x.get("device", "GPU ?")
        fails.append(f"{where}: XID {x['xid']} at {x.get('t', '?')} s ({x.get('source')})"
                     + (f": {x['line']}" if x.get("line") else ""))
    for g, msg in sorted((final.get("gpu_errors") or {}).items(), key=lambda kv: int(kv[0])):
        fails.append(f"GPU {g}: load failed: {msg}")
    for g, w in sorted((final.get("gemm") or {}).items(), key=lambda kv: int(kv[0])):
        if w.get("changed_batches"):  # issue 14: silent data corruption under load
            fails.append(f"GPU {g}: the GEMM result changed under load in {w['changed_batches']} batch(es), "
                         f"same inputs (silent data corruption)")
    if not final.get("xid_readable"):
        # "no new XID" cannot be claimed from a source that could not be read
        raise Unjudgeable(f"XID events not readable: {final.get('xid_note') or 'unknown why'}")
    return fails, notes


def summary(s: Series, warmup: float, hold: float) -> list[dict]:
    """The report's table: per GPU maxima and medians over the load."""
    rows = []
    n_hold = max(1, round(effective_hold(s, hold) / s.interval()))
    tflops, reasons = gemm(s, warmup), throttle(s)
    for g in range(s.n):
        row = {"gpu": g}
        for f in ("temp", "mem_temp", "power", "sm_clock"):
            _, v = s.get(f, g)
            row[f] = {"max": max(v), "median": median(v), "min": min(v)} if v else None
            if f in ("temp", "mem_temp"):
                row[f + "_sustained"] = sustained(v, n_hold)
        row["tflops"] = tflops[g]
        row["reasons"] = reasons[g]["counts"]
        rows.append(row)
    return rows


# ---------------------------------------------------------------- judgements
# Each returns a Verdict: `failures` (empty = PASS) name the GPU, the value and the limit.


@dataclass
class Verdict:
    failures: list
    measured: object
    details: dict = dc_field(default_factory=dict)
    notes: list = dc_field(default_factory=list)


class Unjudgeable(Exception):
    """The samples cannot answer the criterion (sensor unreadable, too few samples)."""


def _some_gpu(s: Series) -> None:
    if not s.n:
        raise Unjudgeable("the samples cover no GPU")


def judge_temperature(s: Series, which: str, limit: float, hold: float,
                      na_ok: bool = False) -> Verdict:
    """Sustained temperature (`which` = temp | mem_temp) <= limit on every GPU. Sustained:
    the highest temperature held for `hold` s (every sample of a `hold`-long window at or
    above it), over the whole load, so one-sample spikes do not fail a GPU."""
    label = {"temp": "GPU", "mem_temp": "memory"}[which]
    _some_gpu(s)
    hold = effective_hold(s, hold)
    rows = temperatures(s, which, hold, limit)
    dead = [r["gpu"] for r in rows if not r["readable"]]
    if dead and (len(dead) < len(rows) or not na_ok):
        raise Unjudgeable(f"NVML gave no {label} temperature for GPU {', '.join(map(str, dead))}")
    if dead:
        return Verdict([], None, {"gpus": rows}, [f"no {label} temperature sensor readable"])
    fails = [f"GPU {r['gpu']}: {label} temperature held {r['sustained']:g} °C for {hold:g} s "
             f"(max {r['max']:g} °C, {r['seconds_over']:g} s above {limit:g} °C)"
             for r in rows if r["sustained"] > limit]
    worst = max(r["sustained"] for r in rows)
    return Verdict(fails, worst, {"gpus": rows, "hold_s": hold,
                                  "definition": f"sustained = highest temperature held for "
                                                f"{hold:g} s, over the whole load"})


def judge_throttle(s: Series, fail: tuple = FAIL_REASONS, limits: list | None = None,
                   rated: float | None = None) -> Verdict:
    """No failing clock-event reason in any sample of the load; the others (SW power cap
    at full load, idle, ...) are reported with how many samples showed them. SW power cap is
    normal only at the class's rated limit: under an enforced limit below `rated` W (limits:
    per GPU, the soak header's power_limit_w) its samples fail too."""
    _some_gpu(s)
    rows = throttle(s, fail)
    fails, capped = [], []
    for r in rows:
        g = r["gpu"]
        for name, n in r["failing"].items():
            fails.append(f"GPU {g}: {name} (0x{REASON_BITS[name]:x}) in {n}/{r['samples']} "
                         f"samples, {r['first']:g}..{r['last']:g} s")
        cap = limits[g] if limits and g < len(limits) else None
        n = r["counts"].get("sw_power_cap", 0)
        if n and rated is not None and cap is not None and cap < rated:
            capped.append(g)
            fails.append(f"GPU {g}: sw_power_cap (0x4) in {n}/{r['samples']} samples under an "
                         f"enforced power limit of {cap:g} W < the class's {rated:g} W (an admin cap)")
            mask = mask_of(fail) | REASON_BITS["sw_power_cap"]
            r["failing_samples"] = sum(1 for m in s.get("reasons", g)[1] if int(m) & mask)
    seen: dict[str, int] = {}
    for r in rows:
        for name, n in r["counts"].items():
            if name not in fail:
                seen[name] = seen.get(name, 0) + n
    total = sum(r["samples"] for r in rows)
    notes = [f"{name} (0x{REASON_BITS.get(name, 0):x}) in {n}/{total} GPU samples"
             + (" (normal at full load)" if name == "sw_power_cap" and not capped else "")
             for name, n in sorted(seen.items())]
    dead = [r["gpu"] for r in rows if not r["samples"]]
    if dead or not total:  # one silent GPU is unjudged, whatever the others say
        raise Unjudgeable(f"NVML gave no clock-event reasons for GPU {', '.join(map(str, dead))}")
    return Verdict(fails, sum(r["failing_samples"] for r in rows),
                   {"gpus": rows, "fail_on": list(fail), "power_limit_w": limits,
                    "rated_power_w": rated, "power_capped_gpus": capped}, notes)


def judge_clock(s: Series, warmup: float, max_drop: float, corr: float) -> Verdict:
    """No mirrored curves after warm-up: a GPU whose SM clock falls as its temperature rises
    (r <= corr) by more than max_drop % (coolest fifth of samples vs hottest fifth)."""
    _some_gpu(s)
    rows = clock_vs_temp(s, warmup, max_drop, corr)
    short = [r for r in rows if not r["judged"]]
    if short:
        raise Unjudgeable(f"only {short[0]['samples']} samples with temperature and SM clock after "
                          f"the {warmup:g} s warm-up (need {MIN_SAMPLES}): soak longer")
    fails = [f"GPU {r['gpu']}: SM clock {r['drop_pct']:g} % lower when hottest "
             f"({r['hot_clock']:g} MHz at {r['hot_temp']:g} °C) than coolest "
             f"({r['cool_clock']:g} MHz at {r['cool_temp']:g} °C), r = {r['r']:g}"
             for r in rows if r["flagged"]]
    worst = max(rows, key=lambda r: r["drop_pct"] if r["r"] <= corr else -math.inf)
    return Verdict(fails, worst["drop_pct"] if worst["r"] <= corr else 0.0,
                   {"gpus": rows, "warmup_s": warmup, "correlation_limit": corr})


def judge_gemm(s: Series, warmup: float, minimum: float) -> Verdict:
    """Every GPU's sustained GEMM rate (mean after warm-up) >= minimum."""
    _some_gpu(s)
    rates = gemm(s, warmup)
    fails = [f"GPU {g}: no GEMM rate measured after warm-up" if v is None else
             f"GPU {g}: {v:g} TFLOP/s < {minimum:g}" for g, v in rates.items()
             if v is None or v < minimum]
    vals = [v for v in rates.values() if v is not None]
    if not vals:  # failures alone would PASS a series of no GPU
        raise Unjudgeable(f"no GEMM rate measured after the {warmup:g} s warm-up on any GPU")
    return Verdict(fails, min(vals), {"tflops": rates, "warmup_s": warmup})


def judge_straggler(s: Series, warmup: float, min_ratio: float) -> Verdict:
    """Every GPU within min_ratio of the host's median GPU (sustained GEMM rate)."""
    _some_gpu(s)
    rates = gemm(s, warmup)
    med, slow = stragglers(rates, min_ratio)
    fails = [f"GPU {x['gpu']}: no GEMM rate measured" if x["tflops"] is None else
             f"GPU {x['gpu']}: {x['tflops']:g} TFLOP/s = {x['ratio']:g} x the host's median "
             f"{med:g}" for x in slow]
    ratios = [v / med for v in rates.values() if v is not None and med]
    if not ratios:
        raise Unjudgeable(f"no GEMM rate measured after the {warmup:g} s warm-up on any GPU")
    return Verdict(fails, round(min(ratios), 3), {"tflops": rates, "median": med})


def judge_errors(s: Series, final: dict) -> Verdict:
    """No new uncorrectable ECC error, pending row remap, XID or failed GPU load during the
    soak; new corrected ECC errors and unreadable XIDs are notes."""
    _some_gpu(s)
    fails, notes = errors(s, final)
    return Verdict(fails, len(fails), {"xid": final.get("xid") or [],
                                       "xid_note": final.get("xid_note"),
                                       "ecc_before": final.get("ecc_before"),
                                       "ecc_after": final.get("ecc_after"),
                                       "gpu_errors": final.get("gpu_errors") or {},
                                       "violation_ns": final.get("violation_ns")}, notes)


def judge_gemm_model(s: Series, warmup: float, fraction: float, pool: list[float]) -> Verdict:
    """Every GPU's sustained GEMM rate >= fraction x the median of `pool`, the sustained rates
    of every GPU of its model in the run (this host's among them): a profile of no class
    (local), where no absolute figure for an unknown GPU holds."""
    _some_gpu(s)
    rates = gemm(s, warmup)
    vals = [v for v in rates.values() if v is not None]
    if not vals or not pool:
        raise Unjudgeable(f"no GEMM rate measured after the {warmup:g} s warm-up on any GPU")
    med = median(pool)
    fails = [f"GPU {g}: no GEMM rate measured after warm-up" if v is None else
             f"GPU {g}: {v:g} TFLOP/s = {v / med:.3f} x its model's median {med:g}"
             for g, v in rates.items() if v is None or v < fraction * med]
    return Verdict(fails, round(min(vals) / med, 3), {"tflops": rates, "model_median": med,
                                                      "model_gpus": len(pool)})
