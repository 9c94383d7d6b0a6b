#!/bin/bash
# signoff/probelib.py on a real 1x H200, in one device call (docs/h200.md): every GPU probe
# as a host gets it (families.shipped() in one dir) and the two collectives from the source
# tree (spawned NCCL ranks import the probe again). OUT: where the documents go.
#
#   OUT=dir bench/probelib_h200.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
out=${OUT:?}; root=$(pwd)
d=$(mktemp -d)
python3 -c "
import shutil, sys; sys.path.insert(0, '.')
from signoff import families
for n, f in families.shipped().items(): shutil.copy(f, '$d/' + n)
print(sorted(families.shipped()))"
ls $d
run() { name=$1; shift; t0=$(date +%s.%N); (cd $d && timeout 300 python3 "$@" > $out/$name.json 2> $out/$name.err); rc=$?
  echo "$name rc=$rc $(python3 -c "import time; print(round(time.time()-$t0,1))") s: $(head -c 400 $out/$name.json)"; tail -3 $out/$name.err; }
run allreduce allreduce.py --backend nccl --min-bytes 1M --max-bytes 64M
run train train.py --layers 2 --d-model 1024 --heads 8 --ffn 4096 --seq 512 --batch 4 --steps 5
run hbm hbm.py
run hostlink hostlink.py
run p2p p2p.py
run soak soak.py --duration 5
# the source tree's fallback (spawned NCCL ranks re-import the probe)
t0=$(date +%s); (cd $(mktemp -d) && timeout 300 python3 $root/signoff/interconnect/probe_allreduce.py --backend nccl --min-bytes 1M --max-bytes 4M > $out/src_allreduce.json 2> $out/src_allreduce.err); echo "src allreduce rc=$? $(head -c 300 $out/src_allreduce.json)"
(cd $(mktemp -d) && timeout 300 python3 $root/signoff/training/probe_train.py --layers 2 --d-model 512 --heads 8 --ffn 2048 --seq 256 --batch 4 --steps 3 > $out/src_train.json 2> $out/src_train.err); echo "src train rc=$? $(head -c 300 $out/src_train.json)"
python3 - $out <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    lines = open(f).read().splitlines()  # soak.py prints JSON lines, the others one document
    try:
        d = json.loads(lines[0]) if len(lines) > 1 else json.load(open(f))
    except Exception as e:
        print(f, "NOT JSON", e); continue
    keys = {k: d[k] for k in ("error", "errors", "backend", "world_size", "cotenants", "restarted") if k in d}
    print(f.split("/")[-1], json.dumps(keys)[:400], "rows" in d and [(r["bytes"], r.get("busbw"), r.get("correct")) for r in d["rows"]][:3])
PY
