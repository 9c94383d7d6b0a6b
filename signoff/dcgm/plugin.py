"""The dcgm family's measuring fixture (every GPU host's diagnostic at once, its raw JSON kept
in the report dir), the check moved before every load, and its methodology row."""

from __future__ import annotations

from pathlib import Path

import pytest

from signoff import safefile
from signoff.dcgm import REPORT_DIRS, judge
from signoff.fixtures import HostView, selected_hosts
from signoff.state import STATE

TESTS = ("test_dcgm_diag",)
RAW_DIR = REPORT_DIRS[0]  # report dir's dcgm/<host>.json: dcgmi's stdout verbatim
SLACK_S = 120  # the controller waits this much past the probe's own timeout (start-up, transfer)


@pytest.fixture(scope="session")
def dcgm(request, fleet, profile):
    """dcgm(host) -> the probe's document (None on a host without GPUs), `raw` set to the
    report dir's file holding dcgmi's output."""
    report_dir = request.config.stash[STATE].report_dir

    def measure(n):
        if not HostView(n, fleet.facts(n), None).gpus:
            return None  # no GPU: nothing for DCGM to test (the check is N.A. by its gpus)
        t = profile.threshold("dcgm_diag")
        lvl, timeout = judge.level_of(t.extra), judge.timeout_of(t.extra)
        doc = fleet.sessions[n].probe("dcgm", "--level", str(lvl), "--timeout", f"{timeout:g}",
                                      timeout=timeout + SLACK_S)
        doc.pop("raw", None)  # the report dir's file is named here, never by the host's document
        if report_dir is not None and doc.get("stdout"):
            # a directory and a file of the run's own: a link planted there is never written through
            safefile.write(safefile.subdir(Path(report_dir) / RAW_DIR) / f"{n}.json", doc["stdout"])
            doc["raw"] = f"{RAW_DIR}/{n}.json"
        return doc
    return lambda host: fleet.measured("dcgm", host.name, measure, selected_hosts(request.session, TESTS))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """The diagnostic runs before any other check loads the GPUs: its stress tests judge a GPU
    against power, memory-bandwidth and utilisation marks that a GPU still busy or hot from a
    burn misses (NVIDIA/DCGM issue 272: nvbandwidth fails on memory utilisation > 10 % right
    after GpuBurn), so it goes first, never after the soak or another measurement."""
    first = {id(i) for i in items if getattr(i, "originalname", i.name) in TESTS}
    items[:] = [i for i in items if id(i) in first] + [i for i in items if id(i) not in first]


@pytest.hookimpl
def pytest_signoff_methodology(doc, profile):
    recs = [r for r in doc.get("results") or [] if r.get("criterion") == "dcgm_diag"]
    d = next((r["details"] for r in recs if (r.get("details") or {}).get("level")), {})
    t = profile.criteria.get("dcgm_diag") if profile else None
    if not recs and t is None:
        return []
    lvl = d.get("level") or (judge.level_of(t.extra) if t else 3)
    ver = f" {d['dcgm_version']}" if d.get("dcgm_version") else ""
    return [{"check": "dcgm_diag", "tool": f"NVIDIA DCGM{ver}: dcgmi diag -r {lvl} -j",
             "how": f"run first, before any other check loads the GPUs (never after the soak: DCGM issue "
                    f"272, a false fail right after a burn), on every GPU host at once; its JSON judged per "
                    f"GPU: a Fail or Warn FAILs that GPU naming the test, DCGM's error id, category, "
                    f"severity and message, ISOLATE / RESET written as the action; a test failed in its "
                    f"summary on no GPU FAILs; a test of the level absent, a GPU without a result in one, a "
                    f"Skip (but one the class allows by design) or Not Run ERRORs (not judged); no output, "
                    f"output that is not JSON, no test categories or a run past its timeout FAIL closed; "
                    f"every host's raw JSON is kept in the report dir ({RAW_DIR}/<host>.json)"}]
