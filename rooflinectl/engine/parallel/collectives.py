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

Each moves the activations' data type (``dtype``) over the links (``unit`` "link"), no compute unit. A group past
the GPU file's scale-up domain splits each GPU's bytes between the interconnect and the scale-out network
(network.py states the two-level algorithms; ``network_bytes`` is the network's part). How each is timed:
docs/design.md, "Parallelism".
"""

from __future__ import annotations

from ...specs.measured import Collective
from ...specs.workload import Workload
from ...units import dtype_bytes
from ..count.op import Op
from .layout import Layout
from .network import NetworkUse, Span
from .shard import integral, padded_vocab, sequences_per_gpu


def all_reduce_bytes(buffer: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-reduce of ``buffer`` bytes over t GPUs: 2(t−1)/t of it."""
    return integral(2 * (t - 1) * buffer / t) if (2 * (t - 1) * buffer) % t else integral(2 * (t - 1) * buffer // t)


def all_gather_bytes(total: float, t: int) -> int | float:
    """Bytes one GPU sends in a ring all-gather whose result is ``total`` bytes: (t−1)/t of it."""
    return integral((t - 1) * total / t) if ((t - 1) * total) % t else integral((t - 1) * total // t)


_ALGORITHMS: dict[Collective, str] = {"all_reduce": "all-reduce", "all_gather": "all-gather",
                                      "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all"}


def _network(collective: Collective, span: Span, buffer: float) -> tuple[int | float, int]:
    """(network bytes, network steps) of one GPU's ``collective`` over ``span``; (0, 0) within one domain.
    ``buffer``: an all-reduce's S, an all-gather's result T, an all-to-all's pairs."""
    if not span.crosses:
        return 0, 0
    if collective == "all_reduce":
        return span.all_reduce_network_bytes(buffer), span.all_reduce_steps
    if collective == "all_gather":
        return span.all_gather_network_bytes(buffer), span.all_gather_steps
    return span.all_to_all_network_bytes(buffer), 1


def _over(net: NetworkUse, group: int) -> str:
    """Which of a mesh's links a group of ``group`` GPUs of one domain sends over, in words; "" behind a switch."""
    if net.share(group) == 1 or net.domain is None:
        return ""
    return f" over {group - 1} of its {net.domain - 1} mesh links"


def _collective(name: str, what: str, collective: Collective, buffer: float, sent: int | float, t: int, count: int,
                dtype: str, span: Span, whole: float, net: NetworkUse, per_model: bool = False) -> Op:
    """One collective op; ``whole`` is what the network split reads (:func:`_network`)."""
    algorithm = _ALGORITHMS[collective]
    network, steps = _network(collective, span, whole)
    how = (f"ring {algorithm}{_over(net, span.per_domain)}: sends {sent:,} bytes a GPU over the interconnect"
           if not span.crosses else
           f"{algorithm} over {span.domains} domains of {span.per_domain}: sends {sent:,} bytes a GPU, "
           f"{network:,} of them over the scale-out network")
    return Op(
        name=name,
        kind="communication",
        flops=0,
        bytes=sent,
        unit="link",
        dtype=dtype,
        reads=f"{what}: {buffer:,} bytes on each of {t} GPUs",
        writes="the result on every GPU",
        computes=f"{how}; cannot overlap (the next op needs its result)",
        count=count,
        per_model=per_model,
        collective=collective,
        network_bytes=network,
        network_steps=steps,
        link_share=net.share(span.per_domain),
    )


def _pp_sends(w: Workload, layout: Layout, net: NetworkUse) -> list[Op]:
    """PP's p − 1 sends of the N×H activations: those between stages in one domain over the interconnect
    (``pp_send``), those across a domain boundary over the scale-out network (``pp_send_network``)."""
    x = integral(w.tokens * w.model.hidden_size * dtype_bytes(w.dtype))
    across = net.pp_sends_across
    within = layout.pp - 1 - across
    reads = f"x {w.tokens}×{w.model.hidden_size} at the end of a stage"
    sends = []
    if within:
        sends.append(Op(name="pp_send", kind="communication", flops=0, bytes=x, unit="link", dtype=w.dtype,
                        reads=reads, writes="it on the next stage's GPU",
                        computes=f"point-to-point{_over(net, 2)}: sends {x:,} bytes; cannot overlap (the next "
                                 f"stage needs it)",
                        count=within, link_share=net.share(2)))
    if across:
        sends.append(Op(name="pp_send_network", kind="communication", flops=0, bytes=x, unit="link", dtype=w.dtype,
                        reads=reads, writes="it on the next stage's GPU, in another domain",
                        computes=f"point-to-point over the scale-out network: sends {x:,} bytes; cannot overlap "
                                 f"(the next stage needs it)",
                        count=across, network_bytes=x, network_steps=1))
    return sends


def communication_ops(w: Workload, layout: Layout, net: NetworkUse) -> list[Op]:
    """The collectives of one step of ``w`` (the whole model's workload) under ``layout``, one GPU's bytes each,
    split between the links as ``net`` (network.network_use of the GPU) says; none on one GPU. The attention phase
    (the attention core alone) has none: its heads need no other GPU's."""
    t = layout.tp
    if layout.single or w.phase == "attention":
        return []
    sends = _pp_sends(w, layout, net) if layout.pp > 1 else []
    if t == 1 and not layout.dp_attention:
        return sends
    span = net.groups[0][1]
    m = w.model
    a = dtype_bytes(w.dtype)
    if layout.dp_attention:
        assert m.moe is not None
        e, k = layout.ep, m.moe.experts_per_token
        n = sum(sequences_per_gpu(g.count, e) * g.new for g in w.seqs)  # this GPU's tokens
        pairs = n * k * m.hidden_size * a  # its tokens' k copies of H, in the activations' type
        sent = integral(pairs * (e - 1) / e) if (pairs * (e - 1)) % e else integral(pairs * (e - 1) // e)
        return [_collective(name, f"{n} tokens × top-{k} copies of {m.hidden_size}", "all_to_all", pairs, sent, e,
                            m.moe_layers, w.dtype, span, pairs, net)
                for name in ("dispatch_all_to_all", "combine_all_to_all")]
    activations = w.tokens * m.hidden_size * a  # N×H, in the activations' type
    logits = w.batch * padded_vocab(m.vocab_size, t) * a  # B×V, the last token of each sequence
    return [*sends,
        _collective("embed_all_reduce", f"x {w.tokens}×{m.hidden_size}", "all_reduce", activations,
                    all_reduce_bytes(activations, t), t, 1, w.dtype, span, activations, net, per_model=True),
        _collective("attn_all_reduce", f"o_proj's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers, w.dtype, span, activations, net),
        _collective("mlp_all_reduce", f"the MLP's partial sums {w.tokens}×{m.hidden_size}", "all_reduce",
                    activations, all_reduce_bytes(activations, t), t, m.num_layers, w.dtype, span, activations, net),
        _collective("logits_all_gather", f"logits {w.batch}×{padded_vocab(m.vocab_size, t) // t} a GPU",
                    "all_gather", logits // t, all_gather_bytes(logits, t), t, 1, w.dtype, span, logits, net,
                    per_model=True),
    ]
