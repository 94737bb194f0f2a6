"""What a reader of the per-GPU figures must know about the layout, one line each."""

from __future__ import annotations

from collections.abc import Sequence

from ...specs.workload import Workload
from .layout import Layout
from .network import NetworkUse
from .shard import padded_vocab, per_gpu_workload, sequences_per_gpu
from .stages import stage_note


def _timed_with(line: str, measured: Sequence[str]) -> str:
    """The layout's last note, ``line`` (collectives modelled, not measured), or, where ``analyze --calibrated``
    timed some collectives with a measured interconnect (``calibrate --comm``), which ones."""
    if not measured:
        return line
    return (f"collectives modelled (ring algorithms); {', '.join(measured)} timed with the bus bandwidth and "
            f"latency calibrate --comm measured, any other with the datasheet's interconnect")


def crossing(net: NetworkUse | None, pp: int) -> list[str]:
    """One line where the layout's collectives cross the scale-up domain: which group, over what, and how."""
    if net is None or not net.crosses or net.scale_out is None:
        return []
    what = [f"{flag} {s.gpus} spans {s.domains} {net.domain}-GPU {net.link} domains" for flag, s in net.groups
            if s.crosses]
    if net.pp_sends_across:
        what.append(f"{net.pp_sends_across} of the {pp - 1} PP sends go between {net.domain}-GPU domains")
    so = net.scale_out
    return [f"past the scale-up domain: {'; '.join(what)}; what crosses goes over {so.name}, "
            f"{so.bandwidth_gbps:g} GB/s a GPU a direction + {so.latency_us:g} µs a step (two-level collectives: "
            f"within each domain, then a ring across domains; measured collectives time only groups within one)"]


def notes(w: Workload, layout: Layout, measured: Sequence[str] = (), net: NetworkUse | None = None) -> list[str]:
    """What a reader of the per-GPU numbers must know about the layout, one line each. ``measured``: the
    collectives the roofs carry measured figures for (``Roofs.measured_collectives``); ``net``: what the
    layout's collectives cross (network.network_use), a line where they cross the scale-up domain."""
    if layout.single:
        return []
    across = crossing(net, layout.pp)
    return _notes(w, layout, measured, "within the domain" if across else "") + across


def _notes(w: Workload, layout: Layout, measured: Sequence[str], where: str) -> list[str]:
    """:func:`notes` but the crossing line; ``where`` qualifies the ring algorithms ("within the domain" where a
    group crosses it)."""
    m, t = w.model, layout.tp
    pp = []
    if layout.pp > 1:
        p = layout.pp
        pp = [f"PP {p}: {m.num_layers // p} of {m.num_layers} layers a stage; the step is the batch's pass through "
              f"all {p} stages (one micro-batch: each GPU idles {(p - 1) / p:.0%} of it); with M micro-batches the "
              f"bubble is (p−1)/(M+p−1) of the time (GPipe), {(p - 1) / (2 * p - 1):.0%} at M = {p}; memory is one "
              f"stage's"]
        differ = stage_note(per_gpu_workload(w, layout), p)
        pp += [differ] if differ else []
        if t == 1:
            return [*pp, "point-to-point sends between stages modelled, not measured"]  # calibrate --comm: no p2p
    if layout.dp_attention:
        assert m.moe is not None
        e = layout.ep
        return [f"EP {e} (DeepSeek's layout): {m.moe.num_experts // e} of {m.moe.num_experts} experts a GPU; "
                f"attention data-parallel, {sum(sequences_per_gpu(g.count, e) for g in w.seqs)} of {w.batch} sequences a GPU; "
                f"tokens/s per GPU over {e} GPUs",
                _timed_with("all-to-all dispatch and combine under uniform routing; collectives modelled, not measured",
                            measured)]
    out = [f"TP {t} (Megatron): {m.num_heads // t} of {m.num_heads} heads a GPU; tokens/s per GPU over "
           f"{layout.gpus} GPUs", *pp]
    if layout.ep > 1:
        assert m.moe is not None
        out.append(f"EP {layout.ep} on the same GPUs (vLLM's --enable-expert-parallel): "
                   f"{m.moe.num_experts // layout.ep} of {m.moe.num_experts} whole experts a GPU, which runs the "
                   f"pairs routed to them (1/{layout.ep} under uniform routing); every GPU holds every token, so "
                   f"mlp_all_reduce sums the experts' outputs and no all-to-all is needed")
    if m.mla is not None:
        out.append("MLA: the latent KV cache is replicated on every GPU (each rank's heads read the whole latent)")
    elif t > m.num_kv_heads:
        out.append(f"KV heads replicated: {m.num_kv_heads} KV heads over {t} GPUs, each GPU holds one "
                   f"({t // m.num_kv_heads} copies of each)")
    if padded_vocab(m.vocab_size, t) != m.vocab_size:
        out.append(f"vocabulary padded from {m.vocab_size:,} to {padded_vocab(m.vocab_size, t):,} for {t} GPUs")
    rings = f"ring algorithms {where}, " if where else "ring algorithms, "
    out.append(_timed_with(f"collectives modelled ({rings}interconnect roof and latency), not measured",
                           measured))
    return out
