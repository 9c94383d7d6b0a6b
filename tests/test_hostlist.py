"""signoff.hostlist.expand: Slurm-style hostlists."""

from __future__ import annotations

import pytest

from signoff import InputError
from signoff.hostlist import expand


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
])
def test_errors_name_the_hostlist(text, why):
    with pytest.raises(InputError) as exc:
        expand(text)
    assert why in str(exc.value)
    assert repr(text) in str(exc.value)
