"""Storage read and write throughput: per node (large sequential blocks, many small files) and
every host reading, then writing, at once; every byte written read back. Test files are written
only under <path>/.signoff-<run>-<host>[-write]/ and removed at the end, also after a failure or
Ctrl-C; --storage-readonly writes nothing (the write checks N.A.)."""

import pytest

from signoff import retry
from signoff.check import not_applicable
from signoff.figures import html_table
from signoff.fleet import ProbeError
from signoff.form import describe as form_words
from signoff.form import judge as form
from signoff.printable import printable
from signoff.storage import judge as storage
from signoff.storage import writes


@pytest.fixture
def node(host, of_class):
    """The host, if it is of the profile's class: elsewhere NOT RUN naming the class guard (as
    the all-reduce and P2P checks; the class checks FAIL it) rather than spend minutes on its disks."""
    return host


def alone(store, host, workload, t, check):
    """This host's alone read; N.A. for a host of a shared filesystem outside the sample
    (never a PASS unmeasured): which hosts were read alone, and why, in its details."""
    try:
        return store.read(host.name, workload)
    except storage.NotReadAlone as exc:
        check.record(None, t.expected, t.unit, t.source, {"read": str(exc),
                                                         **store.alone(workload)["plan"]})
        not_applicable(str(exc))


def judge(host, doc, t, what, check, attach, peers):
    gbps = storage.figure(doc["gbps"])
    how = storage.describe(doc)
    attach("html", html_table({
        "measured": f"{gbps} GB/s ({doc['bytes']} bytes in {doc['seconds']:.2f} s)",
        "tool": f"{doc['tool']} ({doc['tool_version']})", "parameters": doc["params"],
        "path": f"{doc['path']}{' (read-only)' if doc['readonly'] else ''}",
        "filesystem": storage.storage_kind(doc["fs"]), "page cache": doc["cache"],
        "files": f"{doc['files']} ({doc['bytes_per_pass']} bytes per pass)",
        "read": doc.get("read", "alone"),
        **({"files read": ", ".join(doc["read_files"]) + (f" and {doc['read_files_more']} more"
                                                          if doc["read_files_more"] else "")}
           if doc.get("read_files") else {})}), what)
    if storage.skipped_note(doc):
        check.note(storage.skipped_note(doc))
    if not doc["cache"]["defeated"]:
        check.record(gbps, t.expected, t.unit, t.source, storage.details(doc))
        raise ProbeError(f"{host}: {what} of {doc['path']} = {gbps} GB/s is not a storage "
                         f"figure: the page cache could not be bypassed ({doc['cache']['note']})")
    check.expect(gbps, t, f"{what} of {doc['path']} ({how}{retry.said(doc, 'GB/s')})",
                 cause=storage.cause(doc, doc["workload"]) + sold(host), details=storage.details(doc),
                 fleet=peers)


def sold(host) -> str:
    """The disk as the machine's form reads it (a VM's virtio disk, a network volume): judged
    against the class's figure all the same, its kind said (issue 52)."""
    f = form.form_of(host.facts)
    return f"; the machine's {form_words.disk(f)}" if f and (f.get("disk") or {}).get("kind") else ""


def _figure(doc):
    """A host's alone read as its peers see it: none where the page cache was not bypassed."""
    return storage.figure(doc["gbps"]) if isinstance(doc, dict) and doc["cache"]["defeated"] else None


def test_storage_read_seq(node, store, profile, check, attach):
    t = profile.threshold("storage_read_seq")
    judge(node, alone(store, node, "seq", t, check), t, "sequential read", check, attach,
          {n: _figure(d) for n, d in store.alone("seq")["docs"].items()})


def test_storage_read_small(node, store, profile, check, attach):
    t = profile.threshold("storage_read_small")
    judge(node, alone(store, node, "small", t, check), t, "small-file read", check, attach,
          {n: _figure(d) for n, d in store.alone("small")["docs"].items()})


