"""Where rmsnorm_linear loses to cuBLAS, for Nsight Compute: the shipped kernels (``config_for``'s pick) against
F.linear alone on the normalized x at the shapes where issue 16's targets were missed (bf16). Run under

    ncu --clock-control none --nvtx --nvtx-include "rmsnorm_linear/" --section SpeedOfLight \\
        --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \\
        --csv --page raw python benchmarks/rmsnorm_linear_ncu.py > OUT/ncu.csv

Every call is made once outside the NVTX range first (compiling, cuBLAS's heuristics); inside it, once each.
Prints the order of the calls on stderr. ``--parse OUT/ncu.csv`` prints, per kernel, its time, DRAM and L2 bytes,
DRAM and SM throughput, and the warps' stall cycles per issued instruction. Records:
docs/results/h200-2026-12-03-rmsnorm-linear/.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHAPES = [(64, 4096, 14336), (64, 8192, 10240), (128, 4096, 14336), (512, 4096, 4096), (8, 8192, 8192),
          (32, 8192, 57344), (1, 4096, 6144)]
METRICS = {
    "time µs": ("gpu__time_duration.sum", 1e-3),  # ns
    "DRAM read MB": ("dram__bytes_read.sum", 1e-6),
    "L2→SM MB": ("lts__t_sectors_srcunit_tex_op_read.sum", 32e-6),  # sectors of 32 bytes
    "DRAM %": ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
    "SM %": ("sm__throughput.avg.pct_of_peak_sustained_elapsed", 1.0),
    "long-sb": ("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", 1.0),
    "barrier": ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", 1.0),
    "wait": ("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", 1.0),
    "regs": ("launch__registers_per_thread", 1.0),
    "grid": ("launch__grid_size", 1.0),
}


def run() -> None:
    import torch

    from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, linear_alone

    k = RMSNormLinear()
    for shape in SHAPES:
        inputs = k.make_inputs(shape, "bf16", "cuda", torch.Generator("cuda").manual_seed(0))
        out = k.make_output(inputs)
        calls = {"ours": lambda i=inputs, o=out: k.run(i, o), "cuBLAS alone": lambda i=inputs: linear_alone(i)}
        for call in calls.values():
            call()
        torch.cuda.synchronize()
        for name, call in calls.items():
            print(shape, name, k.config_for(shape, "bf16") if name == "ours" else "", file=sys.stderr, flush=True)
            torch.cuda.nvtx.range_push("rmsnorm_linear")
            call()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()


def parse(path: str) -> str:
    """The CSV's kernels, one line each, in the order they ran."""
    lines = Path(path).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.DictReader(lines[start:]))[1:]  # the row after the header holds the units
    out = ["| kernel | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
    for row in rows:
        cells = []
        for metric, scale in METRICS.values():
            raw = (row.get(metric) or "").replace(",", "")
            try:
                cells.append(f"{float(raw) * scale:,.1f}" if scale != 1.0 or "." in raw else raw)
            except ValueError:
                cells.append("—")
        out.append(f"| {row.get('Kernel Name', '?')[:40]} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--parse":
        print(parse(sys.argv[2]))
    else:
        run()
