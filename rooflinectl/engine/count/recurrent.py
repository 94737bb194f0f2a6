"""Gated DeltaNet's layer (Qwen3-Next's ``linear`` layers): a recurrent state per sequence in place of a KV cache.
``engine.count.transformer`` hands a layer whose attention kind is ``linear`` to :func:`gated_deltanet_block`.

Notation as in ``engine.count.transformer`` (B sequences, T new tokens each, N = B·T, H hidden, a the bytes of
``dtype``), and Gated DeltaNet's sizes (``specs.recurrent.GatedDeltaNet``): h_k key heads and h_v value heads of
d_k and d_v, K = h_k·d_k, V = h_v·d_v, conv channels C = 2·K + V, conv taps w. Source of the structure: arXiv
2412.06464, and transformers' Qwen3NextGatedDeltaNet.

Per layer, in execution order (count 1):
  attn_norm          RMSNorm N×H (the same op as the attention layers')
  in_proj_qkvz       N×H · H×(2·K + 2·V): q, k, v and the output gate z
  in_proj_ba         N×H · H×2·h_v: β and the decay's a per value head
  conv1d             causal depthwise conv of w taps + SiLU over the C channels of q, k, v: (2·w + 4) FLOPs per
                     channel and token; reads N×C and the C×w taps, writes N×C; reads each sequence's conv state
                     ((w − 1)·C values: its last w − 1 inputs) where it has cached positions and writes it back
  delta_rule         the gated delta rule (the recurrence below): reads q, k (N×K each), v (N×V), β and a
                     (N×h_v each); reads each sequence's state (h_v·d_k·d_v) where it has cached positions and
                     writes it back; writes the output N×V
  gated_norm         RMSNorm over each value head (N·h_v rows of d_v, a gain of d_v) times SiLU(z): reads o and
                     z, writes N×V
  out_proj           N×V · V×H
  attn_residual      x + the layer's output

The delta rule per token and value head, state S (d_k × d_v): S ← α·S (d_k·d_v multiplies), u = Sᵀk
(2·d_k·d_v), δ = β·(v − u) (2·d_v), S ← S + k·δᵀ (2·d_k·d_v), o = Sᵀq (2·d_k·d_v): 7·d_k·d_v + 2·d_v FLOPs. A
decode step (T = 1) runs it so, on the vector units in fp32 (FLA's fused_recurrent_gated_delta_rule, vLLM's decode
path). A step of T > 1 runs the chunked form (FLA's chunk_gated_delta_rule, transformers'
torch_chunk_gated_delta_rule) over ⌈T/c⌉ chunks of c = DELTA_RULE_CHUNK positions (the last padded), on the
tensor cores in ``dtype``; per chunk and value head:
  β·K·Kᵀ (2·c²·d_k) and Q·Kᵀ (2·c²·d_k), masked to the chunk's causal triangle by decays
  the unit-triangular solve for the chunk's new values and decayed keys (c²·d_v + c²·d_k: c²/2 multiply-adds
  per column, d_v and d_k columns)
  the state read by the decayed keys and by Q (2·c·d_k·d_v each), the intra-chunk scores times the new values
  (2·c²·d_v), the state update Kᵀ·V' (2·c·d_k·d_v) and its decay (d_k·d_v)
  in all c²·(5·d_k + 3·d_v) + 6·c·d_k·d_v + d_k·d_v.
Both forms add, per token, the L2 norm of q and k over each key head and q's scale (WEIGHTLESS_RMSNORM + 1 FLOPs
per element of q, WEIGHTLESS_RMSNORM of k), and per token and value head the gates: α = exp(−exp(A)·softplus(a +
dt_bias)) and β = sigmoid(b) (DELTA_RULE_GATE_FLOPS_PER_HEAD).

The states are kept in ``dtype`` (vLLM's default mamba_ssm_cache_dtype "auto": the model's type). A step of
several groups runs each of conv1d and delta_rule as one kernel over the groups of its form (decode groups in one,
the others in another: ``delta_rule_chunked``), each group counted as a step of its own
(``engine.count.attention.by_group``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...specs.recurrent import GatedDeltaNet
from ...specs.workload import Workload
from ...units import dtype_bytes
from .attention import by_group
from .block import linear, projection, projections
from .op import (
    GATED_RMSNORM_FLOPS_PER_ELEMENT,
    SILU_FLOPS_PER_ELEMENT,
    WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT,
    Op,
    matmul_unit,
)
from .primitives import norm_op

# FLA's chunk_gated_delta_rule works in chunks of 64 positions (its BT), as does transformers' chunk_size=64.
DELTA_RULE_CHUNK = 64
# Per token and value head: the decay gate −exp(A)·softplus(a + dt_bias) (add, softplus's exp, add and log,
# multiply: 5; exp(A) is per head, not per token) and β = sigmoid(b) (negate, exp, add, divide: 4).
DELTA_RULE_GATE_FLOPS_PER_HEAD = 9
# The delta rule's FLOPs per state element per token (decay 1, Sᵀk 2, the update 2, Sᵀq 2; module docstring).
DELTA_RULE_FLOPS_PER_STATE_ELEMENT = 7
# One tap of a depthwise conv: a multiply and an add.
CONV_FLOPS_PER_TAP = 2


def _gdn(w: Workload) -> GatedDeltaNet:
    gdn = w.model.linear_attention
    assert gdn is not None  # the callers dispatch on it
    return gdn


def chunked_flops_per_head(t: int, d_k: int, d_v: int) -> int:
    """The chunked form's FLOPs for one sequence of ``t`` tokens in one value head (module docstring)."""
    c = DELTA_RULE_CHUNK
    chunks = -(-t // c)
    return chunks * (c * c * (5 * d_k + 3 * d_v) + 6 * c * d_k * d_v + d_k * d_v)


def state_bytes_per_sequence(w: Workload) -> float:
    """One sequence's recurrent state over the model's linear layers, in ``dtype``: the delta rule's state and
    the conv's, h_v·d_k·d_v + (w − 1)·C values a layer, the same at any context."""
    gdn = w.model.linear_attention
    if gdn is None:
        return 0
    layers = w.model.attention_layers("linear")
    return layers * (gdn.state_elements + gdn.conv_state_elements) * dtype_bytes(w.dtype)


def _conv_op(w: Workload) -> Op:
    """conv1d of a step of one group (module docstring)."""
    gdn, g, a = _gdn(w), w.uniform, dtype_bytes(w.dtype)
    n, c, taps = w.tokens, gdn.conv_channels, gdn.conv_kernel
    carried = g.count if g.cached else 0  # the sequences whose earlier inputs are read back
    state = (g.count + carried) * gdn.conv_state_elements * a
    weights = c * taps * a
    return Op(
        name="conv1d",
        kind="conv",
        flops=(CONV_FLOPS_PER_TAP * taps + SILU_FLOPS_PER_ELEMENT) * n * c,
        bytes=2 * n * c * a + weights + state,
        unit="vector",
        dtype="fp32",
        reads=f"q, k, v {n}×{c}, the {c}×{taps} taps" + (f", {carried} conv states" if carried else ""),
        writes=f"{n}×{c}, {g.count} conv states of {taps - 1}×{c}",
        computes=f"{CONV_FLOPS_PER_TAP}·{taps} FLOPs a channel and token, + SiLU",
        weight_bytes=weights,
        kv_bytes=carried * gdn.conv_state_elements * a,
    )


def _delta_rule_op(w: Workload) -> Op:
    """delta_rule of a step of one group: the recurrent form for T = 1, the chunked form else (module
    docstring)."""
    gdn, g, a = _gdn(w), w.uniform, dtype_bytes(w.dtype)
    n, hv, dk, dv = w.tokens, gdn.num_value_heads, gdn.key_head_dim, gdn.value_head_dim
    per_token = ((2 * WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT + 1) * gdn.key_dim
                 + DELTA_RULE_GATE_FLOPS_PER_HEAD * hv)
    recurrent = g.new == 1
    if recurrent:
        core = n * hv * (DELTA_RULE_FLOPS_PER_STATE_ELEMENT * dk * dv + 2 * dv)
    else:
        core = g.count * hv * chunked_flops_per_head(g.new, dk, dv)
    carried = g.count if g.cached else 0
    state = gdn.state_elements * a
    return Op(
        name="delta_rule" if recurrent else "delta_rule_chunked",
        kind="recurrent",
        flops=core + n * per_token,
        bytes=n * (2 * gdn.key_dim + 2 * gdn.value_dim + 2 * hv) * a + (g.count + carried) * state,
        unit="vector" if recurrent else matmul_unit(w.dtype),
        dtype="fp32" if recurrent else w.dtype,
        reads=f"q, k {n}×{gdn.key_dim}, v {n}×{gdn.value_dim}, β and a {n}×{hv}"
              + (f", {carried} states of {hv}×{dk}×{dv}" if carried else ""),
        writes=f"o {n}×{gdn.value_dim}, {g.count} states",
        computes=("the delta rule token by token: 7·d_k·d_v + 2·d_v FLOPs a token and value head" if recurrent
                  else f"the chunked delta rule over ⌈{g.new}/{DELTA_RULE_CHUNK}⌉ chunks a sequence"),
        kv_bytes=carried * state,
    )


def by_form(w: Workload, build: Callable[[Workload], Op]) -> list[Op]:
    """The op ``build`` makes of each group, one kernel over the decode groups and one over the others."""
    ops: list[Op] = []
    for decode in (True, False):
        seqs = tuple(g for g in w.seqs if (g.new == 1) == decode)
        if seqs:
            ops += by_group(w.with_seqs(seqs), lambda one: [build(one)], "the inputs")
    return ops


def one_kernel(conv: list[Op]) -> list[Op]:
    """A conv built by :func:`by_form` as the one kernel it is whatever the groups' forms: the decode groups' op and
    the others' summed, the taps read once."""
    if len(conv) < 2:
        return conv
    return [replace(conv[0], flops=conv[0].flops + conv[1].flops, bytes=conv[0].bytes + conv[1].bytes
                    - conv[1].weight_bytes, kv_bytes=conv[0].kv_bytes + conv[1].kv_bytes)]


def gated_deltanet_block(w: Workload) -> list[Op]:
    """The layer before its residual add, in execution order (module docstring); the caller closes the branch."""
    m, gdn = w.model, _gdn(w)
    n, h, a = w.tokens, m.hidden_size, dtype_bytes(w.dtype)
    norm = norm_op("attn_norm", n, h, w.dtype, m.norm)
    norm_in = "norm_linear" in w.fused
    ops: list[Op] = [] if norm_in else [norm]
    first = [projection(w, name, h, width, False)
             for name, width in (("in_proj_qkvz", 2 * gdn.key_dim + 2 * gdn.value_dim),
                                 ("in_proj_ba", 2 * gdn.num_value_heads))]
    ops += projections(first, norm if norm_in else None, None,
                       lambda name, n_out, with_norm: projection(w, name, h, n_out, with_norm))
    ops += one_kernel(by_form(w, _conv_op))
    ops += by_form(w, _delta_rule_op)
    rows = n * gdn.num_value_heads
    gated = norm_op("gated_norm", rows, gdn.value_head_dim, w.dtype)
    ops.append(replace(gated, flops=GATED_RMSNORM_FLOPS_PER_ELEMENT * rows * gdn.value_head_dim,
                       bytes=gated.bytes + n * gdn.value_dim * a,
                       reads=f"o and z, {rows}×{gdn.value_head_dim} each, gain {gdn.value_head_dim}",
                       computes=f"RMSNorm over each value head times SiLU(z): "
                                f"{GATED_RMSNORM_FLOPS_PER_ELEMENT} FLOPs per element"))
    ops.append(linear(w, "out_proj", gdn.value_dim, h))
    return ops
