"""NVIDIA DCGM's diagnostic (issue 44): `dcgmi diag -r LEVEL -j` on every GPU host at once
(probe_dcgm), its JSON judged per GPU (judge.py), the raw JSON of every host kept in the report
dir (dcgm/<host>.json). The level and its timeout are the profile's dcgm_diag threshold's."""

from signoff import InputError

CRITERIA = {
    # GPUs DCGM failed or warned on (or did not test); extra: level (dcgmi diag -r, default 3),
    # timeout (s, default per level), optional (no dcgmi or host engine: N.A. instead of ERROR),
    # tests ({level: the DCGM tests it runs on every GPU}: one absent is not a pass), allow_skip
    # (DCGM tests whose Skip DCGM printed is said, not an ERROR: a list, or {test: why})
    "dcgm_diag": {"type": "number", "ops": ("max",),
                  "extra": ("level", "timeout", "optional", "tests", "allow_skip")},
}
PLUGIN = "signoff.dcgm.plugin"
REPORT_DIRS = ("dcgm",)  # the report dir's dcgm/<host>.json: dcgmi's stdout verbatim


def check_extra(name: str, value, extra: dict, where: str) -> None:
    from signoff.dcgm import judge
    try:
        judge.check_extra(name, extra)
    except ValueError as exc:
        raise InputError(f"{where}.{exc}") from None


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: the diagnostic's run time at the profile's level, every host at once."""
    from signoff.dcgm import judge
    t = prof.criteria.get("dcgm_diag")
    if "dcgm_diag" not in picked or t is None:
        return []
    lvl = judge.level_of(t.extra)
    mins = judge.RUNTIME_S[lvl] // 60 or 1
    return [f"dcgm: dcgmi diag -r {lvl} on every GPU host at once: about {mins} min "
            f"(NVIDIA's figure for r{lvl}; timeout {judge.timeout_of(t.extra) / 60:g} min)"]


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """Whether dcgmi is installed and its host engine answers (sysinfo's preflight: probe_dcgm's
    preflight()); warned: dcgm_diag's ERROR (or N.A. where the profile makes it optional, UNSEEN on a
    VM or in a container: signoff/unseen.py)."""
    from signoff import unseen
    from signoff.dcgm import judge
    pf = (facts.get("preflight") or {}).get("dcgm")
    if not pf or "dcgm_diag" not in ctx.picked or not (facts.get("nvidia") or {}).get("gpus"):
        return [], []
    if not pf.get("error"):
        return ["dcgm: dcgmi and its host engine answer"], []
    t = ctx.profile.criteria.get("dcgm_diag") if ctx.profile is not None else None
    optional = t is not None and t.extra.get("optional")
    rented = None if optional else unseen.dcgm_unseen(facts, judge.level_of(t.extra if t else {}))
    if rented:  # the check's own words (acceptance/test_dcgm.py)
        ask, why = rented
        said = f"{why}: {unseen.text(pf['error'], 120)}"  # the host's words, bounded
        return [f"dcgm: {pf['error']}"], [unseen.plan_line("dcgm_diag", ask, said, ctx.config)]
    verdict = "N.A. (optional in the profile)" if optional else "ERROR"
    return [f"dcgm: {pf['error']}"], [f"dcgm_diag {verdict}: {pf['error']}"]
