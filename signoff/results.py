"""results.json and results.jsonl: every measurement of the run.

Each change (a record, a host's facts, a meta key, a live section) is appended as one line
to `results.jsonl`, so writing costs the size of the change, not of the run, and a killed
run (even SIGKILL) loses nothing that was measured. `results.json`, the summary document
(meta, verdict, hosts, results, live sections such as `soak`), is written at the start
(verdict null: a run in progress) and rebuilt from the same changes at the end and on
Ctrl-C / SIGTERM; after a SIGKILL, `python -m signoff.results rebuild DIR` makes it.

results.json is bounded (`bounded()`): what every record of a criterion and status has alike
(its source, threshold, settings, a class's host list) is stated once under `common`, each
record keeping its own figures and what differs; a family's large series (the soak's samples)
stay in the per-host file its section names. `load()` gives the whole document back."""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import sys
import threading
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from signoff import InputError, junit, safefile

ALL = "all hosts"  # the host column of a cluster-wide check
# UNSEEN: what this machine's form cannot show (signoff/unseen.py): no judgement, as N.A.
STATUSES = ("PASS", "FAIL", "ERROR", "N.A.", "UNSEEN", "NOT RUN")
_RANK = {"PASS": 0, "N.A.": 1, "UNSEEN": 2, "NOT RUN": 3, "FAIL": 4, "ERROR": 5}
UNJUDGED = ("N.A.", "UNSEEN")  # a verdict of these alone judged nothing
LOG = "results.jsonl"


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
    is never a pass. FAIL where a check measured outside its threshold (it outranks the rest);
    ERROR where none did but some could not measure: a provider reading FAIL reads "the
    hardware failed", which nothing measured says. UNSEEN (what this machine cannot show) leaves
    the verdict of the rest as it is; every output says how many (unseen.verdict_suffix)."""
    statuses = [r["status"] for r in records]
    if not statuses or all(s in UNJUDGED for s in statuses):
        return "INCOMPLETE"
    if "FAIL" in statuses:
        return "FAIL"
    if "ERROR" in statuses:
        return "ERROR"
    if any(s == "NOT RUN" for s in statuses):
        return "INCOMPLETE"
    return "PASS"


# Said beside the word wherever a verdict is shown (results.json's `verdict` keeps the word
# alone): a bare ERROR reads as a fault of the hardware, which nothing measured says.
VERDICT_MEANS = {"ERROR": "not signed off: could not measure"}


def verdict_text(v: str) -> str:
    return f"{v} ({VERDICT_MEANS[v]})" if v in VERDICT_MEANS else v


def version_text(v) -> str:
    """The suite version a run recorded, as a page says it: 'signoff 0.1.0 (git f896707)'. A
    run whose package version could not be read recorded 'unknown (git 36101e0-dirty)': its
    commit is what names the code, so it is said alone ('signoff git 36101e0-dirty')."""
    v = str(v or "?")
    if v.startswith("unknown (git ") and v.endswith(")"):
        v = v[len("unknown ("):-1]
    return f"signoff {v}"


# The exit code of an acceptance run (README: Exit codes), so CI can tell "the hardware failed"
# from "could not measure" from "not a sign-off" without parsing anything. 4 is a usage error,
# pytest's own code, whichever layer (pytest, signoff, the command) refused the options.
EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2, 3, 4


def exit_code(doc: dict) -> tuple[int, str]:
    """(code, why) of a finished run's document: 1 where a check FAILed (a judgement: fix the
    hardware) or, with --fail-on-regression, a PASS regressed against the baseline; 2 where none
    FAILed but some could not measure (ERROR) or did not run (NOT RUN): fix the run, not the
    hardware; 3 where the run is not a sign-off (interrupted, crashed or killed, a subset without
    --partial, nothing judged). A judged FAIL found before an interrupt stands (finish())."""
    meta, v = doc["meta"], doc.get("verdict") or "INCOMPLETE"
    n = Counter(r["status"] for r in doc["results"])
    if meta.get("usage_error"):
        return EXIT_USAGE, "usage error: the options were refused"
    if v == "PASS":
        regressed = len((meta.get("baseline") or {}).get("regressions") or [])
        if meta.get("fail_on_regression") and regressed:
            return EXIT_FAIL, (f"PASS, but {regressed} regression{'s' * (regressed > 1)} against the "
                               f"baseline (--fail-on-regression)")
        return EXIT_PASS, "PASS"
    said = ", ".join(f"{n[s]} {s}" for s in ("FAIL", "ERROR", "NOT RUN") if n[s])
    if v in ("FAIL", "ERROR"):  # an earlier run's FAIL may be ERRORs only (before the word ERROR)
        return (EXIT_FAIL, f"FAIL: {said}") if n["FAIL"] else (EXIT_ERROR, f"ERROR: no FAIL, but {said}")
    if meta.get("interrupted"):
        return EXIT_INCOMPLETE, f"INCOMPLETE: the run was {'killed' if meta.get('killed') else 'interrupted'}"
    if meta.get("partial") and not meta.get("partial_accepted"):
        return EXIT_INCOMPLETE, "INCOMPLETE: a partial run without --partial"
    if n["NOT RUN"]:
        return EXIT_ERROR, f"NOT RUN: no FAIL, but {said}"
    return EXIT_INCOMPLETE, "INCOMPLETE: no check judged (every one N.A. or UNSEEN, or none selected)"


def not_reported(records: list[dict], selected: list[str], why: str) -> list[dict]:
    """NOT RUN records for the selected checks that have none: never silently absent."""
    seen = {r.get("test") for r in records}
    out = []
    for nid in selected:
        if nid not in seen:
            criterion, host = split_nodeid(nid)
            out.append({"test": nid, "criterion": criterion, "host": host, "status": "NOT RUN",
                        "message": why})
    return out


def _empty(meta: dict) -> dict:
    return {"meta": meta, "verdict": None, "hosts": {}, "results": []}


def _apply(doc: dict, change: dict) -> None:
    """One line of results.jsonl applied to the summary document (the run and a rebuild
    both build results.json this way)."""
    kind = change["type"]
    if kind == "meta":
        doc["meta"].update(change["meta"])
    elif kind == "host":
        doc["hosts"][change["name"]] = change["facts"]
    elif kind == "result":
        doc["results"].append(change["record"])
    elif kind == "live":
        doc.setdefault(change["section"], {})[change["name"]] = change["value"]
    elif kind == "finish":
        doc["verdict"] = change["verdict"]
        doc["meta"].update(change["meta"])
    # "selected" (the checks the run meant to judge) is for a rebuild, not the document


def finite(obj):
    """obj with every NaN or infinite float written as the string "NaN", "Infinity" or
    "-Infinity": strict JSON has no such number (a NaN loss is what train_loss_falls exists
    to catch, and its message says so)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def dumps(obj, **kw) -> str:
    """json.dumps that never writes NaN or Infinity (the usual case costs no second pass)."""
    try:
        return json.dumps(obj, allow_nan=False, default=str, **kw)
    except ValueError:
        return json.dumps(finite(obj), allow_nan=False, default=str, **kw)


