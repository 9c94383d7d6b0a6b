"""The preflight's warnings without a host (signoff/preflight.py): a family's part judged from
a sysinfo document as the run's check would judge it. Lab runs: tests/test_preflight_lab.py."""

from __future__ import annotations

from signoff import gpu
from signoff.inventory import Host
from signoff.preflight import Context

FACTS = {"python": "3.11.7", "torch": {"version": "2.13.0"}, "nvidia": {},
         "preflight": {"tools": {"journalctl": True}, "journal_persistent": True}}


def counters(**eth0) -> dict:
    return {"infiniband": {}, "pcie_replay": {}, "net": {"eth0": eth0}}


def warned(facts, picked=("error_counters",), iface="eth0") -> list[str]:
    ctx = Context(config=None, profile=None, picked=frozenset(picked), hosts=2)
    return gpu.preflight(ctx, Host(name="n1", data_iface=iface), facts)[1]


def test_error_counters_unreadable_at_the_start_is_warned_in_the_checks_words():
    """The walk-through (tests/test_walkthrough.py) found it: a data interface whose statistics
    sysinfo could not read made test_error_counters ERROR ("counters unreadable: ...") with no
    word from the plan."""
    unread = {**FACTS, "counters": counters(rx_errors=None, tx_errors=0, carrier_changes=None)}
    assert warned(unread) == ["error_counters ERROR: counters unreadable: eth0 carrier_changes, "
                              "eth0 rx_errors"]
    assert warned(unread, picked=("nic_link",)) == []  # not run: nothing to say
    readable = {**FACTS, "counters": counters(rx_errors=0, tx_errors=0, carrier_changes=1)}
    assert warned(readable) == []
    # another interface's unreadable counters are not watched (only the data interface's)
    other = {**FACTS, "counters": {**counters(rx_errors=0), "net": {"eth0": {"rx_errors": 0},
                                                                   "lo": {"rx_errors": None}}}}
    assert warned(other) == []
    absent = {**FACTS, "counters": {"infiniband": {}, "pcie_replay": {}, "net": {}}}
    assert warned(absent) == ["error_counters ERROR: counters unreadable: eth0 (absent in the start "
                              "snapshot)"]


def test_single_host_without_data_iface_is_na_only_where_nic_link_needs_one():
    """test_nic_link's own condition: one host without data_iface is N.A. for an Ethernet or
    derived nic_rate, but an InfiniBand class's ports (fabric: infiniband) are judged from sysfs,
    so the plan must not promise an N.A. the run does not give."""
    from signoff import network, profiles

    facts = {**FACTS, "preflight": {**FACTS["preflight"], "ethernet": [], "infiniband": []}}

    def said(profile):
        ctx = Context(config=None, profile=profiles.load(profile), picked=frozenset({"nic_link"}), hosts=1)
        return network.preflight(ctx, Host(name="n1"), facts)[1]

    assert said("h100-8x-nvlink") == []
    assert said("local") == ["nic_link N.A.: single host and no data_iface named in the inventory"]
