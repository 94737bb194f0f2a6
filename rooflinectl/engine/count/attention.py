"""The attention core of one layer, full or through a sliding window: which KV positions a step reads, how many
scores it computes, and the ops (naive: qk, softmax, pv; flash: one kernel). The rest of the block (projections,
RoPE, the KV write) is built in ``engine.count.transformer``.

Notation as in transformer.py: B batch, T new tokens per sequence, Lk the positions attended (the new tokens the
last T of them), h heads, g KV heads, d head dim, W a sliding layer's window.

A sliding (local) layer's query at position p attends to positions max(0, p − W + 1) … p: min(p + 1, W) of
them (Mistral's, Gemma's and gpt-oss's window, transformers' ``sliding_window`` mask). Its ops are named with
``_local`` (``attention_local``; naive ``qk_local``, ``softmax_local``, ``pv_local``), so that a model with both
kinds shows each with its own count.

- KV read: the T queries of a step together see positions Lk − T − W + 1 … Lk − 1, so a sliding layer reads
  min(Lk, W + T − 1) positions of K and V (decode: min(context, W)); a full layer reads Lk.
- Scores, causal flash: query i (1-based position j = Lk − T + i) computes min(j, W) scores. With
  F(n) = Σ_{j=1}^{n} min(j, W) = n·(n + 1)/2 for n ≤ W, and W·(W + 1)/2 + (n − W)·W beyond, a sequence's T
  queries compute F(Lk) − F(Lk − T) per head: F(S) for a prefill of S tokens, min(Lk, W) for a decode step.
  Without a window (W = ∞) this is the full causal count T·(Lk − T) + T·(T + 1)/2.
- Naive attention computes the full T × (positions read) score matrix, mask or not (as for full layers).
- A chunked (local) layer (Llama 4's chunked attention, chunk C): the query at position p attends to positions
  ⌊p/C⌋·C … p, the (p mod C) + 1 of its own chunk. Its ops are named with ``_chunked``. KV read: the T queries
  together see ⌊(Lk − T)/C⌋·C … Lk − 1, Lk − ⌊(Lk − T)/C⌋·C positions (decode: (Lk − 1) mod C + 1). Scores,
  causal flash: G(Lk) − G(Lk − T) per head, G(n) = Σ_{p=0}^{n−1} (p mod C + 1) = q·C(C + 1)/2 + r(r + 1)/2 for
  n = q·C + r. KV held: min(positions, C), the most a sequence has held in that layer: the blocks of a chunk
  already passed are freed when the next one starts (vLLM's hybrid KV-cache manager, its chunked local
  attention spec), but a chunk's C positions stay held until it ends, so a cache is planned for C of them.
- Attention sinks (gpt-oss): one learned logit per head in each softmax's denominator: per (query, head) row one
  compare into the row max, one subtract, one exp and one add into the sum (SINK_FLOPS_PER_ROW), and the h
  logits read once per layer (weight bytes, in ``dtype``).
- Logit soft-capping (Gemma 2's attn_logit_softcapping): cap·tanh(score/cap) on every score computed,
  SOFTCAP_FLOPS_PER_ELEMENT each, on chip in flash and inside the softmax kernel in naive (it reads the scores
  anyway).
- A step of several groups of sequences (a mixed step: decodes beside a prefill chunk) runs each attention op as
  one kernel over all of them, as a serving engine's variable-length kernel does: its FLOPs, activations and KV
  reads are the sum of each group's by the rules above (T, Lk the group's own), and what it reads once per
  kernel (the sink logits) is read once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from ...specs.step import Seqs, seqs_text
from ...specs.workload import Workload
from ...units import dtype_bytes
from .op import SOFTCAP_FLOPS_PER_ELEMENT, AttentionShape, Op
from .primitives import flash_attention_op, score_matmul_op, softmax_op

# A sink's work per softmax row (one query of one head): compare into the row max, subtract the max, exp, add
# into the denominator. The sink adds no score to P and nothing to PV.
SINK_FLOPS_PER_ROW = 4


def span_of(w: Workload, attention: str) -> tuple[int | None, int | None]:
    """(window, chunk) of a layer whose attention is ``attention`` (full, sliding or chunked): the model's
    ``sliding_window`` for a sliding layer, its ``attention_chunk_size`` for a chunked one, None otherwise."""
    m = w.model
    return (m.sliding_window if attention == "sliding" else None,
            m.attention_chunk_size if attention == "chunked" else None)


def positions_read(g: Seqs, window: int | None, chunk: int | None = None) -> int:
    """KV positions per sequence a group's T queries read: Lk, min(Lk, W + T − 1) through a window W, or
    Lk − ⌊(Lk − T)/C⌋·C in chunks of C (from the chunk of the first new token on)."""
    lk = g.positions
    if chunk is not None:
        return lk - (lk - g.new) // chunk * chunk
    return lk if window is None else min(lk, window + g.new - 1)


def _chunked_prefix(n: int, chunk: int) -> int:
    """G(n) = Σ_{p=0}^{n−1} (p mod C + 1): the scores of the queries at positions 0 … n − 1 in chunks of C."""
    whole, rest = divmod(n, chunk)
    return whole * chunk * (chunk + 1) // 2 + rest * (rest + 1) // 2


def _causal_prefix(n: int, window: int) -> int:
    """F(n) = Σ_{j=1}^{n} min(j, W): the scores of the queries at positions 1 … n (1-based) through window W."""
    if n <= window:
        return n * (n + 1) // 2
    return window * (window + 1) // 2 + (n - window) * window


def group_scores(g: Seqs, causal: bool, causal_skip: bool, window: int | None = None,
                 chunk: int | None = None) -> int:
    """Attention scores per (sequence, head) of one group. Without ``causal_skip`` (naive) or without a causal
    mask: T × the positions read. Causal with skip (flash): the unmasked ones, F(Lk) − F(Lk − T) (module
    docstring), which is T·(Lk − T) + T·(T + 1)/2 without a window; in chunks, G(Lk) − G(Lk − T)."""
    t, lk = g.new, g.positions
    if not (causal_skip and causal):
        return t * positions_read(g, window, chunk)
    if chunk is not None:
        return _chunked_prefix(lk, chunk) - _chunked_prefix(lk - t, chunk)
    if window is None:
        return t * (lk - t) + t * (t + 1) // 2
    return _causal_prefix(lk, window) - _causal_prefix(lk - t, window)


def scores_computed(w: Workload, causal_skip: bool, window: int | None = None, chunk: int | None = None) -> int:
    """Attention scores per (sequence, head) of a preset step's one group (:func:`group_scores`)."""
    return group_scores(w.uniform, w.causal, causal_skip, window, chunk)


def positions_held(positions: int, window: int | None, chunk: int | None = None, block_size: int = 1) -> int:
    """KV positions one sequence of ``positions`` holds in a layer, kept in whole blocks of ``block_size``
    positions (1: each position on its own, as ``analyze`` counts; a paged cache: ``--block-size``). With
    k = ⌈positions / b⌉ blocks of its positions (b the block size):

    - a full layer holds all k of them: k·b positions;
    - a sliding layer holds at most the blocks its window can span: W positions that start anywhere in a block
      span at most ⌈(W − 1)/b⌉ + 1 blocks, so min(k, ⌈(W − 1)/b⌉ + 1)·b positions (min(positions, W) when b is
      1: a ring buffer of W slots). Source: vLLM's hybrid KV cache manager frees each block that lies wholly
      before position c − W + 1 once a request has computed c positions (``SlidingWindowManager
      .remove_skipped_blocks``) and plans ⌈(W − 1 + T)/b⌉ + 1 blocks a request for T new tokens a step
      (``SlidingWindowSpec``: the + 1 for a window that does not start at a block's start); SGLang's
      sliding-window pool frees, in whole pages, the positions more than W and a page behind
      (``ScheduleBatch._evict_swa``, every few decode steps), about a page more than this. vLLM's count is one
      block below this one at one length in b (where the window starts a block); this is the most a sequence
      holds at any length past the window, what the paged pool plans for (``serving.kvcache``). Not counted: a
      prompt chunk of T tokens holds, for its step, up to T − 1 positions more than this in each sliding layer
      (its own, written before the window moves past them);
    - a chunked layer holds at most the blocks of one chunk: its C positions start at a multiple of C, so they
      span at most ⌈(C + b − gcd(C, b))/b⌉ blocks (C/b where b divides C), min(k, that)·b positions
      (min(positions, C) when b is 1): vLLM's chunked local attention frees the blocks before the current
      chunk's start, and a chunk's C positions are planned for whole (module docstring).

    The assumption: positions that left the window, or whose chunk has passed, are not kept."""
    blocks = -(-positions // block_size)
    if chunk is not None:
        blocks = min(blocks, -(-(chunk + block_size - math.gcd(chunk, block_size)) // block_size))
    elif window is not None:
        blocks = min(blocks, -(-(window - 1) // block_size) + 1)
    return blocks * block_size


def kv_positions_held(w: Workload, window: int | None) -> int:
    """KV positions one sequence of a preset step holds in a layer (:func:`positions_held` of its kv_len)."""
    return positions_held(w.kv_len, window)


def summed(ops: list[Op], reads: str, writes: str, computes: str) -> Op:
    """One kernel over several groups' work (each group's op built alone, in the same order): FLOPs, bytes and
    KV bytes add up; weights are read once by the kernel, so ``weight_bytes`` is one group's (the largest)."""
    weights = max(op.weight_bytes for op in ops)
    extra_weights = sum(op.weight_bytes for op in ops) - weights
    return replace(ops[0], flops=sum(op.flops for op in ops), bytes=sum(op.bytes for op in ops) - extra_weights,
                   kv_bytes=sum(op.kv_bytes for op in ops), weight_bytes=weights, reads=reads, writes=writes,
                   computes=computes)


def by_group(w: Workload, build: Callable[[Workload], list[Op]], what: str) -> list[Op]:
    """``build``'s attention ops for a step of several groups: each op of each group built alone (the rules of a
    preset step), then each op summed over the groups into one kernel (:func:`summed`); a step of one group is
    built as it is."""
    if len(w.seqs) == 1:
        return build(w)
    parts = [build(w.with_seqs((g,))) for g in w.seqs]
    groups = f"{len(w.seqs)} groups ({seqs_text(w.seqs)})"
    ops = [summed([p[i] for p in parts], reads=f"{what} of each of {groups}", writes="its output for each group",
                  computes=f"one kernel over {groups}, each group's work counted as a step of its own")
           for i in range(len(parts[0]))]
    # The kernel's shape is every group's; a softmax over groups of different lengths is no one rows × width.
    return [replace(op, tensor=None, attention=replace(op.attention, groups=w.seqs) if op.attention else None)
            for op in ops]


def attention_ops(w: Workload, window: int | None = None, chunk: int | None = None) -> list[Op]:
    """The attention core of one layer: qk, softmax, pv (naive) or one fused attention kernel (flash); through
    ``window`` (a sliding layer) each named with ``_local``, in chunks of ``chunk`` with ``_chunked``. A mixed
    step: one kernel each over all its groups."""
    return by_group(w, lambda one: _group_attention_ops(one, window, chunk), "the inputs")


def _group_attention_ops(w: Workload, window: int | None, chunk: int | None = None) -> list[Op]:
    """:func:`attention_ops` of a step of one group."""
    m = w.model
    g = w.uniform
    b, t, d = g.count, g.new, m.head_dim
    lk = positions_read(g, window, chunk)
    suffix = "_chunked" if chunk is not None else "" if window is None else "_local"
    where = f"{lk} positions" + ("" if window is None else f" (window {window})") \
        + ("" if chunk is None else f" (chunks of {chunk})")
    a, kv = dtype_bytes(w.dtype), dtype_bytes(w.kv_dtype)
    q_bytes = b * t * m.q_dim * a  # Q in, and O out, both N×h·d
    k_bytes = b * lk * m.kv_dim * kv  # K (and likewise V) of every KV head, read once
    rows = b * m.num_heads * t  # softmax rows: one per query and head
    sink_flops = SINK_FLOPS_PER_ROW * rows if m.attention_sinks else 0
    sink_bytes = m.num_heads * a if m.attention_sinks else 0
    cap = SOFTCAP_FLOPS_PER_ELEMENT if m.attn_logit_softcapping is not None else 0
    extras = (", sinks" if m.attention_sinks else "") + (", soft-capped scores" if cap else "")
    shape = AttentionShape(m.num_heads, m.num_kv_heads, d, d, window, w.causal, w.seqs, "flash", chunk)
    if w.attention == "flash":
        s = b * m.num_heads * scores_computed(w, causal_skip=True, window=window, chunk=chunk)
        flash = flash_attention_op(
            "attention" + suffix, s, d, d, q_bytes, 2 * k_bytes, q_bytes, w.dtype,
            reads=f"Q, K, V (K, V: {where} × {m.num_kv_heads} KV heads, {w.kv_dtype})"
                  + (f", {m.num_heads} sink logits" if m.attention_sinks else ""),
            writes=f"O {w.tokens}×{m.q_dim}",
            computes=f"{s:,} scores on chip: QKᵀ, online softmax, PV; no score touches HBM{extras}",
            attention=shape)
        # A soft cap on each score, the sinks on each row, and the sink logits read once.
        return [replace(flash, flops=flash.flops + cap * s + sink_flops, bytes=flash.bytes + sink_bytes,
                        weight_bytes=sink_bytes)]
    s = b * m.num_heads * scores_computed(w, causal_skip=False, window=window, chunk=chunk)
    score_bytes = s * a
    softmax = softmax_op("softmax" + suffix, rows, lk, w.dtype, attention=replace(shape, part="softmax"))
    if sink_flops or cap:
        softmax = replace(softmax, flops=softmax.flops + sink_flops + cap * s, bytes=softmax.bytes + sink_bytes,
                          weight_bytes=sink_bytes, computes=softmax.computes + extras)
    return [
        score_matmul_op("qk" + suffix, s, d, q_bytes, k_bytes, score_bytes, w.dtype,
                        reads=f"Q {w.tokens}×{m.q_dim}, K {where}×{m.kv_dim} per sequence",
                        writes=f"scores {b}×{m.num_heads}×{t}×{lk}",
                        computes=f"2·d FLOPs per score, {s:,} scores (the full T×Lk, masked or not)",
                        attention=replace(shape, part="qk")),
        softmax,
        score_matmul_op("pv" + suffix, s, d, score_bytes, k_bytes, q_bytes, w.dtype,
                        reads=f"P {b}×{m.num_heads}×{t}×{lk}, V {where}×{m.kv_dim} per sequence",
                        writes=f"O {w.tokens}×{m.q_dim}",
                        computes=f"2·d FLOPs per score, {s:,} scores", attention=replace(shape, part="pv")),
    ]
