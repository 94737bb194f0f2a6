"""Tensor parallelism: one GPU's share of a step, and the collectives that join the shares. Pure: no I/O.

The layout is Megatron-LM's (Shoeybi et al., "Megatron-LM", arXiv 1909.08053, section 3), as vLLM and SGLang
serve it. With ``tp`` = t GPUs, each GPU holds:

  attention   Q, K, V column-parallel: h/t query heads and g/t KV heads each. Where t exceeds g, each KV head is
              replicated on t/g GPUs and each GPU holds one KV head (vLLM's QKVParallelLinear does so), so the
              KV cache per GPU stops shrinking at t = g. O row-parallel: its h/t heads' rows of h·d × H.
  MLA         (DeepSeek) q_b_proj and kv_b_proj column-parallel (h/t heads each), o_proj row-parallel; q_a_proj
              and kv_a_proj_with_mqa replicated, and the latent cache replicated on every GPU: every head reads
              the whole latent, so each rank needs all of it (vLLM's DeepseekV2 attention: ReplicatedLinear for
              the two down-projections).
  MLP         gate and up column-parallel, down row-parallel: width I/t.
  experts     every expert on every GPU, each one's width split I_e/t as the dense MLP's (the shared experts'
              too); the router's H×E gate replicated.
  vocabulary  the embedding and the LM head vocabulary-parallel: V/t rows each (V padded up to a multiple of t
              where it is not one, as Megatron's make_vocab_size_divisible_by and vLLM's padding do).
  everything  else replicated: norms (and their gains), RoPE, residual adds, biases of row-parallel layers.

So one GPU's step is the engine's own step of a model with those sizes (``per_gpu_workload``): ``transformer.py``
counts it unchanged, and the weights, KV cache and largest batch per GPU follow from the same functions.

The shares are joined by collectives (``communication_ops``), each an op of kind ``communication``:

  attn_all_reduce  after o_proj, every layer: the N×H partial sums of the t GPUs' heads
  mlp_all_reduce   after down_proj (or, in an MoE layer, after moe_combine): the MLP's N×H partial sums
  embed_all_reduce once: each GPU's gather fills the rows of its vocabulary shard (zeros elsewhere), and the
                   sum is the embedding (Megatron's VocabParallelEmbedding)
  logits_all_gather once: each GPU's B×V/t logits gathered into B×V on every GPU, for sampling

Bytes are what one GPU sends, by NCCL's ring algorithms (NCCL's documentation, "Collective Operations", and
nccl-tests' doc/PERFORMANCE.md, which define the bus bandwidth by these factors): an all-reduce of S bytes sends
2(t−1)/t·S (a reduce-scatter then an all-gather, (t−1)/t·S each), an all-gather of S bytes in all (t−1)/t·S. A
GPU receives as much as it sends at the same time, so the roof is the interconnect's bandwidth in one
direction (half the datasheet's bidirectional total: ``Interconnect.per_direction_gbps``), and the time is the
collective's latency plus bytes / that bandwidth (``roofline.place``). The reduction's adds and the collective
kernel's own HBM traffic are not counted. None of these can overlap with compute in a decode step: the next op
needs the sum (the critical path); prefill engines can overlap a layer's collective with another micro-batch's
compute, which is not modelled. Modelled, not measured: issue 20 measures the collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserError
from ..specs.hardware import GPU
from ..specs.load import validate
from ..specs.workload import Model, Workload
from ..units import dtype_bytes
from .op import Op

# The most GPUs one degree may name: an 8-GPU node, times 64 nodes.
MAX_DEGREE = 512


@dataclass(frozen=True)
class Layout:
    """How one copy of the model is spread over GPUs: ``tp`` GPUs in tensor parallel."""

    tp: int = 1

    @property
    def gpus(self) -> int:
        """The GPUs one copy of the model spans: tokens/s per GPU divides by it."""
        return self.tp

    @property
    def single(self) -> bool:
        return self.tp == 1

    def label(self) -> str:
        return f"TP {self.tp}"


def check_degree(name: str, value: int) -> None:
    """A degree is a whole number of GPUs from 1 to MAX_DEGREE: anything else is refused in one line."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DEGREE:
        raise UserError(f"{name} {value}: give a whole number of GPUs from 1 to {MAX_DEGREE}")


def check_interconnect(gpu: GPU, layout: Layout) -> None:
    """A layout over several GPUs needs the GPU file's interconnect: its roof and latency time the collectives."""
    if not layout.single and gpu.interconnect is None:
        raise UserError(f"{gpu.id}: the GPU file gives no interconnect, so --tp {layout.tp} cannot be timed; add an "
                        f"'interconnect' section (name, link, bandwidth_gbps, latency_us, source)")


def _split(what: str, total: int, t: int, model: Model) -> int:
    if total % t:
        raise UserError(f"--tp {t}: model {model.id} has {total:,} {what}, which {t} GPUs cannot split evenly")
    return total // t


def kv_heads_per_gpu(model: Model, t: int) -> int:
    """g/t KV heads a GPU; where t exceeds g, one (each KV head replicated on t/g GPUs); refused where neither
    divides the other."""
    g = model.num_kv_heads
    if g % t == 0:
        return g // t
    if t % g == 0:
        return 1
    raise UserError(f"--tp {t}: model {model.id}'s {g} KV heads can neither be split over {t} GPUs nor "
                    f"replicated evenly on them")


