"""Where the paged decode kernel's time goes where the pages cost most, for Nsight Compute: the shipped config at
1 × 64/4 × 4,096 (a group of 16 heads in two slices, pages of 16 cost +7%) and at 1 × 32/8 × 4,096 (a group of 4,
pages cost +1%), contiguous and paged, each called once inside an NVTX range named "decode". Run under

    ncu --clock-control none --nvtx --nvtx-include "decode/" --section SpeedOfLight --section WarpStateStats \\
        --section LaunchStats --section MemoryWorkloadAnalysis --metrics dram__bytes_read.sum,\\
lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,\\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,smsp__inst_executed.sum --csv --page raw \\
        python benchmarks/paged_ncu.py

Every kernel runs once outside the range first (compilation); prints the order of the calls inside it, so that
the CSV's rows can be matched to them.
"""

from __future__ import annotations

import torch

from rooflinectl.kernels.flash_decoding import decode_config, flash_decoding, make_decode_inputs
from rooflinectl.kernels.paged_decoding import make_paged_inputs

for b, h, g, n in ((1, 64, 4, 4096), (1, 32, 8, 4096)):
    d = 128
    cfg = decode_config(b, g, n, group=h // g, head_d=d)
    flat = make_decode_inputs(b, h, g, [n] * b, d, "bf16", "cuda", torch.Generator("cuda").manual_seed(0))
    paged = make_paged_inputs(b, h, g, [n] * b, d, 16, "bf16", "cuda", torch.Generator("cuda").manual_seed(1))
    out = torch.empty_like(flat["q"])
    calls = {
        "contiguous": lambda flat=flat, out=out, cfg=cfg: flash_decoding(
            flat["q"], flat["k"], flat["v"], flat["lengths"], out, cfg),
        "paged 16": lambda paged=paged, out=out, cfg=cfg: flash_decoding(
            paged["q"], paged["k"], paged["v"], paged["lengths"], out, cfg, table=paged["table"]),
    }
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    for name, call in calls.items():
        print((b, h, g, n, d), cfg, name, flush=True)
        torch.cuda.nvtx.range_push("decode")
        call()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
