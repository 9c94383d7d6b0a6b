"""The report's versions section: driver/CUDA/NCCL/PyTorch per host (or per value on a large
cluster), the values that differ from the majority marked."""

from __future__ import annotations

from signoff.render import render
from signoff.report import MATRIX_MAX_HOSTS, hosts_text, probe_env_text
from signoff.units import readable
from signoff.versions import parity


def judged_env(hosts: dict[str, dict], meta: dict) -> dict:
    """Whose software the section shows: each host's probe interpreter (the training
    environment it was pointed at), or signoff's own on a bare machine."""
    pys: dict[str, list[str]] = {}
    for h, f in hosts.items():
        if "error" not in f:
            pys.setdefault(str(f.get("python_executable")), []).append(h)
    return {"where": "; ".join(f"{py} on {hosts_text(hs)}" for py, hs in sorted(pys.items())),
            "own": probe_env_text(meta)}


def versions_matrix(hosts: dict[str, dict], meta: dict | None = None) -> str:
    ok = {h: f for h, f in hosts.items() if "error" not in f}
    per_host = {h: parity.versions(f) for h, f in ok.items()}
    odd = parity.odd_cells(per_host) if len(per_host) > 1 else set()
    for h, f in ok.items():  # the GPUs, as one more field
        gpus = (f.get("nvidia") or {}).get("gpus") or []
        per_host[h]["gpus"] = f"{len(gpus)} x {gpus[0]['name']}" if gpus else "no GPU"
    labels = {**{k: label for k, (label, _) in parity.FIELDS.items()}, "gpus": "GPUs"}
    few = len(hosts) <= MATRIX_MAX_HOSTS
    return render("versions/section.jinja2", **judged_env(hosts, meta or {}), per_host=few,
                  **(_versions_per_host(hosts, per_host, odd, labels) if few else
                     _versions_per_value(hosts, per_host, odd, labels)),
                  errors=[(h, f["error"]) for h, f in sorted(hosts.items()) if "error" in f])


def _versions_per_host(hosts, per_host, odd, labels) -> dict:
    names = sorted(hosts)
    return {"names": names, "rows": [
        {"label": label, "cells": [None if h not in per_host else
                                   {"odd": (h, field) in odd, "value": readable(per_host[h][field])}
                                   for h in names]} for field, label in labels.items()]}


def _versions_per_value(hosts, per_host, odd, labels) -> dict:
    """Per field, each distinct value with the hosts holding it (folded), the most common first."""
    rows = []
    for field, label in labels.items():
        holders: dict[str, list[str]] = {}
        for h, v in per_host.items():
            holders.setdefault(readable(v[field]), []).append(h)
        rows.append({"label": label, "cells": [
            {"odd": any((h, field) in odd for h in hs), "value": value, "n": len(hs), "hosts": hosts_text(hs)}
            for value, hs in sorted(holders.items(), key=lambda x: -len(x[1]))]})
    unreachable = sorted(set(hosts) - set(per_host))
    return {"rows": rows,
            "unreachable": {"n": len(unreachable), "hosts": hosts_text(unreachable)} if unreachable else None}
