#!/usr/bin/env bash
# The model-parallel probe (signoff/training/probe_parallel.py) on every GPU of a machine of 2 or more
# GPUs, at the H200 anchor's sizes (signoff/training/__init__.py DEFAULTS), NVLink multicast off as
# the training probe runs it; prints its JSON document. Its figures calibrate tp_step_tflops,
# tp_comm_share, pipeline_step_tflops and pipeline_bubble (thresholds/nvidia-base.yaml: derived rules
# until a class's run is recorded in docs/measurements.md). On one GPU it says N.A.
# Usage: bash bench/parallel_gpu.sh [probe args...]   (e.g. --micro-batches 16)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
NCCL_NVLS_ENABLE=0 "$PY" "$OLDPWD/signoff/training/probe_parallel.py" --layers 12 --d-model 2048 --ffn 8192 \
  --seq 2048 --batch 8 --warmup 3 --steps 20 "$@"
