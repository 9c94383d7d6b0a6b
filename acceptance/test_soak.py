"""Sustained load (soak): bf16 GEMM on every GPU of every host at once for the profile's
soak.duration, NVML sampled every interval; samples stream into results.json as they come.
The rules are in signoff/soak/judge.py and docs/soak.md."""

from __future__ import annotations

from dataclasses import replace

from signoff import cotenants, rerun
from signoff.check import not_applicable
from signoff.fleet import ProbeError
from signoff.render import render
from signoff.soak import judge as soak
from signoff.soak import plots as soakplots
from signoff.soak.plugin import soaked


def _judge(fn, host, hs, *args, **kw) -> soak.Verdict:
    try:
        return fn(*args, **kw)
    except soak.Unjudgeable as exc:  # with another process on a GPU, that is the likely cause
        who = cotenants.text(hs.doc, "soak")
        raise ProbeError(f"{host}: {exc}" + (f"; likely cause: {who}" if who else "")) from None


def _details(hs, v: soak.Verdict, plan: dict) -> dict:
    return {**v.details, "notes": v.notes, "duration_s": plan["duration"], "samples": len(hs.series),
            "interval_s": plan["interval"], "samples_file": f"soak/{hs.name}.jsonl"}


def _expected(t, what: str) -> str:
    return f"{what} {t.expected}"


def _alone(check, host, hs, v: soak.Verdict, t, plan: dict) -> None:
    """ERROR, naming it, when another process used a GPU during the soak: not the hardware's
    figures (this outranks every diagnosis below: cooling, clocks, a degraded GPU)."""
    cotenants.guard(check, host, hs.doc, "soak", v.measured, t.expected, t.unit, t.source,
                    _details(hs, v, plan))


def test_soak_gpu_temp(host, gpus, profile, soak_run, check, attach):
    hs = soaked(host, soak_run)
    t = profile.threshold("soak_gpu_temp")
    hold = soak.effective_hold(hs.series, soak.parse_duration(t.extra.get("hold", "30s")))
    plan = soak_run.plan
    attach("html", soakplots.table(soak.summary(hs.series, plan["warmup"], hold), plan["interval"]),
           "soak maxima and medians")
    v = _judge(soak.judge_temperature, host, hs, hs.series, "temp", t.value, hold)
    _alone(check, host, hs, v, t, plan)
    check.require(v.failures, v.measured,
                  _expected(t, f"sustained GPU temperature (held {hold:g} s) on every GPU"),
                  t.source, cause="cooling: airflow, fans, inlet temperature or a cold plate",
                  details=_details(hs, v, plan))


def test_soak_mem_temp(host, gpus, profile, soak_run, check):
    hs = soaked(host, soak_run)
    t = profile.threshold("soak_mem_temp")
    hold = soak.effective_hold(hs.series, soak.parse_duration(t.extra.get("hold", "30s")))
    why = ((hs.doc or {}).get("nvml_unreadable") or {}).get("mem_temp", "")
    not_supported = "NotSupported" in why or "Not Supported" in why
    v = _judge(soak.judge_temperature, host, hs, hs.series, "mem_temp", t.value, hold, na_ok=not_supported)
    if v.measured is None:
        not_applicable(f"{host}: NVML has no memory temperature sensor on {gpus[0]['name']} ({why})")
    _alone(check, host, hs, v, t, soak_run.plan)
    check.require(v.failures, v.measured,
                  _expected(t, f"sustained memory temperature (held {hold:g} s) on every GPU"),
                  t.source, cause="HBM cooling: airflow over the memory stacks or a cold plate",
                  details=_details(hs, v, soak_run.plan))


def _notes(attach, v: soak.Verdict, title: str) -> None:
    if v.notes:
        attach("html", render("templates/list.jinja2", items=v.notes), title)


def test_soak_throttle(host, gpus, profile, soak_run, check, attach):
    hs = soaked(host, soak_run)
    t = profile.threshold("soak_throttle")
    fail = tuple(t.extra.get("reasons") or soak.FAIL_REASONS)
    rated = profile.criteria.get("power_limit")  # the power_limit check ERRORs where it is missing
    rated = None if rated and rated.extra.get("derived") else rated  # a fraction of each GPU's default
    v = _judge(soak.judge_throttle, host, hs, hs.series, fail,
               [g.get("power_limit_w") for g in hs.header["gpus"]], rated.value if rated else None)
    _notes(attach, v, "clock-event reasons reported, not failed")
    _alone(check, host, hs, v, t, soak_run.plan)
    bad = v.failures if not t.ok(v.measured) else []
    causes = sorted({soak.REASON_CAUSE.get(n, n) for r in v.details["gpus"] for n in r["failing"]}
                    | ({"an admin power cap below the class's rated limit (nvidia-smi -pl)"}
                       if v.details["power_capped_gpus"] else set()))
    check.require(bad, v.measured, f"samples with {', '.join(fail)} {t.expected}", t.source,
                  cause="; ".join(causes), details=_details(hs, v, soak_run.plan))


