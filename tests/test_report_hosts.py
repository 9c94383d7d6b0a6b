"""The provider's page (issue 45 item 6): the cover's per-host section, a pair FAIL's side at
fault, and the hosts to exclude or drain written beside report.md (records as a run writes them)."""

from __future__ import annotations

import pytest

from signoff import causes, report

PAIR = {"criterion": "net_pair_bandwidth", "unit": "Gb/s", "expected": ">= 0.45 Gb/s"}


def pair(a, b, gbps, **kw):
    status = "PASS" if gbps >= 0.45 else "FAIL"
    return {"test": f"acceptance/test_network.py::test_net_pair_bandwidth[{a}->{b}]", "host": f"{a}->{b}",
            "status": status, "measured": gbps, "message": "" if status == "PASS" else
            f"{a}->{b}: iperf3 throughput = {gbps} Gb/s, expected >= 0.45 Gb/s; likely cause: a slow link",
            **PAIR, **kw}


def own(criterion, host, status, message, measured=None, file="gpu_health"):
    return {"test": f"acceptance/test_{file}.py::test_{criterion}[{host}]", "criterion": criterion,
            "host": host, "status": status, "measured": measured, "unit": "C", "expected": "<= 85 C",
            "message": message}


def doc(records, hosts=("lab1", "lab2", "lab3", "lab4"), facts=None):
    facts = facts or {h: {"hostname": f"{h}.dc", "machine": {"machine_id": f"id-{h}"},
                          "nvidia": {"gpus": [{"serial": f"SN{h}"}]}} for h in hosts}
    return {"meta": {"hosts": list(hosts), "run": "20261205T000000Z-ctl-1"}, "hosts": facts,
            "results": records, "verdict": "FAIL"}


def all_pairs(slow_tx=None, slow_rx=None, hosts=("lab1", "lab2", "lab3", "lab4")):
    return [pair(a, b, 0.096 if slow_tx == a or slow_rx == b else 0.48)
            for a in hosts for b in hosts if a != b]


def test_a_slow_sender_is_named_by_its_transmit_side_with_its_identity_and_action(tmp_path):
    d = doc(all_pairs(slow_tx="lab3"))
    entries, unplaced, hosts = report.by_host(d)
    assert hosts == ["lab3"] and unplaced == [] and [e["who"] for e in entries] == ["lab3"], entries
    e = entries[0]
    assert e["exclude"] and e["identity"] == ["lab3: hostname lab3.dc, machine-id id-lab3, GPU serial SNlab3"]
    assert e["lines"] == ["lab3: transmit side slow on every pair it sends (lab3->lab1 0.096, lab3->lab2 "
                          "0.096, lab3->lab4 0.096 Gb/s; expected >= 0.45 Gb/s): check its NIC, cable or "
                          "switch port (FAIL net_pair_bandwidth)"], e
    # the cover (HTML) and report.md carry it; the pair's To fix line names the side at fault
    html, md = report.cover("FAIL", d), report.markdown(d)
    for text in (html, md):
        assert "By host" in text and "transmit side slow on every pair it sends" in text
        assert "check its NIC, cable or switch port" in text and "machine-id id-lab3" in text
    assert "the side at fault: lab3's transmit" in md, md
    report.write_exclude(tmp_path, d)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == "lab3\n"
    drain = (tmp_path / report.DRAIN_FILE).read_text().splitlines()
    assert drain[-1] == ('scontrol update nodename="lab3" state=drain reason="signoff '
                         '20261205T000000Z-ctl-1: net_pair_bandwidth FAIL: transmit side slow on every '
                         'pair it sends"'), drain


def test_a_slow_receiver_is_named_by_its_receive_side():
    entries, unplaced, hosts = report.by_host(doc(all_pairs(slow_rx="lab2")))
    assert hosts == ["lab2"] and not unplaced
    assert entries[0]["lines"][0].startswith(
        "lab2: receive side slow on every pair it receives (lab1->lab2 "), entries


