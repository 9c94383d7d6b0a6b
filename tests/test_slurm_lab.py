"""signoff inside a real Slurm allocation (tests/slurmlab.py on a tests/lab.py lab): probes
and the multi-node all-reduce launched by srun, nodes down or dying, Ctrl-C."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from lab import Lab
from slurmlab import SlurmLab
from test_lab_acceptance import ROOT, _only, accept, by_key, stalled

from signoff.results import load as load_results

pytestmark = [pytest.mark.lab, pytest.mark.slurm]  # skipped without root, sshd, Slurm: conftest.py


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with Lab(tmp_path_factory.mktemp("slurmlab"), n_hosts=3) as lab:
        s = SlurmLab(lab)
        with s:
            yield s
        left = s.daemons()
        assert not left, f"Slurm daemons left running after the lab: {left}"


@pytest.fixture(autouse=True)
def no_job_left(request):
    """A salloc killed by a test's timeout (a loaded machine) leaves its job allocated, and
    every later test would wait for nodes it never gets: cancel what a test left behind."""
    yield
    if "slurm" in request.fixturenames:
        slurm = request.getfixturevalue("slurm")
        slurm.run("scancel", "--partition", slurm.partition)


def test_tasks_run_inside_each_hosts_namespace(slurm):
    r = slurm.run("srun", "-N3", "--label", "hostname", "-I")
    assert r.returncode == 0, r.stderr
    got = {line.split(":")[0]: line.split(":", 1)[1].strip() for line in r.stdout.splitlines()}
    assert sorted(got.values()) == sorted(h.address for h in slurm.lab.hosts), r.stdout


LAB = str(ROOT / "tests" / "profiles" / "lab.yaml")


def inventory(slurm, tmp_path, **overrides):
    """The lab hosts' settings (data interface, Python); Slurm names the hosts and runs the commands."""
    lab = slurm.lab
    per_host = {h.name: {"data_iface": h.veth_host, **overrides.get(h.name, {})} for h in lab.hosts}
    return str(lab.write_inventory(tmp_path / "inv.yaml", python=sys.executable, overrides=per_host))


def in_allocation(slurm, tmp_path, *args, nodes=3, timeout=300, first=":"):
    """`pytest acceptance/ --launcher slurm` inside `salloc -N nodes` (--no-kill: a node set DOWN
    or dying does not end the allocation), after the shell command `first`."""
    return accept(tmp_path, "--launcher", "slurm", *args, timeout=timeout, env=slurm.env,
                  prefix=("salloc", f"-N{nodes}", "--no-kill", "--quiet", "sh", "-c", f'{first} && exec "$@"',
                          "sh"))


def smaller_sweep(tmp_path) -> str:
    """lab.yaml (its floors set for hosts sharing 2 cores beside another lab suite) with the
    intra-host all-reduce swept to 4 MiB, not 16: the same path, in less time."""
    p = tmp_path / "lab-4m.yaml"
    p.write_text(f"extends: {LAB}\ncriteria:\n"
                 f"  allreduce_busbw: {{min: 0.04, unit: GB/s, size: 4M, sweep: [1M, 4M], "
                 f"source: 'local.yaml floor (thresholds/local.yaml), judged at 4 MiB'}}\n")
    return str(p)