def test_soak_clock_stability(host, gpus, profile, soak_run, check):
    hs = soaked(host, soak_run)
    t = profile.threshold("soak_clock_stability")
    corr = float(t.extra.get("correlation", -0.5))
    plan = soak_run.plan
    v = _judge(soak.judge_clock, host, hs, hs.series, plan["warmup"], t.value, corr)
    _alone(check, host, hs, v, t, plan)
    check.require(v.failures, v.measured,
                  f"after the {plan['warmup']:g} s warm-up, no GPU whose SM clock falls as its "
                  f"temperature rises (r <= {corr:g}) by more than {t.value:g} %", t.source,
                  cause="clocks traded for temperature: cooling that cannot hold the load "
                        "(the mirrored temperature/clock curves)",
                  details=_details(hs, v, plan))


def test_soak_gemm_tflops(host, gpus, profile, soak_run, check, fleet):
    t = profile.threshold("soak_gemm_tflops")  # no figure for the class: ERROR, never N.A.
    hs = soaked(host, soak_run)
    plan = soak_run.plan
    if t.extra.get("derived") == "model_median":  # no class: the run's GPUs of the same model
        model, rates = gpus[0]["name"], soak_run.peers(lambda s: soak.gemm(s, plan["warmup"]))
        pool = [v for n, r in rates.items() for g, v in r.items() if v is not None
                and [x.get("name") for x in fleet.facts(n)["nvidia"]["gpus"]][g:g + 1] == [model]]
        # a rerun soaks only the hosts that did not pass: the earlier run's GPUs are the pool's rest
        then = rerun.pool(check.again, "soak_gemm_tflops", model, rates)
        pool += then
        earlier = "" if check.again is None else f"run {check.again['run']} ({check.again['dir']})"
        of = f"{len(pool)} (the fleet of {earlier}: {len(then)} of its GPUs, {len(pool) - len(then)} " \
             f"measured again in this rerun)" if earlier else f"run's {len(pool)}"
        if len(pool) < 2:
            not_applicable(f"{host}: no class figure for {model}, and no other GPU of that model in the "
                           f"{f'rerun or {earlier}' if earlier else 'run'} to compare with "
                           f"(soak_throttle, soak_clock_stability judge the load)")
        v = _judge(soak.judge_gemm_model, host, hs, hs.series, plan["warmup"], t.value, pool)
        _alone(check, host, hs, v, t, plan)
        # the figure recorded is the slowest GPU's TFLOP/s, as a class's (signoff calibrate reads it)
        check.require(v.failures, min(r for r in v.details["tflops"].values() if r is not None), _expected(
            t, f"bf16 GEMM rate per GPU (mean after the {plan['warmup']:g} s warm-up) / the median of the "
               f"{of} {model} GPUs, {v.details['model_median']:g} TFLOP/s"), t.source,
            cause="clocks held down (see soak_throttle and the SM clock plot) or a degraded GPU",
            details=_details(hs, v, plan), fleet=(replace(t, unit="TFLOP/s"), None))
        return
    v = _judge(soak.judge_gemm, host, hs, hs.series, plan["warmup"], t.value)
    _alone(check, host, hs, v, t, plan)
    check.require(v.failures, v.measured,
                  _expected(t, f"bf16 GEMM rate per GPU (mean after the {plan['warmup']:g} s warm-up)"),
                  t.source, cause="clocks held down (see soak_throttle and the SM clock plot) or a "
                                  "degraded GPU", details=_details(hs, v, plan),
                  fleet=(t, soak_run.peers(lambda s: min((r for r in soak.gemm(s, plan["warmup"]).values()
                                                          if r is not None), default=None))))


def test_soak_gemm_straggler(host, gpus, profile, soak_run, check):
    t = profile.threshold("soak_gemm_straggler")
    if len(gpus) < 2:
        not_applicable(f"{host} has one GPU: no other GPU to compare it with")
    hs = soaked(host, soak_run)
    plan = soak_run.plan
    v = _judge(soak.judge_straggler, host, hs, hs.series, plan["warmup"], t.value)
    _alone(check, host, hs, v, t, plan)
    check.require(v.failures, v.measured,
                  _expected(t, "every GPU's GEMM rate relative to the host's median GPU"), t.source,
                  cause="a throttled, power-capped or degraded GPU", details=_details(hs, v, plan))


def test_soak_errors(host, gpus, profile, soak_run, check, attach):
    hs = soaked(host, soak_run)
    t = profile.threshold("soak_errors")
    v = _judge(soak.judge_errors, host, hs, hs.series, hs.doc or {})
    _notes(attach, v, "noted, not failed")
    bad = v.failures if not t.ok(v.measured) else []
    if not bad:  # a fault is the GPU's own whatever ran beside it; no fault seen is not a PASS then
        _alone(check, host, hs, v, t, soak_run.plan)
    check.require(bad, v.measured, f"new errors under load {t.expected}", t.source,
                  cause=cotenants.first("failing HBM, GPU or its power/PCIe path", hs.doc, "soak"),
                  details=_details(hs, v, soak_run.plan))
