"""Plain-language verdicts on an analysis: why the step is bound where it is, and what would move it. Pure."""

from __future__ import annotations

from ..units import GIB, dtype_bytes
from .roofline import Analysis, Placement, batch_at_ridge


def is_linear(p: Placement) -> bool:
    """A linear layer: a matmul against weights (the projections and the LM head)."""
    return p.op.kind == "linear"


def layer_linears(a: Analysis) -> list[Placement]:
    """The layers' linear ops: the projections, without the once-per-model LM head (``Op.per_model``)."""
    return [p for p in a.placements if is_linear(p) and not p.op.per_model]


def _gb(x: float) -> str:
    return f"{x / 1e9:.2f} GB"


def linear_summary(a: Analysis) -> tuple[float, float | None]:
    """(intensity of the layers' linear ops together, the batch at which they would reach the ridge)."""
    linear = layer_linears(a)
    if not linear:
        return 0.0, None
    flops = sum(p.op.flops for p in linear)
    total = sum(p.op.bytes for p in linear)
    s = dtype_bytes(a.workload.dtype)
    weights = sum(p.op.weight_bytes for p in linear) / s
    io_per_row = sum(p.op.bytes - p.op.weight_bytes for p in linear) / (a.workload.tokens * s)
    return flops / total, batch_at_ridge(weights, io_per_row, a.workload.dtype, a.ridge)


def verdict(a: Analysis) -> list[str]:
    """A few sentences under the table."""
    w, t = a.workload, a.totals
    ridge = a.ridge
    lines: list[str] = []
    memory_share = sum(p.share for p in a.placements if p.bound == "memory")
    where = f"{a.gpu.id}'s ridge at {ridge:.0f} FLOP/byte ({w.dtype})"

    if w.phase in ("decode", "prefill"):
        intensity, turn = linear_summary(a)
        side = "left" if intensity < ridge else "right"
        bound = "memory-bound" if intensity < ridge else "compute-bound"
        if w.phase == "decode":
            lines.append(
                f"Decode reads every weight once per step for only {w.tokens} new token{'s' if w.tokens > 1 else ''}: the linear layers sit at "
                f"intensity {intensity:.1f} FLOP/byte (about 2·batch/bytes-per-weight), {side} of {where}: {bound}."
            )
            if turn is None:
                lines.append("They would not reach the ridge at any batch: the activations' traffic grows as fast.")
            elif intensity < ridge:
                lines.append(
                    f"Batching shares each weight read among more tokens: they would turn compute-bound at "
                    f"batch ≈ {turn:.0f}."
                )
            lines.append(
                f"Memory-bound ops take {memory_share:.0%} of the step; it reads {_gb(t.weight_bytes)} of weights and "
                f"{_gb(t.kv_cache_bytes)} of KV cache, and attention's intensity does not grow with batch, "
                f"since every sequence reads its own cache."
            )
        else:
            lines.append(
                f"Prefill pushes {w.tokens:,} tokens through each weight read: the linear layers sit at intensity "
                f"{intensity:.0f} FLOP/byte, {side} of {where}: {bound}. Time to first token: "
                f"{t.time_s * 1e3:.2f} ms."
            )
    else:
        lines.append(
            f"The attention core of {w.model.num_layers} layers at seq_len {w.tokens_per_seq:,}: "
            f"{memory_share:.0%} of its time is memory-bound against {where}."
        )
    if a.flash is not None:
        # Naive attention's traffic: every op of kind attention (qk, softmax, pv), the score matrix included.
        scores = sum(p.op.bytes * p.op.count for p in a.placements if p.op.kind == "attention")
        flash_bytes = sum(p.op.bytes * p.op.count for p in a.flash.placements if p.op.kind == "attention")
        lines.append(
            f"Naive attention moves {_gb(scores)} through HBM, most of it the score matrix; FlashAttention keeps the "
            f"scores on chip and moves {_gb(flash_bytes)}: the step would take "
            f"{a.flash.totals.time_s * 1e3:.2f} ms instead of {t.time_s * 1e3:.2f} ms."
        )
    fit = "fits" if t.fits else "does NOT fit"
    lines.append(
        f"Weights and KV cache take {t.memory_bytes / GIB:.1f} GiB of {t.capacity_bytes / GIB:.0f} GiB: {fit}; "
        f"the largest batch that fits at this length is {t.max_batch:,} (activations not counted)."
    )
    return lines
