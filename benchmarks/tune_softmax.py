"""Sweep fused_softmax's launch shapes on a GPU: one-shot rows, persistent rows with pipelined loads, online
(one program per row or a persistent grid), split rows (several programs a row, exchanging their max and sum),
with and without programmatic dependent launch. Every config is checked against torch (global and worst-row
error, poisoned output) before it is timed; the timing is benchmarks/tune_kernels.py's (CUDA-graph replay over
rotating inputs, torch copy_ ceiling from the same process).

    python benchmarks/tune_softmax.py --out /tmp/tune-softmax                 # the whole sweep, about a minute on an H200
    python benchmarks/tune_softmax.py --cols 1024,262144 --dtypes bf16        # part of it
    TRITON_INTERPRET=1 python benchmarks/tune_softmax.py --dry                # the script's logic on a CPU
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import tune_kernels as tk  # noqa: E402

from rooflinectl.kernels.registry import get_kernel  # noqa: E402
from rooflinectl.kernels.softmax import SoftmaxConfig  # noqa: E402

ROWS = 4096


def configs(cols: int, dtype: str, dry: bool) -> list[SoftmaxConfig]:
    """The configs worth timing at this row length (the chosen one first)."""
    k = get_kernel("fused_softmax")
    chosen = k.config_for((ROWS, cols), dtype)
    out = [chosen]
    if chosen.mode != "split":
        out.append(replace(chosen, pdl=not chosen.pdl))
    if cols <= 2048:
        for r, w in ((1, 1), (1, 2), (1, 4), (2, 2), (2, 4)):
            out.append(replace(chosen, rows_per_program=r, num_warps=w))
    if cols >= 32768:
        if chosen.mode != "online":
            out.append(SoftmaxConfig("online", 16384 if dtype != "fp32" else 32768, num_warps=16 if dtype != "fp32" else 32,
                                     hints=True))
        for block, warps in ((4096, 4), (8192, 8), (8192, 4), (16384, 16), (16384, 8)):
            if 2 <= -(-cols // block) <= 128:
                out.append(SoftmaxConfig("split", block, num_warps=warps))
        for block, warps in ((8192, 8), (16384, 16)):
            for chunks in (2, 4):
                if 2 <= -(-cols // (block * chunks)) <= 128:
                    out.append(SoftmaxConfig("split", block, num_warps=warps, chunks=chunks, hints=True))
    if dry:
        out = [c for c in out if not c.pdl][:6] + [SoftmaxConfig("split", 128), SoftmaxConfig("split", 64, chunks=2)]
    return list(dict.fromkeys(out))


def correctness(gen, dry: bool) -> int:
    """Split mode on odd shapes, every part count the sweep uses: the wait and the combine are GPU-only code."""
    k = get_kernel("fused_softmax")
    failures = 0
    shapes = [(1823, 100_003), (7, 262_147), (300, 20_000), (4096, 65_536)] if not dry else [(5, 300)]
    for shape in shapes:
        for dtype in ("bf16", "fp16", "fp32") if not dry else ("fp32",):
            for block, chunks in ((4096, 1), (8192, 1), (16384, 1), (8192, 4)) if not dry else ((64, 1), (64, 2)):
                parts = -(-shape[1] // (block * chunks))
                if parts > 128:
                    continue
                cfg = SoftmaxConfig("split", block, num_warps=max(4, min(16, block // 1024)), chunks=chunks)
                inputs = k.make_inputs(shape, dtype, tk.DEVICE, gen)
                out = k.make_output(inputs)
                try:
                    ok, err, rerr = tk.check(k, inputs, out, cfg, dtype)
                except Exception as exc:
                    ok, err, rerr = False, float("nan"), float("nan")
                    tk.log(f"   ERROR {type(exc).__name__}: {str(exc)[:200]}")
                failures += not ok
                tk.log(f"{'ok  ' if ok else 'FAIL'} split {shape} {dtype} block={block}x{chunks} parts={parts} "
                       f"err={err:.2e} row={rerr:.1e}")
    # The fallback of split mode (a program that stops waiting reads its whole row) forced: no polls at all.
    from rooflinectl.kernels import softmax as sm

    saved, sm._MAX_POLLS = sm._MAX_POLLS, 0
    try:
        for dtype in ("bf16", "fp32") if not dry else ("fp32",):
            shape = (301, 40_000) if not dry else (3, 300)
            inputs = k.make_inputs(shape, dtype, tk.DEVICE, gen)
            cfg = SoftmaxConfig("split", 4096 if not dry else 64, num_warps=4)
            ok, err, rerr = tk.check(k, inputs, k.make_output(inputs), cfg, dtype)
            failures += not ok
            tk.log(f"{'ok  ' if ok else 'FAIL'} split fallback {shape} {dtype} err={err:.2e} row={rerr:.1e}")
    finally:
        sm._MAX_POLLS = saved
    # Non-contiguous rows (a column slice) through split mode.
    if not dry:
        wide = k.make_inputs((513, 70_000), "bf16", tk.DEVICE, gen)["x"]
        x = wide[:, 7 : 7 + 65_537]
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        ok, err, rerr = tk.check(k, {"x": x}, out, SoftmaxConfig("split", 8192, num_warps=8), "bf16")
        failures += not ok
        tk.log(f"{'ok  ' if ok else 'FAIL'} split slice (513, 65537) of 70000 bf16 err={err:.2e} row={rerr:.1e}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/tune-softmax")
    ap.add_argument("--cols", default="262144,65536,32768,1024,2048,4096,16384")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--dry", action="store_true", help="CPU and tiny shapes: test this script's logic")
    args = ap.parse_args()
    tk.DRY, tk.BUDGET_S, tk.COMPILE, tk.FINAL = args.dry, args.budget_s, False, False
    tk.DEVICE = "cuda" if torch.cuda.is_available() and not args.dry else "cpu"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tk.LOG = open(out / "tune-softmax.log", "w")
    tk.log("command:", " ".join(sys.argv))
    info = tk.env_info()
    if info.get("l2_bytes"):
        tk.L2_BYTES = info["l2_bytes"]
    gen = torch.Generator(tk.DEVICE).manual_seed(4321)
    copy_bw = tk.ceilings(gen)
    failures = correctness(gen, args.dry)
    k = get_kernel("fused_softmax")
    kcopy = get_kernel("copy")
    summary = []
    for cols in (int(c) for c in args.cols.split(",")):
        for dtype in args.dtypes.split(","):
            if time.time() - tk.T0 > args.budget_s:
                tk.log(f"budget spent: {cols} {dtype} not run")
                continue
            shape = (ROWS, cols) if not args.dry else (64, min(cols, 300))
            tk.log(f"\n -- softmax {shape} {dtype} {tk.elapsed()}")

            def same_copy(s, kcopy=kcopy):
                x = s["x"].reshape(-1)
                kcopy.run({"x": x}, torch.empty_like(x))

            try:
                res = tk.time_shape(k, shape, dtype, gen, baselines=("torch",), extra={"copy same bytes": same_copy},
                                    configs=configs(shape[1], dtype, args.dry))
            except Exception:
                tk.log(traceback.format_exc())
                continue
            best, chosen = res["best"], res["chosen"]
            if best:
                line = (f"{dtype} {shape}: chosen {chosen['us'] if chosen else float('nan'):.1f} us, best "
                        f"{best['us']:.1f} us = {best['gbps']:.0f} GB/s = {100 * best['gbps'] * 1e9 / copy_bw:.0f}% "
                        f"of copy_  [{best['config']}]")
                summary.append(line)
                tk.log("   BEST", line)
            (out / "tune-softmax.json").write_text(json.dumps(tk.RECORD, indent=1, default=str))
    tk.log("\n== summary", f"(copy_ {copy_bw / 1e9:.0f} GB/s, correctness failures {failures})")
    for line in summary:
        tk.log(line)
    (out / "tune-softmax.json").write_text(json.dumps(tk.RECORD, indent=1, default=str))
    tk.log(f"done {tk.elapsed()}")


if __name__ == "__main__":
    main()
