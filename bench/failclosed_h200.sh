#!/bin/bash
# Issue 22's fail-closed paths on a real 1x H200, in one device call (docs/h200.md):
#
#   bench/failclosed_h200.sh OUT PY
#
#   xid/       the XID history over the class's 168 h on a VM booted minutes ago: ERROR, naming
#              from when its kernel log covers; boot/: the same over `window: boot`: PASS
#   unstable/  the 1-GPU training step with a bf16 GEMM hog on the same GPU during its first
#              attempt only (the host Python's wrapper starts it and stops it with that attempt):
#              the first misses, the second does not: FAIL as unstable, naming both
#   lock/      a second run started while a first holds the host: every ERROR names the lock
#   python/    --python naming an interpreter without torch or nvidia-ml-py
#
# PY: the host's training Python (torch, pynvml). NVLink multicast stays off (the device rule).
set -u
out=${1:?OUT}; py=${2:?the host Python}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
vm=$root/bench/profiles/h200-1x-vm.yaml
mkdir -p "$out"
summary() {  # a run's verdict and every check, one line each
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
print("==", sys.argv[1], "profile", d["meta"].get("profile"), "verdict", d["verdict"])
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:24} {str(r.get("measured"))[:12]:12} {(r.get("message") or "")[:400]}')
PY
    rm -rf "$1/hosts" "$1/soak" "$1/results.jsonl"
}
accept() {  # report dir, then pytest's arguments
    rd=$1; shift
    timeout -s INT 400 python3 -m pytest "$root/acceptance" -p no:cacheprovider --report-dir "$rd" \
        --partial "$@" > "$rd.log" 2>&1
    tail -3 "$rd.log"
    summary "$rd"
}
printf 'extends: %s\ncriteria:\n  xid_fatal: {max: 0, window: boot, codes: [48, 63, 64, 74, 79, 92, 94, 95], unit: XIDs, source: "as nvidia-base, over this boot"}\n' \
    "$vm" > "$out/boot.yaml"
uptime
accept "$out/xid" --python "$py" --profile "$vm" -k xid_history
accept "$out/boot" --python "$py" --profile "$out/boot.yaml" -k xid_history

# The hog: a bf16 GEMM loop on the GPU beside the first train.py only.
hog=$out/hogpython; first=$out/first-attempt-done
cat > "$hog" <<EOF
#!/bin/bash
case "\$1" in *train.py)
  if [ ! -e $first ]; then
    touch $first
    $py -c "import torch; a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
while True: a @ a" &
    h=\$!; $py "\$@"; rc=\$?; kill \$h; wait \$h 2>/dev/null; exit \$rc
  fi;;
esac
exec $py "\$@"
EOF
chmod +x "$hog"
accept "$out/unstable" --python "$hog" --profile "$vm" -k train_throughput

# Two runs at once: the second finds the host locked (no wait).
timeout -s INT 400 python3 -m pytest "$root/acceptance" -p no:cacheprovider --report-dir "$out/first" \
    --partial --python "$py" --profile "$vm" -k "sdc or hbm" > "$out/first.log" 2>&1 &
first_pid=$!
sleep 10
accept "$out/lock" --python "$py" --profile "$vm" -k "sdc or hbm or gpu_model or xid" --lock-wait 0
wait $first_pid; summary "$out/first"

accept "$out/python" --python /usr/bin/python3 --profile auto -k "gpu_model or sdc or hbm_bandwidth"