def test_a_ring_pair_no_other_pair_clears_is_unplaced_unless_the_bisection_names_a_side():
    ring = [pair("lab1", "lab2", 0.48), pair("lab2", "lab3", 0.48), pair("lab3", "lab1", 0.096)]
    entries, unplaced, hosts = report.by_host(doc(ring, hosts=("lab1", "lab2", "lab3")))
    assert hosts == [] and entries == [], entries  # lab3's transmit or lab1's receive: not shown
    assert unplaced == ["net_pair_bandwidth lab3->lab1: lab3->lab1 0.096 Gb/s; expected >= 0.45 Gb/s: "
                        "the pairs do not show which side is slow (lab3's transmit or lab1's receive, "
                        "or the path between)"], unplaced
    bisected = {"test": "acceptance/test_network.py::test_multinode_allreduce[all hosts]",
                "host": "all hosts", "criterion": "multinode_allreduce", "status": "FAIL",
                "measured": 0.012, "unit": "GB/s",
                "expected": ">= 0.04 GB/s", "message": "all hosts: ...; likely cause: slow host lab3",
                "details": {"bisection": {"slow_hosts": ["lab3"], "slow_links": [], "pairs": {}}}}
    entries, unplaced, hosts = report.by_host(doc([*ring, bisected], hosts=("lab1", "lab2", "lab3")))
    assert hosts == ["lab3"] and unplaced == [], (entries, unplaced)
    assert entries[0]["lines"][0].startswith("lab3: transmit side slow on every pair it sends"), entries
    assert "slow in the collectives across nodes" in entries[0]["lines"][1], entries


def test_one_cause_on_many_hosts_is_one_entry_and_a_cause_every_host_said_alike_is_the_runs():
    hot = [own("gpu_temp", h, "FAIL", f"{h}: GPU 3 at {90 + i} C, expected <= 85 C", 90.0 + i)
           for i, h in enumerate(("lab1", "lab2", "lab3"))]
    missing = [own("hbm_bandwidth", h, "ERROR", f"{h}: no threshold hbm_bandwidth in profile x")
               for h in ("lab1", "lab2", "lab3", "lab4")]
    d = doc([*hot, own("gpu_temp", "lab4", "PASS", ""), *missing])
    entries, unplaced, hosts = report.by_host(d)
    assert [e["who"] for e in entries] == ["lab[1-3]"] and hosts == ["lab1", "lab2", "lab3"], entries
    assert entries[0]["lines"] == ["lab[1-3]: GPU 3 at 90 C, expected <= 85 C (90 C, as on lab1): check its "
                                   "GPUs (nvidia-smi -q; reseat or replace the GPU the message names) "
                                   "(FAIL gpu_temp)"], entries
    assert unplaced == ["hbm_bandwidth ERROR on every host alike (lab[1-4]): no threshold hbm_bandwidth in "
                        "profile x"], unplaced
    assert report.exclude_files(d)[report.EXCLUDE_FILE] == "lab[1-3]\n"


def test_a_host_that_did_not_answer_is_excluded_and_nothing_to_exclude_says_so(tmp_path):
    facts = {"lab1": {"hostname": "lab1"}, "lab2": {"error": "unreachable: connection refused"}}
    entries, _, hosts = report.by_host(doc([], hosts=("lab1", "lab2"), facts=facts))
    assert hosts == ["lab2"] and "did not answer: unreachable: connection refused" in entries[0]["lines"][0]
    healthy = doc([pair("lab1", "lab2", 0.48)], hosts=("lab1", "lab2"))
    report.write_exclude(tmp_path, healthy)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == ""
    assert "scontrol" not in (tmp_path / report.DRAIN_FILE).read_text()
    assert report.by_host_md(healthy) == [] and report.by_host_html(healthy) == ""


def test_a_drain_reason_holds_no_shell_or_quote_character():
    bad = 'a "quoted" $(rm -rf /) `x`'
    g = causes.HostFindings(["lab1"], [causes.Finding("FAIL", ["x"], bad, "", "")], True)
    reason = causes.drain_reason(g)
    assert '"' not in reason and "$" not in reason and "`" not in reason, reason


def test_a_bisection_that_names_every_host_singles_out_none():
    """Under load every pair of a collective's bisection read slow: it names no one host."""
    ring = [pair("lab1", "lab2", 0.48), pair("lab2", "lab3", 0.48), pair("lab3", "lab1", 0.096)]
    pairs = {"lab1->lab2": 0.019, "lab2->lab3": 0.005, "lab3->lab1": 0.006}
    noisy = {"test": "acceptance/test_network.py::test_multinode_reduce_scatter_busbw[all hosts]",
             "host": "all hosts", "criterion": "multinode_reduce_scatter_busbw", "status": "FAIL",
             "measured": 0.006, "unit": "GB/s", "expected": ">= 0.04 GB/s", "message": "all hosts: ...",
             "details": {"bisection": {"slow_hosts": ["lab1", "lab2", "lab3"], "slow_links": [],
                                       "pairs": pairs}}}
    entries, unplaced, hosts = report.by_host(doc([*ring, noisy], hosts=("lab1", "lab2", "lab3")))
    assert hosts == [] and entries == [] and len(unplaced) == 2, (entries, unplaced)
    assert "multinode_reduce_scatter_busbw FAIL on all hosts, naming no one host: ..." in unplaced, unplaced