def test_acceptance_suite_passes_over_srun(slurm, tmp_path):
    for where in (tmp_path, tmp_path / "again"):  # a run the VM's disk stalled (stalled()): one more
        rc, res, out = in_allocation(slurm, where, "--inventory", inventory(slurm, tmp_path),
                                     "--profile", smaller_sweep(tmp_path))
        missed = [r for r in (res or {"results": []})["results"] if r["status"] not in ("PASS", "N.A.")]
        if not missed or not all(stalled(r) for r in missed):
            break
    assert rc == 0, out
    assert res["verdict"] == "PASS"
    launcher = res["meta"]["launcher"]
    assert launcher["launcher"] == "slurm" and launcher["job"].isdigit() and launcher["nodes"] == "lab[1-3]"
    # one step per probe and phase across the nodes, not one per host and command
    assert launcher["steps"] and all(s.startswith(launcher["job"] + ".") for s in launcher["steps"])
    # 46 at 568ed3b (the storage writes' claim/look/write/clean, the checkpoint and model-parallel
    # probes added); one per host and command would be three times that on 3 nodes
    assert len(launcher["steps"]) < 60, launcher["steps"]
    assert {r["launcher"] for r in res["results"]} == {"srun"}
    multi = by_key(res)[("multinode_allreduce", "all hosts")]
    assert multi["status"] == "PASS" and multi["details"]["launched"] == "srun: 3 nodes x 1 tasks in one step"
    # the all-to-all across nodes and its rail (issue 44) in the same srun step
    a2a = by_key(res)[("multinode_alltoall_busbw", "all hosts")]
    assert a2a["status"] == "PASS", a2a
    assert a2a["details"]["launched"] == "srun: 3 nodes x 1 tasks in one step", a2a
    # the same step's gloo connections, read by each node's rank: on the data interface
    assert by_key(res)[("multinode_transport", "all hosts")]["status"] == "PASS"
    html = (where / "report" / "report.html").read_text()
    assert f"Slurm job {launcher['job']}" in html


def test_node_down_errors_by_name_with_slurms_reason(slurm, tmp_path):
    try:  # DOWN once the allocation has it (an idle DOWN node would not be allocated)
        rc, res, out = in_allocation(slurm, tmp_path, "acceptance/test_versions.py", "--inventory",
                                     inventory(slurm, tmp_path), "--profile", LAB,
                                     first="scontrol update nodename=lab3 state=down "
                                           "reason=signoff-test-broken-psu")
    finally:
        slurm.run("scontrol", "update", "nodename=lab3", "state=resume")
    assert rc == 2, out  # ERROR-only: README, Exit codes
    r = by_key(res)
    for h in ("lab1", "lab2"):
        rec = r[("version_parity", h)]
        assert rec["status"] == "PASS", (rec.get("message"), out[-4000:])
    down = [v for (c, h), v in r.items() if h == "lab3"]
    assert down and all(v["status"] == "ERROR" for v in down)
    assert all("Slurm reports node lab3 DOWN" in v["message"] and "signoff-test-broken-psu" in v["message"]
               for v in down), down[0]["message"]
    assert "signoff-test-broken-psu" in json.dumps(res["slurm"])  # named before the run
    assert "Slurm reports node lab3 DOWN" in (tmp_path / "report" / "report.html").read_text()
    slurm.wait_idle(["lab3"])


def test_a_node_the_inventory_lacks_is_named_on_every_output(slurm, tmp_path):
    """lab3 is in the allocation but not in --inventory: not judged, and said so with why on the
    terminal, the cover, report.md, results.json and junit.xml (issue 32 item 11)."""
    from html import escape

    from signoff.report import md_text
    inv = _only(Path(inventory(slurm, tmp_path)), ["lab1", "lab2"])
    _, res, out = in_allocation(slurm, tmp_path, "acceptance/test_versions.py", "--inventory", str(inv),
                                "--profile", LAB, timeout=120)
    job, rd = res["meta"]["launcher"]["job"], tmp_path / "report"
    said = f"lab3: in Slurm job {job}'s allocation but not in --inventory {inv}"
    assert res["meta"]["hosts"] == ["lab1", "lab2"] and "lab3" not in {r["host"] for r in res["results"]}
    assert res["meta"]["excluded"] == {"lab3": said.removeprefix("lab3: ")}, res["meta"]
    assert f"not checked: 1 host, the verdict is of the others only:\n    {said}\n" in out, out
    assert escape(said) in (rd / "report.html").read_text()
    assert md_text(said) in (rd / "report.md").read_text()
    assert escape(said, quote=False) in (rd / "junit.xml").read_text()


