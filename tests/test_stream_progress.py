"""A collective's progress and its timeout (issue 45, item 1): the sizes its ranks say they
finished, streamed as they arrive (signoff/stream.py, a real `sh` command), said on the progress
line with the time against --collective-timeout; and a sweep that every rank was still running
when the timeout came blames no host. The lab run of it: tests/test_preflight_lab.py."""

from __future__ import annotations

from signoff import stream
from signoff.network.judge import summarise
from signoff.network.run import REACHED, Sweep
from signoff.transport import CommandResult

ARGS = ["--min-bytes", "1M", "--max-bytes", "1G", "--op", "allreduce"]
NAMES = ["lab1", "lab2", "lab3", "lab4"]


def ranks_at_timeout(reached: int) -> dict:
    """What every host's probe left when the controller's timeout stopped it mid-sweep."""
    out = "".join(f"signoff-event reached allreduce {1 << k}\n" for k in range(20, reached + 1))
    return {n: CommandResult("allreduce.py", 124, out, f"signoff-event started node {i}\n"
                             f"signoff-event joined rank {i}\n", 630, 630.2) for i, n in enumerate(NAMES)}


def test_the_probes_progress_lines_stream_as_they_come_and_name_the_size_reached():
    seen = []
    cmd = "for s in 1048576 2097152; do echo signoff-event reached allreduce $s; done; echo '{\"rows\": []}'"
    rc, out, _ = stream.run_local(cmd, 30, lambda line: seen.append(REACHED.match(line)))
    assert rc == 0 and out.endswith('{"rows": []}\n')
    assert [(m[1], int(m[2])) for m in seen if m] == [("allreduce", 1 << 20), ("allreduce", 2 << 20)]
    lines = []
    sweep = Sweep("allreduce", ARGS, NAMES, 600, lambda line, final: lines.append((line, final)))
    sweep.say({"lab1": ("allreduce", 256 << 20)}, final=False)
    sweep.say({"lab1": ("allreduce", 256 << 20)}, final=False)  # nothing new: not said again yet
    sweep.say({"lab1": ("alltoall", 4 << 20)}, final=True)
    assert [ln for ln, _ in lines] == [
        "all-reduce over lab[1-4]: 1M-1G sweep, reached 256M, 0 s of --collective-timeout 600 s",
        "all-reduce over lab[1-4]: 1M-1G sweep, reached 4M of the alltoall after it, 0 s of "
        "--collective-timeout 600 s"]
    assert [f for _, f in lines] == [False, True]


def test_every_rank_stopped_by_the_timeout_mid_sweep_blames_no_host_and_says_how_far_it_got():
    outcome = ranks_at_timeout(28)  # 256M finished
    sweep = Sweep("allreduce", ARGS, NAMES, 600, None)
    assert sweep.overran(outcome, "lab1", set())
    # what the hosts' results alone say: every host a cause (the issue's "caused by lab1, lab2, ...")
    assert summarise(outcome, NAMES, "lab1", set())["culprits"] == NAMES
    reached = {n: ("allreduce", 256 << 20) for n in NAMES}
    assert sweep.overrun(reached) == ("did not finish the 1M-1G sweep within --collective-timeout 600 s, "
                                      "reached 256M: raise it or shorten multinode_allreduce_busbw.sweep")
    # one host that never joined (a hang before the rendezvous) is no overrun: it is named
    outcome["lab3"] = CommandResult("allreduce.py", 124, "", "", 630, 630.2)
    assert not sweep.overran(outcome, "lab1", set())
    # nor is a rank that died of its own before the timeout
    dead = ranks_at_timeout(22)
    dead["lab2"] = CommandResult("allreduce.py", 137, "", "signoff-event joined rank 1\n", 630, 4.0)
    assert not sweep.overran(dead, "lab2", {"lab1", "lab3", "lab4"})
