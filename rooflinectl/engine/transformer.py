"""The operations of one forward step of a workload, each with its FLOPs and HBM bytes.

Notation: B batch, T tokens per sequence in this step (1 for decode, the prompt for prefill), N = B·T tokens,
Lk the KV positions attended, H hidden size, h heads, g KV heads, d head dim, I MLP width, V vocabulary, L layers.
Sizes in bytes: a for activations and weights' data type (``dtype``), kv for the KV cache (``kv_dtype``).

Per layer (count L), unless fused (see ``workload.FUSIONS``):
  attn_norm      RMSNorm N×H                          reads x, gain; writes N×H
  q/k/v_proj     N×H · H×(h·d | g·d | g·d)            reads x and W; writes N×(h·d | g·d)
  rope           rotates Q and K                      reads Q, K and the cos/sin rows (N×d); writes Q, K
  kv_write       new K, V into the cache              reads N×2·g·d; writes N×2·g·d in kv_dtype
  naive:  qk     per head T×d · d×Lk                  reads Q, K (g heads: GQA shares K); writes B·h·T·Lk scores
          softmax over Lk                              reads and writes the scores
          pv     per head T×Lk · Lk×d                 reads P, V; writes N×h·d
  flash:  attention, one kernel: scores stay on chip; reads Q, K, V once, writes N×h·d
  o_proj         N×h·d · h·d×H
  attn_residual  x + attn                             reads 2·N×H; writes N×H
  mlp_norm, gate_proj, up_proj (N×H · H×I), act (SiLU(gate)·up on N×I), down_proj (N×I · I×H), mlp_residual
Once per model: embed (gathers N rows of V×H: min(N, V) distinct rows read), final_norm (N×H), lm_head (B×H · H×V:
the last token of each sequence only, as a serving engine computes logits only where it samples).

Rules beyond DESIGN.md's defaults, stated once here:
- RMSNorm gains are kept in the activation data type (quantization schemes leave norms unquantized).
- Attention matmuls run at the activation data type; a narrower KV cache is read narrow and widened on chip.
- Causal flash attention skips masked scores: query i of T new tokens at the end of Lk positions sees
  Lk − T + i + 1 of them, T·(Lk − T) + T·(T + 1)/2 in all (S·(S+1)/2 for a prefill; Lk for a decode step).
  Naive attention computes and stores the full T×Lk scores, mask or not.
- Flash attention reads K and V once per KV head (the ideal; re-reads across query blocks hit in L2).
- An fp32 matmul runs on the vector units (PyTorch's default; TF32 is opt-in).
"""

from __future__ import annotations

from dataclasses import replace

from ..specs.workload import Workload
from ..units import dtype_bytes
from .op import (
    GATED_ACT_FLOPS_PER_ELEMENT,
    RESIDUAL_FLOPS_PER_ELEMENT,
    ROPE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Op,
    matmul_op,
    matmul_unit,
    rmsnorm_linear_op,
    rmsnorm_op,
    softmax_op,
)


def _projection(w: Workload, name: str, k: int, n: int, norm: bool) -> Op:
    """A linear layer of the block; with ``norm`` the preceding RMSNorm runs in its prologue (norm_linear)."""
    if norm:
        return rmsnorm_linear_op(name, w.tokens, k, n, w.dtype)
    return matmul_op(name, w.tokens, k, n, w.dtype)


def _with_residual(op: Op, w: Workload) -> Op:
    """Fold the residual add into a projection's epilogue: read the residual stream, add, write once."""
    extra = w.tokens * w.model.hidden_size
    return replace(
        op,
        name=op.name + "+residual",
        flops=op.flops + RESIDUAL_FLOPS_PER_ELEMENT * extra,
        bytes=op.bytes + extra * dtype_bytes(w.dtype),
        reads=op.reads + ", residual",
        computes=op.computes + ", + residual add",
        fuses=(*op.fuses, "elementwise"),
    )


def _residual(name: str, w: Workload) -> Op:
    n = w.tokens * w.model.hidden_size
    a = dtype_bytes(w.dtype)
    return Op(
        name=name,
        kind="elementwise",
        flops=RESIDUAL_FLOPS_PER_ELEMENT * n,
        bytes=3 * n * a,
        unit="vector",
        dtype="fp32",
        reads=f"x and the branch output, {w.tokens}×{w.model.hidden_size} each",
        writes=f"{w.tokens}×{w.model.hidden_size}",
        computes="1 add per element",
    )


def scores_computed(w: Workload, causal_skip: bool) -> int:
    """Attention scores per (sequence, head): T·Lk, or with ``causal_skip`` only the unmasked ones."""
    t, lk = w.tokens_per_seq, w.kv_len
    if not (causal_skip and w.causal):
        return t * lk
    return t * (lk - t) + t * (t + 1) // 2


