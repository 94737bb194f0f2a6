"""Attention's memory traffic by kernel: the flash tiling (what crosses the L2 and what reaches HBM) and the naive
three-kernel path, for the measured attention kernels (rooflinectl/kernels/flash_attention.py, flash_decoding.py,
naive_attention.py).

FlashAttention (Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness",
NeurIPS 2022, arXiv:2205.14135) tiles the queries into blocks of B_r rows and streams K and V past each block once;
the S×S scores live only in registers and shared memory. Its Algorithm 1 sizes the blocks from the on-chip memory
M (in elements): B_c = ⌈M/(4d)⌉, B_r = min(⌈M/(4d)⌉, d), and its Theorem 2 counts Θ(N²d²/M) HBM accesses: N/B_r
query blocks each read N·d of K and V, and B_r ∝ M/d. Here:

  query blocks    B_r rows from one SM's shared memory in the GPU spec (the paper's rule, floored to a power of
                  two, which Triton's block shapes must be), or the block a kernel actually uses
  K/V stream      each query block of each query head reads the K and V rows it needs once: all Lk of them, or
                  with a causal mask only the positions up to the block's last query (masked blocks skipped)
  served from     the L2 while one KV head's K and V (2·Lk·d elements, the working set that the blocks of a head
                  share, in flight together because the grid walks one head's query blocks before the next)
                  fit in the L2; then HBM sees Q, K, V and O once. Past the L2 each pass re-reads HBM: the
                  paper's Θ(N²d²/M) regime.

FLOPs as the engine's transformer counts flash attention (transformer.attention_ops): per computed score, 2·d for
QKᵀ and 2·d for PV, plus SOFTMAX_FLOPS_PER_ELEMENT for the online softmax; a causal mask computes S(S+1)/2 scores
per head of S queries over S positions (masked blocks skipped, the diagonal block's masked half not counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...units import dtype_bytes
from .op import SOFTMAX_FLOPS_PER_ELEMENT, Op, matmul_unit
from .primitives import softmax_op


@dataclass(frozen=True)
class AttentionShape:
    """One attention call: ``batch`` sequences of ``q_len`` queries against ``kv_len`` positions, ``heads`` query
    heads sharing ``kv_heads`` K/V heads (GQA: heads/kv_heads query heads per K/V head), head dimension ``d``.
    A causal mask aligns the last query with the last position (q_len ≤ kv_len)."""

    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    d: int
    causal: bool

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "kv_heads", "q_len", "kv_len", "d"):
            if getattr(self, name) < 1:
                raise ValueError(f"attention {name} must be positive, got {getattr(self, name)}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.heads} query heads are not a multiple of {self.kv_heads} KV heads")
        if self.causal and self.q_len > self.kv_len:
            raise ValueError(f"causal attention needs q_len <= kv_len, got {self.q_len} > {self.kv_len}")

    @property
    def scores(self) -> int:
        """Scores computed per (sequence, query head): T·Lk, or under a causal mask the unmasked ones only,
        T·(Lk − T) + T(T+1)/2 (the same rule as transformer.scores_computed)."""
        t, lk = self.q_len, self.kv_len
        return t * (lk - t) + t * (t + 1) // 2 if self.causal else t * lk


def floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def paper_block_q(smem_bytes: int, d: int, dtype: str) -> int:
    """B_r of FlashAttention's Algorithm 1, min(⌈M/(4d)⌉, d) for M elements of on-chip memory, floored to a power of
    two. An H200 (228 KiB of shared memory per SM, bf16: M = 116,736): ⌈116,736/512⌉ = 228 → 128 at d = 128."""
    m_elements = int(smem_bytes // dtype_bytes(dtype))
    b_c = -(-m_elements // (4 * d))
    return floor_pow2(min(b_c, d))


@dataclass(frozen=True)
class FlashTiling:
    """How a flash kernel's K/V traffic splits between the L2 and HBM (see the module docstring)."""

    block_q: int
    query_blocks: int  # per (sequence, query head)
    kv_positions_streamed: int  # per (sequence, query head): Σ over query blocks of the K/V rows read
    stream_bytes: int  # K and V bytes streamed into the SMs, all heads and sequences
    working_set_bytes: int  # K and V of one KV head of one sequence
    l2_bytes: int
    served_from: Literal["l2", "hbm"]
    hbm_kv_bytes: int  # K and V bytes read from HBM


