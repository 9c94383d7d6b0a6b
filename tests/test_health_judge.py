"""The health checks' pure judgements (signoff/gpu/judge.py) on recorded-format readings with
one fault injected each: no GPU here, so the per-GPU votes are fed their documents."""

from signoff.gpu import judge


def sdc_doc(sums: dict, stable=True, ops=("gemm_bf16",)) -> dict:
    dev = lambda s: {"name": "NVIDIA H200", **{op: {"sha256": s, "repeats_equal": stable} for op in ops}}  # noqa: E731
    return {"ops": list(ops), "devices": {d: dev(s) for d, s in sums.items()}}


def test_sdc_one_gpu_of_four_differs_and_is_named():
    fails, consensus = judge.sdc_host(sdc_doc({"0": "a" * 64, "1": "a" * 64, "2": "b" * 64, "3": "a" * 64}))
    assert fails == [f"GPU 2 gemm_bf16 result {'b' * 12} differs from the other GPUs' {'a' * 12}"]
    assert consensus == {"gemm_bf16": "a" * 64}


def test_sdc_two_gpus_disagreeing_have_no_majority_and_unstable_repeats_fail():
    fails, consensus = judge.sdc_host(sdc_doc({"0": "a" * 64, "1": "b" * 64}))
    assert fails == [f"gemm_bf16: no majority among the GPUs (GPU 0={'a' * 12}; GPU 1={'b' * 12})"]
    assert consensus == {"gemm_bf16": None}
    fails, _ = judge.sdc_host(sdc_doc({"0": "a" * 64}, stable=False))
    assert fails == ["GPU 0 gemm_bf16 gave different bits on a repeat of the same input"]


def test_sdc_across_hosts_majority():
    c = {"n1": {"gemm_fp32": "a"}, "n2": {"gemm_fp32": "a"}, "n3": {"gemm_fp32": "b"}}
    assert judge.sdc_fleet(c, "n1") == ([], [])
    assert judge.sdc_fleet(c, "n3") == (["gemm_fp32 result b differs from a on n1, n2"], [])
    assert judge.sdc_fleet({"n1": {"gemm_fp32": "a"}}, "n1") == ([], [])  # alone: nothing to compare
    two = {"n1": {"gemm_fp32": "a"}, "n2": {"gemm_fp32": "b"}}  # 1-1: no culprit, neither blamed
    assert judge.sdc_fleet(two, "n1") == ([], ["gemm_fp32: no majority among the hosts of its class "
                                               "(n1=a; n2=b)"])


def test_counters_reset_and_a_vanished_port():
    start = {"infiniband": {"mlx5_0/1": {"link_downed": 4}}, "net": {"ib0": {"rx_errors": 0}},
             "pcie_replay": {"0": 0}}
    end = {"infiniband": {}, "net": {"ib0": {"rx_errors": None}}, "pcie_replay": {"0": 0}}
    grew, unread = judge.counter_growth(start, end, ["ib0"])
    assert grew == [] and unread == ["InfiniBand mlx5_0/1 (absent in the end snapshot)", "ib0 rx_errors"]
    end = {"infiniband": {"mlx5_0/1": {"link_downed": 1}}, "net": {"ib0": {"rx_errors": 5}},
           "pcie_replay": {"0": 0}}
    grew, _ = judge.counter_growth(start, end, ["ib0"])
    assert grew == ["InfiniBand mlx5_0/1 link_downed went back from 4 to 1 (reset during the run)",
                    "ib0 rx_errors +5 (0 -> 5)"]


def test_thermal_forms_and_nearest_nic():
    th = judge.thermal_thresholds({"shutdown": None, "slowdown": None, "gpu_max": None, "mem_max": None,
                                   "temp": 40, "tlimit_margin": 50,
                                   "smi": {"GPU Slowdown T.Limit Temp": -2, "Memory Max Operating Temp": 95}})
    assert th["slowdown"] == (92, "T.Limit 90 C minus offset -2 C") and th["mem_max"] == (95, "nvidia-smi")
    assert th["shutdown"] == (None, "unreadable")
    near = judge.nearest_nics({"mlx5_0": "SYS", "mlx5_1": "PXB", "mlx5_2": "PXB"})
    assert near == ("PXB", ["mlx5_1", "mlx5_2"])
