"""What a model holds in HBM, by the counting rules of ``engine.count.transformer``: its weights, and each
sequence's KV cache (in whole blocks of a paged cache, or position by position) and fixed state. The step's
operations are ``engine.count.transformer``'s; this module is their resident counterpart."""

from __future__ import annotations

from ...specs.layers import GATED_MLPS, KV_ATTENTIONS
from ...specs.workload import Workload
from ...units import dtype_bytes
from .attention import positions_held, span_of
from .mla import mla_kv_cache_bytes_per_sequence, mla_linear_matrices
from .quant import weight_matrix_bytes
from .recurrent import state_bytes_per_sequence
from .ssm import state_bytes_per_sequence as ssm_state_bytes

__all__ = ["KVSpan", "fixed_state_bytes_per_sequence", "kv_cache_bytes_per_sequence", "kv_spans",
           "weight_footprint_bytes"]


# A kind of layer that holds K and V: (its layers, the window of a sliding one, the chunk of a chunked one).
KVSpan = tuple[int, int | None, int | None]


def kv_spans(w: Workload) -> tuple[KVSpan, ...]:
    """Each kind of layer the model has that holds K and V (full, sliding, chunked, in that order) as (layers,
    window, chunk): what a sequence's KV cache is made of (:func:`kv_cache_bytes_per_sequence`), every such
    layer the same K and V a position. MLA's latent layers are full ones."""
    m = w.model
    if m.mla is not None:
        return ((m.num_layers, None, None),)
    return tuple((n, *span_of(w, kind)) for kind in KV_ATTENTIONS if (n := m.attention_layers(kind)))


def kv_cache_bytes_per_sequence(w: Workload, positions: int | None = None, block_size: int = 1) -> float:
    """The cache held for one sequence of ``positions`` (default: a preset step's kv_len), kept in blocks of
    ``block_size`` positions (1: each position on its own, as ``analyze`` counts): K and V of every attention
    layer and KV head, over all positions in a full layer, min(positions, W) in a sliding one and
    min(positions, C) in a chunked one, each rounded to whole blocks (engine.count.attention.positions_held
    states the rule and its source), and the fixed state of every linear and mamba layer
    (:func:`fixed_state_bytes_per_sequence`), whatever the positions."""
    m = w.model
    lk = w.kv_len if positions is None else positions
    if m.mla is not None:  # the latent cache: r + d_r values a position and layer (engine/count/mla.py)
        return mla_kv_cache_bytes_per_sequence(w, positions_held(lk, None, None, block_size))
    held = sum(layers * positions_held(lk, window, chunk, block_size) for layers, window, chunk in kv_spans(w))
    return 2 * m.kv_dim * held * dtype_bytes(w.kv_dtype) + fixed_state_bytes_per_sequence(w)


def fixed_state_bytes_per_sequence(w: Workload) -> float:
    """One sequence's fixed state: Gated DeltaNet's (engine.count.recurrent) and Mamba-2's (engine.count.ssm)."""
    return state_bytes_per_sequence(w) + ssm_state_bytes(w)


def _linear_matrices(w: Workload) -> list[tuple[int, int, int]]:
    """Every quantizable weight matrix of the model as (count, k, n): per layer Q, K, V, O; per dense layer gate,
    up, down (a plain MLP: up, down); MLA's projections in place of Q, K, V, O; per MoE layer E experts' and the shared experts' (their width n_s·I_s as
    one matrix, as _gated_mlp counts them). A model whose format covers its experts alone
    (``Model.quantized``) lists the experts only. The embedding, LM head, norms, biases and routers are not
    among them (engine.count.quant: they stay in the activations' type)."""
    m = w.model
    h, q, kv = m.hidden_size, m.q_dim, m.kv_dim
    ins = 2 if m.mlp in GATED_MLPS else 1  # up (and gate): H×I each
    experts_only = m.quantized == "experts"
    if experts_only:
        mats = []
    elif m.mla is not None:  # MLA's q_a/q_b (or q), kv_a_proj_with_mqa, kv_b_proj and o_proj for Q, K, V, O
        mats = mla_linear_matrices(m)
    else:
        a = sum(map(m.attention_layers, KV_ATTENTIONS))  # layers with Q, K, V, O
        mats = [(a, h, (2 if m.attn_output_gate else 1) * q), (2 * a, h, kv), (a, q, h)]
        if m.linear_attention is not None:  # Gated DeltaNet's in_proj_qkvz, in_proj_ba and out_proj
            g, lin = m.linear_attention, m.attention_layers("linear")
            mats += [(lin, h, 2 * g.key_dim + 2 * g.value_dim), (lin, h, 2 * g.num_value_heads),
                     (lin, g.value_dim, h)]
        if m.mamba is not None:  # Mamba-2's in_proj and out_proj
            mam = m.attention_layers("mamba")
            mats += [(mam, h, m.mamba.in_proj_width), (mam, m.mamba.inner, h)]
    if m.dense_layers and not experts_only:
        i = m.intermediate_size
        mats += [(ins * m.dense_layers, h, i), (m.dense_layers, i, h)]
    if m.moe is not None:
        e, ie, s = m.moe.num_experts, m.moe.expert_intermediate_size, m.moe.shared_width
        mats += [(ins * m.moe_layers * e, h, ie), (m.moe_layers * e, ie, h)]
        if s and not experts_only:
            mats += [(ins * m.moe_layers, h, s), (m.moe_layers, s, h)]
    return mats


def weight_footprint_bytes(w: Workload) -> float:
    """The model's weights in memory: every expert, though a step reads only the ones its tokens are routed to
    (all of them stay resident in HBM). Unquantized: every parameter in the workload's data type. Quantized:
    the linear matrices in the weight format (engine.count.quant, scales included) and the rest of the parameters
    (embedding, LM head, norms, biases, routers, sinks; a model quantized in its experts only, every
    non-expert matrix) in the activations' type."""
    params = w.model.parameter_count()
    if not w.quantized:
        return params * dtype_bytes(w.dtype)
    mats = _linear_matrices(w)
    linear = sum(c * weight_matrix_bytes(w.weights, k, n, w.group_size) for c, k, n in mats)
    rest = params - sum(c * k * n for c, k, n in mats)
    return linear + rest * dtype_bytes(w.dtype)
