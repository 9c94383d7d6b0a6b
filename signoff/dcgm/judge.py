"""DCGM's diagnostic judged per GPU: pure functions over `dcgmi diag -r N -j`'s JSON.

The schema (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json): {"DCGM Diagnostic":
{"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group",
"entity_group_id", "entity_id", "status", "warnings": [{"warning", "error_id",
"error_category", "error_severity"}]}], "test_summary": {"status"}}]}], "runtime_error"},
"entity_groups": [{"entity_group", "entity_group_id", "entities": [{"entity_id", "device_id",
"serial_num"}]}], "metadata": {"version", ...}}. Statuses as dcgmi prints them (dcgmi/Diag.cpp):
Pass, Skip, Warn, Fail, Not Run; categories and severities: dcgmlib/dcgm_errors.h. What dcgmi
leaves out is judged too (HelperJsonAddResult): a GPU's result in a test it did not run on, a
test's test_summary where it ran on none."""

from __future__ import annotations

import json

# dcgm_errors.h: dcgmErrorCategory_t and dcgmErrorSeverity_t (NVIDIA/DCGM dcgmlib/dcgm_errors.h)
CATEGORIES = {0: "NONE", 1: "PERF_THRESHOLD", 2: "PERF_VIOLATION", 3: "SOFTWARE_CONFIG",
              4: "SOFTWARE_LIBRARY", 5: "SOFTWARE_XID", 6: "SOFTWARE_CUDA", 7: "SOFTWARE_EUD",
              8: "SOFTWARE_OTHER", 9: "HARDWARE_THERMAL", 10: "HARDWARE_MEMORY", 11: "HARDWARE_NVLINK",
              12: "HARDWARE_NVSWITCH", 13: "HARDWARE_PCIE", 14: "HARDWARE_POWER", 15: "HARDWARE_OTHER",
              16: "INTERNAL_OTHER"}
SEVERITIES = {0: "NONE", 1: "MONITOR", 2: "ISOLATE", 3: "UNKNOWN", 4: "TRIAGE", 5: "CONFIG", 6: "RESET"}
# the severities whose action is written beside the GPU on the cover
ACTIONS = {2: "isolate", 6: "reset"}
JUDGED = ("Fail", "Warn")  # DCGM's own judgement against the GPU: never a PASS
NOT_RUN = ("Skip", "Not Run")  # the level's test did not run on the GPU: not judged, never a PASS
GPU_GROUP = "GPU"
# NVIDIA's stated runtime per level (docs.nvidia.com/datacenter/dcgm/latest/reference/
# command-line-reference/dcgmi/dcgmi-diag.html: r1 seconds, r2 about 2 min, r3 about 15 min,
# r4 extended); the default timeout is the wait GoogleCloudPlatform/cluster-health-scanner gives
# each level (src/health_runner/health_runner.py _SLEEP_TIME_MINUTES_BY_R_LEVEL: 5 / 30 / 90 min
# for r2 / r3 / r4; r1 as r2)
RUNTIME_S = {1: 60, 2: 120, 3: 900, 4: 3600}
TIMEOUT_S = {1: 300, 2: 300, 3: 1800, 4: 5400}
LEVELS = (1, 2, 3, 4)
CAUSE_FAIL = ("the GPU itself (DCGM's category and severity say which part: memory, PCIe, NVLink, "
              "thermal, power), or its driver and firmware; hand the raw JSON to the provider")
CAUSE_CLOSED = ("DCGM did not report a judgement of the GPUs (a diagnostic that hung or crashed, a "
                "GPU it could not reach, a wrong dcgmi or host engine version): failed closed, never a "
                "PASS; rerun `dcgmi diag` by hand and read its output")


def level_of(extra: dict) -> int:
    return int(extra.get("level", 3))


def timeout_of(extra: dict) -> float:
    return float(extra.get("timeout") or TIMEOUT_S[level_of(extra)])


def check_extra(name: str, extra: dict) -> None:
    """A dcgm_diag threshold's keys: level 1-4, timeout > 0 s, optional true/false, tests {level:
    [DCGM test name]}, allow_skip a list of DCGM test names or {name: why} (ValueError naming the
    key)."""
    lvl = extra.get("level", 3)
    if isinstance(lvl, bool) or lvl not in LEVELS:
        raise ValueError(f"level: expected one of 1, 2, 3, 4 (dcgmi diag -r), got {lvl!r}")
    t = extra.get("timeout")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
        raise ValueError(f"timeout: expected seconds > 0, got {t!r}")
    if "optional" in extra and not isinstance(extra["optional"], bool):
        raise ValueError(f"optional: expected true or false, got {extra['optional']!r}")
    skip = extra.get("allow_skip")
    whys = list(skip.values()) if isinstance(skip, dict) else []
    if skip is not None and (not isinstance(skip, (list, dict)) or not all(isinstance(s, str) for s in skip)
                             or not all(isinstance(w, str) and w.strip() for w in whys)):
        raise ValueError(f"allow_skip: expected a list of DCGM test names or {{name: why}}, got {skip!r}")
    tests = extra.get("tests")
    if tests is not None:
        if not isinstance(tests, dict):
            raise ValueError(f"tests: expected {{level: [DCGM test names]}}, got {tests!r}")
        for k, v in tests.items():
            if str(k) not in {str(n) for n in LEVELS}:
                raise ValueError(f"tests.{k}: expected a level 1, 2, 3 or 4")
            if not (isinstance(v, list) and v and all(isinstance(x, str) and x for x in v)):
                raise ValueError(f"tests.{k}: expected a list of DCGM test names, got {v!r}")


