"""A step's time from the engine, without analysing every step from scratch.

A step of groups G (``specs.workload.Seqs``) costs what ``engine.roofline.analyze`` says. Its ops split in two:
- every op but attention depends only on the step's token count N, its sequences B, its decode sequences D
  (new = 1: MLA runs them in the absorbed form) and, for MLA, the positions its prompt groups expand; those ops
  are timed once per key from one analysis of a step with the same key (the decodes folded into one group);
- each attention op is one kernel over all groups whose FLOPs, activation bytes and KV bytes are the sums of each
  group's (engine.attention.by_group), its weights read once: each group's part is taken from the analysis of
  that group alone (one sequence, cached by its new and cached tokens) and the sums are placed under the roofs
  (or timed by the calibrated op model) as the engine places them.
So :meth:`StepModel.time` equals ``analyze(step).totals.time_s`` (to rounding; tests/serving checks it) at a small
fraction of its cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..engine.calibrated import timed_by_model
from ..engine.op import Op
from ..engine.parallel import Layout
from ..engine.roofline import Analysis, analyze, place
from ..specs.hardware import GPU
from ..specs.workload import Seqs, Workload


@dataclass(frozen=True)
class _Part:
    """One attention op of one sequence of a group: its per-instance FLOPs, bytes, KV bytes and weights."""

    flops: float
    bytes: float
    kv_bytes: float
    weight_bytes: float


class StepModel:
    """Step times of ``base``'s model and options on ``gpu`` under ``layout``; ``calibrated`` as in analyze."""

    def __init__(self, base: Workload, gpu: GPU, calibrated: bool = False, layout: Layout = Layout()) -> None:
        self.base = base
        self.gpu = gpu
        self.calibrated = calibrated
        self.layout = layout
        self.roofs = gpu.roofs(calibrated)
        self.op_model = gpu.measured.op_model if calibrated and gpu.measured is not None else None
        self.mla = base.model.mla is not None
        self._rest: dict[tuple[object, ...], float] = {}
        self._parts: dict[tuple[int, int], dict[str, _Part]] = {}
        self._ops: dict[str, Op] = {}  # each attention op's shape (name, kind, count, dtype, unit) by name
        self.analyses = 0  # full analyses made: what the caches save

    def analyze(self, seqs: tuple[Seqs, ...]) -> Analysis:
        """The engine's full analysis of a step of these groups."""
        self.analyses += 1
        return analyze(self.base.with_seqs(seqs), self.gpu, self.calibrated, self.layout)

    def _rest_time(self, seqs: tuple[Seqs, ...]) -> float:
        decode = sum(g.count for g in seqs if g.new == 1)
        prompts = tuple(g if self.mla else Seqs(g.count, g.new) for g in seqs if g.new > 1)
        key = (decode, tuple(sorted((g.count, g.new, g.cached) for g in prompts)))
        if key not in self._rest:
            folded = ((Seqs(decode, 1),) if decode else ()) + prompts
            a = self.analyze(folded)
            self._rest[key] = sum(p.total_time_s for p in a.placements if p.op.kind != "attention")
        return self._rest[key]

    def _group_parts(self, new: int, cached: int) -> dict[str, _Part]:
        key = (new, cached)
        if key not in self._parts:
            a = self.analyze((Seqs(1, new, cached),))
            parts = {}
            for p in a.placements:
                if p.op.kind == "attention":
                    op = p.op
                    self._ops.setdefault(op.name, op)
                    parts[op.name] = _Part(op.flops, op.bytes, op.kv_bytes, op.weight_bytes)
            self._parts[key] = parts
        return self._parts[key]

    def time(self, seqs: tuple[Seqs, ...]) -> float:
        """The step's predicted time, seconds."""
        sums: dict[str, list[float]] = {}
        for g in seqs:
            for name, part in self._group_parts(g.new, g.cached).items():
                s = sums.setdefault(name, [0.0, 0.0, 0.0, 0.0])
                s[0] += g.count * part.flops
                s[1] += g.count * (part.bytes - part.weight_bytes)
                s[2] += g.count * part.kv_bytes
                s[3] = max(s[3], part.weight_bytes)
        attention = 0.0
        for name, (flops, moved, kv, weights) in sums.items():
            op = replace(self._ops[name], flops=flops, bytes=moved + weights, kv_bytes=kv, weight_bytes=weights)
            placed = place(op, self.roofs)
            if self.op_model is not None:
                placed = timed_by_model(placed, self.op_model)
            attention += placed.total_time_s
        return self._rest_time(seqs) + attention


@dataclass(frozen=True)
class Capacity:
    """What one GPU holds beside the KV cache, and the cache's blocks: HBM less the weights, the largest
    activation live set of a full step (``engine.memory.activation_live_set`` of a step of the token budget) and
    the reserve, divided by one block's K and V on that GPU (all layers, ``block_size`` positions)."""

    capacity_bytes: float
    weight_bytes: float
    activation_bytes: float
    reserve_bytes: float
    block_bytes: float
    blocks: int


def kv_capacity(model: StepModel, budget_tokens: int, block_size: int, reserve: float) -> Capacity:
    """The KV blocks ``model``'s GPU holds when a step may carry ``budget_tokens`` tokens."""
    from ..engine.memory import activation_live_set

    limit = model.base.model.max_length()
    longest = min(budget_tokens, limit[0] if limit else budget_tokens)
    full = model.analyze((Seqs(max(1, budget_tokens // longest), longest),))
    block = model.analyze((Seqs(1, block_size),)) if limit is None or block_size <= limit[0] else full
    block_bytes = block.totals.kv_cache_bytes_per_sequence * (block_size / block.workload.uniform.positions)
    weights = full.totals.weight_footprint_bytes
    activations = activation_live_set([full]).bytes
    capacity = model.gpu.capacity_bytes
    room = capacity - reserve - weights - activations
    return Capacity(capacity, weights, activations, reserve, block_bytes,
                    max(0, math.floor(room / block_bytes)) if room > 0 else 0)