def hung_python(tmp_path, marker: str, untracked: bool = False) -> str:
    """A host Python whose probes hang (a process named `marker`); `python -c` (the filter of
    each task's stdout) still works. untracked: the probe removes its pid file, so the host-side
    cleanup cannot find it (only ending its Slurm step does)."""
    p = tmp_path / "hungpython"
    p.write_text(f'#!/bin/bash\n[ "$1" = -c ] && exec {sys.executable} "$@"\n'
                 + ("rm -f .pid.*\n" if untracked else "") + f"exec -a {marker} sleep 600\n")
    p.chmod(0o755)
    return str(p)


def wait_for(what, seconds: float, why: str):
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.3)


def running(marker: str) -> str:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout


def test_node_dying_mid_probe_errors_it_with_slurms_word_others_pass(slurm, tmp_path):
    marker = f"signoff-slurm-dies-{os.getpid()}"
    inv = inventory(slurm, tmp_path, lab2={"python": hung_python(tmp_path, marker)})
    out = []
    run = threading.Thread(target=lambda: out.append(in_allocation(
        slurm, tmp_path, "acceptance/test_versions.py", "--inventory", inv, "--profile", LAB,
        "--probe-timeout", "300")))
    run.start()
    try:
        wait_for(lambda: running(marker), 120, "lab2's probe never started")
        slurm.kill_slurmd("lab2")  # slurmd, its step daemons and the probe: the node is gone
        run.join(240)
        assert out, "the run did not end after its node died"
        rc, res, text = out[0]
        r = by_key(res)
        assert rc == 2, text  # ERROR-only: README, Exit codes
        for h in ("lab1", "lab3"):  # the message and the terminal's tail: a rare ERROR here said why
            rec = r[("version_parity", h)]
            assert rec["status"] == "PASS", (rec.get("message"), text[-4000:])
        dead = r[("version_parity", "lab2")]
        assert dead["status"] == "ERROR" and "Slurm reports node lab2" in dead["message"], dead["message"]
        # Slurm's DOWN once it noticed, or srun's word when the node died as srun launched or
        # fed its task (test_a_node_lost_with_its_step_daemon_...)
        assert any(w in dead["message"] for w in ("Not responding", "DOWN", "srun could not launch",
                                                  "srun lost the step's task")), dead["message"]
    finally:
        run.join(240)
        slurm.start_slurmd("lab2")
        slurm.wait_idle(["lab2"])


LOST_STEPD = """import json, os, sys, threading
sys.path.insert(0, {root!r})
from signoff.slurm import Slurm
s, out = Slurm(os.environ["SLURM_JOB_ID"], ["lab1", "lab2", "lab3"], "lost"), {{}}
def one(node, cmd):
    try:
        r = s.run(node, cmd, 120, stdin=b"x" * (8 << 20))
        out[node] = [r.rc, r.stdout.split()]
    except Exception as exc:
        out[node] = str(exc)
th = [threading.Thread(target=one, args=(n, c)) for n, c in {cmds!r}.items()]
[t.start() for t in th]; [t.join() for t in th]
print(json.dumps(out))
s.close()
"""


def test_a_node_lost_with_its_step_daemon_is_named_and_the_others_run_again(slurm, tmp_path):
    """A node that dies while srun still has data for its task (unread stdin: the kernel resets
    the connection) makes srun abort the whole step, killing the healthy nodes' tasks too, and
    name the node only by its index (the rare all-ERROR of fresh clone 9331782 over srun)."""
    marker = f"signoff-slurm-lost-{os.getpid()}"
    cmds = {"lab1": "wc -c; echo ran", "lab3": "wc -c; echo ran",
            "lab2": f"bash -c 'exec -a {marker} sleep 600'"}  # never reads its stdin
    (tmp_path / "lost.py").write_text(LOST_STEPD.format(root=str(ROOT), cmds=cmds))
    p = subprocess.Popen(["salloc", "-N3", "--no-kill", "--quiet", sys.executable, str(tmp_path / "lost.py")],
                         env=slurm.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: running(f"^{marker}"), 120, "lab2's task never started")
        time.sleep(0.5)  # srun has sent lab2's step daemon more than it read
        slurm.kill_slurmd("lab2")
        stdout, stderr = p.communicate(timeout=120)
        out = json.loads(stdout.splitlines()[0])
        assert out["lab1"] == out["lab3"] == [0, ["8388608", "ran"]], (out, stderr)  # run once more, whole
        assert "srun lost the step's task there" in out["lab2"] and "node 1" in out["lab2"], out
    finally:
        p.kill()
        p.wait()
        slurm.start_slurmd("lab2")
        slurm.wait_idle(["lab2"])


