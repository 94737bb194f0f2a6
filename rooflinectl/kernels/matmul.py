"""matmul: C = A·B for A M×K and B K×N, the Triton compute probe.

Reads A (M·K) and B (K·N) once from HBM and writes C (M·N); 2·M·N·K FLOPs on the tensor cores (primitives.matmul_op with
b_is_weight=False). bf16 and fp16 operands accumulate in fp32; fp32 operands go through tf32. Each program
computes one BLOCK_M×BLOCK_N tile of C, walking K in BLOCK_K steps; programs are ordered in groups of GROUP_M tile
rows so that programs running together share their A and B tiles in the L2 (Triton's matmul tutorial).
Plain pointer arithmetic only (no block pointers or tensor descriptors), so that it runs on triton 3.x and its
interpreter alike; Triton still pipelines the loads through shared memory and issues wgmma on Hopper.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.op import Op
from ..engine.count.primitives import matmul_op
from .base import Inputs, Kernel, dot_dtype, dtype_name, sm_count, torch_dtype


@dataclass(frozen=True)
class MatmulConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    # Reads a BLOCK_M×K strip of A and a K×BLOCK_N strip of B, writes one BLOCK_M×BLOCK_N tile of C.
    pid = tl.program_id(0)
    # Grouped order: GROUP_M tile rows walk the tile columns together, so that their strips of B are reused
    # from the L2 (triton's swizzle2d is that order, as in its matmul tutorial).
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tl.swizzle2d(pid // num_pid_n, pid % num_pid_n, tl.cdiv(M, BLOCK_M), num_pid_n, GROUP_M)

    # Rows and columns past the edge wrap around (% M, % N) so that the loads need no mask; the store masks them.
    offs_am = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    offs_bn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_bn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk

    offs_cm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_cn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    c_ptrs = c_ptr + offs_cm[:, None] * scm + offs_cn[None, :] * scn
    mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# Tiles for 16-bit operands on Hopper: 128×256×64 in 8 warps (two warpgroups, each a 64×256 wgmma), 3 stages of
# 48 KB of shared memory. Measured on an H200 at 8192³ bf16 (docs/kernels-tuning.md).
_CONFIG_16 = MatmulConfig(128, 256, 64, 8, num_warps=8, num_stages=3)
# fp32 through tf32: operands twice as wide, so half the K step for the same shared memory.
_CONFIG_32 = MatmulConfig(128, 128, 32, 8, num_warps=8, num_stages=3)
# Small problems: tiles of 64 so that there are programs for every SM.
_CONFIG_SMALL = MatmulConfig(64, 64, 32, 8, num_warps=4, num_stages=3)


class Matmul(Kernel):
    shape_format = "MxKxN"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # 8192³: 1.1 TFLOP, 1,024 tiles of 128×256 (7.8 per SM on 132 SMs), 384 MB of bf16 operands and result.
    default_shapes = [(8192, 8192, 8192), (4096, 4096, 4096)]
    interpret_shapes = [(1, 1, 1), (17, 33, 19), (64, 100, 40)]

    def op(self, shape, dtype) -> Op:
        m, k, n = shape
        return matmul_op("matmul", m, k, n, dot_dtype(dtype), b_is_weight=False)

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        m, k, n = shape
        t = torch_dtype(dtype)
        a = torch.randn((m, k), generator=generator, device=device, dtype=torch.float32).to(t)
        b = torch.randn((k, n), generator=generator, device=device, dtype=torch.float32).to(t)
        return {"a": a, "b": b}

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        a, b = inputs["a"], inputs["b"]
        return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)

    def config_for(self, shape, dtype) -> MatmulConfig:
        m, k, n = shape
        if dtype == "fp32":
            return _CONFIG_32
        # Fewer big tiles than SMs: small tiles, so that every SM has work.
        if triton.cdiv(m, 128) * triton.cdiv(n, 256) < sm_count():
            return _CONFIG_SMALL
        return _CONFIG_16

    def candidates(self, shape, dtype, gpu=None) -> list[MatmulConfig]:
        """The chosen config and its nearest rival (the wider sweeps are in docs/kernels-tuning.md)."""
        chosen = self.config_for(shape, dtype)
        return (
            list(dict.fromkeys([chosen, MatmulConfig(128, 256, 64, 16, 8, 3)]))
            if dtype != "fp32"
            else [chosen]
        )

    def run(self, inputs: Inputs, out: torch.Tensor, config: MatmulConfig | None = None) -> None:
        a, b = inputs["a"], inputs["b"]
        m, k = a.shape
        n = b.shape[1]
        cfg = config or self.config_for((m, k, n), dtype_name(a.dtype))
        self._start_run()
        grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
        handle = _matmul_kernel[grid](
            a,
            b,
            out,
            m,
            n,
            k,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            out.stride(0),
            out.stride(1),
            BLOCK_M=cfg.block_m,
            BLOCK_N=cfg.block_n,
            BLOCK_K=cfg.block_k,
            GROUP_M=cfg.group_m,
            EVEN_K=k % cfg.block_k == 0,
            num_warps=cfg.num_warps,
            num_stages=cfg.num_stages,
        )
        self._record(_matmul_kernel, grid, cfg, handle)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return inputs["a"].to(torch.float32) @ inputs["b"].to(torch.float32)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        return inputs["a"] @ inputs["b"]

    def tolerance(self, dtype: str) -> float:
        # fp32 runs through tf32 (10 mantissa bits): about 3e-4 relative on random data, bound 3e-3.
        # 16-bit operands are exact products summed in fp32; the output's rounding dominates: bf16's 1e-2 is
        # 2.6 u (u = 2**-8), fp16's 3e-3 is 6 u (u = 2**-11; it was 1e-2, 20 u).
        return {"fp32": 3e-3, "fp16": 3e-3, "bf16": 1e-2}[dtype]


KERNEL = Matmul()
