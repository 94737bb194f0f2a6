"""One GPU's share of a step under a layout: its model's sizes under TP, its sequences under EP, its stage under
PP, the expert ops adjusted to the experts it holds, and the KV cache and weights it holds.

With ``tp`` = t (Megatron-LM, arXiv 1909.08053, section 3, as vLLM and SGLang serve it) each GPU holds:
  attention   Q, K, V column-parallel, h/t query heads and g/t KV heads (t > g: one KV head, replicated on t/g
              GPUs, so the KV cache stops shrinking at t = g); O row-parallel
  MLA         q_b_proj and kv_b_proj column-parallel (h/t heads), o_proj row-parallel; q_a_proj,
              kv_a_proj_with_mqa and the latent cache replicated (every head reads the whole latent)
  MLP         gate and up column-parallel, down row-parallel: width I/t; every expert's width I_e/t too
  Mamba-2     in_proj column-parallel (h/t heads, G/t groups of B and C), the conv and state with them, out_proj
              row-parallel (Gated DeltaNet's key and value heads split so too)
  vocabulary  the embedding and the LM head, V/t rows each (V padded up to the next multiple of t)
  the rest    replicated: norms, RoPE, residual adds, biases of row-parallel layers, the router's gate
With ``ep`` = e (DeepSeek-V3's layout, arXiv 2412.19437, section 3.4): the attention data-parallel, ⌈B/e⌉ of
the B sequences a GPU (the busiest sets the step's time), and E/e whole experts a GPU. With ``ep`` = ``tp`` =
t on the same GPUs: the routed experts spread whole, E/t a GPU, and the rest split as under TP. With ``pp`` =
p: L/p consecutive layers a GPU, the embedding on the first stage, the LM head and final norm on the last.
Why each, and what is not modelled: docs/design.md, "Parallelism".
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...errors import UserError
from ...specs.layers import GATED_MLPS
from ...specs.load import validate
from ...specs.model import Model
from ...specs.workload import Workload
from ...units import dtype_bytes
from ..count.moe import experts_touched
from ..count.op import Op
from ..count.quant import weight_matrix_bytes
from ..count.resident import KVSpan, kv_cache_bytes_per_sequence, kv_spans, weight_footprint_bytes
from .layout import Layout
from .stages import stage_workload


def _split(what: str, total: int, t: int, model: Model) -> int:
    if total % t:
        # "TP t", not an option's name: --tp, --prefill-tp and --decode-tp all lay a model out this way.
        raise UserError(f"TP {t}: model {model.id} has {total:,} {what}, which {t} GPUs cannot split evenly")
    return total // t


def kv_heads_per_gpu(model: Model, t: int) -> int:
    """g/t KV heads a GPU; where t exceeds g, one (each KV head replicated on t/g GPUs); refused where neither
    divides the other."""
    g = model.num_kv_heads
    if g % t == 0:
        return g // t
    if t % g == 0:
        return 1
    raise UserError(f"TP {t}: model {model.id}'s {g} KV heads can neither be split over {t} GPUs nor "
                    f"replicated evenly on them")


def padded_vocab(vocab: int, t: int) -> int:
    """The vocabulary padded up to a multiple of t (unchanged where t divides it)."""
    return -(-vocab // t) * t


def per_gpu_model(model: Model, t: int, whole_experts: bool = False) -> Model:
    """One GPU's share of ``model`` under tensor parallelism of degree t (the module's docstring states it);
    ``whole_experts``: the routed experts are spread over the t GPUs (ep = tp), not sliced, so their width stays
    (the op adjustment :func:`expert_ops_per_gpu` takes 1/t of their pairs)."""
    if t == 1:
        return model
    data: dict[str, Any] = model.model_dump()
    heads = _split("attention heads", model.num_heads, t, model)
    data["num_heads"] = heads
    data["num_kv_heads"] = heads if model.mla is not None else kv_heads_per_gpu(model, t)
    if model.linear_attention is not None:  # Gated DeltaNet's heads split as attention's (vLLM), with its state
        lin = model.linear_attention
        data["linear_attention"] = {**data["linear_attention"],
                                    "num_key_heads": _split("linear-attention key heads", lin.num_key_heads, t, model),
                                    "num_value_heads": _split("linear-attention value heads", lin.num_value_heads,
                                                              t, model)}
    if model.mamba is not None:  # Mamba-2's heads and groups split (vLLM's MambaMixer2), its state with them
        data["mamba"] = {**data["mamba"], "num_heads": _split("Mamba heads", model.mamba.num_heads, t, model),
                         "n_groups": _split("Mamba groups", model.mamba.n_groups, t, model)}
    if model.dense_layers:
        data["intermediate_size"] = _split("MLP width (intermediate_size)", model.intermediate_size, t, model)
    if model.moe is not None:
        moe = dict(data["moe"])
        if not whole_experts:
            moe["expert_intermediate_size"] = _split("expert width", model.moe.expert_intermediate_size, t, model)
        if model.moe.shared_expert_intermediate_size is not None:
            moe["shared_expert_intermediate_size"] = _split(
                "shared expert width", model.moe.shared_expert_intermediate_size, t, model)
        elif whole_experts and model.moe.num_shared_experts:
            # The shared experts stay TP-split when the routed ones are spread: their width, the routed width
            # when not given, is split apart from the routed experts'.
            moe["shared_expert_intermediate_size"] = _split(
                "shared expert width", model.moe.expert_intermediate_size, t, model)
        data["moe"] = moe
    data["vocab_size"] = padded_vocab(model.vocab_size, t) // t
    return validate(Model, data, f"model {model.id} at --tp {t}")


def check_experts(model: Model, e: int) -> None:
    """--ep needs a mixture of experts whose E experts e GPUs share evenly."""
    if e == 1:
        return
    if model.moe is None:
        raise UserError(f"--ep {e}: model {model.id} is dense; expert parallelism spreads a mixture of experts")
    if model.moe.num_experts % e:
        raise UserError(f"--ep {e}: model {model.id} has {model.moe.num_experts} experts, which {e} GPUs cannot "
                        f"share evenly")


def sequences_per_gpu(batch: int, e: int) -> int:
    """⌈B/e⌉: the sequences the busiest GPU serves under data-parallel attention (a mixed step: of each group)."""
    return -(-batch // e)


def per_gpu_workload(w: Workload, layout: Layout) -> Workload:
    """One GPU's step: under TP, ``w`` with its model's per-GPU sizes (batch, lengths and data types
    unchanged); under EP, ``w`` with ⌈B/e⌉ sequences (its expert ops then adjusted by :func:`expert_ops_per_gpu`)."""
    if layout.single:
        return w
    if layout.dp_attention:
        check_experts(w.model, layout.ep)
        # A stated experts_touched is the whole step's; the per-GPU share is set on the expert ops instead.
        seqs = tuple(g.model_copy(update={"count": sequences_per_gpu(g.count, layout.ep)}) for g in w.seqs)
        return validate(Workload, {**dict(w), "seqs": seqs, "experts_touched": None}, f"{w.label()} per GPU")
    check_experts(w.model, layout.ep)
    model = per_gpu_model(w.model, layout.tp, whole_experts=layout.ep > 1)
    return validate(Workload, {**dict(w), "model": model}, f"{w.label()} per GPU")


def _expert_shapes(w: Workload) -> list[tuple[int, int]]:
    """One expert's matrices as (k, n), as stored (gate and up apart, as the footprint counts)."""
    m = w.model
    assert m.moe is not None
    h, ie = m.hidden_size, m.moe.expert_intermediate_size
    if m.mlp not in GATED_MLPS:
        return [(h, ie), (ie, h)]
    return [(h, ie), (h, ie), (ie, h)]


