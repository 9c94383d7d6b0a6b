"""DCGM's diagnostic judged per GPU: pure functions over `dcgmi diag -r N -j`'s JSON.

The schema (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json): {"DCGM Diagnostic":
{"test_categories": [{"category", "tests": [{"name", "results": [{"entity_group",
"entity_group_id", "entity_id", "status", "warnings": [{"warning", "error_id",
"error_category", "error_severity"}]}], "test_summary": {"status"}}]}], "runtime_error"},
"entity_groups": [{"entity_group", "entity_group_id", "entities": [{"entity_id", "device_id",
"serial_num"}]}], "metadata": {"version", ...}}. Statuses as dcgmi prints them (dcgmi/Diag.cpp):
Pass, Skip, Warn, Fail, Not Run; categories and severities: dcgmlib/dcgm_errors.h."""

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
    """A dcgm_diag threshold's keys: level 1-4, timeout > 0 s, optional true/false, allow_skip a
    list of DCGM test names (ValueError naming the key)."""
    lvl = extra.get("level", 3)
    if isinstance(lvl, bool) or lvl not in LEVELS:
        raise ValueError(f"level: expected one of 1, 2, 3, 4 (dcgmi diag -r), got {lvl!r}")
    t = extra.get("timeout")
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0):
        raise ValueError(f"timeout: expected seconds > 0, got {t!r}")
    if "optional" in extra and not isinstance(extra["optional"], bool):
        raise ValueError(f"optional: expected true or false, got {extra['optional']!r}")
    skip = extra.get("allow_skip")
    if skip is not None and not (isinstance(skip, list) and all(isinstance(s, str) for s in skip)):
        raise ValueError(f"allow_skip: expected a list of DCGM test names, got {skip!r}")


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


def judge(doc: dict, gpus: list[dict], allow_skip=()) -> dict:
    """Per GPU: {"faults": [text] (Fail, Warn, a GPU DCGM did not test), "failed": sorted GPU
    ids, "not_run": [text] (Skip / Not Run of a test, allow_skip's said apart in "allowed"),
    "actions": [text] (ISOLATE / RESET), "tests": {name: summary status}, "gpus": {id: {test:
    status}}}. `gpus`: the host's GPUs as sysinfo read them (index, serial)."""
    ser = {**{g["index"]: str(g.get("serial") or "") for g in gpus}, **serials(doc)}
    per: dict[int, dict] = {}
    faults, not_run, allowed, actions, failed = [], [], [], [], set()
    tests = {}

    def who(i):
        return f"GPU {i}" + (f" (serial {ser[i]})" if ser.get(i) else "")
    for cat in doc["DCGM Diagnostic"]["test_categories"]:
        for t in cat.get("tests") or []:
            name = t.get("name")
            tests[name] = (t.get("test_summary") or {}).get("status")
            for r in t.get("results") or []:
                if r.get("entity_group") != GPU_GROUP or not isinstance(r.get("entity_id"), int):
                    continue  # a CPU entity (CPU EUD): not a GPU's verdict
                i, st = r["entity_id"], r.get("status")
                per.setdefault(i, {})[name] = st
                ws = [w for w in r.get("warnings") or [] if isinstance(w, dict)]
                if st in JUDGED:
                    failed.add(i)
                    said = "; ".join(warning_text(w) for w in ws) or "no warning given"
                    faults.append((i, f"{who(i)}: {cat.get('category')} test {name} {st}: {said}"))
                    for w in ws:
                        act = ACTIONS.get(w.get("error_severity"))
                        if act:
                            actions.append((i, f"{act} {who(i)}"))
                elif st in NOT_RUN:
                    why = "; ".join(" ".join(str(w.get("warning") or "").split()) for w in ws)
                    why = why or "no reason given"
                    line = f"{who(i)}: test {name} {st} ({why})"
                    (allowed if name in allow_skip else not_run).append(line)
                elif st != "Pass":
                    not_run.append(f"{who(i)}: test {name} status {st!r} (not one of DCGM's Pass, Skip, "
                                   f"Warn, Fail, Not Run)")
    for i in sorted(set(ser) - set(per)):
        failed.add(i)
        faults.append((i, f"{who(i)}: in no DCGM test result (NVML sees it; DCGM did not test it)"))
    faults = [text for _, text in sorted(faults, key=lambda f: f[0])]  # GPU by GPU, in DCGM's order
    return {"faults": faults, "failed": sorted(failed), "not_run": not_run, "allowed": allowed,
            "actions": list(dict.fromkeys(a for _, a in sorted(actions, key=lambda a: a[0]))), "tests": tests,
            "gpus": {str(i): v for i, v in sorted(per.items())}}
