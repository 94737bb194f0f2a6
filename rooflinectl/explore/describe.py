"""Plain-language notes on one operation: what it moves and computes, where it sits, what would move it. Pure.

Every number comes from the engine's Placement and Analysis; the rules below only choose which advice applies.
"""

from __future__ import annotations

from ..engine.explain import ALL_EXPERTS, linear_summary
from ..engine.moe import tokens_to_touch
from ..engine.roofline import Analysis, Placement
from ..units import duration, number, si

# The ops that a --fuse option folds into a neighbouring matmul's prologue or epilogue, and that option. Which
# option folds which op is decided where the block is built (engine/transformer.py's layer_ops); until the Op
# says so itself, this table names them: the one place in explore that still reads an op's name.
FUSABLE = {
    "attn_norm": "norm_linear (RMSNorm in the prologue of q/k/v_proj)",
    "mlp_norm": "norm_linear (RMSNorm in the prologue of gate/up_proj)",
    "act": "gate_up + act (SiLU(gate)·up in the epilogue of the gate_up matmul)",
    "attn_residual": "residual (the add in the epilogue of o_proj)",
    "mlp_residual": "residual (the add in the epilogue of down_proj)",
}
# In a mixture-of-experts layer (engine/transformer.py's _moe_mlp_block) the MLP's ops differ: mlp_norm stays its
# own kernel (the router and every expert read its output), the residual add folds into moe_combine, and the
# experts' and shared experts' activations fold as the dense one does.
MOE_FUSABLE = {
    "mlp_norm": None,
    "mlp_residual": "residual (the add in the epilogue of moe_combine)",
    "expert_act": "gate_up + act (SiLU(gate)·up in the epilogue of the experts' gate_up matmul)",
    "shared_act": "gate_up + act (SiLU(gate)·up in the epilogue of the shared experts' gate_up matmul)",
}
# The LM head: the one linear op that computes for the last token of each sequence only (``model_ops``).
LM_HEAD = "lm_head"


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


# The gated activations' words, by Model.mlp (a plain gelu_tanh MLP has no gate: no gate_up + act fusion).
_GATED_ACT = {"gated_silu": "SiLU(gate)·up", "gated_gelu_tanh": "GELU_tanh(gate)·up",
              "clamped_swiglu": "the clamped SwiGLU of gate and up"}


def fusion_for(p: Placement, a: Analysis) -> str | None:
    """The --fuse option that folds this op into a neighbour, or None (``FUSABLE``, ``MOE_FUSABLE``), in the
    model's own words: its norm (RMSNorm or LayerNorm), its activation, MLA's first projections."""
    model = a.workload.model
    if model.post_norms and p.name in ("attn_residual", "mlp_residual"):
        # Gemma 2/3: a norm sits between the branch's last matmul and the add, which folds into that norm.
        return f"residual (the add in the epilogue of post_{p.name.removesuffix('_residual')}_norm)"
    if p.name.endswith("act") and p.name in {**FUSABLE, **MOE_FUSABLE}:
        if model.mlp not in _GATED_ACT:
            return None  # up, act, down: no gate to fuse with
        text = (MOE_FUSABLE if p.name in MOE_FUSABLE else FUSABLE)[p.name]
        return text and text.replace("SiLU(gate)·up", _GATED_ACT[model.mlp])
    if model.moe is not None and p.name in MOE_FUSABLE:
        return MOE_FUSABLE[p.name]
    text = FUSABLE.get(p.name)
    if text and p.name == "attn_norm" and model.mla is not None:
        text = text.replace("q/k/v_proj", "MLA's first projections (q_a_proj, kv_a_proj_with_mqa)")
    if text and model.norm == "layernorm":
        text = text.replace("RMSNorm", "LayerNorm")
    return text


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
        elif p.name == LM_HEAD:
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
        elif fusion_for(p, a):
            out.append(f"fusion, --fuse {fusion_for(p, a)}: its input and output skip the trip through HBM")
        elif p.name == "mlp_norm":  # of an MoE layer: no option folds it
            out.append("no fusion folds it: the router and every expert read its output, so it is written once")
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
