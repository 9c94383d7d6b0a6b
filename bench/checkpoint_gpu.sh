#!/bin/bash
# Issue 53 item 2's Done-when on a real GPU machine (one GPU, e.g. an H100 80 GB with a 64 GiB
# disk), in one device call of a few minutes:
#
#   bench/checkpoint_gpu.sh OUT [DIR]
#
# runs signoff/checkpoint/probe_checkpoint.py directly with the host's python3 and its torch on
# cuda:0, twice: a 12 GB checkpoint (20 x TransformerEncoderLayer(2048, 16 heads, ffn 8192) and
# fused AdamW after 2 steps: signoff/checkpoint/judge.py sizing(training DEFAULTS, 12), asserted
# in tests/test_checkpoint.py) torch.save'd into DIR (default /tmp/signoff-ckpt, the local disk),
# fsync'ed, dropped from the page cache, torch.load'ed onto cuda:0 and compared bit for bit; the
# probe removes its file whatever happens (and this script DIR's run directories after it).
# OUT/checkpoint-<n>.json is each probe's document; OUT/summary.txt one line per run. The figures
# go to docs/h200.md (the machine named). NVLink multicast stays off (the device rule).
set -u
out=${1:?OUT}; dir=${2:-/tmp/signoff-ckpt}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out" "$dir"
exec > >(tee -a "$out/summary.txt") 2>&1
trap 'rm -rf "$dir"/.signoff-bench-*' EXIT  # a probe killed by the device's time limit
uptime; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
df -h "$dir"; free -g | head -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
for n in 1 2; do
    t0=$(date +%s.%N)
    timeout -k 10 280 python3 "$root/signoff/checkpoint/probe_checkpoint.py" --path "$dir" \
        --runid "bench-$n-$$" --host "$(hostname)" --layers 20 --d-model 2048 --heads 16 --ffn 8192 \
        --steps 2 --need 12400000000 --min-free 5% > "$out/checkpoint-$n.json"
    rc=$?
    t1=$(date +%s.%N)
    python3 - "$out/checkpoint-$n.json" "$rc" "$t0" "$t1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(print("run: exit", sys.argv[2], "no JSON document"))
if d.get("error"):
    sys.exit(print("run: exit", sys.argv[2], "ERROR", d["error"]))
s, r, i, c = d["save"], d.get("restore") or {}, d["intact"], d["cache"]
print(f"run: {d['bytes'] / 1e9:.2f} GB ({d['tensors']} tensors, {d['params'] / 1e9:.3f} B params) on "
      f"{d['device']} {d.get('gpu')}, {d['fs']['fstype']} {d['fs']['source']}: save {s['seconds']} s = "
      f"{s['gbps']} GB/s (torch.save {s['write_s']} s + fsync {s['fsync_s']} s); cache dropped "
      f"{c['dropped']} ({c['note']}, resident {c['resident']}); restore {r.get('seconds')} s = "
      f"{r.get('gbps')} GB/s; differing {len(i.get('differing') or {})} of {i.get('compared')} "
      f"{i.get('load_error') or ''}; build {d['build_s']} s; whole probe "
      f"{float(sys.argv[4]) - float(sys.argv[3]):.1f} s; removed {d['removed']}")
PY
done
ls -la "$dir"
