"""One runnable case for each engine op of a workload's step, at the op's exact shapes and data types.

A case names the kernel that runs it (``runners.py``), the tensors it reads and writes (``TensorSpec``), and its
own FLOP and byte count, computed from those shapes by the engine's rules (DESIGN.md: each input read once, each
output written once, in its data type; the FLOP constants of ``engine.op``). ``build_cases`` raises
``CountMismatch`` when a case's count differs from the engine op's by one FLOP or one byte: the measurement would
then be of other work than the prediction it is set against (a bug, never a user's input).

Shapes, for a step of B sequences, T new tokens each (N = B·T), Lk positions attended, H hidden, h heads, g KV
heads (r = h/g), d head dim, I the MLP's width, V the vocabulary:

  embed            ids [N] (not counted: the engine counts the rows read), table [V, H] (min(N, V) distinct rows
                   read: the ids are distinct, ``execute.materialize``), out [N, H]
  *_norm           x [rows, H], gain [H] → [rows, H]
  *_proj, lm_head  x [M, K], W [N_out, K] (+ bias [N_out]) (+ residual [M, N_out]) → [M, N_out]; M = N (lm_head: B,
                   the last token of each sequence)
  attn_norm+…      x [M, K], W_g [N_out, K], gain [K] (+ bias) → [M, N_out] (the Triton rmsnorm_linear kernel)
  rope             q [N, h, d], k [N, g, d], cos and sin [N, d/2] → q, k
  kv_write         new K and V [B, T, g, d] → their slices of the caches [B, g, held, d] (the caches not read)
  attention        q [B, T, h, d], K and V [B, g, Lk, d] → O [B, h, T, d] (SDPA; Lk = the positions read)
  qk / softmax/ pv q [B·g, r·T, d], K [B·g, Lk, d] → S [B·g, r·T, Lk]; S → P; P, V [B·g, Lk, d] → O [B·g, r·T, d]
  act              gate and up [N, I] → [N, I];  *_residual  a and b [N, H] → [N, H]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...engine.attention import positions_read, window_of
from ...engine.op import (
    BIAS_FLOPS_PER_ELEMENT,
    GATED_ACT_FLOPS_PER_ELEMENT,
    RESIDUAL_FLOPS_PER_ELEMENT,
    RMSNORM_FLOPS_PER_ELEMENT,
    ROPE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Op,
)
from ...engine.transformer import step_ops
from ...errors import UserError
from ...specs.workload import Workload
from ...units import dtype_bytes
from .support import check_supported

INDEX_DTYPE = "int64"  # token ids, as F.embedding takes them


class CountMismatch(AssertionError):
    """A case's own count differs from the engine op's: a bug in the case or in the engine."""


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a case: its shape, data type and how it is filled (``execute.materialize``).

    init: randn (N(0, 1)), weight (N(0, 1/K) for a [N, K] matrix: outputs of order 1), gain (1 + N(0, 1/4)),
    ids (distinct token ids), cos / sin (RoPE tables), nan (a buffer written by the op: the KV cache).
    ``read``: counted as read by the op. ``counted`` overrides the bytes counted where the engine's rule reads
    part of the tensor (the embedding table's distinct rows)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    init: str
    read: bool = True
    counted: int | None = None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * (8 if self.dtype == INDEX_DTYPE else int(dtype_bytes(self.dtype)))

    @property
    def counted_bytes(self) -> int:
        if not self.read:
            return 0
        return self.nbytes if self.counted is None else self.counted


@dataclass(frozen=True)
class Case:
    """The engine op (its count included) and how to run it: ``family`` picks the runner (``execute.run``)."""

    op: Op
    family: str  # linear, norm_linear, rmsnorm, rope, kv_write, sdpa, qk, softmax, pv, act, residual, embed
    runner: str  # the kernel, in words
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[tuple[int, ...], ...]  # the shapes written, in ``dtype``
    dtype: str
    flops: int  # one instance, from the shapes
    params: dict[str, int | bool] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def count(self) -> int:
        return self.op.count

    @property
    def bytes(self) -> int:
        """Inputs read once and outputs written once, in their data types (DESIGN.md)."""
        written = sum(_numel(s) for s in self.outputs) * int(dtype_bytes(self.dtype))
        return sum(t.counted_bytes for t in self.inputs) + written

    def spec(self, name: str) -> TensorSpec:
        return next(t for t in self.inputs if t.name == name)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# --- the projections: (K, N_out) of each by its name ----------------------------------------------------------

def _linear_shape(w: Workload, base: str) -> tuple[int, int]:
    m = w.model
    h, q, kv, i = m.hidden_size, m.q_dim, m.kv_dim, m.intermediate_size
    shapes = {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "qkv_proj": (h, q + 2 * kv),
              "o_proj": (q, h), "gate_proj": (h, i), "up_proj": (h, i), "gate_up_proj": (h, 2 * i),
              "down_proj": (i, h), "lm_head": (h, m.vocab_size)}
    return shapes[base]


LINEARS = ("q_proj", "k_proj", "v_proj", "qkv_proj", "o_proj", "gate_proj", "up_proj", "gate_up_proj",
           "down_proj", "lm_head")
NORMS = ("attn_norm", "mlp_norm", "final_norm")
QKV = ("q_proj", "k_proj", "v_proj", "qkv_proj")


def split_fused_name(name: str) -> tuple[bool, str, bool]:
    """(norm in the prologue, the base name, residual in the epilogue) of an engine op's name."""
    norm_in = name.startswith(("attn_norm+", "mlp_norm+"))
    base = name.split("+", 1)[1] if norm_in else name
    residual = base.endswith("+residual")
    return norm_in, base.removesuffix("+residual"), residual


