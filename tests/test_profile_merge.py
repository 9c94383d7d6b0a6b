"""A child profile's criterion entry over the one it inherits (issue 24): each key it sets
overrides that key alone, the threshold's limit, unit and source go together, and
profiles.resolved() says which file of the chain each key came from."""

from __future__ import annotations

import json
import textwrap

import pytest

from signoff import InputError, profiles

LOCAL = str(profiles.PROFILE_DIR / "local.yaml")
BASE = str(profiles.PROFILE_DIR / "nvidia-base.yaml")


@pytest.fixture
def write(tmp_path):
    def write(name: str, text: str) -> str:
        p = tmp_path / f"{name}.yaml"
        p.write_text(textwrap.dedent(text))
        return str(p)
    return write


def origin(prof, criterion: str) -> dict:
    return {k: v["from"] for k, v in profiles.resolved(prof)["criteria"][criterion].items()}


def test_a_child_setting_the_limit_keeps_the_parents_other_keys(write):
    """The issue's profile: local's read size, jobs, depth and runtime still apply (the code
    defaults, 8G for 10 s, did before), and resolved() names the file of every key."""
    child = write("ours", """
        extends: local
        criteria:
          storage_read_seq: {min: 0.5, unit: GB/s, source: ours}
    """)
    p = profiles.load(child)
    t = p.threshold("storage_read_seq")
    assert (t.op, t.value, t.unit, t.source) == ("min", 0.5, "GB/s", "ours")
    assert t.extra == {"size": "128M", "bs": "1M", "jobs": 2, "iodepth": 8, "runtime": 1,
                       "alone_sample": 4}
    assert origin(p, "storage_read_seq") == {
        "min": child, "unit": child, "source": child, "size": LOCAL, "jobs": LOCAL,
        "iodepth": LOCAL, "runtime": LOCAL, "alone_sample": LOCAL,
        "bs": BASE}  # local sets no bs: nvidia-base's (no fleet_min: local has no class)
    r = profiles.resolved(p)
    assert r["extends"] == [BASE, LOCAL, child] and r["path"] == child
    assert r["criteria"]["storage_read_seq"]["size"] == {"value": "128M", "from": LOCAL}
    json.dumps(r)  # printable as it is


def test_a_child_setting_one_measurement_key_keeps_the_threshold(write):
    write("base", """
        criteria:
          storage_read_seq: {min: 4, unit: GB/s, size: 8G, runtime: 10, source: "docs A"}
    """)
    child = write("child", """
        extends: base
        criteria:
          storage_read_seq: {runtime: 5}
    """)
    p = profiles.load(child)
    t = p.threshold("storage_read_seq")
    assert (t.value, t.source, t.extra) == (4, "docs A", {"size": "8G", "runtime": 5})
    base = child.replace("child.yaml", "base.yaml")
    assert origin(p, "storage_read_seq") == {"min": base, "unit": base, "source": base,
                                             "size": base, "runtime": child}


def test_a_key_set_to_null_drops_the_inherited_one(write):
    p = profiles.load(write("c", "extends: local\ncriteria:\n  storage_read_seq: {size: null}\n"))
    assert "size" not in p.threshold("storage_read_seq").extra  # the family's default applies
    assert "size" not in profiles.resolved(p)["criteria"]["storage_read_seq"]
    assert p.threshold("storage_read_seq").extra["runtime"] == 1


@pytest.mark.parametrize("body, lacking", [
    ("{min: 0.5}", "but not unit, source"),
    ("{min: 0.5, unit: GB/s}", "but not source"),
])
def test_a_childs_limit_needs_its_own_unit_and_source(write, body, lacking):
    """The parent's source cites the parent's figure: never inherited by the child's value."""
    child = write("c", f"extends: local\ncriteria:\n  storage_read_seq: {body}\n")
    with pytest.raises(InputError) as exc:
        profiles.load(child)
    msg = str(exc.value)
    assert msg.startswith(f"profile {child}: criteria.storage_read_seq: sets ") and lacking in msg
    assert f"the inherited min 0.05 GB/s is {LOCAL}'s, with its source" in msg


