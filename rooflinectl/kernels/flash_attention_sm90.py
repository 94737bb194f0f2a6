"""flash_attention on Hopper in Gluon: FlashAttention-3's schedule, written out where Triton's compiler cannot.

The same attention as ``flash_attention`` (prefill, bf16/fp16, d 64 or 128, causal or not, GQA, any length), for
sm_90 only, in Gluon (``triton.experimental.gluon``, triton 3.6 and 3.9), the lower layer of Triton in which the
kernel, not the compiler, places the shared buffers, the barriers and the waits for the tensor cores. Triton's
wgmma pipeliner keeps a product asynchronous only where nothing but another product reads its result before the next
wait for all of them (docs/attention.md, "What the compiler makes of the loop"), so the Triton kernel's softmax
never runs under a product of its own warps. Here, per program of 128 queries of one head:

- one **loader warp** (a worker partition, 24 registers) moves Q once, then each K/V block into a ring of
  ``stages`` shared buffers by TMA, each copy completing an mbarrier ("ready"); it waits for a buffer's "free"
  mbarrier before refilling it;
- two **consumer warpgroups** (the default partition and a worker, 4 warps each, 64 query rows each), which never
  wait for each other: each takes a block when its K (then its V) is ready and frees the buffer when its products
  that read it are done (the "free" barrier counts both).

Each consumer's loop (FlashAttention-3's overlap within a warpgroup, Shah et al., arXiv:2407.08608, §3.2), block j:

    issue S = Q·K(j)ᵀ;  issue O += P(j−1)·V(j−1);  wait for S only (one product may stay in flight)
    softmax of S → P(j), the row max and sum          (runs while O += P(j−1)·V(j−1) is on the tensor cores)
    wait for O;  free block j−1's buffer;  O ×= exp2(m_old − m_new)

so the exponentials of block j run under block j−1's P·V, and one consumer's softmax can run under the other's
products (they are not kept in step; with ``PINGPONG`` they take turns to issue their products, an mbarrier each,
FlashAttention-3's ping-pong, §3.1, so that they alternate). The arithmetic is ``flash_attention``'s: base-2 softmax with the scale folded
into log2(e)/√d, P rounded to the inputs' type before P·V, O divided by the row sum at the end. Blocks that
``flash_attention`` would not load (right of the diagonal) are not loaded; block 0 and the blocks a mask reaches
(from the program's first row on, under a causal mask; the ragged tail) are masked.

Q, K, V and O must be contiguous B×h×S×d / B×g×S×d. TMA reads Q in 128-row boxes of its (B·h·S)×d view (rows past
a head's end are the next head's queries, or zeros: their outputs are never stored) and K and V in 1 × BLOCK_N × d
boxes of their (B·g)×S×d views, so positions past a head's end read as zeros (scores the mask sets to −inf, V rows
that meet P = 0). O is stored through pointers, rows past the sequence masked.

Gluon has no interpreter: tests/gluon_emulator.py runs this source on the CPU (its barriers, copies and asynchronous
products emulated) for the tests; benchmarks/attention_sass.py --gluon reads what the compiler makes of it.
"""

from __future__ import annotations