# --- issue 51 item 15: a cause every host shares is the run's: one cover line, no host drained ----
# (the messages as runs on the 4-host lab wrote them, 2026-12-07: tests/test_hand_off_lab.py runs them)

CLASS = ("--profile a100-8x-nvlink: no host is of a variant of this class (a100-40gb-8x-nvlink: 8 x NVIDIA "
         "A100-SXM4-40GB, interconnect nvlink, a100-80gb-8x-nvlink: 8 x NVIDIA A100-SXM4-80GB, interconnect "
         "nvlink): lab1: no GPU; lab2: no GPU; lab3: no GPU; lab4: no GPU (pass the profile of their class, "
         "or --profile auto)")
HOSTS = ("lab1", "lab2", "lab3", "lab4")
RING = ("lab1->lab2", "lab2->lab3", "lab3->lab4", "lab4->lab1")
CLUSTER = ("multinode_allreduce", "multinode_transport", "nvlink_domain")
FILES = {"dcgm_diag": "dcgm", "gpu_model": "gpu_health", "ecc_enabled": "gpu_health", "nic_link": "network",
         "soak_gpu_temp": "soak", "storage_read_seq": "storage"}


def cluster(criterion, status, message, **kw):
    file = "fabric" if criterion == "nvlink_domain" else "network"
    return {"test": f"acceptance/test_{file}.py::test_{criterion}[all hosts]", "criterion": criterion,
            "host": "all hosts", "status": status, "message": message, **kw}


def run_wide(message, status="ERROR", facts=None, pair_message=None, cluster_message=None):
    """Every host's checks, the ring's pairs and the checks across hosts said `message` (a
    callable of the host), as a run whose own ERROR it is writes them; the versions passed."""
    said = message if callable(message) else (lambda h: message)
    recs = [own(c, h, status, said(h), file=f) for c, f in FILES.items() for h in HOSTS]
    recs += [own("version_parity", h, "PASS", "", file="versions") for h in HOSTS]
    recs += [{**pair(*p.split("->"), 0.48), "status": status, "measured": None,
              "message": (pair_message or said)(p)} for p in RING]
    recs += [cluster(c, status, (cluster_message or said)("all hosts")) for c in CLUSTER]
    return doc(recs, facts=facts)


def assert_run_wide(d, tmp_path, start):
    """No host drained nor given a hardware action; one line blamed on no host; one cover line."""
    entries, unplaced, hosts = report.by_host(d)
    assert entries == [] and hosts == [], entries
    assert len(unplaced) == 1 and unplaced[0].startswith(start), unplaced
    report.write_exclude(tmp_path, d)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == ""
    assert "scontrol" not in (tmp_path / report.DRAIN_FILE).read_text()
    md = "\n".join(report.by_host_md(d))
    assert "reseat or replace" not in md and "exclude or drain" not in md and "No host to exclude." in md, md
    groups = report.problem_groups(d["results"])
    assert len(groups) == 1, [report.problem_line(g) for g in groups]
    return report.problem_line(groups[0])


def test_a_class_mismatch_every_host_errored_alike_drains_no_host(tmp_path):
    """`--profile a100-8x-nvlink` on hosts of another class: every check of every host, pair and
    the cluster ERRORs with one message naming every host; it named no host (6 cover lines and
    lab[1-4] drained with 50 'reseat or replace the GPU' lines each, on 83b76b7)."""
    who, what, _ = assert_run_wide(run_wide(CLASS), tmp_path,
                                   "10 checks (dcgm_diag, gpu_model, ecc_enabled, nic_link and 6 more) ERROR "
                                   f"on every host alike (lab[1-4]): {CLASS}")
    assert who == "4 hosts lab[1-4]" and what == CLASS, (who, what)


def lock_said(h, path="/tmp/signoff-lock.40265323{n}.0"):
    return (f"{h}: in use by another signoff run: run 20261207T000000Z-other-1 by root@vm since "
            f"2026-12-07T17:28:33Z (lock {path.format(n=HOSTS.index(h) + 12)}; --lock-wait waits for it)")


