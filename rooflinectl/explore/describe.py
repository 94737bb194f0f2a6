"""Plain-language notes on one operation: what it moves and computes, where it sits, what would move it. Pure.

Every number comes from the engine's Placement and Analysis; the rules below only choose which advice applies.
"""

from __future__ import annotations

from itertools import combinations

from ..engine.count.moe import tokens_to_touch
from ..engine.count.op import MLP_ACT_FORMULA, NORM_LABEL, Op
from ..engine.count.transformer import step_ops
from ..engine.roofline import ALL_EXPERTS, Analysis, Placement, linear_summary
from ..errors import UserError
from ..specs.choices import FUSIONS
from ..specs.load import validate
from ..specs.workload import Workload
from ..units import duration, number, si


def intensity_text(x: float) -> str:
    """1.79e+03 reads badly in a narrow column: 0.167, 4.04, 123, 1,794, 12.3k."""
    if x >= 1e4:
        return si(x, sep="")
    return number(x)


def placement_line(p: Placement) -> str:
    """One instance's FLOPs and bytes, and where the op sits against the ridge of its own roof."""
    if p.op.flops == 0:
        return f"no arithmetic: its time is {si(p.op.bytes, 'B')} / {p.bandwidth / 1e9:,.0f} GB/s"
    side = "left" if p.intensity < p.ridge else "right"
    return (
        f"{si(p.op.flops, 'FLOP')} / {si(p.op.bytes, 'B')} = {intensity_text(p.intensity)} FLOP/B, {side} of the "
        f"{p.op.dtype} {p.op.unit} ridge at {p.ridge:.0f}: {p.bound}-bound, "
        f"{number(p.attainable_flops / 1e12)} of {number(p.peak_flops / 1e12)} TFLOP/s"
    )


