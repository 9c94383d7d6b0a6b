#!/bin/bash
# Issue 15's measurements on one multi-GPU host, in as few device calls as possible (each phase
# fits one 10-minute call). Builds nothing: nccl-tests' all_reduce_perf comes by path.
#
#   bench/multigpu.sh suite     OUT PY   the whole suite (--profile auto, 120 s soak): report,
#                                        the training scaling curve 1 -> 2 -> 4 (-> 8) with comm share
#   bench/multigpu.sh p2p       OUT PY   3 standalone probe_p2p runs: per-pair unidirectional,
#                                        the slowest of the runs (what sets p2p_bandwidth)
#   bench/multigpu.sh fidelity  OUT PY ALL_REDUCE_PERF   all GPUs 1 MiB..8 GiB, then the 1 MiB
#                                        point on 2 GPUs three times
#
# OUT: where results go; PY: the host's training Python (torch, pynvml). Keep NVLink multicast
# off as the device machines ask (NCCL_NVLS_ENABLE=0 ...): set here for every phase.
set -u
phase=${1:?phase: suite, p2p or fidelity}; out=${2:?OUT directory}; py=${3:?the host Python}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
n=$("$py" -c 'import torch; print(torch.cuda.device_count())')
echo "# $n GPUs, $(date -u +%FT%TZ), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c)"
case $phase in
suite)
    rd=$out/h200-${n}x
    timeout -s INT 560 python3 -m pytest "$root/acceptance" -p no:cacheprovider --profile auto \
        --soak-duration 120s --python "$py" --report-dir "$rd" 2>&1 | tail -25
    python3 - "$rd" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
print("profile", d["meta"].get("profile"), "verdict", d["verdict"])
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:26} {r["host"]:10} {str(r.get("measured"))[:16]:16} '
          f'{(r.get("message") or "")[:220]}')
    if r["criterion"] == "train_scaling_host":  # the scaling curve, with the communication share
        for w in (r.get("details") or {}).get("widths", []):
            print(f'    {w["ranks"]} ranks: {w["tokens_per_s"]:g} tokens/s, {w["tflops_per_gpu"]:g} '
                  f'TFLOP/s per GPU, comm share {w["comm_share"]:.1%}')
PY
    rm -rf "$rd/hosts" "$rd/soak" "$rd/results.jsonl" ;;
p2p)
    for i in 1 2 3; do
        (cd "$(mktemp -d)" && "$py" "$root/signoff/interconnect/probe_p2p.py") > "$out/p2p-$i.json"
    done
    python3 - "$out" <<'PY'
import json, sys
runs = [json.load(open(f"{sys.argv[1]}/p2p-{i}.json")) for i in (1, 2, 3)]
if any("unidirectional" not in r for r in runs):
    sys.exit("no bandwidth matrix: " + "; ".join(r.get("error") or f"{r.get('gpus')} GPU(s)" for r in runs))
pairs = sorted(runs[0]["unidirectional"])
low = {p: min(r["unidirectional"][p] for r in runs) for p in pairs}
for p in pairs:
    print(p, [r["unidirectional"][p] for r in runs], "bi", [r["bidirectional"].get(p) for r in runs])
print("slowest pair of the 3 runs:", min(low, key=low.get), min(low.values()), "GB/s unidirectional")
PY
    ;;
fidelity)
    arp=${4:?all_reduce_perf path}
    "$py" "$root/bench/allreduce_fidelity.py" --all-reduce-perf "$arp" --out "$out/fidelity-${n}gpu.json"
    for i in 1 2 3; do
        CUDA_VISIBLE_DEVICES=0,1 "$py" "$root/bench/allreduce_fidelity.py" --all-reduce-perf "$arp" \
            --min 1M --max 1M --no-eager --out "$out/fidelity-2gpu-1M-$i.json"
    done ;;
*) echo "unknown phase $phase (suite, p2p, fidelity)" >&2; exit 2 ;;
esac
