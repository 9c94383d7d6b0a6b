"""The Slurm launcher's choices made before any node is touched: the allocation's hosts, what
--hosts/--inventory may name, the GPUs per node of a job. The launcher itself runs against a
real Slurm in tests/test_slurm_lab.py."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time

import pytest
from test_cli import ROOT

from signoff import InputError, slurm

JOB = {"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "gpu[01-03]"}


def configure(*args, env=JOB):
    """`pytest acceptance/ --collect-only`: options and hosts judged, no host contacted (its
    report directory in a temporary one, not under the checkout's reports/)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    with tempfile.TemporaryDirectory() as rd:
        return subprocess.run([sys.executable, "-m", "pytest", "acceptance/", "-p", "no:cacheprovider",
                               "--collect-only", "-q", "--report-dir", rd, *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120, env={**clean, **env})


def test_allocation_hosts_and_auto_launcher():
    assert slurm.allocation(JOB) == ("77", ["gpu01", "gpu02", "gpu03"])
    with pytest.raises(InputError, match="not inside a Slurm allocation"):
        slurm.allocation({})
    p = configure()  # auto inside an allocation: its nodes are the hosts
    assert "test_version_parity[gpu02]" in p.stdout, p.stdout + p.stderr
    p = configure("--hosts", "gpu03")  # --hosts given: auto means SSH, to exactly those
    assert "test_version_parity[gpu03]" in p.stdout and "gpu01" not in p.stdout


def test_hosts_narrow_the_allocation_and_outsiders_are_refused():
    p = configure("--launcher", "slurm", "--hosts", "gpu[01,03]")
    assert "test_version_parity[gpu03]" in p.stdout and "[gpu02]" not in p.stdout, p.stdout
    p = configure("--launcher", "slurm", "--hosts", "gpu[03-04]")
    assert p.returncode != 0 and "gpu04 not in Slurm job 77's nodes (gpu[01-03])" in p.stderr, p.stderr
    p = configure("--launcher", "slurm", env={})
    assert p.returncode != 0 and "not inside a Slurm allocation" in p.stderr


def test_gpus_per_node_from_the_job():
    assert slurm.gpus_per_node("JobId=5 NumNodes=2 TresPerNode=gres:gpu:8 AllocTRES=cpu=2") == 8
    assert slurm.gpus_per_node("JobId=5 NumNodes=2 TresPerNode=gres/gpu:h200:4 Foo=1") == 4
    assert slurm.gpus_per_node("JobId=5 NumNodes=2 AllocTRES=cpu=64,node=2,gres/gpu=16") == 8
    assert slurm.gpus_per_node("JobId=5 NumNodes=3 TRES=cpu=6,node=3,billing=6") is None


@contextlib.contextmanager
def held():
    """A task's stdin as srun gives it: a pipe its controller holds open (EOF: the controller is
    gone, and the task's command is ended: Slurm.script())."""
    r, w = os.pipe()
    try:
        yield r
    finally:
        os.close(r)
        os.close(w)


def test_one_step_script_sends_the_common_command_once():
    e = [slurm._Entry(f"n{i}", f"cd /tmp/signoff.{i}abc && python3 sysinfo.py", 30) for i in range(3)]
    script = slurm.Slurm.script(None, e, False)
    assert script.count("sysinfo.py") == 1 and "n2) T=30; P=python3; M=2;;" in script
    with held() as stdin:
        out = subprocess.run(["sh", "-c", script], env={**os.environ, "SLURMD_NODENAME": "n1"},
                             capture_output=True, text=True, stdin=stdin)
    assert "@@signoff-slurm rc 2" in out.stdout  # `cd /tmp/signoff.1abc` failed there: sh exit 2
    assert "signoff.1abc" in out.stderr


def test_a_failed_task_launch_names_its_node_for_the_step_to_go_on_without_it():
    """srun aborts a whole step when one node's slurmd dies during the launch, killing the
    healthy nodes' tasks too (seen in the lab: tests/test_slurm_lab.py's slurmd killed
    0.1-0.3 s into a step): the launcher reads srun's words to run the others once more."""
    err = ["srun: error: Task launch for StepId=1.0 failed on node lab2: Communication connection failure",
           "srun: error: Application launch failed: Communication connection failure",
           "srun: Job step aborted: Waiting up to 4 seconds for job step to finish.",
           "0: slurmstepd-lab1: error: *** STEP 1.0 ON lab1 CANCELLED AT 2026-12-01T23:37:11 ***"]
    assert slurm.step_aborts(err) == {
        "lab2": "srun could not launch the step's task there (Communication connection failure)"}
    assert slurm.step_aborts(["srun: error: lab1: task 0: Killed"]) == {}


def test_a_lost_step_daemon_names_its_node_by_the_steps_order():
    """srun names the node whose step daemon it lost by its index in the step (seen in the lab:
    lab2's node killed while its task held unread stdin); the index is read in the step's order."""
    err = ["srun: error: _server_read: fd 11 error reading header: Connection reset by peer",
           "srun: error: step_launch_notify_io_failure: aborting, io error with slurmstepd on node 1",
           "srun: Job step aborted: Waiting up to 4 seconds for job step to finish.",
           "srun: error: lab1: task 0: Killed"]
    lost = slurm.step_aborts(err, ["lab1", "lab2", "lab3"])
    assert list(lost) == ["lab2"] and "io error with slurmstepd on node 1" in lost["lab2"], lost
    assert slurm.step_aborts(err, ["lab1"]) == {}  # an index past the step names no one


def test_a_script_past_one_arguments_limit_travels_as_a_file_removed_after_the_step(tmp_path):
    """10,000 nodes' commands: `sh -c` would be refused by the kernel (one argument <= 128 KiB);
    the file runs as the same script (it removes its node's copy first) and is gone after."""
    entries = [slurm._Entry(f"node{i:05d}", f"cd /tmp && echo in /tmp/signoff.{i:08x} of node{i:05d}", 60)
               for i in range(10000)]
    script = slurm.Slurm.script(None, entries, False)
    assert len(script.encode()) > 131072
    with pytest.raises(OSError, match="Argument list too long"):
        subprocess.run(["sh", "-c", script])
    with slurm.Slurm.command(script) as (opts, command):
        assert opts == ["--bcast=/tmp/"] and len(command) == 1
        copy = tmp_path / "slurm_bcast_1.0_node00042"  # what srun --bcast puts on a node
        copy.write_bytes(open(command[0], "rb").read())
        copy.chmod(0o700)
        with held() as stdin:
            r = subprocess.run([str(copy)], env={**os.environ, "SLURMD_NODENAME": "node00042"},
                               capture_output=True, text=True, stdin=stdin)
        assert "in /tmp/signoff.0000002a of node00042" in r.stdout and r.returncode == 0, r.stderr
        assert not copy.exists()  # the node's copy removed itself
    assert not os.path.exists(command[0])
    with slurm.Slurm.command("echo small") as (opts, command):
        assert (opts, command) == ([], ["sh", "-c", "echo small"])


def test_a_step_file_stays_until_every_task_of_its_node_has_started(tmp_path):
    """srun --bcast copies the file once per node for all of its tasks: the first task must
    not remove it (the others could not start it); the last of `per_node` to start does."""
    entries = [slurm._Entry(f"node{i:05d}", f"echo task $SLURM_LOCALID of node{i:05d}", 60)
               for i in range(10000)]
    with slurm.Slurm.command(slurm.Slurm.script(None, entries, False), per_node=3) as (opts, command):
        copy = tmp_path / "slurm_bcast_1.0_node00007"
        copy.write_bytes(open(command[0], "rb").read())
        copy.chmod(0o700)
        for local in (2, 0, 1):  # in any order
            assert copy.exists(), local
            with held() as stdin:
                r = subprocess.run([str(copy)], env={**os.environ, "SLURMD_NODENAME": "node00007",
                                                     "SLURM_LOCALID": str(local)},
                                   capture_output=True, text=True, stdin=stdin)
            assert f"task {local} of node00007" in r.stdout and r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []  # the copy and every task's mark removed by the last


def test_a_steps_command_ends_when_its_controller_is_gone():
    """srun hands its stdin to every task (--input=all), and the controller holds it open for
    the step's life: its EOF (the controller SIGKILLed) ends the task's command, as
    transport.guarded() does over SSH, so a killed run's keeper leaves no run lock behind."""
    script = slurm.Slurm.script(None, [slurm._Entry("n1", "echo up; exec sleep 300", 600)], False)
    r, w = os.pipe()
    p = subprocess.Popen(["sh", "-c", script], env={**os.environ, "SLURMD_NODENAME": "n1"}, stdin=r,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    os.close(r)
    with contextlib.ExitStack() as stack:
        stack.callback(p.wait)
        stack.callback(p.kill)
        assert p.stdout.readline().startswith("@@signoff-slurm start n1")
        assert p.stdout.readline() == "=up\n"  # it runs while the stdin is open
        time.sleep(0.5)
        assert p.poll() is None
        t0 = time.monotonic()
        os.close(w)  # the controller is gone (an assert before it: the pipe goes with the test)
        assert p.wait(10) == 143 and time.monotonic() - t0 < 5  # TERMed, not its 600 s
        assert p.stdout.read() == "@@signoff-slurm rc 143\n"
