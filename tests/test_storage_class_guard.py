"""Storage on a host not of the profile's class: this machine has no GPU, so under a GPU
profile its per-node storage checks are NOT RUN naming the class guard, as the all-reduce and
P2P checks are (before: FAIL "storage not measured", a judgement of storage it never read)."""

from __future__ import annotations

from test_cli import run

from signoff.results import load as load_results


def test_gpu_less_host_under_a_gpu_profile_is_not_run_naming_the_guard(tmp_path):
    p = run("-k", "storage_read_seq or storage_read_small or storage_write_seq or gpu_count",
            "--profile", "h200-8x-nvlink@1",
            "--partial", "--lock-wait", "300", "--report-dir", str(tmp_path))
    res = {r["criterion"]: r for r in load_results(tmp_path / "results.json")["results"]}
    assert res["gpu_count"]["status"] == "FAIL", p.stdout  # the class check says it loudly
    for crit in ("storage_read_seq", "storage_read_small", "storage_write_seq"):
        assert res[crit]["status"] == "NOT RUN", res[crit]
        assert res[crit]["message"].startswith("not run: class guard of profile h200-8x-nvlink@1"), res[crit]
