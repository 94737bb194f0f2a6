#!/usr/bin/env bash
# The measurements of issues 4 and 5 in one bounded call (~7 minutes on an H200), for a short device lease:
# calibrate, fused_softmax bf16 (baselines torch and compile) and fp32 (torch), copy, matmul 8192³ and
# rmsnorm_linear over issue 5's shapes, every kernel timed from CUDA-graph replays (--timer cuda_graph) so that
# microsecond kernels are not timed at the CPU's launch rate. Each step has a time limit; whatever finished is
# summarized at the end by benchmarks/h200.sh's summary section.
#   benchmarks/h200-quick.sh OUTDIR
set -uo pipefail
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
rl=(python3 -m rooflinectl)
command -v rooflinectl >/dev/null 2>&1 && rl=(rooflinectl)
export COLUMNS=${COLUMNS:-150}

softmax=4096x1024,4096x2048,4096x4096,4096x8192,4096x16384,4096x65536,4096x262144
rmsnorm=1x4096x4096,1x4096x14336,8192x4096x4096
for m in 8 32 128 512 2048; do rmsnorm+=",${m}x4096x14336,${m}x8192x8192"; done

step() {  # step SECONDS NAME ARGS...
    local limit=$1 name=$2
    shift 2
    echo "== rooflinectl $*" >&2
    timeout "$limit" "${rl[@]}" "$@" > "$out/$name.txt" 2>&1
    echo "== $name: exit $?" >&2
}
step 45 calibrate calibrate -o "$out/calibrated.yaml"
step 130 softmax-bf16 measure --kernel fused_softmax --shape $softmax --dtype bf16 --baseline all --timer cuda_graph --save "$out/softmax-bf16.json"
step 45 softmax-fp32 measure --kernel fused_softmax --shape $softmax --dtype fp32 --baseline torch --timer cuda_graph --save "$out/softmax-fp32.json"
step 30 copy measure --kernel copy --dtype bf16 --baseline torch --save "$out/copy-bf16.json"
step 30 matmul measure --kernel matmul --shape 8192x8192x8192 --dtype bf16 --baseline torch --save "$out/matmul-bf16.json"
step 150 rmsnorm measure --kernel rmsnorm_linear --shape $rmsnorm --dtype bf16 --baseline all --timer cuda_graph --save "$out/rmsnorm_linear-bf16.json"
bash "$here/h200.sh" "$out" summary
