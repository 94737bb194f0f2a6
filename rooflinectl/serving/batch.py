"""A closed batch on the simulated engine: what ``analyze generate``, ``compare`` and ``plot pareto`` report.

B requests of P prompt and O output tokens arrive at once and no request follows them (a closed loop of B clients
that send one request each: ``load.closed_loop(B, B, …)``), on the engine ``simulate`` runs: a token budget a step,
decodes first, then prompts in the order they came. With chunked prefill (vLLM's default) a step's budget left
after the decodes takes the next prompt chunks, so the first requests decode while the later ones are prefilled
and each request has its own first-token time. TTFT, TPOT and E2E are the means over the B requests of
``simulate``'s definitions (aiperf's: TPOT = (E2E − TTFT) / (O − 1) per request); throughput is B·O over the
run's duration (its last token), per GPU of the layout. Without chunked prefill the whole batch's prompts are one
step (the budget B·P), then B decodes a step: the static batch of ``engine.generate``, which the costless stack
(``roofline``) reproduces (tests/serving/test_batch.py) and which ``Method.static`` sends there, to the bit.

Memory follows the engine. With chunked prefill a step holds at most the budget's tokens, so the activations are
those of one step of the budget (``capacity.kv_capacity``), whatever B; the KV cache is paged, each request holding
⌈(P + O − 1) / block⌉ blocks at its end (in its sliding and chunked layers at most those of a window or a chunk:
``kvcache.kv_blocks``); the batch fits when B of those fit the blocks the GPU has left (then
nothing is preempted), so the largest batch is blocks // blocks a request. Without chunked prefill the whole
batch's prefill sets the activations (``engine.memory``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..engine.calibrated import timed_by_model
from ..engine.generate import (
    MAX_BATCH,
    BatchRates,
    OpTime,
    Request,
    StepAnalyzer,
    budget_at,
    check_request,
)
from ..engine.generate import largest_batch as static_largest
from ..engine.memory import LiveSet, MemoryBudget, activation_live_set
from ..engine.parallel import Layout
from ..engine.roofline import Analysis, place
from ..errors import UserError
from ..specs.hardware import GPU
from ..specs.stack import Stack
from ..specs.step import Seqs
from ..specs.workload import Workload
from . import defaults
from .capacity import Capacity, kv_capacity, kv_parts
from .kvcache import EVERY_LAYER, BlockPool, kv_blocks
from .load import Lengths, closed_loop
from .metrics import Run, Stats
from .scheduler import SchedulerConfig
from .simulate import simulate
from .stepmodel import StepModel

# A step's groups of sequences as the simulation prices them: {(new tokens, cached positions): sequences}.
Counts = dict[tuple[int, int], int]
# The stack fields that are not costs: its identity, its figures per GPU family (``Stack.on`` has put the run's
# in place already) and its scheduler's settings. Every other field is a cost, a new one included, so that a
# stack whose costs are all at their defaults adds nothing to the roofline and a cost no one listed is not missed.
_NOT_COSTS = {"id", "name", "source", "notes", "families", "family", "prefill_steps", "max_num_batched_tokens"}


@dataclass(frozen=True)
class Method:
    """How a batch is served: the ``stack``'s costs, chunked prefill or not, the token budget a step (with chunked
    prefill; without, the step holds the batch's prompts), and the KV cache's block size."""

    stack: Stack
    chunked_prefill: bool = True
    max_num_batched_tokens: int = defaults.MAX_NUM_BATCHED_TOKENS
    block_size: int = defaults.BLOCK_SIZE

    @property
    def costless(self) -> bool:
        """Whether the stack adds nothing to the ops' roofline times (every cost at its default)."""
        blank = Stack(id=self.stack.id, name=self.stack.name, source=self.stack.source)
        return self.stack.model_dump(exclude=_NOT_COSTS) == blank.model_dump(exclude=_NOT_COSTS)

    @property
    def static(self) -> bool:
        """The static batch of ``engine.generate``: no chunked prefill, and no cost beyond the roofline."""
        return not self.chunked_prefill and self.costless

    @staticmethod
    def static_text() -> str:
        return "static batch: the prompts in one prefill step, then a decode step a token (no chunked prefill)"

    def text(self) -> str:
        """The method in words: the caption's line."""
        if self.static:
            return self.static_text()
        prefill = (f"chunked prefill, {self.max_num_batched_tokens:,} tokens a step" if self.chunked_prefill
                   else "no chunked prefill (the prompts in one step)")
        return f"simulated closed batch (all requests at once, no refills); {prefill}; stack {self.stack.id}"


