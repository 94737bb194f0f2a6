"""One runnable case for each engine op of a workload's step, at the op's exact shapes and data types.

A case names the kernel that runs it (``runners.py``) and the tensors it reads and writes (``TensorSpec``), built
from the op's kind and shape fields (``Op.gemm``, ``Op.tensor``, ``Op.attention``, ``Op.covers``), never from its
name. Its bytes (each input read once, each output written once, in its data type) are the engine op's: the
tests hold every case to it, and recount the engine's ops by hand (tests/measure/test_workload_recount.py).

Shapes, for a step of B sequences, T new tokens each (N = B·T), Lk positions attended, h heads, g KV heads
(r = h/g), d head dim, V the vocabulary, H hidden; by the op's kind:

  gather (embed)   ids [N] (not counted: the engine counts the rows read), table [V, H] (min(N, V) distinct rows
                   read: the ids are distinct, ``execute.materialize``), out [N, H]
  norm             x [rows, width], gain [width] → [rows, width] (``Op.tensor``)
  linear           x [M, K], W [N_out, K] (+ bias [N_out]) (+ residual [M, N_out]) → [M, N_out] (``Op.gemm``; the
                   LM head's M is B, the last token of each sequence); covering a norm: gain [K] too, the Triton
                   rmsnorm_linear kernel
  elementwise      rope: q [N, h, d], k [N, g, d], cos and sin [N, d/2] → q, k; activation: gate and up [rows,
                   width] → [rows, width]; residual: a and b [rows, width] → [rows, width]
  copy (kv_write)  new K and V [B, T, g, d] → their slices of the caches [B, g, held, d] (the caches not read)
  attention        flash: q [B, T, h, d], K and V [B, g, Lk, d] → O [B, h, T, d] (SDPA; Lk = the positions read);
                   naive: qk q [B·g, r·T, d], K [B·g, Lk, d] → S [B·g, r·T, Lk]; softmax S → P; pv P,
                   V [B·g, Lk, d] → O [B·g, r·T, d] (``Op.attention``)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...engine.count.attention import kv_positions_held, positions_read
from ...engine.count.op import Op
from ...engine.count.transformer import step_ops
from ...errors import UserError
from ...specs.workload import Workload
from ...units import dtype_bytes
from .support import check_supported

INDEX_DTYPE = "int64"  # token ids, as F.embedding takes them


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


def runner_on(runner: str, device: str) -> str:
    """``runner``'s words for the device that ran it: a GPU's matmuls are cuBLAS's; on the CPU torch calls the BLAS
    it was built with (MKL, oneDNN or OpenBLAS), so the words name that, never cuBLAS."""
    return runner if device == "cuda" else runner.replace("cuBLAS", "torch's CPU BLAS")


@dataclass(frozen=True)
class Case:
    """The engine op (its count included) and how to run it: ``family`` picks the runner (``execute.run``)."""

    op: Op
    family: str  # linear, norm_linear, rmsnorm, rope, kv_write, sdpa, qk, softmax, pv, act, residual, embed
    runner: str  # the kernel, in words
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[tuple[int, ...], ...]  # the shapes written, in ``dtype``
    dtype: str
    params: dict[str, int | bool] = field(default_factory=dict)

    @property
    def alloc_bytes(self) -> int:
        """Bytes one run of the case allocates: its input tensors and its outputs in ``dtype``."""
        return sum(t.nbytes for t in self.inputs) + sum(math.prod(s) for s in self.outputs) * int(dtype_bytes(
            self.dtype))

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


def _linear_case(w: Workload, op: Op) -> Case:
    """A projection (or the LM head) at its GEMM's sizes, with what its kernel folds in: the norm in its prologue
    (the Triton rmsnorm_linear kernel), its bias, the residual add in its epilogue (cuBLAS's β = 1)."""
    a = w.dtype
    g = op.gemm
    assert g is not None  # every linear op is built by matmul_op
    rows, k, n = g.m, g.k, g.n
    parts = op.parts
    norm_in = any(p.kind == "norm" for p in parts)
    residual = any(p.elementwise == "residual" for p in parts)
    if any(p.elementwise == "activation" for p in parts):
        raise UserError(f"measure --workload: op {op.name}: no runner puts the activation in a GEMM's epilogue")
    specs = [TensorSpec("x", (rows, k), a, "randn"), TensorSpec("w", (n, k), a, "weight")]
    if norm_in:
        specs.append(TensorSpec("g", (k,), a, "gain"))
    if g.bias:
        specs.append(TensorSpec("bias", (n,), a, "randn"))
    if residual:
        specs.append(TensorSpec("residual", (rows, n), a, "randn"))
    if norm_in:
        runner = "Triton rmsnorm_linear (kernels/rmsnorm_linear.py), gain folded into W"
        family = "norm_linear"
    else:
        runner = "torch.addmm(residual, x, Wᵀ) (cuBLAS, β = 1)" if residual else \
            "F.linear (cuBLAS " + ("addmm, bias in the epilogue)" if g.bias else "mm)")
        family = "linear"
    return Case(op, family, runner, tuple(specs), ((rows, n),), a)


def _attention_case(w: Workload, op: Op) -> Case:
    """SDPA for the flash kernel, or naive attention's qk, softmax and pv, at the op's attention shape: its one
    group of B sequences of T new tokens reading Lk positions (``engine.count.attention.positions_read``)."""
    s = op.attention
    assert s is not None  # every attention op carries its shape
    a = w.dtype
    (seqs,) = s.groups  # check_supported: a decode or a prefill step, one group
    b, t, d, h, g = seqs.count, seqs.new, s.d_qk, s.heads, s.kv_heads
    r = h // g
    lk = positions_read(seqs, s.window)
    if s.part == "flash":
        causal = s.causal and t > 1  # a decode step's one query attends to every position read
        specs: tuple[TensorSpec, ...] = (TensorSpec("q", (b, t, h, d), a, "randn"),
                                         TensorSpec("k", (b, g, lk, d), a, "randn"),
                                         TensorSpec("v", (b, g, lk, d), a, "randn"))
        return Case(op, "sdpa", "F.scaled_dot_product_attention (enable_gqa)", specs, ((b, h, t, d),), a,
                    {"causal": causal})
    scores = (b * g, r * t, lk)
    if s.part == "qk":
        specs = (TensorSpec("q", (b * g, r * t, d), a, "randn"), TensorSpec("k", (b * g, lk, d), a, "randn"))
        return Case(op, "qk", "torch.baddbmm (cuBLAS; scores to HBM)", specs, (scores,), a)
    if s.part == "softmax":
        return Case(op, "softmax", "torch.softmax", (TensorSpec("s", scores, a, "randn"),), (scores,), a)
    specs = (TensorSpec("p", scores, a, "randn"), TensorSpec("v", (b * g, lk, d), a, "randn"))
    return Case(op, "pv", "torch.bmm (cuBLAS)", specs, ((b * g, r * t, d),), a)


def _kv_write_case(w: Workload, op: Op) -> Case:
    """The new K and V copied into a cache of the positions a layer holds (a full layer's, unless every layer
    slides: ``engine.count.attention.kv_positions_held``); a decode step's token in the last slot (a ring buffer
    through a window)."""
    m, a = w.model, w.dtype
    b, t, g, d = w.batch, w.tokens_per_seq, m.num_kv_heads, m.head_dim
    held = kv_positions_held(w, m.sliding_window if m.sliding_layers == m.num_layers else None)
    start = 0 if w.phase == "prefill" else (w.kv_len - 1) % held
    specs = (TensorSpec("k_new", (b, t, g, d), a, "randn"), TensorSpec("v_new", (b, t, g, d), a, "randn"),
             TensorSpec("cache_k", (b, g, held, d), a, "nan", read=False),
             TensorSpec("cache_v", (b, g, held, d), a, "nan", read=False))
    return Case(op, "kv_write", "Tensor.copy_ into the cache's slice (K, then V)", specs,
                ((b, g, t, d), (b, g, t, d)), a, {"start": start})


def _case(w: Workload, op: Op) -> Case:
    """The case of ``op``, by its kind and shape fields (never its name)."""
    m = w.model
    a = w.dtype
    n_tok, hid = w.tokens, m.hidden_size
    specs: tuple[TensorSpec, ...]
    if op.kind == "linear":
        return _linear_case(w, op)
    if op.covers:
        raise UserError(f"measure --workload: op {op.name}: no runner for this fusion")
    if op.kind == "attention":
        return _attention_case(w, op)
    if op.kind == "gather":
        rows = min(n_tok, m.vocab_size)
        specs = (TensorSpec("ids", (n_tok,), INDEX_DTYPE, "ids", read=False),
                 TensorSpec("table", (m.vocab_size, hid), a, "randn", counted=rows * hid * int(dtype_bytes(a))))
        return Case(op, "embed", "F.embedding (a gather)", specs, ((n_tok, hid),), a)
    if op.kind == "copy":
        return _kv_write_case(w, op)
    if op.kind == "norm" and op.tensor is not None:
        rows, width = op.tensor
        specs = (TensorSpec("x", (rows, width), a, "randn"), TensorSpec("g", (width,), a, "gain"))
        return Case(op, "rmsnorm", "F.rms_norm", specs, ((rows, width),), a)
    if op.elementwise == "rope":
        h, g, d = m.num_heads, m.num_kv_heads, m.head_dim
        specs = (TensorSpec("q", (n_tok, h, d), a, "randn"), TensorSpec("k", (n_tok, g, d), a, "randn"),
                 TensorSpec("cos", (n_tok, d // 2), a, "cos"), TensorSpec("sin", (n_tok, d // 2), a, "sin"))
        return Case(op, "rope", "torch ops (mul, sub, add, cat), rotate_half convention", specs,
                    ((n_tok, h, d), (n_tok, g, d)), a)
    if op.elementwise == "activation" and op.tensor is not None:
        rows, width = op.tensor
        specs = (TensorSpec("gate", (rows, width), a, "randn"), TensorSpec("up", (rows, width), a, "randn"))
        return Case(op, "act", "F.silu(gate) * up", specs, ((rows, width),), a)
    if op.elementwise == "residual" and op.tensor is not None:
        rows, width = op.tensor
        specs = (TensorSpec("a", (rows, width), a, "randn"), TensorSpec("b", (rows, width), a, "randn"))
        return Case(op, "residual", "a + b", specs, ((rows, width),), a)
    raise UserError(f"measure --workload: op {op.name}: no runner for it")


def build_cases(w: Workload) -> list[Case]:
    """A case for every op of ``w``'s step (``engine.count.transformer.step_ops``), in the step's order; a UserError
    first when ``w`` has a feature measure --workload cannot run."""
    check_supported(w)
    return [_case(w, op) for op in step_ops(w)]
