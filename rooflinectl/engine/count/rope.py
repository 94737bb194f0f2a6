"""Positions in a GQA block: RoPE on Q and K, and what a NoPE layer does in its place (Llama 4's iRoPE).

- ``rope``: the first ``rotary`` dimensions of each head of Q and K rotated (all of them but where
  ``rotary_dim`` says fewer: Phi-3's partial_rotary_factor), ROPE_FLOPS_PER_ELEMENT each; reads and writes those
  elements and each token's cos and sin rows (rotary/2 each).
- ``qk_l2_norm`` (Llama 4 Scout's ``use_qk_norm``, on its RoPE layers only, after RoPE): a weightless RMSNorm
  over each head of Q and K, N·(h + g) rows of d; reads and writes them, no gain.
- ``q_temperature`` (Llama 4's ``attn_temperature_tuning``, on its NoPE layers): Q times a per-position scale,
  Q_TEMPERATURE_FLOPS_PER_ELEMENT each; reads and writes Q and reads each token's scale.
Elementwise work runs on the vector units in fp32.
"""

from __future__ import annotations

from ...specs.workload import Workload
from ...units import dtype_bytes
from .op import (
    Q_TEMPERATURE_FLOPS_PER_ELEMENT,
    ROPE_FLOPS_PER_ELEMENT,
    WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT,
    Op,
)


def rope_op(w: Workload) -> Op:
    """RoPE on Q and K (module docstring)."""
    m = w.model
    n, a = w.tokens, dtype_bytes(w.dtype)
    rotated = n * (m.num_heads + m.num_kv_heads) * m.rotary
    part = "" if m.rotary == m.head_dim else f" (the first {m.rotary} of each head's {m.head_dim})"
    return Op(
        name="rope",
        kind="elementwise",
        flops=ROPE_FLOPS_PER_ELEMENT * rotated,
        # Q and K in and out, and each token's cos and sin rows (rotary/2 each).
        bytes=2 * rotated * a + n * m.rotary * a,
        unit="vector",
        dtype="fp32",
        reads=f"Q and K ({rotated:,} elements{part}), cos/sin rows of {w.tokens} positions",
        writes="Q and K, rotated",
        computes=f"{ROPE_FLOPS_PER_ELEMENT} FLOPs per element (4 multiplies, 2 adds per pair)",
        elementwise="rope",
    )


def qk_l2_norm_op(w: Workload) -> Op:
    """The weightless RMSNorm over each head of Q and K (module docstring)."""
    m = w.model
    rows = w.tokens * (m.num_heads + m.num_kv_heads)
    elements = rows * m.head_dim
    return Op(
        name="qk_l2_norm",
        kind="norm",
        flops=WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT * elements,
        bytes=2 * elements * dtype_bytes(w.dtype),
        unit="vector",
        dtype="fp32",
        reads=f"Q and K, {rows:,} heads of {m.head_dim}",
        writes="Q and K, normed",
        computes=f"{WEIGHTLESS_RMSNORM_FLOPS_PER_ELEMENT} FLOPs per element (square, sum, scale by 1/rms; no gain)",
        tensor=(rows, m.head_dim),
    )


def q_temperature_op(w: Workload) -> Op:
    """The NoPE layers' position-scaled queries (module docstring)."""
    m = w.model
    elements = w.tokens * m.q_dim
    a = dtype_bytes(w.dtype)
    return Op(
        name="q_temperature",
        kind="elementwise",
        flops=Q_TEMPERATURE_FLOPS_PER_ELEMENT * elements,
        bytes=2 * elements * a + w.tokens * a,
        unit="vector",
        dtype="fp32",
        reads=f"Q {w.tokens}×{m.q_dim}, a scale per token",
        writes="Q, scaled",
        computes=f"{Q_TEMPERATURE_FLOPS_PER_ELEMENT} multiply per element by 1 + β·log1p(⌊(p + 1)/floor⌋)",
    )


def position_ops(w: Workload, rotates: bool) -> list[Op]:
    """What a layer does for positions between its projections and its KV write: RoPE (and Scout's Q/K norm) on
    a RoPE layer, the query temperature (where the model has it) on a NoPE one."""
    m = w.model
    if rotates:
        return [rope_op(w), *([qk_l2_norm_op(w)] if m.rope_qk_l2_norm else [])]
    return [q_temperature_op(w)] if m.attn_temperature_tuning else []