def test_keys_that_qualify_the_limit_go_with_it(write):
    """The aggregate's `per` says what its min is of: a child's min under the parent's per (and
    node floor) would be judged against figures the child's source does not give."""
    child = write("c", "extends: local\ncriteria:\n"
                       "  storage_read_aggregate: {min: 1, unit: GB/s, source: ours}\n")
    with pytest.raises(InputError, match=r"storage_read_aggregate: sets min, source, unit but not "
                                         r"node_min, per: .* set node_min, per too \(null: the "
                                         r"family's default\)"):
        profiles.load(child)
    child = write("c2", "extends: local\ncriteria:\n  storage_read_aggregate: "
                        "{min: 1, unit: GB/s, per: cluster, node_min: null, source: ours}\n")
    t = profiles.load(child).threshold("storage_read_aggregate")
    assert t.extra == {"per": "cluster", "runtime": 2}  # local's runtime, still
    # the class's thermal figures come from one source: a child's slowdown restates them
    child = write("c3", "extends: h200-8x-nvlink@1\ncriteria:\n  thermal_slowdown: "
                        "{min: 85, shutdown: 92, gpu_max: 85, unit: C, source: ours}\n")
    with pytest.raises(InputError, match="but not mem_max"):
        profiles.load(child)


def test_a_childs_limit_drops_the_parents_provisional_rule(write):
    """`provisional:` says how the parent's figure was derived, not the child's."""
    cls = "a100-40gb-8x-nvlink"
    assert profiles.load(cls).threshold("hbm_bandwidth").provisional
    own = profiles.load(write("own", f"extends: {cls}\ncriteria:\n  hbm_bandwidth: "
                                     "{min: 1.4, unit: TB/s, source: 'our known-good node'}\n"))
    assert not own.threshold("hbm_bandwidth").provisional
    assert "provisional" not in profiles.resolved(own)["criteria"]["hbm_bandwidth"]
    more = profiles.load(write("more", f"extends: {cls}\ncriteria:\n  hbm_bandwidth: {{fleet_min: 0.8}}\n"))
    assert more.threshold("hbm_bandwidth").provisional  # the parent's figure, its rule with it


def test_resolved_says_uncalibrated_dropped_and_fleet_min(write):
    # no shipped profile leaves a criterion uncalibrated (issue 29): a site's may
    site = write("u", "extends: local\ncriteria:\n  hbm_bandwidth: {uncalibrated: 'not measured yet'}\n")
    why = profiles.resolved(profiles.load(site))["criteria"]["hbm_bandwidth"]
    assert list(why) == ["uncalibrated"] and why["uncalibrated"]["from"] == site
    child = write("c", """
        extends: h200-8x-nvlink@1
        fleet_min: 0.8
        criteria:
          hbm_bandwidth: null
          p2p_bandwidth: {fleet_min: 0.7}
    """)
    r = profiles.resolved(profiles.load(child))
    assert "hbm_bandwidth" not in r["criteria"]  # dropped: the check ERRORs naming it
    assert r["criteria"]["allreduce_busbw"]["fleet_min"] == {"value": 0.8, "from": child}
    assert r["criteria"]["p2p_bandwidth"]["fleet_min"] == {"value": 0.7, "from": child}
    assert r["criteria"]["p2p_bandwidth"]["min"]["from"].endswith("h200-8x-nvlink.yaml")


@pytest.mark.parametrize("name", profiles.available())
def test_resolved_lists_every_shipped_threshold_with_its_file(name):
    p = profiles.load(name)
    r = profiles.resolved(p)
    json.dumps(r)
    assert set(r["criteria"]) == set(p.criteria) | set(p.uncalibrated)
    for c, t in p.criteria.items():
        assert r["criteria"][c][t.op]["value"] == t.value and r["criteria"][c]["source"]["value"] == t.source
        assert {k for k in r["criteria"][c]} >= set(t.extra)
    assert {v["from"] for e in r["criteria"].values() for v in e.values()} <= \
        set(r["extends"]) | {"signoff default (signoff/outlier.py)"}
