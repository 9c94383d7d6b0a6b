"""The provider's page (issue 45 item 6): the cover's per-host section, a pair FAIL's side at
fault, and the hosts to exclude or drain written beside report.md (records as a run writes them)."""

from __future__ import annotations

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
    assert hosts == [] and entries == [] and len(unplaced) == 1, (entries, unplaced)
