"""GPUDirect RDMA per rail (issue 53 item 4): the gdr probe and the judgements on recorded public
captures (perftest's ib_write_bw --use_cuda output, NCCL's channel lines with and without GDRDMA:
tests/recorded/rails/README.md), and acceptance/test_rails.py's checks PASS, FAIL on purpose (a slow
rail, a rail through host memory, a GPU whose closest NIC is across the CPU, NCCL without GDRDMA)
naming GPU, NIC and host, ERROR without ib_write_bw and N.A. without an RDMA NIC or a second host.
There is no InfiniBand card or GPU here: the rails' figures and the other hosts are fakes, named so."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from signoff import InputError, families, profiles
from signoff.check import Check
from signoff.fixtures import HostView
from signoff.fleet import ProbeError
from signoff.paths import PKG
from signoff.rails import judge, report
from signoff.rails import plugin as rails_plugin

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "tests" / "recorded" / "rails"
PROBE = PKG / "rails" / "probe_gdr.py"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


allreduce = _load(PKG / "interconnect" / "probe_allreduce.py", "probe_allreduce_rails")


def recorded(name: str) -> str:
    return "\n".join(ln for ln in (REC / name).read_text().splitlines() if not ln.startswith("#"))


A30 = recorded("perftest-241-use_cuda-a30.txt")
TABLE = recorded("perftest-273-table-gbits.txt")


# ------------------------------------------------------------------ perftest's output, recorded


def test_recorded_perftest_use_cuda_output_reads_the_gpu_and_its_buffer():
    got = judge.parse_perftest(A30 + "\n" + TABLE)
    assert got == {"gbps": 0.48, "gpu_picked": 0, "gpu_buffer": True, "dmabuf": False, "no_cuda": False}


def test_recorded_table_alone_is_a_buffer_in_host_memory():
    got = judge.parse_perftest(TABLE)
    assert got["gbps"] == 0.48 and got["gpu_buffer"] is False and got["gpu_picked"] is None


def test_perftest_format_strings_of_25x_dmabuf_and_no_cuda():
    """Not captures: linux-rdma/perftest's own format strings (src/cuda_memory.c, perftest_parameters.c)."""
    got = judge.parse_perftest("Picking GPU number 3\nusing DMA-BUF for GPU buffer address at 0x7f aligned "
                               "at 0x7f with aligned size 8\nallocated GPU buffer of a 8 address at 0x7f "
                               "for type 0\n")
    assert (got["gpu_picked"], got["dmabuf"], got["gpu_buffer"]) == (3, True, True)
    assert judge.parse_perftest(" Unsupported memory type\n")["no_cuda"] is True


FAKE_PERFTEST = r"""#!/bin/sh
# A FAKE perftest ib_write_bw (no InfiniBand card here): --help as a CUDA build prints it (or not,
# RAILS_NO_CUDA set), a run as the recorded A30 server's output with a table
case "$*" in *--help*) [ -n "$RAILS_NO_CUDA" ] || echo "      --use_cuda=<cuda device id> Use CUDA";
  echo "      --use_cuda_dmabuf Use CUDA DMA-BUF"; exit 1;; esac
echo "$@" > "$RAILS_ARGS"
cat "$RAILS_OUT"
"""


def fake_bin(tmp_path: Path) -> dict:
    b = tmp_path / "bin"
    b.mkdir()
    (b / "ib_write_bw").write_text(FAKE_PERFTEST)
    (b / "ib_write_bw").chmod(0o755)
    (tmp_path / "out.txt").write_text(A30 + "\n" + TABLE + "\n")
    return {**os.environ, "PATH": f"{b}:{os.environ['PATH']}", "RAILS_OUT": str(tmp_path / "out.txt"),
            "RAILS_ARGS": str(tmp_path / "args")}


def gdr(env, *args) -> dict:
    out = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_fake_perftest_probe_caps_and_a_client_run_on_the_rails_card_and_gpu(tmp_path):
    env = fake_bin(tmp_path)
    assert gdr(env, "caps")["cuda"] is True
    assert gdr({**env, "RAILS_NO_CUDA": "1"}, "caps")["cuda"] is False
    doc = gdr(env, "client", "--connect", "10.0.0.2", "--gpu", "0", "--device", "mlx5_0", "--ib-port", "1",
              "--duration", "1", "--dmabuf")
    assert doc["gbps"] == 0.48 and "error" not in doc
    args = (tmp_path / "args").read_text().split()
    assert args[args.index("-d") + 1] == "mlx5_0" and "--use_cuda=0" in args
    assert args.index("--use_cuda_dmabuf") > args.index("--use_cuda=0") and args[-1] == "10.0.0.2"
    no = gdr({"PATH": "/nonexistent"}, "server", "--gpu", "0", "--device", "mlx5_0")
    assert no["error"] == "ib_write_bw is not installed (perftest)"
    assert "gdr" in families.probes()


