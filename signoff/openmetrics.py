"""signoff.prom: the run's verdict and every figure per host and criterion as OpenMetrics text
(issue 54 item 4), so a nightly run feeds the site's Prometheus through node_exporter's textfile
collector (--metrics-file PATH puts a copy where it reads, e.g. /var/lib/node_exporter/textfile/).

Written by hand, no client library: only gauges, no timestamps (the textfile collector refuses
them), the same label names on every sample of a family (it refuses a family that mixes them),
`# EOF` last. Every label value is a host's or a profile's string, so it is made inert first
(printable: control characters as visible escapes) and then escaped as OpenMetrics says (a
backslash, a double quote, a line feed); tests/test_openmetrics.py reads it back with
prometheus_client's parser."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

from signoff import safefile
from signoff.printable import printable
from signoff.results import STATUSES

FILE = "signoff.prom"
VERDICTS = ("PASS", "FAIL", "ERROR", "INCOMPLETE")
BOUND = {">=": "min", "<=": "max", "==": "equals"}  # Threshold.expected's signs (signoff/profiles.py)
PROVISIONAL = " (provisional threshold: calibrate on a known-good node)"


def label(value) -> str:
    """A label value as OpenMetrics writes it: inert, then \\\\, \\" and \\n escaped."""
    text = printable("" if value is None else value)  # no raw control character, a line feed included
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate: its escape
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(v) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def figure(v) -> float | int | None:
    """A record's `measured` when it is a number (a bool or a text is no figure)."""
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def threshold(record: dict) -> tuple[str, float] | None:
    """(min | max | equals, value) where the record's `expected` is a profile's numeric threshold
    in the record's unit (`>= 0.04 GB/s`, Threshold.expected's words); None for a rule in words."""
    words = str(record.get("expected") or "").removesuffix(PROVISIONAL).split(" ", 2)
    if len(words) < 2 or words[0] not in BOUND:
        return None
    try:
        value = float(words[1])
    except ValueError:
        return None
    if (words[2] if len(words) > 2 else "") != (record.get("unit") or ""):
        return None  # more than a limit and its unit: a rule the words say, no number to plot
    return BOUND[words[0]], value


def _epoch(stamp) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


class _Families:
    def __init__(self):
        self.lines: list[str] = []
        self.seen: set = set()

    def family(self, name: str, help_: str, samples) -> None:
        """One gauge family; a sample whose labels repeat an earlier one's is left out (OpenMetrics
        refuses a duplicate)."""
        body = []
        for labels, value in samples:
            key = (name, tuple(labels.items()))
            if key in self.seen:
                continue
            self.seen.add(key)
            text = ",".join(f'{k}="{label(v)}"' for k, v in labels.items())
            body.append(f"{name}{{{text}}} {number(value)}" if text else f"{name} {number(value)}")
        if body:
            self.lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", *body]


def text(doc: dict) -> str:
    """The OpenMetrics exposition of a results document (results.json's, whole: records with
    their figures), `# EOF` last."""
    meta, records = doc.get("meta") or {}, doc.get("results") or []
    prof = meta.get("profile") or ""
    out = _Families()
    out.family("signoff_verdict", "The run's verdict: 1 for its word (PASS, FAIL, ERROR, INCOMPLETE), 0 "
               "for the others; all 0 while the run is in progress",
               [({"profile": prof, "verdict": v}, int(doc.get("verdict") == v)) for v in VERDICTS])
    if meta.get("exit_code") is not None:
        out.family("signoff_exit_code", "The run's exit code (README: Exit codes)",
                   [({"profile": prof}, int(meta["exit_code"]))])
    out.family("signoff_run_info", "The run: its id and the code that ran (value 1)",
               [({"profile": prof, "run": meta.get("run") or "",
                  "suite_version": meta.get("suite_version") or ""}, 1)])
    for key, name in (("started", "signoff_run_start_timestamp_seconds"),
                      ("finished", "signoff_run_end_timestamp_seconds")):
        if (t := _epoch(meta.get(key))) is not None:
            out.family(name, f"When the run {key}, seconds since the epoch", [({"profile": prof}, t)])
    out.family("signoff_hosts", "Hosts the run judged", [({"profile": prof}, len(meta.get("hosts") or []))])
    counts = {s: 0 for s in STATUSES}
    for r in records:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    out.family("signoff_checks", "Checks per status", [({"profile": prof, "status": s}, n)
                                                       for s, n in counts.items()])

    def labels(r: dict, **more) -> dict:
        return {"host": r.get("host") or "", "criterion": r.get("criterion") or "",
                "status": r.get("status") or "", "profile": prof, **more}
    out.family("signoff_check", "One sample per check (host and criterion), its status the label (value 1)",
               [(labels(r), 1) for r in records])
    out.family("signoff_measured", "Each check's measured figure, in its unit (the label unit)",
               [(labels(r, unit=r.get("unit") or ""), figure(r.get("measured"))) for r in records
                if figure(r.get("measured")) is not None])
    out.family("signoff_threshold", "The profile's threshold a figure was judged against, in its unit; "
               "bound: min, max or equals",
               [(labels(r, unit=r.get("unit") or "", bound=t[0]), t[1]) for r in records
                if (t := threshold(r)) is not None])
    return "\n".join([*out.lines, "# EOF"]) + "\n"


def write(rd: Path, doc: dict, also: str | None = None) -> None:
    """signoff.prom in the report directory, and at `also` (--metrics-file): a new file renamed
    over the name, so the textfile collector never reads half of one (its temp file is
    .<name>.<random>.tmp, a name the collector's *.prom skips)."""
    body = text(doc)
    safefile.write(Path(rd) / FILE, body)
    if also:
        safefile.write(Path(also), body)


def check_path(path: str) -> None:
    """--metrics-file judged before anything runs: its directory exists."""
    from signoff import InputError
    if not path.strip():
        raise InputError("--metrics-file is empty (an unset variable?): name a file or leave it out")
    p = Path(path)
    if p.is_dir():
        raise InputError(f"--metrics-file {path}: a directory: name the file (e.g. {p / 'signoff.prom'})")
    if not p.parent.is_dir():
        raise InputError(f"--metrics-file {path}: its directory {p.parent} does not exist")