class RecordingStepModel(StepModel):
    """The step model, keeping each step it prices ({(new, cached): sequences}, seconds) in ``steps``."""

    def __init__(self, base: Workload, gpu: GPU, calibrated: bool, layout: Layout, stack: Stack) -> None:
        super().__init__(base, gpu, calibrated, layout, stack)
        self.steps: list[tuple[Counts, float]] = []

    def time_counts(self, counts: Counts, new_shape: bool | None = None) -> float:
        t = super().time_counts(counts, new_shape)
        self.steps.append((dict(counts), t))
        return t


@dataclass(frozen=True)
class Phase:
    """The steps of a phase: how many, their simulated time, and their ops' time at the roofs (all, and bound by
    memory)."""

    steps: int
    time_s: float
    ops_s: float
    memory_s: float


@dataclass(frozen=True)
class Breakdown:
    """Where a run's time went: each op's time at the roofs over the steps that carry prompt tokens (``prefill``:
    with chunked prefill, beside the decodes of requests already prefilled) and over the decode-only steps, and the
    stack's costs beyond the ops as one more row (kind ``stack``) where the stack has any."""

    ops: tuple[OpTime, ...]
    phases: dict[str, Phase]


def _seqs(counts: Counts) -> tuple[Seqs, ...]:
    return tuple(Seqs(n, new, cached) for (new, cached), n in counts.items())


def breakdown(model: StepModel, steps: list[tuple[Counts, float]], prompt: int, costless: bool) -> Breakdown:
    """The :class:`Breakdown` of a run of requests of ``prompt`` tokens: each step's ops as the model prices them
    (``StepModel.step_ops``: the engine's ops of that step, its attention over all its groups), each placed on the
    GPU's roofs as ``roofline.analyze`` places it (and timed by the op model where calibrated). A group whose
    cached positions are fewer than the prompt's computes prompt tokens (a decode's are at least P)."""
    roofs = model.gpu.roofs(model.calibrated)
    ops: dict[str, list[object]] = {}  # name → [kind, prefill s, decode s]
    sums = {"prefill": [0, 0.0, 0.0, 0.0], "decode": [0, 0.0, 0.0, 0.0]}  # steps, time, ops, memory-bound
    for counts, t in steps:
        phase = "prefill" if any(cached < prompt for _, cached in counts) else "decode"
        s = sums[phase]
        s[0] += 1
        s[1] += t
        rest, attention = model.step_ops(counts)
        for op in (*rest, *attention):
            p = place(op, roofs)
            if model.op_model is not None:
                p = timed_by_model(p, model.op_model)
            s[2] += p.total_time_s
            if p.bound != "compute":  # memory, or a collective's link (engine.generate's rule)
                s[3] += p.total_time_s
            row = ops.setdefault(op.name, [op.kind, 0.0, 0.0])
            row[1 if phase == "prefill" else 2] += p.total_time_s  # type: ignore[operator]
    rows = [OpTime(name, str(kind), float(pre), float(dec)) for name, (kind, pre, dec) in ops.items()]  # type: ignore[arg-type]
    phases = {k: Phase(int(v[0]), v[1], v[2], v[3]) for k, v in sums.items() if v[0]}
    if not costless:
        rows.append(OpTime("stack costs", "stack", *(phases[k].time_s - phases[k].ops_s if k in phases else 0.0
                                                     for k in ("prefill", "decode"))))
    return Breakdown(tuple(rows), phases)


