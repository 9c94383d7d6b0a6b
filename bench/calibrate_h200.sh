#!/bin/bash
# Issue 21's calibration on a real 1x H200, in two device calls (each fits 10 minutes):
#
#   bench/calibrate_h200.sh golden OUT PY          the whole sheet under bench/profiles/h200-1x-vm.yaml
#                                                  (60 s soak), then python -m signoff.calibrate of it
#                                                  --margin 0.8 (the VM disk varies 17 % run to run)
#                                                  -> OUT/site-h200-vm.yaml
#   bench/calibrate_h200.sh site   OUT PY PROFILE  the whole sheet under that site profile, then the
#                                                  training step under it with a demo floor above reach
#
# PY: the host's training Python (torch, pynvml). NVLink multicast stays off (the device rule).
set -u
phase=${1:?phase: golden or site}; out=${2:?OUT}; py=${3:?the host Python}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
summary() {  # a run's verdict and every check, one line each
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
print("profile", d["meta"].get("profile"), "verdict", d["verdict"])
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:24} {str(r.get("measured"))[:12]:12} {(r.get("expected") or "")[:60]:60} '
          f'{(r.get("message") or "")[:160]}')
PY
    rm -rf "$1/hosts" "$1/soak" "$1/results.jsonl" "$1/junit.xml"
}
accept() {  # report dir, then pytest's arguments
    rd=$1; shift
    timeout -s INT 500 python3 -m pytest "$root/acceptance" -p no:cacheprovider --python "$py" \
        --report-dir "$rd" "$@" 2>&1 | tail -8
    summary "$rd"
}
case $phase in
golden)
    accept "$out/golden" --profile "$root/bench/profiles/h200-1x-vm.yaml" --soak-duration 60s
    python3 -m signoff.calibrate "$out/golden" --out "$out/site-h200-vm.yaml" --margin 0.8
    cat "$out/site-h200-vm.yaml" ;;
site)
    prof=${4:?the site profile}
    accept "$out/site" --profile "$prof" --soak-duration 60s
    # demo/demo.yaml, as reports/examples/h200-1x-calibrated keeps it: extends the site profile
    # by a path relative to itself, so the copy in the repository extends the repository's copy
    mkdir -p "$out/demo"
    printf 'extends: %s\ncriteria:\n  train_throughput: {min: 1000, unit: TFLOP/s, attempts: 1, source: "demo: above any H200 (reach 441)"}\n' \
        "$(realpath --relative-to="$out/demo" "$prof")" > "$out/demo/demo.yaml"
    accept "$out/demo" --profile "$out/demo/demo.yaml" -k train_throughput --partial ;;
*)
    echo "unknown phase $phase" >&2; exit 2 ;;
esac
