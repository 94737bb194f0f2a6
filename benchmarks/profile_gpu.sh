#!/usr/bin/env bash
# Issue 15's profiles and issue 14's re-measured kernels in one bounded call (~4 minutes on an H200): profile
# Llama 3 8B decode at batch 1 and 64 (context 4,096) and prefill at 2,048 tokens (the commands users run, each
# saved for plot --measured); measure rmsnorm_linear and fused_softmax with the default timer (graph replay) and
# every baseline; and the bf16 matmul's burst and sustained rates with the clocks (benchmarks/matmul_clocks.py).
#   benchmarks/profile_gpu.sh OUTDIR [CALIBRATED_YAML]
set -uo pipefail
out=${1:?usage: $0 OUTDIR [CALIBRATED_YAML]}
gpu=${2:-h200}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
rl=(python3 -m rooflinectl)
command -v rooflinectl >/dev/null 2>&1 && rl=(rooflinectl)
export COLUMNS=${COLUMNS:-150} PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1

step() {  # step SECONDS NAME ARGS...
    local limit=$1 name=$2
    shift 2
    echo "== rooflinectl $*" >&2
    timeout "$limit" "${rl[@]}" "$@" > "$out/$name.txt" 2>&1
    echo "== $name: exit $?" >&2
}
step 120 profile-decode-b1 profile --model llama-3-8b --phase decode --batch 1 --context 4096 --gpu "$gpu" \
    --save "$out/profile-decode-b1.json"
step 150 profile-decode-b64 profile --model llama-3-8b --phase decode --batch 64 --context 4096 --gpu "$gpu" \
    --save "$out/profile-decode-b64.json"
step 120 profile-prefill-s2048 profile --model llama-3-8b --phase prefill --seq-len 2048 --gpu "$gpu" \
    --save "$out/profile-prefill-s2048.json"
step 120 rmsnorm measure --kernel rmsnorm_linear --shape 1x4096x4096,64x4096x4096,2048x4096x14336,8192x4096x4096 \
    --baseline all --save "$out/rmsnorm_linear.json"
step 90 softmax measure --kernel fused_softmax --shape 4096x1024,4096x4096,4096x65536 --baseline all \
    --save "$out/fused_softmax.json"
echo "== matmul clocks" >&2
timeout 60 python3 "$here/matmul_clocks.py" 6 > "$out/matmul-clocks.txt" 2>&1
echo "== matmul clocks: exit $?" >&2
