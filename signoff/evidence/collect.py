"""The controller's part of the evidence: which hosts (those exclude.hostlist names: the same fold of
causes as report.exclude_files; every host with --evidence all), the fresh collection from them once
after the measurements (probe_evidence.py, every host at once, a time and size budget each), and
each host's folder evidence/<host>/ with its index and the archive evidence/<host>.tar.gz.

Nothing a host printed names a file: the folder is the inventory's host name made a plain file name
(safe_name), the fresh pieces are written under names of ours, the run's documents under the
families' names made plain. What a host printed is kept as it printed it (evidence), and said in
the index only through printable()."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from signoff import causes, families, safefile
from signoff.evidence import DIR, rma
from signoff.fleet import ProbeError
from signoff.printable import printable
from signoff.report import md_text
from signoff.results import dumps, split_nodeid
from signoff.transport import HostUnreachable

SLACK_S = 30  # the controller waits this much past the probe's own budget (start, transfer)
RUN_DOC_MAX = 5 * 10 ** 6  # bytes of one run document kept in the folder (a soak's samples: cut, said)
# the fresh pieces, by the probe's name: the file each is written to (never a name the host chose)
PIECES = {"kernel-log": "kernel-log.txt", "nvidia-smi-q": "nvidia-smi-q.txt", "lspci": "lspci-vvv.txt",
          "nvidia-bug-report": "nvidia-bug-report.log.gz"}
WHOLE = ("nvidia-bug-report",)  # kept whole or not at all: a cut gzip is no evidence
_BDF = re.compile(r"[0-9A-Fa-f]{1,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_NIC = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PLAIN = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text, limit: int = 64) -> str:
    """`text` as one plain file name: letters, digits, '.', '_', '-' only, no leading dot or dash
    (never '..', never a path), at most `limit` characters; a name that had to change (or ends in
    .tar.gz, an archive's name) gets its SHA-256's first 8 hex digits, so two hosts never share one."""
    text = str(text)
    plain = _PLAIN.sub("_", text)[:limit].lstrip(".-") or "_"
    if plain != text or plain.endswith(".tar.gz"):
        plain = f"{plain}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
    return plain


SERIAL = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,39}")  # what a board serial looks like


def _serial_stem(g: dict, i: int) -> str:
    """A GPU page's name: its serial where it looks like one, else gpu<n> and a hash of what the
    host said (a host-printed string never becomes a file name, even made plain)."""
    serial = str(g.get("serial") or "")
    if SERIAL.fullmatch(serial):
        return serial
    said = f"{serial}/{g.get('index')}".encode("utf-8", "surrogatepass")
    return f"gpu{i}-{hashlib.sha256(said).hexdigest()[:8]}"


def hosts_for(doc: dict, mode: str) -> list[str]:
    """The hosts whose evidence is kept: those exclude.hostlist names (failed), every host of the
    run (all), none."""
    if mode == "none":
        return []
    if mode == "all":
        return list(dict.fromkeys([*(doc.get("meta") or {}).get("hosts", []), *(doc.get("hosts") or {})]))
    return causes.to_exclude(causes.host_findings(doc)[0])


def record(nodeid: str, status: str, message: str, measured: dict) -> dict:
    """A check's record as the recorder adds it: the last check's, at its own teardown, before the
    recorder has it (the hosts are picked while the fleet is still open)."""
    criterion, host = split_nodeid(nodeid)
    return {"test": nodeid, "criterion": criterion, "host": host, "status": status, "message": message,
            **measured}


def with_records(doc: dict, more: list[dict]) -> dict:
    return {**doc, "results": [*(doc.get("results") or []), *more]}


def records_by_host(doc: dict, hosts: list[str]) -> dict[str, list[dict]]:
    """Each host's FAIL and ERROR records: its own checks', the failed pairs it is an end of, the
    checks across hosts that name it (at_fault, culprits, a bisection's slow hosts); one pass."""
    want = set(hosts)
    out: dict[str, list[dict]] = {h: [] for h in hosts}
    slow = {id(r): h for h, rs in causes.named_slow(doc.get("results") or []).items() for r in rs}
    for r in doc.get("results") or []:
        if r.get("status") not in ("FAIL", "ERROR"):
            continue
        d = r.get("details") if isinstance(r.get("details"), dict) else {}
        named = [r.get("host"), *(causes.pair_ends(r.get("host") or "") or ()), *(d.get("at_fault") or {}),
                 *(d.get("culprits") or []), slow.get(id(r))]
        for h in dict.fromkeys(n for n in named if isinstance(n, str) and n in want):
            out[h].append(r)
    return out


def why_by_host(doc: dict, hosts: list[str], mode: str) -> dict[str, list[str]]:
    """Why each host's evidence is kept: its findings (the cover's By host lines), or --evidence all."""
    groups, _ = causes.host_findings(doc)
    out: dict[str, list[str]] = {h: [] for h in hosts}
    for g in groups:
        for h in g.hosts:
            if h in out:
                out[h] += [f"{f.status} {', '.join(f.checks)}: {f.what}" + (f" ({f.evidence})" if f.evidence
                                                                             else "") + f": {f.action}"
                           for f in g.findings]
    return {h: ls or [f"--evidence {mode}: every host's evidence kept" if mode == "all" else "no finding"]
            for h, ls in out.items()}


def _gpus(facts) -> list[dict]:
    nv = facts.get("nvidia") if isinstance(facts, dict) else None
    return [g for g in (nv.get("gpus") if isinstance(nv, dict) else None) or [] if isinstance(g, dict)]


def probe_args(facts, budget_s: float, budget_bytes: int) -> list[str]:
    """probe_evidence.py's arguments: the budget, the GPUs' PCI functions and the RDMA devices
    sysinfo named (only what has a PCI address's or a device name's shape reaches the host)."""
    args = ["--budget-s", f"{budget_s:g}", "--budget-bytes", str(int(budget_bytes))]
    for g in _gpus(facts):
        if isinstance(g.get("pci_bus_id"), str) and _BDF.fullmatch(g["pci_bus_id"]):
            args += ["--bdf", g["pci_bus_id"]]
    nics = (facts.get("gpu_nic") or {}).get("nics") if isinstance(facts, dict) and \
        isinstance(facts.get("gpu_nic"), dict) else None
    for n in nics or []:
        if isinstance(n, dict) and isinstance(n.get("name"), str) and _NIC.fullmatch(n["name"]):
            args += ["--nic", n["name"]]
    return args


def fresh(fleet, hosts: list[str], budget_s: float, budget_bytes: int) -> dict:
    """probe_evidence.py on every host at once (the fleet's --max-parallel): host -> its document,
    or why nothing came (a string). A Ctrl-C leaves the probes to the fleet's cleanup."""
    def one(h):
        try:
            facts = fleet.facts(h)
        except (HostUnreachable, ProbeError) as exc:
            return f"not collected: the host did not answer at the run's start ({exc})"
        try:
            return fleet.sessions[h].probe("evidence", *probe_args(facts, budget_s, budget_bytes),
                                           timeout=budget_s + SLACK_S)
        except (HostUnreachable, ProbeError) as exc:
            return f"not collected: {exc}"
    pool = ThreadPoolExecutor(min(fleet.max_parallel, len(hosts)) or 1, "evidence")
    try:
        return dict(zip(hosts, pool.map(one, hosts)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _utc(t) -> str:
    try:
        return f"{datetime.fromtimestamp(float(t), timezone.utc):%Y-%m-%dT%H:%M:%SZ}"  # the epoch follows
    except (TypeError, ValueError, OverflowError, OSError):
        return "unknown time"


def xid_lines(held: dict) -> list[str]:
    """Every XID line the run read from the host's kernel log (the xid history's, the run's own),
    each with its UTC time and the host's epoch, oldest first."""
    seen, out = set(), []
    for doc in held.values():
        if not isinstance(doc, dict) or doc.get("probe") != "xids":
            continue
        for x in doc.get("xids") or []:
            if isinstance(x, dict) and (x.get("t"), x.get("line")) not in seen:
                seen.add((x.get("t"), x.get("line")))
                out.append((x.get("t") if isinstance(x.get("t"), (int, float)) else 0,
                            f"{_utc(x.get('t'))} {x.get('t')} {x.get('line')}"))
    return [line for _, line in sorted(out, key=lambda p: p[0])]


class Folder:
    """One host's folder: every file written through safefile, its size and what it is kept."""

    def __init__(self, top: Path, name: str):
        self.path = safefile.subdir(top / name)
        self.files: list[dict] = []

    def put(self, rel: str, data, what: str) -> str:
        blob = data.encode("utf-8") if isinstance(data, str) else data
        parts = rel.split("/")
        d = self.path
        for p in parts[:-1]:
            d = safefile.subdir(d / p)
        safefile.write(d / parts[-1], blob)
        self.files.append({"file": rel, "bytes": len(blob), "what": what})
        return rel


def _run_doc(doc) -> tuple[str, str]:
    text = dumps(doc, indent=1)
    if len(text) <= RUN_DOC_MAX:
        return text, ""
    return text[:RUN_DOC_MAX], f" (cut at {RUN_DOC_MAX} of its {len(text)} characters: not JSON whole)"


def _raw_files(rd: Path, host: str) -> list[tuple[str, Path]]:
    """The families' raw files of the host in the report dir (dcgm/<host>.json, soak/<host>.jsonl)."""
    out = []
    if "/" in host or "\0" in host:  # a name that is not one file name there: never a path out of it
        return out
    for d in (d for mod in families.modules() for d in getattr(mod, "REPORT_DIRS", ())):
        for ext in (".json", ".jsonl"):
            p = rd / d / f"{host}{ext}"
            if p.is_file() and not p.is_symlink():
                out.append((f"{d}{ext}", p))
    return out


def write_host(rd: Path, doc: dict, host: str, recs: list[dict], why: list[str], got, held: dict,
               windows: dict, budget: dict) -> dict:
    """evidence/<host>/ and evidence/<host>.tar.gz: the records, the run's documents, what was
    collected fresh (`got`: the probe's document, or why none), the RMA pages, the index.
    Returns the host's entry of meta.evidence."""
    name = safe_name(host)
    top = safefile.subdir(Path(rd) / DIR)
    f = Folder(top, name)
    facts = (doc.get("hosts") or {}).get(host)
    f.put("records.json", dumps(recs, indent=1), "the host's FAIL and ERROR records (results.json's)")
    if facts is not None:
        f.put("sysinfo.json", dumps(facts, indent=1), "the host's sysinfo at the run's start: serials, PCI "
              "addresses, VBIOS, driver, NIC firmware, fabric and IMEX state, the error counters")
    for fam, d in sorted(held.items()):
        text, cut = _run_doc(d)
        f.put(f"run/{safe_name(str(fam).replace(' ', '-'))}.json", text,
              f"the run's {fam} document of the host{cut}")
    xids = xid_lines(held)
    if xids:
        f.put("kernel-xids.txt", "\n".join(xids) + "\n", "the XID lines the run read from its kernel log, "
              "with their times (UTC, then the host's epoch)")
    for rel, p in _raw_files(Path(rd), host):
        f.put(f"raw/{rel}", p.read_bytes(), f"the report dir's {p.parent.name}/{p.name}")
    pieces = _fresh(f, got, budget)
    klog = "\n".join(xids)
    kfile = f.path / "fresh" / PIECES["kernel-log"]
    if kfile.is_file():
        klog += "\n" + kfile.read_text(errors="replace")
    gpus = rma.named(facts, recs)
    taken: set[str] = set()
    for i, g in enumerate(gpus):  # two boards of one serial (a host that says so) get two pages
        stem = f"rma-{_serial_stem(g, i)}"
        g["file"] = f"{stem}.html" if stem not in taken else f"{stem}-{i}.html"
        taken.add(stem)
    archive = f"{DIR}/{name}.tar.gz"
    names = [x["file"] for x in f.files] + [g["file"] for g in gpus] + ["index.md", "index.json"]
    for g in gpus:
        f.put(g["file"], str(rma.page(doc, host, facts, g, klog, windows, names, archive)),
              f"the RMA page of GPU {g['index']}")
    index = {"host": host, "folder": f"{DIR}/{name}", "archive": archive,
             "run": (doc.get("meta") or {}).get("run"), "why": why, "records": len(recs),
             "gpus_named": [{k: g[k] for k in ("index", "serial", "pci_bus_id", "file")} for g in gpus],
             "fresh": pieces, "budget": budget, "files": list(f.files)}
    f.put("index.md", index_md(index, facts), "this index")
    f.put("index.json", dumps(index, indent=1), "this index, as JSON")
    safefile.write(top / f"{name}.tar.gz", tar_gz(f.path, name))
    return {"folder": f"{DIR}/{name}", "archive": archive, "gpus": [g["file"] for g in gpus],
            "fresh": {p["name"]: p["status"] for p in pieces}}


def _fresh(f: Folder, got, budget: dict) -> list[dict]:
    """The probe's pieces into fresh/, each under our name for it, within the size budget again
    (a host that sends more than it was given is cut here too). Every piece said, written or not."""
    if not isinstance(got, dict):
        return [{"name": "all", "status": "not collected", "why": printable(got or "nothing collected")}]
    left = int(budget.get("bytes") or 0)
    out = []
    for p in got.get("pieces") or []:
        if not isinstance(p, dict) or p.get("name") not in PIECES:
            continue
        said = {k: p.get(k) for k in ("name", "command", "rc", "elapsed_s", "status", "why", "size")}
        said.update({k: printable(v)[:500] for k, v in said.items() if isinstance(v, str)})
        try:
            blob = base64.b64decode(p["b64"], validate=True) if isinstance(p.get("b64"), str) else None
        except (binascii.Error, ValueError):
            blob, said["status"], said["why"] = None, "failed", "its bytes were not base64"
        if blob is not None and len(blob) > left and (left == 0 or p["name"] in WHOLE):
            said["status"] = "skipped"  # a cut gzip is no evidence, an empty file none either
            said["why"] = f"{len(blob)} bytes, over what the size budget had left here ({left} bytes)"
            blob = None
        elif blob is not None and len(blob) > left:
            blob, said["status"] = blob[:left], "cut"
            said["why"] = f"cut at {left} bytes here: the size budget"
        if blob is not None:
            left -= len(blob)
            said["file"] = f.put(f"fresh/{PIECES[p['name']]}", blob,
                                 f"collected after the run: {said['command']}")
            said["bytes"] = len(blob)
        out.append(said)
    return out or [{"name": "all", "status": "not collected", "why": "the probe's document held no piece"}]


def index_md(index: dict, facts) -> str:
    """The folder's index: why it is kept, the hardware, every file and every piece collected or
    not (with why). Markdown that stays text: every line's words through report.md_text (markup
    escaped, one line) and printable(), as report.md's."""
    b = index["budget"]
    gpus = [f"GPU {g['index']}: serial {g['serial'] or 'not read'}, PCI {g['pci_bus_id'] or '?'}: {g['file']}"
            for g in index["gpus_named"]]
    fresh = [f"{p.get('file') or p['name']}: {p['status']}"
             + (f", {p['bytes']} bytes" if p.get("bytes") is not None else "")
             + (f", {p['elapsed_s']} s" if p.get("elapsed_s") else "")
             + (f": {p['why']}" if p.get("why") else "") + (f" ({p['command']})" if p.get("command") else "")
             for p in index["fresh"]]
    parts = [(f"Evidence of {index['host']} (signoff run {index['run']})",
              [f"Archive: {index['archive']} (this folder, {index['folder']}/, as one file)"], ""),
             ("Why", index["why"], "- "),
             ("Hardware", rma.hardware_lines(facts) or ["no sysinfo: it did not answer at the start"], "- "),
             ("GPUs a failure names (an RMA page each)", gpus or ["none: no failed check names one"], "- "),
             (f"Collected from the host after the run (budget {b.get('seconds'):g} s, "
              f"{(b.get('bytes') or 0) / 10 ** 6:g} MB)", fresh, "- "),
             ("Files", [f"{x['file']}: {x['bytes']} bytes: {x['what']}" for x in index["files"]], "- ")]
    out = []
    for i, (head, lines, mark) in enumerate(parts):
        out += [f"{'#' if i == 0 else '##'} {md_text(head)}", "", *(mark + md_text(x) for x in lines), ""]
    return "\n".join(map(printable, out))  # a host's controls as visible escapes, as report.md's


def tar_gz(folder: Path, name: str) -> bytes:
    """The folder as one gzipped tar, its members under <name>/ (regular files only, plain modes,
    no owner names)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(folder.rglob("*")):
            if p.is_symlink() or not p.is_file():
                continue
            info = tarfile.TarInfo(f"{name}/{p.relative_to(folder).as_posix()}")
            info.size, info.mtime, info.mode = p.stat().st_size, int(time.time()), 0o644
            with open(p, "rb") as fh:
                tar.addfile(info, fh)
    return buf.getvalue()


def meta(hosts: dict, mode: str, budget: dict) -> dict:
    """results.json's meta.evidence: the mode, the budget, each host's archive."""
    return {"mode": mode, "dir": DIR, "budget": budget, "hosts": hosts}


def planned(hosts: list[str]) -> dict:
    return {h: {"folder": f"{DIR}/{safe_name(h)}", "archive": f"{DIR}/{safe_name(h)}.tar.gz"} for h in hosts}


def lines(doc: dict) -> list[str]:
    """Where each host's evidence is, one line a host (the cover, report.md)."""
    ev = (doc.get("meta") or {}).get("evidence") or {}
    return [f"{h}: {e['archive']} (folder {e['folder']}/)" for h, e in (ev.get("hosts") or {}).items()
            if isinstance(e, dict) and e.get("archive")]
