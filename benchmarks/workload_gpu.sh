#!/usr/bin/env bash
# Issue 14's measurements in two bounded calls (each well inside 10 minutes on an H200):
#   benchmarks/workload_gpu.sh OUTDIR llama      calibrate (ceilings and the op model's probes) into
#                                                OUTDIR/h200-calibrated.yaml, then measure --workload against it for
#                                                Llama 3 8B: decode at batch 1, 16, 64, 256 × context 1,024 and
#                                                4,096; prefill at 512, 2,048 and 8,192 tokens
#   benchmarks/workload_gpu.sh OUTDIR qwen CAL   Qwen2.5 14B, the model the calibration never saw, against the
#                                                file CAL: decode at batch 1, 16, 64 × 4,096; prefill at 2,048
# Each step has a time limit; benchmarks/workload_report.py OUTDIR turns the saved records into the error tables.
set -uo pipefail
out=${1:?usage: $0 OUTDIR llama|qwen [CALIBRATED_YAML]}
part=${2:?usage: $0 OUTDIR llama|qwen [CALIBRATED_YAML]}
mkdir -p "$out"
rl=(python3 -m rooflinectl)
command -v rooflinectl >/dev/null 2>&1 && rl=(rooflinectl)
export COLUMNS=${COLUMNS:-150} PYTHONUNBUFFERED=1
cal=${3:-$out/h200-calibrated.yaml}

step() {  # step SECONDS NAME ARGS...
    local limit=$1 name=$2
    shift 2
    echo "== rooflinectl $*" >&2
    timeout "$limit" "${rl[@]}" "$@" > "$out/$name.txt" 2>&1
    echo "== $name: exit $? ($(date +%T))" >&2
}
if [ "$part" = llama ]; then
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
else
    for b in 1 16 64; do
        step 60 "qwen-decode-b$b-c4096" measure --workload decode --model qwen2.5-14b --batch $b --context 4096 \
            --gpu "$cal" --save "$out/qwen-decode-b$b-c4096.json"
    done
    step 60 qwen-prefill-s2048 measure --workload prefill --model qwen2.5-14b --seq-len 2048 --gpu "$cal" \
        --save "$out/qwen-prefill-s2048.json"
fi