def test_storage_read_aggregate(store, profile, fleet, check, attach):
    """Every host reads its own files on the shared path at the same moment; the aggregate
    is the sum of what they read in the window where all of them were reading."""
    t = profile.threshold("storage_read_aggregate")
    facts = fleet.all_facts()
    if profile.gpu_required:
        odd = [n for n, f in facts.items() if isinstance(f, dict) and not f["nvidia"].get("gpus")]
        if odd:
            pytest.fail(f"all hosts: {', '.join(odd)} without NVIDIA GPU; profile {profile.name} "
                        f"expects {profile.describe_class()}: storage not measured", pytrace=False)
    got = store.aggregate()
    if "errors" in got:  # what the other hosts read is kept with the ERROR
        check.record(None, t.expected, t.unit, t.source, {
            "errors": {n: str(e) for n, e in got["errors"].items()},
            "per_host": {n: {**storage.details(d), "gbps": d["gbps"]}
                         for n, d in got.get("docs", {}).items()}})
        raise ProbeError("all hosts: the aggregate read needs every host: "
                         + "; ".join(str(e) for e in got["errors"].values()))
    docs = got["docs"]
    ov = got["overlap"]
    limit = store.limit()
    measured = storage.figure(ov["aggregate"])
    shares = {n: storage.figure(v) for n, v in sorted(ov["per_host"].items(), key=lambda kv: kv[1])}
    d0 = next(iter(docs.values()))
    info = {"window_s": round(ov["seconds"], 3), "coverage": round(ov["coverage"], 3),
            "per_host_in_window": shares, "clock_offsets_s": {n: round(o, 4) for n, o in
                                                              got["offsets"].items()},
            "per_host": {n: {**storage.details(d), "gbps": d["gbps"], "spans": ov["spans"][n]}
                         for n, d in docs.items()},
            # which hosts the seq / small checks read alone, which at once, and why
            "alone_reads": store.plans(),
            "attempts": got.get("attempts"), "spread_pct": got.get("spread_pct")}
    attach("html", html_table({
        "aggregate": f"{measured} GB/s over {ov['seconds']:.2f} s with {len(docs)} hosts reading",
        "per host (GB/s in the window)": shares, "measured with": storage.describe(d0),
        "path": d0["path"], "filesystem": storage.storage_kind(d0["fs"]),
        **{f"{w} read alone": f"{', '.join(p['read_alone']) or 'none'}; at once (own disks): "
                              f"{', '.join(p['at_once']) or 'none'}"
           for w, p in info["alone_reads"].items()}}), "aggregate read")
    # a host's path the cache serves spoils the figure however the reads overlapped: named first,
    # as it holds on every run (the overlap depends on the moment: a loaded controller's start)
    cached = [n for n, d in docs.items() if not d["cache"]["defeated"]]
    if cached:
        check.record(measured, limit.expected, limit.unit, limit.source, info)
        raise ProbeError(f"all hosts: aggregate {measured} GB/s is not a storage figure: the page "
                         f"cache could not be bypassed on {', '.join(cached)}")
    if ov["coverage"] < storage.MIN_OVERLAP:
        check.record(measured, limit.expected, limit.unit, limit.source, info)
        raise ProbeError(f"all hosts: the reads overlapped for {ov['seconds']:.2f} s only "
                         f"({ov['coverage']:.0%} of a host's read): the hosts did not read at the "
                         f"same moment (clock offsets {info['clock_offsets_s']})")
    n = f"{len(docs)} host{'s' if len(docs) > 1 else ''}"
    what = f"aggregate read of {n} at once over {ov['seconds']:.1f} s of {d0['path']} " \
           f"({storage.describe(d0)}{retry.said(got, limit.unit)})"
    node_min = storage.knobs(t)["node_min"]
    starved = storage.starved(shares, node_min)
    per_host = f" and every host >= {node_min:g} {limit.unit}" if node_min is not None else ""
    check.record(measured, limit.expected + per_host, limit.unit, limit.source, info)
    unstable = retry.unstable(got, t, limit.unit)
    if starved or not limit.ok(measured) or unstable:
        pytest.fail(f"all hosts: {what} = {measured} {limit.unit}, expected {limit.expected}"
                    f"{per_host} ({limit.profile}, source: {limit.source})"
                    + (f"; below the per-host minimum: {', '.join(starved)}" if starved else "")
                    + (f"; {unstable}" if unstable else "")
                    + f"; likely cause: {storage.aggregate_cause(shares, d0)}", pytrace=False)


# ------------------------------------------------------------------ writes (signoff/storage/writes.py)

def written(store, host, workload, t, check):
    """This host's write of the workload: N.A. where the run writes nothing (read-only) or the
    host of a shared filesystem is outside the sample (never a PASS unmeasured)."""
    w = store.writes()
    try:
        return w.write(host.name, workload)
    except (writes.ReadOnly, storage.NotReadAlone) as exc:
        check.record(None, t.expected, t.unit, t.source, {"written": str(exc)})
        not_applicable(str(exc))


