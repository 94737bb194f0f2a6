"""The parts every attention block is built from, GQA's (``engine.count.transformer``) and MLA's (``engine.count.mla``): a
linear layer in the workload's weight format, with the model's norm in its prologue, and the residual add (its
own kernel or in an epilogue). Counting rules as in ``engine.count.transformer``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...specs.workload import Workload
from ...units import dtype_bytes
from .op import RESIDUAL_FLOPS_PER_ELEMENT, Op, covering
from .primitives import matmul_op, rmsnorm_linear_op
from .quant import linear_weight_bytes


def quantized(w: Workload, expert: bool) -> bool:
    """Whether a linear layer's weights take the workload's quantized format: every linear layer when the step
    is quantized, except that a model whose format covers its experts only (``Model.quantized``: gpt-oss's
    MXFP4) keeps the other linear layers (attention, dense and shared MLPs) in ``dtype``."""
    return w.quantized and (expert or w.model.quantized == "linear")


def linear(w: Workload, name: str, k: int, n: int, rows: int | None = None) -> Op:
    """A linear layer of the block over ``rows`` (default the step's N tokens), its k×n weights in the
    workload's weight format (engine.count.quant: scales counted), its input read and output written in ``dtype``,
    multiplied in ``matmul_dtype``."""
    m = w.tokens if rows is None else rows
    if not quantized(w, expert=False):
        return matmul_op(name, m, k, n, w.dtype)
    return matmul_op(name, m, k, n, w.dtype, weight_dtype=w.weights, w_bytes=linear_weight_bytes(w, k, n),
                     compute_dtype=w.matmul_dtype)


def projection(w: Workload, name: str, k: int, n: int, norm: bool) -> Op:
    """A linear layer of the block; with ``norm`` the preceding norm runs in its prologue (norm_linear)."""
    if norm:
        if not quantized(w, expert=False):
            return rmsnorm_linear_op(name, w.tokens, k, n, w.dtype, norm=w.model.norm)
        return rmsnorm_linear_op(name, w.tokens, k, n, w.dtype, weight_dtype=w.weights,
                                 w_bytes=linear_weight_bytes(w, k, n), compute_dtype=w.matmul_dtype,
                                 norm=w.model.norm)
    return linear(w, name, k, n)


def projections(parts: list[Op], norm: Op | None, one: str | None, build: Callable[[str, int, bool], Op]) -> list[Op]:
    """The projections that read one input (Q, K, V; gate, up), ``parts`` as each is built alone: as they are,
    or as one matmul named ``one`` over their widths (qkv, gate_up); with ``norm`` (norm_linear) that norm in
    the prologue of each, named ``<norm>+<projection>``. ``build(name, n_out, with_norm)`` builds a projection;
    each fused op covers the norm and the projections whose work it does (``Op.covers``)."""
    groups = [(one, parts)] if one is not None else [(p.name, [p]) for p in parts]
    prefix = "" if norm is None else norm.name + "+"
    out = []
    for name, group in groups:
        if norm is None and len(group) == 1:
            out.append(group[0])
            continue
        widths = sum(p.gemm.n for p in group if p.gemm is not None)
        out.append(covering(build(prefix + name, widths, norm is not None), *([norm] if norm else []), *group))
    return out


def with_residual(op: Op, w: Workload, name: str) -> Op:
    """Fold the residual add ``name`` (:func:`residual`) into an op's epilogue (a projection, moe_combine, or a
    post norm): read the residual stream, add, write once."""
    extra = w.tokens * w.model.hidden_size
    return replace(
        covering(op, op, residual(name, w)),
        name=op.name + "+residual",
        flops=op.flops + RESIDUAL_FLOPS_PER_ELEMENT * extra,
        bytes=op.bytes + extra * dtype_bytes(w.dtype),
        reads=op.reads + ", residual",
        computes=op.computes + ", + residual add",
        fuses=(*op.fuses, "elementwise"),
    )


def residual(name: str, w: Workload) -> Op:
    """The residual add x + branch over N×H: reads both, writes the sum; 1 FLOP per element."""
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
        elementwise="residual",
        tensor=(w.tokens, w.model.hidden_size),
    )
