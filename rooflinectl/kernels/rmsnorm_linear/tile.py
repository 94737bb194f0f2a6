"""rmsnorm_linear's prefill kernels: the rstd pre-pass (``_rstd_kernel``), the tile kernel that scales each row of
its accumulator by the pre-pass's rstd (``_tile_kernel``), and the one that takes the sum of squares from the x
tiles its own K loop loads (``_tile_ss_kernel``); both tile kernels share their epilogue
(``_tile_scale_store``). The persistent one is in ``persistent.py``. Why each exists: the package's docstring;
what the H200 measured of it: ``configs.py``.
"""

from __future__ import annotations

import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from .split import publish_partial, sum_partials


@triton.jit
def _rstd_kernel(x_ptr, rstd_ptr, M, K, sxm, eps, BLOCK_K: tl.constexpr, ROWS: tl.constexpr,
                 LAUNCH_DEPENDENTS: tl.constexpr = False):  # fmt: skip
    # Reads ROWS rows of x, writes ROWS floats: rstd = 1/sqrt(mean(x²) + eps). LAUNCH_DEPENDENTS: the matmul
    # launched after it with programmatic dependent launch (``pdl``) may start once every program of this one has
    # started; it waits for this one's rstd (tl.extra.cuda.gdc_wait) before its epilogue reads them.
    if LAUNCH_DEPENDENTS:
        tl.extra.cuda.gdc_launch_dependents()
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    row_mask = rows < M
    ss = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        cols = k * BLOCK_K + tl.arange(0, BLOCK_K)
        mask = row_mask[:, None] & (cols < K)[None, :]
        x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        ss += x * x
    rstd = tl.rsqrt(tl.sum(ss, axis=1) / K + eps)
    tl.store(rstd_ptr + rows, rstd, mask=row_mask)


