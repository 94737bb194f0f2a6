#!/usr/bin/env bash
# Issue 14's measurements in one bounded call (~7 minutes on an H200): calibrate (ceilings and the op model's
# probes) into OUTDIR/h200-calibrated.yaml, then measure --workload against it for Llama 3 8B (decode at batch 1,
# 16, 64, 256 × context 1,024 and 4,096; prefill at 512, 2,048 and 8,192 tokens) and for Qwen2.5 14B, the model
# the calibration never saw (decode at batch 1, 16, 64 × 4,096 and 16 × 1,024; prefill at 2,048). Each step has a
# time limit; benchmarks/workload_report.py OUTDIR turns the saved records into the error tables.
#   benchmarks/workload_gpu.sh OUTDIR
set -uo pipefail
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"
rl=(python3 -m rooflinectl)
command -v rooflinectl >/dev/null 2>&1 && rl=(rooflinectl)
export COLUMNS=${COLUMNS:-150} PYTHONUNBUFFERED=1
cal="$out/h200-calibrated.yaml"

step() {  # step SECONDS NAME ARGS...
    local limit=$1 name=$2
    shift 2
    echo "== rooflinectl $*" >&2
    timeout "$limit" "${rl[@]}" "$@" > "$out/$name.txt" 2>&1
    echo "== $name: exit $?" >&2
}
step 150 calibrate calibrate -o "$cal"
for ctx in 1024 4096; do
    for b in 1 16 64 256; do
        step 60 "llama-decode-b$b-c$ctx" measure --workload decode --model llama-3-8b --batch $b --context $ctx \
            --gpu "$cal" --save "$out/llama-decode-b$b-c$ctx.json"
    done
done
for s in 512 2048 8192; do
    step 60 "llama-prefill-s$s" measure --workload prefill --model llama-3-8b --seq-len $s --gpu "$cal" \
        --save "$out/llama-prefill-s$s.json"
done
for bc in 1:4096 16:4096 64:4096 16:1024; do
    b=${bc%%:*} ctx=${bc##*:}
    step 60 "qwen-decode-b$b-c$ctx" measure --workload decode --model qwen2.5-14b --batch $b --context $ctx \
        --gpu "$cal" --save "$out/qwen-decode-b$b-c$ctx.json"
done
step 60 qwen-prefill-s2048 measure --workload prefill --model qwen2.5-14b --seq-len 2048 --gpu "$cal" \
    --save "$out/qwen-prefill-s2048.json"