def expected_tests(extra: dict) -> list[str] | None:
    """The tests the profile's level runs on every GPU (its `tests:` for the level), None where
    the profile names none (ERROR: the level's tests cannot be checked)."""
    tests = extra.get("tests") or {}
    lvl = level_of(extra)
    got = tests.get(lvl, tests.get(str(lvl)))
    return list(got) if got else None


def allowed_skips(extra: dict) -> dict[str, str]:
    """allow_skip as {test: why} (a plain list: no why)."""
    skip = extra.get("allow_skip") or ()
    return dict(skip) if isinstance(skip, dict) else {name: "" for name in skip}


def parse(stdout: str) -> tuple[dict | None, str | None]:
    """(the document, None) or (None, why it cannot be judged)."""
    text = (stdout or "").strip()
    if not text:
        return None, "dcgmi printed nothing"
    try:
        doc = json.loads(text)
    except ValueError as exc:
        return None, f"dcgmi's output is not JSON ({exc.msg} at char {exc.pos}: {text[:80]!r})"
    if not isinstance(doc, dict) or not isinstance(doc.get("DCGM Diagnostic"), dict):
        return None, "dcgmi's JSON has no \"DCGM Diagnostic\" object"
    diag = doc["DCGM Diagnostic"]
    if diag.get("runtime_error"):
        return None, f"DCGM runtime error: {diag['runtime_error']}"
    cats = diag.get("test_categories")
    if not isinstance(cats, list) or not any(isinstance(c, dict) and c.get("tests") for c in cats):
        return None, "dcgmi's JSON has no test categories (no test ran)"
    return doc, None


def serials(doc: dict) -> dict[int, str]:
    """GPU entity id -> serial number, from the document's entity_groups."""
    out = {}
    for g in doc.get("entity_groups") or []:
        if isinstance(g, dict) and g.get("entity_group") == GPU_GROUP:
            for e in g.get("entities") or []:
                if isinstance(e, dict) and isinstance(e.get("entity_id"), int):
                    out[e["entity_id"]] = str(e.get("serial_num") or "")
    return out


def warning_text(w: dict) -> str:
    cat, sev = w.get("error_category"), w.get("error_severity")
    return (f"error id {w.get('error_id')}, category {CATEGORIES.get(cat, cat)}, severity "
            f"{SEVERITIES.get(sev, sev)}: {' '.join(str(w.get('warning') or '').split())}")


def _key(w: dict) -> tuple:
    return w.get("error_id"), " ".join(str(w.get("warning") or "").split())