def test_ctrl_c_scancels_every_step(slurm, tmp_path):
    marker = f"signoff-slurm-intr-{os.getpid()}"
    inv = inventory(slurm, tmp_path, lab2={"python": hung_python(tmp_path, marker, untracked=True)})
    rd = tmp_path / "report"
    # inside the allocation: the run, Ctrl-C once lab2's probe hangs, then what squeue lists
    script = (f"{sys.executable} -m pytest acceptance/ --launcher slurm --inventory {inv} --profile {LAB} "
              f"--report-dir {rd} -p no:cacheprovider --probe-timeout 300 >{tmp_path}/out 2>&1 & p=$!; "
              f"while ! pgrep -f '[{marker[0]}]{marker[1:]}' >/dev/null; do sleep 0.3; done; "  # not itself
              f"kill -INT $p; wait $p; echo steps-left:; squeue -h -s -j $SLURM_JOB_ID")
    started = time.monotonic()
    r = slurm.run("salloc", "-N3", "--no-kill", "--quiet", "sh", "-c", script, timeout=240, cwd=ROOT)
    assert "steps-left:" in r.stdout, (r.stdout, r.stderr, (tmp_path / "out").read_text())
    assert r.stdout.split("steps-left:")[1].strip() == "", r.stdout  # squeue -s: none of ours
    res = load_results(rd / "results.json")
    assert res["verdict"] == "INCOMPLETE" and res["meta"]["interrupted"]
    assert res["meta"]["launcher"]["steps"], res["meta"]["launcher"]
    assert not running(marker), "probe still running on lab2 after Ctrl-C"
    assert not [f["workdir"] for f in res["hosts"].values() if os.path.exists(f.get("workdir", "/-"))]
    assert time.monotonic() - started < 180


BCAST = r'''
import os
from signoff import slurm
nodes = ["lab1", "lab2", "lab3"]
s = slurm.Slurm(os.environ["SLURM_JOB_ID"], nodes, "bcast-test")
real = [slurm._Entry(n, f"echo ran on $SLURMD_NODENAME for {n}", 60) for n in nodes]
# one phase of 10,000 synthetic nodes, each its own command (its temp dir): the step's script
fake = [slurm._Entry(f"node{i:05d}", f"cd /tmp/signoff.{i:08x} && exec python3 probe.py --out "
                     f"/tmp/signoff.{i:08x}/r.json", 60) for i in range(10000)]
script = s.script(real + fake, False)
with s.command(script) as (opts, command):
    print("SIZE", len(script.encode()), "OPTS", *opts, "LONGEST", max(map(len, command)), flush=True)
    s.launch([*s.srun_args(nodes, 60), *opts, *command], {e.node: e for e in real}, 60)
for e in real:
    print("RESULT", e.node, e.result.rc, e.result.stdout.strip())
print("LEFT", *sorted(p for p in os.listdir("/tmp") if p.startswith("slurm_bcast_")))
'''


