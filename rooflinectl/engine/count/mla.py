"""Multi-head latent attention (DeepSeek-V2/V3, Kimi K2): the attention half of a block, each op's FLOPs and HBM
bytes stated beside its code. ``engine.count.transformer`` hands a model with ``Model.mla`` to this module.

Notation as in ``engine.count.transformer`` (N = B·T tokens, Lk KV positions, H hidden, h heads, a and kv the bytes of
``dtype`` and ``kv_dtype``), and MLA's sizes (``specs.mla.MLA``): r_q ``q_lora_rank``, r ``kv_lora_rank``,
d_n ``qk_nope_head_dim``, d_r ``qk_rope_head_dim``, d_v ``v_head_dim``. Source of the structure: DeepSeek-V2,
arXiv 2405.04434, section 2.1 (equations 9-19 and the appendix on weight absorption), and transformers'
``DeepseekV3Attention``.

Per layer, in execution order (count 1):
  attn_norm            RMSNorm N×H (in the prologue of the first projections with norm_linear)
  q_a_proj             N×H · H×r_q (the low-rank Q; without q_lora_rank one q_proj N×H · H×h·(d_n + d_r))
  kv_a_proj_with_mqa   N×H · H×(r + d_r): the latent c_kv and the one RoPE key k_pe every head shares
                       (qkv fuses q_a_proj and kv_a_proj_with_mqa into qkv_a_proj, x read once: SGLang's and
                       vLLM's fused_qkv_a_proj)
  q_a_norm             RMSNorm N×r_q
  q_b_proj             N×r_q · r_q×h·(d_n + d_r)
  kv_a_norm            RMSNorm over the latent, N×r
  rope                 RoPE on the RoPE parts only: q_pe N×h·d_r and k_pe N×d_r
  kv_write             the normed latent and the rotated k_pe into the cache: N×(r + d_r) values
decode (the weight-absorbed form; arXiv 2405.04434, 2.1.2: W_UK is absorbed into the query, W_UV into the output):
  q_absorb             per head q_nope (N×d_n) · W_UK (d_n×r): each head's query in the latent space
  latent_attention     (flash) each head's query [q_latent, q_pe] against the cached [c_kv, k_pe] of Lk positions,
                       values c_kv itself: the r + d_r values of a position are read once for all h heads
  latent_qk, softmax,  (naive) the same with the score matrix through HBM
  latent_pv
  v_up                 per head o_latent (N×r) · W_UV (r×d_v): back to each head's value space
prefill and the attention phase (the expanded form):
  kv_b_proj            N×r · r×h·(d_n + d_v): each head's K_nope and V from the step's latent
  attention            (flash) per head Q (d_n + d_r) against K = [K_nope, k_pe] and V (d_v); (naive) qk,
  (qk, softmax, pv)    softmax, pv
then
  o_proj               N×h·d_v · h·d_v×H (its epilogue adds the residual with residual fusion)
  attn_residual        x + attn

Rules beyond engine.count.transformer's (docs/design.md, "Multi-head latent attention", says why each):
- Decode reads the latent cache once per sequence, whatever h (FlashMLA's tiling of a sequence's heads). The
  values are the latent's first r elements of the same cache entries, read with the keys; naive attention's pv
  reads them again.
- The absorbed W_UK and W_UV (kv_b_proj's two halves) are read and multiplied in ``dtype`` (a quantized
  checkpoint's kv_b_proj is counted in its format where prefill runs it, and in the footprint).
- The expanded form's shared RoPE key is read once per position for all heads. Its K and V are activations in
  ``dtype``, not the cache; they are the keys and values attention reads (``kv_bytes``).
- Causal skipping and the flash/naive split follow ``engine.count.attention.scores_computed``.
- With DeepSeek Sparse Attention (``Model.sparse_attention``) every phase runs the absorbed form, the indexer's ops
  (``engine.count.dsa``) come after kv_a_norm and before the core, and the core (``sparse_latent_attention``) reads
  each query's selected positions alone; the cache holds the indexer's fp8 keys beside the latent.
"""

from __future__ import annotations

from dataclasses import replace