def judge_write(host, doc, t, what, check, attach, peers):
    gbps = storage.figure(doc["gbps"])
    v = doc["verify"]
    attach("html", html_table({
        "measured": f"{gbps} GB/s ({doc['bytes']} bytes in {doc['seconds']:.2f} s)",
        "tool": f"{doc['tool']} ({doc['tool_version']})", "parameters": doc["params"],
        "path": doc["path"], "filesystem": storage.storage_kind(doc["fs"]),
        "files": f"{doc['files']} ({doc['bytes_per_pass']} bytes), removed: {doc['removed']}",
        "read back": f"{v['bytes_checked']} bytes, {v['bad_bytes']} wrong ({v['how']})",
        "written": doc.get("written", "alone")}), what)
    details = {**storage.details(doc), "verify": v, "written": doc.get("written"), "free": doc.get("free")}
    if doc["ram"]:
        check.record(gbps, t.expected, t.unit, t.source, details)
        raise ProbeError(f"{host}: {what} to {doc['path']} = {gbps} GB/s is not a storage figure: "
                         f"{doc['fs']['fstype']} is RAM-backed, its files live in the page cache")
    how = storage.describe({**doc, "params": {**doc["params"], "runtime_s": 0}})
    cached = writes.from_memory([(doc["workload"], v)])
    if cached:  # the write was fsync'ed, its figure stands; its read-back checked RAM
        check.note(f"{host}: {what} read back from memory, not the disk: {cached} "
                   f"(storage_write_verify ERRORs)")
    check.expect(gbps, t, f"{what} to {doc['path']} ({how}, one pass, synced)",
                 cause=storage.cause({**doc, "files_per_s": doc.get("files_per_s")}, doc["workload"])
                 .replace("per-file open and metadata", "per-file create and metadata") + sold(host),
                 details=details, fleet=peers)


def _wfigure(doc):
    return storage.figure(doc["gbps"]) if isinstance(doc, dict) and not doc.get("ram") else None


def test_storage_write_seq(node, store, profile, check, attach):
    t = profile.threshold("storage_write_seq")
    judge_write(node, written(store, node, "seq", t, check), t, "sequential write", check, attach,
                {n: _wfigure(d) for n, d in store.writes().alone("seq").items()})


def test_storage_write_small(node, store, profile, check, attach):
    t = profile.threshold("storage_write_small")
    judge_write(node, written(store, node, "small", t, check), t, "small-file write", check, attach,
                {n: _wfigure(d) for n, d in store.writes().alone("small").items()})