# ------------------------------------------------------------------ the rails of a host


def facts(levels=("PIX", "PIX"), rate=400.0) -> dict:
    """A host of 2 GPUs and 2 NICs (fake: no IB card here), sysinfo's shapes."""
    nics = ["mlx5_0", "mlx5_1"]
    far = {"PIX": "SYS", "SYS": "SYS"}
    gpus = {str(i): {nics[i]: lv, nics[1 - i]: far.get(lv, "SYS")} for i, lv in enumerate(levels)}
    return {"gpu_nic": {"nics": [{"name": n, "numa": 0, "link_layer": "InfiniBand"} for n in nics],
                        "gpus": gpus},
            "preflight": {"infiniband": [{"device": n, "port": 1, "rate_gbps": rate, "state": "4: ACTIVE"}
                                         for n in nics]},
            "nvidia": {"gpus": [{"index": 0}, {"index": 1}]}}


def test_each_gpu_takes_its_closest_nic_and_shared_switches_split():
    rails, na, err = judge.rails_of(facts())
    assert [(r["gpu"], r["nic"], r["level"], r["rate_gbps"]) for r in rails] == \
        [("0", "mlx5_0", "PIX", 400.0), ("1", "mlx5_1", "PIX", 400.0)] and not na and not err
    two = {"gpu_nic": {"nics": [{"name": "mlx5_0"}, {"name": "mlx5_1"}],
                       "gpus": {"0": {"mlx5_0": "PXB", "mlx5_1": "PXB"},
                                "1": {"mlx5_0": "PXB", "mlx5_1": "PXB"}}}}
    assert [r["nic"] for r in judge.rails_of(two)[0]] == ["mlx5_0", "mlx5_1"]
    assert "no RDMA device" in judge.rails_of({"gpu_nic": {"nics": []}})[1]
    assert "PCIe path of GPU(s) 1" in judge.rails_of({"gpu_nic": {"nics": [{"name": "x"}],
                                                                  "gpus": {"0": {"x": "PIX"}, "1": None}}})[2]


# ------------------------------------------------------------------ the checks


class FakeRails:
    """The pair's measurement (fake: no IB card): what Rails.of() returns, or raises."""

    def __init__(self, res):
        self.res = res

    def of(self, host, duration=5, dmabuf=False):
        if isinstance(self.res, Exception):
            raise self.res
        return self.res


class FakeNetwork:
    """The multi-node all-reduce's cached run: one host's route record (recorded NCCL lines)."""

    def __init__(self, host, lines, node_rank, local_ranks):
        t, net, _ = allreduce.parse_nccl_log(lines.splitlines())
        doc = {"backend": "nccl", "node_rank": node_rank, "local_ranks": local_ranks, "transports": t,
               "nccl_net": net}
        self.res = {"ok": True, "hosts": {host: doc}}

    def allreduce(self, names, lo, hi, env, timeout, again=False, pair=False):
        return self.res


class Fleet:
    def __init__(self, n=2):
        self.names = [f"node{i}" for i in range(1, n + 1)]


class Config:
    def getoption(self, name):
        return 600


class Item:
    def __init__(self, name):
        self.name = self.originalname = name
        self.user_properties: list = []


def rail(gbps=370.0, out=None, server_out=None, level="PIX", gpu="0", nic="mlx5_0") -> dict:
    """One measured rail: the ends' perftest output (the recorded A30 run's CUDA lines, the figure fake)."""
    a = {"gpu": gpu, "nic": nic, "level": level, "port": 1, "rate_gbps": 400.0}
    mine = A30.replace("Picking device No. 0", f"Picking device No. {gpu}")  # another GPU's rail: fake
    return {"a": a, "b": {**a, "level": "PIX"}, "gbps": gbps,
            "client": judge.parse_perftest(mine + "\n" + TABLE if out is None else out),
            "server": judge.parse_perftest(mine if server_out is None else server_out)}


def pair(*rails) -> dict:
    return {"pair": "node1->node2", "server": "node2", "rails": list(rails), "dmabuf": False}