# Never under `common`: what a record is (its check, host, status) and its own figure.
KEPT = ("test", "criterion", "host", "status", "measured", "unit")
_NONE = object()  # "nothing alike" / "nothing left"


def _same(a, b) -> bool:
    """a == b as JSON: of the same JSON types throughout (True is no 1, 1 no 1.0, NaN no NaN;
    a tuple is the list it is written as)."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _alike(values: list):
    """What all of values have alike: the value itself; of dicts, the keys every one has,
    each alike in all (recursively); _NONE where nothing is."""
    first = values[0]
    if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
        out = {}
        for k in first:
            if all(k in v for v in values):
                got = _alike([v[k] for v in values])
                if got is not _NONE:
                    out[k] = got
        return out or _NONE
    return first if all(_same(first, v) for v in values[1:]) else _NONE


def _strip(value, alike):
    """value less what `alike` (its _alike()) holds; _NONE where nothing is left."""
    if not (isinstance(alike, dict) and isinstance(value, dict)):
        return _NONE  # a leaf of `alike` is this very value
    out = {}
    for k, v in value.items():
        if k in alike:
            v = _strip(v, alike[k])
            if v is _NONE:
                continue
        out[k] = v
    return out or _NONE


def _merge(alike, own):
    """_strip()'s inverse: own with what `alike` holds put back (a copy: records share nothing)."""
    if own is _NONE:
        return copy.deepcopy(alike)
    if not (isinstance(alike, dict) and isinstance(own, dict)):
        return own
    out = {k: copy.deepcopy(v) for k, v in alike.items() if k not in own}
    for k, v in own.items():
        out[k] = _merge(alike[k], v) if k in alike else v
    return out


