"""summarise(): who caused a failed multi-node all-reduce; ranks signoff stopped are not blamed."""

from signoff.network.judge import summarise
from signoff.transport import CommandResult, HostUnreachable


def rank(rc, stderr="", stdout=""):
    return CommandResult("allreduce.py", rc, stdout, stderr, 130)


def test_ranks_killed_before_they_started_are_not_blamed_for_a_dead_peer():
    # lab2 went away mid-run; signoff killed lab1's and lab3's ranks before their start event
    outcome = {"lab1": rank(-1), "lab2": HostUnreachable("lab2", "connection refused by 10.0.0.3:22"),
               "lab3": rank(-1)}
    res = summarise(outcome, ["lab1", "lab2", "lab3"], first="lab2", killed={"lab1", "lab3"})
    assert res["culprits"] == ["lab2"]
    assert res["states"]["lab1"] == "the probe never started; stopped by signoff after lab2 failed"


def test_a_hang_blames_the_stopped_host_that_got_least_far():
    # lab2 hung before starting; lab1's rendezvous timed out; lab3 had started and was stopped
    timeout = '{"error": "DistStoreError: Timed out after 10 seconds"}'
    outcome = {"lab1": rank(1, "signoff-event started node 0\n", timeout),
               "lab2": rank(-1), "lab3": rank(-1, "signoff-event started node 2\n")}
    res = summarise(outcome, ["lab1", "lab2", "lab3"], first="lab1", killed={"lab2", "lab3"})
    assert res["culprits"] == ["lab2"]
    assert res["states"]["lab1"] == "exit 1 before joining: DistStoreError: Timed out after 10 seconds"


def test_a_rank_told_its_store_closed_is_not_blamed_for_a_hang():
    """lab2 hung before starting; the store's node (lab1) ended its timed-out rank, and lab3's
    rank, its connection closed, reached the controller first (a fresh clone under load)."""
    gone = ('{"error": "ProcessRaisedException: torch.distributed.DistNetworkError: Failed to recv, '
            'got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?"}')
    outcome = {"lab1": rank(-1, "signoff-event started node 0\n"), "lab2": rank(-1),
               "lab3": rank(1, "signoff-event started node 2\n", gone)}
    res = summarise(outcome, ["lab1", "lab2", "lab3"], first="lab3", killed={"lab1", "lab2"})
    assert res["culprits"] == ["lab2"], res


def test_two_hosts_are_measured_both_ways_and_bisected_once():
    """One pair of two hosts would never measure the second host's transmit path."""
    from signoff.network.judge import ring_pairs, rounds
    assert ring_pairs(["a", "b"]) == [("a", "b"), ("b", "a")]
    assert rounds(ring_pairs(["a", "b"])) == [[("a", "b")], [("b", "a")]]  # never both at once
    assert ring_pairs(["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("c", "a")]


def test_every_ranks_watchdog_firing_blames_no_one_host():
    """All ranks joined and timed out on their own (NCCL's watchdog): the first to say so is
    no more the cause than the others."""
    dog = '{"error": "Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE)"}'
    outcome = {h: rank(1, "signoff-event started node 0\nsignoff-event joined\n", dog)
               for h in ("lab1", "lab2", "lab3")}
    res = summarise(outcome, ["lab1", "lab2", "lab3"], first="lab2")
    assert res["culprits"] == [], res
    assert res["states"]["lab1"].startswith("exit 1 after joining: Watchdog caught")
