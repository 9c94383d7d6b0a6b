"""The page per GPU to send back ("RMA packet", rma.jinja2): which board (serial, PCI slot, model,
VBIOS, UUID, the host and driver), what failed and when (each failed check that names the GPU, the
run's window and the host's measurement windows, the XID/NVRM lines naming its PCI address, with
their times), and the evidence files beside it. A GPU gets a page only where a failed check's
message names it (its index as 'GPU 3', its serial, UUID or PCI address): a host's fault that names
no GPU (a slow NIC, a wrong computation) sends back no board. Pure: data in, a rendered page out."""

from __future__ import annotations

import re

from signoff.render import render

TEMPLATE = "evidence/rma.jinja2"
SHOWN = ("status", "criterion", "message", "expected", "measured", "unit")  # of each failed record
_BUS = re.compile(r"(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?")


def _text(v) -> str:
    return v if isinstance(v, str) else "" if v is None else str(v)


def bus_keys(bus) -> list[str]:
    """The forms a GPU's PCI address takes in messages and kernel lines (NVML's 00000000:17:00.0,
    lspci's 0000:17:00.0, an XID's PCI:0000:17:00), lower case."""
    m = _BUS.fullmatch(_text(bus).strip())
    if not m:
        return []
    dom = int(m.group(1) or "0", 16)
    b, d = m.group(2).lower(), m.group(3).lower()
    return [f"{dom:08x}:{b}:{d}", f"{dom:04x}:{b}:{d}"]


def _names(text: str, g: dict) -> bool:
    low = text.lower()
    # signoff's own words for a GPU ('GPU 3', as every check writes it): case and space as written, so
    # a host named gpu1 or GPU1 names no GPU
    if isinstance(g.get("index"), int) and re.search(rf"\bGPU {g['index']}\b", text):
        return True
    ids = [_text(g.get("serial")), _text(g.get("uuid"))]
    if any(len(x) >= 6 and x.lower() in low for x in ids):
        return True
    return any(k in low for k in bus_keys(g.get("pci_bus_id")))


def _gpus(facts) -> list[dict]:
    nv = facts.get("nvidia") if isinstance(facts, dict) else None
    return [g for g in (nv.get("gpus") if isinstance(nv, dict) else None) or [] if isinstance(g, dict)]


def named(facts, records: list[dict]) -> list[dict]:
    """The host's GPUs a failed record's message names, each with those records."""
    out = []
    for g in _gpus(facts):
        # the message less its host's name (gpu01: ...), which names no GPU
        recs = [r for r in records
                if _names(_text(r.get("message")).replace(_text(r.get("host")) or "\0", " "), g)]
        if recs:
            out.append({"index": g.get("index"), "records": recs,
                        **{k: _text(g.get(k)) for k in ("name", "serial", "uuid", "pci_bus_id", "vbios")}})
    return out


def hardware_lines(facts) -> list[str]:
    """The index's Hardware: each GPU's identity, the driver, the kernel, the NIC firmware."""
    if not isinstance(facts, dict) or "error" in facts:
        return []
    nv = facts.get("nvidia") if isinstance(facts.get("nvidia"), dict) else {}
    stack = facts.get("stack") if isinstance(facts.get("stack"), dict) else {}
    out = [f"hostname {_text(facts.get('hostname')) or '?'}, kernel {_text(facts.get('kernel')) or '?'}, "
           f"NVIDIA driver {_text(nv.get('driver')) or 'none read'}"]
    out += [f"GPU {g.get('index')}: {_text(g.get('name'))}, serial {_text(g.get('serial')) or 'not read'}, "
            f"PCI {_text(g.get('pci_bus_id')) or '?'}, VBIOS {_text(g.get('vbios')) or 'not read'}, "
            f"UUID {_text(g.get('uuid')) or 'not read'}" for g in _gpus(facts)]
    fw = stack.get("nic_firmware")
    if isinstance(fw, dict) and fw:
        out += [f"NIC {_text(k)}: firmware {_text(v)}" for k, v in fw.items()]
    elif fw:
        out.append(f"NIC firmware {_text(fw)}")
    return out


def page(doc: dict, host: str, facts, g: dict, kernel: str, windows: dict, files: list[str], archive: str):
    """The RMA page of GPU `g` (named()'s) of `host`: rendered through rma.jinja2 (autoescaped)."""
    meta = doc.get("meta") or {}
    nv = facts.get("nvidia") if isinstance(facts, dict) and isinstance(facts.get("nvidia"), dict) else {}
    keys = bus_keys(g["pci_bus_id"])
    xids = [ln for ln in kernel.splitlines() if keys and any(k in ln.lower() for k in keys)]
    return render(TEMPLATE, host=host, gpu=g, run=meta.get("run"), started=meta.get("started"),
                  finished=meta.get("finished"), driver=_text(nv.get("driver")),
                  hostname=_text(facts.get("hostname")) if isinstance(facts, dict) else "",
                  failed=[{k: r.get(k) for k in SHOWN} for r in g["records"]],
                  windows=[{"what": k, "start": v[0], "end": v[1]} for k, v in sorted((windows or {}).items())
                           if isinstance(v, (list, tuple)) and len(v) == 2],
                  xids="\n".join(xids[-200:]), files=files, archive=archive)