from ...specs.mla import MLA
from ...specs.model import Model
from ...specs.workload import Workload
from ...units import dtype_bytes
from .attention import by_group, scores_computed
from .block import linear, projection, projections, residual, with_residual
from .dsa import indexer_ops, indexer_projections, selected_positions
from .op import POSITION_ID_BYTES, ROPE_FLOPS_PER_ELEMENT, AttentionShape, Gemm, Op, matmul_unit
from .primitives import flash_attention_op, kv_write_op, rmsnorm_op, score_matmul_op, softmax_op


def _mla(w: Workload) -> MLA:
    mla = w.model.mla
    assert mla is not None  # the callers dispatch on it
    return mla


def _per_head_matmul(w: Workload, name: str, k: int, n: int, weight: str) -> Op:
    """An absorbed matmul, one per head over the step's N tokens: x (N×h×k) · W_i (k×n) for each head i.
    2·N·h·k·n FLOPs; reads x (N·h·k) and the h matrices (h·k·n), writes y (N·h·n), all in ``dtype``."""
    m, n_tok, a = w.model, w.tokens, dtype_bytes(w.dtype)
    h = m.num_heads
    weights = h * k * n * a
    return Op(
        name=name,
        kind="linear",
        flops=2 * n_tok * h * k * n,
        bytes=n_tok * h * k * a + weights + n_tok * h * n * a,
        unit=matmul_unit(w.dtype),
        dtype=w.dtype,
        reads=f"x {n_tok}×{h}×{k}, {weight} {h}×{k}×{n} {w.dtype}",
        writes=f"y {n_tok}×{h}×{n}",
        computes=f"2·{n_tok}·{h}·{k}·{n} FLOPs of matmul, one {k}×{n} matrix per head",
        weight_bytes=weights,
        gemm=Gemm(n_tok, k, n, batch=h),
    )


def _first_projections(w: Workload, norm: Op | None) -> list[Op]:
    """The down and up projections of Q and the latent, with their norms (see the module's table); ``norm``
    (norm_linear): attn_norm in the prologue of the first ones."""
    m, mla, n = w.model, _mla(w), w.tokens
    h, heads = m.hidden_size, m.num_heads
    q_out = heads * mla.qk_head_dim
    q = ("q_a_proj", mla.q_lora_rank) if mla.q_lora_rank is not None else ("q_proj", q_out)
    first = [projection(w, name, h, n_out, False) for name, n_out in (q, ("kv_a_proj_with_mqa", mla.latent_dim))]
    ops = projections(first, norm, "qkv_a_proj" if "qkv" in w.fused else None,
                      lambda name, n_out, with_norm: projection(w, name, h, n_out, with_norm))
    if mla.q_lora_rank is not None:
        ops.append(rmsnorm_op("q_a_norm", n, mla.q_lora_rank, w.dtype))
        ops.append(linear(w, "q_b_proj", mla.q_lora_rank, q_out))
    ops.append(rmsnorm_op("kv_a_norm", n, mla.kv_lora_rank, w.dtype))
    return ops


def _rope_and_cache(w: Workload) -> list[Op]:
    """RoPE on the RoPE parts only, and the cache write of the latent and the shared key."""
    m, mla, n = w.model, _mla(w), w.tokens
    a = dtype_bytes(w.dtype)
    d_r = mla.qk_rope_head_dim
    rotated = n * (m.num_heads + 1) * d_r  # q_pe: h heads of d_r per token; k_pe: one d_r per token
    latent = n * mla.latent_dim
    return [
        Op(
            name="rope",
            kind="elementwise",
            flops=ROPE_FLOPS_PER_ELEMENT * rotated,
            # q_pe and k_pe in and out, and each token's cos and sin rows (d_r/2 each).
            bytes=2 * rotated * a + n * d_r * a,
            unit="vector",
            dtype="fp32",
            reads=f"q_pe {w.tokens}×{m.num_heads}×{d_r} and k_pe {w.tokens}×{d_r}, cos/sin rows of {w.tokens} "
                  f"positions",
            writes="q_pe and k_pe, rotated (the no-RoPE parts are not touched)",
            computes=f"{ROPE_FLOPS_PER_ELEMENT} FLOPs per element (4 multiplies, 2 adds per pair)",
            elementwise="rope",
        ),
        # c_kv (N×r) and k_pe (N×d_r) read in dtype, written into the cache in kv_dtype.
        kv_write_op(latent, w.dtype, w.kv_dtype,
                    reads=f"the normed latent {w.tokens}×{mla.kv_lora_rank} and k_pe {w.tokens}×{d_r}",
                    writes=f"them into the latent cache in {w.kv_dtype}, {mla.latent_dim} values per token"),
    ]


def _absorbed_core(w: Workload) -> list[Op]:
    """Decode's attention over the latent cache: each head's query is [q_nope·W_UK (r), q_pe (d_r)], each
    position's key the cached [c_kv, k_pe] (r + d_r) and its value c_kv (r): QKᵀ over r + d_r and PV over r,
    2·(r + d_r) + 2·r FLOPs per score (engine.count.primitives.flash_attention_op, score_matmul_op)."""
    m, mla = w.model, _mla(w)
    b, t, lk, h = w.batch, w.tokens_per_seq, w.kv_len, m.num_heads
    r, d_qk = mla.kv_lora_rank, mla.latent_dim
    a, kv = dtype_bytes(w.dtype), dtype_bytes(w.kv_dtype)
    q_bytes = w.tokens * h * d_qk * a  # q_latent (r) and q_pe (d_r) of every head
    o_bytes = w.tokens * h * r * a  # each head's output in the latent space
    cache_bytes = b * lk * d_qk * kv  # [c_kv, k_pe] of Lk positions per sequence, once for all h heads
    # Every head reads the one latent: h query heads over one KV head, values r wide.
    shape = AttentionShape(h, 1, d_qk, r, None, w.causal, w.seqs, "flash")
    dsa = m.sparse_attention
    if dsa is not None:  # the selected rows alone, and their ids (engine/count/dsa.py; Workload refuses naive)
        picked = b * selected_positions(w.uniform, w.causal, dsa.index_topk)
        cache_bytes = picked * (d_qk * kv + POSITION_ID_BYTES)
        s = h * picked
        return [flash_attention_op(
            "sparse_latent_attention", s, d_qk, r, q_bytes, cache_bytes, o_bytes, w.dtype,
            reads=f"Q {w.tokens}×{h}×{d_qk}; per query its top {dsa.index_topk} latent rows × {d_qk} "
                  f"({w.kv_dtype}) and their ids, {picked:,} rows in all, read once for all {h} heads",
            writes=f"O {w.tokens}×{h}×{r} (latent)",
            computes=f"{s:,} scores on chip over the selected positions: QKᵀ over {d_qk}, online softmax, PV "
                     f"over {r}", attention=replace(shape, topk=dsa.index_topk))]
    if w.attention == "flash":
        s = b * h * scores_computed(w, causal_skip=True)
        # The values are the cached latent itself: the flash kernel reads them with the keys.
        return [flash_attention_op(
            "latent_attention", s, d_qk, r, q_bytes, cache_bytes, o_bytes, w.dtype,
            reads=f"Q {w.tokens}×{h}×{d_qk}, the latent cache {lk} positions × {d_qk} ({w.kv_dtype}) per "
                  f"sequence, read once for all {h} heads",
            writes=f"O {w.tokens}×{h}×{r} (latent)",
            computes=f"{s:,} scores on chip: QKᵀ over {d_qk}, online softmax, PV over {r}; values are the "
                     f"cached latent itself", attention=shape)]
    s = b * h * scores_computed(w, causal_skip=False)
    score_bytes = s * a
    values = b * lk * r * kv  # pv reads the latent part of the cache again
    return [
        score_matmul_op("latent_qk", s, d_qk, q_bytes, cache_bytes, score_bytes, w.dtype,
                        reads=f"Q {w.tokens}×{h}×{d_qk}, the latent cache {lk}×{d_qk} per sequence",
                        writes=f"scores {b}×{h}×{t}×{lk}",
                        computes=f"2·{d_qk} FLOPs per score, {s:,} scores (the full T×Lk, masked or not)",
                        attention=replace(shape, part="qk")),
        softmax_op("softmax", b * h * t, lk, w.dtype, attention=replace(shape, part="softmax")),
        score_matmul_op("latent_pv", s, r, score_bytes, values, o_bytes, w.dtype,
                        reads=f"P {b}×{h}×{t}×{lk}, the cached latent {lk}×{r} per sequence",
                        writes=f"O {w.tokens}×{h}×{r} (latent)",
                        computes=f"2·{r} FLOPs per score, {s:,} scores", attention=replace(shape, part="pv")),
    ]


def _expanded_core(w: Workload) -> list[Op]:
    """Prefill's attention in the expanded form: per head Q (d_n + d_r) against K = [K_nope (d_n), k_pe (d_r,
    one for all heads)] and V (d_v), all activations in ``dtype`` from kv_b_proj and rope: QKᵀ over d_n + d_r
    and PV over d_v per score."""
    m, mla = w.model, _mla(w)
    b, t, lk, h = w.batch, w.tokens_per_seq, w.kv_len, m.num_heads
    d_qk, d_v = mla.qk_head_dim, mla.v_head_dim
    a = dtype_bytes(w.dtype)
    q_bytes = w.tokens * h * d_qk * a
    k_bytes = b * lk * (h * mla.qk_nope_head_dim + mla.qk_rope_head_dim) * a  # K_nope per head, k_pe shared
    v_bytes = b * lk * h * d_v * a
    o_bytes = w.tokens * h * d_v * a
    # Each head its own K_nope and V (the RoPE key shared), so h KV heads.
    shape = AttentionShape(h, h, d_qk, d_v, None, w.causal, w.seqs, "flash")
    if w.attention == "flash":
        s = b * h * scores_computed(w, causal_skip=True)
        return [flash_attention_op(
            "attention", s, d_qk, d_v, q_bytes, k_bytes + v_bytes, o_bytes, w.dtype,
            reads=f"Q {w.tokens}×{h}×{d_qk}; K_nope, k_pe (shared) and V of {lk} positions per sequence",
            writes=f"O {w.tokens}×{h}×{d_v}",
            computes=f"{s:,} scores on chip: QKᵀ over {d_qk}, online softmax, PV over {d_v}", attention=shape)]
    s = b * h * scores_computed(w, causal_skip=False)
    score_bytes = s * a
    return [
        score_matmul_op("qk", s, d_qk, q_bytes, k_bytes, score_bytes, w.dtype,
                        reads=f"Q {w.tokens}×{h}×{d_qk}, K_nope and the shared k_pe of {lk} positions per sequence",
                        writes=f"scores {b}×{h}×{t}×{lk}",
                        computes=f"2·{d_qk} FLOPs per score, {s:,} scores (the full T×Lk, masked or not)",
                        attention=replace(shape, part="qk")),
        softmax_op("softmax", b * h * t, lk, w.dtype, attention=replace(shape, part="softmax")),
        score_matmul_op("pv", s, d_v, score_bytes, v_bytes, o_bytes, w.dtype,
                        reads=f"P {b}×{h}×{t}×{lk}, V {lk}×{h}×{d_v} per sequence",
                        writes=f"O {w.tokens}×{h}×{d_v}",
                        computes=f"2·{d_v} FLOPs per score, {s:,} scores", attention=replace(shape, part="pv")),
    ]


def mla_attention_ops(w: Workload) -> list[Op]:
    """The attention core of one MLA layer, as the phase runs it: decode the weight-absorbed form's attention
    over the latent cache (without q_absorb and v_up), prefill and the attention phase the expanded form's
    attention (without kv_b_proj). The attention phase counts this core alone, as it does for GQA; with sparse
    attention the core is the indexer's score and top-k and the absorbed form's attention over the selected
    positions, in every phase."""
    if w.model.sparse_attention is not None:
        return [*indexer_ops(w), *_absorbed_core(w)]
    return _absorbed_core(w) if w.phase == "decode" else _expanded_core(w)


