"""rmsnorm_linear's split K, shared by the gemv and both tile kernels: each of a tile's SPLIT_K programs stores its
fp32 partial accumulator (and, where the kernel has them, its partial sums of squares of x) in a workspace and
bumps the tile's counter; the program that arrives last sums the partials, runs its kernel's epilogue and resets
the counter to 0 for the next launch (``RMSNormLinear._workspace`` allocates both).
"""

from __future__ import annotations

import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]


@triton.jit
def publish_partial(ws_ptr, ss_ptr, count_ptr, tile, pid_s, acc, ss, SPLIT_K: tl.constexpr, BLOCK_A: tl.constexpr,
                    BLOCK_B: tl.constexpr, BLOCK_SS: tl.constexpr, HAS_SS: tl.constexpr):  # fmt: skip
    # Stores split pid_s's BLOCK_A×BLOCK_B partial (and BLOCK_SS sums of squares); True for the last to arrive.
    r_a = tl.arange(0, BLOCK_A)
    r_b = tl.arange(0, BLOCK_B)
    part = tile * SPLIT_K + pid_s
    tl.store(ws_ptr + part * (BLOCK_A * BLOCK_B) + r_a[:, None] * BLOCK_B + r_b[None, :], acc)
    if HAS_SS:
        tl.store(ss_ptr + part * BLOCK_SS + tl.arange(0, BLOCK_SS), ss)
    # Every thread's partial is stored before the (one-thread, acq_rel) counter bump publishes it.
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr + tile, 1)
    return arrived == SPLIT_K - 1


@triton.jit
def sum_partials(ws_ptr, ss_ptr, tile, SPLIT_K: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_B: tl.constexpr,
                 BLOCK_SS: tl.constexpr, HAS_SS: tl.constexpr):  # fmt: skip
    # The tile's SPLIT_K partials summed (and its sums of squares; zeros without them), read past the L1 (.cg).
    r_a = tl.arange(0, BLOCK_A)
    r_b = tl.arange(0, BLOCK_B)
    r_ss = tl.arange(0, BLOCK_SS)
    acc = tl.zeros((BLOCK_A, BLOCK_B), dtype=tl.float32)
    ss = tl.zeros((BLOCK_SS,), dtype=tl.float32)
    for s in range(0, SPLIT_K):
        part = tile * SPLIT_K + s
        acc += tl.load(ws_ptr + part * (BLOCK_A * BLOCK_B) + r_a[:, None] * BLOCK_B + r_b[None, :],
                       cache_modifier=".cg")
        if HAS_SS:
            ss += tl.load(ss_ptr + part * BLOCK_SS + r_ss, cache_modifier=".cg")
    return acc, ss