@triton.jit
def _tile_scale_store(acc, rstd, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    # y[m, n] = acc[m, n]·rstd[m] (+ bias[n]), acc[m, n] = Σ_k x[m, k]·W_g[n, k]: both tile kernels' epilogue.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = acc * rstd[:, None]
    if HAS_BIAS:
        bias = tl.load(b_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    y_ptrs = y_ptr + offs_m[:, None] * sym + offs_n[None, :]
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _tile_epilogue(acc, rstd_ptr, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    # rstd from the pre-pass kernel's M floats.
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rstd = tl.load(rstd_ptr + offs_m, mask=offs_m < M, other=0.0)
    _tile_scale_store(acc, rstd, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS, BLOCK_M, BLOCK_N)


@triton.jit
def _tile_kernel(
    x_ptr, w_ptr, rstd_ptr, b_ptr, y_ptr, ws_ptr, count_ptr, M, N, K, k_per_split, sxm, swn, sym,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, PDL: tl.constexpr = False,
):  # fmt: skip
    # Reads a BLOCK_M×(K range) strip of x and a BLOCK_N×(K range) strip of W_g, writes one BLOCK_M×BLOCK_N tile
    # of y (or, split, an fp32 partial that the last program of the tile sums). PDL: launched with programmatic
    # dependent launch while the pre-pass may still run; the epilogue waits for it before it reads rstd.
    pid = tl.program_id(0)
    tile = pid // SPLIT_K
    pid_s = pid % SPLIT_K
    num_pid_n = tl.cdiv(N, BLOCK_N)  # tiles in grouped order, as in the matmul kernel
    pid_m, pid_n = tl.swizzle2d(tile // num_pid_n, tile % num_pid_n, tl.cdiv(M, BLOCK_M), num_pid_n, GROUP_M)
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)

    offs_am = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    offs_bn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
    offs_k = k_lo + tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_am[:, None] * sxm + offs_k[None, :]
    w_ptrs = w_ptr + offs_k[:, None] + offs_bn[None, :] * swn  # a BLOCK_K×BLOCK_N view of W_gᵀ
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k_lo, k_hi, BLOCK_K):
        if EVEN_K:
            x = tl.load(x_ptrs)
            w = tl.load(w_ptrs)
        else:
            k_ok = offs_k < k_hi - (k - k_lo)
            x = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
            w = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(x, w, acc, input_precision="tf32")
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    if SPLIT_K == 1:
        if PDL:
            tl.extra.cuda.gdc_wait()
        _tile_epilogue(acc, rstd_ptr, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS, BLOCK_M, BLOCK_N)
    else:
        # (No sums of squares: ws_ptr stands in for their pointer, never read or written.)
        if publish_partial(ws_ptr, ws_ptr, count_ptr, tile, pid_s, acc, 0.0, SPLIT_K, BLOCK_M, BLOCK_N, BLOCK_M, False):
            acc, _ = sum_partials(ws_ptr, ws_ptr, tile, SPLIT_K, BLOCK_M, BLOCK_N, BLOCK_M, False)
            if PDL:
                tl.extra.cuda.gdc_wait()
            _tile_epilogue(acc, rstd_ptr, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS, BLOCK_M, BLOCK_N)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch


@triton.jit
def _tile_rstd_epilogue(acc, ss, b_ptr, y_ptr, pid_m, pid_n, M, N, K, sym, eps, HAS_BIAS: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    # rstd from the K loop's own sums of squares, ss[m] = Σ_k x[m, k]².
    rstd = tl.rsqrt(ss / K + eps)
    _tile_scale_store(acc, rstd, b_ptr, y_ptr, pid_m, pid_n, M, N, sym, HAS_BIAS, BLOCK_M, BLOCK_N)


@triton.jit
def _tile_ss_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, ws_ptr, ss_ptr, count_ptr, M, N, K, k_per_split, sxm, swn, sym, eps,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, HAS_BIAS: tl.constexpr, EVEN_K: tl.constexpr, SS_AHEAD: tl.constexpr,
    TMA: tl.constexpr, WARP_SPEC: tl.constexpr, x_td=None, w_td=None, HOST_DESC: tl.constexpr = False,
):  # fmt: skip
    # The tile kernel without the pre-pass: reads a BLOCK_M×(K range) strip of x and a BLOCK_N×(K range) strip of
    # W_g, writes one BLOCK_M×BLOCK_N tile of y (or, split, an fp32 partial and partial sums of squares that the
    # last program of the tile sums). The sum of squares of each row of x comes from the x tiles this loop loads
    # (SS_AHEAD False: the tile that feeds the dot; True: a load of its own one step ahead, as the gemv's "inloop",
    # in case the pipeliner's race of the module docstring shows on the tile that feeds the dot); rstd is applied
    # in the epilogue. TMA: x and W_g tiles through tensor descriptors (Hopper's TMA; rows and columns past the
    # edge read as zeros), else through pointers (rows past the edge wrap around, K masked).
    pid = tl.program_id(0)
    tile = pid // SPLIT_K
    pid_s = pid % SPLIT_K
    num_pid_n = tl.cdiv(N, BLOCK_N)  # tiles in grouped order, as in the matmul kernel
    pid_m, pid_n = tl.swizzle2d(tile // num_pid_n, tile % num_pid_n, tl.cdiv(M, BLOCK_M), num_pid_n, GROUP_M)
    k_lo = pid_s * k_per_split
    k_hi = tl.minimum(K, k_lo + k_per_split)

    offs_am = ((pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M).to(tl.int64)
    offs_bn = ((pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N).to(tl.int64)
    offs_k = k_lo + tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + offs_am[:, None] * sxm + offs_k[None, :]
    w_ptrs = w_ptr + offs_k[:, None] + offs_bn[None, :] * swn  # a BLOCK_K×BLOCK_N view of W_gᵀ
    if TMA:
        if HOST_DESC:  # made on the host, kernel parameters
            x_desc = x_td
            w_desc = w_td
        else:  # made by each program, in global scratch
            x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[sxm, 1], block_shape=[BLOCK_M, BLOCK_K])
            w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[swn, 1], block_shape=[BLOCK_N, BLOCK_K])
    if SS_AHEAD:
        xs_next = tl.load(x_ptrs, mask=(offs_k < k_hi)[None, :], other=0.0, cache_modifier=".cg")
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    ss = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k in tl.range(k_lo, k_hi, BLOCK_K, warp_specialize=WARP_SPEC):
        if SS_AHEAD:
            xs = xs_next
            ahead = offs_k + (k - k_lo + BLOCK_K)
            xs_next = tl.load(x_ptrs + BLOCK_K, mask=(ahead < k_hi)[None, :], other=0.0, cache_modifier=".cg")
        if TMA:
            # The last split's last step reaches past K: TMA reads zeros there. Other splits end on a whole step.
            x = x_desc.load([pid_m * BLOCK_M, k])
            w = tl.trans(w_desc.load([pid_n * BLOCK_N, k]))
        else:
            if EVEN_K:
                x = tl.load(x_ptrs)
                w = tl.load(w_ptrs)
            else:
                k_ok = offs_k < k_hi - (k - k_lo)
                x = tl.load(x_ptrs, mask=k_ok[None, :], other=0.0)
                w = tl.load(w_ptrs, mask=k_ok[:, None], other=0.0)
        if not SS_AHEAD:
            # The race of the module docstring, and its cure: x + 0.0 (not folded away: it turns -0.0 into +0.0,
            # which changes no product and no square) makes the dot take x from registers, so that x's shared
            # buffer is free once loaded, as the pipeliner's buffer count assumes.
            x = x + 0.0
        acc = tl.dot(x, w, acc, input_precision="tf32")
        if SS_AHEAD:
            xsf = xs.to(tl.float32)
        else:
            xsf = x.to(tl.float32)
        ss += tl.sum(xsf * xsf, axis=1)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    if SPLIT_K == 1:
        _tile_rstd_epilogue(acc, ss, b_ptr, y_ptr, pid_m, pid_n, M, N, K, sym, eps, HAS_BIAS, BLOCK_M, BLOCK_N)
    else:
        if publish_partial(ws_ptr, ss_ptr, count_ptr, tile, pid_s, acc, ss, SPLIT_K, BLOCK_M, BLOCK_N, BLOCK_M, True):
            acc, ss = sum_partials(ws_ptr, ss_ptr, tile, SPLIT_K, BLOCK_M, BLOCK_N, BLOCK_M, True)
            _tile_rstd_epilogue(acc, ss, b_ptr, y_ptr, pid_m, pid_n, M, N, K, sym, eps, HAS_BIAS, BLOCK_M,
                                BLOCK_N)  # fmt: skip
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch

