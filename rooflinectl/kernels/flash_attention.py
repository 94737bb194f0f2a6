"""flash_attention: O = softmax(Q·Kᵀ/√d + mask)·V for prefill, the scores never leaving the SM.

Shapes: Q and O are B×h×S×d, K and V are B×g×S×d (torch SDPA's layout); query head j reads K/V head j // (h/g)
(GQA/MQA: the group's heads read the same K/V rows, never repeated in memory; they meet in the L2). Causal: query
i sees positions ≤ i. Each program takes BLOCK_M queries of one head, keeps its fp32 accumulator, row max and row
sum on chip, and walks the K/V blocks: S = Q·Kᵀ (tensor cores, fp32), the online softmax in base 2 (the scale
folded into log2(e)/√d), O += P·V. Under a causal mask the blocks right of the diagonal are never loaded (the work
is S(S+1)/2 scores, counted by engine.count.attention_io), the blocks left of it run without a mask, and only the
diagonal blocks pay for one. Reads Q, K, V; writes O; the K/V traffic by tiling is engine.count.attention_io's.

Plain pointer arithmetic (no block pointers, gone in triton 3.9; no tensor descriptors, which the interpreter of
triton 3.6 lacks), so that the same code runs on triton 3.6 and 3.9 and under TRITON_INTERPRET.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.attention_io import AttentionShape, flash_attention_op, flash_tiling, naive_attention_ops
from ..engine.count.op import Op
from ..errors import UserError
from ..units import MIB
from .base import LOG2E, Inputs, Kernel, sm_count, torch_dtype


@dataclass(frozen=True)
class FlashConfig:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    # Triton's warp specialization of the K/V loop (``tl.range(..., warp_specialize=True)``): producer warps load
    # while consumer warps compute, FlashAttention-3's structure, where the Triton build supports it on the GPU.
    warp_specialize: bool = False
    # K and V read through host-made tensor descriptors (TMA: the copy engine moves each block into shared memory,
    # no per-element address arithmetic in the loop) instead of pointer loads. Measured on the H200 at 128×128, 8
    # warps, 3 stages: within 1% of the pointer loads at 1 × 4,096-16,384 and 2.4% faster at 4 × 4,096 (1.249
    # against 1.280 ms; benchmarks/decode_grid_gpu.py --prefill-tma, run 7 of 2026-12-04), so not the default.
    tma: bool = False
    # The grid's order. False: (query block, sequence·head), the query blocks of one head on the fastest axis
    # (heaviest first under a causal mask), so the first wave holds every block of a few heads, heavy and light.
    # True: (sequence·head, query block), the heads on the fastest axis (a K/V group's heads adjacent, sharing its
    # K/V in the L2) and the query blocks heaviest first across the whole grid: the first wave holds the heaviest
    # block of every head, the light ones fill the tail (longest-processing-time-first).
    heads_fast: bool = False
    # Half of the softmax's exponentials (every other column) by a polynomial on the FMA units instead of the
    # special-function unit (MUFU), which does 16 a cycle an SM against the tensor cores' ~4,096 FLOPs: a 128×128
    # block's 16,384 exp2 take ~1,024 cycles beside its products' ~2,048 (FlashAttention-4's split of the work).
    # Slower at every shape measured on the H200 at 128×128, 8 warps, 3 stages: 1 × 32/8 × 4,096 causal 0.389 ms
    # against 0.314-0.315 (heads fast), 1 × 32/8 × 16,384 5.74-5.76 against 4.45-4.49, 4 × 32/8 × 4,096 1.57-1.61
    # against 1.28-1.29, non-causal 1 × 4,096 0.686 against 0.584 (benchmarks/attention_lab_gpu.py --prefill-poly,
    # docs/results/h200-2026-12-04-attention-34c/run4.log), so off.
    poly_exp: bool = False
    # The unmasked blocks' loop software-pipelined by hand: block j + 1's Q·Kᵀ is issued before block j's softmax,
    # so that the tensor cores' asynchronous product can run under the softmax (FlashAttention-3's overlap within a
    # warpgroup) where the compiler defers its wait to the next iteration. Two score tiles live at once. Slower at
    # every shape measured on the H200 (bf16, d 128, causal, heads fast; 3 stages of 128×128 need 256 kB of shared
    # memory, 227 kB the limit): 128×128 in 2 stages 0.359-0.362 ms at 1 × 32/8 × 4,096 against the shipped
    # 0.314-0.315, 5.39-5.50 against 4.45-4.62 at 16,384, 1.57-1.61 against 1.28-1.30 at 4 × 4,096; 128×64 in 3 or
    # 4 stages no better (benchmarks/attention_lab_gpu.py --prefill-ahead,
    # docs/results/h200-2026-12-05-attention/run.log), so off. Why: ptxas serialises every wgmma of the kernel
    # (note C7515: the softmax writes a product's accumulator registers inside its pipeline stage;
    # benchmarks/attention_sass.py --stages 2 --qk-ahead).
    qk_ahead: bool = False
    # Registers per thread capped (ptxas's maxnreg) so that two programs share an SM: 2 × 256 threads × 128
    # registers fill its 65,536, and their loops, never synchronised with each other, can overlap one's softmax with
    # the other's products, which one program's warpgroups (kept in step by the loop's barriers) cannot. None: as
    # many as the compiler takes (240-244 for 128×128 in 8 warps: one program an SM). Measured on an H100 (bf16,
    # d 128, causal; benchmarks/attention_lab_gpu.py --prefill-occupancy,
    # docs/results/h100-2026-12-05-attention/run.log): a second program an SM makes 128×64 blocks 4-13% faster
    # (4 × 32/8 × 4,096: 1.638 ms → 1.425), but the best two-program config of each shape (128×64 or 128×32 at
    # 128 registers; 64-row blocks in 4 warps were slower) stays 7-12% behind the shipped 128×128 at one program
    # (1 × 32/8 × 4,096: 0.327/0.354 against 0.310/0.312; 4 × 4,096: 1.367/1.358 against 1.271/1.276), so None.
    # At 128 registers ptxas serialises the products (note C7512; benchmarks/attention_sass.py --max-regs 128).
    max_regs: int | None = None
    # The Gluon kernel for Hopper (``flash_attention_sm90``): FlashAttention-3's schedule written out, a TMA loader
    # warp and two consumer warpgroups whose softmax runs under their P·V. block_m must be 128 (two warpgroups of
    # 64 rows) and num_warps 12 (what a program runs: the two consumer warpgroups and the loader's, whose other
    # three warps idle; the launch itself names the first partition's 4); num_stages is its ring of K/V buffers (2
    # or more); max_regs does not apply (the warpgroups' registers are the kernel's). sm_90 only, bf16 or fp16,
    # contiguous tensors.
    gluon: bool = False
    # With gluon: the two consumer warpgroups take turns to issue their products (an mbarrier each, FlashAttention-3's
    # ping-pong, §3.1), so that one's softmax runs while the other's products are on the tensor cores.
    pingpong: bool = False


@triton.jit
def _exp2_fma(x):
    # 2^x for x ≤ 0 (−inf included, as 0): 2^⌊x⌋ built in the exponent bits, times 2^f for the fraction f as
    # 1 + f·(c1 + f·(c2 + f·c3)), fitted by least squares on the relative error over [0, 1): at most 1.7e-4 (P is
    # rounded to bf16, 3.9e-3, before P·V).
    x = tl.maximum(x, -127.0)
    j = tl.floor(x)
    f = x - j
    p = 1.0 + f * (0.69503617 + f * (0.22830825 + f * 0.07632546))
    scale = ((j.to(tl.int32) + 127) << 23).to(tl.float32, bitcast=True)
    return p * scale


@triton.jit
def _attn_blocks(
    acc, l_i, m_i, q, k_base, v_base, offs_m, offs_d, start, stop, n_ctx, skn, skd, svn, svd, qk_scale,
    BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr, WARP_SPEC: tl.constexpr,
    k_td, v_td, kv_row, HEAD_D: tl.constexpr, TMA: tl.constexpr, POLY_EXP: tl.constexpr = False,
):  # fmt: skip
    # K/V rows [start, stop) in blocks of BLOCK_N: reads BLOCK_N×d of K and of V each, 4·BLOCK_M·BLOCK_N·d FLOPs.
    offs_n = tl.arange(0, BLOCK_N)
    for n0 in tl.range(start, stop, BLOCK_N, warp_specialize=WARP_SPEC):
        cols = n0 + offs_n
        k_ptrs = k_base + cols[None, :].to(tl.int64) * skn + offs_d[:, None] * skd  # d×BLOCK_N: Kᵀ
        v_ptrs = v_base + cols[:, None].to(tl.int64) * svn + offs_d[None, :] * svd
        if TMA:  # rows past the sequence come back as zeros (the descriptor's bounds), masked below as the others
            k = tl.trans(k_td.load([kv_row, n0, 0]).reshape(BLOCK_N, HEAD_D))
        elif MASKED:
            k = tl.load(k_ptrs, mask=cols[None, :] < n_ctx, other=0.0)
        else:
            k = tl.load(k_ptrs)
        qk = tl.dot(q, k)
        if MASKED:
            keep = cols[None, :] < n_ctx
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            qk = tl.where(keep, qk, -float("inf"))
        # Every row has a kept column in each block it visits (the diagonal block's first column is ≤ each of its
        # rows; the last block of a non-causal row starts below n_ctx), so m_new is finite. The scale is applied
        # inside the exponent, qk·scale − m in one fused multiply-add (Triton's fused-attention tutorial's form).
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        if POLY_EXP:  # even columns on the MUFU, odd ones on the FMA units (each thread holds column pairs)
            x_even, x_odd = tl.split(tl.reshape(qk * qk_scale - m_new[:, None], [qk.shape[0], BLOCK_N // 2, 2]))
            p = tl.reshape(tl.join(tl.math.exp2(x_even), _exp2_fma(x_odd)), [qk.shape[0], BLOCK_N])
        else:
            p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if TMA:
            v = v_td.load([kv_row, n0, 0]).reshape(BLOCK_N, HEAD_D)
        elif MASKED:
            v = tl.load(v_ptrs, mask=cols[:, None] < n_ctx, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _online_softmax(qk, m_i, l_i, acc, qk_scale):
    # One block's scores folded into the running max, sum and (rescaled) accumulator; returns P unnormalised.
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    return p, acc * alpha[:, None], l_i * alpha + tl.sum(p, 1), m_new


@triton.jit
def _attn_blocks_ahead(
    acc, l_i, m_i, q, k_base, v_base, offs_d, start, stop, skn, skd, svn, svd, qk_scale, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # Whole K/V blocks [start, stop), stop − start a positive multiple of BLOCK_N, no mask: the same reads and FLOPs
    # as _attn_blocks, with Q·Kᵀ one block ahead of the softmax.
    offs_n = tl.arange(0, BLOCK_N)
    qk = tl.dot(q, tl.load(k_base + (start + offs_n)[None, :].to(tl.int64) * skn + offs_d[:, None] * skd))
    for n0 in tl.range(start, stop - BLOCK_N, BLOCK_N):
        k_next = tl.load(k_base + (n0 + BLOCK_N + offs_n)[None, :].to(tl.int64) * skn + offs_d[:, None] * skd)
        qk_next = tl.dot(q, k_next)
        p, acc, l_i, m_i = _online_softmax(qk, m_i, l_i, acc, qk_scale)
        v = tl.load(v_base + (n0 + offs_n)[:, None].to(tl.int64) * svn + offs_d[None, :] * svd)
        acc = tl.dot(p.to(v.dtype), v, acc)
        qk = qk_next
    p, acc, l_i, m_i = _online_softmax(qk, m_i, l_i, acc, qk_scale)
    v = tl.load(v_base + (stop - BLOCK_N + offs_n)[:, None].to(tl.int64) * svn + offs_d[None, :] * svd)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def _flash_fwd_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, n_ctx, n_heads, group, qk_scale,
    sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, som, sod,
    HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    WARP_SPEC: tl.constexpr, k_td=None, v_td=None, TMA: tl.constexpr = False, HEADS_FAST: tl.constexpr = False,
    POLY_EXP: tl.constexpr = False, QK_AHEAD: tl.constexpr = False,
):  # fmt: skip
    # Program (query block, sequence·head), or (sequence·head, query block) with HEADS_FAST: the hardware starts
    # programs axis 0 fastest. Under a causal mask the last query blocks have the most work, so they start first
    # (block index reversed): the short blocks fill the tail.
    n_blocks = tl.cdiv(n_ctx, BLOCK_M)
    if HEADS_FAST:
        blk = tl.program_id(1)
        bh = tl.program_id(0)
    else:
        blk = tl.program_id(0)
        bh = tl.program_id(1)
    pid_m = n_blocks - 1 - blk if CAUSAL else blk
    b = bh // n_heads
    h = bh - b * n_heads
    kvh = h // group
    q_base = q_ptr + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    k_base = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
    v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh
    o_base = o_ptr + b.to(tl.int64) * sob + h.to(tl.int64) * soh

    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    row_ok = offs_m[:, None] < n_ctx
    q = tl.load(q_base + offs_m[:, None].to(tl.int64) * sqm + offs_d[None, :] * sqd, mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], dtype=tl.float32)
    # Whole blocks first, no mask: under a causal mask those left of the diagonal (BLOCK_M is a multiple of
    # BLOCK_N, and m0 ≤ n_ctx), else every whole block. Then the rest, masked: the diagonal block (nothing right of
    # it), or the ragged tail.
    if CAUSAL:
        whole = m0
        end = tl.minimum(m0 + BLOCK_M, n_ctx)
    else:
        whole = (n_ctx // BLOCK_N) * BLOCK_N
        end = n_ctx
    kv_row = b * (n_heads // group) + kvh
    if QK_AHEAD:
        if whole > 0:
            acc, l_i, m_i = _attn_blocks_ahead(acc, l_i, m_i, q, k_base, v_base, offs_d, 0, whole,
                                               skn, skd, svn, svd, qk_scale, BLOCK_N)
    else:
        acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_d, 0, whole, n_ctx,
                                     skn, skd, svn, svd, qk_scale, BLOCK_N, False, CAUSAL, WARP_SPEC,
                                     k_td, v_td, kv_row, HEAD_D, TMA, POLY_EXP)
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, k_base, v_base, offs_m, offs_d, whole, end, n_ctx,
                                 skn, skd, svn, svd, qk_scale, BLOCK_N, True, CAUSAL, False,
                                 k_td, v_td, kv_row, HEAD_D, TMA, POLY_EXP)
    out = acc / l_i[:, None]
    tl.store(o_base + offs_m[:, None].to(tl.int64) * som + offs_d[None, :] * sod,
             out.to(o_ptr.dtype.element_ty), mask=row_ok)


# The reference's query rows per block: its float64 scores are rows × Lk × 8 B at a time (512 MiB at 32,768
# positions), not S² × heads (the 16,384- and 32,768-token default shapes asked for 64 and 256 GiB at once).
REFERENCE_ROWS = 2048


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(Q·Kᵀ/√d + mask)·V in float64, each query head against its group's K/V head (a causal mask aligns
    the last query with the last position); computed one batch, head and block of REFERENCE_ROWS queries at a
    time, returned in float64."""
    b, h, t, d = q.shape
    lk = k.shape[2]
    group = h // k.shape[1]
    out = torch.empty((b, h, t, v.shape[-1]), dtype=torch.float64, device=q.device)
    j = torch.arange(lk, device=q.device)[None, :]
    for bi in range(b):
        for hi in range(h):
            k64 = k[bi, hi // group].to(torch.float64)
            v64 = v[bi, hi // group].to(torch.float64)
            for r0 in range(0, t, REFERENCE_ROWS):
                rows = q[bi, hi, r0:r0 + REFERENCE_ROWS].to(torch.float64)
                s = (rows @ k64.T) / math.sqrt(d)
                if causal:
                    i = torch.arange(r0, r0 + rows.shape[0], device=q.device)[:, None] + (lk - t)
                    s = s.masked_fill(j > i, -math.inf)
                out[bi, hi, r0:r0 + rows.shape[0]] = torch.softmax(s, dim=-1) @ v64
    return out


# d = 128: 128×128 blocks in 8 warps, 3 stages. Measured on an H200, bf16, 32/8 heads, causal
# (benchmarks/attention_gpu.py, docs/results/h200-2026-12-03-attention/bench/run3-prefill): 3 stages beat 2 at every
# size (B1 4,096: 0.336 ms against 0.394; B1 32,768: 16.8-18.0 against 19.5; B4 32,768: 68.4 against 78.8) and
# beat 128×64 blocks (0.353, 18.1, 72.8); 4 warps ran at 0.6× (run 1: 225-300 TFLOP/s).
_CONFIG_D128 = FlashConfig(128, 128, num_warps=8, num_stages=3)
# Causal, with the (sequence, head) pairs at most half the SMs: the heads on the grid's fastest axis (heaviest
# query blocks of every head first). Measured on an H200, bf16, d 128, 128×128 in 8 warps, 3 stages, two runs each
# (benchmarks/attention_lab_gpu.py, docs/results/h200-2026-12-04-attention-34c/run1.log), ms, query blocks fast
# against heads fast: 1 × 32/8 × 4,096 0.339/0.337 against 0.313/0.315; 1 × 32/8 × 8,192 1.189/1.189 against
# 1.141/1.142; 1 × 64/8 × 8,192 2.350/2.338 against 2.301/2.302; 1 × 32/8 × 16,384 4.413/4.372 against
# 4.417/4.415 (level); with 128 pairs, 4 × 32/8 × 4,096, 1.274/1.272 against 1.284/1.286 (slower), and without
# the mask 0.574 against 0.595 (1 × 4,096) and 8.862 against 9.149 (1 × 16,384), so neither takes it. 2 stages
# ran 13-24% slower and 128×64 blocks 4-10% (in 3 or 4 stages); 4 stages of 128×128 exceed the shared memory
# (288 kB of 227).
_CONFIG_D128_HEADS_FAST = FlashConfig(128, 128, num_warps=8, num_stages=3, heads_fast=True)
# On Hopper (sm_90), bf16/fp16, d 128: the Gluon kernel (flash_attention_sm90), FlashAttention-3's schedule, in 3
# K/V buffers. Measured on an H200 (torch 2.11, triton 3.6, graph replays, two runs each; checked first at 1 to
# 4,097 tokens, d 64 and 128, groups 1 to 7, NaN past each end, bit-identical repeats: benchmarks/
# attention_lab_gpu.py --prefill-gluon, docs/results/h200-2026-12-05-gluon/lab.log), TFLOP/s, causal, 128×128
# blocks against the shipped Triton kernel and cuDNN: 1 × 32/8 × 4,096 565/560 against 451/449 and 500/495;
# 4 × 32/8 × 4,096 503/505 against 428/429 and 542/535; 1 × 64/8 × 8,192 585/584 against 483/487 and 574/565;
# 1 × 32/8 × 16,384 602 against 507 and 590. Ping-pong between the warpgroups was level (510-564, 565-595) and 2
# buffers slower (381-444). Without the mask 128×64 blocks: 557 against 488 (4,096) and 528 against 507 (16,384),
# cuDNN 625 at 16,384.
_CONFIG_GLUON_CAUSAL = FlashConfig(128, 128, num_warps=12, num_stages=3, gluon=True)
_CONFIG_GLUON_FULL = FlashConfig(128, 64, num_warps=12, num_stages=3, gluon=True)
_CONFIG_D64 = FlashConfig(128, 64, num_warps=4, num_stages=3)
_CONFIG_SMALL = FlashConfig(32, 16, num_warps=4, num_stages=2)  # the interpreter's and odd small shapes'


def flash_attention(q, k, v, out, causal: bool = True, config: FlashConfig | None = None):
    """Run the kernel on B×h×S×d Q and B×g×S×d K, V into ``out`` (B×h×S×d); returns the launch handle and grid."""
    b, h, s, d = q.shape
    g = k.shape[1]
    if k.shape != (b, g, s, d) or v.shape != k.shape or h % g or out.shape != q.shape:
        raise ValueError(f"flash_attention: Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}")
    cfg = config or (_gluon_config(causal) if _gluon_fits(q, k, v, out, causal) else _config_for(s, d, b * h, causal))
    if cfg.block_m % cfg.block_n:
        raise ValueError("flash_attention: block_m must be a multiple of block_n")
    if cfg.gluon:
        from .flash_attention_sm90 import BLOCK_M, flash_attention_sm90

        if cfg.block_m != BLOCK_M or cfg.num_warps != 12 or cfg.max_regs:
            raise ValueError("flash_attention gluon: 128-query blocks in 12 warps, registers not capped")
        grid, handle = flash_attention_sm90(q, k, v, out, causal, cfg.block_n, cfg.num_stages, cfg.pingpong)
        return cfg, grid, handle
    blocks = triton.cdiv(s, cfg.block_m)
    grid = (b * h, blocks) if cfg.heads_fast else (blocks, b * h)
    handle = _flash_fwd_kernel[grid](
        q, k, v, out, s, h, h // g, LOG2E / math.sqrt(d),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        HEAD_D=d, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, CAUSAL=causal, WARP_SPEC=cfg.warp_specialize,
        HEADS_FAST=cfg.heads_fast, POLY_EXP=cfg.poly_exp, QK_AHEAD=cfg.qk_ahead, num_warps=cfg.num_warps,
        num_stages=cfg.num_stages,
        **({"maxnreg": cfg.max_regs} if cfg.max_regs else {}),
        **_kv_descriptors(cfg, k, v),
    )  # fmt: skip
    return cfg, grid, handle


def _fa3_kernel():
    """The Gluon kernel's function, imported only where a config asks for it (Gluon is triton's experimental API)."""
    from .flash_attention_sm90 import _fa3_fwd_kernel

    return _fa3_fwd_kernel


def _kv_descriptors(cfg: FlashConfig, k, v) -> dict:
    """K's and V's tensor descriptors for ``cfg.tma``: each a (B·g) × S × d view read in 1 × BLOCK_N × d boxes
    (so that rows past a sequence read as zeros, not as the next head's); none otherwise."""
    if not cfg.tma:
        return {}
    from triton.tools.tensor_descriptor import TensorDescriptor  # type: ignore[import-untyped]

    b, g, s, d = k.shape
    if not (k.is_contiguous() and v.is_contiguous() and (d * k.element_size()) % 16 == 0):
        raise ValueError("flash_attention tma: K and V must be contiguous B×g×S×d with 16-byte rows")
    box = [1, cfg.block_n, d]
    return {"k_td": TensorDescriptor.from_tensor(k.view(b * g, s, d), box),
            "v_td": TensorDescriptor.from_tensor(v.view(b * g, s, d), box), "TMA": True}


def _gluon_fits(q, k, v, out, causal: bool) -> bool:
    """Whether the Gluon kernel is the default for these tensors: d 128 past the small shapes' 256 tokens (where it
    was measured faster), on a GPU where the kernel's own checks (``flash_attention_sm90.check_inputs``: sm_90,
    bf16 or fp16, contiguous, 16-byte aligned, its buffers in the shared memory) take them."""
    if not (q.is_cuda and q.shape[-1] == 128 and q.shape[2] > 256):
        return False
    cfg = _gluon_config(causal)
    try:
        from .flash_attention_sm90 import check_inputs

        check_inputs(q, k, v, out, cfg.block_n, cfg.num_stages)
    except (ImportError, ValueError):  # a triton without Gluon; inputs it does not take
        return False
    return True


def _gluon_config(causal: bool) -> FlashConfig:
    return _CONFIG_GLUON_CAUSAL if causal else _CONFIG_GLUON_FULL


def _config_for(s: int, d: int, pairs: int, causal: bool) -> FlashConfig:
    """The config for S tokens of head dimension d over ``pairs`` (sequence, query head) pairs."""
    if s <= 256:
        return _CONFIG_SMALL
    if d < 128:
        return _CONFIG_D64
    return _CONFIG_D128_HEADS_FAST if causal and 2 * pairs <= sm_count() else _CONFIG_D128


HEAD_DIMS = (16, 32, 64, 128)


def check_attention_shape(name: str, shape: tuple[int, ...]) -> None:
    """UserError unless the query heads are a multiple of the KV heads and d is a head dimension the kernels
    take (a power of two, 16 to 128: tl.dot needs 16, registers stop at 128)."""
    _, h, g, _, d = shape
    if h % g:
        raise UserError(f"kernel {name}: {h} query heads are not a multiple of {g} KV heads")
    if d not in HEAD_DIMS:
        raise UserError(f"kernel {name}: head dim {d} is not one of {', '.join(map(str, HEAD_DIMS))}")


def make_qkv(shape: tuple[int, ...], dtype: str, device, generator) -> Inputs:
    b, h, g, s, d = shape
    t = torch_dtype(dtype)

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=generator, device=device, dtype=torch.float32).to(t)

    return {"q": randn(b, h, s, d), "k": randn(b, g, s, d), "v": randn(b, g, s, d)}


def sdpa(inputs: Inputs, causal: bool = True) -> torch.Tensor:
    """torch's scaled_dot_product_attention with the backend torch picks (K/V heads shared by enable_gqa)."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                            enable_gqa=q.shape[1] != k.shape[1])


# The baselines that force one of SDPA's fused backends (torch.nn.attention.sdpa_kernel), by baseline name; a
# backend that cannot run the inputs (FlashAttention-2 below sm80, cuDNN off Hopper, any on the CPU) raises, and the
# harness reports that baseline's error in one line instead of a time.
SDPA_BACKENDS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION",
                 "sdpa_efficient": "EFFICIENT_ATTENTION"}


def sdpa_with(backend: str, call):
    """``call`` run with SDPA restricted to ``backend`` (an SDPBackend name)."""
    def run(inputs: Inputs) -> torch.Tensor:
        import warnings

        from torch.nn.attention import SDPBackend, sdpa_kernel

        # A backend that cannot run the inputs warns once per reason before it raises "No available kernel": the
        # harness reports the error in one line, so the warnings (a dozen lines a shape on the H200) are dropped.
        with sdpa_kernel(getattr(SDPBackend, backend)), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return call(inputs)

    return run


def sdpa_backends(call) -> dict:
    """SDPA_BACKENDS' baselines of an eager attention ``call``."""
    return {name: sdpa_with(backend, call) for name, backend in SDPA_BACKENDS.items()}


def picked_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> str:
    """The sentence naming the SDPA backend torch picks for these inputs (``torch._fused_sdp_choice``, what
    ``scaled_dot_product_attention`` itself asks), or saying it could not be read."""
    from torch.nn.attention import SDPBackend

    try:
        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, enable_gqa=q.shape[1] != k.shape[1])
        name = str(SDPBackend(choice).name)
    except Exception as err:  # a torch without the private function: say so rather than guess
        name = f"not read ({type(err).__name__})"
    return f"torch eager: SDPA's backend as torch picks it for these inputs: {name}"


