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
