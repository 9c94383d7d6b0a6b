"""NVIDIA DCGM's diagnostic (issue 44): `dcgmi diag -r LEVEL -j` on every GPU host at once,
before any other check loads the GPUs, judged per GPU; the raw JSON kept in the report dir."""

from signoff import unseen
from signoff.check import cannot_show, not_applicable
from signoff.dcgm import judge
from signoff.fleet import ProbeError
from signoff.render import render


def test_dcgm_diag(host, gpus, profile, check, dcgm, fleet, attach):
    """Every GPU passes every test of the profile's level. A Fail or Warn FAILs that GPU naming
    the test, DCGM's error id, category, severity and message (ISOLATE / RESET: the action
    beside the GPU on the cover); a Skip or Not Run of a test ERRORs (not judged); no output,
    output that is not JSON, no test categories or a hang past the timeout FAIL closed. No
    dcgmi or host engine: ERROR, N.A. where the profile makes it optional, UNSEEN on a VM or in a
    container (the provider's host runs DCGM: ask for its run)."""
    t = profile.threshold("dcgm_diag")
    doc = dcgm(host)
    lvl = judge.level_of(t.extra)
    if doc.get("missing"):
        if t.extra.get("optional"):
            not_applicable(f"{doc['error']}; profile {profile.name} makes dcgm_diag optional: DCGM's "
                           f"diagnostic (r{lvl}) not run on this host")
        rented = unseen.dcgm_unseen(host.facts, lvl)
        if rented:
            ask, why = rented
            cannot_show(ask, f"{why}: {unseen.text(doc['error'], 120)}")  # the host's words, bounded
        raise ProbeError(f"{host}: {doc['error']}: DCGM's diagnostic cannot run (install DCGM and start "
                         f"nv-hostengine, e.g. systemctl start nvidia-dcgm)")
    if "error" in doc:
        raise ProbeError(f"{host}: dcgm probe failed: {doc['error']}")
    raw = doc.get("raw")
    kept = f"; raw output: {raw}" if raw else "; no raw output to keep"
    if raw:  # the row links the file (report.html sits beside dcgm/): the provider's RMA evidence
        attach("html", render("templates/link.jinja2", href=raw, text=raw), "DCGM's raw JSON")
    # this host's diagnostic's start and end (UTC): every host's ran at once, each to its own timeout
    details = {"level": lvl, "command": doc.get("command"), "rc": doc.get("rc"),
               "elapsed_s": doc.get("elapsed_s"), "raw": raw, "stderr": doc.get("stderr"),
               "measured_utc": fleet.windows.get("dcgm", {}).get(host.name)}
    expected = f"GPUs failed or warned {t.expected}: every GPU passes every test of dcgmi diag -r {lvl}"
    if doc.get("timed_out"):  # failed closed (no judgement read): every GPU of the host counts
        check.require([f"dcgmi diag -r {lvl} did not finish in {doc['timeout_s']:g} s (killed){kept}"],
                      len(gpus), expected, t.source, cause=judge.CAUSE_CLOSED, details=details)
    parsed, why = judge.parse(doc.get("stdout"))
    if parsed is None:
        err = " ".join((doc.get("stderr") or "").split())[:200]
        check.require([f"dcgmi diag -r {lvl} exit {doc.get('rc')}: {why}"
                       + (f"; stderr: {err}" if err else "") + kept],
                      len(gpus), expected, t.source, cause=judge.CAUSE_CLOSED, details=details)
    res = judge.judge(parsed, gpus, t.extra)  # its level's tests, allow_skip
    details.update(dcgm_version=(parsed.get("metadata") or {}).get("version"), tests=res["tests"],
                   gpus=res["gpus"], actions=res["actions"], not_run=res["not_run"], allowed=res["allowed"])
    for act in res["actions"]:
        check.note(f"DCGM: {act}")
    if res["allowed"]:
        check.note(f"not run, allowed by the profile's allow_skip: {'; '.join(res['allowed'])}")
    n = len(res["failed"])
    if not t.ok(n):
        also = [f"also not run: {'; '.join(res['not_run'])}"] if res["not_run"] else []
        check.require(res["faults"] + also + [kept.removeprefix("; ")], n, expected, t.source,
                      cause=judge.CAUSE_FAIL, details=details)
    if res["not_run"]:
        check.record(n, expected, "GPUs", t.source, details)
        raise ProbeError(f"{host}: DCGM did not run every test of r{lvl}, so those GPUs are not judged: "
                         f"{'; '.join(res['not_run'])}{kept}")
    check.require([], n, expected, t.source, details=details)