def _linear_case(w: Workload, op: Op, norm_in: bool, base: str, residual: bool) -> Case:
    a = w.dtype
    k, n = _linear_shape(w, base)
    rows = w.batch if base == "lm_head" else w.tokens
    bias = w.model.qkv_bias and base in QKV
    specs = [TensorSpec("x", (rows, k), a, "randn"), TensorSpec("w", (n, k), a, "weight")]
    flops = 2 * rows * k * n
    if norm_in:
        specs.append(TensorSpec("g", (k,), a, "gain"))
        flops += RMSNORM_FLOPS_PER_ELEMENT * rows * k
    if bias:
        specs.append(TensorSpec("bias", (n,), a, "randn"))
        flops += BIAS_FLOPS_PER_ELEMENT * rows * n
    if residual:
        specs.append(TensorSpec("residual", (rows, n), a, "randn"))
        flops += RESIDUAL_FLOPS_PER_ELEMENT * rows * n
    if norm_in:
        runner = "Triton rmsnorm_linear (kernels/rmsnorm_linear.py), gain folded into W"
        family = "norm_linear"
    else:
        runner = "torch.addmm(residual, x, Wᵀ) (cuBLAS, β = 1)" if residual else \
            "F.linear (cuBLAS " + ("addmm, bias in the epilogue)" if bias else "mm)")
        family = "linear"
    return Case(op, family, runner, tuple(specs), ((rows, n),), a, flops)


def _attention_case(w: Workload, op: Op, base: str) -> Case:
    m = w.model
    a = w.dtype
    b, t, d, h, g = w.batch, w.tokens_per_seq, m.head_dim, m.num_heads, m.num_kv_heads
    r = h // g
    lk = positions_read(w.uniform, window_of(w, base.endswith("_local")))
    core = base.removesuffix("_local")
    if core == "attention":
        causal = w.causal and t > 1
        # Scores per (sequence, head): each of the T queries at the end of Lk positions sees Lk − T + i + 1 of
        # them with the causal mask, T·(Lk − T) + T·(T + 1)/2 in all; T·Lk without it (a decode step: Lk).
        per_head = t * (lk - t) + t * (t + 1) // 2 if causal else t * lk
        flops = b * h * per_head * (4 * d + SOFTMAX_FLOPS_PER_ELEMENT)
        specs: tuple[TensorSpec, ...] = (TensorSpec("q", (b, t, h, d), a, "randn"), TensorSpec("k", (b, g, lk, d), a, "randn"),
                 TensorSpec("v", (b, g, lk, d), a, "randn"))
        return Case(op, "sdpa", "F.scaled_dot_product_attention (enable_gqa)", specs, ((b, h, t, d),), a, flops,
                    {"causal": causal})
    scores = (b * g, r * t, lk)
    if core == "qk":
        specs = (TensorSpec("q", (b * g, r * t, d), a, "randn"), TensorSpec("k", (b * g, lk, d), a, "randn"))
        return Case(op, "qk", "torch.baddbmm (cuBLAS; scores to HBM)", specs, (scores,), a,
                    2 * d * _numel(scores))
    if core == "softmax":
        return Case(op, "softmax", "torch.softmax", (TensorSpec("s", scores, a, "randn"),), (scores,), a,
                    SOFTMAX_FLOPS_PER_ELEMENT * _numel(scores))
    specs = (TensorSpec("p", scores, a, "randn"), TensorSpec("v", (b * g, lk, d), a, "randn"))
    return Case(op, "pv", "torch.bmm (cuBLAS)", specs, ((b * g, r * t, d),), a, 2 * d * _numel(scores))


