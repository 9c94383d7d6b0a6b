"""Checkpoint save and restore: a real torch.save of the training step's model and its AdamW
state on every host at once into the storage path, fsync'ed, read back with torch.load onto the
same device (the page cache emptied of it first) and compared bit for bit. Written only under
<path>/.signoff-<run>-<host>/ and removed at the end; --storage-readonly writes nothing (N.A.)."""

from signoff.checkpoint import judge
from signoff.figures import html_table
from signoff.fleet import ProbeError

KEPT = ("path", "file", "fs", "device", "gpu", "torch", "bytes", "state_bytes", "tensors", "params",
        "model", "size_from", "fsynced", "save", "restore", "cache", "free_before", "build_s", "injected")


def _details(doc: dict) -> dict:
    return {k: doc[k] for k in KEPT if doc.get(k) is not None}


def _what(doc: dict) -> str:
    fs = doc["fs"]
    return (f"a {judge.gb(doc['bytes'])} checkpoint ({doc['tensors']} tensors, {doc['size_from']}) on "
            f"{doc['device']}, {doc['path']} ({fs['fstype']} on {fs['mount']})")


def test_checkpoint_save(host, profile, check, attach, checkpoint, checkpoint_interval, fleet):
    doc = checkpoint(host)
    details = _details(doc)
    attach("html", html_table({
        "saved": f"{doc['bytes']} bytes in {doc['save']['seconds']} s (torch.save {doc['save']['write_s']} "
                 f"s, fsync of the file and its directory {doc['save']['fsync_s']} s)",
        "read back": f"{(doc.get('restore') or {}).get('seconds')} s; page cache: {doc['cache']}",
        "file": doc["file"], "device": f"{doc['device']} {doc.get('gpu') or ''}",
        "model": doc["model"]}), "checkpoint")
    # what it costs, said of the slowest host of the run: every host's note alike, one cover line
    docs = fleet.peers("checkpoint", lambda d: d)
    slow = judge.slowest(docs)
    if slow:
        check.note(judge.cost_line(slow, docs[slow], checkpoint_interval, len(docs)))
    gbps = doc["save"]["gbps"]
    t = profile.threshold("checkpoint_save")
    why = judge.not_disk(doc, "save")
    if why:
        check.record(gbps, t.expected, t.unit, t.source, details)
        raise ProbeError(f"{host}: checkpoint save {gbps} GB/s is not a storage figure: {why}")
    check.expect(gbps, t, f"torch.save and fsync of {_what(doc)} in {doc['save']['seconds']} s",
                 cause=judge.cause(doc, "save"), details=details)


def test_checkpoint_restore(host, profile, check, checkpoint):
    doc = checkpoint(host)
    details = _details(doc)
    t = profile.threshold("checkpoint_restore")
    if not doc.get("restore"):
        check.record(None, t.expected, t.unit, t.source, {**details, "intact": doc.get("intact")})
        raise ProbeError(f"{host}: {doc['file']} could not be loaded back, no restore figure "
                         f"({(doc.get('intact') or {}).get('load_error')}; see checkpoint_intact)")
    gbps = doc["restore"]["gbps"]
    why = judge.not_disk(doc, "restore")
    if why:
        check.record(gbps, t.expected, t.unit, t.source, details)
        raise ProbeError(f"{host}: checkpoint restore {gbps} GB/s is not a storage figure: {why}")
    check.expect(gbps, t, f"torch.load of {_what(doc)} in {doc['restore']['seconds']} s",
                 cause=judge.cause(doc, "restore"), details=details)


def test_checkpoint_intact(host, profile, check, checkpoint):
    doc = checkpoint(host)
    bad = judge.differing(doc)
    n = judge.count(doc)
    t = profile.threshold("checkpoint_intact")
    intact = doc.get("intact") or {}
    details = {**_details(doc), "compared": intact.get("compared"), "differing": bad[:50]}
    said = bad[:5] + ([f"and {len(bad) - 5} more (details)"] if len(bad) > 5 else [])
    check.require(said if not t.ok(n) else [], n,
                  f"{t.expected} {t.unit} of the {doc['tensors']} saved, bit for bit", t.source,
                  cause=judge.cause(doc, "intact"), details=details)
