"""signoff.causes: hosts folded by cause, the one implementation behind the terminal, the cover,
report.md, report.html's tables and the no-host-answered lines."""

from __future__ import annotations

from signoff import causes


def test_names_and_addresses_fold_back_into_the_cause_that_names_them():
    why = {f"nosuch{i:03d}": f"nosuch{i:03d}: unreachable: DNS: cannot resolve nosuch{i:03d}"
           for i in (1, 2, 3)}
    why |= {f"shut{i}": f"shut{i}: unreachable: connection refused by 10.0.0.{i}:22" for i in (1, 2)}
    addresses = {"shut1": "10.0.0.1", "shut2": "10.0.0.2"}
    assert causes.cause_lines(why, addresses) == [
        "unreachable: DNS: cannot resolve nosuch[001-003]",
        "shut[1-2]: unreachable: connection refused by 10.0.0.[1-2]:22"]


def test_a_cause_whose_figures_differ_by_host_is_one_line_as_on_its_first_host():
    why = {f"lab{i}": f"lab{i}: in use by run {i}00 for {i}.5 s" for i in (1, 2, 3)}
    assert causes.cause_lines(why) == ["lab[1-3]: in use by run 100 for 1.5 s (as on lab1; each host's "
                                       "own in results.json)"]


def test_distinct_causes_are_never_folded_into_one():
    """Issue 32 item 9: only messages the same once names and figures are stood in fold."""
    why = {"n1": "n1: killed by the OOM killer (rss 501 GB)",
           "n2": "n2: killed by the OOM killer (rss 502 GB)", "n3": "n3: GPU 3 uncorrectable ECC error"}
    folded = causes.fold(list(why.items()))
    assert [(c.hosts, c.alike) for c in folded] == [(["n1", "n2"], False), (["n3"], True)]
    assert causes.causes(why) == ("n[1-2]: killed by the OOM killer (rss 501 GB) (as on n1; each host's own "
                                  "in results.json); n3: GPU 3 uncorrectable ECC error")


def test_a_host_name_inside_another_is_not_stood_in():
    assert causes.normalised("node1: node10 is slower than node1", "node1") == "node10 is slower than <host>"
    assert [c.hosts for c in causes.fold([("node1", "node1: peer node10 down"),
                                          ("node10", "node10: peer node1 down")])] == [["node1"], ["node10"]]


def test_a_check_across_hosts_names_the_hosts_its_own_lines_open_with():
    """Issue 51 item 12: the hosts a cluster-wide FAIL is about, from the lines its judge wrote
    (each opens with a host of the run, or a folded set of them); a name further in is a host's
    text or a peer, never read; a name not of the run is no one's."""
    lines = ["lab2: NET/Socket between nodes", "tray[3-4]: in another partition (clique)",
             "cluster c1 clique 0 holds 64 GPUs of the run (8 trays: tray[1-8])", "lab10: not of the run",
             "nosuch[1-2]: neither", "lab1: peer said 'x; lab3: y'", "tray3 GPU 2: in no NVLink domain",
             "lab3 and more: no", "a: no one's"]
    assert causes.named(lines, ["lab1", "lab2", "lab3", "tray3", "tray4"]) == {
        "lab2": [lines[0]], "tray3": [lines[1], lines[6]], "tray4": [lines[1]], "lab1": [lines[5]]}


def test_a_run_lock_path_is_no_cause_of_its_own():
    """Each host's run lock is named by its boot and network namespace: one cause on every host."""
    why = {f"lab{i}": f"lab{i}: in use by another signoff run: run r1 (lock /run/signoff/lock.0b6c-{i}a."
           f"402653{i}; --lock-wait waits for it)" for i in (1, 2)}
    assert len(causes.fold(list(why.items()))) == 1
