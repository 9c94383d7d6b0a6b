"""A new user's walk-through (issues 31 and 45): the README's quickstart followed literally on 4
lab hosts. A copy of the clone (a git checkout of this tree), installed as `make accept` installs
it, editable into its own .venv; the README's inventory example (examples/cluster.yaml) adapted to
the lab hosts with a shared dataset directory and a data interface each; then, in the clone,
`.venv/bin/signoff plan --inventory cluster.yaml` and `.venv/bin/signoff run --inventory
cluster.yaml` of the whole sheet, with no other setting (no --profile: auto picks `local`, no
site profile). The verdict is PASS, exit 0: no check may ERROR for a setting the README did not
show or FAIL on these healthy hosts (but a read the VM's shared disk stalled, measured again as
docs/running.md shows), the plan's preflight warns of every check the run then ERRORs, or finds
N.A. for another cause than the hardware (no GPU here), and the report names the clone's commit
(item 2: one program). It is also the suite's one run of the whole sheet on matching lab hosts
(it replaced test_lab_acceptance.py's test_matching_hosts_pass: issue 30, the suite's time); its
wall time is docs/measurements.md's to record, not asserted here."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml
from lab import Lab
from test_command import copy_of_the_clone, signoff
from test_lab_acceptance import stalled
from test_network_lab import shaped, speed_sysfs

from signoff import hostlist, inventory
from signoff.results import load as load_results

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.lab, pytest.mark.install]  # root + sshd (tests/conftest.py); a venv

# The lab's "NICs": veths have no line rate (they report a nominal 10 Gb/s that iperf3 beats
# by 1.2-1.3 x: the pairs then ERROR "more than the link carries"). So each host's link is
# shaped to RATE_MBPS (tc) and a FAKE sysfs says so: the one fake of the walk-through. At 1 Gb/s
# 4 hosts' gloo ranks on 2 cores reached 0.87-0.93 of it, the node bound's 0.9 within noise, and
# the multi-node all-reduce took 2-3 attempts (62 s of a 160 s run); at 500 Mb/s 0.93-0.96 at the
# first (measured here, alone and beside tests/test_network_lab.py).
RATE_MBPS = 500
HARDWARE_NA = r"N\.A\.: {h}( has no NVIDIA GPU \(.*\) and profile \S+ needs none| runs the all-reduce " \
              r"on gloo \(no GPU\): NCCL transport does not apply|: profile \S+'s class has no multi-node " \
              r"NVLink domain \(hardware\.nvlink_domain unset\)(: no all-reduce over MNNVL)?" \
              r"|: no RDMA device \(/sys/class/infiniband is empty\): .*" \
              r"|: no RDMA port \(/sys/class/infiniband lists none\): no RoCE to judge" \
              r"|: no intent file \(--intent FILE, or the inventory's intent: key\): nothing to judge it " \
              r"against)$"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("lab"), n_hosts=4) as lab:
        with shaped(lab, {h.name: f"{RATE_MBPS}mbit" for h in lab.hosts}):
            yield lab


def editable(clone: Path) -> Path:
    """A copy of this tree at `clone`, committed as a git checkout, and `make accept`'s install of
    it: `pip install -e .` into clone/.venv. No download: the venv reaches this venv's packages
    through a .pth file, pip builds without isolation and installs no deps. Returns the venv."""
    copy_of_the_clone(clone)
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
                                                 "-m", "the clone"]):
        subprocess.run(["git", "-C", str(clone), *git], check=True, capture_output=True)
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = subprocess.run([venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"
                           ], capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    p = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q",
                        "--no-deps", "--no-build-isolation", "--no-index", "-e", str(clone)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return venv


def adapted_inventory(lab, tmp_path: Path, rate_mbps: int = RATE_MBPS) -> Path:
    """examples/cluster.yaml as a user adapts it: every key it sets kept, each value the lab's;
    known_hosts uncommented (the lab's host keys); the hosts its own. Each lab host has its own
    address (no DNS for lab1..4) and veth name, so a line each, as the example's gpu016 line."""
    example = (ROOT / "examples/cluster.yaml").read_text()
    datasets = tmp_path / "datasets"  # one directory the 4 hosts share: they share this filesystem
    datasets.mkdir()
    sysfs = tmp_path / "sysfs"  # one FAKE sysfs holding every host's veth: one env for all
    for h in lab.hosts:
        speed_sysfs(sysfs, h.veth_host, rate_mbps)
        # only the rate is fake: the counters error_counters watches are the veth's own (each
        # host reads the link in its namespace's /sys; without them that check ERRORs)
        for real in ("statistics", "carrier_changes"):
            (sysfs / "class/net" / h.veth_host / real).symlink_to(f"/sys/class/net/{h.veth_host}/{real}")
    values = {"user": "root", "port": "22", "identity_file": str(lab.user_key), "python": sys.executable,
              "data_iface": lab.hosts[0].veth_host, "storage_path": str(datasets),
              "storage_readonly": "false", "env": f"{{SIGNOFF_SYSFS: {sysfs}}}"}
    # a key the example gains must be adapted here too, not carried with the example's value
    assert set(yaml.safe_load(example)["defaults"]) == set(values)
    text = example.replace("# known_hosts: ./known_hosts ", f"known_hosts: {lab.known_hosts}")
    for key, value in values.items():
        text, n = re.subn(rf"(?m)^(  {key}: +)\S+( .*)?$", lambda m, v=value: m[1] + v + (m[2] or ""), text)
        assert n == 1, key
    head, _ = text.split("\nhosts:\n")
    hosts = [f"  - {{name: {h.name}, address: {h.address}, data_iface: {h.veth_host}, tags: [lab]}}"
             for h in lab.hosts]
    path = tmp_path / "cluster.yaml"
    path.write_text(head + "\nhosts:\n" + "\n".join(hosts) + "\n")
    inventory.load(path)  # the loader takes it
    return path


def warnings(out: str) -> list[tuple[list[str], list[str], str]]:
    """The preflight's warnings (signoff/preflight.py): (hosts, checks, ERROR or N.A.) of each."""
    if "will ERROR or be N.A. in a run" not in out:
        return []
    block = out.split("will ERROR or be N.A. in a run", 1)[1].splitlines()[1:]
    found = []
    for line in block:
        if not line.startswith("  "):
            break
        m = re.match(r"  (\S+): (\w+(?:, \w+)*) (ERROR|N\.A\.): ", line)
        assert m or "judged over this boot only" in line, f"a warning this test cannot read: {line}"
        if m:
            found.append((hostlist.expand(m[1]), m[2].split(", "), m[3]))
    return found


def test_new_user_walkthrough(lab, tmp_path):
    # 1. the install (README, Quickstart: `git clone`, `make accept`'s `pip install -e .`), the
    # inventory copied from examples/cluster.yaml into the clone and adapted to the hosts
    work = tmp_path / "signoff"
    venv = editable(work)
    exe = (str(venv / "bin/signoff"),)
    adapted_inventory(lab, work)  # work/cluster.yaml
    names = [h.name for h in lab.hosts]
    commit = subprocess.run(["git", "-C", str(work), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()

    # 2. the plan, as the README shows it: auto picks local for GPU-less hosts; the preflight of
    # the README's inventory
    p = signoff("plan", "--inventory", "cluster.yaml", exe=exe, cwd=work)
    assert p.returncode == 0, p.stdout + p.stderr
    plan = p.stdout
    assert "--profile auto picks local on these hosts (asked for their sysinfo)" in plan, plan
    # every host's line: the training environment, the data interface at its (FAKE) rate, the
    # shared dataset directory, iperf3 for the pairs
    for h in lab.hosts:
        line = next(ln for ln in plan.splitlines() if ln.startswith(f"  {h.name}: python "))
        assert f"python {sys.executable} (" in line and "torch " in line, line
        assert f"data_iface {h.veth_host} ({RATE_MBPS / 1000:g} Gb/s, up)" in line, line
        assert f"storage {work / 'datasets'} (" in line and "host pairs: iperf3" in line, line
    warned = warnings(plan)
    # the README's complete inventory leaves nothing to warn of (no data_iface, no storage_path,
    # an interpreter without torch: each would be warned here and ERROR below)
    assert warned == [], plan

    # 3. the run, as the README shows it: the whole sheet, no -k/--only, no --profile
    p = signoff("run", "--inventory", "cluster.yaml", exe=exe, cwd=work, timeout=900)
    first = p.stdout  # the run's own preflight, asserted below
    (report,) = (work / "reports").glob("2*")  # the clone's reports/: the clone's code ran
    res = load_results(report / "results.json")
    # the one miss a healthy lab has shown: the VM's one disk, which the other test workers share,
    # stalled in one attempt of a host's read (0.011-0.018 GB/s, the next 0.77-1.04), which the
    # retry policy FAILs as 'unstable' though its best attempt met the floor (docs/measurements.md:
    # the storage lab tests of several fresh clones; one of six loaded walk-throughs here). The
    # README's next step for a FAIL: measure again what did not pass (docs/running.md, Rerunning
    # what did not pass), whose verdict is the whole sheet's. Nothing else is measured again.
    runs = [res]
    missed = [r for r in res["results"] if r["status"] not in ("PASS", "N.A.")]
    if missed and all(stalled(r) for r in missed):
        print("the disk stalled:", [(r["criterion"], r["host"], r["details"].get("attempts"))
                                    for r in missed])
        p = signoff("run", "--rerun", str(report), exe=exe, cwd=work, timeout=900)
        (report,) = set((work / "reports").glob("2*")) - {report}
        res = load_results(report / "results.json")
        assert res["meta"]["rerun"]["run"], res["meta"]
        runs.append(res)
    out = p.stdout + p.stderr
    recs = res["results"]
    assert {r["host"] for r in recs} - {"all hosts"} - {f"{a}->{b}" for a in names for b in names} \
        == set(names), out
    assert res["meta"]["profile"] == "local", res["meta"]
    # one program (item 2): the report names the clone's commit, in results.json, report.md and
    # the cover of report.html alike
    assert res["meta"]["suite_version"] == f"0.1.0 (git {commit})", res["meta"]["suite_version"]
    said = f"signoff 0.1.0 (git {commit})"
    assert said in (report / "report.md").read_text() and said in (report / "report.html").read_text()
    print("\n".join(p.stdout.rstrip().splitlines()[-12:]))  # the README's tail of a good run

    # every ERROR was warned of by the plan, on its host; every warning came true
    def host_of(r):
        return r["host"].split("->")
    for r in recs:
        if r["status"] == "ERROR":
            assert any(r["criterion"] in checks and set(host_of(r)) & set(hosts)
                       for hosts, checks, _ in warned), f"ERROR the plan did not warn of: {r}"
    for hosts, checks, status in warned:
        for r in recs:
            if r["criterion"] in checks and set(host_of(r)) & set(hosts):
                assert r["status"] == status, (r, hosts, checks, status)
    # N.A.: the hardware (no GPU in the lab) or the run (no intent file), said so; anything else
    # must have been warned of
    for r in recs:
        if r["status"] == "N.A." and not any(r["criterion"] in c for _, c, s in warned if s == "N.A."):
            assert re.match(HARDWARE_NA.format(h=re.escape(r["host"])), r["message"]), r

    # the verdict: PASS (exit 0), every check PASS or N.A. (the hardware's, above). The figures
    # across the hosts are judged against their links' bounds (a pair above 1.05 x its line rate
    # ERRORs: the FAKE rate would be wrong); local's gloo floors across nodes (all-reduce,
    # reduce-scatter, all-to-all, send/recv) are 0.9 x the lowest reading of healthy runs of this lab
    # beside other lab tests on 2 cores, the pairs 0.9 x line rate, the all-gather nvidia-base's
    # 0.74 (thresholds/local.yaml, docs/measurements.md): a miss names the figure and its floor here.
    status = {(r["criterion"], r["host"]): r["status"] for r in recs}
    across = ("net_pair_bandwidth", "multinode_allreduce", "train_scaling_nodes", "multinode_alltoall_busbw",
              "rail_alltoall_busbw", "multinode_allgather_busbw", "multinode_reduce_scatter_busbw",
              "multinode_sendrecv_busbw")
    assert {h for c, h in status if c in across} == {"lab1->lab2", "lab2->lab3", "lab3->lab4", "lab4->lab1",
                                                     "all hosts"}
    missed = [(r["criterion"], r["host"], r["status"], r.get("measured"), r.get("expected"), r["message"])
              for r in recs if r["status"] not in ("PASS", "N.A.")]
    assert not missed and res["verdict"] == "PASS" and p.returncode == 0, (missed, out)
    for h in names:  # measured with the README's settings, not around them
        assert status[("nic_link", h)] == "PASS" and status[("storage_read_seq", h)] == "PASS"
        assert status[("allreduce_busbw", h)] == "PASS" and status[("train_throughput", h)] == "PASS"
        assert status[("error_counters", h)] == "PASS"
        # every collective inside each host (issue 44), exact
        for c in ("allgather_busbw", "reduce_scatter_busbw", "alltoall_busbw", "sendrecv_busbw",
                  "collectives_correct"):
            assert status[(c, h)] == "PASS", c
    # and across the 4 hosts: the all-to-all over every host and in each rail, measured and exact
    assert status[("multinode_collectives_correct", "all hosts")] == "PASS"
    a2a = {r["criterion"]: r for r in recs
           if r["criterion"] in ("multinode_alltoall_busbw", "rail_alltoall_busbw")}
    assert a2a["multinode_alltoall_busbw"]["measured"] > 0 and a2a["rail_alltoall_busbw"]["measured"] > 0, a2a
    assert "x 4/3 nodes" in a2a["multinode_alltoall_busbw"]["source"], a2a  # nic_bound, its figures stated
    seq = next(r for r in recs if r["criterion"] == "storage_read_seq")
    assert seq["details"]["path"] == str(work / "datasets")
    # the run's own preflight (after the profile's pick) says what the plan said
    assert "will ERROR or be N.A. in a run" not in first, first
    assert f"data_iface {lab.hosts[0].veth_host} ({RATE_MBPS / 1000:g} Gb/s, up)" in first, first
    # no probe temp dir left on the hosts (they share this filesystem)
    left = [f["workdir"] for run in runs for f in run["hosts"].values()
            if "workdir" in f and Path(f["workdir"]).exists()]
    assert not left, left
