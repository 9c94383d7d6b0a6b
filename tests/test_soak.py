"""Soak judgement (signoff.soak) on recorded and synthetic sample series, the soak section of
profiles, and the soak probe's loop run on the CPU against a stand-in for NVML."""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import math
import random
import textwrap
from pathlib import Path

import pytest
from fake_nvml import FakeGPU, FakeNV

from signoff import InputError, profiles
from signoff.soak import judge as soak
from signoff.soak import plots as soakplots
from signoff.soak.judge import Series

ROOT = Path(__file__).resolve().parent.parent
H200 = profiles.load("h200-8x-nvlink@4")


def series(duration=90, n=4, temp=None, mem=None, clock=None, reasons=None, tflops=None,
           power=None, ecc_unc=None, dt=1.0):
    """Samples every dt s; each field a function (gpu, t) -> value."""
    rnd = random.Random(7)
    temp = temp or (lambda g, t: 35 + 30 * (1 - math.exp(-t / 18)))
    samples = []
    for k in range(int(duration / dt) + 1):
        t = k * dt
        row = {"type": "sample", "t": t}
        for f, fn, default in (
                ("temp", temp, None),
                ("mem_temp", mem, lambda g, t: 30 + 24 * (temp(g, t) - 35) / 30),
                ("power", power, lambda g, t: 690 + rnd.uniform(-6, 6)),
                ("sm_clock", clock, lambda g, t: 1980 - 2 * (temp(g, t) - 35) + rnd.uniform(-15, 15)),
                ("reasons", reasons, lambda g, t: 0x4),
                ("util", None, lambda g, t: 100),
                ("tflops", tflops, lambda g, t: None if t == 0 else 700 + rnd.uniform(-8, 8)),
                ("ecc_corr", None, lambda g, t: 0),
                ("ecc_unc", ecc_unc, lambda g, t: 0)):
            fn = fn or default
            vals = [fn(g, t) for g in range(n)]
            row[f] = [round(v) if f in ("temp", "mem_temp") and v is not None else v for v in vals]
        samples.append(row)
    return Series.from_samples(samples)


def final(**kw):
    doc = {"ecc_before": [], "ecc_after": [], "xid": [], "xid_readable": True,
           "xid_note": "read from NVML events", "gpu_errors": {}}
    doc.update(kw)
    return doc


def limit(name):
    return H200.threshold(name)


# ------------------------------------------------ the reference burn: must PASS

def test_power_cap_only_burn_passes_every_criterion():
    """90 s burn on 4x H200: ~690 W, max 65 °C GPU / 54 °C memory, reason 0x4 only
    (docs/soak.md)."""
    s = series()
    gpu = soak.judge_temperature(s, "temp", limit("soak_gpu_temp").value, 30)
    assert gpu.failures == [] and 60 <= gpu.measured <= 65
    assert max(r["max"] for r in gpu.details["gpus"]) == 65
    mem = soak.judge_temperature(s, "mem_temp", limit("soak_mem_temp").value, 30)
    assert mem.failures == [] and max(r["max"] for r in mem.details["gpus"]) == 54
    thr = soak.judge_throttle(s)
    assert thr.failures == [] and thr.measured == 0
    assert thr.notes == ["sw_power_cap (0x4) in 364/364 GPU samples (normal at full load)"]
    plan = soak.plan(H200.section("soak"), "90s")
    clk = soak.judge_clock(s, plan["warmup"], limit("soak_clock_stability").value,
                           limit("soak_clock_stability").extra["correlation"])
    assert clk.failures == [], clk.details
    assert soak.judge_gemm(s, plan["warmup"], limit("soak_gemm_tflops").value).failures == []
    assert soak.judge_straggler(s, plan["warmup"], limit("soak_gemm_straggler").value).failures == []
    assert soak.judge_errors(s, final()).failures == []


# ------------------------------------------------ failing series