def attention_shape(shape: tuple[int, ...], causal: bool) -> AttentionShape:
    b, h, g, s, d = shape
    return AttentionShape(b, h, g, s, s, d, causal)


# The L2 the count assumes (op() takes no GPU spec): an H200's 60 MiB (hardware/h200.yaml, l2_size_mib).
DEFAULT_L2_BYTES = 60 * MIB


class FlashAttention(Kernel):
    shape_format = "BxHxKVxSxD"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    causal = True
    # The prefill targets (docs/attention.md): 32 query heads over 8 KV heads, d 128, causal, batch 1 and 4,
    # 4,096 to 32,768 tokens.
    default_shapes = [(1, 32, 8, 4096, 128), (1, 32, 8, 16384, 128), (4, 32, 8, 4096, 128), (1, 32, 8, 32768, 128)]
    # Lengths not a multiple of the block, 1 and 7 query heads per KV head, d 16 and 32.
    interpret_shapes = [(1, 2, 2, 1, 16), (2, 7, 1, 37, 32), (1, 4, 2, 70, 16)]

    def check_shape(self, shape) -> None:
        super().check_shape(shape)
        check_attention_shape(self.name, shape)

    def op(self, shape, dtype) -> Op:
        s = attention_shape(shape, self.causal)
        cfg = _config_for(s.q_len, s.d, s.batch * s.heads, self.causal)
        return flash_attention_op(s, dtype, flash_tiling(s, dtype, l2_bytes=DEFAULT_L2_BYTES, block_q=cfg.block_m))

    def unfused_ops(self, shape, dtype) -> list[Op]:
        return naive_attention_ops(attention_shape(shape, self.causal), dtype)

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        return make_qkv(shape, dtype, device, generator)

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        return torch.empty_like(inputs["q"])

    def config_for(self, shape, dtype) -> FlashConfig:
        b, h, _, n, d = shape
        return _config_for(n, d, b * h, self.causal)

    def candidates(self, shape, dtype, gpu=None) -> list[FlashConfig]:
        chosen = self.config_for(shape, dtype)
        return list(dict.fromkeys([chosen, FlashConfig(128, 128, 8, 2), FlashConfig(128, 64, 8, 3),
                                   FlashConfig(64, 64, 4, 3)]))

    def run(self, inputs: Inputs, out: torch.Tensor, config: FlashConfig | None = None) -> None:
        q = inputs["q"]
        self._start_run()
        cfg, grid, handle = flash_attention(q, inputs["k"], inputs["v"], out, self.causal, config)
        self._record(_fa3_kernel() if cfg.gluon else _flash_fwd_kernel, grid, cfg, handle, causal=self.causal)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return attention_reference(inputs["q"], inputs["k"], inputs["v"], self.causal)

    def eager(self, inputs: Inputs) -> torch.Tensor:
        return sdpa(inputs, self.causal)

    def extra_baselines(self) -> dict:
        return sdpa_backends(self.eager)

    def baseline_note(self, inputs: Inputs) -> str | None:
        return picked_backend(inputs["q"], inputs["k"], inputs["v"], self.causal)

    def tolerance(self, dtype: str) -> float:
        # fp32 through tf32 (10 mantissa bits) in both matmuls: ~1e-3 relative. 16-bit: P is rounded to the
        # inputs' type before P·V (as FlashAttention-2 and torch's kernels do) and O is stored rounded: bf16's
        # 2**-9 rounding dominates, ~4e-3 on random data.
        return {"fp32": 5e-3, "fp16": 1e-2, "bf16": 2e-2}[dtype]


KERNEL = FlashAttention()
