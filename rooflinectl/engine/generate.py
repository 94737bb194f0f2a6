"""A served request, from the engine's own steps: one prefill, then a decode step per output token after the first.

A batch of B requests of P prompt tokens and O output tokens each runs, on one copy of the model:

  prefill      one step of batch B, seq_len P (``roofline.analyze`` of it). It writes the prompt's K and V and
               its LM head gives each sequence its first output token: time to first token (TTFT) = its time.
  decode i     for i = 1 … O − 1, one step of batch B at context P + i (the new token attends to the P + i − 1
               cached positions and to itself; decode's ``context`` counts the new token). Its LM head gives
               output token i + 1. Time per output token (TPOT) = the mean of these steps (vLLM's benchmark
               definition: (end-to-end − TTFT) / (O − 1)); O = 1 has no decode step and no TPOT.
  end-to-end   TTFT + Σ decode steps. Output tokens/s per GPU = B·O / end-to-end / GPUs; total tokens/s per GPU
               counts the prompts too, B·(P + O); per request: O / end-to-end, and 1 / TPOT while decoding.

The sequence holds P + O tokens at positions 0 … P + O − 1, so P + O may not exceed the model's position limit
(vLLM's max_model_len counts prompt and output alike); the last decode step uses P + O − 1 positions.

Nothing here counts FLOPs or bytes: every step is the engine's ``Analysis``, produced by the ``StepAnalyzer``
the caller passes (``roofline.analyze`` on one GPU; a per-GPU analysis of a parallel layout slots in there,
with ``gpus`` the GPUs one copy of the model spans). Long outputs stay cheap by the structure of a decode
series (``decode_series``): every op's FLOPs and bytes are exact integers affine in the context, checked
on the analysed steps, and every step's time is then computed op by op by the same expression as
``roofline.place`` gives, in the same order, so that it equals ``analyze`` of that step to the last bit. A sliding
window's reads, min(context, W) positions, are affine on each side of W but not across it: a series that crosses
W leaves the line through its first two steps at a later sample, fails the check, and is analysed step by step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import UserError
from ..specs.load import validate
from ..specs.workload import Workload
from .calibrated import curve_time, op_class
from .memory import MemoryBudget, memory_budget
from .placement import add_times
from .roofline import Analysis

StepAnalyzer = Callable[[Workload], Analysis]

# The largest batch a workload may give (specs.sizes.Batch): a larger --batch is refused, and the search for
# the largest batch that fits stops there.
MAX_BATCH = 2**20


@dataclass(frozen=True)
class Request:
    """B requests of P prompt tokens, each generating O tokens."""

    prompt: int
    output: int
    batch: int

    @property
    def decode_contexts(self) -> range:
        """The contexts of the decode steps: P + 1 … P + O − 1 (empty for O = 1)."""
        return range(self.prompt + 1, self.prompt + self.output)

    @property
    def longest_context(self) -> int:
        """The positions the KV cache holds at the end: P + O − 1 (the last token's K and V are never written)."""
        return self.prompt + self.output - 1


def check_request(base: Workload, r: Request) -> None:
    """Refuse, in one line, a request no step can serve: a size below 1, or P + O beyond the model's positions."""
    for name, value, what in (("--prompt", r.prompt, "prompt tokens per request"),
                              ("--output", r.output, "tokens each request generates"),
                              ("--batch", r.batch, "requests served together")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UserError(f"{name} {value}: give a positive integer ({what})")
    if r.batch > MAX_BATCH:
        raise UserError(f"--batch {r.batch:,}: at most {MAX_BATCH:,} requests (the largest batch a step takes)")
    limit = base.model.max_length()
    if limit is not None and r.prompt + r.output > limit[0]:
        most, field = limit
        raise UserError(f"prompt {r.prompt:,} + output {r.output:,} = {r.prompt + r.output:,} tokens exceed model "
                        f"{base.model.id}'s {field} of {most:,} (the sequence's positions 0 … "
                        f"{r.prompt + r.output - 1:,} must exist)")


def step_workload(base: Workload, phase: str, batch: int, length: int) -> Workload:
    """``base`` (its model, data types, attention and fusions) as a prefill of ``length`` tokens or a decode step
    at context ``length``, of ``batch`` sequences; validated as any workload is (position limits included)."""
    decode = phase == "decode"
    data = {**dict(base), "phase": phase, "batch": batch, "tokens_per_seq": 1 if decode else length,
            "kv_len": length}
    return validate(Workload, data, f"{phase} step")


@dataclass(frozen=True)
class DecodeSeries:
    """The decode steps of a request, at contexts ``first.workload.kv_len`` … ``last.workload.kv_len``."""

    first: Analysis
    last: Analysis
    step_times_s: tuple[float, ...]  # each step's predicted time, in order of context
    op_times_s: tuple[float, ...]  # each op of ``first.placements``, all its instances over every step
    memory_bound_s: float  # the part of the steps' time spent in ops bound by memory
    analysed_every_step: bool  # False: times from the affine counts, checked on the analysed steps

    @property
    def steps(self) -> int:
        return len(self.step_times_s)

    @property
    def total_time_s(self) -> float:
        return add_times(self.step_times_s)

    @property
    def mean_time_s(self) -> float:
        return self.total_time_s / self.steps


# A series this short is analysed step by step: the affine path analyses four steps (first, second, middle,
# last) to fit and check its lines, and saves nothing below that.
_ANALYSE_ALL_BELOW = 4


Coefficients = tuple[float, float, float, float, float, float, int, float]


def _affine(samples: Sequence[Analysis], offsets: Sequence[int]) -> list[Coefficients] | None:
    """Each op's (F₀, ΔF, B₀, ΔB, peak, bandwidth, count, latency) over the series, where F(first + d) = F₀ + d·ΔF
    and likewise for bytes, with ``samples[i]`` at ``first + offsets[i]`` (``offsets`` 0, 1, …); None unless every
    sample has the same ops (names, counts, roofs) and integer counts exactly on those lines."""
    a0, a1 = samples[0], samples[1]
    coeffs: list[Coefficients] = []
    for i, p0 in enumerate(a0.placements):
        if len(a1.placements) != len(a0.placements):
            return None
        p1 = a1.placements[i]
        f0, b0 = p0.op.flops, p0.op.bytes
        if not all(isinstance(v, int) for v in (f0, b0, p1.op.flops, p1.op.bytes)):
            return None
        coeffs.append((f0, p1.op.flops - f0, b0, p1.op.bytes - b0, p0.peak_flops, p0.bandwidth, p0.op.count,
                       p0.latency_s))
    for a, d in zip(samples, offsets, strict=True):
        if len(a.placements) != len(coeffs) or a.op_model != a0.op_model:
            return None
        for (f0, df, b0, db, peak, bw, n, lat), p, p0 in zip(coeffs, a.placements, a0.placements, strict=True):
            if (p.name, p.op.count, p.peak_flops, p.bandwidth, p.latency_s) != (p0.name, n, peak, bw, lat):
                return None
            if p.op.flops != f0 + d * df or p.op.bytes != b0 + d * db:
                return None
    return coeffs


def decode_series(step: Callable[[int], Analysis], first: int, last: int) -> DecodeSeries:
    """The decode steps at contexts ``first`` … ``last`` (``step(c)`` analyses the one at context c; any series of
    decode steps whose groups' cached positions each grow by one a step, indexed by c, is one).

    Every step's time is ``analyze``'s: where the steps' ops have integer FLOPs and bytes affine in the context
    (checked exactly at ``first``, ``first + 1``, the middle and ``last``: the engine's decode counts are, since
    attention reads and scores grow by one position per step and nothing else depends on the context), each
    step's time is Σ count·max(F(c)/peak, B(c)/bandwidth) over its ops in order, the expression and order of
    ``roofline.place`` and ``roofline.analyze``, and under a calibrated op model each op's max read through the
    model's curves as ``roofline.timed_by_model`` reads it (engine.calibrated.curve_time, the same function on
    the same floats). A series that is not affine as a whole is split in halves, each tried the same way, down to
    series too short to fit: a count affine by pieces (a sliding window's reads stop growing at the window) is
    then analysed only near its breaks."""
    if last < first:
        raise ValueError(f"an empty decode series: {first} … {last}")
    whole = _series(step, first, last, split=last - first + 1 >= 4 * _ANALYSE_ALL_BELOW)
    if whole is not None:
        return whole
    middle = (first + last) // 2
    low, high = decode_series(step, first, middle), decode_series(step, middle + 1, last)
    if [p.name for p in low.first.placements] != [p.name for p in high.first.placements]:
        raise ValueError("the decode steps of one request have different ops")  # a bug in the engine
    return DecodeSeries(first=low.first, last=high.last, step_times_s=low.step_times_s + high.step_times_s,
                        op_times_s=tuple(a + b for a, b in zip(low.op_times_s, high.op_times_s)),
                        memory_bound_s=low.memory_bound_s + high.memory_bound_s,
                        analysed_every_step=low.analysed_every_step and high.analysed_every_step)


def _series(step: Callable[[int], Analysis], first: int, last: int, split: bool = False) -> DecodeSeries | None:
    """:func:`decode_series` over one stretch: affine as a whole, or every step analysed; None where it is not
    affine and ``split`` says the caller splits it instead."""
    a_first = step(first)
    a_last = step(last) if last != first else a_first
    coeffs = None
    if last - first + 1 >= _ANALYSE_ALL_BELOW:
        middle = (first + last) // 2
        coeffs = _affine([a_first, step(first + 1), step(middle), a_last], (0, 1, middle - first, last - first))
    if coeffs is None and split:
        return None
    op_totals = [0.0] * len(a_first.placements)
    times: list[float] = []
    memory_bound = 0.0
    if coeffs is None:
        for c in range(first, last + 1):
            a = a_first if c == first else a_last if c == last else step(c)
            if [p.name for p in a.placements] != [p.name for p in a_first.placements]:
                raise ValueError("the decode steps of one request have different ops")  # a bug in the engine
            for i, p in enumerate(a.placements):
                op_totals[i] += p.total_time_s
                if p.bound != "compute":  # memory, or a collective's link: the phase's "memory" share
                    memory_bound += p.total_time_s
            times.append(a.totals.time_s)
    else:
        model = a_first.op_model
        classes = [op_class(p.op) for p in a_first.placements]
        for d in range(last - first + 1):
            t = 0.0  # placement.add_times, as roofline.analyze adds: from 0 (0 + x is x, to the bit), in order
            for i, (f0, df, b0, db, peak, bw, n, lat) in enumerate(coeffs):
                # roofline.place's expressions: a collective's latency added to its bytes' time
                compute = (f0 + d * df) / peak
                memory = lat + (b0 + d * db) / bw if lat else (b0 + d * db) / bw
                one = max(compute, memory)
                cls = classes[i]
                if model is not None and cls is not None:  # roofline.timed_by_model's reading
                    one = curve_time(cls, "compute" if compute > memory else "memory", one, model).time_s
                ti = one * n
                op_totals[i] += ti
                if not compute > memory:  # roofline.Placement.bound: memory on a tie
                    memory_bound += ti
                t += ti
            times.append(t)
    return DecodeSeries(first=a_first, last=a_last, step_times_s=tuple(times), op_times_s=tuple(op_totals),
                        memory_bound_s=memory_bound, analysed_every_step=coeffs is None)


@dataclass(frozen=True)
class OpTime:
    """One op's time over the whole request: all its instances in the prefill and in every decode step."""

    name: str
    kind: str
    prefill_s: float
    decode_s: float

    @property
    def total_s(self) -> float:
        return self.prefill_s + self.decode_s


class BatchRates:
    """The rates of a served batch, one rule for the static batch (:class:`Generation`) and the simulated one
    (``serving.batch.BatchRun``): per GPU, B·O output tokens (B·(P + O) with the prompts) over ``span_s``, the
    time from the requests' arrival to the batch's last token, and the GPUs one copy spans; per request, O over
    its end-to-end time and, while decoding, 1 / TPOT."""

    request: Request
    gpus: int

    @property
    def span_s(self) -> float:
        raise NotImplementedError

    @property
    def e2e_s(self) -> float:
        raise NotImplementedError

    @property
    def tpot_s(self) -> float | None:
        raise NotImplementedError

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.request.batch * self.request.output / self.span_s / self.gpus

    @property
    def total_tokens_per_s_per_gpu(self) -> float:
        r = self.request
        return r.batch * (r.prompt + r.output) / self.span_s / self.gpus

    @property
    def output_tokens_per_s_per_request(self) -> float:
        return self.request.output / self.e2e_s

    @property
    def decode_tokens_per_s_per_request(self) -> float | None:
        return 1 / self.tpot_s if self.tpot_s is not None else None


@dataclass(frozen=True)
class Generation(BatchRates):
    request: Request
    prefill: Analysis
    decode: DecodeSeries | None  # None: one output token, no decode step
    memory: MemoryBudget
    gpus: int = 1  # GPUs one copy of the model runs on (the analyses are each GPU's share)

    @property
    def ttft_s(self) -> float:
        return self.prefill.totals.time_s

    @property
    def decode_time_s(self) -> float:
        return self.decode.total_time_s if self.decode is not None else 0.0

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.decode_time_s

    @property
    def tpot_s(self) -> float | None:
        return self.decode.mean_time_s if self.decode is not None else None

    @property
    def tpot_first_s(self) -> float | None:
        return self.decode.step_times_s[0] if self.decode is not None else None

    @property
    def tpot_last_s(self) -> float | None:
        return self.decode.step_times_s[-1] if self.decode is not None else None

    @property
    def span_s(self) -> float:
        """Every request starts and ends together: the span is the end-to-end time."""
        return self.e2e_s

    def phase_bound(self, phase: str) -> tuple[str, float]:
        """(the bound of the ops that take most of the phase's time, that share of it)."""
        if phase == "prefill":
            total = self.prefill.totals.time_s
            memory = add_times(p.total_time_s for p in self.prefill.placements if p.bound == "memory")
        else:
            if self.decode is None:
                raise ValueError("no decode step")
            total, memory = self.decode.total_time_s, self.decode.memory_bound_s
        share = memory / total
        return ("memory", share) if share >= 0.5 else ("compute", 1 - share)

    def op_times(self) -> list[OpTime]:
        """Each op's time over the request, in the prefill's order (an op only decode has after them)."""
        prefill = {p.name: p for p in self.prefill.placements}
        decode = {} if self.decode is None else {
            p.name: (p, t) for p, t in zip(self.decode.first.placements, self.decode.op_times_s, strict=True)}
        names = list(prefill) + [n for n in decode if n not in prefill]
        out = []
        for name in names:
            p = prefill.get(name)
            d = decode.get(name)
            kind = p.op.kind if p is not None else d[0].op.kind if d is not None else ""
            out.append(OpTime(name=name, kind=kind, prefill_s=p.total_time_s if p else 0.0,
                              decode_s=d[1] if d else 0.0))
        return out


def generate(base: Workload, request: Request, analyze_step: StepAnalyzer, reserve_bytes: float,
             gpus: int = 1) -> Generation:
    """The request on the GPU ``analyze_step`` places steps on; whether it fits is ``memory.fits``."""
    check_request(base, request)
    b, p = request.batch, request.prompt
    prefill = analyze_step(step_workload(base, "prefill", b, p))
    contexts = request.decode_contexts
    decode = None
    if contexts:
        decode = decode_series(lambda c: analyze_step(step_workload(base, "decode", b, c)), contexts[0],
                               contexts[-1])
    longest = decode.last if decode is not None else prefill
    return Generation(request=request, prefill=prefill, decode=decode,
                      memory=memory_budget(prefill, longest, reserve_bytes), gpus=gpus)


def budget_at(base: Workload, request: Request, analyze_step: StepAnalyzer, reserve_bytes: float) -> MemoryBudget:
    """The memory the request's batch holds: its prefill and its longest decode step only (no series)."""
    check_request(base, request)
    prefill = analyze_step(step_workload(base, "prefill", request.batch, request.prompt))
    longest = prefill
    if request.output > 1:
        longest = analyze_step(step_workload(base, "decode", request.batch, request.longest_context))
    return memory_budget(prefill, longest, reserve_bytes)


def largest_batch(base: Workload, prompt: int, output: int, analyze_step: StepAnalyzer,
                  reserve_bytes: float) -> int:
    """The largest batch whose weights, KV cache, activations and reserve fit (0: not even one request).

    Memory grows with the batch (the KV cache in proportion, the largest op's activations with its tokens), so a
    bisection finds it; the KV cache alone bounds it from above: (capacity − weights − reserve) / per sequence,
    times the GPUs the sequences are spread over (expert parallelism's data-parallel attention)."""
    one = budget_at(base, Request(prompt, output, 1), analyze_step, reserve_bytes)
    if not one.fits:
        return 0
    room = one.capacity_bytes - one.weight_bytes - one.reserve_bytes
    lo, hi = 1, min(MAX_BATCH, int(room // one.kv_cache_bytes_per_sequence) * one.batch_shards)
    while lo < hi:  # invariant: lo fits; every batch above hi does not
        mid = (lo + hi + 1) // 2
        if budget_at(base, Request(prompt, output, mid), analyze_step, reserve_bytes).fits:
            lo = mid
        else:
            hi = mid - 1
    return lo
