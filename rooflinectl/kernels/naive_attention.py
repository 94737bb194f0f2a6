"""naive_attention: the three-kernel path, scores through HBM (the picture that FlashAttention exists to avoid).

1. qk: S = Q·Kᵀ/√d for every (sequence, head), the full S×S (a causal mask writes −inf right of the diagonal, it
   does not skip it): reads Q and K, writes B·h·S·S scores in the inputs' type.
2. softmax over each score row: the project's fused_softmax kernel (reads and writes B·h·S·S).
3. pv: O = P·V: reads the B·h·S·S probabilities and V, writes O.
Counted by engine.count.attention_io.naive_attention_ops (the engine's naive rule). The scores buffer is kept between
runs of the same size, so timing sees the kernels, not the allocator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.attention_io import naive_attention_ops, summed
from ..engine.count.op import Op
from ..errors import UserError
from .base import Inputs, Kernel, dtype_name
from .flash_attention import (
    attention_reference,
    attention_shape,
    check_attention_shape,
    make_qkv,
    sdpa,
)
from .softmax import _SPLIT_ABOVE
from .softmax import KERNEL as SOFTMAX


@dataclass(frozen=True)
class NaiveConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@triton.jit
def _qk_kernel(
    q_ptr, k_ptr, s_ptr, n_ctx, n_heads, group, scale,
    sqb, sqh, sqm, sqd, skb, skh, skn, skd, ssb, ssh, ssm, ssn,
    HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    # One BLOCK_M×BLOCK_N tile of scores: reads BLOCK_M×d of Q and d×BLOCK_N of K, writes the tile.
    n_tiles_n = tl.cdiv(n_ctx, BLOCK_N)
    pid_m = tl.program_id(0) // n_tiles_n
    pid_n = tl.program_id(0) - pid_m * n_tiles_n
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh - b * n_heads
    kvh = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    q = tl.load(q_ptr + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh + offs_m[:, None].to(tl.int64) * sqm
                + offs_d[None, :] * sqd, mask=offs_m[:, None] < n_ctx, other=0.0)
    k = tl.load(k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh + offs_n[None, :].to(tl.int64) * skn
                + offs_d[:, None] * skd, mask=offs_n[None, :] < n_ctx, other=0.0)
    s = tl.dot(q, k) * scale
    if CAUSAL:
        s = tl.where(offs_n[None, :] <= offs_m[:, None], s, -float("inf"))
    tl.store(s_ptr + b.to(tl.int64) * ssb + h.to(tl.int64) * ssh + offs_m[:, None].to(tl.int64) * ssm
             + offs_n[None, :].to(tl.int64) * ssn, s.to(s_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < n_ctx) & (offs_n[None, :] < n_ctx))


@triton.jit
def _pv_kernel(
    p_ptr, v_ptr, o_ptr, n_ctx, n_heads, group,
    spb, sph, spm, spn, svb, svh, svn, svd, sob, soh, som, sod,
    HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # BLOCK_M rows of O: reads BLOCK_M×S of P and S×d of V, writes BLOCK_M×d.
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // n_heads
    h = bh - b * n_heads
    kvh = h // group
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    p_base = p_ptr + b.to(tl.int64) * spb + h.to(tl.int64) * sph + offs_m[:, None].to(tl.int64) * spm
    v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)
    for n0 in tl.range(0, n_ctx, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        p = tl.load(p_base + cols[None, :].to(tl.int64) * spn, mask=(offs_m[:, None] < n_ctx) & (cols[None, :] < n_ctx),
                    other=0.0)
        v = tl.load(v_base + cols[:, None].to(tl.int64) * svn + offs_d[None, :] * svd, mask=cols[:, None] < n_ctx,
                    other=0.0)
        acc = tl.dot(p, v, acc)
    tl.store(o_ptr + b.to(tl.int64) * sob + h.to(tl.int64) * soh + offs_m[:, None].to(tl.int64) * som
             + offs_d[None, :] * sod, acc.to(o_ptr.dtype.element_ty), mask=offs_m[:, None] < n_ctx)


_CONFIG = NaiveConfig(128, 64, num_warps=4, num_stages=3)
_CONFIG_SMALL = NaiveConfig(16, 16, num_warps=4, num_stages=2)


class NaiveAttention(Kernel):
    shape_format = "BxHxKVxSxD"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    causal = True
    # Batch 1 only: the scores of 32 heads × 32,768² take 69 GB in bf16.
    default_shapes = [(1, 32, 8, 4096, 128), (1, 32, 8, 16384, 128), (1, 32, 8, 32768, 128)]
    interpret_shapes = [(1, 2, 2, 1, 16), (2, 7, 1, 37, 32)]

    def __init__(self) -> None:
        super().__init__()
        self._scores: torch.Tensor | None = None

    def check_shape(self, shape) -> None:
        super().check_shape(shape)
        check_attention_shape(self.name, shape)
        if shape[3] > _SPLIT_ABOVE:
            # fused_softmax splits longer rows across programs, whose fallback reads the whole row: not in place.
            raise UserError(f"kernel {self.name}: at most {_SPLIT_ABOVE:,} tokens (the softmax runs in place)")

    def op(self, shape, dtype) -> Op:
        return summed("attention", naive_attention_ops(attention_shape(shape, self.causal), dtype))

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        return make_qkv(shape, dtype, device, generator)

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        return torch.empty_like(inputs["q"])

    def config_for(self, shape, dtype) -> NaiveConfig:
        return _CONFIG_SMALL if shape[3] <= 256 else _CONFIG

    def _scores_buffer(self, b: int, h: int, s: int, like: torch.Tensor) -> torch.Tensor:
        buf = self._scores
        if buf is None or buf.shape != (b, h, s, s) or buf.dtype != like.dtype or buf.device != like.device:
            self._scores = None  # free the old one first
            buf = self._scores = torch.empty((b, h, s, s), dtype=like.dtype, device=like.device)
        return buf

    def run(self, inputs: Inputs, out: torch.Tensor, config: NaiveConfig | None = None) -> None:
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        b, h, s, d = q.shape
        g = k.shape[1]
        cfg = config or self.config_for((b, h, g, s, d), dtype_name(q.dtype))
        scores = self._scores_buffer(b, h, s, q)
        self._start_run()
        meta = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        grid = (triton.cdiv(s, cfg.block_m) * triton.cdiv(s, cfg.block_n), b * h)
        handle = _qk_kernel[grid](
            q, k, scores, s, h, h // g, 1.0 / math.sqrt(d), *q.stride(), *k.stride(), *scores.stride(),
            HEAD_D=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=self.causal, **meta,
        )  # fmt: skip
        self._record(_qk_kernel, grid, cfg, handle)
        rows = scores.view(b * h * s, s)
        SOFTMAX.run({"x": rows}, rows)  # in place: each row is read before it is written
        self._launches.extend(SOFTMAX.last_launches())
        grid = (triton.cdiv(s, cfg.block_m), b * h)
        handle = _pv_kernel[grid](
            scores, v, out, s, h, h // g, *scores.stride(), *v.stride(), *out.stride(),
            HEAD_D=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, **meta,
        )  # fmt: skip
        self._record(_pv_kernel, grid, cfg, handle)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return attention_reference(inputs["q"], inputs["k"], inputs["v"], self.causal)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        return sdpa(inputs, self.causal)

    def tolerance(self, dtype: str) -> float:
        # The scores and probabilities are rounded to the inputs' type in HBM (flash keeps them in fp32): bf16's
        # 2**-9 on each, twice.
        return {"fp32": 5e-3, "fp16": 1e-2, "bf16": 3e-2}[dtype]


KERNEL = NaiveAttention()
