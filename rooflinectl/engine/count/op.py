"""One operation's FLOPs and HBM bytes, and the primitive operations every count is built from.

Counting rules (DESIGN.md): FLOPs count a multiply and an add as two, so a (m×k)·(k×n) matmul is 2·m·n·k.
Bytes are the HBM traffic of the kernel that runs the operation: each input read once and each output written
once, in that tensor's data type. The engine (``transformer.py``) and the kernels both build their operations
from the functions below, so a measured kernel is always compared with the same count the analysis uses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ...specs.measured import Collective
from ...specs.step import Seqs
from ...units import dtype_bytes

# FLOPs per element of the elementwise work. Each is named once here; the kernels and the engine share them.
# RMSNorm: square, add into the row's sum, multiply by the row's 1/rms, multiply by the gain (the per-row
# mean, + eps and rsqrt are O(rows), not O(elements), and are left out).
RMSNORM_FLOPS_PER_ELEMENT = 4
# Softmax: subtract the row max, exp, add into the row sum, divide by the sum, plus the compare of the max pass.
SOFTMAX_FLOPS_PER_ELEMENT = 5
# SiLU(x) = x / (1 + exp(-x)): negate, exp, add, divide.
SILU_FLOPS_PER_ELEMENT = 4
# The gated MLP's activation: SiLU(gate) × up, one multiply more.
GATED_ACT_FLOPS_PER_ELEMENT = SILU_FLOPS_PER_ELEMENT + 1
# LayerNorm: add into the row's sum (the mean), subtract the mean, square, add into the variance, multiply by
# 1/σ, multiply by the gain, add the bias (mean, variance, + eps and rsqrt per row are O(rows), left out).
LAYERNORM_FLOPS_PER_ELEMENT = 7
# GELU, tanh approximation (PyTorch's gelu(approximate='tanh'), Gemma's gelu_pytorch_tanh, GPT-2's gelu_new):
# 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): x³ 2 multiplies, ·0.044715 1, + x 1, ·√(2/π) 1, tanh 1, + 1 1,
# · x 1, · 0.5 1.
GELU_TANH_FLOPS_PER_ELEMENT = 9
# gpt-oss's experts' clamped SwiGLU (transformers' GptOssExperts): g = min(gate, 7) 1, u = clamp(up, −7, 7) 2,
# 1.702·g 1, sigmoid 4 (negate, exp, add, divide), g·σ 1, u + 1 1, the product 1.
CLAMPED_SWIGLU_FLOPS_PER_ELEMENT = 11
# Each norm kind's FLOPs per element (Model.norm), and its name in words.
NORM_FLOPS_PER_ELEMENT = {"rmsnorm": RMSNORM_FLOPS_PER_ELEMENT, "layernorm": LAYERNORM_FLOPS_PER_ELEMENT}
NORM_LABEL = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
# The MLP activation of each model.mlp kind, FLOPs per element of its output (the gated kinds: the act of gate,
# then one multiply by up; clamped_swiglu's count has its product in it).
MLP_ACT_FLOPS_PER_ELEMENT = {
    "gated_silu": SILU_FLOPS_PER_ELEMENT + 1,
    "gated_gelu_tanh": GELU_TANH_FLOPS_PER_ELEMENT + 1,
    "gelu_tanh": GELU_TANH_FLOPS_PER_ELEMENT,
    "clamped_swiglu": CLAMPED_SWIGLU_FLOPS_PER_ELEMENT,
}
MLP_ACT_FORMULA = {
    "gated_silu": "SiLU(gate)·up", "gated_gelu_tanh": "GELU_tanh(gate)·up", "gelu_tanh": "GELU_tanh(up)",
    "clamped_swiglu": "(clamp(up)+1)·g·σ(1.702g)",
}
# Logit soft-capping, cap·tanh(x/cap) (Gemma 2): divide, tanh, multiply.
SOFTCAP_FLOPS_PER_ELEMENT = 3
# Gemma's embedding scale, x·sqrt(H): one multiply per element.
EMBED_SCALE_FLOPS_PER_ELEMENT = 1
# A bias add: one add per output element.
BIAS_FLOPS_PER_ELEMENT = 1
# RoPE rotates pairs: (x·cos − y·sin, x·sin + y·cos) is 4 multiplies and 2 adds per pair, 3 per element.
ROPE_FLOPS_PER_ELEMENT = 3
# A residual add: one add per element.
RESIDUAL_FLOPS_PER_ELEMENT = 1
# A mixture-of-experts router picks each token's top k of E logits by k passes of max over them: one compare per
# logit per pass (a sort or a heap does fewer, a bitonic top-k more; all are small beside the gate's 2·H·E).
TOPK_FLOPS_PER_ELEMENT_PER_PICK = 1
# The router's top-k expert ids are int32 (what vLLM's and SGLang's routing kernels write).
EXPERT_ID_BYTES = 4

Unit = Literal["tensor", "vector"]
# Which elementwise operation an op of kind "elementwise" is, where the kernels that run it differ enough to be
# timed apart (the calibrated op model has a curve for each): RoPE (several eager ops in a PyTorch stack), the MLP's
# activation (SiLU(gate)·up: two), the residual add (one). Other elementwise ops (biases, the MoE combine, scales)
# leave it None.
Elementwise = Literal["rope", "activation", "residual"]

# What an operation is, for everything downstream that must tell operations apart (the verdict, the chart, the
# explorer's hints, a measured record): nothing decides from an op's name.
#   linear      a matmul against weights (projections, the LM head)
#   attention   the attention core: QKᵀ, softmax over scores, PV, or one fused kernel
#   norm        RMSNorm
#   elementwise RoPE, activations, residual adds
#   gather      embedding lookup
#   copy        pure data movement (the KV-cache write, a device copy)
#   matmul      a matmul of two activations or of a benchmark's two operands (no weights)
#   router      a mixture-of-experts gate: the H×E matmul, softmax and top-k of each token
#   expert      a routed expert's matmul: each token's row times the weights of the experts it is routed to
# Parallel serving adds: communication.
OpKind = Literal["linear", "attention", "norm", "elementwise", "gather", "copy", "matmul", "expert", "router",
                 "communication"]


@dataclass(frozen=True)
class Gemm:
    """A matmul's sizes, y[m,n] = x[m,k]·W[k,n], 2·m·k·n FLOPs: ``m`` rows (the step's tokens; the LM head's
    sequences; an expert op's (token, expert) pairs), ``k`` the reduction, ``n`` the outputs. ``experts``: the
    distinct experts whose weights an expert op reads (an expectation under uniform routing), None for any other
    matmul. ``bias``: a bias vector of n added in the epilogue. ``batch``: independent products of these sizes,
    each with its own W (MLA's absorbed matmuls, one per head)."""

    m: int
    k: int
    n: int
    experts: float | None = None
    bias: bool = False
    batch: int = 1


# Which op of the attention core an attention op is: the one fused kernel (FlashAttention), or naive attention's
# three (QKᵀ, the softmax over the scores, P·V).
AttentionPart = Literal["flash", "qk", "softmax", "pv"]


@dataclass(frozen=True)
class AttentionShape:
    """What an attention op computes over: ``heads`` query heads sharing ``kv_heads`` K and V heads (GQA; MLA's
    absorbed form: 1, the latent every head reads), queries and keys ``d_qk`` wide and values ``d_v``;
    ``window`` the positions a sliding layer attends to (None: all of them); ``causal`` the mask; ``groups`` the
    step's sequences, each ``count`` × ``new`` tokens after ``cached`` (one kernel runs them all); ``part``
    which op of the core it is. The scores and positions follow from them (``engine.count.attention``)."""

    heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    window: int | None
    causal: bool
    groups: tuple[Seqs, ...]
    part: AttentionPart


def matmul_unit(dtype: str) -> Unit:
    """Where a matmul of ``dtype`` runs: the tensor cores, except fp32, which PyTorch runs on the vector units by
    default (TF32 is opt-in: a kernel that uses it counts its matmul as ``tf32``)."""
    return "vector" if dtype == "fp32" else "tensor"


@dataclass(frozen=True)
class Op:
    """One kernel's work: FLOPs and HBM bytes for one instance, and how many instances run in a step.

    ``kind`` says what the op is (see OpKind) and ``fuses`` the kinds of work folded into it beyond its own
    (``("norm",)`` for an RMSNorm in a projection's prologue); ``unit`` and ``dtype`` pick the compute roof (tensor cores at the op's data type for matmuls; the vector units
    in fp32 for elementwise work, which computes in fp32). ``weight_bytes`` and ``kv_bytes`` are the parts of
    ``bytes`` that are weights read and KV cache read, for the step's totals. ``reads``/``writes``/``computes``
    say in words what the count is made of. ``per_model`` marks the ops that run once per step outside the
    layer stack (embedding, final norm, LM head), which the verdict keeps apart from the layers' ops: the LM head
    is a linear op, but batching does not move the layers' intensity through it.
    """

    name: str
    kind: OpKind
    flops: float
    bytes: float
    unit: Unit
    dtype: str
    reads: str
    writes: str
    computes: str
    count: int = 1
    # Counts are ints wherever the sizes are (a workload's data types are whole bytes), 0 included, so that --json
    # prints every FLOP and byte count as an integer.
    weight_bytes: float = 0
    kv_bytes: float = 0
    fuses: tuple[OpKind, ...] = ()
    per_model: bool = False
    # The storage format of the weights a matmul reads where it is not the activations' ``dtype`` (quantized
    # weights: int4, fp8, nvfp4 ...; engine.count.quant); None where the op reads no weights or reads them in ``dtype``.
    weight_dtype: str | None = None
    # A communication op's collective, by nccl-tests' name: what ``analyze --calibrated`` times it with where the
    # GPU file measured that collective (``calibrate --comm``); None for a point-to-point send and every other op.
    collective: Collective | None = None
    # Which elementwise operation (``Elementwise``) an op of kind "elementwise" is; None for every other op.
    elementwise: Elementwise | None = None
    # The shape the op works on, so that what runs it (measure, profile, explore) reads it here rather than from
    # the name: a matmul's (linear, matmul, expert, router) sizes; the rows × width a norm or an elementwise op
    # reads and writes (None where it is not one tensor's: RoPE's Q and K, the MoE combine).
    gemm: Gemm | None = None
    tensor: tuple[int, int] | None = None
    # An attention op's heads, head sizes, window, mask and groups of sequences (None for every other op).
    attention: AttentionShape | None = None
    # A fused op: the ops of the unfused step whose work it does, in order (attn_norm+qkv_proj: attn_norm, q_proj,
    # k_proj, v_proj), each as the engine counts it alone; its FLOPs are theirs added up. Empty for an op that
    # fuses nothing.
    covers: tuple[Op, ...] = ()

    def __post_init__(self) -> None:
        if self.flops < 0 or self.bytes <= 0 or self.count < 1:
            raise ValueError(f"op {self.name}: flops {self.flops}, bytes {self.bytes}, count {self.count}")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per HBM byte."""
        return self.flops / self.bytes

    def times(self, count: int) -> Op:
        return replace(self, count=count)

    @property
    def parts(self) -> tuple[Op, ...]:
        """The unfused ops this op does the work of: ``covers``, or the op itself where it fuses nothing."""
        return self.covers or (self,)


def covering(op: Op, *parts: Op) -> Op:
    """``op``, one kernel doing the work of ``parts`` (ops of the unfused step, or fused ops, whose own parts
    count), with ``covers`` saying so; its FLOPs are theirs, its bytes fewer by the round trips it saves."""
    return replace(op, covers=tuple(c for part in parts for c in part.parts))


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
    their product (SiLU(gate)·up for gated_silu); the plain gelu_tanh reads up alone and writes GELU_tanh(up).
    MLP_ACT_FLOPS_PER_ELEMENT[mlp] FLOPs per element written."""
    per = MLP_ACT_FLOPS_PER_ELEMENT[mlp]
    formula = MLP_ACT_FORMULA[mlp]
    inputs = 1 if mlp == "gelu_tanh" else 2
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
