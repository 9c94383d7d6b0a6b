#!/bin/bash
# Issue 29's Done-when on a real 1x H200 VM booted minutes before, in one device call:
#
#   bench/accept_h200.sh OUT [WHEELS]
#
#   accept/    the README's `make accept` as a new user types it (venv built offline from
#              WHEELS: the device reaches no registry), ARGS="--soak-duration 60s" so that two
#              runs fit one call: PASS apart from what measures a real shortfall (the VM's virtio
#              disk), the XID coverage stated
#   rerun/     the same node a minute later, `signoff run --baseline accept/ --fail-on-regression`:
#              no regression from run-to-run noise; its exit code is the first's
#
# NVLink multicast stays off (the device rule). Each report dir is tarred into OUT with its
# terminal log; summary.txt has every check of both runs, one line each.
set -u
out=${1:?OUT}; whl=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p "$out"
exec > >(tee -a "$out/summary.txt") 2>&1
summary() {  # a run's verdict and every check, one line each
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
m = d["meta"]
print("==", sys.argv[1], "profile", m.get("profile"), "verdict", d["verdict"], "exit", m.get("exit_code"))
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:26} {str(r.get("measured"))[:12]:12} '
          f'{(r.get("expected") or "")[:40]:40} {(r.get("message") or "")[:300]}')
for k in ("baseline", "notes"):
    if m.get(k):
        print(k, json.dumps(m[k])[:1500])
PY
}
uptime; nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader
cd "$root"
if [ -n "$whl" ]; then  # make's venv, offline: every wheel it installs is carried
    export PIP_NO_INDEX=1 PIP_FIND_LINKS=$(cd "$whl" && pwd)
fi
t0=$(date +%s)
command -v make >/dev/null && make accept ARGS="--soak-duration 60s --report-dir $out/accept" > "$out/accept.log" 2>&1
echo "make accept: rc $? in $(( $(date +%s) - t0 )) s"
signoff=.venv/bin/signoff
if [ ! -e "$out/accept/results.json" ]; then  # no make, or no venv (no ensurepip): by hand
    tail -5 "$out/accept.log"; echo "make accept did not run: the same by hand"
    # only what the device's python3 lacks: its own numpy, matplotlib and pytest stay
    [ -n "$whl" ] && (cd "$whl" && python3 -m pip install -q --no-index --no-deps --target /tmp/site \
        fabric-* invoke-* paramiko-* bcrypt-* pynacl-* cryptography-* cffi-* pycparser-* decorator-* \
        deprecated-* clustershell-* pytest_html-* pytest_metadata-*)
    export PYTHONPATH=/tmp/site:$root; signoff="python3 -m signoff"; t0=$(date +%s)
    $signoff run --profile auto --soak-duration 60s --report-dir "$out/accept" > "$out/accept.log" 2>&1
    echo "signoff run: rc $? in $(( $(date +%s) - t0 )) s"
fi
tail -25 "$out/accept.log"
summary "$out/accept"
t0=$(date +%s)
$signoff run --profile auto --soak-duration 60s --report-dir "$out/rerun" \
    --baseline "$out/accept" --fail-on-regression > "$out/rerun.log" 2>&1
echo "rerun with --baseline: rc $? in $(( $(date +%s) - t0 )) s"
tail -25 "$out/rerun.log"
summary "$out/rerun"
for d in accept rerun; do
    mv "$out/$d.log" "$out/$d/terminal.log"
    tar -C "$out" -czf "$out/$d.tgz" "$d" && rm -rf "${out:?}/$d"
done