def attention_ops(w: Workload) -> list[Op]:
    """The attention core of one layer: qk, softmax, pv (naive) or one fused attention kernel (flash)."""
    m = w.model
    b, t, lk, d = w.batch, w.tokens_per_seq, w.kv_len, m.head_dim
    a, kv = dtype_bytes(w.dtype), dtype_bytes(w.kv_dtype)
    q_bytes = b * t * m.q_dim * a  # Q in, and O out, both N×h·d
    k_bytes = b * lk * m.kv_dim * kv  # K (and likewise V) of every KV head, read once
    unit = matmul_unit(w.dtype)
    if w.attention == "flash":
        s = b * m.num_heads * scores_computed(w, causal_skip=True)
        return [
            Op(
                name="attention",
                kind="attention",
                # QKᵀ and PV: 2·d FLOPs each per score; the online softmax on each score.
                flops=s * (4 * d + SOFTMAX_FLOPS_PER_ELEMENT),
                bytes=2 * q_bytes + 2 * k_bytes,
                unit=unit,
                dtype=w.dtype,
                reads=f"Q, K, V (K, V: {lk} positions × {m.num_kv_heads} KV heads, {w.kv_dtype})",
                writes=f"O {w.tokens}×{m.q_dim}",
                computes=f"{s:,} scores on chip: QKᵀ, online softmax, PV; no score touches HBM",
                kv_bytes=2 * k_bytes,
            )
        ]
    s = b * m.num_heads * scores_computed(w, causal_skip=False)
    score_bytes = s * a
    return [
        Op(
            name="qk",
            kind="attention",
            flops=2 * s * d,
            bytes=q_bytes + k_bytes + score_bytes,
            unit=unit,
            dtype=w.dtype,
            reads=f"Q {w.tokens}×{m.q_dim}, K {lk}×{m.kv_dim} per sequence",
            writes=f"scores {b}×{m.num_heads}×{t}×{lk}",
            computes=f"2·d FLOPs per score, {s:,} scores (the full T×Lk, masked or not)",
            kv_bytes=k_bytes,
        ),
        softmax_op("softmax", b * m.num_heads * t, lk, w.dtype),
        Op(
            name="pv",
            kind="attention",
            flops=2 * s * d,
            bytes=score_bytes + k_bytes + q_bytes,
            unit=unit,
            dtype=w.dtype,
            reads=f"P {b}×{m.num_heads}×{t}×{lk}, V {lk}×{m.kv_dim} per sequence",
            writes=f"O {w.tokens}×{m.q_dim}",
            computes=f"2·d FLOPs per score, {s:,} scores",
            kv_bytes=k_bytes,
        ),
    ]


