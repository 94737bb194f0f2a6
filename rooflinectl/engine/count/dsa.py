"""DeepSeek Sparse Attention (DeepSeek-V3.2-Exp): the lightning indexer's ops and the positions the sparse
attention then reads, each op's FLOPs and HBM bytes stated beside its code. ``engine.count.mla`` builds an MLA
block with these where the model has ``Model.sparse_attention``.

Notation as in ``engine.count.mla`` (N tokens, H hidden, r_q q_lora_rank, d_r qk_rope_head_dim, a the bytes of
``dtype``), and the indexer's sizes (``specs.dsa.SparseAttention``): h_I ``index_n_heads``, d_I ``index_head_dim``,
K ``index_topk``; c = ``key_bytes_per_token`` the cached bytes of one index key (d_I fp8 values and an fp32 scale
per 128: 132 for DeepSeek-V3.2-Exp). Source of the structure: DeepSeek-V3.2-Exp's paper, section 2.1, its
inference/model.py (Indexer), and transformers' ``DeepseekV32Indexer``; the kernels as vLLM and SGLang run them
(DeepGEMM's fp8 MQA logits, a top-k kernel, FlashMLA's sparse kernels).

Per layer, after MLA's q_a_norm (count 1):
  index_k_proj         N×H · H×d_I: one index key a token (attn_norm in its prologue with norm_linear)
  index_weights_proj   N×H · H×h_I: each index head's weight for its token (likewise)
  index_q_proj         N×r_q · r_q×h_I·d_I: the index queries, from MLA's normed Q latent
  index_k_norm         LayerNorm N×d_I (a gain and a bias)
  index_rope           RoPE on the first d_r of each index query (N×h_I×d_r) and key (N×d_r)
  index_k_write        each new key cast to fp8 with its scales, into the index cache: reads N×d_I in dtype,
                       writes N·c bytes
  index_score          (kind indexer) each query against every position it sees: for each of h_I heads a d_I-wide
                       dot product, ReLU, times the head's weight, summed over heads, (2·d_I + 3)·h_I FLOPs a
                       (query, position) pair, multiplied in dtype; reads Q (N×h_I×d_I), the weights (N×h_I,
                       fp32) and the index cache of every sequence once (B·Lk·c), writes one fp32 score a pair
  index_topk           (kind indexer) each query's top min(seen, K) positions: reads its scores, writes their
                       int32 ids; one compare a score (TOPK_SELECT_FLOPS_PER_ELEMENT)
then MLA's absorbed form over the selected positions alone (``selected_positions``): decode reads
B·min(Lk, K) latent rows, whatever the context past K; the indexer's score and key-cache read grow with Lk.

Rules beyond engine.count.mla's (docs/design.md, "DeepSeek Sparse Attention", says why each):
- The pairs a causal step scores are those its queries see (a prompt's query i sees P + i positions, as
  DeepGEMM's logits kernel takes each query's range); a non-causal step's, every position.
- Every phase runs MLA's absorbed form (vLLM's and SGLang's sparse MLA backends run prefill in it too: the
  sparse kernels take the latent and the selected ids), so kv_b_proj never expands the latent.
- The sparse kernel reads each query's selected latent rows and their ids: a decode reads its sequence's
  min(Lk, K) rows once for all heads; a prompt's queries each read their own (overlaps between queries hit L2 at
  best: the count is the HBM traffic of a kernel that does not share them).
- The score's matmul runs at the activations' type, the fp8 keys widened on chip (engine.count.transformer's
  rule for a narrower cache; transformers' DeepseekV32Indexer computes in bf16). DeepSeek's and vLLM's kernels
  (DeepGEMM's fp8 MQA logits) quantize the queries and multiply in fp8, a roof twice as high where a GPU has one;
  the decode indexer is memory-bound either way.
- Naive attention (scores through HBM) has no sparse form: a workload refuses it.
"""

from __future__ import annotations

from ...specs.dsa import SparseAttention
from ...specs.step import Seqs
from ...specs.workload import Workload
from ...units import dtype_bytes
from .attention import by_group, group_scores
from .block import linear, projection, projections
from .op import (
    INDEX_HEAD_FLOPS_PER_SCORE,
    POSITION_ID_BYTES,
    ROPE_FLOPS_PER_ELEMENT,
    TOPK_SELECT_FLOPS_PER_ELEMENT,
    Op,
    matmul_unit,
)
from .primitives import norm_op

# The indexer's scores are written and read in fp32 (DeepGEMM's fp8_mqa_logits output), its weights taken in fp32.
SCORE_BYTES = 4


def _dsa(w: Workload) -> SparseAttention:
    dsa = w.model.sparse_attention
    assert dsa is not None  # the callers dispatch on it
    return dsa