def bounded(doc: dict) -> dict:
    """results.json's form of the document (a new one; `doc` is left as it is). What every
    record of one criterion and status has alike, but for KEPT, is stated once in
    `common[criterion][status]` and left out of each record; a record keeps its own figures
    and everything that differs from host to host. A family's section may leave out what its
    per-host files hold (the soak's samples: `bound`). load() / expanded() undo both."""
    groups: dict[tuple, list] = {}
    for r in doc["results"]:
        if r.get("criterion") is not None:
            groups.setdefault((r["criterion"], r.get("status")), []).append(r)
    common: dict[str, dict] = {}
    for (crit, status), recs in groups.items():
        if len(recs) > 1:
            got = _alike([{k: v for k, v in r.items() if k not in KEPT} for r in recs])
            if got is not _NONE:
                common.setdefault(crit, {})[status] = got
    out = {k: v for k, v in doc.items() if k != "results"}
    if common:  # none where no two records of a criterion and status share anything
        out["common"] = common
    out["results"] = [r if (t := common.get(r.get("criterion"), {}).get(r.get("status"))) is None
                      else _strip(r, t) for r in doc["results"]]
    from signoff import families
    for mod in families.modules():
        if hasattr(mod, "bound"):
            mod.bound(out)
    return out


def expanded(doc: dict, report_dir: Path | None = None) -> dict:
    """A results.json's document whole again (in place): each record with what `common`
    states for it, and, with the report directory, each family's series from its files."""
    common = doc.pop("common", None) or {}
    if common:
        doc["results"] = [r if (t := (common.get(r.get("criterion")) or {}).get(r.get("status"))) is None
                          else _merge(t, r) for r in doc["results"]]
    if report_dir is not None:
        from signoff import families
        for mod in families.modules():
            if hasattr(mod, "load"):
                mod.load(Path(report_dir), doc)
    return doc