@dataclass(frozen=True)
class BatchRun(BatchRates):
    """A closed batch served by the simulated engine: the request, the run, the memory it holds, and the steps it
    ran ({(new, cached): sequences}, seconds, in order). Its figures have the names of ``engine.generate``'s
    ``Generation`` (the module's docstring says what each is here)."""

    request: Request
    run: Run
    memory: MemoryBudget
    method: Method
    gpus: int
    first: Analysis  # the run's first step, analysed: the GPU, its roofs, the layout and the workload it ran on
    steps: tuple[tuple[Counts, float], ...] = field(repr=False)
    model: StepModel = field(repr=False, compare=False)
    paged: tuple[int, int] | None = None  # the blocks a request takes in its attention layers, and their size

    @property
    def ttft(self) -> Stats:
        assert self.run.ttft is not None  # every request has a first token
        return self.run.ttft

    @property
    def ttft_s(self) -> float:
        return self.ttft.mean

    @property
    def tpot_s(self) -> float | None:
        return self.run.tpot.mean if self.run.tpot is not None else None

    @property
    def e2e_s(self) -> float:
        assert self.run.e2e is not None
        return self.run.e2e.mean

    @property
    def decode_time_s(self) -> float:
        """The mean over the requests of E2E − TTFT."""
        return self.e2e_s - self.ttft_s

    @property
    def duration_s(self) -> float:
        """From the arrival to the batch's last token."""
        return self.run.duration_s

    @property
    def span_s(self) -> float:
        return self.duration_s

    def _decode_steps(self) -> list[tuple[Counts, float]]:
        p = self.request.prompt
        return [s for s in self.steps if all(cached >= p for _, cached in s[0])]

    @property
    def tpot_first_s(self) -> float | None:
        """The first decode-only step's time (None where no step is)."""
        d = self._decode_steps()
        return d[0][1] if d and self.tpot_s is not None else None

    @property
    def tpot_last_s(self) -> float | None:
        d = self._decode_steps()
        return d[-1][1] if d and self.tpot_s is not None else None

    def decode_contexts(self) -> tuple[int, int] | None:
        """The longest context of the first and of the last decode-only step."""
        d = self._decode_steps()
        if not d:
            return None
        return max(c + 1 for _, c in d[0][0]), max(c + 1 for _, c in d[-1][0])

    @property
    def decode_steps(self) -> int:
        return len(self._decode_steps())

    @cached_property
    def breakdown(self) -> Breakdown:
        return breakdown(self.model, list(self.steps), self.request.prompt, self.method.costless)

    def op_times(self) -> list[OpTime]:
        return list(self.breakdown.ops)

    def phase_bound(self, phase: str) -> tuple[str, float]:
        """(the bound of most of the phase's ops' time at the roofs, that share of it)."""
        p = self.breakdown.phases[phase]
        share = p.memory_s / p.ops_s
        return ("memory", share) if share >= 0.5 else ("compute", 1 - share)