def layer_ops(w: Workload) -> list[Op]:
    """The operations of one transformer block, in execution order (count 1)."""
    m = w.model
    n, h, i = w.tokens, m.hidden_size, m.intermediate_size
    a, kv = dtype_bytes(w.dtype), dtype_bytes(w.kv_dtype)
    fused = set(w.fused)
    norm_in = "norm_linear" in fused
    ops: list[Op] = []

    if not norm_in:
        ops.append(rmsnorm_op("attn_norm", n, h, w.dtype))
    prefix = "attn_norm+" if norm_in else ""
    if "qkv" in fused:
        ops.append(_projection(w, prefix + "qkv_proj", h, m.q_dim + 2 * m.kv_dim, norm_in))
    else:
        ops.append(_projection(w, prefix + "q_proj", h, m.q_dim, norm_in))
        ops.append(_projection(w, prefix + "k_proj", h, m.kv_dim, norm_in))
        ops.append(_projection(w, prefix + "v_proj", h, m.kv_dim, norm_in))

    rotated = n * (m.q_dim + m.kv_dim)
    ops.append(
        Op(
            name="rope",
            kind="elementwise",
            flops=ROPE_FLOPS_PER_ELEMENT * rotated,
            # Q and K in and out, and each token's cos and sin rows (d/2 each).
            bytes=2 * rotated * a + n * m.head_dim * a,
            unit="vector",
            dtype="fp32",
            reads=f"Q and K ({rotated:,} elements), cos/sin rows of {w.tokens} positions",
            writes="Q and K, rotated",
            computes=f"{ROPE_FLOPS_PER_ELEMENT} FLOPs per element (4 multiplies, 2 adds per pair)",
        )
    )
    new_kv = n * 2 * m.kv_dim
    ops.append(
        Op(
            name="kv_write",
            kind="copy",
            flops=0,
            bytes=new_kv * a + new_kv * kv,
            unit="vector",
            dtype="fp32",
            reads=f"new K and V, {w.tokens}×{m.kv_dim} each",
            writes=f"them into the KV cache in {w.kv_dtype}",
            computes="nothing: a copy (and a cast if the cache is narrower)",
        )
    )
    ops.extend(attention_ops(w))

    o_proj = matmul_op("o_proj", n, m.q_dim, h, w.dtype)
    if "residual" in fused:
        ops.append(_with_residual(o_proj, w))
    else:
        ops += [o_proj, _residual("attn_residual", w)]

    if not norm_in:
        ops.append(rmsnorm_op("mlp_norm", n, h, w.dtype))
    prefix = "mlp_norm+" if norm_in else ""
    if "gate_up" in fused:
        gate_up = _projection(w, prefix + "gate_up_proj", h, 2 * i, norm_in)
        if "act" in fused:
            # SiLU(gate)·up in the epilogue: only the N×I product is written, not gate and up (N×2I).
            gate_up = replace(
                gate_up,
                name=gate_up.name + "+act",
                flops=gate_up.flops + GATED_ACT_FLOPS_PER_ELEMENT * n * i,
                bytes=gate_up.bytes - n * i * a,
                writes=f"SiLU(gate)·up {n}×{i}",
                computes=gate_up.computes + ", + SiLU(gate)·up in the epilogue",
                fuses=(*gate_up.fuses, "elementwise"),
            )
        ops.append(gate_up)
    else:
        ops.append(_projection(w, prefix + "gate_proj", h, i, norm_in))
        ops.append(_projection(w, prefix + "up_proj", h, i, norm_in))
    if "act" not in fused:
        ops.append(
            Op(
                name="act",
                kind="elementwise",
                flops=GATED_ACT_FLOPS_PER_ELEMENT * n * i,
                bytes=3 * n * i * a,
                unit="vector",
                dtype="fp32",
                reads=f"gate and up, {n}×{i} each",
                writes=f"SiLU(gate)·up {n}×{i}",
                computes=f"{GATED_ACT_FLOPS_PER_ELEMENT} FLOPs per element (SiLU: negate, exp, add, divide; × up)",
            )
        )
    down = matmul_op("down_proj", n, i, h, w.dtype)
    if "residual" in fused:
        ops.append(_with_residual(down, w))
    else:
        ops += [down, _residual("mlp_residual", w)]
    return ops


def model_ops(w: Workload) -> tuple[list[Op], list[Op]]:
    """The once-per-model operations: (before the layers, after the layers)."""
    m = w.model
    n, h, a = w.tokens, m.hidden_size, dtype_bytes(w.dtype)
    # The gather reads each token's row of the V×H table, but no row more than once (DESIGN.md: each input read
    # once): at most min(N, V) distinct rows, so never more than the table itself. A prefill of 64 × 4096 tokens
    # through Llama 3's 128,256-row table reads the table once, not 262,144 rows (which counted more weight bytes
    # than the model has). Below V rows every token is counted as a distinct row, the most the gather can read.
    # (A tied LM head reads the same table again in its own kernel: that is traffic, and counted as such.)
    rows_read = min(n, m.vocab_size)
    embed_read = rows_read * h * a
    embed = Op(
        name="embed",
        kind="gather",
        flops=0,
        bytes=embed_read + n * h * a,
        unit="vector",
        dtype="fp32",
        reads=f"{rows_read} distinct rows (at most) of the {m.vocab_size}×{h} embedding table for {n} tokens",
        writes=f"x {n}×{h}",
        computes="nothing: a gather",
        weight_bytes=embed_read,
        per_model=True,
    )
    final_norm = replace(rmsnorm_op("final_norm", n, h, w.dtype), per_model=True)
    lm_head = replace(matmul_op("lm_head", w.batch, h, m.vocab_size, w.dtype), per_model=True)
    if w.phase == "prefill":
        lm_head = replace(lm_head, computes=lm_head.computes + ", for the last token of each sequence only")
    return [embed], [final_norm, lm_head]


def step_ops(w: Workload) -> list[Op]:
    """Every operation of one step with its count: the layer's ops count L; the attention phase is only the
    attention core of every layer."""
    layers = w.model.num_layers
    if w.phase == "attention":
        return [op.times(layers) for op in attention_ops(w)]
    before, after = model_ops(w)
    return [*before, *(op.times(layers) for op in layer_ops(w)), *after]


def kv_cache_bytes_per_sequence(w: Workload) -> float:
    """KV cache held for one sequence: K and V of every layer and KV head over kv_len positions."""
    m = w.model
    return m.num_layers * 2 * m.kv_dim * w.kv_len * dtype_bytes(w.kv_dtype)


def weight_footprint_bytes(w: Workload) -> float:
    """The model's weights in memory, in the workload's data type."""
    return w.model.parameter_count() * dtype_bytes(w.dtype)
