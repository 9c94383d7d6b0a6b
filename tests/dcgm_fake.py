"""What `dcgmi diag -r 3 -j` prints, for hosts this machine cannot be (no GPU, no DCGM): the
stand-in tests/recorded/dcgmi/dcgmi answers with these documents (SIGNOFF_FAKE_DCGMI).

Their shape is DCGM's JSON schema (NVIDIA/DCGM testing/python3/dcgm_diag_schema.json: the keys
REQUIRED below, checked by valid()); statuses as dcgmi prints them (dcgmi/Diag.cpp: Pass, Skip,
Warn, Fail, Not Run); error ids, categories and severities of dcgmlib/dcgm_errors.h
(DCGM_FR_PCI_REPLAY_RATE 3, DCGM_FR_VOLATILE_DBE_DETECTED 4, DCGM_FR_PENDING_ROW_REMAP 85;
HARDWARE_MEMORY 10, HARDWARE_PCIE 13; MONITOR 1, ISOLATE 2, RESET 6). The tests of r3 by
category are DCGM 4.x's on an H200 (NVIDIA/DCGM nvvs/src/NvidiaValidationSuite.cpp FillTestVectors;
each plugin's category nvvs/include/PluginStrings.h: software; memory, diagnostic, nvbandwidth;
pcie; targeted_stress, targeted_power, memory_bandwidth); the messages are stand-ins in DCGM's
words, not a recording of a real GPU. What dcgmi leaves out is left out as dcgmi/Diag.cpp does
(HelperJsonAddResult): a GPU a test did not run on (Not Run) has no result in that test."""

from __future__ import annotations

import copy
import json

R3 = [("Deployment", ["software"]), ("Hardware", ["memory", "diagnostic", "nvbandwidth"]),
      ("Integration", ["pcie"]), ("Stress", ["targeted_stress", "targeted_power", "memory_bandwidth"])]
VERSION = "4.6.0"
# the schema's required keys, level by level (dcgm_diag_schema.json "required")
REQUIRED = {"top": ("DCGM Diagnostic",), "category": ("category", "tests"),
            "test": ("name", "results", "test_summary"),
            "result": ("entity_group", "entity_group_id", "entity_id", "status"),
            "warning": ("error_category", "error_id", "error_severity", "warning"),
            "group": ("entities", "entity_group", "entity_group_id"), "entity": ("device_id", "entity_id"),
            "metadata": ("version",)}
DBE = {"warning": "Detected 1 volatile double-bit ECC error(s) in GPU 1.", "error_id": 4,
       "error_category": 10, "error_severity": 2}
ROW_REMAP = {"warning": "GPU 2 had uncorrectable memory errors and row remapping is pending. Run "
                        "nvidia-smi -r to reset the GPU.", "error_id": 85, "error_category": 10,
             "error_severity": 6}
PCIE_REPLAY = {"warning": "Detected more than 8 PCIe replays per minute for GPU 0 : 12.",
               "error_id": 3, "error_category": 13, "error_severity": 1}
# an error on no GPU (DcgmError::GpuIdTag::Unknown): DCGM_FR_INTERNAL 44, TRIAGE 4, INTERNAL_OTHER 16
# (dcgmlib/src/dcgm_errors.c), its message as NVBandwidthPlugin.cpp words it; dcgmi puts it in the
# test's test_summary only (Diag.cpp HelperJsonAddTestSummary: every error; a result: its entity's)
NO_GPU_ERROR = {"warning": "There was an internal error during the test: 'Couldn't find the nvbandwidth "
                           "executable which is required; the install may have failed.'",
                "error_id": 44, "error_category": 16, "error_severity": 4}


def passing(serials: list[str], device_id: str = "2335") -> dict:
    """Every test of r3 Pass on every GPU (entity ids 0..n-1, NVML's order)."""
    n = len(serials)
    cats = [{"category": c, "tests": [
        {"name": t, "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": i,
                                 "status": "Pass"} for i in range(n)],
         "test_summary": {"status": "Pass"}} for t in tests]} for c, tests in R3]
    return {"DCGM Diagnostic": {"test_categories": cats},
            "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
                {"entity_id": i, "device_id": device_id, "serial_num": s} for i, s in enumerate(serials)]}],
            "metadata": {"version": VERSION, "Driver Version Detected": "580.159.04"}}


def with_result(doc: dict, test: str, gpu: int, status: str, warnings=()) -> dict:
    doc = copy.deepcopy(doc)
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            if t["name"] == test:
                r = t["results"][min(gpu, len(t["results"]) - 1)]  # a host of fewer GPUs: its last
                r["status"] = status
                if warnings:
                    r["warnings"] = [dict(w) for w in warnings]
                order = ("Fail", "Warn", "Skip", "Not Run", "Pass")
                t["test_summary"]["status"] = min((x["status"] for x in t["results"]), key=order.index)
    return doc


def without_result(doc: dict, test: str, gpu: int) -> dict:
    """`test` did not run on `gpu` (Not Run): dcgmi prints no result for it there (Diag.cpp)."""
    doc = copy.deepcopy(doc)
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            if t["name"] == test:
                t["results"] = [r for r in t["results"] if r["entity_id"] != gpu]
    return doc


