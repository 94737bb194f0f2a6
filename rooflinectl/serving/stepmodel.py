"""A step's time from the engine, without analysing every step from scratch.

A step of groups G (``specs.step.Seqs``) costs what ``engine.roofline.analyze`` says. Its ops split in two:
- every op but attention depends only on the step's token count N, its sequences B, its decode sequences D
  (new = 1: MLA runs them in the absorbed form) and, for MLA, the positions its prompt groups expand; those ops
  are timed once per key from one analysis of a step with the same key (the decodes folded into one group);
- each attention op is one kernel over all groups whose FLOPs, activation bytes and KV bytes are the sums of each
  group's (engine.count.attention.by_group), its weights read once: each group's part is taken from the analysis of
  that group alone (one sequence, cached by its new and cached tokens) and the sums are placed under the roofs
  (or timed by the calibrated op model) as the engine places them.
So :meth:`StepModel.time` equals ``analyze(step).totals.time_s`` (to rounding; tests/serving checks it) at a small
fraction of its cost. A serving stack (``specs.stack``) adds its costs: each op re-placed under the roofs scaled by
its efficiencies (not under ``calibrated``, whose op model is measured), a gap per kernel, a fixed cost per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..engine.calibrated import timed_by_model
from ..engine.count.op import Op
from ..engine.parallel import Layout
from ..engine.roofline import Analysis, analyze, place
from ..specs.hardware import GPU, Roofs
from ..specs.stack import Stack
from ..specs.step import Seqs
from ..specs.workload import Workload


class StepModel:
    """Step times of ``base``'s model and options on ``gpu`` under ``layout``; ``calibrated`` as in analyze;
    ``stack``'s costs beyond the roofline (None: none)."""

    def __init__(self, base: Workload, gpu: GPU, calibrated: bool = False, layout: Layout = Layout(),
                 stack: Stack | None = None) -> None:
        self.base = base
        self.gpu = gpu
        self.calibrated = calibrated
        self.layout = layout
        self.stack = stack
        self.op_model = gpu.measured.op_model if calibrated and gpu.measured is not None else None
        self.roofs = gpu.roofs(calibrated)
        if stack is not None and not calibrated:
            self.roofs = scaled(self.roofs, stack)
        self.scaled = stack is not None and not calibrated and (stack.bandwidth_efficiency, stack.compute_efficiency) != (1, 1)
        self.mla = base.model.mla is not None
        self.affine = base.model.sliding_window is None  # attention parts affine in cached (_group_parts)
        self._rest: dict[tuple[object, ...], tuple[float, int]] = {}
        self._parts: dict[tuple[int, int], tuple[tuple[str, float, float, float, float], ...]] = {}
        self._ops: dict[str, Op] = {}  # each attention op's shape (name, kind, count, dtype, unit) by name
        self.analyses = 0  # full analyses made: what the caches save

    def analyze(self, seqs: tuple[Seqs, ...]) -> Analysis:
        """The engine's full analysis of a step of these groups."""
        self.analyses += 1
        return analyze(self.base.with_seqs(seqs), self.gpu, self.calibrated, self.layout)

    def _time(self, op: Op) -> float:
        """One op's time, all its instances, under the model's roofs (and the op model where calibrated)."""
        placed = place(op, self.roofs)
        if self.op_model is not None:
            placed = timed_by_model(placed, self.op_model)
        return placed.total_time_s

    def _rest_time(self, counts: dict[tuple[int, int], int]) -> tuple[float, int]:
        """(time, kernels) of the step's ops other than attention. They depend on the step's tokens N and
        sequences B alone (the token-wise ops on N, the LM head and the logits' collectives on B); with MLA also
        on its decode sequences and on the positions its prompt groups expand, so there the key is the groups."""
        tokens = sum(new * c for (new, _), c in counts.items())
        sequences = sum(counts.values())
        decode = sum(c for (new, _), c in counts.items() if new == 1)
        prompts = tuple(sorted((c, new, cached) for (new, cached), c in counts.items() if new > 1))
        key: tuple[object, ...] = (decode, prompts) if self.mla else (tokens, sequences)
        if key not in self._rest:
            if self.mla:
                folded = ((Seqs(decode, 1),) if decode else ()) + tuple(Seqs(c, n, k) for c, n, k in prompts)
            else:  # the same N and B: N tokens spread as evenly as B sequences allow
                share, more = divmod(tokens, sequences)
                folded = tuple(Seqs(c, n) for c, n in ((more, share + 1), (sequences - more, share)) if c)
            rest = [p for p in self.analyze(folded).placements if p.op.kind != "attention"]
            time = sum(self._time(p.op) if self.scaled else p.total_time_s for p in rest)
            self._rest[key] = (time, sum(p.op.count for p in rest))
        return self._rest[key]

    def _group_parts(self, new: int, cached: int) -> tuple[tuple[str, float, float, float, float], ...]:
        """Each attention op's (name, FLOPs, activation bytes, KV bytes, weight bytes) for one sequence of a
        group. Without a sliding window every one of them is affine in the cached positions for a given ``new``
        (scores T·cached + T(T+1)/2, K and V read over cached + T positions), so a decode group's parts come from
        two analyses, at 0 and 1 cached; otherwise each (new, cached) is analysed once."""
        key = (new, cached)
        parts = self._parts.get(key)
        if parts is None:
            if new == 1 and self.affine and cached > 1:
                base, slope = self._group_parts(1, 0), self._group_parts(1, 1)
                parts = tuple((name, f + cached * (f1 - f), m + cached * (m1 - m), k + cached * (k1 - k),
                               w + cached * (w1 - w))
                              for (name, f, m, k, w), (_, f1, m1, k1, w1) in zip(base, slope))
            else:
                a = self.analyze((Seqs(1, new, cached),))
                found = []
                for p in a.placements:
                    if p.op.kind == "attention":
                        op = p.op
                        self._ops.setdefault(op.name, op)
                        found.append((op.name, op.flops, op.bytes - op.weight_bytes, op.kv_bytes, op.weight_bytes))
                parts = tuple(found)
            self._parts[key] = parts
        return parts

    def time_counts(self, counts: dict[tuple[int, int], int]) -> float:
        """:meth:`time` of a step given as {(new, cached): sequences}."""
        ops, kernels = self._roofline_counts(counts)
        if self.stack is None:
            return ops
        return ops + (kernels * self.stack.kernel_gap_us + self.stack.step_overhead_us) / 1e6

    def _roofline_counts(self, counts: dict[tuple[int, int], int]) -> tuple[float, int]:
        """(the step's ops' time, the kernels it launches): the engine's analysis under the model's roofs."""
        sums: dict[str, list[float]] = {}
        for (new, cached), count in counts.items():
            for name, flops, moved, kv, weights in self._group_parts(new, cached):
                s = sums.get(name)
                if s is None:
                    sums[name] = [count * flops, count * moved, count * kv, weights]
                else:
                    s[0] += count * flops
                    s[1] += count * moved
                    s[2] += count * kv
                    if weights > s[3]:
                        s[3] = weights
        time, kernels = self._rest_time(counts)
        for name, (flops, moved, kv, weights) in sums.items():
            op = replace(self._ops[name], flops=flops, bytes=moved + weights, kv_bytes=kv, weight_bytes=weights)
            time += self._time(op)
            kernels += op.count
        return time, kernels

    def time(self, seqs: tuple[Seqs, ...]) -> float:
        """The step's predicted time, seconds: its ops', and the stack's gaps and fixed cost."""
        counts: dict[tuple[int, int], int] = {}
        for g in seqs:
            counts[g.new, g.cached] = counts.get((g.new, g.cached), 0) + g.count
        return self.time_counts(counts)


def scaled(roofs: Roofs, stack: Stack) -> Roofs:
    """``roofs`` with the bandwidth and every peak scaled by the stack's efficiencies."""
    c = stack.compute_efficiency
    return roofs.model_copy(update={
        "bandwidth_gbps": roofs.bandwidth_gbps * stack.bandwidth_efficiency,
        "tensor_tflops": {k: v * c for k, v in roofs.tensor_tflops.items()},
        "vector_tflops": {k: v * c for k, v in roofs.vector_tflops.items()},
    })


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
