"""Storage read and write throughput: one host alone (large sequential blocks, many small files)
and every host at once (the aggregate over the window all were reading, or writing); every byte
written read back and checked. probe_storage claims, prepares, reads (fio or the built-in reader)
and cleans; probe_storage_write writes, reads back and removes; run.py and writes.py drive them
on every host; judge.py holds the knobs, the overlap window and the likely causes."""

from signoff.storage.judge import check_extra, check_profile  # noqa: F401 - the family's validators

# retry: a miss read again, up to `attempts` in all (signoff/retry.py; run.py aggregate, _again)
CRITERIA = {
    "storage_read_seq": {"type": "number", "extra": ("size", "bs", "jobs", "iodepth", "runtime",
                                                     "alone_sample"), "retry": True, "fleet": True},
    "storage_read_small": {"type": "number", "extra": ("files", "file_size", "bs", "jobs", "runtime",
                                                       "alone_sample"), "retry": True, "fleet": True},
    # with_limit: what the min is of (per) and every node's floor (node_min): set with the min in a
    # child (profiles.py)
    "storage_read_aggregate": {"type": "number", "extra": ("runtime", "per", "node_min"), "retry": True,
                               "with_limit": ("per", "node_min")},
    # writes: one pass each, read back before the files go (writes.py); no retry: a write's
    # figure is its one pass, and its read-back is a correctness check
    "storage_write_seq": {"type": "number", "extra": ("size", "bs", "jobs", "iodepth", "alone_sample"),
                          "fleet": True},
    "storage_write_small": {"type": "number", "extra": ("files", "file_size", "bs", "jobs", "alone_sample"),
                            "fleet": True},
    "storage_write_aggregate": {"type": "number", "extra": ("size", "per", "node_min"),
                                "with_limit": ("per", "node_min")},
    "storage_write_verify": {"type": "number", "ops": ("max",)},  # bytes that read back wrong
}
PLUGIN = "signoff.storage.plugin"


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: each read's runtime (a shared filesystem adds its hosts' reads alone)."""
    from signoff.storage.judge import knobs
    from signoff.units import parse_size
    out = []
    reads = [c for c in CRITERIA if c.startswith("storage_read_") and c in picked and c in prof.criteria]
    if reads:
        parts = [f"{c.removeprefix('storage_read_')} {knobs(prof.criteria[c])['runtime']} s" for c in reads]
        out.append(f"storage reads: {', '.join(parts)} (a shared filesystem's hosts read alone one "
                   f"after another: up to alone_sample of them)")
    writes = [c for c in ("storage_write_seq", "storage_write_small", "storage_write_aggregate")
              if c in prof.criteria and (c in picked or "storage_write_verify" in picked)]
    if writes:
        def size(c):
            k = knobs(prof.criteria[c])
            return k["files"] * parse_size(k["file_size"]) if "files" in k else parse_size(k["size"])
        # at the class's own write floor (GB/s), written then read back (x 2); the lab's: seconds
        parts = [f"{c.removeprefix('storage_write_')} {size(c) / 1e9:.3g} GB (<= "
                 f"{2 * size(c) / 1e9 / max(prof.criteria[c].value, 1e-9):.0f} s at the floor, read back)"
                 for c in writes]
        out.append(f"storage writes: {', '.join(parts)} (each written once, read back, removed; a shared "
                   f"filesystem's hosts write alone one after another: up to alone_sample of them)")
    return out


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The path the storage checks read and write, its filesystem, the reader and writer that
    serve, the free space the writes start from (or none written: read-only); warned: a path the
    storage probe refuses (its own message), a RAM-backed one (no storage figure: ERROR), the temp
    dir read (written) for want of a storage_path."""
    pf = facts.get("preflight") or {}
    st = pf.get("storage")
    checks = [c for c in CRITERIA if c in ctx.picked]
    if not st or not checks:
        return [], []
    fio = (pf.get("tools") or {}).get("fio")
    # the storage probe's own choice (cmd_read): fio where installed, unless forced either way
    want = ctx.config.getoption("storage_tool") if ctx.config else "auto"
    writes = [c for c in checks if c.startswith("storage_write_")]
    reads = [c for c in checks if c not in writes]
    wrote = ""
    if writes:  # what the writes will do, said before they run
        ro = (ctx.config.getoption("storage_readonly") if ctx.config else False) or \
            getattr(host, "storage_readonly", False)
        free = st.get("free")
        writer = "fio" if fio and want != "builtin" else "the built-in writer"
        wrote = ("; writes: none (read-only: the write checks N.A.)" if ro else
                 f"; written by {writer}"
                 # GiB, not bytes: hosts on one filesystem still fold into one line
                 f", {free / 2 ** 30:.0f} GiB free (checked again before each write)" if free is not None else
                 "; written, free space checked before each write")
    tmp = "; the temp dir: no storage_path" if st.get("temp_dir") else ""
    if st.get("error"):
        return [f"storage {st.get('path') or 'temp dir'} ({st['error']}{tmp})"], \
            [f"{', '.join(checks)} ERROR: {st['error']}"]
    reader = "built-in reader" if want == "builtin" else "fio" if fio else \
        "built-in reader (fio is not installed on this host)"
    shared = ", network filesystem" if st.get("network") else ""
    said = [f"storage {st['path']} ({st['fstype']} on {st['mount']}{shared}{tmp}), read by {reader}{wrote}"]
    warned = []  # the reads' lines as they were; the writes' their own
    for group, verb in ((reads, "read"), (writes, "write")):
        if not group:
            continue
        if st.get("ram"):
            warned.append(f"{', '.join(group)} ERROR: {st['path']} is {st['fstype']}, RAM-backed: its "
                          f"files live in the page cache, so a {verb} of it is not a storage figure")
        elif st.get("temp_dir"):
            warned.append(f"{', '.join(group)} {verb} the temp dir {st['path']} ({st['fstype']} on "
                          f"{st['mount']}), not the dataset filesystem: no storage_path in the inventory, "
                          f"no --storage-path")
    return said, warned
