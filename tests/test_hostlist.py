"""signoff.hostlist: Slurm-style hostlists (ClusterShell NodeSet), their cap, names, folding."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from signoff import InputError
from signoff.hostlist import MAX_HOSTS, expand, fold


def test_ranges_and_lists_keep_padding_and_order():
    names = expand("node[01-16],gpu[1,3-5]")
    assert names[:3] == ["node01", "node02", "node03"]
    assert names[15] == "node16"
    assert names[16:] == ["gpu1", "gpu3", "gpu4", "gpu5"]
    assert len(names) == 20


def test_padding_follows_the_low_bound():
    assert expand("n[008-011]") == ["n008", "n009", "n010", "n011"]
    assert expand("n[8-11]") == ["n8", "n9", "n10", "n11"]


def test_duplicates_across_parts_are_dropped_first_wins():
    assert expand("b1,a[1-2],b1,a2") == ["b1", "a1", "a2"]


def test_duplicates_inside_one_bracket_are_dropped():
    assert expand("n[1-3,2]") == ["n1", "n2", "n3"]


def test_multiple_bracket_groups_expand_as_a_product():
    assert expand("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand("rack[1-2]-gpu[01,03]") == [
        "rack1-gpu01", "rack1-gpu03", "rack2-gpu01", "rack2-gpu03"]


def test_plain_names_pass_through():
    assert expand("localhost") == ["localhost"]
    assert expand(" a , b.example.com ,") == ["a", "b.example.com"]


@pytest.mark.parametrize("text, why", [
    ("node[1-3", "unbalanced '['"),
    ("node1-3]", "unbalanced ']'"),
    ("node[5-2]", "runs backwards"),
    ("node[a-b]", "bad range"),
    ("node[1-]", "bad range"),
    ("node[]", "bad range"),
    (" , ", "names no host"),
    ("n[1-2-3]", "bad range '1-2-3'"),
    ("n[01-100]", "padding length mismatch"),
])
def test_errors_name_the_hostlist(text, why):
    with pytest.raises(InputError) as exc:
        expand(text)
    assert why in str(exc.value)
    assert repr(text) in str(exc.value)


@pytest.mark.parametrize("text", ["node[1-100000000]", "a,node[1-100000000]", "r[1-1000]n[1-1000]"])
def test_a_huge_range_is_refused_before_it_grows(text):
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(InputError) as exc:
            expand(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 1 and peak < 1 << 20  # refused from the text, nothing grown
    assert repr(text) in str(exc.value) and f"cap of {MAX_HOSTS}" in str(exc.value)
    part = text.split(",")[-1]
    assert repr(part) in str(exc.value)  # names the range


def test_the_cap_counts_hosts_already_in_the_run():
    assert len(expand(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS
    with pytest.raises(InputError, match="grows the run to 100001 hosts"):
        expand("x1", already=MAX_HOSTS)


@pytest.mark.parametrize("text, bad", [
    ("/../../../../tmp/X", "'/'"),
    ("n[1-2]/y", "'/'"),
    ("a b", "'a b' is not a host name"),
    ("a!b", "'!'"),  # a NodeSet operator, never a name
    ("@group", "'@'"),
    ("-n1", "'-n1' is not a host name"),
    ("..", "'..' is not a host name"),
])
def test_names_that_are_not_host_names_are_refused(text, bad):
    with pytest.raises(InputError) as exc:
        expand(text)
    assert repr(text) in str(exc.value) and bad in str(exc.value)


def test_fold_makes_ranges_for_text():
    assert fold(expand("node[001-512],gpu7")) == "gpu7,node[001-512]"
    assert fold(["n3", "n1", "n2"]) == "n[1-3]"
