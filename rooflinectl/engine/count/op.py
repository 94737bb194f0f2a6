"""One operation's FLOPs and HBM bytes (:class:`Op`), the shapes it works on, and the FLOPs per element of the
elementwise work every count shares.

Counting rules (docs/design.md): FLOPs count a multiply and an add as two, so a (m×k)·(k×n) matmul is 2·m·n·k.
Bytes are the HBM traffic of the kernel that runs the operation: each input read once and each output written
once, in that tensor's data type. The ops themselves are built in :mod:`engine.count.primitives`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from ...specs.measured import Collective
from ...specs.step import Seqs

# FLOPs per element of the elementwise work. Each is named once here; the kernels and the engine share them.
# RMSNorm: square, add into the row's sum, multiply by the row's 1/rms, multiply by the gain (the per-row
# mean, + eps and rsqrt are O(rows), not O(elements), and are left out).
RMSNORM_FLOPS_PER_ELEMENT = 4
# A weightless RMSNorm (Llama 4 Scout's Q/K norm): the RMSNorm's work without the multiply by a gain.
WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT = RMSNORM_FLOPS_PER_ELEMENT - 1
# Llama 4's attention temperature on NoPE layers: Q times its position's scale, one multiply per element (the
# scale 1 + β·log1p(⌊(p + 1)/floor⌋), a few FLOPs a token, is O(tokens) and left out).
Q_TEMPERATURE_FLOPS_PER_ELEMENT = 1
# Softmax: subtract the row max, exp, add into the row sum, divide by the sum, plus the compare of the max pass.
SOFTMAX_FLOPS_PER_ELEMENT = 5
# SiLU(x) = x / (1 + exp(-x)): negate, exp, add, divide.
SILU_FLOPS_PER_ELEMENT = 4
# The gated MLP's activation: SiLU(gate) × up, one multiply more.
GATED_ACT_FLOPS_PER_ELEMENT = SILU_FLOPS_PER_ELEMENT + 1
# Gated DeltaNet's output norm (Qwen3NextRMSNormGated): RMSNorm, then times SiLU(z): RMSNorm's 4, SiLU's 4, the
# multiply 1.
GATED_RMSNORM_FLOPS_PER_ELEMENT = RMSNORM_FLOPS_PER_ELEMENT + SILU_FLOPS_PER_ELEMENT + 1
# A sigmoid gate on an output (Qwen3-Next's gated attention, o·sigmoid(gate)): sigmoid 4 (negate, exp, add,
# divide) and the multiply 1.
SIGMOID_GATE_FLOPS_PER_ELEMENT = SILU_FLOPS_PER_ELEMENT + 1
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
# Squared ReLU (Nemotron-H's relu2, transformers' ReLUSquaredActivation): max(x, 0) 1, the square 1.
RELU2_FLOPS_PER_ELEMENT = 2
# Each norm kind's FLOPs per element (Model.norm), and its name in words.
NORM_FLOPS_PER_ELEMENT = {"rmsnorm": RMSNORM_FLOPS_PER_ELEMENT, "layernorm": LAYERNORM_FLOPS_PER_ELEMENT}
NORM_LABEL = {"rmsnorm": "RMSNorm", "layernorm": "LayerNorm"}
# The MLP activation of each model.mlp kind, FLOPs per element of its output (the gated kinds: the act of gate,
# then one multiply by up; clamped_swiglu's count has its product in it).
MLP_ACT_FLOPS_PER_ELEMENT = {
    "gated_silu": GATED_ACT_FLOPS_PER_ELEMENT,
    "gated_gelu_tanh": GELU_TANH_FLOPS_PER_ELEMENT + 1,
    "gelu_tanh": GELU_TANH_FLOPS_PER_ELEMENT,
    "clamped_swiglu": CLAMPED_SWIGLU_FLOPS_PER_ELEMENT,
    "relu2": RELU2_FLOPS_PER_ELEMENT,
}
MLP_ACT_FORMULA = {
    "gated_silu": "SiLU(gate)·up", "gated_gelu_tanh": "GELU_tanh(gate)·up", "gelu_tanh": "GELU_tanh(up)",
    "clamped_swiglu": "(clamp(up)+1)·g·σ(1.702g)", "relu2": "ReLU(up)²",
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
# DeepSeek Sparse Attention's indexer, per query, cached position and index head beyond the d_I-wide dot product
# (2·d_I): ReLU of the logit 1, times the head's weight 1, add into the position's score 1.
INDEX_HEAD_FLOPS_PER_SCORE = 3
# Its top-k selection over a query's scores: a radix (threshold) select compares each score once with the running
# threshold (vLLM's top_k_per_row, DeepSelect); a memory-bound pass over the scores, whatever k.
TOPK_SELECT_FLOPS_PER_ELEMENT = 1
# Position ids the indexer selects are int32 (the top-k kernels' output that FlashMLA's sparse kernels read).
POSITION_ID_BYTES = 4
# The router's top-k expert ids are int32 (what vLLM's and SGLang's routing kernels write).
EXPERT_ID_BYTES = 4

# The compute units an op's FLOPs run on: the tensor cores or the vector units.
Unit = Literal["tensor", "vector"]
# The unit whose roof an op sits under: a compute unit, or for a collective (kind "communication") the link it
# moves its bytes over, no compute unit.
OpUnit = Literal["tensor", "vector", "link"]
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
#   recurrent   a recurrent layer's core (Gated DeltaNet's delta rule): each sequence's fixed-size state read,
#               updated by each new token and written back, in place of attention over a KV cache
#   conv        a short causal depthwise convolution with its per-sequence state (Gated DeltaNet's, Mamba's)
#   indexer     a sparse-attention indexer's per-sequence work (DeepSeek-V3.2's lightning indexer): each query's
#               score of every cached position against its key cache, and the top-k selection over those scores
# Parallel serving adds: communication.
OpKind = Literal["linear", "attention", "norm", "elementwise", "gather", "copy", "matmul", "expert", "router",
                 "recurrent", "conv", "indexer", "communication"]
# The kinds whose work is each sequence's own (its cached positions, or its state): one kernel over a step's
# groups, each group counted alone (engine.count.attention.by_group); a serving step model prices them by group.
PER_SEQUENCE_KINDS: tuple[OpKind, ...] = ("attention", "recurrent", "conv", "indexer")


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
    ``window`` the positions a sliding layer attends to (None: all of them), ``chunk`` a chunked layer's; ``causal`` the mask; ``groups`` the
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
    chunk: int | None = None  # a chunked layer's chunk (Llama 4): each query sees its own chunk's positions
    # Sparse attention (DeepSeek-V3.2's DSA): each query attends to at most ``topk`` of the positions it sees, those
    # its indexer selected; its scores are min(visible, topk) a query.
    topk: int | None = None


def matmul_unit(dtype: str) -> Unit:
    """Where a matmul of ``dtype`` runs: the tensor cores, except fp32, which PyTorch runs on the vector units by
    default (TF32 is opt-in: a kernel that uses it counts its matmul as ``tf32``)."""
    return "vector" if dtype == "fp32" else "tensor"


@dataclass(frozen=True)
class Op:
    """One kernel's work: FLOPs and HBM bytes for one instance, and how many instances run in a step.

    ``kind`` says what the op is (see OpKind) and ``fuses`` the kinds of work folded into it beyond its own
    (``("norm",)`` for an RMSNorm in a projection's prologue); ``unit`` and ``dtype`` pick the compute roof (tensor cores at the op's data type for matmuls; the vector units
    in fp32 for elementwise work, which computes in fp32). A collective (kind "communication") has no compute
    roof: its unit is "link", its dtype the one it moves, and its ``bytes`` are what one GPU sends over the links,
    not HBM traffic. ``weight_bytes`` and ``kv_bytes`` are the parts of
    ``bytes`` that are weights read and KV cache read, for the step's totals. ``reads``/``writes``/``computes``
    say in words what the count is made of. ``per_model`` marks the ops that run once per step outside the
    layer stack (embedding, final norm, LM head), which the verdict keeps apart from the layers' ops: the LM head
    is a linear op, but batching does not move the layers' intensity through it.
    """

    name: str
    kind: OpKind
    flops: float
    bytes: float
    unit: OpUnit
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
    # A communication op of a group past the scale-up domain (engine/parallel/network.py): the part of ``bytes``
    # that crosses the scale-out network, and the network steps whose hop latency it pays; 0 within the domain.
    network_bytes: float = 0
    network_steps: int = 0
    # A communication op: the share of the GPU's interconnect bandwidth its sends reach (a mesh's g − 1 of d − 1
    # links for a group of g in a domain of d, engine/parallel/network.py; 1 behind a switch).
    link_share: float = 1.0
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
        if (self.flops < 0 or self.bytes <= 0 or self.count < 1 or not 0 <= self.network_bytes <= self.bytes
                or not 0 < self.link_share <= 1):
            raise ValueError(f"op {self.name}: flops {self.flops}, bytes {self.bytes}, count {self.count}, "
                             f"network bytes {self.network_bytes}, link share {self.link_share}")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per HBM byte."""
        return self.flops / self.bytes

    @property
    def compute_unit(self) -> Unit:
        """The compute unit an op that runs on the GPU's cores sits under; a collective has none (a ValueError:
        nothing that runs or measures kernels meets one)."""
        if self.unit == "link":
            raise ValueError(f"op {self.name}: a collective runs on no compute unit")
        return self.unit

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
