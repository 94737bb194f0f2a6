"""fma: the vector units' fp32 rate, for ``calibrate``'s vector ceiling.

Each element runs CHAINS independent chains of ITERS fused multiply-adds, y ← y·A + B, on values read once and
written once: 2·CHAINS·ITERS FLOPs (a multiply and an add) for 8 bytes (an fp32 read and write), 128 FLOP/B at
the defaults, far right of any GPU's vector ridge (an H200: 66.9 TFLOP/s over 4.8 TB/s, 14 FLOP/B), so the time
is the FMA units'. Two chains per element give each warp independent instructions while one chain waits on the
last FMA's latency. A = 0.999 and B = 0.001 keep every value inside [−|x|, |x| + 1]: no overflow, no denormals.
"""

from __future__ import annotations

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

ITERS = 256
CHAINS = 2
BLOCK = 1024
A, B = 0.999, 0.001


@triton.jit
def _fma_kernel(x_ptr, y_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y0 = x
    y1 = x * 0.5
    for _ in tl.static_range(ITERS):  # unrolled: 2·ITERS FMAs an element, in two independent chains
        y0 = y0 * 0.999 + 0.001
        y1 = y1 * 0.999 + 0.001
    tl.store(y_ptr + offs, y0 + y1, mask=mask)


def fma_flops(n: int, iters: int = ITERS) -> int:
    """FLOPs of one run over n elements: CHAINS chains of ``iters`` FMAs, 2 FLOPs each (the final add of the two
    chains, one per element, is left out: 1 in 2·CHAINS·ITERS)."""
    return 2 * CHAINS * iters * n


def fma(x: torch.Tensor, y: torch.Tensor, iters: int = ITERS) -> None:
    """y = the two chains' sum for each element of x (fp32, contiguous, on one device)."""
    if x.dtype != torch.float32 or y.shape != x.shape or not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError(f"fma: x {tuple(x.shape)} {x.dtype}, y {tuple(y.shape)} {y.dtype}")
    n = x.numel()
    _fma_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, ITERS=iters, BLOCK=BLOCK, num_warps=4)


def fma_reference(x: torch.Tensor, iters: int = ITERS) -> torch.Tensor:
    """The same chains in float64, closed form: y_k = A^k·y_0 + B·(1 − A^k)/(1 − A), for y_0 = x and x/2, summed."""
    x64 = x.to(torch.float64)
    ak = A**iters
    tail = B * (1 - ak) / (1 - A)
    return (ak * x64 + tail) + (ak * 0.5 * x64 + tail)
