#!/usr/bin/env bash
# Decode against SDPA over the whole grid, then `measure` on the contiguous and the paged kernel, in one bounded
# call (~7 minutes on an H200 or H100). Each step has a time limit and writes its own log, so a step that runs out
# leaves the others' results.
#   benchmarks/decode_confirm.sh OUTDIR
set -uo pipefail
out=${1:?usage: $0 OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
rl=(python3 -m rooflinectl)
export COLUMNS=${COLUMNS:-150}
gpu=h100-sxm
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && gpu=h200

step() {  # step SECONDS NAME COMMAND...
    local limit=$1 name=$2
    shift 2
    echo "== $*" >&2
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    echo "== $name: exit $?" >&2
}
flags=(--dtype bf16 --gpu "$gpu" --seed 7)
step 330 grid python3 "$here/decode_grid_gpu.py" "$out/grid" --rule-grid --skip-harness --skip-sweep --skip-prefill
step 90 measure-flash_decoding "${rl[@]}" measure --kernel flash_decoding --baseline all "${flags[@]}" \
    --save "$out/flash_decoding.json"
step 60 measure-flash_decoding-more "${rl[@]}" measure --kernel flash_decoding \
    --shape 1x64x4x3000x128,1x64x4x4096x128,1x64x4x16384x128,1x32x32x1024x128 --baseline all "${flags[@]}" \
    --save "$out/flash_decoding-more.json"
step 90 measure-flash_decoding_paged "${rl[@]}" measure --kernel flash_decoding_paged --baseline none "${flags[@]}" \
    --save "$out/flash_decoding_paged.json"
step 60 measure-flash_decoding_paged-more "${rl[@]}" measure --kernel flash_decoding_paged \
    --shape 1x64x4x3000x128x16,1x64x4x4096x128x16,1x64x4x16384x128x32,1x32x32x1024x128x16 --baseline none \
    "${flags[@]}" --save "$out/flash_decoding_paged-more.json"
tail -3 "$out/grid.log"
grep -h "behind\|rule grid" "$out/grid.log" | tail -20