def load(path) -> dict:
    """A run's results.json (or its report directory's) as the run had it in memory: every
    record whole, every series read back (what `--baseline`, calibrate and the tests read)."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    return expanded(json.loads(path.read_text(encoding="utf-8")), path.parent)


def text(doc: dict) -> str:
    """results.json's text: each section one entry a line (a record, a host, a criterion's
    common part, a soak), so it reads, greps and diffs by line at any size; still one JSON
    document (json.loads, jq)."""
    parts = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            body = "[\n" + ",\n".join(f"  {dumps(v)}" for v in value) + "\n ]"
        elif isinstance(value, dict) and value:
            body = "{\n" + ",\n".join(f"  {dumps(str(k))}: {dumps(v)}" for k, v in value.items()) + "\n }"
        else:
            body = dumps(value)
        parts.append(f" {dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _dump(path: Path, doc: dict) -> None:
    safefile.write(path, text(bounded(doc)))  # a new file renamed over it: no link followed


class Results:
    def __init__(self, path: Path, meta: dict):
        self.path = Path(path)
        self.log_path = self.path.with_name(LOG)
        self.doc = _empty({})
        self.selected: list[str] = []
        self._lock = threading.Lock()
        self._log = safefile.open_new(self.log_path)  # a reused --report-dir: this run only
        self._change({"type": "meta", "meta": {**meta, "started": now(), "log": LOG}})
        self.write()  # once: tools see a run in progress (verdict null, no meta.finished)

    def _change(self, change: dict) -> None:
        """Apply and append: one flushed line, so a SIGKILL right after still has it."""
        line = dumps(change, separators=(",", ":"))
        with self._lock:
            _apply(self.doc, change)
            self._log.write(line + "\n")
            self._log.flush()

    def set_host(self, name: str, facts: dict) -> None:
        self._change({"type": "host", "name": name, "facts": facts})

    def set_meta(self, **kv) -> None:
        self._change({"type": "meta", "meta": kv})

    def set_live(self, section: str, name: str, value) -> None:
        """Progress of a long check (e.g. a soak's state per host), in the JSONL as it
        changes; `value` must not be mutated afterwards (it is serialised from another thread)."""
        self._change({"type": "live", "section": section, "name": name, "value": value})

    def select(self, nodeids: list[str]) -> None:
        """The checks this run means to judge: a rebuild marks those without a record NOT RUN."""
        self.selected = list(nodeids)
        self._change({"type": "selected", "tests": self.selected})

    def add(self, record: dict) -> None:
        self._change({"type": "result", "record": record})

    def finish(self, interrupted: bool = False, partial: str | None = None,
               allow_partial: bool = False, fail_on_regression: bool = False,
               usage_error: bool = False) -> str:
        """A partial selection (-k, one file) is never a sign-off PASS unless asked for. The
        verdict and the exit code (meta.exit_code, exit_code()) are written together."""
        v = verdict(self.doc["results"])
        # A judged FAIL found before the interrupt stands; an ERROR may be the interrupt's own.
        if interrupted and not any(r.get("status") == "FAIL" for r in self.doc["results"]):
            v = "INCOMPLETE"
        if partial and v == "PASS" and not allow_partial:
            v = "INCOMPLETE"
        meta = {"finished": now(), "interrupted": interrupted, "partial": partial,
                **({"partial_accepted": True} if partial and allow_partial else {}),
                **({"fail_on_regression": True} if fail_on_regression else {}),
                **({"usage_error": True} if usage_error else {})}
        meta["exit_code"], meta["exit_reason"] = exit_code({**self.doc, "verdict": v,
                                                            "meta": {**self.doc["meta"], **meta}})
        self._change({"type": "finish", "verdict": v, "meta": meta})
        self.write()
        return v

    def write(self) -> None:
        """The whole summary document: at the start and the end only (O(run) each time)."""
        with self._lock:
            _dump(self.path, self.doc)


def rebuild(report_dir: Path, sign_key: str | None = None) -> dict:
    """results.json (and junit.xml, report.md) made again from results.jsonl, e.g. after the controller
    was killed (SIGKILL, OOM, power) before it wrote its summary. A run that did not finish
    is INCOMPLETE; its checks without a record are NOT RUN; a soak cut short gets its
    samples from soak/<host>.jsonl. signoff.prom and the manifest last, as a run's (signed with
    `sign_key`; an earlier signature, of other contents, removed)."""
    report_dir = Path(report_dir)
    log = report_dir / LOG
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"{log}: cannot read it ({exc.strerror}): not a signoff report "
                         f"directory, or one written before {LOG} existed") from None
    doc, selected = _empty({}), []
    for i, line in enumerate(lines, 1):
        try:
            change = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines):
                continue  # the line the kill cut short: nothing of it was complete
            raise InputError(f"{log}:{i}: not a JSON line") from None
        if change.get("type") == "selected":
            selected = change["tests"]
        _apply(doc, change)
    if doc["verdict"] is None:  # killed: the summary of what was measured, never a sign-off
        doc["results"] += not_reported(doc["results"], selected,
                                       "the run was killed before this check reported")
        # a judged FAIL found before the kill stands, as one found before an interrupt (finish())
        doc["verdict"] = "FAIL" if any(r.get("status") == "FAIL" for r in doc["results"]) else "INCOMPLETE"
        doc["meta"].update(interrupted=True, killed=True, rebuilt=now())
        doc["meta"]["exit_code"], doc["meta"]["exit_reason"] = exit_code(doc)  # 1 or 3, as the run's
        from signoff import families
        for mod in families.modules():  # what a family streamed beside the records (the soak's series)
            if hasattr(mod, "rebuild"):
                mod.rebuild(report_dir, doc)
    _dump(report_dir / "results.json", doc)
    junit.write(report_dir / "junit.xml", doc)
    from signoff import report  # report.md too (report.html is pytest-html's, at the end of a run)
    safefile.write(report_dir / "report.md", report.markdown(doc))
    report.write_exclude(report_dir, doc)
    from signoff import manifest, openmetrics
    openmetrics.write(report_dir, doc)
    manifest.write(report_dir, {**doc["meta"], "verdict": doc["verdict"]}, sign_key)
    return doc


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m signoff.results")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rb = sub.add_parser("rebuild",
                        help="write DIR/results.json, junit.xml and report.md from DIR/results.jsonl")
    rb.add_argument("dir", type=Path, help="the run's report directory")
    rb.add_argument("--sign-key", metavar="PATH", help="sign its new MANIFEST.sha256, as a run's --sign-key")
    args = ap.parse_args(argv)
    try:
        if args.sign_key is not None:
            from signoff import manifest
            manifest.check_key(args.sign_key)
        doc = rebuild(args.dir, args.sign_key)
    except InputError as exc:
        print(f"signoff: {exc}", file=sys.stderr)
        return 2
    print(f"{args.dir / 'results.json'}: {len(doc['results'])} records, verdict {doc['verdict']}"
          + (" (the run was killed: rebuilt from its log)" if doc["meta"].get("killed") else "")
          + (f"; the run's exit code {doc['meta']['exit_code']}: {doc['meta']['exit_reason']}"
             if "exit_code" in doc["meta"] else "")
          + f"; MANIFEST.sha256 written again{', signed' if args.sign_key else ', unsigned'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