import math

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
from triton.experimental import gluon  # type: ignore[import-untyped]
from triton.experimental.gluon import language as gl  # type: ignore[import-untyped]
from triton.experimental.gluon.language.nvidia.hopper import (  # type: ignore[import-untyped]
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from .base import LOG2E

# A TMA copy of a box into shared memory, completing an mbarrier: ``async_load`` in triton 3.9, which removed the
# name triton 3.6 has for it.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

# A program's queries: two consumer warpgroups of 64 rows, wgmma's M (4 warps × 16 rows). The kernel reads it from
# Q's descriptor.
BLOCK_M = 128


# Registers per thread of the launch: 3 warpgroups × 128 threads × 168 = 64,512 of the SM's 65,536. The loader's
# warpgroup gives back all but 24 (setmaxnreg), so each consumer warpgroup runs with 240: a consumer thread holds 64
# scores, 64 of O and 32 of P (bf16 pairs) for its 64 × 128 tiles, FlashAttention-3's budget at d 128.
MAX_REGS = 168
LOADER_REGS = gl.constexpr(24)
CONSUMER_REGS = gl.constexpr(240)


@gluon.jit
def _loader(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, free,
            q_row, kv_head, n_kv, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):  # fmt: skip
    # Q once; then for block j, into buffer j % STAGES once both consumers have freed it (its use j // STAGES − 1:
    # the first STAGES blocks wait on the parity a fresh barrier already has).
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    _tma_load(q_desc, [q_row, 0], q_bar, q_smem)
    for j in range(n_kv):
        s = j % STAGES
        mbarrier.wait(free.index(s), ((j // STAGES) & 1) ^ 1)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        _tma_load(k_desc, [kv_head, j * BLOCK_N, 0], k_ready.index(s), k_smem.index(s))
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        _tma_load(v_desc, [kv_head, j * BLOCK_N, 0], v_ready.index(s), v_smem.index(s))


@gluon.jit
def _tile(bufs, i):
    # Buffer i of a ring of 1 × rows × d TMA boxes, as the rows × d tile the products read.
    return bufs.index(i).reshape([bufs.shape[2], bufs.shape[3]])


@gluon.jit
def _softmax(s_acc, m_i, l_i, qk_scale, cols, rows, n_ctx, MASKED: gl.constexpr, CAUSAL: gl.constexpr):
    # One block's scores folded into the running max and sum; returns P unnormalised and the rescale factor of O.
    # Every row keeps block 0's first column, so its max is finite from block 0 on; a block wholly masked for a row
    # (right of the diagonal for the first 64 rows, where BLOCK_N is 64) leaves the row unchanged: P = 0, alpha = 1.
    if MASKED:
        keep = gl.expand_dims(cols, 0) < n_ctx
        if CAUSAL:
            keep = keep & (gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1))
        s_acc = gl.where(keep, s_acc, -float("inf"))
    m_new = gl.maximum(m_i, gl.max(s_acc, axis=1) * qk_scale)
    p = gl.exp2(s_acc * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    return p, alpha, l_i * alpha + gl.sum(p, axis=1), m_new


@gluon.jit
def _step(j, q, k_smem, v_smem, bars, s_acc, o_acc, p_op, m_i, l_i, qk_scale, offs_n, rows, n_ctx, n_full,
          p_layout: gl.constexpr, o_layout: gl.constexpr, HALF: gl.constexpr, BLOCK_N: gl.constexpr,
          STAGES: gl.constexpr, CAUSAL: gl.constexpr, PINGPONG: gl.constexpr):  # fmt: skip
    # Block j's scores issued, then block j − 1's P·V; the softmax of block j runs while that P·V is in flight.
    k_ready, v_ready, free, turn = bars
    s = j % STAGES
    prev = (j - 1) % STAGES
    if PINGPONG:  # the consumers take turns to issue their products, consumer 0 first (its first wait passes)
        mbarrier.wait(turn.index(HALF), ((j - 1) & 1) ^ (1 - HALF))
    mbarrier.wait(k_ready.index(s), (j // STAGES) & 1)
    s_tok = warpgroup_mma(q, _tile(k_smem, s).permute((1, 0)), s_acc, use_acc=False, is_async=True)
    mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
    o_tok = warpgroup_mma(p_op, _tile(v_smem, prev), o_acc, is_async=True)
    if PINGPONG:
        mbarrier.arrive(turn.index(1 - HALF), count=1)
    s_acc = warpgroup_mma_wait(1, deps=(s_tok,))
    # The mask decided at run time, a branch: the softmax then sits in a block of code of its own, which ptxas does
    # not move the next wait into. Compiled with the two loops of flash_attention (one masked, one not), ptxas
    # hoisted the wait for P·V above the exponentials, which then ran under no product
    # (benchmarks/attention_sass.py --gluon prints the order).
    if j < n_full:
        p, alpha, l_i, m_i = _softmax(s_acc, m_i, l_i, qk_scale, j * BLOCK_N + offs_n, rows, n_ctx, False, CAUSAL)
    else:
        p, alpha, l_i, m_i = _softmax(s_acc, m_i, l_i, qk_scale, j * BLOCK_N + offs_n, rows, n_ctx, True, CAUSAL)
    # P is packed to 16 bits after the wait, into the registers P·V's operand leaves (FlashAttention-3's order):
    # packed before it, the new P would need 32 registers a thread more while the old one is still read.
    o_acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))
    mbarrier.arrive(free.index(prev), count=1)
    o_acc = o_acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
    return s_acc, o_acc, gl.convert_layout(p.to(p_op.dtype), p_layout), m_i, l_i


@gluon.jit
def _consumer(q_smem, k_smem, v_smem, bars, o_ptr, o_row, m0, n_kv, n_ctx, qk_scale, HALF: gl.constexpr,
              HEAD_D: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
              PINGPONG: gl.constexpr):  # fmt: skip
    # Query rows m0 + HALF·64 … +63 of the program's 128, against n_kv ≥ 1 K/V blocks: block 0 and those from
    # n_full on masked.
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    dtype: gl.constexpr = q_smem.dtype
    q_bar, k_ready, v_ready, free, turn = bars

    rows = m0 + HALF * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, s_layout))
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    q = q_smem.slice(HALF * 64, 64, dim=0)
    m_i = gl.full([64], -float("inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([64], gl.float32, layout=gl.SliceLayout(1, s_layout))
    s_acc = gl.zeros([64, BLOCK_N], gl.float32, layout=s_layout)
    o_acc = gl.zeros([64, HEAD_D], gl.float32, layout=o_layout)

    # Block 0: its scores alone (nothing to overlap yet).
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_ready.index(0), 0)
    s_tok = warpgroup_mma(q, _tile(k_smem, 0).permute((1, 0)), s_acc, use_acc=False, is_async=True)
    s_acc = warpgroup_mma_wait(0, deps=(s_tok,))
    p, alpha, l_i, m_i = _softmax(s_acc, m_i, l_i, qk_scale, offs_n, rows, n_ctx, True, CAUSAL)
    p_op = gl.convert_layout(p.to(dtype), p_layout)

    # The blocks with no column masked: under a causal mask those left of the program's first row (BLOCK_N
    # divides 128), else every whole block.
    if CAUSAL:
        n_full = m0 // BLOCK_N
    else:
        n_full = n_ctx // BLOCK_N
    for j in range(1, n_kv):
        s_acc, o_acc, p_op, m_i, l_i = _step(j, q, k_smem, v_smem, (k_ready, v_ready, free, turn), s_acc, o_acc,
                                             p_op, m_i, l_i, qk_scale, offs_n, rows, n_ctx, n_full, p_layout,
                                             o_layout, HALF, BLOCK_N, STAGES, CAUSAL, PINGPONG)

    last = (n_kv - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_kv - 1) // STAGES) & 1)
    o_tok = warpgroup_mma(p_op, _tile(v_smem, last), o_acc, is_async=True)
    o_acc, p_op = warpgroup_mma_wait(0, deps=(o_tok, p_op))
    mbarrier.arrive(free.index(last), count=1)

    l_o = gl.convert_layout(l_i, gl.SliceLayout(1, o_layout))
    out = (o_acc / gl.expand_dims(l_o, 1)).to(dtype)
    o_rows = m0 + HALF * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, o_layout))
    o_cols = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, o_layout))
    offs = (o_row + gl.expand_dims(o_rows, 1)).to(gl.int64) * HEAD_D + gl.expand_dims(o_cols, 0)
    gl.store(o_ptr + offs, out, mask=gl.expand_dims(o_rows, 1) < n_ctx)