def _case(w: Workload, op: Op) -> Case:
    m = w.model
    a = w.dtype
    n_tok, hid = w.tokens, m.hidden_size
    norm_in, base, residual = split_fused_name(op.name)
    specs: tuple[TensorSpec, ...]
    if base in LINEARS:
        return _linear_case(w, op, norm_in, base, residual)
    if norm_in or residual:
        raise UserError(f"measure --workload: op {op.name}: no runner for this fusion")
    if base == "embed":
        rows = min(n_tok, m.vocab_size)
        specs = (TensorSpec("ids", (n_tok,), INDEX_DTYPE, "ids", read=False),
                 TensorSpec("table", (m.vocab_size, hid), a, "randn", counted=rows * hid * int(dtype_bytes(a))))
        return Case(op, "embed", "F.embedding (a gather)", specs, ((n_tok, hid),), a, 0)
    if base in NORMS:
        specs = (TensorSpec("x", (n_tok, hid), a, "randn"), TensorSpec("g", (hid,), a, "gain"))
        return Case(op, "rmsnorm", "F.rms_norm", specs, ((n_tok, hid),), a,
                    RMSNORM_FLOPS_PER_ELEMENT * n_tok * hid)
    if base == "rope":
        h, g, d = m.num_heads, m.num_kv_heads, m.head_dim
        specs = (TensorSpec("q", (n_tok, h, d), a, "randn"), TensorSpec("k", (n_tok, g, d), a, "randn"),
                 TensorSpec("cos", (n_tok, d // 2), a, "cos"), TensorSpec("sin", (n_tok, d // 2), a, "sin"))
        return Case(op, "rope", "torch ops (mul, sub, add, cat), rotate_half convention", specs,
                    ((n_tok, h, d), (n_tok, g, d)), a, ROPE_FLOPS_PER_ELEMENT * n_tok * (h + g) * d)
    if base == "kv_write":
        b, t, g, d = w.batch, w.tokens_per_seq, m.num_kv_heads, m.head_dim
        held = min(w.kv_len, m.sliding_window) if m.sliding_window is not None and m.sliding_layers == m.num_layers \
            else w.kv_len
        # A decode step's token goes in the last slot of the positions held (a ring buffer through a window).
        start = 0 if w.phase == "prefill" else (w.kv_len - 1) % held
        specs = (TensorSpec("k_new", (b, t, g, d), a, "randn"), TensorSpec("v_new", (b, t, g, d), a, "randn"),
                 TensorSpec("cache_k", (b, g, held, d), a, "nan", read=False),
                 TensorSpec("cache_v", (b, g, held, d), a, "nan", read=False))
        return Case(op, "kv_write", "Tensor.copy_ into the cache's slice (K, then V)", specs,
                    ((b, g, t, d), (b, g, t, d)), a, 0, {"start": start})
    if base.removesuffix("_local") in ("attention", "qk", "softmax", "pv"):
        return _attention_case(w, op, base)
    if base == "act":
        i = m.intermediate_size
        specs = (TensorSpec("gate", (n_tok, i), a, "randn"), TensorSpec("up", (n_tok, i), a, "randn"))
        return Case(op, "act", "F.silu(gate) * up", specs, ((n_tok, i),), a,
                    GATED_ACT_FLOPS_PER_ELEMENT * n_tok * i)
    if base in ("attn_residual", "mlp_residual"):
        specs = (TensorSpec("a", (n_tok, hid), a, "randn"), TensorSpec("b", (n_tok, hid), a, "randn"))
        return Case(op, "residual", "a + b", specs, ((n_tok, hid),), a, RESIDUAL_FLOPS_PER_ELEMENT * n_tok * hid)
    raise UserError(f"measure --workload: op {op.name}: no runner for it")


def check_count(case: Case) -> Case:
    """``case`` when its own count is the engine op's, FLOP for FLOP and byte for byte; else CountMismatch."""
    if case.flops != case.op.flops or case.bytes != case.op.bytes:
        raise CountMismatch(f"{case.name}: the case counts {case.flops} FLOPs and {case.bytes} bytes, the engine "
                            f"{case.op.flops} and {case.op.bytes}")
    return case


def build_cases(w: Workload) -> list[Case]:
    """A case for every op of ``w``'s step (``engine.transformer.step_ops``), in the step's order, each count
    checked against the engine's; a UserError first when ``w`` has a feature measure --workload cannot run."""
    check_supported(w)
    return [check_count(_case(w, op)) for op in step_ops(w)]
