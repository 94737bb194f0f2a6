"""rmsnorm_linear's decode kernel (M up to 64): the gemv with the roles swapped, yᵀ = W_g·xᵀ, so that BLOCK_N rows
of W are the wide operand of Hopper's wgmma and the few rows of x the narrow one; each program owns BLOCK_N rows of
W and one K range (split K: the last program of a tile to arrive sums the fp32 partials). Where the sum of
squares of x comes from (``SS_INLOOP``, ``SS_DOT``, else a loop of its own) and why ``x + 0.0``: the package's
docstring; what the H200 measured of each: ``configs.py``.
"""

from __future__ import annotations

import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from .split import publish_partial, sum_partials


@triton.jit
def _gemv_epilogue(acc, ss, b_ptr, y_ptr, offs_n, offs_m, M, N, K, sym, eps, HAS_BIAS: tl.constexpr):
    # acc[n, m] = Σ_k W_g[n, k]·x[m, k]; y[m, n] = acc[n, m]·rstd[m] (+ bias[n]).
    rstd = tl.rsqrt(ss / K + eps)
    acc = acc * rstd[None, :]
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[:, None]
    y_ptrs = y_ptr + offs_m.to(tl.int64)[None, :] * sym + offs_n[:, None]
    mask = (offs_n < N)[:, None] & (offs_m < M)[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemv_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, ss_ptr, count_ptr, M, N, K, k_per_split, sxm, swn, sym, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_KSS: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, SS_INLOOP: tl.constexpr,
    SS_DOT: tl.constexpr = False, TMA: tl.constexpr = False, x_td=None, w_td=None, HOST_DESC: tl.constexpr = False,
):  # fmt: skip
    # Reads BLOCK_N rows of W_g and BLOCK_M rows of x over one K range; writes y[BLOCK_M rows, BLOCK_N columns]
    # (or, split, an fp32 partial that the last program of the tile sums).
    pid_n = tl.program_id(0)
    pid_s = tl.program_id(1)
    pid_m = tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    # Rows past the edge wrap around so that the loads need no mask (the store masks them).
    n_safe = (offs_n % N).to(tl.int64)
    m_safe = (offs_m % M).to(tl.int64)
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)

    # Sum of squares of this K range of x: from a load of its own in the matmul loop (SS_INLOOP: an L2 read of a
    # few KB a step, no extra latency), or in a loop of its own before it; or (SS_DOT, the pick) from the x tile
    # that feeds the dot, which then takes a copy of it (x + 0.0: the package docstring's rule).
    ss = tl.zeros((BLOCK_M,), dtype=tl.float32)
    if not SS_INLOOP and not SS_DOT:
        for k in range(k_lo, k_hi, BLOCK_KSS):
            cols = k + tl.arange(0, BLOCK_KSS)
            xs = tl.load(
                x_ptr + m_safe[:, None] * sxm + cols[None, :], mask=(cols < k_hi)[None, :], other=0.0
            )
            xs = xs.to(tl.float32)
            ss += tl.sum(xs * xs, axis=1)

    offs_k = k_lo + tl.arange(0, BLOCK_K)
    w_ptrs = w_ptr + n_safe[:, None] * swn + offs_k[None, :]
    x_ptrs = x_ptr + m_safe[:, None] * sxm + offs_k[None, :]
    if TMA:  # W_g and x tiles through tensor descriptors: rows past the edge read as zeros
        if HOST_DESC:  # made on the host, kernel parameters
            w_desc = w_td
            x_desc = x_td
        else:  # made by each program, in global scratch
            w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[swn, 1], block_shape=[BLOCK_N, BLOCK_K])
            x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[sxm, 1], block_shape=[BLOCK_M, BLOCK_K])
    if SS_INLOOP:
        # One step ahead, so that the load's latency hides behind a step of the matmul.
        xs_next = tl.load(x_ptrs, mask=(offs_k < k_hi)[None, :], other=0.0, cache_modifier=".cg")
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        if SS_INLOOP:
            xs = xs_next
            ahead = offs_k + (k - k_lo + BLOCK_K)
            xs_next = tl.load(x_ptrs + BLOCK_K, mask=(ahead < k_hi)[None, :], other=0.0, cache_modifier=".cg")
        if TMA:
            # Each split's K range is whole steps but the last one's, which TMA ends with zeros past K.
            w = w_desc.load([pid_n * BLOCK_N, k])
            x = x_desc.load([pid_m * BLOCK_M, k])
        elif EVEN_K:
            w = tl.load(w_ptrs)
            x = tl.load(x_ptrs)
        else:
            k_mask = (offs_k < k_hi - (k - k_lo))[None, :]
            w = tl.load(w_ptrs, mask=k_mask, other=0.0)
            x = tl.load(x_ptrs, mask=k_mask, other=0.0)
        if SS_DOT:
            xdf = x.to(tl.float32)
            ss += tl.sum(xdf * xdf, axis=1)
            # x + 0.0 (not folded: -0.0 becomes +0.0, no product changes) is a register tensor, which the wgmma
            # reads from a shared copy of its own, waited for in the same step; the pipelined x buffers are then
            # read only by the synchronous load above (compiled for sm_90 by triton 3.6 and 3.9).
            x = x + 0.0
        acc = tl.dot(w, tl.trans(x), acc, input_precision="tf32")
        if SS_INLOOP:
            xsf = xs.to(tl.float32)
            ss += tl.sum(xsf * xsf, axis=1)
        w_ptrs += BLOCK_K
        x_ptrs += BLOCK_K

    if SPLIT_K == 1:
        _gemv_epilogue(acc, ss, b_ptr, y_ptr, offs_n, offs_m, M, N, K, sym, eps, HAS_BIAS)
    else:
        tile = pid_m * tl.num_programs(0) + pid_n
        if publish_partial(ws_ptr, ss_ptr, count_ptr, tile, pid_s, acc, ss, SPLIT_K, BLOCK_N, BLOCK_M, BLOCK_M, True):
            acc, ss = sum_partials(ws_ptr, ss_ptr, tile, SPLIT_K, BLOCK_N, BLOCK_M, BLOCK_M, True)
            _gemv_epilogue(acc, ss, b_ptr, y_ptr, offs_n, offs_m, M, N, K, sym, eps, HAS_BIAS)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch
