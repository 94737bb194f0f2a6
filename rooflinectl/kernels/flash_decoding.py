"""flash_decoding: one new query token per sequence against its KV cache, split along the positions.

Shapes: q and o are B×h×d, the caches K and V B×g×L_max×d, ``lengths`` (int32, B) the positions each sequence
has (1 ≤ L_b ≤ L_max). One program takes one K/V head of one sequence and one split of its positions, and holds
all h/g query heads of the group as the rows of one tile (padded to 16 for tl.dot), so each K/V block is loaded
once for the whole group. It writes its split's fp32 partial output (normalized) and log-sum-exp; the last program
of a (sequence, K/V head) to finish (an atomic counter, acquire/release) combines the splits by log-sum-exp and
writes o, and resets the counter: one launch, no second reduction kernel, no program ever waits on another.
Splitting along the positions lets batch 1 fill every SM (Dao, Haziza, Massa, Sizov, "Flash-Decoding for
long-context inference", PyTorch blog, 2023).

Reads q, K and V (Σ_b L_b positions, once), writes o; the partials (B·h·splits·(d + 1) fp32) go through the L2.
Plain pointer arithmetic, so that triton 3.6, 3.9 and the interpreter run the same code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton  # type: ignore[import-untyped]  # triton ships no type information
import triton.language as tl  # type: ignore[import-untyped]

from ..engine.attention_io import decode_op
from ..engine.op import Op
from .base import Inputs, Kernel, sm_count, torch_dtype
from .flash_attention import LOG2E, check_attention_shape, picked_backend, sdpa_backends

_NEG_INF = float("-inf")


@dataclass(frozen=True)
class DecodeConfig:
    block_n: int  # positions per K/V block
    splits: int  # programs per (sequence, K/V head)
    num_warps: int
    num_stages: int


@triton.jit
def _flash_decode_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, len_ptr, part_o_ptr, part_lse_ptr, count_ptr,
    n_kv_heads, chunk, n_splits, qk_scale,
    sqb, sqh, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sob, soh, sod,
    HEAD_D: tl.constexpr, GROUP: tl.constexpr, GROUP_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLITS_PAD: tl.constexpr, ONE_SPLIT: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(0)
    bk = tl.program_id(1)
    b = bk // n_kv_heads
    kvh = bk - b * n_kv_heads
    n_ctx = tl.load(len_ptr + b)
    start = split * chunk
    stop = tl.minimum(start + chunk, n_ctx)

    rows = tl.arange(0, GROUP_PAD)
    offs_d = tl.arange(0, HEAD_D)
    heads = kvh * GROUP + rows
    row_ok = rows < GROUP
    q = tl.load(q_ptr + b.to(tl.int64) * sqb + heads[:, None] * sqh + offs_d[None, :] * sqd,
                mask=row_ok[:, None], other=0.0)
    k_base = k_ptr + b.to(tl.int64) * skb + kvh.to(tl.int64) * skh
    v_base = v_ptr + b.to(tl.int64) * svb + kvh.to(tl.int64) * svh

    m_i = tl.full([GROUP_PAD], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([GROUP_PAD], dtype=tl.float32)
    acc = tl.zeros([GROUP_PAD, HEAD_D], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    # Reads BLOCK_N×d of K and of V a step, 4·group·BLOCK_N·d FLOPs (the padded rows compute zeros, unstored).
    for n0 in tl.range(start, stop, BLOCK_N):
        cols = n0 + offs_n
        keep = cols < stop
        k = tl.load(k_base + cols[None, :].to(tl.int64) * skn + offs_d[:, None] * skd, mask=keep[None, :],
                    other=0.0)
        v = tl.load(v_base + cols[:, None].to(tl.int64) * svn + offs_d[None, :] * svd, mask=keep[:, None],
                    other=0.0)
        qk = tl.dot(q, k) * qk_scale
        qk = tl.where(keep[None, :], qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))  # the block's first column is kept: finite
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
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
        done = tl.atomic_add(count_ptr + bk, 1, sem="acq_rel") + 1
        if done == n_splits:
            tl.atomic_xchg(count_ptr + bk, 0)  # ready for the next launch
            # One head at a time, unrolled, each head's log-sum-exps and partial outputs loaded as one tile
            # (SPLITS_PAD×d): independent loads, issued together. A loop over the splits, a load each, cost an L2 round
            # trip a split: at 1×16,384 positions 69.1 µs with 128 splits against 41.2 with 64 (H200, docs/results/
            # h200-2026-12-03-attention/bench/run1); with the tile, 64 splits took 33.5 µs (run2-decode).
            sp = tl.arange(0, SPLITS_PAD)
            sp_ok = sp < n_splits
            for r in tl.static_range(GROUP):
                head = kvh * GROUP + r
                base = (b.to(tl.int64) * n_kv_heads * GROUP + head) * n_splits
                lses = tl.load(part_lse_ptr + base + sp, mask=sp_ok, other=-float("inf"), cache_modifier=".cg")
                parts = tl.load(part_o_ptr + (base + sp)[:, None] * HEAD_D + offs_d[None, :], mask=sp_ok[:, None],
                                other=0.0, cache_modifier=".cg")
                m = tl.max(lses, 0)  # split 0 always has positions (L_b ≥ 1): finite
                w = tl.math.exp2(lses - m)
                o = tl.sum(w[:, None] * parts, 0) / tl.sum(w, 0)
                tl.store(o_ptr + b.to(tl.int64) * sob + head * soh + offs_d * sod, o.to(o_ptr.dtype.element_ty))


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# Programs aimed at per SM, the fewest positions a split takes, the block. Measured on an H200, bf16, 32/8 heads,
# d 128 (benchmarks/attention_gpu.py, docs/results/h200-2026-12-03-attention/bench/run4-decode): one program an SM
# was the fastest or within 2% from batch 16 up (16×1,024: 2 splits 23.2 µs against 26.8 with 3 and 29.2 with 4;
# 16×4,096: 69.1 against 72.7-75.7; 16×16,384: 246.6 against 251.4-261.8), and the same at batch 1 × 1,024 and
# 4,096 (4 and 16 splits: 10.9 and 14.0 µs); at 1 × 16,384 it gives 17 splits, 33.7 µs, against 29.0 with 33
# (2 programs an SM), not taken. A single split reads its sequence in blocks of 128: 64×4,096 took 245.3 µs
# against 276.2 with blocks of 64; with several splits blocks of 64 were faster (16×4,096: 69.1 against 74.6).
_PROGRAMS_PER_SM = 1
_MIN_SPLIT = 256
_BLOCK_N = 64
_BLOCK_N_ONE_SPLIT = 128
_MAX_SPLITS = 64  # the combine holds SPLITS_PAD×d fp32 of partials a head


def decode_config(batch: int, kv_heads: int, max_len: int, block_n: int | None = None, num_warps: int = 4,
                  num_stages: int = 3, programs_per_sm: int = _PROGRAMS_PER_SM,
                  min_split: int = _MIN_SPLIT) -> DecodeConfig:
    """Splits enough for ``programs_per_sm`` programs on every SM, none shorter than ``min_split`` positions."""
    want = -(-programs_per_sm * sm_count() // (batch * kv_heads))
    most = max(1, -(-max_len // max(min_split, block_n or _BLOCK_N)))
    splits = max(1, min(want, most, _MAX_SPLITS))
    block = block_n or (_BLOCK_N_ONE_SPLIT if splits == 1 else _BLOCK_N)
    return DecodeConfig(block, splits, num_warps, num_stages)


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


def flash_decoding(q, k, v, lengths, out, config: DecodeConfig | None = None, scratch=None):
    """o = attention of q (B×h×d) over the first lengths[b] positions of K, V (B×g×L_max×d), into ``out``."""
    b, h, d = q.shape
    _, g, l_max, _ = k.shape
    if k.shape[0] != b or k.shape[3] != d or v.shape != k.shape or h % g or out.shape != q.shape:
        raise ValueError(f"flash_decoding: q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}")
    group = h // g
    cfg = config or decode_config(b, g, l_max)
    chunk = triton.cdiv(triton.cdiv(l_max, cfg.splits), cfg.block_n) * cfg.block_n  # per split, whole blocks
    if scratch is None:
        scratch = (torch.empty(b * h * cfg.splits * d, dtype=torch.float32, device=q.device),
                   torch.empty(b * h * cfg.splits, dtype=torch.float32, device=q.device))
    part_o, part_lse = scratch
    counts = _COUNTERS.get(q.device, b * g)
    grid = (cfg.splits, b * g)
    handle = _flash_decode_kernel[grid](
        q, k, v, out, lengths, part_o, part_lse, counts, g, chunk, cfg.splits, LOG2E / math.sqrt(d),
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        HEAD_D=d, GROUP=group, GROUP_PAD=max(16, _next_pow2(group)), BLOCK_N=cfg.block_n,
        SPLITS_PAD=_next_pow2(cfg.splits), ONE_SPLIT=cfg.splits == 1, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return cfg, grid, handle


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
    # Issue 17's decode targets: 32 query heads over 8 KV heads, d 128; every sequence L positions (the harness'
    # inputs; the tests give a batch of different lengths).
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
        b, _, g, n, _ = shape
        return decode_config(b, g, n)

    def candidates(self, shape, dtype, gpu=None) -> list[DecodeConfig]:
        b, _, g, n, _ = shape
        return list(dict.fromkeys([self.config_for(shape, dtype), decode_config(b, g, n, programs_per_sm=2),
                                   decode_config(b, g, n, block_n=128, num_warps=8),
                                   decode_config(b, g, n, min_split=128, block_n=32)]))

    def run(self, inputs: Inputs, out: torch.Tensor, config: DecodeConfig | None = None) -> None:
        q, k = inputs["q"], inputs["k"]
        self._start_run()
        cfg, grid, handle = flash_decoding(q, k, inputs["v"], inputs["lengths"], out,
                                           config or decode_config(q.shape[0], k.shape[1], k.shape[2]))
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
