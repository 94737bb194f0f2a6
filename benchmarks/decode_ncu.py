"""Where the decode kernel's warps wait, for Nsight Compute: the lab kernel's stage 1 (load, both products, the
partial store; no counter, no combine) and the shipped kernel, against torch's SDPA decode, at 1 × 1,024 and
16 × 1,024 positions (32 query / 8 KV heads, d 128, bf16). Run under

    ncu --clock-control none --nvtx --nvtx-include "decode/" --section SpeedOfLight --section WarpStateStats \\
        --section LaunchStats --section Occupancy --csv --page raw python benchmarks/decode_ncu.py

Every kernel is compiled and run once outside the NVTX range first; inside it, each is called once. Prints the
order of the calls, so that the CSV's rows can be matched to them. Records: docs/results/h200-2026-12-03-decode/.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from decode_lab import lab_decode  # noqa: E402

from rooflinectl.kernels.flash_decoding import KERNEL as FD  # noqa: E402
from rooflinectl.kernels.flash_decoding import decode_config, flash_decoding  # noqa: E402


def calls_for(shape):
    b, h, g, n, d = shape
    x = FD.make_inputs(shape, "bf16", "cuda", torch.Generator("cuda").manual_seed(0))
    out = torch.empty_like(x["q"])
    cfg = decode_config(b, g, n)
    return cfg, {
        "lab stage 1": lambda: lab_decode(x["q"], x["k"], x["v"], x["lengths"], out, cfg.splits, cfg.block_n,
                                          stage=1),
        "shipped": lambda: flash_decoding(x["q"], x["k"], x["v"], x["lengths"], out, cfg),
        "torch SDPA": lambda: FD.eager(x),
    }


for shape in [(1, 32, 8, 1024, 128), (16, 32, 8, 1024, 128)]:
    cfg, calls = calls_for(shape)
    for call in calls.values():  # compile, and any first-call work, outside the range
        call()
    torch.cuda.synchronize()
    for name, call in calls.items():
        print(shape, cfg, name, flush=True)
        torch.cuda.nvtx.range_push("decode")
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
