#!/usr/bin/env bash
# Wall time of the commands a user waits on, on this machine: the median of N runs of each, beside the time
# to import the libraries they stand on (the baseline: what no change to rooflinectl can remove).
#   benchmarks/cli_speed.sh [N]
# The target (issue 11): `rooflinectl --help` and `rooflinectl analyze decode --gpu a100` each at most 0.15 s
# above the baseline, both from the same run of this script.
set -euo pipefail
n=${1:-7}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
median() {  # median of the numbers on stdin
    sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'
}
runs() {  # runs CMD...: the median wall time of N runs, in seconds
    for _ in $(seq "$n"); do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" > /dev/null
        t1=$(date +%s.%N)
        echo "$t1 - $t0" | bc
    done | median
}
time_cmd() {  # time_cmd LABEL CMD...: the median, and how far above the library import it is
    local label=$1
    shift
    local t
    t=$(runs "$@")
    printf "%-62s %6.2f s  (+%.2f s over the baseline)\n" "$label" "$t" "$(echo "$t - $base" | bc)"
}
echo "median of $n runs; $(nproc) cores, $(python3 --version)"
base=$(runs python3 -c "import typer, rich.console, rich.table, pydantic, yaml")
printf "%-62s %6.2f s\n" "baseline: python -c 'import typer, rich.console, rich.table, pydantic, yaml'" "$base"
time_cmd "rooflinectl --help" rooflinectl --help
time_cmd "rooflinectl analyze decode --gpu a100" rooflinectl analyze decode --gpu a100
time_cmd "rooflinectl analyze prefill --gpu h100 --json" rooflinectl analyze prefill --gpu h100 --json
time_cmd "rooflinectl hardware show h100" rooflinectl hardware show h100
time_cmd "rooflinectl plot -o $tmp/r.png" rooflinectl plot -o "$tmp/r.png"
time_cmd "rooflinectl plot decode --gpu h100 --batch 1,8,64,256 -o $tmp/d.png" \
    rooflinectl plot decode --gpu h100 --batch 1,8,64,256 -o "$tmp/d.png"