def test_a_lock_another_run_holds_on_every_host_drains_no_host(tmp_path):
    """Another run holds every host's run lock: no host answered, each its own lock's path (the
    host's network namespace, or boot id under /run): one cause, the run's (9 cover lines and
    lab[1-4] drained as 'did not answer' on 83b76b7)."""
    for path in ("/tmp/signoff-lock.40265323{n}.0",
                 "/run/signoff/lock.0b6c3c0e-9f1a-4c2e-8d7e-5a1f2b3c4d{n}.40265318"):
        def said(h, path=path):
            return lock_said(h, path)

        def no_answer(p, path=path):
            return "no host answered: " + "; ".join(
                causes.cause_lines({h: lock_said(h, path) for h in p.split("->") if h in HOSTS}
                                   or {h: lock_said(h, path) for h in HOSTS}))
        d = run_wide(said, facts={h: {"error": said(h)} for h in HOSTS}, pair_message=no_answer,
                     cluster_message=no_answer)
        who, what, _ = assert_run_wide(
            d, tmp_path, "10 checks (dcgm_diag, gpu_model, ecc_enabled, nic_link and 6 more) ERROR on every "
            "host alike (lab[1-4]): in use by another signoff run: run 20261207T000000Z-other-1 by root@vm")
        assert who == "4 hosts lab[1-4]" and what.startswith("in use by another signoff run"), what


def test_a_fail_every_host_shares_on_a_figure_is_the_profiles_not_the_hosts(tmp_path):
    """Every host below one floor (a floor calibrated from one run, or a profile of another
    class): one cover line naming the likely cause, no host drained."""
    slow = [{**own("hbm_bandwidth", h, "FAIL", f"{h}: hbm_bandwidth = {2900 + i} GB/s, expected >= 3000 GB/s "
                   f"(site calibration, source: calibrate run r1 x margin 0.9); likely cause: HBM clocks",
                   2900.0 + i, file="gpu_health"), "unit": "GB/s", "expected": ">= 3000 GB/s"}
            for i, h in enumerate(HOSTS)]
    d = doc([*slow, *(own("gpu_temp", h, "PASS", "") for h in HOSTS)])
    entries, unplaced, hosts = report.by_host(d)
    assert entries == [] and hosts == [] and report.exclude_files(d)[report.EXCLUDE_FILE] == "", entries
    assert len(unplaced) == 1 and unplaced[0].startswith(
        "hbm_bandwidth FAIL on every host alike (lab[1-4]): hbm_bandwidth = 2900 GB/s"), unplaced
    assert "the profile" in unplaced[0] and "than each host's hardware" in unplaced[0], unplaced
    groups = report.problem_groups(d["results"])
    assert len(groups) == 1
    who, what, cause = report.problem_line(groups[0])
    assert who == "4 hosts lab[1-4]" and what == "measured 2900-2903 GB/s, expected >= 3000 GB/s", what
    assert cause.startswith("HBM clocks; every host alike: ") and "calibrated from one run" in cause, cause


def test_one_bad_host_of_two_is_still_named_and_one_host_alone_too(tmp_path):
    """The rule needs every host of two or more: one bad host beside a good one is that host's;
    a run of one host with a fault names it."""
    hot = own("gpu_temp", "lab1", "FAIL", "lab1: GPU 3 at 95 C, expected <= 85 C", 95.0)
    for d in (doc([hot, own("gpu_temp", "lab2", "PASS", "", 60.0)], hosts=("lab1", "lab2")),
              doc([hot], hosts=("lab1",))):
        entries, unplaced, hosts = report.by_host(d)
        assert hosts == ["lab1"] and unplaced == [] and "reseat or replace" in entries[0]["lines"][0], entries
        assert report.exclude_files(d)[report.EXCLUDE_FILE] == "lab1\n"
        assert report.problem_line(report.problem_groups(d["results"])[0])[0] == "lab1"


def test_a_fault_on_every_host_but_one_that_did_not_answer_is_still_the_runs():
    """A host that did not answer is excluded for that alone; the cause every other host shares
    stays the run's."""
    facts = {h: {"hostname": h} for h in HOSTS[:3]} | {"lab4": {"error": "lab4: unreachable: timed out"}}
    recs = [own("gpu_model", h, "ERROR", CLASS, file="gpu_health") for h in HOSTS[:3]]
    recs.append(own("gpu_model", "lab4", "ERROR", "lab4: unreachable: timed out", file="gpu_health"))
    entries, unplaced, hosts = report.by_host(doc(recs, facts=facts))
    assert hosts == ["lab4"] and [e["who"] for e in entries] == ["lab4"], entries
    assert unplaced == [f"gpu_model ERROR on every host alike (lab[1-3]): {CLASS}"], unplaced