class BatchServer:
    """Closed batches of one request's prompt and output on one GPU and layout (``engine.choice.Server``): the
    memory rule of :class:`Method`, and each batch simulated."""

    def __init__(self, base: Workload, gpu: GPU, prompt: int, output: int, reserve_bytes: float, method: Method,
                 analyze_step: StepAnalyzer, calibrated: bool = False, layout: Layout = Layout()) -> None:
        if layout.ep > 1:
            raise UserError("--ep: expert parallelism's data-parallel attention is not simulated; give --tp, or "
                            "--stack roofline --no-chunked-prefill for the static batch")
        BlockPool.check_block_size(method.block_size)
        self.base, self.gpu, self.prompt, self.output = base, gpu, prompt, output
        self.reserve, self.method, self.analyze_step, self.layout = reserve_bytes, method, analyze_step, layout
        check_request(base, Request(prompt, output, 1))
        self.model = RecordingStepModel(base, gpu, calibrated, layout, method.stack)
        self.capacity: Capacity | None = None
        self.live: LiveSet | None = None
        self.parts = EVERY_LAYER  # what a request's positions take in each kind of layer (serving.kvcache)
        if method.chunked_prefill:
            budget = method.max_num_batched_tokens
            SchedulerConfig(max_num_batched_tokens=budget)  # checks the budget
            self.capacity = kv_capacity(self.model, budget, method.block_size, reserve_bytes)
            self.parts = self.capacity.parts
            # The step kv_capacity sizes: the budget's tokens as sequences the model's positions allow.
            limit = base.model.max_length()
            longest = min(budget, limit[0] if limit else budget)
            live = activation_live_set([self.model.analyze((Seqs(max(1, budget // longest), longest),))])
            self.live = LiveSet("prefill chunk", live.op, self.capacity.activation_bytes)
        elif base.model.sliding_window is not None or base.model.attention_chunk_size is not None:
            self.parts = kv_parts(self.model.analyze((Seqs(1, 1),)).workload, layout, method.block_size)[1]
        kv = kv_blocks(prompt + output - 1, method.block_size, self.parts)  # its attention layers' at its end
        # With chunked prefill, the paged cache's blocks a request takes in its attention layers and their size.
        self.paged = (kv, method.block_size) if self.capacity is not None else None
        self.blocks_per_request = kv + (self.capacity.state_blocks if self.capacity else 0)  # and a state's

    def budget(self, batch: int) -> MemoryBudget:
        """What ``batch`` requests hold (the module's docstring says how, with and without chunked prefill)."""
        if self.capacity is None or self.live is None:
            return budget_at(self.base, Request(self.prompt, self.output, batch), self.analyze_step, self.reserve)
        c = self.capacity
        per_request = self.blocks_per_request * c.block_bytes
        return MemoryBudget(capacity_bytes=c.capacity_bytes, weight_bytes=c.weight_bytes,
                            kv_cache_bytes=batch * per_request, kv_cache_bytes_per_sequence=per_request,
                            activations=self.live, reserve_bytes=c.reserve_bytes)

    def largest(self) -> int:
        if self.capacity is None:
            return static_largest(self.base, self.prompt, self.output, self.analyze_step, self.reserve)
        return min(MAX_BATCH, self.capacity.blocks // self.blocks_per_request)

    def most_at_once(self) -> int | None:
        """With chunked prefill, the token budget: every request a step schedules takes at least one of its tokens
        (scheduler.Scheduler.step), so no step runs more requests than that. Without, a step holds every prompt."""
        return self.method.max_num_batched_tokens if self.method.chunked_prefill else None

    def serve(self, batch: int) -> BatchRun:
        """``batch`` requests at once, simulated; a batch whose memory does not fit is a UserError."""
        request = Request(self.prompt, self.output, batch)
        check_request(self.base, request)
        memory = self.budget(batch)
        if not memory.fits:
            raise UserError(f"batch {batch:,} does not fit (largest {self.largest():,})")
        m = self.method
        if m.chunked_prefill:
            tokens, blocks = m.max_num_batched_tokens, self.capacity.blocks if self.capacity else 0
        else:  # one step holds every prompt (and, were one preempted, its recompute)
            tokens, blocks = max(batch * self.prompt, self.prompt + self.output - 1), batch * self.blocks_per_request
        load = closed_loop(batch, batch, Lengths("fixed", self.prompt), Lengths("fixed", self.output))
        model = self.model
        model.seen_shapes.clear()  # a run's new attention shapes are its own
        model.steps.clear()
        pool = BlockPool(blocks, m.block_size, self.capacity.state_blocks if self.capacity else 0, self.parts)
        run = simulate(load, model, pool, SchedulerConfig.on(m.stack, tokens, batch, m.chunked_prefill))
        steps = tuple(model.steps)
        first = model.analyze(_seqs(steps[0][0]))
        return BatchRun(request, run, memory, m, self.layout.gpus, first, steps, model, self.paged)

