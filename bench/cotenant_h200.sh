#!/bin/bash
# Issue 29 item 5 on a real 1x H200, in one device call (about 7 min; docs/h200.md):
#
#   bench/cotenant_h200.sh OUT PY
#
#   soak/    a 120 s soak; 40 s into its load another process (a torch bf16 GEMM loop on GPU 0,
#            started by this script, not by signoff) runs for 40 s: every soak check ERRORs
#            naming its pid, name and when it ran, not cooling (issue 29 measured FAILs of
#            soak_gemm_tflops 490.5 < 635 and soak_clock_stability blamed on cooling)
#   hbm/     the HBM copies with the same kind of process running throughout: both ERROR naming it
#   alone/   the same 120 s soak without it: judged as measured (the probe's own process unnamed)
#
# PY: the host's training Python (torch, pynvml). NVLink multicast stays off (the device rule).
set -u
out=${1:?OUT}; py=${2:?the host Python}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
vm=$root/bench/profiles/h200-1x-vm.yaml
mkdir -p "$out"
exec > >(tee -a "$out/summary.txt") 2>&1
summary() {  # a run's verdict and every check, one line each; the probe's cotenants
    python3 - "$1" <<'PY'
import glob, json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
print("==", sys.argv[1], "verdict", d["verdict"], "exit", d["meta"].get("exit_code"))
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:22} {str(r.get("measured"))[:12]:12} {(r.get("message") or "")[:500]}')
for f in glob.glob(sys.argv[1] + "/soak/*.jsonl"):
    for line in open(f):
        x = json.loads(line)
        if x.get("type") == "result":
            print("probe cotenants:", json.dumps(x.get("cotenants")), x.get("cotenants_note"))
PY
    rm -rf "$1/hosts" "$1/results.jsonl"
}
hog() {  # SECONDS of back-to-back 8192^3 bf16 GEMMs on GPU 0, in the background; its pid
    $py -c "import time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
t = time.time()
while time.time() - t < $1:
    for _ in range(20):
        a @ a
    torch.cuda.synchronize()" > /dev/null 2>&1 &
    echo $!
}
accept() {  # report dir, then pytest's arguments
    rd=$1; shift
    timeout -s INT 500 python3 -m pytest "$root/acceptance" -p no:cacheprovider --report-dir "$rd" \
        --partial --python "$py" --profile "$vm" "$@" > "$rd.log" 2>&1
    tail -3 "$rd.log"
    summary "$rd"
}
uptime; nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader

# soak/: the hog starts 40 s after the probe's header line (the load's start), for 40 s
( for _ in $(seq 600); do grep -qs '"type":"header"' "$out"/soak/soak/*.jsonl && break; sleep 0.5; done
  sleep 40; pid=$(hog 40); echo "hog pid $pid started $(date -u +%H:%M:%S)"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done; echo "hog ended $(date -u +%H:%M:%S)" ) &
watcher=$!
accept "$out/soak" -k soak --soak-duration 120s
wait $watcher

# hbm/: the hog runs throughout the copies
pid=$(hog 300); echo "hog pid $pid started $(date -u +%H:%M:%S)"; sleep 10
accept "$out/hbm" -k hbm
kill "$pid" 2>/dev/null; while kill -0 "$pid" 2>/dev/null; do sleep 0.5; done

accept "$out/alone" -k soak --soak-duration 120s
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