def _forms(w: Workload) -> tuple[Workload | None, Workload | None]:
    """The step's groups split by the form that runs them: (decode tokens, absorbed; the rest, expanded), each
    None where the step has none, as vLLM's and SGLang's MLA backends split a mixed batch."""
    decode = tuple(g for g in w.seqs if g.new == 1)
    rest = tuple(g for g in w.seqs if g.new > 1)
    if not rest or w.model.sparse_attention is not None:  # sparse attention: the absorbed form only
        return w, None
    if not decode:
        return None, w
    return w.with_seqs(decode), w.with_seqs(rest)


def mla_attention_block(w: Workload) -> list[Op]:
    """The attention half of an MLA block, attn_norm … attn_residual, in execution order (count 1). A mixed step
    runs its decode tokens in the absorbed form and its prompt tokens in the expanded one; a prompt chunk after
    cached positions expands the latent of all of them (kv_b_proj over cached + new positions, as vLLM's
    chunked prefill up-projects the cached context)."""
    m, mla = w.model, _mla(w)
    fused = set(w.fused)
    norm_in = "norm_linear" in fused
    heads, r = m.num_heads, mla.kv_lora_rank
    norm = rmsnorm_op("attn_norm", w.tokens, m.hidden_size, w.dtype)
    ops: list[Op] = [] if norm_in else [norm]
    ops += _first_projections(w, norm if norm_in else None)
    if m.sparse_attention is not None:  # the lightning indexer's per-token ops (engine/count/dsa.py)
        ops += indexer_projections(w, norm if norm_in else None)
    ops += _rope_and_cache(w)
    absorbed, expanded = _forms(w)
    if absorbed is not None:
        ops.append(_per_head_matmul(absorbed, "q_absorb", mla.qk_nope_head_dim, r, "W_UK"))
        if m.sparse_attention is not None:  # each query's top-k positions, before the attention over them
            ops += indexer_ops(absorbed)
        core = by_group(absorbed, _absorbed_core, "the inputs")
        if expanded is not None:  # both forms' naive cores have a softmax: the absorbed one's is the latent's
            core = [replace(op, name="latent_softmax") if op.name == "softmax" else op for op in core]
        ops += core
        ops.append(_per_head_matmul(absorbed, "v_up", r, mla.v_head_dim, "W_UV"))
    if expanded is not None:
        expand_rows = sum(g.count * g.positions for g in expanded.seqs)
        ops.append(linear(expanded, "kv_b_proj", r, heads * (mla.qk_nope_head_dim + mla.v_head_dim),
                          rows=expand_rows))
        ops += by_group(expanded, _expanded_core, "the inputs")
    o_proj = linear(w, "o_proj", heads * mla.v_head_dim, m.hidden_size)
    if "residual" in fused:
        ops.append(with_residual(o_proj, w, "attn_residual"))
    else:
        ops += [o_proj, residual("attn_residual", w)]
    return ops


def mla_kv_cache_bytes_per_sequence(w: Workload, positions: int) -> float:
    """The latent cache of one sequence of ``positions``: L layers × (r + d_r) values × positions × kv bytes
    (DeepSeek-V3 in bf16: 61 × 576 × 2 = 70,272 bytes per token), and with sparse attention the indexer's fp8
    keys beside it, L × positions × their bytes a token whatever kv_dtype (DeepSeek-V3.2-Exp: 61 × 132 = 8,052)."""
    m = w.model
    index = m.sparse_attention.key_bytes_per_token if m.sparse_attention is not None else 0
    return m.num_layers * (_mla(w).latent_dim * dtype_bytes(w.kv_dtype) + index) * positions


def mla_linear_matrices(m: Model) -> list[tuple[int, int, int]]:
    """Each layer's quantizable attention matrices as (count, k, n): q_a/q_b (or q), kv_a_proj_with_mqa,
    kv_b_proj, o_proj (MLA.matrices)."""
    assert m.mla is not None
    mats = m.mla.matrices(m.hidden_size, m.num_heads)
    if m.sparse_attention is not None and m.mla.q_lora_rank is not None:  # the indexer's wq_b, wk, weights_proj
        mats += m.sparse_attention.matrices(m.hidden_size, m.mla.q_lora_rank)
    return [(m.num_layers, k, n) for _, k, n in mats]
