#!/usr/bin/env bash
# Wall time of the commands a user waits on, on this machine: the median of N runs of each.
#   benchmarks/cli_speed.sh [N]
set -euo pipefail
n=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() {  # median of the numbers on stdin
    sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
time_cmd() {  # time_cmd LABEL CMD...
    local label=$1
    shift
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" > /dev/null
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc
    done | median | xargs printf "%-62s %6.2f s\n" "$label"
}
echo "median of $n runs; $(nproc) cores, $(python3 --version)"
time_cmd "rooflinectl --help" rooflinectl --help
time_cmd "rooflinectl analyze decode --gpu a100" rooflinectl analyze decode --gpu a100
time_cmd "rooflinectl analyze prefill --gpu h100 --json" rooflinectl analyze prefill --gpu h100 --json
time_cmd "rooflinectl hardware show h100" rooflinectl hardware show h100
time_cmd "rooflinectl plot -o $tmp/r.png" rooflinectl plot -o "$tmp/r.png"
time_cmd "rooflinectl plot decode --gpu h100 --batch 1,8,64,256 -o $tmp/d.png" \
    rooflinectl plot decode --gpu h100 --batch 1,8,64,256 -o "$tmp/d.png"
