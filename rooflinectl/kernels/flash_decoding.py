"""flash_decoding: one new query token per sequence against its KV cache, split along the positions.

Shapes: q and o are B×h×d, the caches K and V B×g×L_max×d, ``lengths`` (int32, B) the positions each sequence has
(1 ≤ L_b ≤ L_max). One program takes one K/V head of one sequence and one split of its positions, and holds all h/g
query heads of the group as the rows of one tile (padded to 16 for tl.dot), so each K/V block is loaded once for the
whole group (or a slice of the group's heads, ``DecodeConfig.head_slices``, each slice loading it). It writes its
split's fp32 partial output (normalized) and log-sum-exp; the last program of a (sequence, K/V head) to finish (an
atomic counter, acquire/release) combines the splits by log-sum-exp and writes o, and resets the counter: one
launch, no second reduction kernel, no program ever waits on another. Splitting along the positions lets batch 1
fill every SM (Dao, Haziza, Massa, Sizov, "Flash-Decoding for long-context inference", PyTorch blog, 2023).

Reads q, K and V (Σ_b L_b positions, once), writes o; the partials (B·h·splits·(d + 1) fp32) go through the L2.
Plain pointer arithmetic, so that triton 3.6, 3.9 and the interpreter run the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.count.attention_io import decode_op
from ..engine.count.op import Op
from .base import LOG2E, Inputs, Kernel, sm_count, torch_dtype
from .flash_attention import check_attention_shape, picked_backend, sdpa_backends

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class DecodeConfig:
    block_n: int  # positions per K/V block
    splits: int  # programs per (sequence, K/V head)
    num_warps: int
    num_stages: int
    # The two products on the tensor cores (tl.dot, the group's rows padded to 16) or on the CUDA cores (a
    # broadcast multiply and sum over the group's own rows, unpadded): for one or two query heads a K/V head the
    # dot computes 8 to 16 times the rows it keeps, yet it stays faster at every shape measured: 16 × 32/32 ×
    # 1,024 68.3 µs on the tensor cores against 70.0-99.9 on the CUDA cores, 64 × 32/16 × 4,096 492 against
    # 1,115-1,718 (H200, benchmarks/decode_grid_gpu.py --cuda-core-lab, run 4 of 2026-12-04). The rule never
    # picks the CUDA cores; the switch stays for that measurement.
    tensor_cores: bool = True
    # Programs that share one (sequence, K/V head) and split, each taking group / head_slices of its query heads
    # (re-reading the same K/V blocks, from the L2): more programs where a few pairs leave SMs idle, at the cost of
    # more L2 reads. 1: the whole group in one program.
    head_slices: int = 1


@triton.jit
def _flash_decode_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, len_ptr, part_o_ptr, part_lse_ptr, count_ptr, table_ptr,
    n_kv_heads, chunk, n_splits, qk_scale, stb, l_table,
    sqb, sqh, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, sod,
    HEAD_D: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS_PAD: tl.constexpr, HEADS_STEP: tl.constexpr, ONE_SPLIT: tl.constexpr, PAGE: tl.constexpr,
    TABLE_PAD: tl.constexpr, DOT: tl.constexpr, SLICE: tl.constexpr, TABLE_WAITS_LEN: tl.constexpr = False,
    K_ROWS: tl.constexpr = False,
):  # fmt: skip
    # Program (split, (sequence, K/V head, slice)): a slice is SLICE of the group's GROUP query heads (GROUP: all).
    split = tl.program_id(0)
    bks = tl.program_id(1)
    bk = bks // (GROUP // SLICE)
    first = (bks - bk * (GROUP // SLICE)) * SLICE  # the slice's first head within the group
    b = bk // n_kv_heads
    kvh = bk - b * n_kv_heads
    n_ctx = tl.load(len_ptr + b)
    start = split * chunk
    stop = tl.minimum(start + chunk, n_ctx)

    rows = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_D)
    heads = kvh * GROUP + first + rows
    row_ok = rows < SLICE
    q = tl.load(q_ptr + b.to(tl.int64) * sqb + heads[:, None] * sqh + offs_d[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + kvh.to(tl.int64) * skh
    v_base = v_ptr + kvh.to(tl.int64) * svh

    m_i = tl.full([GROUP_PAD], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    if PAGE > 0 and TABLE_PAD > 0:
        # The split's page numbers, loaded once before the loop: the loop's K/V addresses then come from
        # registers and the induction variable alone, so Triton's pipeliner multi-buffers the K/V loads (a page
        # number loaded inside the loop feeds the loads of its own iteration, and they were not pipelined).
        # Masked by the split's end and the table's width (l_table positions), not by the sequence's length, so
        # that this load is issued beside the length's instead of after it: the first K/V loads then wait for one
        # round trip to memory, as in the contiguous kernel, not two (TABLE_WAITS_LEN: the length's mask, kept
        # for that measurement).
        first_page = start // PAGE
        slots = tl.arange(0, TABLE_PAD)
        table_end = stop if TABLE_WAITS_LEN else tl.minimum(start + chunk, l_table)
        split_pages = tl.load(table_ptr + b.to(tl.int64) * stb + first_page + slots,
                              mask=(first_page + slots) * PAGE < table_end, other=0)
    # Reads BLOCK_N×d of K and of V a step, 4·group·BLOCK_N·d FLOPs (the padded rows compute zeros, unstored).
    for n0 in tl.range(start, stop, BLOCK_N):
        cols = n0 + offs_n
        keep = cols < stop
        if PAGE > 0:
            # Paged cache: position p of sequence b sits at slot p % PAGE of page table[b, p // PAGE] (the K/V
            # tensors' first two strides are the page's and the slot's).
            if TABLE_PAD > 0:
                page = tl.gather(split_pages, tl.minimum(cols // PAGE - first_page, TABLE_PAD - 1), 0).to(tl.int64)
            else:  # a split of more pages than a register tile holds: one int32 a position, from the L1
                page = tl.load(table_ptr + b.to(tl.int64) * stb + cols // PAGE, mask=keep, other=0).to(tl.int64)
            k_rows = page * skb + (cols % PAGE) * skn
            v_rows = page * svb + (cols % PAGE) * svn
        else:
            k_rows = b.to(tl.int64) * skb + cols.to(tl.int64) * skn
            v_rows = b.to(tl.int64) * svb + cols.to(tl.int64) * svn
        if K_ROWS:  # K as BLOCK_N × d rows, V's layout: the position offsets are made in one layout, not two
            k = tl.trans(tl.load(k_base + k_rows[:, None] + offs_d[None, :] * skd, mask=keep[:, None], other=0.0))
        else:
            k = tl.load(k_base + k_rows[None, :] + offs_d[:, None] * skd, mask=keep[None, :], other=0.0)
        v = tl.load(v_base + v_rows[:, None] + offs_d[None, :] * svd, mask=keep[:, None], other=0.0)
        if DOT:
            qk = tl.dot(q, k) * qk_scale
        else:  # GROUP_PAD rows × d × BLOCK_N multiplies, summed over d
            qk = tl.sum(q.to(tl.float32)[:, :, None] * k.to(tl.float32)[None, :, :], 1) * qk_scale
        qk = tl.where(keep[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # the block's first column is kept: finite
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if DOT:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        else:  # P rounded to the cache's type as the dot path rounds it, then rows × BLOCK_N × d, summed
            pv = p.to(v.dtype).to(tl.float32)
            acc = acc * alpha[:, None] + tl.sum(pv[:, :, None] * v.to(tl.float32)[None, :, :], 1)
        m_i = m_new

    if ONE_SPLIT:
        # The whole sequence in this program: o directly, no partials, no counter.
        tl.store(o_ptr + b.to(tl.int64) * sob + heads[:, None] * soh + offs_d[None, :] * sod,
                 (acc / l_i[:, None]).to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    else:
        # This split's partial: o normalized, and its log2-sum-exp (−inf for a split past the sequence's end).
        has = stop > start
        lse = tl.where(has, m_i + tl.math.log2(tl.where(has, l_i, 1.0)), -float("inf"))
        part = tl.where(has, acc / tl.where(has, l_i, 1.0)[:, None], 0.0)
        slot = (b.to(tl.int64) * n_kv_heads * GROUP + heads) * n_splits + split  # (b, head, split)
        tl.store(part_o_ptr + slot[:, None] * HEAD_D + offs_d[None, :], part, mask=row_ok[:, None])
        tl.store(part_lse_ptr + slot, lse, mask=row_ok)
        # Publish (every thread's stores done, then release), and count; the last to arrive combines.
        tl.debug_barrier()
        done = tl.atomic_add(count_ptr + bks, 1, sem="acq_rel") + 1
        if done == n_splits:
            tl.atomic_xchg(count_ptr + bks, 0)  # ready for the next launch
            # The group's heads' log-sum-exps and partial outputs loaded as tiles of HEADS_STEP heads × SPLITS_PAD
            # splits × d, every load of a tile issued together: one L2 round trip a tile. One head at a time (a
            # tile a head) took 10.05 µs at 1 × 1,024 positions in 16 splits, all four heads as one tile 6.61;
            # at 1 × 4,096, 14.02 against 10.46 (H200, benchmarks/decode_lab_gpu.py run 1,
            # docs/results/h200-2026-12-03-decode/lab/lab-run1.log).
            sp = tl.arange(0, SPLITS_PAD)
            sp_ok = sp < n_splits
            step = tl.arange(0, HEADS_STEP)
            for h0 in tl.static_range(0, SLICE, HEADS_STEP):
                hh = kvh * GROUP + first + h0 + step
                h_ok = h0 + step < SLICE
                idx = (b.to(tl.int64) * n_kv_heads * GROUP + hh)[:, None] * n_splits + sp[None, :]  # (head, split)
                ok = h_ok[:, None] & sp_ok[None, :]
                lses = tl.load(part_lse_ptr + idx, mask=ok, other=-float("inf"), cache_modifier=".cg")
                parts = tl.load(part_o_ptr + idx[:, :, None] * HEAD_D + offs_d[None, None, :], mask=ok[:, :, None],
                                other=0.0, cache_modifier=".cg")
                m = tl.where(h_ok, tl.max(lses, 1), 0.0)  # split 0 always has positions (L_b ≥ 1): finite
                w = tl.math.exp2(lses - m[:, None])
                o = tl.sum(w[:, :, None] * parts, 1) / tl.where(h_ok, tl.sum(w, 1), 1.0)[:, None]
                tl.store(o_ptr + b.to(tl.int64) * sob + hh[:, None] * soh + offs_d[None, :] * sod,
                         o.to(o_ptr.dtype.element_ty), mask=h_ok[:, None])


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


_COMBINE_TILE = 16384  # fp32 elements of partials a combine tile holds: 128 registers a thread at 4 warps


def _heads_step(group: int, splits: int, d: int) -> int:
    """Heads a combine tile holds: the whole group where its partials fit ``_COMBINE_TILE``, else fewer (a power
    of 2)."""
    fit = max(1, _COMBINE_TILE // (_next_pow2(splits) * d))
    return min(_next_pow2(group), 1 << (fit.bit_length() - 1))


# The split rule, measured on an H200 (bf16, d 128; benchmarks/decode_grid_gpu.py run 1 of 2026-12-04, in
# docs/results/h200-2026-12-04-decode-grid/, over batch 1-256, 32/32, 32/8, 28/4 and 64/4 heads, 1,000-16,384
# positions; µs below are its medians). Where the (sequence, K/V head) pairs are a quarter of the SMs or fewer (the
# latency regime) the positions are split until the programs fill the SMs once, or twice where a split would pass
# _LONG_SPLIT positions, rounded down to a power of two (the combine's tile is padded to one):
#   1 × 32/8 × 1,024: 16 splits 6.6, 8 7.2; 1 × 32/8 × 16,384: 32 splits 21.9, 16 23.8;
#   1 × 32/32 × 16,384: 8 splits 66.9, 9 (the unrounded 2·132/32) 74.4, 16 76.1.
# Past that (the bandwidth regime) each pair gets ⌊SMs / pairs⌋ splits, at least one. With three splits or more,
# blocks of 64 in 3 stages; with one or two the blocks are what lets every program run in one wave of co-resident
# programs (a second, partial wave runs its programs one to an SM, too few to keep HBM busy):
#   - pairs ≤ SMs: blocks of 128, 3 stages (139 kB, one an SM): 16 × 32/8 × 4,096 (128 pairs) 63.9 µs, 2 splits
#     70.0; 16 × 28/4 × 4,096 (64 pairs, 2 splits) 36.6 against 38.2 in blocks of 64;
#   - up to 3 an SM: blocks of 64, 3 stages (72 kB): 16 × 32/16 × 1,024 (256 pairs) 34.5 against 36.7 in 128s;
#   - up to 5 an SM: blocks of 64, 2 stages: 16 × 32/32 × 1,024 (512 pairs) 64.3 against 68.3 in 128s;
#   - more: blocks of 128 for programs of _LONG_PROGRAM positions or more until 12 an SM (64 × 32/16 × 4,096,
#     1,024 pairs: 477.4 against 492.0 in 64s), else 64 (256 × 28/4 × 1,000, 1,024 pairs: 127.8 against 131.4;
#     256 × 32/8 × 1,000, 2,048 pairs: 242.7 against 247.3).
# (Runs 1, 5 and 6 of 2026-12-04; at 512 pairs 3-stage 64s leave a tail: 64 × 32/8 × 4,096 276.6 against 242.3 in
# 2-stage 64s.)
_LONG_SPLIT = 512  # between the measured 241 positions a split (1 × 4,096: one program an SM faster) and 964
# (1 × 16,384: two faster); lengths in between were not measured
_MIN_SPLIT = 64
_BLOCK_N = 64
_BLOCK_N_FEW_SPLITS = 128
_ONE_WAVE_OF_64S = 3  # programs of 64-position blocks an SM holds at 3 stages (72 kB of the 228)
_ONE_WAVE_OF_SHALLOW_64S = 5  # and at 2 stages
_MANY_PAIRS_PER_SM = 12
_LONG_PROGRAM = 2048  # between the measured 1,000 positions a program (64s faster) and 4,096 (128s faster)
_MAX_SPLITS = 32  # 33 to 64 splits pad the combine's tiles to 64: 1 × 4,096 in 64 splits took 14.85 µs, in 32 10.85
# In the latency regime, at most the splits whose combine takes two tiles of the group's heads (_COMBINE_TILE),
# while a split stays within _LONG_SPLIT positions: a group of 16 at d 128 gets 16 splits (8 heads a tile)
# instead of 32 or 24 (4 heads a tile, 4 rounds through the L2): 1 × 64/4 × 3,000 9.15-9.18 µs against 10.0-10.3
# at 24 splits (SDPA 9.35-9.37); 1 × 64/4 × 4,096 9.87-9.89 against 10.4 at 32 (SDPA 9.35). Larger tiles cost
# more than the rounds they save (16 heads a tile at 32 splits: 16.5 µs at 4,096). (H200,
# benchmarks/attention_lab_gpu.py, docs/results/h200-2026-12-04-attention-34c.)
_COMBINE_ROUNDS = 2


def _floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


# A group of this many query heads or more is split over two programs a split where the rule's programs fill at most
# half the SMs (DecodeConfig.head_slices). Measured on an H200 (bf16, d 128, graph replays, two runs each;
# benchmarks/attention_lab_gpu.py --decode-slices, docs/results/h200-2026-12-05-gluon/slices.log), µs, one slice
# against two at the rule's 16 splits, SDPA beside: 1 × 64/4 × 4,096 9.95/9.91 against 9.12/9.05, SDPA 9.45/9.47;
# 1 × 64/4 × 3,000 9.05/9.10 against 8.23/8.25, SDPA 9.30/9.28. Where the programs fill more (1 × 64/4 × 16,384
# at 32 splits, 16.6 against 19.3-20.3; groups of 4 at 32/8, 128 programs, 10.5 against 12.5) one slice is faster.
_SLICED_GROUP = 16


def decode_config(batch: int, kv_heads: int, max_len: int, block_n: int | None = None, num_warps: int = 4,
                  num_stages: int = 3, programs_per_sm: int | None = None,
                  min_split: int = _MIN_SPLIT, splits: int | None = None,
                  tensor_cores: bool = True, group: int = 0, head_d: int = 128,
                  head_slices: int | None = None) -> DecodeConfig:
    """Splits by the rule above (``splits``, or ``programs_per_sm`` programs on every SM, when given), none
    shorter than ``min_split`` positions, at most ``_MAX_SPLITS``, and in the latency regime at most
    ``_COMBINE_ROUNDS`` combine tiles for ``group`` query heads a K/V head at ``head_d`` (0: the group not
    known, no such cap); every split gets whole blocks and positions (none empty). ``head_slices`` None: by the
    rule, two where the group has 16 query heads or more and the rule's programs fill at most half the SMs
    (:data:`_SLICED_GROUP`), else one."""
    pairs = batch * kv_heads
    sms = sm_count()
    most = max(1, -(-max_len // max(min_split, block_n or _BLOCK_N)))
    if splits is not None:
        want = splits
    elif programs_per_sm is not None:
        want = -(-programs_per_sm * sms // pairs)
    elif 4 * pairs <= sms:
        one = -(-sms // pairs)
        long_split = max_len > _LONG_SPLIT * one
        want = _floor_pow2(-(-(2 if long_split else 1) * sms // pairs))
        while (group and want > 1 and -(-group // _heads_step(group, want, head_d)) > _COMBINE_ROUNDS
               and -(-max_len // (want // 2)) <= _LONG_SPLIT):
            want //= 2
    else:
        want = max(1, sms // pairs)
    splits = max(1, min(want, most, _MAX_SPLITS))
    block, stages = _BLOCK_N, num_stages
    if splits <= 2 and 4 * pairs > sms and block_n is None and num_stages == 3:
        programs = pairs * splits
        long = -(-max_len // splits) >= _LONG_PROGRAM
        if programs <= sms or (long and _ONE_WAVE_OF_SHALLOW_64S * sms < programs < _MANY_PAIRS_PER_SM * sms):
            block = _BLOCK_N_FEW_SPLITS
        elif programs > _ONE_WAVE_OF_64S * sms and programs <= _ONE_WAVE_OF_SHALLOW_64S * sms:
            stages = 2
    elif splits == 1 and block_n is None:
        block = _BLOCK_N_FEW_SPLITS  # a whole sequence in one program: blocks of 128 (64 × 4,096, run 1)
    block = block_n or block
    chunk = triton.cdiv(triton.cdiv(max_len, splits), block) * block  # positions a split, whole blocks
    splits = triton.cdiv(max_len, chunk)
    if head_slices is None:
        head_slices = 2 if group >= _SLICED_GROUP and group % 2 == 0 and 2 * pairs * splits <= sms else 1
    return DecodeConfig(block, splits, num_warps, stages, tensor_cores, head_slices)


_MAX_TABLE_PAD = 512  # page numbers a split holds in registers: 4 int32 a thread at 4 warps


def _table_pad(chunk: int, page: int) -> int:
    """Page numbers a split loads before its loop (a power of two covering its pages, one more where a split
    starts inside a page), or 0 when unpaged or more than ``_MAX_TABLE_PAD``. The tile of the split's own pages
    alone (no page more where the chunk is a multiple of the page: 16 at 1 × 4,096, 64 at 16 × 1,024, 256 at
    16 × 4,096) measured within 1% either way, so not taken: 10.9-11.1 µs against 10.9 (1 × 4,096), 64.7-64.9
    against 64.1-64.2 (16 × 4,096), 64.0-64.4 against 64.4-64.8 (pages of 32) (H200,
    benchmarks/attention_lab_gpu.py, docs/results/h200-2026-12-04-attention-34c/run1.log)."""
    if page == 0:
        return 0
    pad = _next_pow2(-(-chunk // page) + 1)
    return pad if pad <= _MAX_TABLE_PAD else 0


# The paged kernel's page numbers masked by the sequence's length (their load waits for the length's) instead of
# by the split's end and the table's width: slower at every shape measured, 0.1-1.1 µs (1 × 4,096 11.2 against
# 10.9 µs; 16 × 1,024 20.7 against 20.5; 64 × 4,096 241.0-241.8 against 240.6-240.8; run1.log above).
_TABLE_WAITS_LEN = False
# The paged kernel loads K as BLOCK_N × d rows (V's layout) and transposes it for the product, so that a block's
# page numbers are gathered in one layout, not two (tl.gather goes through shared memory: 24 fewer ld.shared and 6
# fewer bar.sync in the sm_90 compile, benchmarks/decode_ir_counts.py). Measured against K as d × BLOCK_N columns
# on an H100 (bf16, d 128, pages of 16 unless named, the rule's config, graph replays, two runs each; outputs
# bit-identical): 16 × 32/8 × 1,024 27.04-27.12 against 27.45-27.49 µs, 16 × 32/8 × 4,096 in pages of 32
# 91.98-91.99 against 92.78-92.90, 1 × 32/8 × 16,384 29.24-29.43 against 29.38-29.57; level (within 0.1 µs) at
# 1 × 64/4 × 4,096 and 16 × 64/4 × 4,096, and never slower by more than that
# (docs/results/h100-2026-12-05-decode/paged-k-rows.log). The contiguous kernel keeps K as columns.
_PAGED_K_ROWS = True


class _Counters:
    """The per-(sequence, K/V head) arrival counters, zero between launches (the last program resets its own)."""

    def __init__(self) -> None:
        self._buf: dict[tuple[str, int], torch.Tensor] = {}

    def get(self, device, n: int) -> torch.Tensor:
        key = (str(device), n)
        if key not in self._buf:
            self._buf[key] = torch.zeros(n, dtype=torch.int32, device=device)
        return self._buf[key]


_COUNTERS = _Counters()


def flash_decoding(q, k, v, lengths, out, config: DecodeConfig | None = None, scratch=None, table=None):
    """o = attention of q (B×h×d) over the first lengths[b] positions of K and V, into ``out``.

    Contiguous (``table`` None): K and V are B×g×L_max×d. Paged: K and V are P×page×g×d (P pages of ``page``
    positions: vLLM's and FlashInfer's NHD layout) and ``table`` (int32, B × pages a sequence) names each sequence's
    pages in order; any strides are read, so a P×g×page×d (HND) view works too when passed as ``k.transpose(1, 2)``.
    """
    b, h, d = q.shape
    if table is None:
        _, g, l_max, _ = k.shape
        k_strides, v_strides = k.stride(), v.stride()  # (sequence, head, position, d)
        page, st_b = 0, 0
        ok = k.shape[0] == b
    else:
        _, page, g, _ = k.shape
        l_max = table.shape[1] * page
        k_strides = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))  # (page, head, slot, d)
        v_strides = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
        st_b = table.stride(0)
        ok = table.shape[0] == b and table.stride(1) == 1 and page & (page - 1) == 0
    if not ok or k.shape[3] != d or v.shape != k.shape or h % g or out.shape != q.shape:
        raise ValueError(f"flash_decoding: q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}"
                         + ("" if table is None else f", table {tuple(table.shape)}"))
    if tuple(lengths.shape) != (b,) or not lengths.is_contiguous():  # the kernel reads lengths[b] at element b
        raise ValueError(f"flash_decoding: lengths must be a contiguous vector of {b}, not {tuple(lengths.shape)} "
                         f"with strides {lengths.stride()}")
    group = h // g
    cfg = config or decode_config(b, g, l_max, group=group, head_d=d)
    if group % cfg.head_slices:
        raise ValueError(f"flash_decoding: {group} query heads a K/V head do not split into {cfg.head_slices} slices")
    per_slice = group // cfg.head_slices
    chunk = triton.cdiv(triton.cdiv(l_max, cfg.splits), cfg.block_n) * cfg.block_n  # per split, whole blocks
    if scratch is None:
        scratch = (torch.empty(b * h * cfg.splits * d, dtype=torch.float32, device=q.device),
                   torch.empty(b * h * cfg.splits, dtype=torch.float32, device=q.device))
    part_o, part_lse = scratch
    counts = _COUNTERS.get(q.device, b * g * cfg.head_slices)
    grid = (cfg.splits, b * g * cfg.head_slices)
    handle = _flash_decode_kernel[grid](
        q, k, v, out, lengths, part_o, part_lse, counts, lengths if table is None else table,
        g, chunk, cfg.splits, LOG2E / math.sqrt(d), st_b, l_max,
        *q.stride(), *k_strides, *v_strides, *out.stride(),
        HEAD_D=d, GROUP=group, GROUP_PAD=max(16 if cfg.tensor_cores else 1, _next_pow2(per_slice)),
        BLOCK_N=cfg.block_n, SLICE=per_slice,
        SPLITS_PAD=_next_pow2(cfg.splits), HEADS_STEP=_heads_step(per_slice, cfg.splits, d),
        ONE_SPLIT=cfg.splits == 1,
        PAGE=page, TABLE_PAD=_table_pad(chunk, page), DOT=cfg.tensor_cores, TABLE_WAITS_LEN=_TABLE_WAITS_LEN,
        K_ROWS=page > 0 and _PAGED_K_ROWS, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return cfg, grid, handle


def decode_candidates(batch: int, kv_heads: int, max_len: int, group: int = 0, head_d: int = 128
                      ) -> list[DecodeConfig]:
    """The rule's config first, then its neighbours, each in one head slice: one and two programs an SM, one split
    more and one fewer, bigger blocks with 8 warps, a deeper pipeline (the last two with the rule's splits for this
    group); and where the (sequence, K/V head) pairs and splits leave more than half the SMs idle and the group has
    8 query heads or more, the rule's config in the other number of slices, one or two (twice the programs)."""
    chosen = decode_config(batch, kv_heads, max_len, group=group, head_d=head_d)
    sliced = []
    if group >= 8 and group % 2 == 0 and 2 * batch * kv_heads * chosen.splits <= sm_count():
        sliced = [replace(chosen, head_slices=1 if chosen.head_slices > 1 else 2)]
    return list(dict.fromkeys([
        chosen, decode_config(batch, kv_heads, max_len, programs_per_sm=1, head_slices=1),
        decode_config(batch, kv_heads, max_len, programs_per_sm=2, head_slices=1),
        decode_config(batch, kv_heads, max_len, splits=chosen.splits + 1, head_slices=1),
        decode_config(batch, kv_heads, max_len, splits=max(1, chosen.splits - 1), head_slices=1),
        decode_config(batch, kv_heads, max_len, block_n=128, num_warps=8, group=group, head_d=head_d, head_slices=1),
        decode_config(batch, kv_heads, max_len, num_stages=4, group=group, head_d=head_d, head_slices=1),
        *sliced,
    ]))