def _matrix_bytes(w: Workload, k: int, n: int) -> int:
    """One expert matrix as stored: in the weight format where the experts are quantized (engine.count.quant)."""
    return weight_matrix_bytes(w.weights, k, n, w.group_size) if w.quantized else k * n * int(dtype_bytes(w.dtype))


def _expected(x: float) -> int:
    """An expectation of bytes rounded to the byte, as engine.count.primitives.expert_matmul_op rounds it."""
    return int(x) if float(x).is_integer() else round(x)


def expert_ops_per_gpu(ops: list[Op], whole: Workload, per_gpu: Workload, layout: Layout) -> list[Op]:
    """Under EP, each expert op of one GPU's step reads the weights of the experts touched among its E/e
    (experts_touched of the whole step / e), not of its own tokens' touches among all E; FLOPs and activation
    bytes are the engine's for its ⌈B/e⌉ sequences (the module's docstring). Under TP + EP every GPU holds all N
    tokens and runs the N·k/e pairs routed to its experts: the expert ops' and expert_act's FLOPs and activation
    bytes are 1/e of the engine's for the N tokens, and moe_combine sums those pairs only. Other layouts:
    unchanged."""
    if layout.ep == 1 or whole.model.moe is None:
        return ops
    e = layout.ep
    share = experts_touched(whole) / e
    a = dtype_bytes(per_gpu.dtype)
    local = not layout.dp_attention  # TP + EP: 1/e of the step's pairs on each GPU
    out = []
    for whole_op in ops:
        # A fused op's parts are adjusted as they would be alone, so that they still add up to it.
        op = replace(whole_op, covers=tuple(expert_ops_per_gpu(list(whole_op.covers), whole, per_gpu, layout)))
        if local and op.name.startswith("moe_combine"):
            out.append(_local_combine(op, per_gpu, e))
            continue
        if local and op.name == "expert_act":
            out.append(replace(op, flops=integral(op.flops / e), bytes=_expected(op.bytes / e),
                               computes=op.computes + f"; 1/{e} of the pairs on this GPU (TP + EP)"))
            continue
        if op.kind != "expert" or op.gemm is None:
            out.append(op)
            continue
        k, n = op.gemm.k, op.gemm.n
        held = _expected(share * _matrix_bytes(per_gpu, k, n))
        if per_gpu.model.mlp_bias:
            held += _expected(share * n * a)
        moved = op.bytes - op.weight_bytes  # the pairs' rows in and out
        flops = op.flops
        if local:
            moved, flops = _expected(moved / e), integral(flops / e)
        label = "TP + EP" if local else "EP"
        out.append(replace(op, flops=flops, bytes=moved + held, weight_bytes=held,
                           gemm=replace(op.gemm, experts=share),
                           reads=op.reads + f"; {label} {e}: {share:.4g} experts read of this GPU's "
                                            f"{whole.model.moe.num_experts // e} (expected)"))
    return out


