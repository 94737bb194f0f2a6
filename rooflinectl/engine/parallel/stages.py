"""Pipeline stages: the L/p consecutive layers each of the p stages holds, and the stage whose memory sets a GPU's.

Stage i holds layers i·L/p to (i+1)·L/p − 1. Where every stage holds the same kinds of layer (MoE or dense MLP,
full, sliding, chunked or linear attention) as many times as stage 0, each is the model cut to L/p layers. Where
they differ (a layer pattern whose period does not divide L/p; an MoE model's first dense layers, all on stage
0), each stage is its own model of L/p layers, and a GPU must hold the heaviest: the stage whose weights and KV
cache at the step's lengths take most bytes (:func:`stage_workload`). The step's time is the pass through all
stages either way (engine.parallel.shard), so only the memory figures come from the stage.
"""

from __future__ import annotations

from typing import Any

from ...errors import UserError
from ...specs.load import validate
from ...specs.model import Model
from ...specs.workload import Workload
from ..count.resident import kv_cache_bytes_per_sequence, weight_footprint_bytes


def _stage_layers(m: Model, p: int, i: int) -> range:
    n = m.num_layers // p
    return range(i * n, (i + 1) * n)


def _stage_kinds(m: Model, layers: range) -> dict[tuple[bool, str], int]:
    """How many layers of each (MoE MLP, attention) kind ``layers`` hold (one walk: L ≤ 16,384 layers)."""
    counts: dict[tuple[bool, str], int] = {}
    for j in layers:
        kind = (m.layer_is_moe(j), m.layer_attention(j))
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _stage_model(m: Model, layers: range, p: int) -> Model:
    """The model of ``layers`` alone: its attention kinds as an explicit layer pattern (none where all are full),
    and its MoE layers as the model's rule moved to the stage's first layer; a stage the rule cannot state (MoE
    every k-th layer from a layer that is not a multiple of k) is refused."""
    n, s = len(layers), layers.start
    fields: dict[str, Any] = {**m.model_dump(), "num_layers": n}
    if m.layer_pattern is not None:
        pattern = [m.layer_attention(j) for j in layers]
        kinds = set(pattern)
        fields["layer_pattern"] = None if kinds == {"full"} else pattern
        if "sliding" not in kinds:
            fields["sliding_window"] = None
        if "chunked" not in kinds:
            fields["attention_chunk_size"] = None
        if "linear" not in kinds:
            fields["linear_attention"] = None
        if "mamba" not in kinds:
            fields["mamba"] = None
    if m.moe is not None:
        moe_layers = [m.layer_is_moe(j) for j in layers]
        if not any(moe_layers):
            fields["moe"] = None
        else:
            fields["moe"] = {**m.moe.model_dump(), "first_dense_layers": max(0, m.moe.first_dense_layers - s)}
    stage = validate(Model, fields, f"model {m.id}, stage of layers {s} to {s + n - 1} at --pp {p}")
    if _stage_kinds(stage, range(n)) != _stage_kinds(m, layers):
        raise UserError(f"--pp {p}: model {m.id}'s stage of layers {s} to {s + n - 1} holds its MoE layers in an "
                        f"order a stage of its own cannot state; not modelled")
    return stage


def stages_differ(m: Model, p: int) -> bool:
    """Whether the p stages hold different kinds of layer (each stage's counts against stage 0's)."""
    first = _stage_kinds(m, _stage_layers(m, p, 0))
    return any(_stage_kinds(m, _stage_layers(m, p, i)) != first for i in range(1, p))


def heaviest_stage(per_gpu: Workload, p: int) -> tuple[int, Workload]:
    """(the stage's index, its workload) of the stage whose weights and KV cache at the step's sequences take
    most bytes; stage 0, the model cut to L/p layers, where all stages hold the same kinds of layer. Refused where
    p does not divide L."""
    m = per_gpu.model
    if m.num_layers % p:
        raise UserError(f"--pp {p}: model {m.id} has {m.num_layers} layers, which {p} stages cannot split evenly")
    if not stages_differ(m, p):
        # Stage 0's own layers, its pattern written out: a pattern longer than L/p that does not repeat
        # (Nemotron-H's 52 entries) cuts to the stage's share.
        first = _stage_model(m, _stage_layers(m, p, 0), p)
        return 0, validate(Workload, {**dict(per_gpu), "model": first}, f"{per_gpu.label()} per stage")

    def held(w: Workload) -> float:
        return weight_footprint_bytes(w) + sum(g.count * kv_cache_bytes_per_sequence(w, g.positions)
                                               for g in w.seqs)

    stages = [validate(Workload, {**dict(per_gpu), "model": _stage_model(m, _stage_layers(m, p, i), p)},
                       f"{per_gpu.label()} per stage") for i in range(p)]
    heaviest = max(range(p), key=lambda i: (held(stages[i]), -i))
    return heaviest, stages[heaviest]


def stage_workload(per_gpu: Workload, p: int) -> Workload:
    """The pipeline stage whose memory one GPU must hold (:func:`heaviest_stage`)."""
    return heaviest_stage(per_gpu, p)[1]


def stage_note(per_gpu: Workload, p: int) -> str | None:
    """Where the stages hold different kinds of layer: which one the memory figures are, and why."""
    m = per_gpu.model
    if m.num_layers % p or not stages_differ(m, p):
        return None
    i, _ = heaviest_stage(per_gpu, p)
    other = next(j for j in range(p) if _stage_kinds(m, _stage_layers(m, p, j)) != _stage_kinds(
        m, _stage_layers(m, p, i)))

    def kinds(j: int) -> str:
        return ", ".join(f"{n} {'MoE ' if moe else ''}{attention}" for (moe, attention), n in
                         sorted(_stage_kinds(m, _stage_layers(m, p, j)).items()))
    return (f"the {p} stages hold different layers: memory is the heaviest stage's, stage {i} of 0 to {p - 1} "
            f"({kinds(i)} layers; stage {other}: {kinds(other)})")
