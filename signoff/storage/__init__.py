"""Storage read throughput: one host alone (large sequential blocks, many small files) and
every host at once (the aggregate over the window all were reading). probe_storage claims,
prepares, reads (fio or the built-in reader) and cleans; run.py drives it on every host;
judge.py holds the knobs, the overlap window and the likely causes."""

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
}
PLUGIN = "signoff.storage.plugin"


def estimate(config, prof, picked, pairs) -> list[str]:
    """`signoff plan`: each read's runtime (a shared filesystem adds its hosts' reads alone)."""
    from signoff.storage.judge import knobs
    reads = [c for c in CRITERIA if c in picked and c in prof.criteria]
    if not reads:
        return []
    parts = [f"{c.removeprefix('storage_read_')} {knobs(prof.criteria[c])['runtime']} s" for c in reads]
    return [f"storage reads: {', '.join(parts)} (a shared filesystem's hosts read alone one "
            f"after another: up to alone_sample of them)"]


def preflight(ctx, host, facts) -> tuple[list[str], list[str]]:
    """The path the storage checks read, its filesystem, the reader that serves; warned: a path
    the storage probe refuses (its own message), a RAM-backed one (no storage figure: ERROR), the
    temp dir read for want of a storage_path."""
    pf = facts.get("preflight") or {}
    st = pf.get("storage")
    checks = [c for c in CRITERIA if c in ctx.picked]
    if not st or not checks:
        return [], []
    tmp = "; the temp dir: no storage_path" if st.get("temp_dir") else ""
    if st.get("error"):
        return [f"storage {st.get('path') or 'temp dir'} ({st['error']}{tmp})"], \
            [f"{', '.join(checks)} ERROR: {st['error']}"]
    fio = (pf.get("tools") or {}).get("fio")
    # the storage probe's own choice (cmd_read): fio where installed, unless forced either way
    want = ctx.config.getoption("storage_tool") if ctx.config else "auto"
    reader = "built-in reader" if want == "builtin" else "fio" if fio else \
        "built-in reader (fio is not installed on this host)"
    shared = ", network filesystem" if st.get("network") else ""
    said = [f"storage {st['path']} ({st['fstype']} on {st['mount']}{shared}{tmp}), read by {reader}"]
    if st.get("ram"):
        return said, [f"{', '.join(checks)} ERROR: {st['path']} is {st['fstype']}, RAM-backed: its "
                      f"files live in the page cache, so a read of it is not a storage figure"]
    if st.get("temp_dir"):
        return said, [f"{', '.join(checks)} read the temp dir {st['path']} ({st['fstype']} on "
                      f"{st['mount']}), not the dataset filesystem: no storage_path in the inventory, no "
                      f"--storage-path"]
    return said, []
