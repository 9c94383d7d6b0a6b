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