def judge(doc: dict, gpus: list[dict], extra: dict) -> dict:
    """Per GPU: {"faults": [text] (Fail, Warn, a GPU DCGM did not test, a test that failed in its
    test_summary on no GPU), "failed": sorted GPU ids, "not_run": [text] (Skip / Not Run of a
    test, a GPU without a result in a test, a test of the level absent; allow_skip's Skips said
    apart in "allowed"), "actions": [text] (ISOLATE / RESET), "tests": {name: summary status},
    "gpus": {id: {test: status}}}. `gpus`: the host's GPUs as sysinfo read them (index, serial);
    `extra`: the dcgm_diag threshold's keys (level, tests, allow_skip).

    dcgmi prints no result for a GPU a test did not run on, and no test_summary for a test run
    on none (Not Run: dcgmi/Diag.cpp HelperJsonAddResult), so every GPU must have a result in
    every test of the level (and in any other test that has a GPU's result), and every test of
    the level must be there. A Skip is allowed only where DCGM printed it and allow_skip names
    the test (a test DCGM's SKU file disables for the family). A test_summary Fail or Warn that
    no GPU's result carries (an error on no GPU) fails the test for every GPU it ran on (none
    passed it), blaming no GPU."""
    lvl = level_of(extra)
    allow = allowed_skips(extra)
    ser = {**{g["index"]: str(g.get("serial") or "") for g in gpus}, **serials(doc)}
    per: dict[int, dict] = {}
    faults, not_run, allowed, actions, failed = [], [], [], [], set()
    skips: dict[tuple, list] = {}  # (test, why) -> GPUs: allow_skip's, said once per test
    tests, ran, order, unsummed = {}, {}, [], set()

    def who(i):
        return f"GPU {i}" + (f" (serial {ser[i]})" if ser.get(i) else "")
    for cat in doc["DCGM Diagnostic"]["test_categories"]:
        for t in cat.get("tests") or []:
            name = t.get("name")
            order.append(name)
            summary = t.get("test_summary") if isinstance(t.get("test_summary"), dict) else {}
            tests[name] = summary.get("status")
            judged, said = False, set()
            ids = ran.setdefault(name, set())
            for r in t.get("results") or []:
                if not isinstance(r, dict):
                    continue
                ws = [w for w in r.get("warnings") or [] if isinstance(w, dict)]
                said.update(_key(w) for w in ws)
                if r.get("entity_group") != GPU_GROUP or not isinstance(r.get("entity_id"), int):
                    continue  # a CPU entity (CPU EUD): no GPU's verdict; its Fail is the summary's
                i, st = r["entity_id"], r.get("status")
                per.setdefault(i, {})[name] = st
                ids.add(i)
                if st in JUDGED:
                    judged = True
                    failed.add(i)
                    said_gpu = "; ".join(warning_text(w) for w in ws) or "no warning given"
                    faults.append((i, f"{who(i)}: {cat.get('category')} test {name} {st}: {said_gpu}"))
                    for w in ws:
                        act = ACTIONS.get(w.get("error_severity"))
                        if act:
                            actions.append((i, f"{act} {who(i)}"))
                elif st in NOT_RUN:
                    why = "; ".join(" ".join(str(w.get("warning") or "").split()) for w in ws)
                    why = why or "no reason given"
                    if name in allow and st == "Skip":
                        skips.setdefault((name, why), []).append(i)
                    else:
                        not_run.append(f"{who(i)}: test {name} {st} ({why})")
                elif st != "Pass":
                    not_run.append(f"{who(i)}: test {name} status {st!r} (not one of DCGM's Pass, Skip, "
                                   f"Warn, Fail, Not Run)")
            st = summary.get("status")
            if "status" not in summary:
                unsummed.add(name)
            elif st in JUDGED:
                ws = [w for w in summary.get("warnings") or [] if isinstance(w, dict)]
                own = [w for w in ws if _key(w) not in said] if judged else ws
                if own or not judged:  # DCGM failed the test on no GPU: an error of the whole run
                    failed.update(ids or ser)
                    text = "; ".join(warning_text(w) for w in own) or "no warning given"
                    faults.append((-1, f"{cat.get('category')} test {name} {st} in its test_summary, "
                                       f"on no GPU: {text}"))
            elif st not in (*NOT_RUN, "Pass"):
                not_run.append(f"test {name}: test_summary status {st!r} (not one of DCGM's Pass, Skip, "
                               f"Warn, Fail, Not Run)")
    for i in sorted(set(ser) - set(per)):
        failed.add(i)
        faults.append((i, f"{who(i)}: in no DCGM test result (NVML sees it; DCGM did not test it)"))
    expected = expected_tests(extra)
    if expected is None:
        not_run.append(f"the profile names no tests for dcgmi diag -r {lvl} (dcgm_diag tests: {lvl}): the "
                       f"level's tests cannot be checked")
    absent = [name for name in expected or () if name not in tests]
    if absent:
        not_run.append(f"test{'s' if len(absent) > 1 else ''} {', '.join(absent)} of dcgmi diag -r {lvl}: "
                       f"not in DCGM's output (run on no GPU)")
    for name in dict.fromkeys(order):
        if name not in (expected or ()) and not ran.get(name):
            if name in unsummed:
                not_run.append(f"test {name}: no test_summary (dcgmi prints none for a test Not Run)")
            continue  # a test on no GPU entity (CPU EUD) outside the level's list: no GPU owes it a result
        lacking = [i for i in sorted(per) if name not in per[i]]  # GPUs in no test: failed above
        whole = bool(lacking) and len(lacking) == len(per)
        gaps = (["no GPU's result"] if whole else []) + (["no test_summary"] if name in unsummed else [])
        if gaps:
            not_run.append(f"test {name}: {' and '.join(gaps)} (dcgmi prints none for a test or a GPU it did "
                           f"not run: Not Run)")
        if not whole:
            not_run.extend(f"{who(i)}: test {name}: no result (dcgmi prints none for a GPU the test did not "
                           f"run on: Not Run)" for i in lacking)
    for (name, why), ids in skips.items():
        every = set(ids) >= set(per)
        whom = "every GPU" if every else ", ".join(who(i) for i in ids)
        allowed.append(f"{whom}: test {name} Skip ({why})" + (f"; {allow[name]}" if allow[name] else ""))
    faults = [text for _, text in sorted(faults, key=lambda f: f[0])]  # the host's, then GPU by GPU
    return {"faults": faults, "failed": sorted(failed), "not_run": not_run, "allowed": allowed,
            "actions": list(dict.fromkeys(a for _, a in sorted(actions, key=lambda a: a[0]))), "tests": tests,
            "gpus": {str(i): v for i, v in sorted(per.items())}}
