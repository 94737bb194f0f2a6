#!/usr/bin/env bash
# Every measurement that issues 4 and 5 ask for, on the GPU in hand, in one go:
#   calibrate (copy bandwidth, matmul peaks -> a hardware YAML), then `rooflinectl measure --baseline all` for
#   fused_softmax (rows of 1,024 to 262,144 at 4,096 rows, bf16 and fp32), copy, matmul (8192³ and 4096³, bf16)
#   and rmsnorm_linear (issue 5's M×K×N table, bf16), each saved as JSON under OUTDIR, and a summary table at the
#   end. The first runs are timed with CUDA events (--timer events, the L2 flushed before each run); the shapes
#   whose working set is within a few L2s (softmax up to 4096×4096, rmsnorm_linear's decode shapes) are timed a
#   second time from a CUDA graph (--timer cuda_graph, measure's default: no launch gaps, and no L2 full of the
#   dirty lines that do_bench's flush leaves for the timed kernel to write back); the summary shows both.
#
#   benchmarks/h200.sh OUTDIR                       # everything (about 5-8 minutes on an H200)
#   benchmarks/h200.sh OUTDIR softmax summary       # some sections: calibrate softmax softmax_graph copy
#                                                   #   matmul rmsnorm rmsnorm_graph summary
#
# Runs `rooflinectl` if it is on PATH, else this checkout's package with python3 (as on a machine where nothing
# can be installed; torch, triton, typer, rich, pydantic and pyyaml must import). Exit status: 0 when every kernel
# passed its check on every shape, 1 otherwise (the JSON says which).
set -uo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 OUTDIR [calibrate|softmax|softmax_graph|copy|matmul|rmsnorm|rmsnorm_graph|summary ...]" >&2
    exit 2
fi
out=$1
shift
sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(calibrate softmax softmax_graph copy matmul rmsnorm rmsnorm_graph summary)
mkdir -p "$out" || exit 2

repo=$(cd "$(dirname "$0")/.." && pwd)
if command -v rooflinectl >/dev/null 2>&1; then
    rl=(rooflinectl)
else
    export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
    rl=(python3 -c 'import sys; from rooflinectl.cli import main; sys.argv[0] = "rooflinectl"; main()')
    missing=$(python3 - <<'EOF'
import importlib.util
print(" ".join(m for m in ("torch", "triton", "typer", "rich", "pydantic", "yaml") if importlib.util.find_spec(m) is None))
EOF
)
    if [ -n "$missing" ]; then
        echo "missing Python packages: $missing (pip install -e '.[gpu]', or carry wheels and" \
             "pip install --no-index --find-links DIR ...)" >&2
        exit 2
    fi
fi

status=0
run() {  # run NAME ARGS...: one measure call, its JSON to $out/NAME.json, its table to $out/NAME.txt
    local name=$1
    shift
    echo "== rooflinectl $* --save $out/$name.json" >&2
    COLUMNS=${COLUMNS:-140} "${rl[@]}" "$@" --save "$out/$name.json" | tee "$out/$name.txt"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && { echo "== $name: exit $rc" >&2; status=1; }
    return 0
}

# Issue 4: rows of 1,024 to 16,384 (>= 85% of the copy bandwidth) and 65,536, 262,144 (>= 70%), 4,096 rows.
softmax_shapes=4096x1024,4096x2048,4096x4096,4096x8192,4096x16384,4096x65536,4096x262144
softmax_small=4096x1024,4096x2048,4096x4096
# Issue 5's table and the batches in between, at K×N = 4096×4096, 4096×14336 and 8192×8192.
rmsnorm_shapes=1x4096x4096,1x4096x14336,8192x4096x4096
for m in 8 32 128 512 2048; do rmsnorm_shapes+=",${m}x4096x14336,${m}x8192x8192"; done
# Decode shapes run for microseconds: timed again from a CUDA graph.
decode_shapes=1x4096x4096,1x4096x14336,8x4096x14336,32x4096x14336,8x8192x8192,32x8192x8192