def test_a_step_script_of_10000_nodes_travels_as_a_file_through_real_srun(slurm):
    """Linux caps one argument at 128 KiB: a phase of 10,000 nodes' commands (~880 KB) as
    `sh -c SCRIPT` is "Argument list too long". It travels as a file (srun --bcast), each task
    finds its node's command in it, and no copy is left on a node."""
    r = subprocess.run(["salloc", "-N3", "--no-kill", "--quiet", sys.executable, "-c", BCAST],
                       cwd=ROOT, env=slurm.env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln}
    size, opt, longest = int(lines["SIZE"][0]), lines["SIZE"][2], int(lines["SIZE"][4])
    assert size > 131072 and opt == "--bcast=/tmp/" and longest < 4096, r.stdout
    got = [ln.split(maxsplit=3)[1:] for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert sorted(got) == [[n, "0", f"ran on {n} for {n}"] for n in ("lab1", "lab2", "lab3")], r.stdout
    assert lines["LEFT"] == [], r.stdout  # the lab's nodes share this /tmp: each removed its copy


BCAST_TASKS = r'''
import os, sys
from signoff import slurm
nodes, per_node, out = ["lab1", "lab2", "lab3"], int(sys.argv[1]), sys.argv[2]
s = slurm.Slurm(os.environ["SLURM_JOB_ID"], nodes, "bcast-tasks")
# each node's own command past one argument's limit together (~40 KB each): the step's script
# travels as a file, one copy per node for all of its tasks; every task leaves its mark
commands = {n: (f"touch {out}/$SLURMD_NODENAME.$SLURM_LOCALID; : {n * 10000}", sys.executable)
            for n in nodes}
outcome, first, killed = s.collective(commands, per_node, 60)
for n in nodes:
    print("RESULT", n, outcome[n].rc, outcome[n].stderr.replace("\n", " | ")[:300])
print("RAN", *sorted(os.listdir(out)))
print("LEFT", *sorted(p for p in os.listdir("/tmp") if p.startswith("slurm_bcast_")))
'''


def test_a_step_file_runs_on_every_task_of_a_node_and_is_removed_after(slurm, tmp_path):
    """A step of several tasks per node (the multi-node all-reduce: one rank per GPU) whose
    script travels as a file: srun --bcast copies it once per node, so a task that removed it
    as it started left the node's other ranks "No such file" (issue 32 item 10). Every task
    runs it; the last to start removes it and its marks."""
    per_node = 2  # a lab node has this machine's 2 CPUs: one task each
    out = tmp_path / "ran"
    out.mkdir()
    r = subprocess.run(["salloc", "-N3", f"--ntasks-per-node={per_node}", "--no-kill", "--quiet",
                        sys.executable, "-c", BCAST_TASKS, str(per_node), str(out)],
                       cwd=ROOT, env=slurm.env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    got = [ln.split()[1:3] for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert sorted(got) == [[n, "0"] for n in ("lab1", "lab2", "lab3")], r.stdout
    lines = {ln.split()[0]: ln.split()[1:] for ln in r.stdout.splitlines() if ln}
    assert lines["RAN"] == [f"{n}.{i}" for n in ("lab1", "lab2", "lab3") for i in range(per_node)], r.stdout
    assert lines["LEFT"] == [], r.stdout  # no copy, no mark of a task left on a node


KILLED_EARLY = """import json, os, sys
sys.path.insert(0, {root!r})
from signoff.fleet import ProbeError, parse_probe_output
from signoff.slurm import Slurm
s, out = Slurm(os.environ["SLURM_JOB_ID"], ["lab1", "lab2", "lab3"], "killed"), {{}}
for what, cmd, timeout in (("oom", "sleep 1; kill -9 $$", 120), ("overrun", "trap '' TERM; sleep 30", 1)):
    try:
        parse_probe_output("lab1", "train", s.run("lab1", cmd, timeout))
    except ProbeError as exc:
        out[what] = str(exc)
# one rank SIGKILLed 1 s in: srun ends the step (--kill-on-bad-exit=1), killing the others' ranks
got, first, killed = s.collective({{"lab1": ("sleep 1; kill -9 $$", sys.executable),
                                    "lab2": ("sleep 300", sys.executable),
                                    "lab3": ("sleep 300", sys.executable)}}, 1, 120)
out["ranks"] = {{n: [r.rc, r.elapsed, r.timed_out, r.signal] for n, r in got.items()}}
out["first"] = first
print(json.dumps(out))
s.close()
"""


def test_a_sigkill_well_before_the_timeout_reads_as_one_not_as_a_timeout_under_srun(slurm, tmp_path):
    """A task SIGKILLed 1 s in (the OOM killer) exits 137 as its timeout's KILL does: its elapsed
    tells them apart under Slurm as over SSH (issue 42 item 6: every such kill read "overran its
    120 s timeout"), the collective's ranks too, those Slurm killed with the step included."""
    (tmp_path / "killed.py").write_text(KILLED_EARLY.format(root=str(ROOT)))
    r = slurm.run("salloc", "-N3", "--no-kill", "--quiet", sys.executable, str(tmp_path / "killed.py"),
                  timeout=180)
    out = json.loads(r.stdout.splitlines()[-1])
    oom = out["oom"]
    assert oom.startswith("lab1: probe train was ended by SIGKILL after ") and "overran" not in oom, out
    assert float(oom.split(" after ")[1].split()[0]) < 30 and "of its 120 s timeout" in oom, oom
    assert "not its timeout: the kernel's OOM killer" in oom, oom
    assert out["overrun"].startswith("lab1: probe train overran its 1 s timeout"), out  # still a timeout
    ranks = out["ranks"]
    assert out["first"] == "lab1" and ranks["lab1"][0] == 137 and ranks["lab1"][2:] == [False, "SIGKILL"], out
    for n in ("lab2", "lab3"):  # ended with the step (Slurm's TERM, KILL): their time, not a timeout's
        rc, elapsed, timed_out, _ = ranks[n]
        assert rc in (137, 143) and elapsed is not None and elapsed < 60 and not timed_out, out


def test_a_killed_controllers_lock_and_probes_go_and_clean_works_in_the_allocation(slurm, tmp_path):
    """kill -9 of a run's controller inside an allocation: its steps' tasks see their stdin's EOF
    and end (the keeper removes each node's run lock, lab2's hung probe dies), so the next run in
    the same allocation takes every host, and `signoff clean` runs there as srun steps, removing
    the killed run's temp dirs (issue 42 item 7: the keeper's step kept every lock until the
    allocation ended, the next run ERRORed every host, and clean refused under Slurm)."""
    from test_lab_acceptance import _lock_dir
    marker = f"signoff-slurm-kill9-{os.getpid()}"
    hung = inventory(slurm, tmp_path, lab2={"python": hung_python(tmp_path, marker)})
    (tmp_path / "ok").mkdir()
    inv = inventory(slurm, tmp_path / "ok")  # the next run's and clean's: every host's own Python
    tmp = tmp_path / "tmp"  # the runs' temp dirs (SIGNOFF_TMPDIR): clean sees no other test's
    tmp.mkdir()
    locks = " ".join(str(_lock_dir(slurm.lab, h.name)) for h in slurm.lab.hosts)
    run = (f"{sys.executable} -m pytest acceptance/test_versions.py --partial --launcher slurm "
           f"--profile {LAB} -p no:cacheprovider")
    script = (f"export SIGNOFF_TMPDIR={tmp}; {run} --inventory {hung} --report-dir {tmp_path}/killed "
              f"--probe-timeout 300 >{tmp_path}/killed.out 2>&1 & p=$!; "
              f"while ! pgrep -f '[{marker[0]}]{marker[1:]}' >/dev/null; do sleep 0.3; done; "
              f"for l in {locks}; do [ -d $l ] || echo no-lock $l; done; kill -KILL $p; wait $p; "
              # the keepers end within seconds (a bound, so old code reaches the asserts): each lock
              # removed by its keeper's trap, or, where Slurm KILLed the keeper as the step ended
              # (srun gone), stale (its keeper dead), which the next run takes over
              f"live() {{ for l in {locks}; do set -- $(cat $l/pid 2>/dev/null); "
              f"[ -n \"${{1:-}}\" ] && [ -d /proc/$1 ] && echo $l; done; }}; "
              f"i=0; while [ $i -lt 60 ] && [ -n \"$(live)\" ]; do sleep 0.5; i=$((i+1)); done; "
              f"echo locks-held: $(live); echo dirs: {tmp}/signoff.*; "
              f"echo probe-left: $(pgrep -f '[{marker[0]}]{marker[1:]}'); "
              f"{sys.executable} -m signoff clean --launcher slurm --inventory {inv} "
              f">{tmp_path}/clean.out 2>&1; "
              f"echo clean-rc: $?; {run} --inventory {inv} --report-dir {tmp_path}/next "
              f">{tmp_path}/next.out 2>&1; echo next-rc: $?; echo dirs-after: $(ls -A {tmp})")
    r = slurm.run("salloc", "-N3", "--no-kill", "--quiet", "sh", "-c", script, timeout=300, cwd=ROOT)
    said = {ln.split(":")[0]: ln.split(":", 1)[1].split() for ln in r.stdout.splitlines() if ":" in ln}
    why = (r.stdout, r.stderr, *((tmp_path / f).read_text() for f in ("clean.out", "next.out")
                                 if (tmp_path / f).exists()))
    assert "no-lock" not in r.stdout and said["locks-held"] == [] and said["probe-left"] == [], why
    dirs = said["dirs"]
    assert len(dirs) == 3 and "*" not in dirs[0], why  # the killed run's, one per host
    clean = (tmp_path / "clean.out").read_text()
    assert said["clean-rc"] == ["0"] and all(f"removed {d}" in clean for d in dirs), why
    res = load_results(tmp_path / "next" / "results.json")
    assert said["next-rc"] == ["0"] and res["verdict"] == "PASS", why
    assert said["dirs-after"] == [], why


def test_stand_in_dcgmi_under_srun_gives_each_verdict_and_kills_a_hang(slurm, tmp_path):
    """dcgm_diag launched by srun (issue 44 item 1: "over SSH and srun"), with the STAND-IN dcgmi and
    fake NVML of tests/test_dcgm_lab.py (no GPU, no DCGM here): lab1's all Pass PASSes, lab2's Fail
    with ISOLATE FAILs naming the GPU, its serial and the action, lab3's hang is killed at the
    profile's timeout and named by its own row; each host's raw JSON is kept in the report dir."""
    import dcgm_fake
    from test_dcgm_lab import FAKE_PYNVML, STAND_IN, TIMEOUT_S, serials
    fake = tmp_path / "fakenvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_PYNVML)
    case = {"lab1": "pass", "lab2": "fail_isolate", "lab3": "hang"}
    env = {h: {"env": {"PYTHONPATH": str(fake), "PATH": f"{STAND_IN}{os.pathsep}{os.environ['PATH']}",
                       "SIGNOFF_FAKE_SERIALS": json.dumps(serials(h)),
                       "SIGNOFF_FAKE_DCGMI": json.dumps(dcgm_fake.cases(serials(h))[c])}}
           for h, c in case.items()}
    prof = tmp_path / "dcgm.yaml"  # local makes dcgm_diag optional; a site that requires it
    prof.write_text(f"extends: local\ncriteria:\n  dcgm_diag: {{optional: false, timeout: {TIMEOUT_S}}}\n")
    rc, res, out = in_allocation(slurm, tmp_path, "acceptance/test_dcgm.py", "--inventory",
                                 inventory(slurm, tmp_path, **env), "--profile", str(prof))
    assert res is not None, out[-3000:]
    r = {h: v for (c, h), v in by_key(res).items() if c == "dcgm_diag"}
    assert {h: v["status"] for h, v in r.items()} == {"lab1": "PASS", "lab2": "FAIL", "lab3": "FAIL"}, \
        out[-3000:]
    assert rc == 1 and {v["launcher"] for v in r.values()} == {"srun"}, out[-3000:]
    s = serials("lab2")
    assert (f"GPU 1 (serial {s[1]}): Hardware test memory Fail: error id 4, category HARDWARE_MEMORY, "
            f"severity ISOLATE") in r["lab2"]["message"], r["lab2"]["message"]
    assert r["lab2"]["note"] == f"DCGM: isolate GPU 1 (serial {s[1]}); DCGM: reset GPU 2 (serial {s[2]})"
    assert f"dcgmi diag -r 3 did not finish in {TIMEOUT_S} s (killed)" in r["lab3"]["message"], r["lab3"]
    rd = tmp_path / "report"
    for h in ("lab1", "lab2"):
        raw = r[h]["details"]["raw"]
        assert (rd / raw).read_text() == dcgm_fake.cases(serials(h))[case[h]]["diag"]["stdout"], h