def test_different_faults_on_every_host_are_each_hosts():
    """Every host FAILed, but for causes of its own (two XID codes): each is its host's."""
    recs = [own("xid_history", h, "FAIL", f"{h}: XID {79 if h in ('lab1', 'lab2') else 48} on GPU 2")
            for h in HOSTS]
    entries, unplaced, hosts = report.by_host(doc(recs))
    assert hosts == list(HOSTS) and unplaced == [] and len(entries) == 2, entries


def test_one_same_hardware_event_on_every_host_is_still_each_hosts(tmp_path):
    """XID 79 on both hosts of a 2-host run, DCGM failing every host's GPU 0 alike: each host's own
    fault (its log, its GPUs), never the profile's; both drained."""
    two = ("lab1", "lab2")
    recs = [own("xid_history", h, "FAIL", f"{h}: XID 79 x1 on PCI:0000:00:06.0 (GPU 0) (expected fatal XIDs "
                "<= 0); likely cause: the GPU fell off the bus", measured=1) for h in two]
    recs += [own("dcgm_diag", h, "FAIL", f"{h}: GPU 0: memory test Fail", measured=1, file="dcgm")
             for h in two]
    recs += [own("gpu_temp", h, "PASS", "") for h in two]
    d = doc(recs, hosts=two)
    entries, unplaced, hosts = report.by_host(d)
    assert hosts == list(two) and unplaced == [], (hosts, unplaced)
    report.write_exclude(tmp_path, d)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == "lab[1-2]\n"


@pytest.mark.parametrize("criterion,said", [
    ("soak_errors", "GPU {gpu}: XID 79 at 120.5 s (kernel log)"),
    ("nvlink_up", "GPU {gpu} link 5 down (expected every NVLink up)"),
    ("allreduce_correct", "wrong result on GPU {gpu} at 1 MiB (expected every collective exact)"),
    ("hbm_uniformity", "GPU {gpu} 2.1 TB/s, 0.7 x the host's median (expected >= 0.9 x)"),
    ("pcie_link", "GPU {gpu} at PCI 0000:{gpu}b:00.0 runs Gen4 x8 (expected Gen5 x16)")])
def test_each_hosts_own_part_failing_is_each_hosts_not_a_shared_cause(tmp_path, criterion, said):
    """Two hosts whose different GPUs fail (or whose errors are their own events) are two faults:
    both named, both drained, each with its own GPU (on the first cut of item 15 one line named
    lab1's GPU for both and drained neither: numbers were all taken for figures)."""
    two = ("lab1", "lab2")
    recs = [own(criterion, h, "FAIL", f"{h}: " + said.format(gpu=g), measured=1)
            for h, g in zip(two, (3, 5))] + [own("gpu_temp", h, "PASS", "") for h in two]
    d = doc(recs, hosts=two)
    entries, unplaced, hosts = report.by_host(d)
    assert hosts == list(two) and unplaced == [], (hosts, unplaced)
    lines = [ln for e in entries for ln in e["lines"]]
    assert any("GPU 3" in ln for ln in lines) and any("GPU 5" in ln for ln in lines), lines
    report.write_exclude(tmp_path, d)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == "lab[1-2]\n"


# --- issue 51 item 12: a check across hosts that FAILs naming a host makes it that host's finding ----

def across(criterion, message, at_fault, file="network", **kw):
    return {**cluster(criterion, "FAIL", f"all hosts: {message}", **kw),
            "test": f"acceptance/test_{file}.py::test_{criterion}[all hosts]",
            "details": {"at_fault": at_fault}}


TRANSPORT = ("lab2: NET/Socket between nodes, ranks 1->2, 2->3 (NCCL loaded network Socket) (expected NET/IB "
             "or IB SHARP between nodes; NCCL_IB_HCA, multi-node NCCL)")