def padded_vocab(vocab: int, t: int) -> int:
    """The vocabulary padded up to a multiple of t (unchanged where t divides it)."""
    return -(-vocab // t) * t


def per_gpu_model(model: Model, t: int) -> Model:
    """One GPU's share of ``model`` under tensor parallelism of degree t (the module's docstring states it)."""
    if t == 1:
        return model
    data: dict[str, Any] = model.model_dump()
    heads = _split("attention heads", model.num_heads, t, model)
    data["num_heads"] = heads
    data["num_kv_heads"] = heads if model.mla is not None else kv_heads_per_gpu(model, t)
    if model.dense_layers:
        data["intermediate_size"] = _split("MLP width (intermediate_size)", model.intermediate_size, t, model)
    if model.moe is not None:
        moe = dict(data["moe"])
        moe["expert_intermediate_size"] = _split("expert width", model.moe.expert_intermediate_size, t, model)
        if model.moe.shared_expert_intermediate_size is not None:
            moe["shared_expert_intermediate_size"] = _split(
                "shared expert width", model.moe.shared_expert_intermediate_size, t, model)
        data["moe"] = moe
    data["vocab_size"] = padded_vocab(model.vocab_size, t) // t
    return validate(Model, data, f"model {model.id} at --tp {t}")


def per_gpu_workload(w: Workload, layout: Layout) -> Workload:
    """One GPU's step: ``w`` with its model's per-GPU sizes; batch, lengths and data types unchanged."""
    if layout.single:
        return w
    return validate(Workload, {**dict(w), "model": per_gpu_model(w.model, layout.tp)}, f"{w.label()} per GPU")


def _whole(x: float) -> int | float:
    """An integer where the count is one (the engine's counts are: --json prints them so)."""
    return int(x) if float(x).is_integer() else x


def all_reduce_bytes(buffer: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-reduce of ``buffer`` bytes over t GPUs: 2(t−1)/t of it."""
    return _whole(2 * (t - 1) * buffer / t) if (2 * (t - 1) * buffer) % t else _whole(2 * (t - 1) * buffer // t)


def all_gather_bytes(total: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-gather whose result is ``total`` bytes: (t−1)/t of it."""
    return _whole((t - 1) * total / t) if ((t - 1) * total) % t else _whole((t - 1) * total // t)


def _collective(name: str, what: str, algorithm: str, buffer: float, sent: int | float, t: int, count: int,
                per_model: bool = False) -> Op:
    return Op(
        name=name,
        kind="communication",
        flops=0,
        bytes=sent,
        unit="vector",
        dtype="fp32",
        reads=f"{what}: {buffer:,} bytes on each of {t} GPUs",
        writes="the result on every GPU",
        computes=f"ring {algorithm}: sends {sent:,} bytes a GPU over the interconnect; cannot overlap "
                 f"(the next op needs its result)",
        count=count,
        per_model=per_model,
    )


def communication_ops(w: Workload, layout: Layout) -> list[Op]:
    """The collectives of one step of ``w`` (the whole model's workload) under ``layout``, one GPU's bytes each;
    none on one GPU. The attention phase (the attention core alone) has none: its heads need no other GPU's."""
    t = layout.tp
    if t == 1 or w.phase == "attention":
        return []
    m = w.model
    a = dtype_bytes(w.dtype)
    activations = w.tokens * m.hidden_size * a  # N×H, in the activations' type
    logits = w.batch * padded_vocab(m.vocab_size, t) * a  # B×V, the last token of each sequence
    return [
        _collective("embed_all_reduce", f"x {w.tokens}×{m.hidden_size}", "all-reduce", activations,
                    all_reduce_bytes(activations, t), t, 1, per_model=True),
        _collective("attn_all_reduce", f"o_proj's partial sums {w.tokens}×{m.hidden_size}", "all-reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("mlp_all_reduce", f"the MLP's partial sums {w.tokens}×{m.hidden_size}", "all-reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("logits_all_gather", f"logits {w.batch}×{padded_vocab(m.vocab_size, t) // t} a GPU",
                    "all-gather", logits // t, all_gather_bytes(logits, t), t, 1, per_model=True),
    ]


def notes(w: Workload, layout: Layout) -> list[str]:
    """What a reader of the per-GPU numbers must know about the layout, one line each."""
    if layout.single:
        return []
    m, t = w.model, layout.tp
    out = [f"TP {t} (Megatron): {m.num_heads // t} of {m.num_heads} heads a GPU; tokens/s per GPU over {t} GPUs"]
    if m.mla is not None:
        out.append("MLA: the latent KV cache is replicated on every GPU (each rank's heads read the whole latent)")
    elif t > m.num_kv_heads:
        out.append(f"KV heads replicated: {m.num_kv_heads} KV heads over {t} GPUs, each GPU holds one "
                   f"({t // m.num_kv_heads} copies of each)")
    if padded_vocab(m.vocab_size, t) != m.vocab_size:
        out.append(f"vocabulary padded from {m.vocab_size:,} to {padded_vocab(m.vocab_size, t):,} for {t} GPUs")
    out.append("collectives modelled (ring algorithms, interconnect roof and latency), not measured")
    return out
