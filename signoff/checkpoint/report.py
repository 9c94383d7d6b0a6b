"""The report's checkpoint section: each host's save and restore against their floors (bars in
the verdict's colour; a histogram above MATRIX_MAX_HOSTS hosts), what a checkpoint every interval
costs, and the slowest hosts' figures in a table (bounded: never 1,000 rows)."""

from __future__ import annotations

from signoff.figures import img, png, pyplot
from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, VERDICT_COLOURS, status_class

FIGURES = (("checkpoint_save", "save (torch.save + fsync)"), ("checkpoint_restore", "restore (torch.load)"))
ROWS = 20  # the slowest saves in the table
ORDER = ("PASS", "N.A.", "ERROR", "FAIL")  # a row in its worst check's colour


def per_host_figure(records: list[dict], profile) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    for ax, (crit, label) in zip(axes, FIGURES):
        vals = {r["host"]: r["measured"] for r in records if r["criterion"] == crit
                and isinstance(r.get("measured"), (int, float))}
        t = profile.criteria.get(crit) if profile else None
        few = len(vals) <= MATRIX_MAX_HOSTS
        if few:
            hosts = sorted(vals)
            said = {r["host"]: r["status"] for r in records if r["criterion"] == crit}
            ax.bar(range(len(hosts)), [vals[h] for h in hosts],
                   color=[VERDICT_COLOURS.get(said.get(h), "tab:blue") for h in hosts])
            ax.set_xticks(range(len(hosts)), hosts, rotation=60, fontsize=7)
        else:
            ax.hist(list(vals.values()), bins=40, color="tab:blue")
            ax.set_xlabel("GB/s", fontsize=8)
        if t is not None:
            line = ax.axhline if few else ax.axvline
            line(t.value, color="red", lw=1, label=f"floor {t.value:g} {t.unit}")
            ax.legend(fontsize=7)
        ax.set_title(f"checkpoint {label}, {len(vals)} host(s) (GB/s)", fontsize=9)
        ax.grid(alpha=0.3)
    return png(fig)


def checkpoint_section(records: list[dict], profile) -> str:
    saves = [r for r in records if r["criterion"] == "checkpoint_save"
             and isinstance((r.get("details") or {}).get("save"), dict)]
    if not saves:
        return ""
    by = {(r["criterion"], r["host"]): r for r in records}
    rows = []
    for r in sorted(saves, key=lambda r: -r["details"]["save"]["seconds"])[:ROWS]:
        d = r["details"]
        back = by.get(("checkpoint_restore", r["host"]), {})
        intact = by.get(("checkpoint_intact", r["host"]), {})
        worst = max((x.get("status") for x in (r, back, intact)),
                    key=lambda s: ORDER.index(s) if s in ORDER else -1)
        rows.append({"cls": status_class(worst), "host": r["host"], "bytes": f"{d.get('bytes', 0) / 1e9:.3g}",
                     "save_s": d["save"]["seconds"], "save": r.get("measured"),
                     "restore_s": (d.get("restore") or {}).get("seconds"), "restore": back.get("measured"),
                     "intact": intact.get("status"), "device": d.get("device"), "path": d.get("path")})
    cost = next((r["note"] for r in saves if r.get("note")), "")
    return render("checkpoint/section.jinja2", rows=rows, more=max(0, len(saves) - ROWS), cost=cost,
                  figure=img(per_host_figure(records, profile), "checkpoint per host"))


def methodology(doc: dict, profile) -> list[dict]:
    d = next((r["details"] for r in doc["results"]
              if r["criterion"] == "checkpoint_save" and r.get("details")), {})
    m = d.get("model") or {}
    return [{"check": "checkpoint_save, checkpoint_restore, checkpoint_intact",
             "tool": f"torch {d.get('torch') or '?'} torch.save / torch.load",
             "how": f"{m.get('layers', '?')} x nn.TransformerEncoderLayer({m.get('d_model', '?')}, ffn "
                    f"{m.get('ffn', '?')}) and AdamW after {m.get('steps', '?')} steps "
                    f"({d.get('size_from') or 'the profile'}: "
                    f"fp32 weights and both moments, 12 bytes a parameter) on cuda:0 where torch sees a GPU, "
                    f"else the CPU, one process per host, every host at once; save = torch.save of the "
                    f"model's and the optimizer's state_dict into the storage path + fsync of the file "
                    f"and its directory; then posix_fadvise(DONTNEED) on the file, checked with mincore "
                    f"(a file the cache still holds, or a RAM-backed path: ERROR, no disk figure); restore "
                    f"= torch.load(map_location=the same device); every tensor compared with the one in "
                    f"memory as bytes; GB/s = the file's bytes / seconds, 1e9 B; the cost of a checkpoint "
                    f"every interval = save / (interval + save), of the slowest host"}]