def with_summary(doc: dict, test: str, status: str, warnings=()) -> dict:
    """`test`'s test_summary alone says `status`, its `warnings` on no GPU; every result as it was."""
    doc = copy.deepcopy(doc)
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            if t["name"] == test:
                t["test_summary"] = {"status": status, **({"warnings": [dict(w) for w in warnings]}
                                                          if warnings else {})}
    return doc


def only_categories(doc: dict, *categories: str) -> dict:
    """The document with those test categories alone (the others' tests absent)."""
    doc = copy.deepcopy(doc)
    diag = doc["DCGM Diagnostic"]
    diag["test_categories"] = [c for c in diag["test_categories"] if c["category"] in categories]
    return doc


def skipped(doc: dict, test: str) -> dict:
    """`test` Skip on every GPU with no reason in the JSON: a test the SKU file disables for the GPU
    (is_allowed false: DCGM_FR_TEST_DISABLED, logged by AddInfo, not printed; NVBandwidthPlugin.cpp)."""
    doc = copy.deepcopy(doc)
    for c in doc["DCGM Diagnostic"]["test_categories"]:
        for t in c["tests"]:
            if t["name"] == test:
                for r in t["results"]:
                    r["status"] = "Skip"
                t["test_summary"] = {"status": "Skip"}
    return doc


def cases(serials: list[str]) -> dict[str, dict]:
    """The stand-in's answers (SIGNOFF_FAKE_DCGMI documents) by case name."""
    ok = passing(serials)
    fail = with_result(with_result(ok, "memory", 1, "Fail", [DBE]), "software", 2, "Fail", [ROW_REMAP])
    skip_why = {"warning": "Test skipped: EUD is not installed", "error_id": 1, "error_category": 7,
                "error_severity": 0}

    def diag(doc=None, rc=0, **kw):
        return {"level": 3, "diag": {"rc": rc, "stdout": json.dumps(doc, indent=4) if doc is not None else "",
                                     "stderr": "", **kw}}
    return {
        "pass": diag(ok),
        "fail_isolate": diag(fail, rc=226),
        "warn": diag(with_result(ok, "pcie", 0, "Warn", [PCIE_REPLAY])),
        "skip": diag(with_result(ok, "targeted_power", 3, "Skip", [skip_why])),
        "not_run": diag(with_result(ok, "memory_bandwidth", 2, "Not Run")),
        "gpu_missing": diag(without_result(ok, "memory", min(5, len(serials) - 1))),
        "summary_fail": diag(with_summary(ok, "nvbandwidth", "Fail", [NO_GPU_ERROR]), rc=226),
        "missing_tests": diag(only_categories(ok, "Deployment", "Integration")),
        "nvbandwidth_skip": diag(skipped(ok, "nvbandwidth")),
        "no_categories": diag({"DCGM Diagnostic": {"test_categories": []},
                               "metadata": {"version": VERSION}}),
        "hang": diag(ok, hang=600),
        "not_json": {"level": 3, "diag": {
            "rc": 0, "stderr": "",
            "stdout": "Successfully ran diagnostic for group.\n+-------------+\n| Diagnostic | Result |\n"}},
        "no_hostengine": {"level": 3, "discovery": {
            "rc": 255, "stdout": "",
            "stderr": "Error: unable to establish a connection to the specified host: localhost\n"
                      "Error: Unable to connect to host engine. "
                      "Host engine connection invalid/disconnected.\n"}},
    }


def valid(doc: dict) -> list[str]:
    """What in `doc` breaks the schema's required keys and types (empty: valid)."""
    bad = []

    def need(obj, kind, where):
        if not isinstance(obj, dict):
            bad.append(f"{where}: not an object")
            return
        bad.extend(f"{where}: no {k!r}" for k in REQUIRED[kind] if k not in obj)
    need(doc, "top", "document")
    for i, c in enumerate(doc.get("DCGM Diagnostic", {}).get("test_categories", [])):
        need(c, "category", f"category {i}")
        for t in c.get("tests", []):
            need(t, "test", f"test {t.get('name')}")
            if "status" not in t.get("test_summary", {}):
                bad.append(f"test {t.get('name')}: test_summary without status")
            for r in t.get("results", []):
                need(r, "result", f"test {t.get('name')} result")
                if not all(isinstance(r.get(k), int) for k in ("entity_group_id", "entity_id")):
                    bad.append(f"test {t.get('name')}: entity ids not integers")
                for w in r.get("warnings", []):
                    need(w, "warning", f"test {t.get('name')} warning")
                    if not all(isinstance(w.get(k), int) for k in REQUIRED["warning"][:3]):
                        bad.append(f"test {t.get('name')}: warning codes not integers")
    for g in doc.get("entity_groups", []):
        need(g, "group", "entity group")
        for e in g.get("entities", []):
            need(e, "entity", "entity")
    if "metadata" in doc:
        need(doc["metadata"], "metadata", "metadata")
    return bad
