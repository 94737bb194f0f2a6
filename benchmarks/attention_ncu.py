"""DRAM bytes of naive and flash attention, for Nsight Compute (issue 17): one call of each at 4,096 and 32,768
tokens (batch 1, 32 query / 8 KV heads, d 128, bf16, causal). Run under

    ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum --csv \\
        -k regex:'_flash_fwd_kernel|_qk_kernel|_pv_kernel|_softmax' python benchmarks/attention_ncu.py

Each kernel is compiled by a call on a 256-token problem first (ncu profiles those too; they are told apart by
their grids). Prints the order of the calls, so that the CSV's rows can be matched to them.
"""

from __future__ import annotations

import torch

from rooflinectl.kernels.flash_attention import KERNEL as FA
from rooflinectl.kernels.naive_attention import KERNEL as NAIVE

for kernel in (FA, NAIVE):
    for s in (512, 4096, 32768):
        shape = (1, 32, 8, s, 128)
        inputs = kernel.make_inputs(shape, "bf16", "cuda", torch.Generator("cuda").manual_seed(0))
        out = kernel.make_output(inputs)
        kernel.run(inputs, out)
        torch.cuda.synchronize()
        print(kernel.name, shape, [(launch.function, launch.grid) for launch in kernel.last_launches()], flush=True)
        del inputs, out
    NAIVE._scores = None
    torch.cuda.empty_cache()