def _local_combine(op: Op, per_gpu: Workload, e: int) -> Op:
    """moe_combine on one GPU under TP + EP: the weighted sum of its N·k/e pairs into an N×H partial, a multiply
    and an add a pair and element (2·(N·k/e)·H FLOPs in place of the whole step's (2k − 1)·N·H), reading those
    pairs' rows and router weights; the shared experts' add, the output and a fused residual as before."""
    m = per_gpu.model
    assert m.moe is not None
    n, h, k, a = per_gpu.tokens, m.hidden_size, m.moe.experts_per_token, dtype_bytes(per_gpu.dtype)
    pairs, local = n * k, n * k / e
    return replace(
        op,
        flops=integral(op.flops - (2 * k - 1) * n * h + 2 * local * h),
        bytes=_expected(op.bytes - (pairs * h + pairs) * a + (local * h + local) * a),
        reads=op.reads + f"; TP + EP {e}: this GPU's {local:,.4g} pairs (expected)",
        computes=f"per element of each of this GPU's pairs: a multiply by its router weight and an add into "
                 f"the token's partial sum (mlp_all_reduce sums the {e} partials)",
    )


def kv_bytes_per_sequence_per_gpu(per_gpu: Workload, layout: Layout, positions: int | None = None,
                                  block_size: int = 1) -> float:
    """One sequence's KV cache on one GPU, at ``positions`` (default: a preset step's kv_len), in blocks of
    ``block_size`` positions (``kv_cache_bytes_per_sequence``): of its stage's layers under PP."""
    if layout.pp > 1:
        per_gpu = stage_workload(per_gpu, layout.pp)
    return kv_cache_bytes_per_sequence(per_gpu, positions, block_size)


def kv_spans_per_gpu(per_gpu: Workload, layout: Layout) -> tuple[KVSpan, ...]:
    """The kinds of layer that hold one GPU's K and V (``kv_spans``): its stage's under PP."""
    if layout.pp > 1:
        per_gpu = stage_workload(per_gpu, layout.pp)
    return kv_spans(per_gpu)


def weight_bytes_per_gpu(whole: Workload, per_gpu: Workload, layout: Layout) -> float:
    """The weights one GPU holds: the per-GPU model's footprint; under EP less the E − E/e experts of each MoE
    layer that live on other GPUs (each expert's matrices as stored, with its biases); under PP the heaviest
    stage's (stages.stage_workload): its L/p layers and one V×H table (the last stage's LM head, and the final norm), the other end's
    table left out where the two are not tied."""
    if layout.pp > 1:
        stage = stage_workload(per_gpu, layout.pp)
        held = weight_footprint_bytes(stage)
        m = stage.model
        return held if m.tie_embeddings else held - m.vocab_size * m.hidden_size * dtype_bytes(stage.dtype)
    held = weight_footprint_bytes(per_gpu)
    moe = whole.model.moe
    if layout.ep == 1 or moe is None:
        return held
    m = whole.model
    ie = moe.expert_intermediate_size
    biases = m.mlp_parameters(ie) - (3 if m.mlp in GATED_MLPS else 2) * m.hidden_size * ie
    one = sum(_matrix_bytes(per_gpu, k, n) for k, n in _expert_shapes(per_gpu)) \
        + biases * dtype_bytes(per_gpu.dtype)
    return held - m.moe_layers * (moe.num_experts - moe.num_experts // layout.ep) * one


def integral(x: float) -> int | float:
    """An integer where the count is one (the engine's counts are: --json prints them so)."""
    return int(x) if float(x).is_integer() else x
