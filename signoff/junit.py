"""junit.xml written from results.json's records, so CI reads the statuses the report shows.

pytest's own JUnit writer sees pytest outcomes: it files an ERROR (could not measure) under
<failure> and NOT RUN under <skipped>, which CI counts as fine. Here NOT RUN and ERROR are
<error>, FAIL is <failure>, only N.A. and UNSEEN (what this machine cannot show: its ask and why
are the testcase's properties) are <skipped>, and one more testcase carries the verdict, saying
how many checks this machine cannot show.

Bounded like results.json (45,000 testcases at 1,000 hosts x the sheet): one testcase a line; a
criterion's `expected`, `unit` and `source`, alike on most of its testcases, are the suite's
properties `expected:<criterion>` (etc.), stated once, and only a testcase that differs carries
its own; `host` only where the name's [host] does not say it; an N.A.'s reason is the
<skipped> message alone (a FAIL's or ERROR's message is also the element's text)."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from signoff import safefile

ELEMENT = {"FAIL": "failure", "ERROR": "error", "NOT RUN": "error", "N.A.": "skipped", "UNSEEN": "skipped"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # colours and cursor moves (fio's, a shell's)
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")  # XML 1.0 chars


def xml_text(value) -> str:
    """value as text XML 1.0 can hold: ANSI sequences dropped, other control characters as
    U+FFFD (a CI parser rejects the whole file for one)."""
    return NOT_XML.sub("\ufffd", ANSI.sub("", str(value)))


def _props(parent, items: dict, tail: str | None = None) -> None:
    items = {k: v for k, v in items.items() if v not in (None, "")}
    if items:
        props = ET.SubElement(parent, "properties")
        props.text = props.tail = tail
        for k, v in items.items():
            ET.SubElement(props, "property", name=k, value=xml_text(v)).tail = tail


SHARED = ("expected", "unit", "source")  # a criterion's, stated once on the suite where alike


def _case(suite, classname: str, name: str, status: str, message: str, seconds: float, props: dict):
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{seconds:.3f}")
    case.tail = "\n"
    _props(case, props)
    if status in ELEMENT:
        el = ET.SubElement(case, ELEMENT[status], type=status, message=xml_text(message[:2000]))
        if status != "N.A." or len(message) > 2000:
            el.text = xml_text(message)


def shared(records: list[dict]) -> dict[str, dict]:
    """{criterion: {key: value}} for each of SHARED that most of a criterion's records (2 or
    more) state alike: the suite says it once, those testcases leave it out."""
    seen: dict[tuple, Counter] = {}
    for r in records:
        for k in SHARED:
            if r.get(k) not in (None, ""):
                seen.setdefault((r.get("criterion"), k), Counter())[str(r[k])] += 1
    out: dict[str, dict] = {}
    for (crit, k), values in seen.items():
        value, n = values.most_common(1)[0]
        if crit is not None and n > 1:
            out.setdefault(crit, {})[k] = value
    return out


def _attempts(r: dict) -> dict:
    """A measured-again figure's attempts and spread (signoff/retry.py), also on a PASS."""
    d = r.get("details") or {}
    if len(d.get("attempts") or []) < 2:
        return {}
    return {"attempts": ", ".join(str(v) for v in d["attempts"]), "spread_pct": d.get("spread_pct")}


def write(path: Path, doc: dict) -> None:
    from signoff.report import excluded_text  # report imports results, which imports this module
    from signoff.results import verdict_text
    from signoff.unseen import verdict_suffix
    records, meta = doc["results"], doc["meta"]
    counts = Counter(r["status"] for r in records)
    verdict = doc.get("verdict") or "INCOMPLETE"
    base = meta.get("baseline")
    regressed = len((base or {}).get("regressions") or [])
    failed_on = bool(meta.get("fail_on_regression") and regressed)  # the run exits 1 for them
    root = ET.Element("testsuites")
    suite = ET.SubElement(root, "testsuite", name="signoff", tests=str(len(records) + 1 + bool(base)),
                          failures=str(counts["FAIL"] + (verdict not in ("PASS", "ERROR")) + failed_on),
                          errors=str(counts["ERROR"] + counts["NOT RUN"] + (verdict == "ERROR")),
                          skipped=str(counts["N.A."] + counts["UNSEEN"]),
                          timestamp=str(meta.get("started", "")),
                          time=f"{sum(r.get('duration_s', 0) for r in records):.3f}")
    once = shared(records)
    _props(suite, {"verdict": verdict, "profile": meta.get("profile"),
                   "profile_class": meta.get("profile_class"), "partial": meta.get("partial"),
                   "exit_code": meta.get("exit_code"), "exit_reason": meta.get("exit_reason"),
                   "not_checked": excluded_text(meta) if meta.get("excluded") else None,
                   **{f"{k}:{crit}": v for crit, said in sorted(once.items()) for k, v in said.items()}},
           "\n")
    suite.text = "\n"
    for r in records:
        module, _, name = r["test"].partition("::")
        said = once.get(r.get("criterion"), {})
        own = {k: r.get(k) for k in SHARED if str(r.get(k)) != said.get(k)}
        _case(suite, module.removesuffix(".py").replace("/", "."), name, r["status"],
              r.get("message") or "", r.get("duration_s", 0.0),
              {**({} if name.endswith(f"[{r['host']}]") else {"host": r["host"]}),
               "measured": r.get("measured"), **own, **_attempts(r),
               "ask": r.get("ask"), "why": r.get("why")})
    # CI jobs that only count testcases must still see a partial or failed sign-off; an ERROR
    # verdict (could not measure) is an <error>, as its checks are, not a <failure> of the hardware.
    why = meta.get("partial") or ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    _case(suite, "signoff", "verdict", verdict if verdict in ("PASS", "ERROR") else "FAIL",
          f"sign-off verdict {verdict_text(verdict)}{verdict_suffix(doc)}: {why}", 0.0,
          {"verdict": verdict, "not_checked": excluded_text(meta) if meta.get("excluded") else None,
           "cannot_show": verdict_suffix(doc).removeprefix("; ") or None})  # a PASS has no message
    if base:  # the regressions a CI page lists; a failure where they fail the run
        text = (f"{regressed} regression{'s' * (regressed != 1)} against {base.get('name')}"
                + (" (--fail-on-regression: the run fails)" if failed_on else ""))
        _case(suite, "signoff", "baseline", "FAIL" if failed_on else "PASS", text, 0.0,
              {"regressions": regressed, "warnings": "; ".join(base.get("warnings") or [])})
    root.text = "\n"
    buf = io.BytesIO()
    ET.ElementTree(root).write(buf, encoding="utf-8", xml_declaration=True)
    safefile.write(Path(path), buf.getvalue())  # a new file renamed over it: no link followed
