"""The primitive operations every count is built from: a matmul, a norm, the MLP's activation, attention's parts,
a copy, the MoE router and the experts' matmul.

Each builder says what it reads, writes and computes, and returns an :class:`~engine.count.op.Op`. The engine
(``transformer.py``) and the kernels both build their operations here, so a measured kernel is always compared
with the same count the analysis uses.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from ...specs.layers import GATED_MLPS
from ...units import dtype_bytes
from .op import (
    EXPERT_ID_BYTES,
    LAYERNORM_FLOPS_PER_ELEMENT,
    MLP_ACT_FLOPS_PER_ELEMENT,
    MLP_ACT_FORMULA,
    NORM_FLOPS_PER_ELEMENT,
    NORM_LABEL,
    RMSNORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    TOPK_FLOPS_PER_ELEMENT_PER_PICK,
    AttentionShape,
    Gemm,
    Op,
    covering,
    matmul_unit,
)


def matmul_op(
    name: str,
    m: int,
    k: int,
    n: int,
    dtype: str,
    *,
    weight_dtype: str | None = None,
    out_dtype: str | None = None,
    b_is_weight: bool = True,
    w_bytes: int | None = None,
    compute_dtype: str | None = None,
) -> Op:
    """y[m,n] = x[m,k] · W[k,n]. Reads x (m·k) and W (k·n) once, writes y (m·n); 2·m·n·k FLOPs on the unit
    ``matmul_unit(dtype)`` names, at ``dtype`` (the activations': a narrower weight is widened on chip).
    ``w_bytes``: W's bytes in a quantized ``weight_dtype``, scales included (engine.count.quant); default k·n elements
    of ``weight_dtype``. ``compute_dtype``: the type the tensor cores multiply in where it is narrower than x's
    (w8a8, w4a4: x is read in ``dtype`` and quantized on chip, per token); default ``dtype``."""
    w_dtype = weight_dtype or dtype
    c_dtype = compute_dtype or dtype
    o_dtype = out_dtype or dtype
    x_bytes = m * k * dtype_bytes(dtype)
    w_stored: float = k * n * dtype_bytes(w_dtype) if w_bytes is None else w_bytes
    y_bytes = m * n * dtype_bytes(o_dtype)
    return Op(
        name=name,
        kind="linear" if b_is_weight else "matmul",
        flops=2 * m * n * k,
        bytes=x_bytes + w_stored + y_bytes,
        unit=matmul_unit(c_dtype),
        dtype=c_dtype,
        reads=f"x {m}×{k} {dtype}, {'W' if b_is_weight else 'B'} {k}×{n} {w_dtype}",
        writes=f"y {m}×{n} {o_dtype}",
        computes=f"2·{m}·{k}·{n} FLOPs of matmul" + (f" in {c_dtype}" if c_dtype != dtype else ""),
        weight_bytes=w_stored if b_is_weight else 0,
        weight_dtype=w_dtype if b_is_weight and w_dtype != dtype else None,
        gemm=Gemm(m, k, n),
    )


def rmsnorm_op(name: str, rows: int, hidden: int, dtype: str) -> Op:
    """RMSNorm of rows×hidden: reads x and the gain vector (hidden), writes y; RMSNORM_FLOPS_PER_ELEMENT each."""
    s = dtype_bytes(dtype)
    gain = hidden * s
    return Op(
        name=name,
        kind="norm",
        flops=RMSNORM_FLOPS_PER_ELEMENT * rows * hidden,
        bytes=2 * rows * hidden * s + gain,
        unit="vector",
        dtype="fp32",
        reads=f"x {rows}×{hidden} {dtype}, gain {hidden}",
        writes=f"y {rows}×{hidden} {dtype}",
        computes=f"{RMSNORM_FLOPS_PER_ELEMENT} FLOPs per element (square, sum, scale by 1/rms, scale by gain)",
        weight_bytes=gain,
        tensor=(rows, hidden),
    )


def norm_op(name: str, rows: int, hidden: int, dtype: str, norm: str = "rmsnorm") -> Op:
    """A norm of rows×hidden, RMSNorm (:func:`rmsnorm_op`) or LayerNorm: reads x, the gain and LayerNorm's bias
    (hidden each), writes y; NORM_FLOPS_PER_ELEMENT[norm] per element."""
    op = rmsnorm_op(name, rows, hidden, dtype)
    if norm == "rmsnorm":
        return op
    bias = hidden * dtype_bytes(dtype)
    return replace(op, flops=LAYERNORM_FLOPS_PER_ELEMENT * rows * hidden, bytes=op.bytes + bias,
                   weight_bytes=op.weight_bytes + bias, reads=op.reads + f", bias {hidden}",
                   computes=f"{LAYERNORM_FLOPS_PER_ELEMENT} FLOPs per element (mean, subtract, square, variance, "
                            f"scale by 1/σ, gain, bias)")


def rmsnorm_linear_op(name: str, m: int, k: int, n: int, dtype: str, *, weight_dtype: str | None = None,
                      w_bytes: int | None = None, compute_dtype: str | None = None, norm: str = "rmsnorm") -> Op:
    """Fused y = RMSNorm(x) · W (or LayerNorm with ``norm``): reads x, the gain (and LayerNorm's bias) and W
    once, writes y; the normalized x never reaches HBM. The gain stays in ``dtype`` (norms are not quantized)."""
    mm = matmul_op(name, m, k, n, dtype, weight_dtype=weight_dtype, w_bytes=w_bytes, compute_dtype=compute_dtype)
    vectors = 2 if norm == "layernorm" else 1
    gain = vectors * k * dtype_bytes(dtype)
    per = NORM_FLOPS_PER_ELEMENT[norm]
    label = NORM_LABEL[norm]
    return replace(
        mm,
        flops=mm.flops + per * m * k,
        bytes=mm.bytes + gain,
        weight_bytes=mm.weight_bytes + gain,
        fuses=(*mm.fuses, "norm"),
        reads=mm.reads + f", gain {k}" + (f", bias {k}" if vectors == 2 else ""),
        computes=mm.computes + f" + {per} FLOPs per x element of {label}, on chip",
    )


def gated_act_op(name: str, rows: int, width: int, dtype: str, mlp: str = "gated_silu") -> Op:
    """The MLP's activation on rows×width (``mlp``: a Model.mlp kind): a gated kind reads gate and up and writes
    their product (SiLU(gate)·up for gated_silu); a plain kind reads up alone and writes its activation
    (GELU_tanh(up), ReLU(up)²).
    MLP_ACT_FLOPS_PER_ELEMENT[mlp] FLOPs per element written."""
    per = MLP_ACT_FLOPS_PER_ELEMENT[mlp]
    formula = MLP_ACT_FORMULA[mlp]
    inputs = 2 if mlp in GATED_MLPS else 1
    return Op(
        name=name,
        kind="elementwise",
        flops=per * rows * width,
        bytes=(inputs + 1) * rows * width * dtype_bytes(dtype),
        unit="vector",
        dtype="fp32",
        reads=f"up, {rows}×{width}" if inputs == 1 else f"gate and up, {rows}×{width} each",
        writes=f"{formula} {rows}×{width}",
        computes=f"{per} FLOPs per element ({formula}; op.py states each step)",
        elementwise="activation",
        tensor=(rows, width),
    )


def with_gated_act(gate_up: Op, rows: int, width: int, dtype: str, mlp: str = "gated_silu",
                   act: str = "act") -> Op:
    """A gated activation in the epilogue of a fused gate_up matmul: only the rows×width product is written, not
    gate and up (rows×2·width). It covers gate_up's parts and the op ``act`` (:func:`gated_act_op`)."""
    formula = MLP_ACT_FORMULA[mlp]
    return replace(
        covering(gate_up, gate_up, gated_act_op(act, rows, width, dtype, mlp)),
        name=gate_up.name + "+act",
        flops=gate_up.flops + MLP_ACT_FLOPS_PER_ELEMENT[mlp] * rows * width,
        bytes=gate_up.bytes - rows * width * dtype_bytes(dtype),
        writes=f"{formula} {rows}×{width}",
        computes=gate_up.computes + f", + {formula} in the epilogue",
        fuses=(*gate_up.fuses, "elementwise"),
    )


def flash_attention_op(name: str, scores: int, d_qk: int, d_v: int, q_bytes: int | float, kv_bytes: int | float,
                       o_bytes: int | float, dtype: str, reads: str, writes: str, computes: str, *,
                       attention: AttentionShape | None = None) -> Op:
    """One fused attention kernel (FlashAttention): QKᵀ over d_qk and PV over d_v, 2·d_qk + 2·d_v FLOPs per score
    computed, and the online softmax on each (SOFTMAX_FLOPS_PER_ELEMENT); it reads Q and the K and V it attends
    to once (``kv_bytes``) and writes O; no score touches HBM. Variants add their own work with ``replace``
    (a soft cap, sinks). GQA's (d_qk = d_v = d) and MLA's two forms are built on it. ``attention``: its shape
    (part flash)."""
    return Op(
        name=name,
        kind="attention",
        flops=scores * (2 * d_qk + 2 * d_v + SOFTMAX_FLOPS_PER_ELEMENT),
        bytes=q_bytes + kv_bytes + o_bytes,
        unit=matmul_unit(dtype),
        dtype=dtype,
        reads=reads,
        writes=writes,
        computes=computes,
        kv_bytes=kv_bytes,
        attention=attention,
    )


def score_matmul_op(name: str, scores: int, d: int, in_bytes: int | float, kv_bytes: int | float,
                    out_bytes: int | float, dtype: str, reads: str, writes: str, computes: str, *,
                    attention: AttentionShape | None = None) -> Op:
    """One of naive attention's two batched matmuls: QKᵀ (reads Q and K, writes the scores) or PV (reads P and
    V, writes O), 2·d FLOPs per score; ``kv_bytes`` is its K or V read from the cache (or the expanded
    activations). ``attention``: its shape (part qk or pv)."""
    return Op(
        name=name,
        kind="attention",
        flops=2 * scores * d,
        bytes=in_bytes + kv_bytes + out_bytes,
        unit=matmul_unit(dtype),
        dtype=dtype,
        reads=reads,
        writes=writes,
        computes=computes,
        kv_bytes=kv_bytes,
        attention=attention,
    )


def softmax_op(name: str, rows: int, cols: int, dtype: str, *, attention: AttentionShape | None = None) -> Op:
    """Row softmax of rows×cols: read rows·cols elements, write rows·cols; SOFTMAX_FLOPS_PER_ELEMENT each.
    Its kind is attention: a softmax over rows is the middle of naive attention (``attention``: its shape,
    part softmax)."""
    return Op(
        name=name,
        kind="attention",
        flops=SOFTMAX_FLOPS_PER_ELEMENT * rows * cols,
        bytes=2 * rows * cols * dtype_bytes(dtype),
        unit="vector",
        dtype="fp32",
        reads=f"x {rows}×{cols} {dtype}",
        writes=f"y {rows}×{cols} {dtype}",
        computes=f"{SOFTMAX_FLOPS_PER_ELEMENT} FLOPs per element (max, subtract, exp, sum, divide)",
        tensor=(rows, cols),
        attention=attention,
    )


def copy_op(name: str, elements: int, dtype: str) -> Op:
    """A device-to-device copy: read n elements, write n elements, no arithmetic."""
    s = dtype_bytes(dtype)
    return Op(
        name=name,
        kind="copy",
        flops=0,
        bytes=2 * elements * s,
        unit="vector",
        dtype="fp32",
        reads=f"{elements} {dtype} elements",
        writes=f"{elements} {dtype} elements",
        computes="nothing: pure data movement",
    )


def kv_write_op(values: int, dtype: str, kv_dtype: str, reads: str, writes: str) -> Op:
    """The cache write of a step's new keys and values (GQA's K and V, MLA's latent and k_pe): ``values``
    elements read in ``dtype`` and written into the cache in ``kv_dtype``; a copy, and a cast where the cache is
    narrower, no FLOPs."""
    return Op(
        name="kv_write",
        kind="copy",
        flops=0,
        bytes=values * dtype_bytes(dtype) + values * dtype_bytes(kv_dtype),
        unit="vector",
        dtype="fp32",
        reads=reads,
        writes=writes,
        computes="nothing: a copy (and a cast if the cache is narrower)",
    )


def router_op(name: str, tokens: int, hidden: int, experts: int, top_k: int, dtype: str,
              softmax_over: Literal["experts", "top_k"] = "experts") -> Op:
    """A mixture-of-experts router, one kernel: logits = x[N,H] · W_g[H,E], each token's top k, and a softmax.
    Reads x and W_g; writes each token's k weights (``dtype``) and k expert ids (int32); the N×E logits stay on
    chip. 2·N·H·E FLOPs of matmul, TOPK_FLOPS_PER_ELEMENT_PER_PICK per logit per pick, and
    SOFTMAX_FLOPS_PER_ELEMENT per logit the softmax runs over: all E (``softmax_over="experts"``: Mixtral and
    Qwen-MoE take the top k of the probabilities) or the k picked (``"top_k"``: gpt-oss takes the top k of the
    logits first). The renormalization of the k weights (Qwen3's ``norm_topk_prob``), O(N·k), is left out."""
    s = dtype_bytes(dtype)
    w_bytes = hidden * experts * s
    picks = tokens * top_k
    softmaxed = experts if softmax_over == "experts" else top_k
    return Op(
        name=name,
        kind="router",
        flops=2 * tokens * hidden * experts + TOPK_FLOPS_PER_ELEMENT_PER_PICK * top_k * tokens * experts
        + SOFTMAX_FLOPS_PER_ELEMENT * tokens * softmaxed,
        bytes=tokens * hidden * s + w_bytes + picks * (s + EXPERT_ID_BYTES),
        unit=matmul_unit(dtype),
        dtype=dtype,
        reads=f"x {tokens}×{hidden} {dtype}, W_gate {hidden}×{experts} {dtype}",
        writes=f"top-{top_k} weights ({dtype}) and expert ids (int32) of {tokens} tokens",
        computes=f"2·{tokens}·{hidden}·{experts} FLOPs of matmul + top-{top_k} of {experts} logits "
                 f"({TOPK_FLOPS_PER_ELEMENT_PER_PICK}·{top_k} FLOPs per logit) + softmax over {softmaxed} "
                 f"({SOFTMAX_FLOPS_PER_ELEMENT} FLOPs each), on chip",
        weight_bytes=w_bytes,
        gemm=Gemm(tokens, hidden, experts),
    )


def expert_matmul_op(name: str, pairs: int, k: int, n: int, experts_read: float, dtype: str, *,
                     weight_dtype: str | None = None, expert_bytes: int | None = None,
                     compute_dtype: str | None = None) -> Op:
    """The routed experts' grouped matmul: each of ``pairs`` (token, expert) pairs (N·top-k) multiplies the
    token's row x[k] by its expert's W[k,n]. Reads the ``pairs`` input rows (a token routed to k experts is read
    by each of them), the weights of the ``experts_read`` distinct experts, each once (an expectation, so
    rounded to whole bytes), and writes ``pairs`` rows of n; 2·pairs·k·n FLOPs. ``expert_bytes``: one expert's
    W in a quantized ``weight_dtype``, scales included (engine.count.quant); default k·n elements of ``dtype``;
    ``compute_dtype`` as matmul_op's."""
    s = dtype_bytes(dtype)
    w_dtype = weight_dtype or dtype
    c_dtype = compute_dtype or dtype
    per_expert = k * n * s if expert_bytes is None else expert_bytes
    # A whole number of experts (stated, all E, or k at one token) counts exactly, as an int; an expectation is
    # rounded to the byte.
    w_bytes = int(experts_read) * per_expert if float(experts_read).is_integer() else round(experts_read * per_expert)
    read = f"{int(experts_read)}" if float(experts_read).is_integer() else f"{experts_read:.4g} (expected)"
    return Op(
        name=name,
        kind="expert",
        flops=2 * pairs * k * n,
        bytes=pairs * k * s + w_bytes + pairs * n * s,
        unit=matmul_unit(c_dtype),
        dtype=c_dtype,
        reads=f"x {pairs} routed rows × {k} {dtype}, W {k}×{n} {w_dtype} of {read} experts",
        writes=f"y {pairs}×{n} {dtype}",
        computes=f"2·{pairs}·{k}·{n} FLOPs of matmul" + (f" in {c_dtype}" if c_dtype != dtype else "")
        + f" ({pairs} token-expert pairs)",
        weight_bytes=w_bytes,
        weight_dtype=w_dtype if w_dtype != dtype else None,
        gemm=Gemm(pairs, k, n, experts=experts_read),
    )
