"""docs/img/attention-roofline-h200.png: naive against flash attention on the H200's roofline, bytes measured.

    python benchmarks/attention_roofline.py docs/results/h200-2026-12-03-attention/bench OUT.png

Each point: the kernel's FLOPs (engine/attention_io: flash counts the S(S+1)/2 causal scores, naive the full S×S
it computes) over the DRAM bytes Nsight Compute read and wrote (ncu-naive-flash.csv; naive: its three kernels
summed) for x, and over the time of run 3 (CUDA-graph replay) for y. Hollow markers: the engine's counted bytes.
Roofs: the spec's 4,800 GB/s and 989.4 dense bf16 TFLOP/s (hardware/h200.yaml), and the copy rate measured in run 3.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path


def ncu_bytes(path: Path) -> dict[int, float]:
    """DRAM bytes read + written by profiled launch ID."""
    out: dict[int, float] = {}
    rows = [line for line in path.read_text().splitlines() if line.startswith('"')]
    for row in csv.reader(rows):
        if row[0] == "ID" or not row[12].startswith("dram__bytes"):
            continue
        out[int(row[0])] = out.get(int(row[0]), 0.0) + float(row[14].replace(",", ""))
    return out


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rooflinectl.engine.count.attention_io import (
        AttentionShape,
        flash_attention_op,
        flash_tiling,
        naive_attention_ops,
        summed,
    )
    from rooflinectl.units import MIB

    bench, png = Path(sys.argv[1]), sys.argv[2]
    measured = ncu_bytes(bench / "ncu-naive-flash.csv")
    run = json.loads((bench / "run3-prefill.json").read_text())
    times = {tuple(r["shape"]): r["times"] for r in run["prefill"]}
    # Launch IDs in attention_ncu.py's order: flash at 512, 4,096, 32,768 (one each), then naive (three each).
    ids = {("flash", 4096): [1], ("flash", 32768): [2], ("naive", 4096): [6, 7, 8], ("naive", 32768): [9, 10, 11]}
    fig, ax = plt.subplots(figsize=(7.5, 5))
    peak, bw, copy = 989.4e12, 4800e9, run["env"]["copy_bw_bytes_per_s"]
    for rate, style, label in ((bw, "k-", "H200 spec: 4,800 GB/s, 989 TFLOP/s bf16"),
                               (copy, "k:", f"measured copy {copy / 1e9:,.0f} GB/s")):
        xs = [1, peak / rate, 1e5]  # through the ridge
        ax.plot(xs, [min(peak, x * rate) / 1e12 for x in xs], style, lw=1, label=label)
    rows = []
    for (kind, s), launch_ids in ids.items():
        shape = AttentionShape(1, 32, 8, s, s, 128, causal=True)
        if kind == "flash":
            op = flash_attention_op(shape, "bf16", flash_tiling(shape, "bf16", l2_bytes=60 * MIB, block_q=128))
            t = times[(1, 32, 8, s, 128)]["ours 128x128 w8 s3"]["s"]
        else:
            op = summed("attention", naive_attention_ops(shape, "bf16"))
            t = times[(1, 32, 8, s, 128)]["naive"]["s"]
        dram = sum(measured[i] for i in launch_ids)
        color = "tab:blue" if kind == "flash" else "tab:red"
        marker = "o" if s == 4096 else "s"
        ax.scatter(op.flops / dram, op.flops / t / 1e12, c=color, marker=marker, zorder=3,
                   label=f"{kind} {s:,}: {dram / 1e9:,.2f} GB DRAM, {t * 1e3:,.2f} ms")
        ax.scatter(op.flops / op.bytes, op.flops / t / 1e12, facecolors="none", edgecolors=color, marker=marker)
        rows.append((kind, s, op.flops, op.bytes, dram, t))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(10, 1e5)
    ax.set_ylim(10, 2000)
    ax.set_xlabel("FLOP per DRAM byte (filled: Nsight Compute's bytes; hollow: the engine's count)")
    ax.set_ylabel("TFLOP/s achieved")
    ax.set_title("Causal attention, B1, 32/8 heads, d 128, bf16, H200")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    for kind, s, flops, counted, dram, t in rows:
        print(f"{kind} {s}: {flops / 1e9:,.1f} GFLOP, counted {counted / 1e9:,.3f} GB, DRAM {dram / 1e9:,.3f} GB, "
              f"{t * 1e3:,.3f} ms, {flops / t / 1e12:,.0f} TFLOP/s, {dram / t / 1e9:,.0f} GB/s")


if __name__ == "__main__":
    main()