def decode_reference(q, k, v, lengths) -> torch.Tensor:
    """Each sequence's attention over its first lengths[b] positions, in float64 (K/V repeated for the group)."""
    b, h, d = q.shape
    group = h // k.shape[1]
    outs = []
    for i in range(b):
        n = int(lengths[i])
        kk = k[i, :, :n].to(torch.float64).repeat_interleave(group, dim=0)  # h×n×d
        vv = v[i, :, :n].to(torch.float64).repeat_interleave(group, dim=0)
        s = torch.einsum("hd,hnd->hn", q[i].to(torch.float64), kk) / math.sqrt(d)
        outs.append(torch.einsum("hn,hnd->hd", torch.softmax(s, dim=-1), vv))
    return torch.stack(outs)


def make_decode_inputs(batch: int, heads: int, kv_heads: int, lengths: list[int], d: int, dtype: str, device,
                       generator, l_max: int | None = None) -> Inputs:
    t = torch_dtype(dtype)
    l_max = l_max or max(lengths)

    def randn(*size: int) -> torch.Tensor:
        return torch.randn(size, generator=generator, device=device, dtype=torch.float32).to(t)

    return {"q": randn(batch, heads, d), "k": randn(batch, kv_heads, l_max, d),
            "v": randn(batch, kv_heads, l_max, d),
            "lengths": torch.tensor(lengths, dtype=torch.int32, device=device)}


