"""The collectives that join the shares, each an op of kind ``communication`` with the bytes one GPU sends by
NCCL's ring algorithms (NCCL's "Collective Operations"; nccl-tests' doc/PERFORMANCE.md defines the bus
bandwidth by the same factors): an all-reduce of S bytes sends 2(t−1)/t·S, an all-gather of S bytes in all
(t−1)/t·S.

  attn_all_reduce      TP, after o_proj, every layer: the N×H partial sums of the t GPUs' heads
  mlp_all_reduce       TP, after down_proj (in an MoE layer after moe_combine), every layer: N×H partial sums
  embed_all_reduce     TP, once: each GPU's gather fills its vocabulary shard's rows, the sum is the embedding
  logits_all_gather    TP, once: each GPU's B×V/t logits into B×V on every GPU, for sampling
  dispatch_all_to_all  EP, before and after the experts of each MoE layer: n·k·H·a·(e−1)/e bytes each way,
  combine_all_to_all   n the GPU's tokens (under uniform routing it receives as many as it sends)
  pp_send              PP, between stages: the N×H activations, point to point, p − 1 times

How each is timed: docs/design.md, "Parallelism".
"""

from __future__ import annotations

from ...specs.measured import Collective
from ...specs.workload import Workload
from ...units import dtype_bytes
from ..count.op import Op
from .layout import Layout
from .shard import integral, padded_vocab, sequences_per_gpu


def all_reduce_bytes(buffer: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-reduce of ``buffer`` bytes over t GPUs: 2(t−1)/t of it."""
    return integral(2 * (t - 1) * buffer / t) if (2 * (t - 1) * buffer) % t else integral(2 * (t - 1) * buffer // t)


def all_gather_bytes(total: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-gather whose result is ``total`` bytes: (t−1)/t of it."""
    return integral((t - 1) * total / t) if ((t - 1) * total) % t else integral((t - 1) * total // t)


_ALGORITHMS: dict[Collective, str] = {"all_reduce": "all-reduce", "all_gather": "all-gather",
                                      "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all"}


def _collective(name: str, what: str, collective: Collective, buffer: float, sent: int | float, t: int, count: int,
                per_model: bool = False) -> Op:
    algorithm = _ALGORITHMS[collective]
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
        collective=collective,
    )


def communication_ops(w: Workload, layout: Layout) -> list[Op]:
    """The collectives of one step of ``w`` (the whole model's workload) under ``layout``, one GPU's bytes each;
    none on one GPU. The attention phase (the attention core alone) has none: its heads need no other GPU's."""
    t = layout.tp
    if layout.single or w.phase == "attention":
        return []
    sends = []
    if layout.pp > 1:
        x = w.tokens * w.model.hidden_size * dtype_bytes(w.dtype)
        sends = [Op(name="pp_send", kind="communication", flops=0, bytes=integral(x), unit="vector", dtype="fp32",
                    reads=f"x {w.tokens}×{w.model.hidden_size} at the end of a stage", writes="it on the next stage's GPU",
                    computes=f"point-to-point: sends {integral(x):,} bytes; cannot overlap (the next stage needs it)",
                    count=layout.pp - 1)]
        if t == 1:
            return sends
    m = w.model
    a = dtype_bytes(w.dtype)
    if layout.dp_attention:
        assert m.moe is not None
        e, k = layout.ep, m.moe.experts_per_token
        n = sum(sequences_per_gpu(g.count, e) * g.new for g in w.seqs)  # this GPU's tokens
        pairs = n * k * m.hidden_size * a  # its tokens' k copies of H, in the activations' type
        sent = integral(pairs * (e - 1) / e) if (pairs * (e - 1)) % e else integral(pairs * (e - 1) // e)
        return [_collective(name, f"{n} tokens × top-{k} copies of {m.hidden_size}", "all_to_all", pairs, sent, e,
                            m.moe_layers) for name in ("dispatch_all_to_all", "combine_all_to_all")]
    activations = w.tokens * m.hidden_size * a  # N×H, in the activations' type
    logits = w.batch * padded_vocab(m.vocab_size, t) * a  # B×V, the last token of each sequence
    return [*sends,
        _collective("embed_all_reduce", f"x {w.tokens}×{m.hidden_size}", "all_reduce", activations,
                    all_reduce_bytes(activations, t), t, 1, per_model=True),
        _collective("attn_all_reduce", f"o_proj's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("mlp_all_reduce", f"the MLP's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers),
        _collective("logits_all_gather", f"logits {w.batch}×{padded_vocab(m.vocab_size, t) // t} a GPU",
                    "all_gather", logits // t, all_gather_bytes(logits, t), t, 1, per_model=True),
    ]
