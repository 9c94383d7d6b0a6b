#!/bin/bash
# One device call (issue 42-46 session, 2026-12-05): the new reads (NVLink fabric, error
# counters, DCGM preflight) and the whole sheet on a real GPU (soak 60 s), report tarred into
# $OUT. Wheels the device lacks in .whl (docs/h200.md); PROFILE=bench/h100-1x-probe.yaml on a
# 1x H100, which no shipped profile matches.
set -u
out=$OUT; root=$(pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
exec > >(tee -a "$out/summary.txt") 2>&1
uptime; nvidia-smi --query-gpu=name,serial,driver_version,pci.device_id --format=csv,noheader
command -v dcgmi nv-hostengine nvidia-imex-ctl || echo "no dcgmi / nv-hostengine / nvidia-imex-ctl on PATH"
python3 --version; python3 -c "import pytest, pynvml; print('pytest', pytest.__version__)"
python3 signoff/gpu/probe_sysinfo.py > "$out/sysinfo.json" 2>"$out/sysinfo.err"; echo "sysinfo rc $?"
python3 signoff/gpu/probe_sysinfo.py counters > "$out/counters.json" 2>>"$out/sysinfo.err"; echo "counters rc $?"
python3 - <<'PY'
import json
d = json.load(open("/dev/stdin" if False else __import__("os").environ["OUT"] + "/sysinfo.json"))
for g in (d.get("nvidia") or {}).get("gpus") or []:
    print("gpu", g.get("index"), g.get("name"), "pci", g.get("pci_device_id"), "fabric", json.dumps(g.get("fabric"))[:400])
print("preflight", json.dumps(d.get("preflight"))[:1500])
c = json.load(open(__import__("os").environ["OUT"] + "/counters.json"))
print("counters", json.dumps(c)[:2000])
PY
(cd .whl && python3 -m pip install -q --no-index --no-deps --target /tmp/site fabric-* invoke-* paramiko-* \
  bcrypt-* pynacl-* cryptography-* cffi-* pycparser-* decorator-* deprecated-* clustershell-* \
  pytest_html-* pytest_metadata-*) || echo "wheel install failed"
export PYTHONPATH=/tmp/site:$root
t0=$(date +%s)
timeout 480 python3 -m signoff run --profile ${PROFILE:-auto} --soak-duration 60s --report-dir "$out/accept" > "$out/accept.log" 2>&1
echo "signoff run: rc $? in $(( $(date +%s) - t0 )) s"
tail -40 "$out/accept.log"
python3 - "$out/accept" <<'PY'
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
print("== verdict", d["verdict"], "profile", d["meta"].get("profile"), "exit", d["meta"].get("exit_code"))
for r in d["results"]:
    print(f'{r["status"]:7} {r["criterion"]:28} {str(r.get("measured"))[:12]:12} {(r.get("expected") or "")[:40]:40} {(r.get("message") or "")[:300]}')
PY
tar czf "$out/accept.tgz" -C "$out" accept && rm -rf "$out/accept"