def test_a_transport_fail_naming_one_host_drains_that_host(tmp_path):
    """multinode_transport FAILed: lab2's NCCL took sockets between nodes (no By host section, an
    empty exclude.hostlist, drain.sh draining nothing, on 83b76b7)."""
    rec = across("multinode_transport", f"{TRANSPORT}; likely cause: NCCL found no RDMA device",
                 {"lab2": ["lab2: NET/Socket between nodes, ranks 1->2, 2->3 (NCCL loaded network Socket)"]},
                 measured="NET/IB, NET/Socket")
    d = doc([rec, *(own("gpu_temp", h, "PASS", "") for h in HOSTS)])
    entries, unplaced, hosts = report.by_host(d)
    assert hosts == ["lab2"] and unplaced == [] and [e["who"] for e in entries] == ["lab2"], unplaced
    assert entries[0]["lines"] == [
        "lab2: NET/Socket between nodes, ranks 1->2, 2->3 (NCCL loaded network Socket); likely cause: NCCL "
        "found no RDMA device: check its NIC, cable or switch port (FAIL multinode_transport)"], entries
    report.write_exclude(tmp_path, d)
    assert (tmp_path / report.EXCLUDE_FILE).read_text() == "lab2\n"
    assert 'scontrol update nodename="lab2" state=drain' in (tmp_path / report.DRAIN_FILE).read_text()


def test_a_tray_in_another_domain_and_a_tray_outside_it_are_their_trays():
    """nvlink_domain names a tray of another partition; mnnvl_allreduce a tray in no one domain."""
    dom = across("nvlink_domain", "tray[3-4]: in another partition (clique) than the run's other trays",
                 {"tray3": ["tray[3-4]: in another partition (clique)"],
                  "tray4": ["tray[3-4]: in another partition (clique)"]}, file="fabric")
    mn = across("mnnvl_allreduce", "tray2: in no one NVLink domain (GPU 0: no cluster UUID), so in no "
                "all-reduce over MNNVL (see nvlink_domain)", {"tray2": ["tray2: in no one NVLink domain"]},
                file="fabric")
    trays = ("tray1", "tray2", "tray3", "tray4")
    entries, unplaced, hosts = report.by_host(doc([dom, mn], hosts=trays, facts={t: {} for t in trays}))
    assert sorted(hosts) == ["tray2", "tray3", "tray4"] and unplaced == [], (entries, unplaced)
    lines = {e["who"]: e["lines"] for e in entries}
    assert lines["tray[3-4]"][0].startswith("tray[3-4]: tray[3-4]: in another partition"), lines
    assert "check its NVSwitch fabric" in lines["tray[3-4]"][0], lines
    assert lines["tray2"][0].startswith("tray2: in no one NVLink domain"), lines


def test_a_check_across_hosts_that_names_every_host_or_none_drains_none():
    """Every host named (sockets on every host: the lab has no RDMA under an InfiniBand
    profile) is the run's; a FAIL naming no host is listed, blamed on no host."""
    every = across("multinode_transport", "lab1: NET/Socket ...; lab2: NET/Socket ...",
                   {"lab1": ["lab1: NET/Socket between nodes"], "lab2": ["lab2: NET/Socket between nodes"]})
    short = across("nvlink_domain", "cluster c1 clique 0 holds 64 GPUs of the run (8 trays: lab[1-8]), 72 "
                   "declared", {}, file="fabric")
    entries, unplaced, hosts = report.by_host(doc([every, short], hosts=("lab1", "lab2")))
    assert hosts == [] and entries == [], entries
    assert unplaced == [
        "multinode_transport FAIL on every host alike (lab[1-2]): lab1: NET/Socket ...; lab2: NET/Socket "
        "...; every host alike: more likely the profile (another class) or a setting every host shares than "
        "each host's hardware",
        "nvlink_domain FAIL on all hosts, naming no one host: cluster c1 clique 0 holds 64 GPUs of the run "
        "(8 trays: lab[1-8]), 72 declared"], unplaced


def test_every_pair_of_a_ring_below_its_floor_alike_is_one_line_and_no_side():
    """Every pair below the floor alike: no pair clears a side, no host is named; one line."""
    d = doc(all_pairs(slow_tx="lab1", slow_rx="lab1") + [pair(a, b, 0.096) for a, b in
                                                        (("lab2", "lab3"), ("lab3", "lab2"))],
            hosts=("lab1", "lab2", "lab3"))
    d["results"] = [r for r in d["results"] if r["status"] == "FAIL"]
    entries, unplaced, hosts = report.by_host(d)
    assert hosts == [] and entries == [] and len(unplaced) == 1, (entries, unplaced)
    assert unplaced[0].startswith("net_pair_bandwidth FAIL on every pair alike (lab1->lab[2-3],"
                                  "lab2->lab[1,3],lab3->lab[1-2]): iperf3 throughput = 0.096 Gb/s"), unplaced
    assert unplaced[0].endswith("or the switch they share than one host's link"), unplaced
