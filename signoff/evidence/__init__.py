"""Evidence per failed host (issue 54 item 1): what a vendor's RMA asks for, kept in the report dir
before anyone drains, resets or sends the host back. For every host on exclude.hostlist (every
host with --evidence all) a folder evidence/<host>/ and one archive evidence/<host>.tar.gz: the
host's failed and errored records, the raw outputs the run holds behind them (its sysinfo: serials,
PCI addresses, VBIOS, NIC firmware, fabric and IMEX state, the error counters; every family's
document of it: the XID lines with their times, the DCGM run, the ports' counters, the NCCL
transport lines; the family's raw files, dcgm/<host>.json), what is collected fresh from the host
once after the measurements within a time and size budget (probe_evidence.py: nvidia-smi -q,
lspci -vvv, the kernel log's XID/NVRM lines, nvidia-bug-report.sh), and a page per GPU a failure
names, to send back (rma-<serial>.html). Not a family: it judges nothing (no CRITERIA).

collect.py: which hosts, the fresh collection, the folder, its index and its archive (the
controller); rma.py and rma.jinja2: the page per GPU; plugin.py: --evidence and the hooks."""

DIR = "evidence"  # the report dir's directory (plugin.RUN_DIRS: a reused --report-dir moves it)
MODES = ("failed", "all", "none")
# per host, the issue's own example (120 s, 50 MB); what nvidia-bug-report.sh takes of them on a GPU
# host is bench/evidence_gpu.sh's to measure (docs/outputs.md)
BUDGET_S = 120.0
BUDGET_MB = 50.0