def test_power_capped_h100_node_fails_the_soak():
    """Eight GPUs at 350 TFLOP/s, reason SwPowerCap only, 50 °C, under an admin cap of 350 W
    (synthetic series): cool and steady, yet half as fast; it must not pass under h100."""
    h100 = profiles.load("h100-8x-nvlink")
    s = series(n=8, temp=lambda g, t: 50, power=lambda g, t: 349.0,
               tflops=lambda g, t: None if t == 0 else 350.0)
    plan = soak.plan(h100.section("soak"), "90s")
    gemm = soak.judge_gemm(s, plan["warmup"], h100.threshold("soak_gemm_tflops").value)
    assert len(gemm.failures) == 8 and gemm.failures[0] == "GPU 0: 350 TFLOP/s < 635"
    thr = soak.judge_throttle(s, soak.FAIL_REASONS, [350.0] * 8, h100.threshold("power_limit").value)
    assert thr.measured == 8 * 91 and len(thr.failures) == 8
    assert thr.failures[3] == ("GPU 3: sw_power_cap (0x4) in 91/91 samples under an enforced power "
                               "limit of 350 W < the class's 700 W (an admin cap)")
    assert "normal at full load" not in " ".join(thr.notes)
    assert thr.details["power_capped_gpus"] == [*range(8)]
    # at the rated limit the same reason is the normal one of a GPU at full load
    ok = soak.judge_throttle(s, soak.FAIL_REASONS, [700.0] * 8, 700)
    assert ok.failures == []
    assert ok.notes == ["sw_power_cap (0x4) in 728/728 GPU samples (normal at full load)"]


def test_every_shipped_gpu_class_has_a_gemm_figure_or_says_it_is_missing():
    for name in profiles.available():
        p = profiles.load(name)
        if p.abstract or not p.gpu_required:
            continue
        if "soak_gemm_tflops" in p.criteria:
            t = p.criteria["soak_gemm_tflops"]
            # H100/H200 figures are measured; the others derived from their burst rate, said so
            assert t.value >= 600 or t.provisional.startswith("derived: "), name
        else:
            text = "".join((profiles.PROFILE_DIR / f"{n}.yaml").read_text() for n in p.chain)
            assert "soak_gemm_tflops: no measured sustained bf16 GEMM rate" in text or \
                "soak_gemm_tflops (no measured sustained bf16 GEMM rate" in text, name
            with pytest.raises(InputError, match="has no threshold for 'soak_gemm_tflops'"):
                p.threshold("soak_gemm_tflops")


def test_overheating_gpu_fails_by_name_with_its_throttle_reason():
    hot = lambda g, t: 35 + (55 if g == 2 else 30) * (1 - math.exp(-t / 20))  # noqa: E731
    reasons = lambda g, t: 0x4 | (0x20 if g == 2 and t > 50 else 0)  # noqa: E731
    s = series(temp=hot, reasons=reasons)
    v = soak.judge_temperature(s, "temp", 79, 30)
    assert len(v.failures) == 1 and v.measured >= 85
    assert v.failures[0].startswith("GPU 2: GPU temperature held 8") and "for 30 s (max" in v.failures[0]
    t = soak.judge_throttle(s)
    assert t.measured == 40
    assert t.failures == ["GPU 2: sw_thermal (0x20) in 40/91 samples, 51..90 s"]


def test_a_one_sample_spike_is_not_sustained():
    s = series(temp=lambda g, t: 85 if t == 40 else 70)
    v = soak.judge_temperature(s, "temp", 79, 30)
    assert v.failures == [] and v.measured == 70
    assert v.details["gpus"][0]["max"] == 85 and v.details["gpus"][0]["seconds_over"] == 1


def test_sawtooth_is_flagged_and_a_flat_clock_is_not():
    saw_t = lambda g, t: 77 + (7 * math.sin(2 * math.pi * t / 60) if g == 1 else 0)  # noqa: E731
    saw_c = lambda g, t: 1815 - (22 * (saw_t(g, t) - 77)) + random.uniform(-10, 10)  # noqa: E731
    s = series(duration=600, temp=saw_t, clock=saw_c)
    v = soak.judge_clock(s, 60, 5, -0.5)
    assert len(v.failures) == 1 and v.failures[0].startswith("GPU 1: SM clock ")
    g1 = v.details["gpus"][1]
    assert g1["r"] < -0.9 and g1["drop_pct"] > 10 and g1["hot_temp"] >= 82
    assert not v.details["gpus"][0]["flagged"]


def test_small_clock_drop_with_strong_correlation_is_not_flagged():
    s = series(duration=300, temp=lambda g, t: 60 + t / 30,
               clock=lambda g, t: 1900 - t / 10)  # r = -1 but only 1.6 % lower
    v = soak.judge_clock(s, 60, 5, -0.5)
    assert v.failures == [] and v.details["gpus"][0]["r"] < -0.95


