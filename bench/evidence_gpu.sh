#!/bin/bash
# Issue 54 item 1's Done-when on a real GPU machine ("nvidia-bug-report is run on a real GPU machine
# where it exists and its size and time are recorded"), in one device call of at most 4 minutes:
#
#   bench/evidence_gpu.sh OUT [BUDGET_S]
#
# runs signoff/evidence/probe_evidence.py directly with the host's python3, as a run does on a
# failed host after its measurements (collect.probe_args: the budget, every GPU's PCI address from
# nvidia-smi, every RDMA device), in a fresh temp dir as its cwd (the run's own dir on a host),
# with the default size budget (50 MB) and BUDGET_S seconds (default 200: room for the bug report
# whole). Prints each piece's status, seconds and bytes (nvidia-smi -q, lspci -vvv, the kernel
# log's XID/NVRM lines, nvidia-bug-report.sh's log.gz), and checks that the probe left nothing in
# its dir and no process. OUT/evidence.json is the document less its bytes; OUT/pieces/ the pieces;
# OUT/summary.txt the lines. The figures go to docs/measurements.md (the machine named).
# NVLink multicast stays off (the device rule). nvidia-bug-report.sh wants root: run as root.
set -u
out=${1:?OUT}; budget=${2:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out/pieces"
exec > >(tee -a "$out/summary.txt") 2>&1
work=$(mktemp -d /tmp/signoff-evidence.XXXXXX)
trap 'rm -rf "$work"' EXIT
uptime; id -u; nvidia-smi --query-gpu=name,serial,pci.bus_id,vbios_version,driver_version --format=csv,noheader
command -v nvidia-bug-report.sh lspci journalctl dmesg || true
args=(--budget-s "$budget" --budget-bytes 50000000)
for b in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader); do args+=(--bdf "$b"); done
for n in /sys/class/infiniband/*; do [ -e "$n" ] && args+=(--nic "$(basename "$n")"); done
echo "probe_evidence.py ${args[*]}"
t0=$(date +%s.%N)
(cd "$work" && timeout -k 10 $((budget + 30)) python3 "$root/signoff/evidence/probe_evidence.py" "${args[@]}") \
    > "$out/raw.json"
rc=$?
t1=$(date +%s.%N)
left=$(ls -A "$work")
python3 - "$out" "$rc" "$t0" "$t1" "$left" <<'PY'
import base64, json, os, sys
out, rc, t0, t1, left = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
try:
    d = json.load(open(os.path.join(out, "raw.json")))
except ValueError:
    sys.exit(print("probe: exit", rc, "no JSON document"))
for p in d["pieces"]:
    blob = base64.b64decode(p.pop("b64")) if "b64" in p else b""
    if blob:
        name = {"nvidia-bug-report": "nvidia-bug-report.log.gz"}.get(p["name"], p["name"] + ".txt")
        open(os.path.join(out, "pieces", name), "wb").write(blob)
    print(f'{p["name"]:18} {p["status"]:9} {p["elapsed_s"]:7.2f} s {p["bytes"]:10d} bytes '
          f'(whole {p.get("size")}) {p.get("why") or ""}')
json.dump(d, open(os.path.join(out, "evidence.json"), "w"), indent=1)
print(f'probe: exit {rc}, {d["elapsed_s"]} s by its own clock, {t1 - t0:.1f} s wall, uid {d["uid"]}, '
      f'budget {d["budget_s"]} s / {d["budget_bytes"]} bytes')
print("left in its dir:", left or "nothing")
PY
rm -f "$out/raw.json"
pgrep -af nvidia-bug-report || echo "no nvidia-bug-report process left"