def _joined(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _folded(p: Placement, fused: list[Op]) -> str | None:
    """Where ``p``'s op goes in the fused ops that fold it into a neighbour (``Op.covers``; the neighbour is the
    fused op's own work, of its kind: the matmul, moe_combine, a post norm), in words: ``the prologue of q_proj,
    k_proj and v_proj``; None where none folds it."""
    role = (p.op.kind, p.op.elementwise)
    folding = [op for op in fused if p.name in [c.name for c in op.covers] and role != (op.kind, op.elementwise)]
    if not folding:
        return None
    hosts = []
    for op in folding:
        others = [c.name for c in op.covers if c.name != p.name]
        hosts.append(others[0] if len(others) == 1 else f"the matmul of {_joined(others)}")
    first = folding[0].covers[0].name == p.name
    # Where the op is folded in some kinds of layer only (DeepSeek's dense layers), the rest keep it apart.
    kept = sum(op.count for op in fused if op.name == p.name)
    some = f", in {p.op.count - kept} of its {p.op.count} layers" if kept else ""
    return f"the {'prologue' if first else 'epilogue'} of {_joined(hosts)}{some}"


def fusion_for(p: Placement, a: Analysis) -> str | None:
    """The --fuse option that folds this op into a neighbour, or None: the fewest options not yet given under
    which the engine's step has a fused op covering this one (``Op.covers``), and where it goes, in the model's
    own words (its norm, its activation's formula)."""
    w = a.workload
    missing = [f for f in FUSIONS if f not in w.fused]
    for size in (1, 2):
        for options in combinations(missing, size):
            try:
                fused = validate(Workload, {**dict(w), "fused": (*w.fused, *options)}, "fusion")
            except UserError:  # an option this model does not take (gate_up without a gate)
                continue
            where = _folded(p, step_ops(fused))
            if where is not None:
                return f"{' + '.join(options)} ({_work(p, a)} in {where})"
    return None


def _work(p: Placement, a: Analysis) -> str:
    """What the op does, in the model's words: its norm, its activation's formula, the residual add."""
    model = a.workload.model
    if p.op.kind == "norm":
        return NORM_LABEL[model.norm]
    if p.op.elementwise == "activation":
        return MLP_ACT_FORMULA[model.mlp]
    if p.op.elementwise == "residual":
        return "the add"
    return p.name


def hints(p: Placement, a: Analysis) -> list[str]:
    """What would move this op, most effective first, by rule: the op's kind, phase and bound."""
    w = a.workload
    out: list[str] = []
    kind = p.op.kind
    naive_attention = kind == "attention" and w.attention == "naive"  # qk, softmax, pv through HBM
    if naive_attention:
        out.append("FlashAttention (key a) keeps the scores on chip: this op's trip through HBM disappears")
    if p.bound == "memory":
        if kind == "linear" and w.phase == "decode":
            _, turn = linear_summary(a)
            at = f"; the linear layers reach the ridge near batch {turn:,.0f}" if turn else ""
            out.append(
                f"batching (key b): the sequences of a batch share one read of the weights, so FLOPs grow with "
                f"batch and bytes barely do{at}"
            )
        elif kind == "linear" and p.op.per_model:  # the LM head, for the last token of each sequence only
            out.append("more sequences per step (key b): logits are computed for the last token of each only")
        elif kind == "linear":
            out.append("more tokens per step (batch, prompt length) to reuse each read of the weights")
        elif kind == "expert":
            moe = w.model.moe
            assert moe is not None  # an expert op comes from a model with experts
            full = tokens_to_touch(moe.num_experts, moe.experts_per_token, ALL_EXPERTS)
            out.append(
                f"batching (key b): more tokens share each expert's read, but a larger batch also touches more "
                f"experts, until {ALL_EXPERTS:.0%} of the {moe.num_experts} are at batch {full:,} in decode; "
                f"from there on, batching shares every expert's read as it does a linear layer's"
            )
        elif kind == "router":
            out.append("more tokens per step: the H×E gate is read once for all of them, as a linear layer's "
                       "weights are")
        elif kind == "attention" and not naive_attention and w.phase == "decode":
            fewer = "" if w.model.mla is not None else " or fewer KV heads"  # MLA caches one latent for all heads
            out.append(
                f"batching does not help: each sequence reads its own KV cache; a narrower KV cache (--kv-dtype "
                f"fp8){fewer} cut its bytes"
            )
        elif fusion := fusion_for(p, a):
            out.append(f"fusion, --fuse {fusion}: its input and output skip the trip through HBM")
        elif kind == "norm":  # an MoE layer's mlp_norm, Q/K norms, the final norm
            out.append("no --fuse option folds it: it is written once, and the kernels after it read it back")
        elif p.op.flops == 0:
            out.append("nothing to compute: only fewer bytes (a narrower data type, fusion) or faster memory help")
        elif not naive_attention:
            out.append("fusion into a neighbouring kernel: for elementwise work the bytes are the whole cost")
        if kind in ("linear", "expert") and w.dtype in ("fp32", "bf16", "fp16"):
            out.append("narrower weights (fp8 or int8, key d) halve the bytes of every weight read")
        out.append(f"faster memory (key g): its time is bytes / {p.bandwidth / 1e9:,.0f} GB/s")
    else:
        faster = _faster_peak(p, a)
        if faster:
            out.append(faster)
        out.append("a GPU with more FLOP/s (key g): it already runs at its compute roof")
    return out


def _faster_peak(p: Placement, a: Analysis) -> str | None:
    """A narrower data type on the same unit with a higher peak, if the GPU has one (fp8 before int8)."""
    table = a.roofs.tensor_tflops if p.op.unit == "tensor" else a.roofs.vector_tflops
    for dtype in ("fp8", "int8", "bf16", "fp16"):
        tf = table.get(dtype)
        if tf and tf * 1e12 > p.peak_flops and dtype != p.op.dtype:
            return (
                f"lower precision (key d): {dtype} peaks at {number(tf)} TFLOP/s on {a.gpu.id}, "
                f"against {number(p.peak_flops / 1e12)} for {p.op.dtype}"
            )
    return None


def describe(p: Placement, a: Analysis) -> list[str]:
    """A few lines on ``p``: identity and cost, reads, writes, computes, placement, what would move it."""
    count = f" ×{p.op.count}" if p.op.count > 1 else ""
    fuses = "".join(f"+{k}" for k in p.op.fuses)  # the kinds of work folded into it: linear+norm
    return [
        f"{p.name}{count} ({p.op.kind}{fuses}): {duration(p.total_time_s)}, {p.share:.1%} of the step",
        f"reads    {p.op.reads}",
        f"writes   {p.op.writes}",
        f"computes {p.op.computes}",
        placement_line(p),
        *([f"time     {duration(p.time_s)} by {p.time_model}; {duration(p.roofline_time_s)} at the roofs"]
          if p.time_model is not None else []),
        *(f"→ {h}" for h in hints(p, a)),
    ]