def run_check(name, res, host_facts=None, n=2, prof="local", network=None):
    acc = _load(ROOT / "acceptance" / "test_rails.py", "acceptance_test_rails")
    item = Item(f"test_{name}")
    kw = {"host": HostView("node1", host_facts or facts(), None), "fleet": Fleet(n), "rails": FakeRails(res),
          "profile": profiles.load(prof), "check": Check(item, "node1")}
    if name == "gdr_rail_path":
        kw.update(network=network, pytestconfig=Config())
    try:
        getattr(acc, f"test_{name}")(**kw)
        status, msg = "PASS", ""
    except pytest.fail.Exception as exc:
        status, msg = "FAIL", str(exc)
    except pytest.skip.Exception as exc:
        status, msg = "N.A.", str(exc)
    except (ProbeError, InputError) as exc:
        status, msg = "ERROR", str(exc)
    rec = next((v for k, v in item.user_properties if k == "signoff"), {})
    return status, msg, rec


def test_fake_rails_at_line_rate_through_gpu_memory_pass():
    res = pair(rail(), rail(gpu="1", nic="mlx5_1"))
    status, msg, rec = run_check("gdr_rail_bw", res)
    assert status == "PASS", msg
    assert rec["measured"] == 46.25 and rec["details"]["rows"][0]["floor_gb_s"] == 45.0
    assert "0.9 x 400 Gb/s / 8" in rec["details"]["rows"][0]["rule"]
    assert run_check("gdr_rail_path", res)[0] == "PASS"


def test_fake_slow_rail_fails_naming_gpu_nic_and_hosts():
    status, msg, rec = run_check("gdr_rail_bw", pair(rail(), rail(gbps=120.0, gpu="1", nic="mlx5_1")))
    assert status == "FAIL" and rec["measured"] == 15.0
    assert "node1 GPU 1 / mlx5_1 -> node2 GPU 1 / mlx5_1: 15 GB/s, below 45 GB/s (0.9 x 400 Gb/s / 8)" in msg
    assert "GPU 0 / mlx5_0 -> " not in msg


def test_fake_rails_the_pair_left_unmeasured_are_named_never_a_pass():
    """node1 has 2 rails (GPU 0, GPU 1); node2 lacks GPU 1, so the pair measured rail 0 only: the
    rail left out is an ERROR naming it (a FAIL beside a slow rail), and no rail at all is an ERROR."""
    for crit in ("gdr_rail_bw", "gdr_rail_path"):
        status, msg, _ = run_check(crit, pair(rail()))
        assert status == "ERROR", (crit, status, msg)
        assert "node1 GPU 1 / mlx5_1: not measured (node2 has no GPU 1 to pair it with)" in msg, msg
        status, msg, _ = run_check(crit, pair())
        assert status == "ERROR" and "no rail measured" in msg and "GPU 0 / mlx5_0" in msg, (crit, msg)
    status, msg, _ = run_check("gdr_rail_bw", pair(rail(gbps=120.0)))
    assert status == "FAIL" and "15 GB/s, below 45 GB/s" in msg
    assert "node1 GPU 1 / mlx5_1: not measured (node2 has no GPU 1 to pair it with)" in msg


def test_recorded_table_without_cuda_lines_is_a_rail_through_host_memory_and_fails():
    status, msg, rec = run_check("gdr_rail_path", pair(rail(), rail(out=TABLE, gpu="1", nic="mlx5_1")))
    assert status == "FAIL" and rec["measured"] == 1
    assert ("node1 GPU 1 / mlx5_1 -> node2 GPU 1 / mlx5_1: node1's ib_write_bw put its buffer in host memory"
            in msg) and "nvidia_peermem" in msg


def test_fake_gpu_whose_closest_nic_is_across_the_cpu_fails_the_path():
    status, msg, _ = run_check("gdr_rail_path", pair(rail(level="SYS")))
    assert status == "FAIL"
    assert "node1 GPU 0's closest NIC mlx5_0 is SYS (across the CPU), farther than PHB" in msg


def test_no_rdma_nic_one_host_and_no_ib_write_bw():
    for crit in ("gdr_rail_bw", "gdr_rail_path"):
        status, msg, _ = run_check(crit, pair(rail()), n=1)
        assert status == "N.A." and msg.endswith("node1: one host in the run: no rail to another node")
        status, msg, _ = run_check(crit, pair(rail()), host_facts={"gpu_nic": {"nics": []}})
        assert status == "N.A." and "no RDMA device (/sys/class/infiniband is empty)" in msg
        missing = ProbeError("node1->node2: ib_write_bw (perftest) is not installed on node2")
        status, msg, _ = run_check(crit, missing)
        assert status == "ERROR" and "not installed on node2" in msg


