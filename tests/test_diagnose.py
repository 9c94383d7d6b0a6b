"""Diagnosis of a low all-reduce from recorded probe documents (the shapes the probes print)."""

from signoff.interconnect import diagnose


def gpu(i, links=18, up=18):
    return {"index": i, "nvlink": {"links": links, "up": up}}


GOOD_AR = {"backend": "nccl", "graphs": True, "nccl_env": {"NCCL_NVLS_ENABLE": "0"},
           "transports": {"P2P/CUMEM/read": [[0, 1], [1, 0]]}}
GOOD_P2P = {"topology": {"paths": {"0-1": "NVLINK", "1-0": "NVLINK"}},
            "unidirectional": {"0-1": 390.0, "1-0": 391.0}}


def test_healthy_host_only_reports_the_steering_env():
    assert diagnose.interconnect([gpu(0), gpu(1)], GOOD_AR, GOOD_P2P) == ["NCCL_NVLS_ENABLE=0 is set"]


def test_shm_fallback_on_nvlink_host_is_named():
    ar = {**GOOD_AR, "transports": {"SHM/direct/direct": [[0, 1], [1, 0]]},
          "nccl_env": {"NCCL_P2P_DISABLE": "1"}}
    causes = diagnose.interconnect([gpu(0), gpu(1)], ar, GOOD_P2P)
    assert "NCCL used SHM/direct/direct between ranks 0->1, 1->0 although the GPUs have NVLink" in causes
    assert "NCCL_P2P_DISABLE=1 is set" in causes


def test_shm_on_pcie_host_is_not_a_fallback():
    ar = {**GOOD_AR, "transports": {"SHM/direct/direct": [[0, 1]]}}
    assert diagnose.fallback_transports(ar, nvlink=False) == []


def test_net_is_the_fallback_where_the_class_path_is_shm():
    """A class without GPU peer access (RTX 4090): SHM is its path and P2P (a driver that offers
    peer access) no fault; NCCL's network transport between ranks of one host is."""
    ar = {**GOOD_AR, "transports": {"SHM/direct/direct": [[0, 1]], "P2P/CUMEM": [[1, 2]],
                                    "NET/Socket/0": [[2, 3], [3, 0]]}}
    assert diagnose.off_host_transports(ar) == [
        "NCCL used NET/Socket/0 between ranks 2->3, 3->0 where the class's path is SHM (host memory)"]
    assert diagnose.off_host_transports({**GOOD_AR, "transports": {"SHM/direct/direct": [[0, 1]]}}) == []


def test_link_down_pcie_path_and_slow_pair_are_named():
    p2p = {"topology": {"paths": {"0-1": "NVLINK", "1-0": "NVLINK", "0-2": "PHB", "2-0": "PHB",
                                  "1-2": "NVLINK", "2-1": "NVLINK"}},
           "unidirectional": {"0-1": 390.0, "1-0": 391.0, "0-2": 21.0, "2-0": 22.0,
                              "1-2": 389.0, "2-1": 388.0}}
    causes = diagnose.interconnect([gpu(0), gpu(1), gpu(2, up=12)], GOOD_AR, p2p)
    assert "GPU 2 has only 12/18 NVLinks up" in causes
    assert "PHB (PCIe) path between GPU0 and GPU2" in causes
    assert any(c.startswith("slow pair GPU0\u2192GPU2 21 GB/s") for c in causes)
    assert not any("GPU1\u2192GPU2" in c for c in causes)


def test_eager_fallback_is_reported():
    causes = diagnose.interconnect([gpu(0), gpu(1)], {**GOOD_AR, "graphs": False}, None)
    assert any("CUDA graph capture failed" in c for c in causes)
