"""A lab copy of flash_decoding with switches, to measure where batch-1 decode spends its time (not shipped:
benchmarks/decode_lab_gpu.py runs it; rooflinectl/kernels/flash_decoding.py is the kernel).

STAGE 0: each split-0 program writes zeros to o (the launch and grid alone)
STAGE 1: loads q, K, V and computes; every program stores its partial (no counter, no combine)
STAGE 3: + the arrival counter (the last resets it, no combine)
STAGE 4: full (combine by the last program)
COMBINE_TILE: the combine loads all the group's heads × splits as one 3-D tile (else: one head at a time)
K_ROWS: K loaded as BLOCK_N×d rows and transposed in the dot (else: loaded d×BLOCK_N)
TWO: STAGE 1 kernel + a separate combine kernel (FlashAttention-2's split-KV shape)
NO_LEN: every sequence taken as L_max long (the lengths are not loaded: right only for equal lengths)
NO_DOT: the two products as broadcast multiply-and-sum on the CUDA cores, not tl.dot (no rows padded to 16)
TMA: K and V loaded through device-side tensor descriptors (TMA on Hopper), rows past the sequence's end read as 0
PEEL: the first block's K and V loaded before the sequence's length arrives (bounded by the allocation), masked
  after it
STORE_NEVER: the partials' stores masked off by a condition the compiler cannot see is always false
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from rooflinectl.kernels.flash_attention import LOG2E


@triton.jit
def lab_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, len_ptr, part_o_ptr, part_lse_ptr, count_ptr,
    n_kv_heads, chunk, n_splits, qk_scale,
    sqb, sqh, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, sod,
    HEAD_D: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, GROUP_P2: tl.constexpr,
    BLOCK_N: tl.constexpr, SPLITS_PAD: tl.constexpr, STAGE: tl.constexpr, COMBINE_TILE: tl.constexpr,
    K_ROWS: tl.constexpr, NO_LEN: tl.constexpr = False, NO_DOT: tl.constexpr = False,
    STORE_NEVER: tl.constexpr = False, l_max=0, PEEL: tl.constexpr = False, TMA: tl.constexpr = False,
):  # fmt: skip
    split = tl.program_id(0)
    bk = tl.program_id(1)
    b = bk // n_kv_heads
    kvh = bk - b * n_kv_heads
    rows = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_D)
    heads = kvh * GROUP + rows
    row_ok = rows < GROUP
    if STAGE == 0:
        tl.store(o_ptr + b.to(tl.int64) * sob + heads[:, None] * soh + offs_d[None, :] * sod,
                 tl.zeros([GROUP_PAD, HEAD_D], dtype=tl.float32).to(o_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & (split == 0))
    else:
        q = tl.load(q_ptr + b.to(tl.int64) * sqb + heads[:, None] * sqh + offs_d[None, :] * sqd,
                    mask=row_ok[:, None], other=0.0)
        k_base = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
        v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh
        offs_n = tl.arange(0, BLOCK_N)
        start = split * chunk
        if PEEL:
            # The first block's loads bounded by the cache's allocation only, issued before the length arrives.
            cols0 = start + offs_n
            in_alloc = cols0 < tl.minimum(start + chunk, l_max)
            k0 = tl.load(k_base + cols0[None, :].to(tl.int64) * skn + offs_d[:, None] * skd, mask=in_alloc[None, :],
                         other=0.0)
            v0 = tl.load(v_base + cols0[:, None].to(tl.int64) * svn + offs_d[None, :] * svd, mask=in_alloc[:, None],
                         other=0.0)
        if NO_LEN:
            n_ctx = l_max
        else:
            n_ctx = tl.load(len_ptr + b)
        stop = tl.minimum(start + chunk, n_ctx)
        m_i = tl.full([GROUP_PAD], -float("inf"), dtype=tl.float32)
        l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
        acc = tl.zeros([GROUP_PAD, HEAD_D], dtype=tl.float32)
        loop_start = start
        if TMA:  # K and V rows through tensor descriptors (Hopper's TMA), rows past the sequence's end read as 0
            k_desc = tl.make_tensor_descriptor(k_base, shape=[n_ctx, HEAD_D], strides=[skn, 1],
                                               block_shape=[BLOCK_N, HEAD_D])
            v_desc = tl.make_tensor_descriptor(v_base, shape=[n_ctx, HEAD_D], strides=[svn, 1],
                                               block_shape=[BLOCK_N, HEAD_D])
        if PEEL:
            keep0 = cols0 < stop
            qk0 = tl.where(keep0[None, :], tl.dot(q, k0) * qk_scale, -float("inf"))
            m_i = tl.max(qk0, 1)  # −inf where the split has no positions
            p0 = tl.math.exp2(qk0 - tl.where(m_i == -float("inf"), 0.0, m_i)[:, None])
            l_i = tl.sum(p0, 1)
            acc = tl.dot(p0.to(v0.dtype), tl.where(keep0[:, None], v0, 0.0))
            loop_start = start + BLOCK_N
        for n0 in tl.range(loop_start, stop, BLOCK_N):
            cols = n0 + offs_n
            keep = cols < stop
            if TMA:
                k = k_desc.load([n0, 0])
                qk = tl.dot(q, tl.trans(k)) * qk_scale
            elif NO_DOT:
                k = tl.load(k_base + cols[:, None].to(tl.int64) * skn + offs_d[None, :] * skd, mask=keep[:, None],
                            other=0.0)
                qk = tl.sum(q.to(tl.float32)[:, None, :] * k.to(tl.float32)[None, :, :], 2) * qk_scale
            elif K_ROWS:
                k = tl.load(k_base + cols[:, None].to(tl.int64) * skn + offs_d[None, :] * skd, mask=keep[:, None],
                            other=0.0)
                qk = tl.dot(q, tl.trans(k)) * qk_scale
            else:
                k = tl.load(k_base + cols[None, :].to(tl.int64) * skn + offs_d[:, None] * skd, mask=keep[None, :],
                            other=0.0)
                qk = tl.dot(q, k) * qk_scale
            if TMA:
                v = v_desc.load([n0, 0])
            else:
                v = tl.load(v_base + cols[:, None].to(tl.int64) * svn + offs_d[None, :] * svd, mask=keep[:, None],
                            other=0.0)
            qk = tl.where(keep[None, :], qk, -float("inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            p = tl.math.exp2(qk - m_new[:, None])
            alpha = tl.math.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            if NO_DOT:
                acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v.to(tl.float32)[None, :, :], 1)
            else:
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        has = stop > start
        lse = tl.where(has, m_i + tl.math.log2(tl.where(has, l_i, 1.0)), -float("inf"))
        part = tl.where(has, acc / tl.where(has, l_i, 1.0)[:, None], 0.0)
        slot = (b.to(tl.int64) * n_kv_heads * GROUP + heads) * n_splits + split
        if STORE_NEVER:
            never = l_i < 0.0
            tl.store(part_o_ptr + slot[:, None] * HEAD_D + offs_d[None, :], part, mask=(row_ok & never)[:, None])
        else:
            tl.store(part_o_ptr + slot[:, None] * HEAD_D + offs_d[None, :], part, mask=row_ok[:, None])
            tl.store(part_lse_ptr + slot, lse, mask=row_ok)
        if STAGE >= 3:
            tl.debug_barrier()
            done = tl.atomic_add(count_ptr + bk, 1, sem="acq_rel") + 1
            if done == n_splits:
                tl.atomic_xchg(count_ptr + bk, 0)
                if STAGE == 4:
                    sp = tl.arange(0, SPLITS_PAD)
                    sp_ok = sp < n_splits
                    if COMBINE_TILE:
                        g = tl.arange(0, GROUP_P2)
                        g_ok = g < GROUP
                        base = (b.to(tl.int64) * n_kv_heads * GROUP + kvh * GROUP + g) * n_splits  # [G]
                        idx = base[:, None] + sp[None, :]  # [G, S]
                        ok = g_ok[:, None] & sp_ok[None, :]
                        lses = tl.load(part_lse_ptr + idx, mask=ok, other=-float("inf"), cache_modifier=".cg")
                        parts = tl.load(part_o_ptr + idx[:, :, None] * HEAD_D + offs_d[None, None, :],
                                        mask=ok[:, :, None], other=0.0, cache_modifier=".cg")
                        m = tl.max(lses, 1)
                        m = tl.where(g_ok, m, 0.0)
                        w = tl.math.exp2(lses - m[:, None])
                        o = tl.sum(w[:, :, None] * parts, 1) / tl.where(g_ok, tl.sum(w, 1), 1.0)[:, None]
                        hh = kvh * GROUP + g
                        tl.store(o_ptr + b.to(tl.int64) * sob + hh[:, None] * soh + offs_d[None, :] * sod,
                                 o.to(o_ptr.dtype.element_ty), mask=g_ok[:, None])
                    else:
                        for r in tl.static_range(GROUP):
                            head = kvh * GROUP + r
                            base = (b.to(tl.int64) * n_kv_heads * GROUP + head) * n_splits
                            lses = tl.load(part_lse_ptr + base + sp, mask=sp_ok, other=-float("inf"),
                                           cache_modifier=".cg")
                            parts = tl.load(part_o_ptr + (base + sp)[:, None] * HEAD_D + offs_d[None, :],
                                            mask=sp_ok[:, None], other=0.0, cache_modifier=".cg")
                            m = tl.max(lses, 0)
                            w = tl.math.exp2(lses - m)
                            o = tl.sum(w[:, None] * parts, 0) / tl.sum(w, 0)
                            tl.store(o_ptr + b.to(tl.int64) * sob + head * soh + offs_d * sod,
                                     o.to(o_ptr.dtype.element_ty))


@triton.jit
def lab_combine(part_o_ptr, part_lse_ptr, o_ptr, n_heads, n_splits, sob, soh, sod,
                HEAD_D: tl.constexpr, SPLITS_PAD: tl.constexpr):
    bh = tl.program_id(0)
    b = bh // n_heads
    head = bh - b * n_heads
    sp = tl.arange(0, SPLITS_PAD)
    sp_ok = sp < n_splits
    offs_d = tl.arange(0, HEAD_D)
    base = bh.to(tl.int64) * n_splits
    lses = tl.load(part_lse_ptr + base + sp, mask=sp_ok, other=-float("inf"))
    parts = tl.load(part_o_ptr + (base + sp)[:, None] * HEAD_D + offs_d[None, :], mask=sp_ok[:, None], other=0.0)
    m = tl.max(lses, 0)
    w = tl.math.exp2(lses - m)
    o = tl.sum(w[:, None] * parts, 0) / tl.sum(w, 0)
    tl.store(o_ptr + b.to(tl.int64) * sob + head * soh + offs_d * sod, o.to(o_ptr.dtype.element_ty))


def p2(n):
    return 1 << max(0, (n - 1).bit_length())


_COUNTS = {}
_ALLOCATOR: list = []


def _set_allocator():
    """Device-side tensor descriptors need a global scratch buffer a launch (128 bytes a descriptor)."""
    if not _ALLOCATOR:
        def alloc(size, align, stream):
            return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")

        triton.set_allocator(alloc)
        _ALLOCATOR.append(alloc)


def lab_decode(q, k, v, lengths, out, splits, block_n, num_warps=4, num_stages=3, stage=4, combine_tile=False,
               k_rows=False, two=False, scratch=None, no_len=False, no_dot=False, store_never=False, peel=False, tma=False):
    b, h, d = q.shape
    _, g, l_max, _ = k.shape
    group = h // g
    chunk = triton.cdiv(triton.cdiv(l_max, splits), block_n) * block_n
    if scratch is None:
        scratch = (torch.empty(b * h * splits * d, dtype=torch.float32, device=q.device),
                   torch.empty(b * h * splits, dtype=torch.float32, device=q.device))
    part_o, part_lse = scratch
    key = (str(q.device), b * g)
    if key not in _COUNTS:
        _COUNTS[key] = torch.zeros(b * g, dtype=torch.int32, device=q.device)
    counts = _COUNTS[key]
    stage_k = 1 if two else stage
    if tma:
        _set_allocator()
    lab_kernel[(splits, b * g)](
        q, k, v, out, lengths, part_o, part_lse, counts, g, chunk, splits, LOG2E / math.sqrt(d),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        HEAD_D=d, GROUP=group, GROUP_PAD=p2(group) if no_dot else max(16, p2(group)), GROUP_P2=p2(group),
        BLOCK_N=block_n,
        SPLITS_PAD=p2(splits), STAGE=stage_k, COMBINE_TILE=combine_tile, K_ROWS=k_rows,
        NO_LEN=no_len, NO_DOT=no_dot, STORE_NEVER=store_never, l_max=l_max, PEEL=peel, TMA=tma,
        num_warps=num_warps, num_stages=num_stages)
    if two:
        lab_combine[(b * h,)](part_o, part_lse, out, h, splits, *out.stride(), HEAD_D=d, SPLITS_PAD=p2(splits),
                              num_warps=4)