def test_perftest_without_cuda_errors_the_bandwidth_and_reads_nccl_lines_for_the_path():
    res = {**pair(), "no_cuda": ["node2"], "why": judge.NO_CUDA}
    status, msg, _ = run_check("gdr_rail_bw", res)
    assert status == "ERROR" and "no --use_cuda" in msg and "rail_alltoall_busbw" in msg
    # recorded NCCL lines without GDRDMA (ranks 32-39 on this node: GPUs 6 and 7 seen), as node1's record
    lines = recorded("nccl-1814-no-gdrdma.txt").replace("hostname-test", "node1")
    status, msg, rec = run_check("gdr_rail_path", res, network=FakeNetwork("node1", lines, 4, 8))
    assert status == "FAIL"
    assert "node1 GPU 6 / NET/IBext_v8/1: NCCL's NET channels without GDRDMA (1 connection(s))" in msg
    assert "node1 GPU 7 / NET/IBext_v8/2" in msg and "judged on NCCL's channel lines" in rec["note"]


def test_recorded_nccl_lines_with_gdrdma_pass_and_a_nic_not_the_closest_fails():
    seen = judge.nccl_rails(recorded("nccl-707-gdrdma.txt").splitlines())["10-90-43-152"]
    assert seen["0"] == {"NET/IB/5": {"gdr": True, "channels": 2}, "NET/IB/4": {"gdr": True, "channels": 2}}
    assert judge.nccl_path(seen, "10-90-43-152", []) == ([], 4)
    names = judge.nccl_rails(recorded("nccl-988-devices.txt").splitlines()
                             + ["ad5b8ae33076:1:2 [1] NCCL INFO Channel 00/0 : 9[1] -> 1[1] [receive] via "
                                "NET/IBext/0/GDRDMA"])  # the channel line: fake, on the recorded host
    bad, _ = judge.nccl_path(names["ad5b8ae33076"], "ad5b8ae33076",
                             [{"gpu": "1", "nic": "mlx5_1", "level": "PIX"}])
    assert bad == ["ad5b8ae33076 GPU 1 / mlx5_0: not the GPU's closest NIC (mlx5_1, PIX)"]


def test_fake_route_record_gives_each_local_gpu_its_net_channels():
    doc = {"node_rank": 1, "local_ranks": 2, "transports": {"NET/IB/0/GDRDMA": [[0, 2]], "NET/IB/1": [[3, 1]],
                                                            "P2P/CUMEM": [[2, 3]]}}
    assert judge.nccl_from_route(doc) == {"0": {"NET/IB/0": {"gdr": True, "channels": 1}},
                                         "1": {"NET/IB/1": {"gdr": False, "channels": 1}}}


def test_fake_hostile_names_stay_inert():
    evil = rail(nic="\x1b[2J" + "m" * 300)
    status, msg, _ = run_check("gdr_rail_bw", pair({**evil, "gbps": 1.0}))
    assert status == "FAIL" and "\x1b" not in msg and len(msg) < 3000


def test_profile_rejects_a_bad_level_or_duration(tmp_path):
    for body, err in (("gdr_rail_path: {max: 0, unit: r, source: s, level: FAR}", "expected one of PIX"),
                      ("gdr_rail_bw: {min: 1, unit: GB/s, source: s, duration: 0}", "duration")):
        (tmp_path / "p.yaml").write_text(f"extends: local\ndescription: x\ncriteria:\n  {body}\n")
        with pytest.raises(InputError, match=err):
            profiles.load(str(tmp_path / "p.yaml"))


def test_report_section_and_methodology_show_the_rails(tmp_path):
    records = [{"criterion": "gdr_rail_bw", "host": "node1", "status": "FAIL",
                "details": {"rows": [{"rail": "node1 GPU 1 / mlx5_1 -> node2 GPU 1 / mlx5_1", "gb_s": 15.0,
                                      "floor_gb_s": 45.0, "rule": "0.9 x 400 Gb/s / 8", "dmabuf": False}]}}]
    html = str(report.section(records))
    assert "GPUDirect RDMA per rail" in html and "node1 GPU 1 / mlx5_1 -&gt; node2" in html and "45.0" in html
    assert report.section([]) == ""
    rows = rails_plugin.pytest_signoff_methodology({"results": records}, None)
    assert "ib_write_bw --use_cuda" in rows[0]["tool"]
