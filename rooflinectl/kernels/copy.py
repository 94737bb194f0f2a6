"""copy: y = x for N contiguous elements, the bandwidth probe.

Reads N elements and writes N elements, no arithmetic (primitives.copy_op). Each program moves one BLOCK of
consecutive elements with 16-byte vector loads and stores; the number of bytes in flight per SM, not the
arithmetic, decides its speed, which is what `calibrate` wants to measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.op import Op
from ..engine.count.primitives import copy_op
from .base import Inputs, Kernel, torch_dtype


@dataclass(frozen=True)
class CopyConfig:
    block: int  # elements per program
    num_warps: int
    hints: bool = False  # evict_first on the load (slower on an H200, see _BLOCK)


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr, HINTS: tl.constexpr):
    # Reads BLOCK elements, writes BLOCK elements.
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        if HINTS:
            x = tl.load(x_ptr + offs, eviction_policy="evict_first")
        else:
            x = tl.load(x_ptr + offs)
        tl.store(y_ptr + offs, x)
    else:
        mask = offs < n
        if HINTS:
            x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")
        else:
            x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x, mask=mask)


# 1,024 elements (2 KB of bf16) per program in 4 warps: one 16-byte vector a thread. Measured on an H200, 2**28
# bf16 elements, two runs: 254 and 259 µs (4.2 TB/s, torch's copy_ 260 µs); 2,048 in 8 warps 255, 4,096 in 8
# warps 260, 8,192 in 8 warps 266, 16,384 in 16 warps 262; evict_first on the load cost up to 15% (309 against
# 267 µs at 8,192 in 8 warps).
_BLOCK = 1024
_WARPS = 4


class Copy(Kernel):
    shape_format = "N"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # 2**28 elements: 512 MB of bf16 each way, far past the L2, about 0.25 ms on an H200.
    default_shapes = [(1 << 28,)]
    interpret_shapes = [(1,), (1000,), (4097,), (20000,)]

    def op(self, shape, dtype) -> Op:
        (n,) = shape
        return copy_op("copy", n, dtype)

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        (n,) = shape
        x = torch.randn((n,), generator=generator, device=device, dtype=torch.float32)
        return {"x": x.to(torch_dtype(dtype))}

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        return torch.empty_like(inputs["x"])

    def config_for(self, shape, dtype) -> CopyConfig:
        return CopyConfig(_BLOCK, _WARPS)

    def candidates(self, shape, dtype, gpu=None) -> list[CopyConfig]:
        """The chosen config and its nearest rivals (the wider sweeps are in docs/kernels-tuning.md)."""
        return [self.config_for(shape, dtype), CopyConfig(2048, 8), CopyConfig(2048, 4)]

    def run(self, inputs: Inputs, out: torch.Tensor, config: CopyConfig | None = None) -> None:
        x = inputs["x"]
        if not (x.is_contiguous() and out.is_contiguous()) or out.numel() != x.numel():
            raise ValueError("copy takes contiguous tensors of the same size")
        n = x.numel()
        cfg = config or self.config_for((n,), None)
        self._start_run()
        grid = (triton.cdiv(n, cfg.block),)
        handle = _copy_kernel[grid](
            x, out, n, BLOCK=cfg.block, EVEN=n % cfg.block == 0, HINTS=cfg.hints, num_warps=cfg.num_warps
        )
        self._record(_copy_kernel, grid, cfg, handle)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return inputs["x"].to(torch.float64)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        x = inputs["x"]
        return torch.empty_like(x).copy_(x)

    def tolerance(self, dtype: str) -> float:
        return 0.0  # a copy is exact


KERNEL = Copy()