@gluon.jit
def _fa3_fwd_kernel(q_desc, k_desc, v_desc, o_ptr, n_ctx, n_heads, group, qk_scale,
                    HEAD_D: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                    PINGPONG: gl.constexpr = False):  # fmt: skip
    # Program (sequence·head, query block), the heads on the fastest axis, the query blocks heaviest first (as
    # flash_attention's heads_fast order).
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[0]
    bh = gl.program_id(0)
    pid_m = gl.cdiv(n_ctx, BLOCK_M) - 1 - gl.program_id(1)
    b = bh // n_heads
    h = bh - b * n_heads
    m0 = pid_m * BLOCK_M
    q_row = bh * n_ctx + m0
    kv_head = b * (n_heads // group) + h // group
    if CAUSAL:
        n_kv = gl.cdiv(gl.minimum(m0 + BLOCK_M, n_ctx), BLOCK_N)
    else:
        n_kv = gl.cdiv(n_ctx, BLOCK_N)

    q_smem = gl.allocate_shared_memory(q_desc.dtype, q_desc.block_type.shape, q_desc.layout)
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())  # PINGPONG's, one a consumer
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(free.index(i), count=2)  # both consumers
    for i in gl.static_range(2):
        mbarrier.init(turn.index(i), count=1)

    o_row = bh * n_ctx
    bars = (q_bar, k_ready, v_ready, free, turn)
    gl.warp_specialize([
        (_consumer, (q_smem, k_smem, v_smem, bars, o_ptr, o_row, m0, n_kv, n_ctx, qk_scale, 0, HEAD_D, BLOCK_N,
                     STAGES, CAUSAL, PINGPONG)),
        (_consumer, (q_smem, k_smem, v_smem, bars, o_ptr, o_row, m0, n_kv, n_ctx, qk_scale, 1, HEAD_D, BLOCK_N,
                     STAGES, CAUSAL, PINGPONG)),
        (_loader, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, k_ready, v_ready, free,
                   q_row, kv_head, n_kv, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, LOADER_REGS])  # fmt: skip


def shared_layout(block: list[int], dtype: torch.dtype):
    """The swizzled shared layout wgmma reads a TMA box of ``block`` in (128-byte swizzle for d ≥ 64)."""
    return gl.NVMMASharedLayout.get_default_for(block, gl.bfloat16 if dtype == torch.bfloat16 else gl.float16)


def descriptors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_n: int) -> tuple:
    """Q's TMA descriptor over its (B·h·S)×d view in 128-row boxes; K's and V's over their (B·g)×S×d views in
    1 × block_n × d boxes, so that positions past a head's S read as zeros, not as the next head's rows (whose
    values, an infinity among them, P = 0 would not cancel: 0·inf is NaN)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # type: ignore[import-untyped]

    b, g, s, d = k.shape
    box = [1, block_n, d]
    return (TensorDescriptor.from_tensor(q.view(-1, d), [BLOCK_M, d], shared_layout([BLOCK_M, d], q.dtype)),
            TensorDescriptor.from_tensor(k.view(b * g, s, d), box, shared_layout(box, k.dtype)),
            TensorDescriptor.from_tensor(v.view(b * g, s, d), box, shared_layout(box, v.dtype)))


# At most what the mbarriers add to the tiles as triton places them: 256 to 336 bytes at 2 to 4 buffers, with and
# without ping-pong, compiled for sm_90 by triton 3.6 and 3.9 (benchmarks/attention_sass.py --gluon).
BARRIER_BYTES = 512


def shared_bytes(d: int, block_n: int, stages: int) -> int:
    """The shared memory a program takes: Q's 128 × d tile and ``stages`` K and V tiles of block_n × d, 16-bit,
    and the mbarriers."""
    return 2 * d * (BLOCK_M + 2 * stages * block_n) + BARRIER_BYTES


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, block_n: int,
                 stages: int) -> None:
    """ValueError unless the kernel can take these tensors and this tiling on their device (its one-line reason)."""
    b, h, s, d = q.shape
    g = k.shape[1]
    if k.shape != (b, g, s, d) or v.shape != k.shape or h % g or out.shape != q.shape:
        raise ValueError(f"flash_attention sm90: Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}")
    if min(q.shape) < 1 or g < 1:
        raise ValueError(f"flash_attention sm90: nothing to attend over in Q {tuple(q.shape)}")
    if q.dtype not in (torch.bfloat16, torch.float16) or any(t.dtype != q.dtype for t in (k, v, out)):
        raise ValueError("flash_attention sm90: Q, K, V and O must all be bf16 or all fp16")
    if d not in (64, 128):
        raise ValueError(f"flash_attention sm90: head dim {d} is not 64 or 128")
    if not all(t.is_contiguous() for t in (q, k, v, out)):
        raise ValueError("flash_attention sm90: Q, K, V and O must be contiguous")
    if any(t.data_ptr() % 16 for t in (q, k, v)):  # TMA reads from 16-byte-aligned bases only
        raise ValueError("flash_attention sm90: Q, K and V must start on a 16-byte boundary")
    # Block j's Q·Kᵀ is issued while block j − 1's V is still read: two buffers at least, or the loader would wait
    # for a buffer that only its next copy lets the consumers free.
    if block_n not in (64, 128) or stages < 2:
        raise ValueError(f"flash_attention sm90: blocks of {block_n} in {stages} buffers (64 or 128; 2 or more)")
    if q.device.type != "cuda" or torch.cuda.get_device_capability(q.device) != (9, 0):
        raise ValueError("flash_attention sm90: needs a Hopper GPU (sm_90: wgmma and TMA)")
    props = triton.runtime.driver.active.utils.get_device_properties(q.get_device())
    check_tiling(d, block_n, stages, props["max_shared_mem"])  # the opt-in limit, as triton's own launch checks it


def check_tiling(d: int, block_n: int, stages: int, smem_limit_bytes: int) -> None:
    """ValueError where a program's tiles would not fit the shared memory a block may take (the device's opt-in
    limit: 227 KiB on sm_90)."""
    if shared_bytes(d, block_n, stages) > smem_limit_bytes:
        raise ValueError(f"flash_attention sm90: {stages} buffers of {block_n} × {d} need "
                         f"{shared_bytes(d, block_n, stages):,} B of shared memory, over the {smem_limit_bytes:,} "
                         "a block may take")


def flash_attention_sm90(q, k, v, out, causal: bool = True, block_n: int = 128, stages: int = 2,
                         pingpong: bool = False):
    """Run the Gluon kernel on B×h×S×d Q and B×g×S×d K, V into ``out``; returns the grid and the launch handle."""
    check_inputs(q, k, v, out, block_n, stages)
    grid, args, options = launch_args(q, k, v, out, causal, block_n, stages, pingpong)
    return grid, _fa3_fwd_kernel[grid](*args, **options)


def launch_args(q, k, v, out, causal: bool, block_n: int, stages: int, pingpong: bool) -> tuple[tuple, tuple, dict]:
    """The kernel's grid, arguments and keyword arguments (constexprs and launch options) for these tensors."""
    b, h, s, d = q.shape
    args = (*descriptors(q, k, v, block_n), out, s, h, h // k.shape[1], LOG2E / math.sqrt(d))
    options = {"HEAD_D": d, "BLOCK_N": block_n, "STAGES": stages, "CAUSAL": causal, "PINGPONG": pingpong,
               "num_warps": 4, "maxnreg": MAX_REGS}
    return (b * h, triton.cdiv(s, BLOCK_M)), args, options


def sm90_signature(d: int, block_n: int, dtype: str = "bf16") -> dict[str, str]:
    """The kernel's runtime arguments as triton's compiler names their types when the launcher specialises it
    (the descriptors' with their shared layouts): what compiling it for sm_90 without a GPU needs."""
    t = torch.bfloat16 if dtype == "bf16" else torch.float16

    def desc(box: list[int]) -> str:
        return f"tensordesc<{dtype}[{', '.join(map(str, box))}],{shared_layout(box, t)!r}>"

    return {"q_desc": desc([BLOCK_M, d]), "k_desc": desc([1, block_n, d]), "v_desc": desc([1, block_n, d]),
            "o_ptr": f"*{dtype}",
            "n_ctx": "i32", "n_heads": "i32", "group": "i32", "qk_scale": "fp32"}