def test_straggler_named_and_minimum_gemm_rate():
    s = series(tflops=lambda g, t: None if t == 0 else (560.0 if g == 3 else 700.0))
    v = soak.judge_straggler(s, 30, 0.9)
    assert v.failures == ["GPU 3: 560 TFLOP/s = 0.8 x the host's median 700"]
    assert v.measured == 0.8
    g = soak.judge_gemm(s, 30, 615)
    assert g.failures == ["GPU 3: 560 TFLOP/s < 615"]


def test_warmup_is_left_out_of_the_gemm_rate():
    s = series(tflops=lambda g, t: None if t == 0 else (100.0 if t < 30 else 700.0))
    assert soak.gemm(s, 30) == {g: 700.0 for g in range(4)}


def test_a_series_of_no_gpu_or_no_gemm_rate_is_unjudgeable_not_a_pass():
    """Synthetic series: NVML in the soak probe saw no GPU (no column), or every GEMM rate is
    missing: every judgement raises Unjudgeable (an ERROR), none returns a failure-free verdict."""
    empty = series(n=0)
    for judge, args in ((soak.judge_gemm, (30, 635)), (soak.judge_straggler, (30, 0.9)),
                        (soak.judge_temperature, ("temp", 79, 30)), (soak.judge_throttle, ()),
                        (soak.judge_clock, (30, 5, -0.5)), (soak.judge_errors, (final(),))):
        with pytest.raises(soak.Unjudgeable, match="no GPU"):
            judge(empty, *args)
    no_rate = series(tflops=lambda g, t: None)
    for judge, args in ((soak.judge_gemm, (30, 635)), (soak.judge_straggler, (30, 0.9))):
        with pytest.raises(soak.Unjudgeable, match="no GEMM rate measured after the 30 s warm-up"):
            judge(no_rate, *args)