for section in "${sections[@]}"; do
    case $section in
    calibrate)
        echo "== rooflinectl calibrate -o $out/calibrated.yaml" >&2
        COLUMNS=${COLUMNS:-140} "${rl[@]}" calibrate -o "$out/calibrated.yaml" | tee "$out/calibrate.txt"
        [ "${PIPESTATUS[0]}" -ne 0 ] && status=1
        ;;
    softmax)
        run softmax-bf16 measure --kernel fused_softmax --shape "$softmax_shapes" --dtype bf16 --baseline all --timer events
        run softmax-fp32 measure --kernel fused_softmax --shape "$softmax_shapes" --dtype fp32 --baseline all --timer events
        ;;
    softmax_graph)
        run softmax-bf16-graph measure --kernel fused_softmax --shape "$softmax_small" --dtype bf16 --baseline all --timer cuda_graph
        run softmax-fp32-graph measure --kernel fused_softmax --shape "$softmax_small" --dtype fp32 --baseline all --timer cuda_graph
        ;;
    copy) run copy-bf16 measure --kernel copy --dtype bf16 --baseline all --timer events ;;
    matmul) run matmul-bf16 measure --kernel matmul --shape 8192x8192x8192,4096x4096x4096 --dtype bf16 --baseline all --timer events ;;
    rmsnorm) run rmsnorm_linear-bf16 measure --kernel rmsnorm_linear --shape "$rmsnorm_shapes" --dtype bf16 --baseline all --timer events ;;
    rmsnorm_graph)
        run rmsnorm_linear-bf16-graph measure --kernel rmsnorm_linear --shape "$decode_shapes" --dtype bf16 \
            --baseline all --timer cuda_graph
        ;;
    summary)
        python3 - "$out" <<'EOF'
import sys
from pathlib import Path

out = Path(sys.argv[1])


def t(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.1f}µs" if s < 1e-3 else f"{s * 1e3:.3f}ms"


def f(x, fmt):
    return "-" if x is None else format(x, fmt)


cal = out / "calibrated.yaml"
if cal.exists():
    import yaml

    m = yaml.safe_load(cal.read_text()).get("measured", {})
    peaks = ", ".join(f"{k} {v:,.0f}" for k, v in m.get("tensor_tflops", {}).items())
    print(f"calibrate: copy {m.get('copy_bandwidth_gbps', 0):,.0f} GB/s; matmul TFLOP/s: {peaks}")
head = ("file", "shape", "check", "time", "GB/s", "TFLOP/s", "%spec", "%meas", "torch", "×torch", "compile", "×comp")
rows = []
from rooflinectl.records.kernel import load  # the one reader of measure's records (schema 1 and 2)

for path in sorted(out.glob("*.json")):
    run = load(path)
    ceil = run.ceilings
    print(f"{path.name}: {run.gpu.name} (spec {run.gpu.spec}), torch {run.torch_version}, "
          f"triton {run.triton_version}, driver {run.gpu.driver}, {run.date}, timer {run.timer}; "
          f"copy ceiling {f(ceil.copy_bandwidth_gbps if ceil else None, ',.0f')} GB/s")
    for r in run.records:
        b = {x.name: x for x in r.baselines}
        c = r.correctness
        torch_b, compile_b = b.get("torch"), b.get("compile")
        rows.append((path.stem, r.shape_text, r.status + (f" {c.rel_error:.0e}" if c else ""),
                     t(r.time_s), f(r.achieved_gbps, ",.0f"), f(r.achieved_tflops, ",.1f"),
                     f(r.spec_roof_pct, ".0f"), f(r.measured_roof_pct, ".0f"),
                     t(torch_b.time_s if torch_b else None), f(torch_b.speedup if torch_b else None, ".2f"),
                     t(compile_b.time_s if compile_b else None), f(compile_b.speedup if compile_b else None, ".2f")))
widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
for row in (head, *rows):
    print("  ".join(str(x).ljust(w) if i < 3 else str(x).rjust(w) for i, (x, w) in enumerate(zip(row, widths))))
EOF
        ;;
    *) echo "unknown section '$section'" >&2; exit 2 ;;
    esac
done
exit $status