def flash_tiling(s: AttentionShape, dtype: str, *, l2_bytes: int, block_q: int) -> FlashTiling:
    """The K/V stream of a flash kernel with query blocks of ``block_q`` rows on a GPU with ``l2_bytes`` of L2."""
    e = int(dtype_bytes(dtype))  # whole bytes: the attention kernels take bf16, fp16, fp32
    t, lk = s.q_len, s.kv_len
    blocks = -(-t // block_q)
    if s.causal:
        # Block i holds queries [i·B_r, min((i+1)·B_r, T)); its last query sees positions up to Lk − T + its index.
        streamed = sum(min(lk, lk - t + min((i + 1) * block_q, t)) for i in range(blocks))
    else:
        streamed = blocks * lk
    kv_row = 2 * s.d * e  # one position of K and of V
    stream = s.batch * s.heads * streamed * kv_row
    working = lk * kv_row
    once = s.batch * s.kv_heads * lk * kv_row
    fits = working <= l2_bytes
    return FlashTiling(
        block_q=block_q,
        query_blocks=blocks,
        kv_positions_streamed=streamed,
        stream_bytes=stream,
        working_set_bytes=working,
        l2_bytes=l2_bytes,
        served_from="l2" if fits else "hbm",
        hbm_kv_bytes=once if fits else stream,
    )


def flash_attention_op(s: AttentionShape, dtype: str, tiling: FlashTiling) -> Op:
    """One fused attention kernel: reads Q (B·h·T·d) and writes O (the same), reads K and V as ``tiling`` says
    (once when a KV head's K and V fit in the L2); s.scores·(4d + 5) FLOPs per (sequence, head) on the tensor
    cores (the exps on the SFU and the rest on the vector units are folded in, as transformer.attention_ops does)."""
    e = dtype_bytes(dtype)
    q_bytes = s.batch * s.heads * s.q_len * s.d * e
    n_scores = s.batch * s.heads * s.scores
    return Op(
        name="attention",
        kind="attention",
        flops=n_scores * (4 * s.d + SOFTMAX_FLOPS_PER_ELEMENT),
        bytes=2 * q_bytes + tiling.hbm_kv_bytes,
        unit=matmul_unit(dtype),
        dtype=dtype,
        reads=(f"Q, K and V ({s.kv_len} positions × {s.kv_heads} KV heads; each query block streams "
               f"{tiling.stream_bytes:,} B of K/V from the {tiling.served_from.upper()})"),
        writes=f"O {s.batch}×{s.heads}×{s.q_len}×{s.d}",
        computes=f"{n_scores:,} scores on chip in blocks of {tiling.block_q} queries; no score touches HBM",
        kv_bytes=tiling.hbm_kv_bytes,
    )


def decode_op(batch: int, heads: int, kv_heads: int, lengths: list[int], d: int, dtype: str) -> Op:
    """Flash-decoding: one query token per sequence against its cache of ``lengths[b]`` positions. Reads q
    (B·h·d), K and V (Σ_b L_b·g·d each, once: a program holds a GQA group's h/g query heads), writes o (B·h·d);
    per head L_b·(4d + 5) FLOPs. The split partials (fp32 o and log-sum-exp per split) are not counted: they are
    a few KB per sequence, written and read back through the L2."""
    e = dtype_bytes(dtype)
    positions = sum(lengths)
    q_bytes = batch * heads * d * e
    kv = 2 * positions * kv_heads * d * e
    n_scores = heads * positions
    return Op(
        name="attention",
        kind="attention",
        flops=n_scores * (4 * d + SOFTMAX_FLOPS_PER_ELEMENT),
        bytes=2 * q_bytes + kv,
        unit=matmul_unit(dtype),
        dtype=dtype,
        reads=f"q {batch}×{heads}×{d}, K and V of {positions:,} positions × {kv_heads} KV heads, once",
        writes=f"o {batch}×{heads}×{d}",
        computes=f"{n_scores:,} scores, split along the positions and combined by log-sum-exp",
        kv_bytes=kv,
    )


def naive_attention_ops(s: AttentionShape, dtype: str) -> list[Op]:
    """The three-kernel path, as transformer.attention_ops counts naive attention: qk writes the full
    B·h·T·Lk scores (masked ones too, as −inf), softmax reads and writes them, pv reads them again.
    K and V are read once per query head here (each (sequence, head) is its own batched matmul, the group's
    heads served from the L2 only as far as it holds them; counted once per KV head, the engine's rule)."""
    e = dtype_bytes(dtype)
    n = s.batch * s.heads * s.q_len * s.kv_len
    q_bytes = s.batch * s.heads * s.q_len * s.d * e
    k_bytes = s.batch * s.kv_heads * s.kv_len * s.d * e
    unit = matmul_unit(dtype)
    return [
        Op(name="qk", kind="attention", flops=2 * n * s.d, bytes=q_bytes + k_bytes + n * e, unit=unit, dtype=dtype,
           reads="Q, K", writes=f"scores {s.batch}×{s.heads}×{s.q_len}×{s.kv_len}",
           computes=f"2·d FLOPs per score, {n:,} scores (the full T×Lk, masked or not)", kv_bytes=k_bytes),
        softmax_op("softmax", s.batch * s.heads * s.q_len, s.kv_len, dtype),
        Op(name="pv", kind="attention", flops=2 * n * s.d, bytes=n * e + k_bytes + q_bytes, unit=unit, dtype=dtype,
           reads="P, V", writes=f"O {s.batch}×{s.heads}×{s.q_len}×{s.d}",
           computes=f"2·d FLOPs per score, {n:,} scores", kv_bytes=k_bytes),
    ]


def summed(name: str, ops: list[Op]) -> Op:
    """Several kernels' ops as one op (a path of kernels measured as one call): FLOPs and bytes added."""
    first = ops[0]
    return Op(
        name=name, kind=first.kind, flops=sum(o.flops for o in ops), bytes=sum(o.bytes for o in ops),
        unit=first.unit, dtype=first.dtype, reads="; ".join(o.reads for o in ops),
        writes="; ".join(o.writes for o in ops), computes="; ".join(f"{o.name}: {o.computes}" for o in ops),
        kv_bytes=sum(o.kv_bytes for o in ops),
    )