def test_new_ecc_errors_xids_and_dead_loads_fail():
    s = series(ecc_unc=lambda g, t: 1 if g == 1 and t > 40 else 0)
    v = soak.judge_errors(s, final(
        xid=[{"t": 12.0, "gpu": 0, "xid": 79, "source": "nvml"}],
        gpu_errors={"3": "RuntimeError: CUDA error: uncorrectable ECC error encountered"},
        ecc_before=[{"gpu": 2, "corrected": 0, "uncorrected": 0}],
        ecc_after=[{"gpu": 2, "corrected": 3, "uncorrected": 0, "remap_pending": True}]))
    assert v.failures == [
        "GPU 1: 1 new uncorrectable ECC error(s)",
        "GPU 2: a row remap is pending after the soak",
        "GPU 0: XID 79 at 12.0 s (nvml)",
        "GPU 3: load failed: RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    assert v.notes == ["GPU 2: 3 new corrected ECC error(s)"]


def test_a_gemm_result_that_changes_under_load_fails():
    """The soak's GEMM repeats one seeded product: a batch whose C differs from the first C
    (a recorded final document, 2 such batches injected on GPU 1) is silent data corruption."""
    gemm = {"0": {"n": 8192, "changed_batches": 0}, "1": {"n": 8192, "changed_batches": 2}}
    assert soak.judge_errors(series(), final(gemm=gemm)).failures == [
        "GPU 1: the GEMM result changed under load in 2 batch(es), same inputs (silent data corruption)"]


def test_unreadable_xids_are_an_error_not_a_pass():
    with pytest.raises(soak.Unjudgeable, match=r"XID events not readable: dmesg unreadable \(EPERM\)"):
        soak.judge_errors(series(), final(xid_readable=False, xid_note="dmesg unreadable (EPERM)"))


def test_memory_sensor_missing_on_every_gpu_is_not_applicable_else_unjudgeable():
    s = series(mem=lambda g, t: None)
    v = soak.judge_temperature(s, "mem_temp", 94, 30, na_ok=True)
    assert v.measured is None and v.failures == []
    with pytest.raises(soak.Unjudgeable, match="no memory temperature for GPU 0, 1, 2, 3"):
        soak.judge_temperature(s, "mem_temp", 94, 30)
    part = series(mem=lambda g, t: None if g == 1 else 50)
    with pytest.raises(soak.Unjudgeable, match="GPU 1$"):
        soak.judge_temperature(part, "mem_temp", 94, 30, na_ok=True)


def test_too_short_a_soak_cannot_judge_clock_stability():
    with pytest.raises(soak.Unjudgeable, match="after the 60 s warm-up"):
        soak.judge_clock(series(duration=65), 60, 5, -0.5)


def test_sustained_window():
    assert soak.sustained([60, 81, 82, 81, 70, 90], 3) == 81
    assert soak.sustained([60, 70], 30) == 60  # shorter than the window: held throughout
    assert soak.sustained([], 3) is None


def test_reason_bits_decoded():
    assert soak.decode(0x4) == ["sw_power_cap"]
    assert soak.decode(0x1 | 0x40 | 0x80) == ["gpu_idle", "hw_thermal", "hw_power_brake"]
    assert soak.decode(0x1000) == ["0x1000"]
    assert soak.mask_of(soak.FAIL_REASONS) == 0x8 | 0x20 | 0x40 | 0x80


# ------------------------------------------------ report

def test_plot_and_table_render():
    import base64

    import matplotlib.image

    def draw(s):
        png = soakplots.timeseries("node01", s, [{"temp_thresholds": {"slowdown": 89, "mem_max": 95},
                                                  "power_limit_w": 700.0}] * 4,
                                   {"temp": 79, "mem_temp": 94, "tflops": 615}, 30)
        return matplotlib.image.imread(io.BytesIO(base64.b64decode(png)), format="png")

    def red(img):  # pixels of the failing-reason ticks (pure red)
        return int(((img[..., 0] > 0.9) & (img[..., 1] < 0.2) & (img[..., 2] < 0.2)).sum())

    s = series(reasons=lambda g, t: 0x4 | (0x40 if g == 0 and t > 80 else 0))
    img = draw(s)
    h, w = img.shape[:2]
    assert 500 < w < 800 and 1.2 * w < h < 1.6 * w, img.shape  # 8 x 12 in at 90 dpi, trimmed
    assert img[..., :3].std() > 0.05, "a blank image"
    # GPU 0's hw_thermal from t = 80 s shows as red ticks; a run with the power cap only has none
    assert red(img) > 50 and red(draw(series())) == 0
    html = soakplots.table(soak.summary(s, 30, 30), 1.0)
    assert html.count("<tr>") == 5 and "hw_thermal 10" in html and "sw_power_cap 91" in html


# ------------------------------------------------ profiles

@pytest.mark.parametrize("text, err", [
    ("soak: {durations: 5m}", "soak.durations: unknown key"),
    ("soak: {duration: 5x}", "soak.duration: not a duration: '5x'"),
    ("soak: {duration: 60s, warmup: 2m}", "soak.warmup: 120 s must be shorter"),
    ("soak: {duration: 49h}", "soak.duration: 176400 s is outside"),
    ("soak: {interval: 0.1s}", "soak.interval: 0.1 s must be"),
    ("soak: {matrix: 100}", "soak.matrix: expected an integer"),
    ("soak: 5m", "soak: expected a mapping"),
    ("criteria: {soak_gpu_temp: {max: 79, hold: forever, unit: C, source: s}}",
     "criteria.soak_gpu_temp.hold: not a duration"),
    ("criteria: {soak_throttle: {max: 0, reasons: [hw_slow], unit: s, source: s}}",
     "criteria.soak_throttle.reasons: expected a list of gpu_idle"),
    ("criteria: {soak_clock_stability: {max: 5, correlation: 0.5, unit: '%', source: s}}",
     "criteria.soak_clock_stability.correlation: expected a number in -1..0"),
])
def test_bad_soak_settings_are_rejected(tmp_path, text, err):
    (tmp_path / "p.yaml").write_text("extends: h200-8x-nvlink@4\n" + text + "\n")
    with pytest.raises(InputError, match=err.replace(".", r"\.").replace("(", r"\(")):
        profiles.load(str(tmp_path / "p.yaml"))


def test_soak_section_inherits_and_overrides(tmp_path):
    (tmp_path / "signoff24h.yaml").write_text(textwrap.dedent("""
        extends: h200-8x-nvlink@4
        soak: {duration: 24h, warmup: 10m, interval: 5s}
    """))
    p = profiles.load(str(tmp_path / "signoff24h.yaml"))
    assert p.section("soak") == {"duration": 86400.0, "warmup": 600.0, "interval": 5.0, "matrix": 8192}
    inherited = profiles.load("h200-8x-nvlink").threshold("soak_gemm_tflops").value
    assert p.threshold("soak_gemm_tflops").value == inherited
    assert profiles.load("a100-80gb-8x-nvlink").threshold("soak_gemm_tflops").provisional  # derived


def test_duration_override_shortens_a_long_warmup():
    p = soak.plan({"duration": 300.0, "warmup": 60.0}, "90s")
    assert (p["duration"], p["warmup"]) == (90.0, 30.0) and "warm-up shortened" in p["notes"][0]
    assert soak.plan({"warmup": 60.0}, "10m")["warmup"] == 60.0
    with pytest.raises(ValueError, match="outside 10 s..48 h"):
        soak.plan({}, "5s")
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        soak.duration_arg("ninety")


# ------------------------------------------------ the probe's loop, on the CPU

def load_probe():
    spec = importlib.util.spec_from_file_location("soak_probe", ROOT / "signoff/soak/probe_soak.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_probe_streams_samples_events_and_a_final_document():
    torch = pytest.importorskip("torch")
    probe = load_probe()
    nv = FakeNV([FakeGPU(0, tau=0.5), FakeGPU(1, tau=0.5), FakeGPU(2)], xid_after=0.3)
    nv.gpus[1].ecc_corr = 0
    nvml = probe.Nvml(nv)
    args = argparse.Namespace(duration=1.0, interval=0.25, matrix=64)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        doc = probe.run(args, nvml, torch, [torch.device("cpu"), torch.device("cpu"), None])
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["gpus"][0]["temp_thresholds"]["mem_max"] == 95
    samples = [x for x in lines if x["type"] == "sample"]
    assert len(samples) == doc["samples"] == 5 and samples[-1]["t"] >= 1.0
    assert samples[0]["power"] == [690.0] * 3 and samples[0]["reasons"] == [4, 4, 4]
    assert samples[-1]["temp"][0] > samples[0]["temp"][0]  # heated under load
    assert any(x["tflops"][0] for x in samples[1:]) and all(x["tflops"][2] is None for x in samples)
    assert doc["gemm"]["0"]["changed_batches"] == 0  # the same seeded product, batch after batch
    assert [x for x in lines if x["type"] == "event"][0]["xid"] == 79
    assert doc["xid"][0] == {"t": doc["xid"][0]["t"], "gpu": 0, "xid": 79, "source": "nvml"}
    assert doc["gpu_errors"] == {"2": "not visible to CUDA (CUDA_VISIBLE_DEVICES?), not loaded"}
    assert doc["ecc_after"][0] == {"gpu": 0, "corrected": 0, "uncorrected": 0, "remap_pending": False}
    s = Series.from_samples(samples)
    v = soak.judge_errors(s, doc)
    assert "GPU 0: XID 79" in v.failures[0] and "GPU 2: load failed" in v.failures[1]


def test_probe_without_nvml_events_or_memory_sensor_says_why():
    torch = pytest.importorskip("torch")
    probe = load_probe()
    nv = FakeNV([FakeGPU(0, mem_temp=False)], xid_events=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        doc = probe.run(argparse.Namespace(duration=0.5, interval=0.25, matrix=64), probe.Nvml(nv),
                        torch, [torch.device("cpu")])
    assert "NVML XID events unavailable (NVMLError_NotSupported" in doc["xid_note"]
    assert doc["nvml_unreadable"]["mem_temp"].startswith("NVMLError")
    assert all(x is None for line in out.getvalue().splitlines()
               if '"sample"' in line for x in json.loads(line)["mem_temp"])


def test_a_soak_that_ended_early_is_never_judged():
    """A soak probe that stopped after 40 s of a planned 90 s (and still sent its document) did
    not sustain the load: its checks ERROR, saying so, rather than judge 40 s as 90."""
    from types import SimpleNamespace

    from signoff.fleet import ProbeError
    from signoff.soak.plugin import soaked
    full, short = series(duration=90, n=1), series(duration=40, n=1)

    def run_of(s):
        hs = SimpleNamespace(name="n1", error=None, series=s, header={"gpus": [0]})
        return SimpleNamespace(profile=profiles.load("local"), hosts={"n1": hs}, say=None,
                               plan={"duration": 90, "interval": 1.0}, wait=lambda name, **kw: hs)
    class Host(SimpleNamespace):
        def __str__(self):
            return self.name
    host = Host(name="n1", hardware={}, gpus=[{"index": 0}])
    assert soaked(host, run_of(full)).series is full
    with pytest.raises(ProbeError, match=r"^n1: the soak's samples span 40 s of the planned 90 s: it ended"):
        soaked(host, run_of(short))