class FlashDecoding(Kernel):
    shape_format = "BxHxKVxLxD"
    dtypes = ("bf16", "fp16", "fp32")
    default_dtype = "bf16"
    # The decode targets (docs/attention.md): 32 query heads over 8 KV heads, d 128; every sequence L
    # positions (the harness' inputs; the tests give a batch of different lengths).
    default_shapes = [(1, 32, 8, 1024, 128), (1, 32, 8, 4096, 128), (1, 32, 8, 16384, 128),
                      (16, 32, 8, 1024, 128), (16, 32, 8, 4096, 128), (64, 32, 8, 4096, 128)]
    interpret_shapes = [(1, 4, 4, 1, 16), (3, 7, 1, 45, 32), (2, 8, 2, 300, 16)]

    def check_shape(self, shape) -> None:
        super().check_shape(shape)
        check_attention_shape(self.name, shape)

    def op(self, shape, dtype) -> Op:
        b, h, g, n, d = shape
        return decode_op(b, h, g, [n] * b, d, dtype)

    def make_inputs(self, shape, dtype, device, generator) -> Inputs:
        b, h, g, n, d = shape
        return make_decode_inputs(b, h, g, [n] * b, d, dtype, device, generator)

    def make_output(self, inputs: Inputs) -> torch.Tensor:
        return torch.empty_like(inputs["q"])

    def config_for(self, shape, dtype) -> DecodeConfig:
        b, h, g, n, d = shape
        return decode_config(b, g, n, group=h // g, head_d=d)

    def candidates(self, shape, dtype, gpu=None) -> list[DecodeConfig]:
        b, h, g, n, d = shape
        return decode_candidates(b, g, n, h // g, d)

    def run(self, inputs: Inputs, out: torch.Tensor, config: DecodeConfig | None = None) -> None:
        q, k = inputs["q"], inputs["k"]
        self._start_run()
        cfg, grid, handle = flash_decoding(q, k, inputs["v"], inputs["lengths"], out,
                                           config or decode_config(q.shape[0], k.shape[1], k.shape[2],
                                                                   group=q.shape[1] // k.shape[1],
                                                                   head_d=q.shape[2]))
        self._record(_flash_decode_kernel, grid, cfg, handle)

    def reference(self, inputs: Inputs) -> torch.Tensor:
        return decode_reference(inputs["q"], inputs["k"], inputs["v"], inputs["lengths"])

    def eager(self, inputs: Inputs) -> torch.Tensor:
        """torch SDPA over the whole cache (the harness' inputs give every sequence L_max positions)."""
        q, k, v = inputs["q"], inputs["k"], inputs["v"]
        o = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v,
                                                             enable_gqa=q.shape[1] != k.shape[1])
        return o[:, :, 0]

    def extra_baselines(self) -> dict:
        return sdpa_backends(self.eager)

    def baseline_note(self, inputs: Inputs) -> str | None:
        q = inputs["q"]
        return picked_backend(q[:, :, None], inputs["k"], inputs["v"], causal=False)

    def tolerance(self, dtype: str) -> float:
        # As flash_attention: tf32 for fp32, P rounded to the 16-bit type before P·V and o stored rounded.
        return {"fp32": 5e-3, "fp16": 1e-2, "bf16": 2e-2}[dtype]


KERNEL = FlashDecoding()
