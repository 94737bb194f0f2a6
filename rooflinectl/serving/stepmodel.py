"""A step's time from the engine, without analysing every step from scratch.

A step of groups G (``specs.step.Seqs``) costs what ``engine.roofline.analyze`` says. Its ops split in two:
- every op but attention depends only on the step's token count N, its sequences B, its decode sequences D
  (new = 1: MLA runs them in the absorbed form) and, for MLA, the positions its prompt groups expand; those ops
  are timed once per key from one analysis of a step with the same key (the decodes folded into one group);
- each attention op (and each op of a recurrent layer: engine.count.op.PER_SEQUENCE_KINDS, each sequence's own
  work) is one kernel over all groups whose FLOPs, activation bytes and KV bytes are the sums of each
  group's (engine.count.attention.by_group), its weights read once: each group's part is taken from the analysis of
  that group alone (one sequence, cached by its new and cached tokens) and the sums are placed under the roofs
  (or timed by the calibrated op model) as the engine places them.
So :meth:`StepModel.time` equals ``analyze(step).totals.time_s`` (to rounding; tests/serving checks it) at a small
fraction of its cost. A serving stack (``specs.stack``) adds its costs: each op re-placed under the roofs scaled by
its efficiencies (not under ``calibrated``, whose op model is measured), the attention ops' time over the stack's
attention efficiency, a cost per KV position and layer, a gap per kernel, a fixed cost per step and one per
sequence in it, and a cost for
each attention shape new to the run (the model keeps the shapes it has priced: one model serves one run). A stack
whose attention is ``batch_dense`` replaces the attention ops' sums by the engine's count of one sequence of the
step's N query tokens after L − N cached positions without a causal mask (:meth:`StepModel._dense_parts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..engine.calibrated import timed_by_model
from ..engine.count.op import PER_SEQUENCE_KINDS, Op
from ..engine.parallel import Layout
from ..engine.placement import add_times
from ..engine.roofline import Analysis, analyze, place
from ..errors import UserError
from ..specs.hardware import GPU, Roofs
from ..specs.stack import Stack
from ..specs.step import Seqs
from ..specs.workload import Workload

# Each attention op of a step as (name, FLOPs, activation bytes, KV bytes, weight bytes).
Parts = tuple[tuple[str, float, float, float, float], ...]
# The ops other than attention of one side of a step (StepModel._side): every op's name, and the side's ops by
# their place in the step with their times.
Side = tuple[tuple[str, ...], list[tuple[int, tuple[Op, float]]]]


def _spread(tokens: int, sequences: int) -> tuple[Seqs, ...]:
    """A step of ``tokens`` new tokens over ``sequences`` sequences, as evenly as they divide, none cached."""
    share, more = divmod(tokens, sequences)
    return tuple(Seqs(c, n) for c, n in ((more, share + 1), (sequences - more, share)) if c)


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
        self.affine = base.model.attention_affine_in_context  # attention parts affine in cached (_group_parts)
        self.dense = stack is not None and stack.attention == "batch_dense"
        if self.dense and (not self.affine or base.model.recurrent):
            raise UserError(f"stack '{stack.id}' runs a step's attention as one dense masked attention "  # type: ignore[union-attr]
                            f"(batch_dense); model {base.model.id}'s sliding-window, chunked, sparse or recurrent "
                            f"layers are not modelled that way: use a stack whose attention is varlen")
        self.attention_efficiency = stack.attention_efficiency if stack is not None else 1.0
        self.collective_efficiency = stack.collective_efficiency if stack is not None else 1.0
        self._rest: dict[tuple[object, ...], tuple[float, int]] = {}
        self._rest_ops: dict[tuple[object, ...], tuple[Op, ...]] = {}
        # The ops other than attention by tokens and by sequences (_rest_time), and the names of those that
        # depend on the sequences, once probed (a 1-tuple: its None is "cannot be split").
        self._by_tokens: dict[int, Side] = {}
        self._by_sequences: dict[int, Side] = {}
        self._sequence_probe: tuple[frozenset[str] | None] | None = None
        self._parts: dict[tuple[int, int], Parts] = {}
        self._dense: dict[tuple[int, int], Parts] = {}  # batch_dense's parts by (tokens, positions)
        self._ops: dict[str, Op] = {}  # each attention op's shape (name, kind, count, dtype, unit) by name
        self._peaks: dict[str, float] = {}  # each attention op's compute roof by name
        # The attention shapes (query tokens, KV positions) of the steps priced so far: the run's, for new_shape_us.
        self.seen_shapes: set[tuple[int, int]] = set()
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

    @staticmethod
    def _rest_key(counts: dict[tuple[int, int], int], mla: bool) -> tuple[object, ...]:
        """The key of a step's ops other than attention (:meth:`_rest_time`)."""
        if mla:
            decode = sum(c for (new, _), c in counts.items() if new == 1)
            return decode, tuple(sorted((c, new, cached) for (new, cached), c in counts.items() if new > 1))
        return sum(new * c for (new, _), c in counts.items()), sum(counts.values())

    def _rest_time(self, counts: dict[tuple[int, int], int]) -> tuple[float, int]:
        """(time, kernels) of the step's ops other than attention. They depend on the step's tokens N and
        sequences B alone (the token-wise ops on N, the LM head and the logits' collectives on B); with MLA also
        on its decode sequences and on the positions its prompt groups expand, so there the key is the groups.
        Without MLA each op depends on one of N and B (:meth:`_sequence_ops`), so the ops are analysed by N and by
        B apart and put back in their order: a run of T distinct token counts and S sequence counts costs T + S
        analyses, not one for each of the up to T·S pairs (7,437 pairs of 3,699 Ns and 154 Bs in 10,000 Poisson
        requests), and the times add in the engine's order, as one analysis of the step adds them."""
        key = self._rest_key(counts, self.mla)
        if key not in self._rest:
            tokens, sequences = sum(new * c for (new, _), c in counts.items()), sum(counts.values())
            sequence_ops = None if self.mla else self._sequence_ops()
            if self.mla:
                decode = sum(c for (new, _), c in counts.items() if new == 1)
                folded = ((Seqs(decode, 1),) if decode else ()) + tuple(
                    Seqs(c, new, cached) for c, new, cached in sorted(
                        (c, new, cached) for (new, cached), c in counts.items() if new > 1))
                timed = list(enumerate(self._timed_rest(folded)))
            elif sequence_ops is None:  # the same N and B: N tokens spread as evenly as B sequences allow
                timed = list(enumerate(self._timed_rest(_spread(tokens, sequences))))
            else:
                by_sequences = sequence_ops
                names, by_n = self._side(self._by_tokens, tokens, lambda name: name not in by_sequences)
                same, by_b = self._side(self._by_sequences, sequences, lambda name: name in by_sequences)
                if names == same:
                    timed = sorted(by_n + by_b)
                else:  # the two steps' ops differ (a model whose ops come and go with the size): the pair's own
                    timed = list(enumerate(self._timed_rest(_spread(tokens, sequences))))
            self._rest[key] = (add_times(t for _, (_, t) in timed), sum(op.count for _, (op, _) in timed))
            self._rest_ops[key] = tuple(op for _, (op, _) in timed)
        return self._rest[key]

    def _timed_rest(self, folded: tuple[Seqs, ...]) -> list[tuple[Op, float]]:
        """The ops other than attention of a step of ``folded``, each with its time (all instances; a collective
        at the stack's collective efficiency), in the engine's order."""
        return [(p.op, (self._time(p.op) if self.scaled else p.total_time_s)
                 / (self.collective_efficiency if p.op.kind == "communication" else 1.0))
                for p in self.analyze(folded).placements if p.op.kind not in PER_SEQUENCE_KINDS]

    def _side(self, cache: dict[int, Side], size: int, keep: Callable[[str], bool]) -> Side:
        """(the names of all the step's ops other than attention, those that ``keep`` takes by their place in
        the step with their times): the ops that depend on the tokens alone (``cache`` by tokens) at ``size``
        tokens, from a step of them in as few sequences as the model's length allows; or those that depend on
        the sequences alone, from a step of ``size`` decodes."""
        found = cache.get(size)
        if found is None:
            if cache is self._by_tokens:
                limit = self.base.model.max_length()
                folded = _spread(size, -(-size // limit[0]) if limit else 1)
            else:
                folded = _spread(size, size)
            timed = self._timed_rest(folded)
            found = cache[size] = (tuple(op.name for op, _ in timed),
                                   [(i, one) for i, one in enumerate(timed) if keep(one[0].name)])
        return found

    def _sequence_ops(self) -> frozenset[str] | None:
        """The names of the ops other than attention that depend on a step's sequences B alone (the LM head, the
        logits' collectives; the rest depend on its tokens N alone), probed once at (N, B) = (64, 1), (64, 4) and
        (128, 4): an op whose counts change with B at a fixed N, and not with N at a fixed B. None where an op
        changes with both, the probes' ops differ, or the model cannot take them: the pair is then the key."""
        if self._sequence_probe is None:
            def counted(op: Op) -> tuple[float, ...]:
                return op.flops, op.bytes, op.count, op.weight_bytes, op.kv_bytes, op.network_bytes

            try:
                a, b, c = ([op for op, _ in self._timed_rest(_spread(n, s))] for n, s in ((64, 1), (64, 4), (128, 4)))
            except UserError:
                self._sequence_probe = (None,)
                return None
            names = [op.name for op in a]
            if names != [op.name for op in b] or names != [op.name for op in c]:
                self._sequence_probe = (None,)
                return None
            by_b = {x.name for x, y in zip(a, b) if counted(x) != counted(y)}
            by_n = {y.name for y, z in zip(b, c) if counted(y) != counted(z)}
            self._sequence_probe = (None if by_b & by_n else frozenset(by_b),)
        return self._sequence_probe[0]

    def _attention_parts(self, w: Workload) -> Parts:
        """Each attention op of the analysis of ``w`` (a step of one sequence) as (name, FLOPs, activation bytes,
        KV bytes, weight bytes), its shape kept by name."""
        self.analyses += 1
        found = []
        for p in analyze(w, self.gpu, self.calibrated, self.layout).placements:
            if p.op.kind in PER_SEQUENCE_KINDS:
                op = p.op
                self._ops.setdefault(op.name, op)
                found.append((op.name, op.flops, op.bytes - op.weight_bytes, op.kv_bytes, op.weight_bytes))
        return tuple(found)

    def _dense_parts(self, tokens: int, positions: int) -> Parts:
        """batch_dense's attention ops for a step of N = ``tokens`` query tokens over L = ``positions`` KV
        positions: the engine's count of one sequence of N new tokens after L − N cached, without the causal mask
        (specs.stack.Stack). Every part of that count is a·N·L + b·N + c·L + d (N·L scores, Q and O over N tokens,
        K and V over L positions, what the kernel reads once), so it is taken from the analyses of four small
        sequences, N = 2 and 3 at L = N and N + 1, at any N ≥ 2 and any L, the model's position limit included
        (a dense step's L is the whole batch's); N = 1, a lone decode, from two (MLA runs a single token in its
        absorbed form, whose parts are another such function)."""
        key = (tokens, positions)
        parts = self._dense.get(key)
        if parts is not None:
            return parts
        n, ln = tokens, positions
        if (n, ln - n) in ((1, 0), (1, 1), (2, 0), (2, 1), (3, 0), (3, 1)):
            w = self.base.with_seqs((Seqs(1, n, ln - n),)).model_copy(update={"causal": False})
            parts = self._attention_parts(w)
        elif n == 1:
            parts = tuple((name, f + (ln - 1) * (f1 - f), m + (ln - 1) * (m1 - m), k + (ln - 1) * (k1 - k),
                           w + (ln - 1) * (w1 - w))
                          for (name, f, m, k, w), (_, f1, m1, k1, w1) in zip(self._dense_parts(1, 1),
                                                                             self._dense_parts(1, 2)))
        else:
            f22, f23, f33, f34 = (self._dense_parts(*k) for k in ((2, 2), (2, 3), (3, 3), (3, 4)))
            found = []
            for p22, p23, p33, p34 in zip(f22, f23, f33, f34):
                values = []
                for a22, a23, a33, a34 in zip(p22[1:], p23[1:], p33[1:], p34[1:]):
                    nl = (a34 - a33) - (a23 - a22)  # the N·L coefficient
                    slope = (a23 - a22) - 2 * nl  # per position beyond N
                    g2, g3 = a22 - 4 * nl, a33 - 9 * nl  # at L = N, less the N·L term: linear in N
                    values.append(nl * n * ln + slope * (ln - n) + g2 + (n - 2) * (g3 - g2))
                found.append((p22[0], *values))
            parts = tuple(found)  # type: ignore[arg-type]
        self._dense[key] = parts
        return parts

    def _group_parts(self, new: int, cached: int) -> Parts:
        """Each attention op's (name, FLOPs, activation bytes, KV bytes, weight bytes) for one sequence of a
        group. Without a sliding window every one of them is affine in the cached positions for a given ``new``
        (scores T·cached + T(T+1)/2, K and V read over cached + T positions; a recurrent layer's state, read from 1
        cached on, constant), so a decode group's parts come from two analyses, at 1 and 2 cached. With a sliding window of W (and no chunks) a decode's sliding layers read
        min(cached + 1, W) positions: constant from cached = W − 1 on, while the full layers' parts stay affine, so
        past the window the parts are affine again, from two analyses at W + 1 and W + 2 cached; likewise past
        sparse attention's top-k K (its core constant, its indexer affine). Otherwise each
        (new, cached) is analysed once."""
        key = (new, cached)
        parts = self._parts.get(key)
        if parts is None:
            window = self.base.model.attention_span  # a sliding window, or sparse attention's top-k
            if new == 1 and self.affine and cached > 2:
                # From 1 cached on: a recurrent layer reads its state only where a sequence has cached positions.
                parts = self._line(1, cached)
            elif (new == 1 and window is not None and self.base.model.attention_chunk_size is None
                  and cached > window + 2):
                parts = self._line(window + 1, cached)
            else:
                parts = self._attention_parts(self.base.with_seqs((Seqs(1, new, cached),)))
            self._parts[key] = parts
        return parts

    def _line(self, start: int, cached: int) -> Parts:
        """A decode's parts at ``cached`` on the line through its parts at ``start`` and ``start + 1`` cached."""
        base, next_ = self._group_parts(1, start), self._group_parts(1, start + 1)
        steps = cached - start
        return tuple((name, f + steps * (f1 - f), m + steps * (m1 - m), k + steps * (k1 - k), w + steps * (w1 - w))
                     for (name, f, m, k, w), (_, f1, m1, k1, w1) in zip(base, next_))

    @staticmethod
    def shape(counts: dict[tuple[int, int], int]) -> tuple[int, int]:
        """A step's attention shape: (its query tokens N, its KV positions L, every sequence's cached and new
        tokens together), the key of ``new_shape_us``."""
        return (sum(new * c for (new, _), c in counts.items()),
                sum((new + cached) * c for (new, cached), c in counts.items()))

    def time_counts(self, counts: dict[tuple[int, int], int], new_shape: bool | None = None) -> float:
        """:meth:`time` of a step given as {(new, cached): sequences}."""
        other, attention, kernels, layers = self.op_times(counts)
        ops = other + attention / self.attention_efficiency
        if self.stack is None:
            return ops
        tokens, positions = key = self.shape(counts)
        if new_shape is None:
            new_shape = key not in self.seen_shapes
            self.seen_shapes.add(key)
        return (ops + positions * layers * self.stack.kv_position_ns / 1e9
                + (kernels * self.stack.kernel_gap_us + self.stack.step_overhead_us
                   + sum(counts.values()) * self.stack.sequence_overhead_us
                   + (self.stack.new_shape_us if new_shape else 0.0)) / 1e6)

    def attention_ops(self, counts: dict[tuple[int, int], int]) -> list[Op]:
        """The step's attention ops, each one kernel over all its groups (the module's docstring): the groups'
        sums of FLOPs, activation and KV bytes, the weights read once; under batch_dense the dense count."""
        return [replace(self._ops[name], flops=flops, bytes=moved + weights, kv_bytes=kv, weight_bytes=weights)
                for name, (flops, moved, kv, weights) in self._attention_sums(counts).items()]

    def _attention_sums(self, counts: dict[tuple[int, int], int]) -> dict[str, list[float]]:
        """Each attention op's [FLOPs, activation bytes, KV bytes, weight bytes] in a step (:meth:`attention_ops`)."""
        sums: dict[str, list[float]] = {}
        if self.dense:
            tokens, positions = self.shape(counts)
            for name, flops, moved, kv, weights in self._dense_parts(tokens, positions):
                sums[name] = [flops, moved, kv, weights]
        else:
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
        return sums

    def step_ops(self, counts: dict[tuple[int, int], int]) -> tuple[tuple[Op, ...], list[Op]]:
        """The ops a step of {(new, cached): sequences} is priced as: (those other than attention, the attention
        ops), each with its instance count; :meth:`op_times` is their times. Steps whose ops other than attention
        are the same share one tuple of them (the model's cache)."""
        self._rest_time(counts)
        return self._rest_ops[self._rest_key(counts, self.mla)], self.attention_ops(counts)

    @staticmethod
    def attention_layers(op: Op) -> int:
        """The layers whose attention reads the KV positions, of one attention op: its instances where it is the
        part that reads them (flash, or the scores of an unfused attention), else 0."""
        return op.count if op.attention is not None and op.attention.part in ("flash", "qk") else 0

    def op_times(self, counts: dict[tuple[int, int], int]) -> tuple[float, float, int, int]:
        """The step's ops as the engine analyses them under the model's roofs (or op model): (the time of its ops
        other than attention, the time of its attention ops before the stack's attention efficiency, the kernels
        it launches, the layers whose attention reads its KV positions). Under batch_dense the attention ops are
        the dense count in place of the groups' sums."""
        other, kernels = self._rest_time(counts)
        attention = 0.0
        layers = 0
        if self.op_model is not None:  # the op model reads each op's shape: the ops themselves
            for op in self.attention_ops(counts):
                attention += self._time(op)
                kernels += op.count
                layers += self.attention_layers(op)
            return other, attention, kernels, layers
        # At the roofs an op's time is place()'s max(FLOPs / peak, bytes / bandwidth) × count, the same operations
        # in the same order, without an Op made for each group sum (dataclasses.replace took 40% of a long run).
        bandwidth = self.roofs.bandwidth
        for name, (flops, moved, _, weights) in self._attention_sums(counts).items():
            op = self._ops[name]
            peak = self._peaks.get(name)
            if peak is None:
                peak = self._peaks[name] = self.roofs.peak(op.dtype, op.compute_unit)
            attention += max(flops / peak, (moved + weights) / bandwidth) * op.count
            kernels += op.count
            layers += self.attention_layers(op)
        return other, attention, kernels, layers

    def time(self, seqs: tuple[Seqs, ...], new_shape: bool | None = None) -> float:
        """The step's predicted time, seconds: its ops', and the stack's costs. ``new_shape``: whether the step
        pays the stack's cost of an attention shape new to the run (None: if this model has not priced a step of
        its shape before, which it then records)."""
        counts: dict[tuple[int, int], int] = {}
        for g in seqs:
            counts[g.new, g.cached] = counts.get((g.new, g.cached), 0) + g.count
        return self.time_counts(counts, new_shape)

    def _verify_parts(self, new: int, cached: int) -> Parts:
        """One verifying sequence's attention parts: ``new`` query tokens (its last token and its drafts) after
        ``cached`` positions. The engine's own group, but with MLA, whose engines verify in the absorbed (decode)
        form (FlashMLA takes several queries a sequence): the FLOPs and activation bytes of ``new`` decodes after
        cached … cached + new − 1 positions, and the latent read once, the last one's."""
        if not self.mla:
            return self._group_parts(new, cached)
        rows = [self._group_parts(1, cached + j) for j in range(new)]
        return tuple((name, sum(r[i][1] for r in rows), sum(r[i][2] - r[i][3] for r in rows) + rows[-1][i][3],
                      rows[-1][i][3], w) for i, (name, _, _, _, w) in enumerate(rows[0]))

    def time_verify(self, counts: dict[tuple[int, int], int], verifying: dict[tuple[int, int], int],
                    new_shape: bool | None = None) -> float:
        """:meth:`time_counts` of a step whose ``verifying`` groups {(new, cached): sequences} verify drafts
        (``serving.speculation``) beside its other ``counts``. A verifying group is the engine's group of ``new``
        tokens, but for two things: its logits are computed at every one of its tokens (the LM head over ``new``
        rows a sequence, not the last alone), so the ops other than attention are those of its tokens as decodes;
        and with MLA its attention is in the absorbed form (:meth:`_verify_parts`)."""
        if not verifying:
            return self.time_counts(counts, new_shape)
        rest = dict(counts)
        for (new, cached), c in verifying.items():
            rest[1, cached] = rest.get((1, cached), 0) + new * c
        other, kernels = self._rest_time(rest)
        every = dict(counts)
        for key, c in verifying.items():
            every[key] = every.get(key, 0) + c
        if self.dense or not self.mla:
            ops = self.attention_ops(every)
        else:
            sums: dict[str, list[float]] = {}
            groups = [(c, self._group_parts(*key)) for key, c in counts.items()]
            for count, parts in groups + [(c, self._verify_parts(*key)) for key, c in verifying.items()]:
                for name, flops, moved, kv, weights in parts:
                    got = sums.setdefault(name, [0.0, 0.0, 0.0, weights])
                    got[0] += count * flops
                    got[1] += count * moved
                    got[2] += count * kv
                    got[3] = max(got[3], weights)
            ops = [replace(self._ops[name], flops=f, bytes=m + w, kv_bytes=kv, weight_bytes=w)
                   for name, (f, m, kv, w) in sums.items()]
        attention, layers = 0.0, 0
        for op in ops:
            attention += self._time(op)
            kernels += op.count
            layers += self.attention_layers(op)
        total = other + attention / self.attention_efficiency
        if self.stack is None:
            return total
        key = self.shape(every)
        if new_shape is None:
            new_shape = key not in self.seen_shapes
            self.seen_shapes.add(key)
        return (total + key[1] * layers * self.stack.kv_position_ns / 1e9
                + (kernels * self.stack.kernel_gap_us + self.stack.step_overhead_us
                   + (self.stack.new_shape_us if new_shape else 0.0)) / 1e6)


def scaled(roofs: Roofs, stack: Stack) -> Roofs:
    """``roofs`` with the bandwidth and every peak scaled by the stack's efficiencies."""
    c = stack.compute_efficiency
    return roofs.model_copy(update={
        "bandwidth_gbps": roofs.bandwidth_gbps * stack.bandwidth_efficiency,
        "tensor_tflops": {k: v * c for k, v in roofs.tensor_tflops.items()},
        "vector_tflops": {k: v * c for k, v in roofs.vector_tflops.items()},
    })