def test_storage_write_aggregate(store, profile, fleet, check, attach):
    """Every writing host writes its own files into the path, started at the same moment (the
    checkpoint pattern); the aggregate is all they wrote over the time until the last was done
    (judge.makespan), each host's share its own rate; every host's bytes read back."""
    t = profile.threshold("storage_write_aggregate")
    w = store.writes()
    if not w.writers():
        why = "; ".join(w.readonly(n) for n in store.names)
        check.record(None, t.expected, t.unit, t.source, {"written": why})
        not_applicable(f"all hosts: nothing written: {why}")
    got = w.aggregate()
    if "errors" in got:
        check.record(None, t.expected, t.unit, t.source,
                     {"errors": {n: str(e) for n, e in got["errors"].items()}})
        raise ProbeError("all hosts: the aggregate write needs every writing host: "
                         + "; ".join(str(e) for e in got["errors"].values()))
    docs, ov, limit = got["docs"], got["overlap"], w.limit()
    measured = storage.figure(ov["aggregate"])
    shares = {n: storage.figure(v) for n, v in sorted(ov["per_host"].items(), key=lambda kv: kv[1])}
    d0 = next(iter(docs.values()))
    skipped = [n for n in store.names if n not in docs]
    info = {"window_s": round(ov["seconds"], 3), "coverage": round(ov["coverage"], 3),
            "per_host_in_window": shares, "read_only_hosts": skipped,  # in_window: the read's key
            "clock_offsets_s": {n: round(o, 4) for n, o in got["offsets"].items()},
            "per_host": {n: {**storage.details(d), "gbps": d["gbps"], "spans": ov["spans"][n],
                             "verify_bad_bytes": d["verify"]["bad_bytes"]} for n, d in docs.items()}}
    attach("html", html_table({
        "aggregate": f"{measured} GB/s: {len(docs)} hosts' writes done in {ov['seconds']:.2f} s",
        "per host (GB/s, its own write)": shares, "path": d0["path"],
        "filesystem": storage.storage_kind(d0["fs"])}), "aggregate write")
    ram = [n for n, d in docs.items() if d["ram"]]
    if ram:
        check.record(measured, limit.expected, limit.unit, limit.source, info)
        raise ProbeError(f"all hosts: aggregate write {measured} GB/s is not a storage figure: "
                         f"RAM-backed path on {', '.join(ram)}")
    if ov["coverage"] < storage.MIN_OVERLAP:
        check.record(measured, limit.expected, limit.unit, limit.source, info)
        raise ProbeError(f"all hosts: the hosts' writes started {1 - ov['coverage']:.0%} of the "
                         f"{ov['seconds']:.2f} s apart: they did not write at the same moment (clock "
                         f"offsets {info['clock_offsets_s']})")
    node_min = storage.knobs(t)["node_min"]
    starved = storage.starved(shares, node_min)
    per_host = f" and every host >= {node_min:g} {limit.unit}" if node_min is not None else ""
    check.record(measured, limit.expected + per_host, limit.unit, limit.source, info)
    if skipped:
        check.note(f"not writing (read-only): {', '.join(skipped)}")
    if starved or not limit.ok(measured):
        pytest.fail(f"all hosts: aggregate write of {len(docs)} host(s) at once, done in "
                    f"{ov['seconds']:.1f} s, "
                    f"to {d0['path']} = {measured} {limit.unit}, expected {limit.expected}{per_host} "
                    f"({limit.profile}, source: {limit.source})"
                    + (f"; below the per-host minimum: {', '.join(starved).replace(' read ', ' wrote ')}"
                       if starved else "")
                    + f"; likely cause: {storage.aggregate_cause(shares, d0)}", pytrace=False)


def test_storage_write_verify(node, store, profile, check, attach):
    """Every byte this host wrote (its alone writes and its part of the aggregate) read back
    from the storage and checked: any byte that differs FAILs, naming the file and offset."""
    t = profile.threshold("storage_write_verify")
    w = store.writes()
    try:
        got = w.verified(node.name)
    except writes.ReadOnly as exc:
        check.record(None, t.expected, t.unit, t.source, {"written": str(exc)})
        not_applicable(str(exc))
    bad = sum(v["bad_bytes"] for _, v in got)
    checked = sum(v["bytes_checked"] for _, v in got)
    details = {"read_back": {wl: v for wl, v in got}, "bytes_checked": checked}
    attach("html", html_table({f"{wl} write": f"{v['bytes_checked']} bytes read back, {v['bad_bytes']} "
                                              f"wrong ({v['how']})" for wl, v in got}), "write read-back")
    short = [f"{wl}: {v['bytes_checked']} of {v['bytes_written']}" for wl, v in got
             if v["bytes_checked"] < v["bytes_written"]]
    if short and not bad:
        check.record(None, t.expected, t.unit, t.source, details)
        raise ProbeError(f"{node}: the read-back checked fewer bytes than were written ({'; '.join(short)})")
    cached = writes.from_memory(got)
    if cached and not bad:  # bytes read wrong from memory are still wrong: those FAIL below
        check.record(None, t.expected, t.unit, t.source, details)
        raise ProbeError(f"{node}: no disk read-back: the {checked} bytes checked were read from memory "
                         f"still holding what was written, not from the storage ({cached})")
    first = [(wl, m) for wl, v in got for m in v["mismatches"]][:3]
    where = "; ".join(f"{m['file']} at offset {m['offset']} ({m['bytes']} bytes wrong, {wl} write)"
                      for wl, m in first)
    check.record(bad, t.expected, t.unit, t.source, details)
    est = sum(v.get("bad_bytes_estimated", 0) for _, v in got)
    blocks = sum(v.get("bad_blocks", 0) for _, v in got)
    if not t.ok(bad):
        pytest.fail(f"{node}: {bad} of {checked} bytes written read back wrong"
                    + (f" (at most: {blocks} bad 4 KiB blocks, {est} bytes of them counted as whole blocks)"
                       if est else "") + f", expected {t.expected} "
                    f"({t.profile}, source: {t.source}): {printable(where)}; likely cause: the storage "
                    f"corrupts data on its way (disk, controller, RAID or filesystem, its network or "
                    f"client); the data written here is not what a job would read back", pytrace=False)
