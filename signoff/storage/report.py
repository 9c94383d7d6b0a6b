"""The report's storage section: each host's sequential and small-file read, and write beside
it, against its threshold (a histogram above MATRIX_MAX_HOSTS hosts), the write read-back, and
the aggregate read's timeline and the aggregate write."""

from __future__ import annotations

from signoff import retry
from signoff.figures import img, png, pyplot
from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, VERDICT_COLOURS

READS = (("storage_read_seq", "sequential"), ("storage_read_small", "small files"))
WRITES = (("storage_write_seq", "sequential"), ("storage_write_small", "small files"))


def per_host_figure(records: list[dict], profile, panels=READS, verb: str = "read") -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, (crit, label) in zip(axes, panels):
        vals = {r["host"]: r["measured"] for r in records if r["criterion"] == crit
                and isinstance(r.get("measured"), (int, float))}
        t = profile.criteria.get(crit) if profile else None
        if len(vals) <= MATRIX_MAX_HOSTS:
            hosts = sorted(vals)
            said = {r["host"]: r["status"] for r in records if r["criterion"] == crit}
            # each bar in its verdict's colour: a FAIL reads red whichever way its line is drawn
            ax.bar(range(len(hosts)), [vals[h] for h in hosts],
                   color=[VERDICT_COLOURS.get(said.get(h), "tab:blue") for h in hosts])
            ax.set_xticks(range(len(hosts)), hosts, rotation=60, fontsize=7)
        else:
            ax.hist(list(vals.values()), bins=40, color="tab:blue")
            ax.set_xlabel("GB/s", fontsize=8)
        if t is not None:
            (ax.axhline if len(vals) <= MATRIX_MAX_HOSTS else ax.axvline)(
                t.value, color="red", lw=1, label=f"threshold {t.value:g} {t.unit}")
            ax.legend(fontsize=7)
        ax.set_title(f"{label} {verb}, {len(vals)} host(s) (GB/s)", fontsize=9)
        ax.grid(alpha=0.3)
    return png(fig)


def timeline_figure(agg: dict) -> str:
    """When each host read during the aggregate read (its bar labelled with its GB/s in the
    common window); above MATRIX_MAX_HOSTS hosts, how many hosts read at each moment."""
    plt = pyplot()
    per = {h: d for h, d in (agg.get("per_host") or {}).items() if d.get("spans")}
    if not per:
        return ""
    t0 = min(d["spans"][0] for d in per.values())
    share = agg.get("per_host_in_window") or {}
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.3 * min(len(per), MATRIX_MAX_HOSTS)))
    if len(per) <= MATRIX_MAX_HOSTS:
        for i, (h, d) in enumerate(sorted(per.items())):
            a, b = d["spans"][0] - t0, d["spans"][1] - t0
            ax.barh(i, b - a, left=a, color="tab:blue", alpha=0.7)
            ax.text(b, i, f" {share.get(h, d.get('gbps'))} GB/s", va="center", fontsize=7)
        ax.set_yticks(range(len(per)), sorted(per), fontsize=7)
    else:
        edges = sorted([(d["spans"][0] - t0, 1) for d in per.values()]
                       + [(d["spans"][1] - t0, -1) for d in per.values()])
        xs, ys, n = [], [], 0
        for x, step in edges:
            n += step
            xs.append(x)
            ys.append(n)
        ax.step(xs, ys, where="post")
        ax.set_ylabel("hosts reading", fontsize=8)
    ax.set_xlabel("s since the first host started reading", fontsize=8)
    ax.set_title(f"aggregate read: {agg.get('window_s')} s common window, coverage "
                 f"{agg.get('coverage')}", fontsize=9)
    return png(fig)


def storage_section(records: list[dict], profile) -> str:
    if not any(r["criterion"].startswith("storage_") for r in records):
        return ""
    per_host = ""
    if any(r["criterion"] in dict(READS) and isinstance(r.get("measured"), (int, float)) for r in records):
        per_host = img(per_host_figure(records, profile), "storage read per host")
    agg = next((r for r in records if r["criterion"] == "storage_read_aggregate"), None)
    shown = None
    if agg and (agg.get("details") or {}).get("per_host"):
        fig = timeline_figure(agg["details"])
        shown = {"status": agg["status"], "measured": agg.get("measured"), "unit": agg.get("unit"),
                 "expected": agg.get("expected"),
                 "figure": img(fig, "aggregate read timeline") if fig else ""}
    writes = ""
    if any(r["criterion"] in dict(WRITES) and isinstance(r.get("measured"), (int, float)) for r in records):
        writes = img(per_host_figure(records, profile, WRITES, "write"), "storage write per host")
    wagg = next(({"status": r["status"], "measured": r.get("measured"), "unit": r.get("unit"),
                  "expected": r.get("expected")} for r in records
                 if r["criterion"] == "storage_write_aggregate"), None)
    # the read-back: hosts whose written bytes read back wrong, with the first file and offset
    verify = [{"host": r["host"], "status": r["status"], "measured": r.get("measured"),
               "message": r.get("message") or ""} for r in records
              if r["criterion"] == "storage_write_verify" and r["status"] != "PASS"][:MATRIX_MAX_HOSTS]
    checked = sum(1 for r in records if r["criterion"] == "storage_write_verify" and r["status"] == "PASS")
    return render("storage/section.jinja2", per_host=per_host, agg=shown, writes=writes, wagg=wagg,
                  verify=verify, verified=checked)


def methodology(doc: dict, profile) -> list[dict]:
    d = next((r["details"] for r in doc["results"]
              if r["criterion"] == "storage_read_seq" and r.get("details")), {})
    p = d.get("params") or {}
    crits = profile.criteria if profile else {}
    tries = {c.split("_")[-1]: retry.count(t) for c, t in crits.items()
             if c.startswith("storage_read_")}  # the retry policy: seq 3, small 3, aggregate 3; writes none
    how = (f"bs {p.get('bs')} B, iodepth {p.get('iodepth')}, {p.get('numjobs')} jobs, "
           f"{'O_DIRECT' if p.get('direct') else 'buffered, page cache dropped'}, {p.get('runtime_s')} s "
           f"time-based" if p else "the profile's block size, depth, jobs and duration")
    return [{"check": "storage_read_seq, storage_read_small, storage_read_aggregate",
             "tool": d.get("tool_version") or d.get("tool") or "fio (built-in reader where fio is absent)",
             "how": f"{how}; small files: many files of the profile's size, each opened and read whole; "
                    f"GB/s = 1e9 B/s; a shared "
                    f"filesystem's hosts read alone on a sample, then every host at once for the "
                    f"aggregate, summed over the window in which all of them were reading; a read "
                    f"(or the aggregate) that misses its threshold is read again, up to its attempts "
                    f"({', '.join(f'{w} {n}' for w, n in tries.items()) or retry.ATTEMPTS} in all), "
                    f"the best judged; one with an error, through the page cache or with too "
                    f"little overlap never"},
            {"check": "storage_write_seq, storage_write_small, storage_write_aggregate, storage_write_verify",
             "tool": "fio rw=write (crc32c verify headers, then verify_only) or the built-in writer",
             "how": "one pass of the profile's size per host (large files; many small files, each "
                    "created, written, synced, closed), O_DIRECT where the filesystem takes it, synced; "
                    "then every byte read back (fio's crc32c per 4 KiB block, or compared per 4 KiB "
                    "block with the built-in writer's pattern; a read-back the cache still held is no "
                    "disk read-back: ERROR) and the files removed; the aggregate: every "
                    "host at once, all bytes over the time until the last host was done; nothing "
                    "written with --storage-readonly (N.A.)"}]