def seen_positions(g: Seqs, causal: bool) -> int:
    """(query, position) pairs one sequence of group ``g`` scores: Σ over its T queries of the positions each
    sees, T·(Lk − T) + T·(T + 1)/2 causal (Lk for a decode), T·Lk without the mask."""
    return group_scores(g, causal, causal_skip=True)


def selected_positions(g: Seqs, causal: bool, k: int) -> int:
    """Positions one sequence of group ``g`` attends to, summed over its T queries: min(seen, K) each. Causal:
    query i (1-based) of T after P cached sees P + i, so Σ min(P + i, K), a sliding window's count with W = K
    (engine.count.attention.group_scores); a decode: min(Lk, K). Without the mask: T·min(Lk, K)."""
    if not causal:
        return g.new * min(g.positions, k)
    return group_scores(g, causal, causal_skip=True, window=k)


def indexer_projections(w: Workload, norm: Op | None) -> list[Op]:
    """index_k_proj, index_weights_proj (reading the normed x: with ``norm``, attn_norm in each one's prologue),
    index_q_proj, index_k_norm, index_rope and index_k_write: the indexer's per-token ops."""
    m, dsa, n = w.model, _dsa(w), w.tokens
    mla = m.mla
    assert mla is not None and mla.q_lora_rank is not None  # Model refuses sparse attention otherwise
    h, a = m.hidden_size, dtype_bytes(w.dtype)
    d, heads, d_r = dsa.index_head_dim, dsa.index_n_heads, mla.qk_rope_head_dim
    ops = projections([projection(w, name, h, width, False)
                       for name, width in (("index_k_proj", d), ("index_weights_proj", heads))], norm, None,
                      lambda name, n_out, with_norm: projection(w, name, h, n_out, with_norm))
    ops.append(linear(w, "index_q_proj", mla.q_lora_rank, heads * d))
    ops.append(norm_op("index_k_norm", n, d, w.dtype, "layernorm"))
    rotated = n * (heads + 1) * d_r  # each index head's query and the one key, their first d_r
    ops.append(Op(name="index_rope", kind="elementwise", flops=ROPE_FLOPS_PER_ELEMENT * rotated,
                  bytes=2 * rotated * a + n * d_r * a, unit="vector", dtype="fp32",
                  reads=f"the first {d_r} of {heads} index queries and of the index key, {n} tokens; cos/sin rows",
                  writes="them, rotated", computes=f"{ROPE_FLOPS_PER_ELEMENT} FLOPs per element",
                  elementwise="rope"))
    cached = n * dsa.key_bytes_per_token
    ops.append(Op(name="index_k_write", kind="copy", flops=0, bytes=n * d * a + cached, unit="vector", dtype="fp32",
                  reads=f"the new index keys, {n}×{d} {w.dtype}",
                  writes=f"them into the index cache in fp8 with a scale per 128: {dsa.key_bytes_per_token} bytes "
                         f"a token", computes="nothing: a cast to fp8 with its scales"))
    return ops


def _group_indexer(w: Workload) -> list[Op]:
    """index_score and index_topk of a step of one group (the module's table)."""
    dsa, g = _dsa(w), w.uniform
    heads, d = dsa.index_n_heads, dsa.index_head_dim
    pairs = g.count * seen_positions(g, w.causal)
    picked = g.count * selected_positions(g, w.causal, dsa.index_topk)
    a = dtype_bytes(w.dtype)
    q_bytes = w.tokens * heads * d * a + w.tokens * heads * SCORE_BYTES  # the queries, the fp32 weights
    cache = g.count * g.positions * dsa.key_bytes_per_token  # each sequence's index keys, once
    scores = pairs * SCORE_BYTES
    score = Op(name="index_score", kind="indexer", flops=pairs * heads * (2 * d + INDEX_HEAD_FLOPS_PER_SCORE),
               bytes=q_bytes + cache + scores, unit=matmul_unit(w.dtype), dtype=w.dtype, kv_bytes=cache,
               reads=f"{heads} index queries and weights of {w.tokens} tokens, the fp8 index cache of "
                     f"{g.positions} positions × {dsa.key_bytes_per_token} bytes per sequence",
               writes=f"{pairs:,} fp32 scores",
               computes=f"per (query, position): {heads} heads × ({d}-wide dot, ReLU, × weight, sum), "
                        f"{pairs:,} pairs")
    topk = Op(name="index_topk", kind="indexer", flops=TOPK_SELECT_FLOPS_PER_ELEMENT * pairs,
              bytes=scores + picked * POSITION_ID_BYTES, unit="vector", dtype="fp32",
              reads=f"{pairs:,} fp32 scores", writes=f"{picked:,} int32 position ids (top {dsa.index_topk} a query)",
              computes=f"a top-{dsa.index_topk} select, one compare a score")
    return [score, topk]


def indexer_ops(w: Workload) -> list[Op]:
    """index_score and index_topk over the step's groups: one kernel each (engine.count.attention.by_group)."""
    return by_group(w, _group_indexer, "the inputs")
