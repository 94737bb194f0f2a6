"""What a simulated serving run gives: each request's token times, the run's steps, timeline and KV cache, the
deployment's sides, and the metrics over them. Definitions (aiperf's, which the published runs use):

  TTFT  first token time − arrival (waiting for admission included)
  TPOT  per request (E2E − TTFT) / (output − 1); requests of one output token have none
  ITL   the gaps between a request's successive tokens, every gap of every request (in the engine: the client's
        constant delay cancels)
  E2E   last token time − arrival

Percentiles interpolate linearly between the sorted samples (numpy's default method).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, islice, repeat
from operator import sub
from typing import Literal, Protocol

from ..engine.parallel import Layout
from ..specs.hardware import GPU
from ..specs.stack import Stack
from ..specs.workload import Workload
from .capacity import Capacity
from .cost import Costs
from .load import Load, Request
from .scheduler import SchedulerConfig
from .speculation import SpecResult
from .transfer import Link, TransferMode

Role = Literal["aggregated", "prefill", "decode"]  # a replica's job in a deployment (serving.replicas)


class Ranked(Protocol):
    """Samples in ascending order, read by rank."""

    def __len__(self) -> int: ...

    def __getitem__(self, rank: int, /) -> float: ...


class Tally:
    """Samples in ascending order held as each distinct value and how often it occurs. A run's ITL repeats each
    step's time for every sequence in the step: 5,000 Poisson requests at 20/s, prompts of 100-3,000 tokens and
    outputs of 10-400 on an H100 gave 1,032,839 gaps of 13,612 values in 13,633 steps."""

    def __init__(self, counts: Mapping[float, int]) -> None:
        self.values = sorted(counts)
        self.ends = list(accumulate(counts[v] for v in self.values))  # the rank after each value's last

    def __len__(self) -> int:
        return self.ends[-1] if self.ends else 0

    def __getitem__(self, rank: int, /) -> float:
        return self.values[bisect_right(self.ends, rank)]

    def fsum(self) -> float:
        """The samples' sum, rounded once, as ``math.fsum`` of them all."""
        counts = [b - a for a, b in zip([0, *self.ends], self.ends)]
        return math.fsum(chain.from_iterable(map(repeat, self.values, counts)))  # each value its count of times


def percentile(sorted_samples: Ranked, q: float) -> float:
    """The q-th percentile (0 ≤ q ≤ 100) of sorted samples, linear between the two nearest ranks."""
    n = len(sorted_samples)
    rank = (n - 1) * q / 100
    lo = math.floor(rank)
    hi = min(lo + 1, n - 1)
    return sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * (rank - lo)


@dataclass(frozen=True)
class Stats:
    """Mean and percentiles of one metric, seconds; ``count`` samples."""

    mean: float
    p50: float
    p90: float
    p99: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats | None:
        if not samples:
            return None
        ordered = sorted(samples)
        return cls._ranked(ordered, math.fsum(ordered))

    @classmethod
    def tallied(cls, samples: Iterable[float]) -> Stats | None:
        """``of`` the samples, to the bit, holding each distinct value once (``Tally``)."""
        tally = Tally(Counter(samples))
        return cls._ranked(tally, tally.fsum()) if len(tally) else None

    @classmethod
    def _ranked(cls, ordered: Ranked, total: float) -> Stats:
        n = len(ordered)
        return cls(total / n, percentile(ordered, 50), percentile(ordered, 90), percentile(ordered, 99), n)


@dataclass(frozen=True)
class Served:
    """One request's times, seconds from the start of the run: when the engine made each token (an array of
    doubles, 8 bytes a token), and the delay after which its client sees them (``simulate.delivery_delay``)."""

    request: Request
    engine_times_s: array[float]
    preemptions: int
    delay_s: float = 0.0

    @property
    def token_times_s(self) -> tuple[float, ...]:
        """When the client sees each token."""
        return tuple(t + self.delay_s for t in self.engine_times_s)

    @property
    def ttft_s(self) -> float:
        return self.engine_times_s[0] + self.delay_s - self.request.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.engine_times_s[-1] + self.delay_s - self.request.arrival_s

    @property
    def tpot_s(self) -> float | None:
        n = len(self.engine_times_s)
        return (self.e2e_s - self.ttft_s) / (n - 1) if n > 1 else None

    def gaps(self) -> Iterable[float]:
        """The intervals between successive tokens, in the engine."""
        return map(sub, islice(self.engine_times_s, 1, None), self.engine_times_s)


@dataclass(frozen=True)
class Point:
    """The engine after one step: its end time, the sequences and tokens it ran, the KV blocks in use; or, idle
    between arrivals, none at the gap's start and end."""

    time_s: float
    sequences: int
    tokens: int
    kv_blocks: int


@dataclass(frozen=True)
class Run:
    """A simulated run: every request's times, the engine's steps, and what they add up to."""

    served: tuple[Served, ...]
    duration_s: float
    steps: int
    prefill_steps: int  # steps that carried prompt tokens
    prefill_time_s: float  # their time
    max_tokens_in_step: int
    kv_blocks: int  # the cache's capacity
    kv_blocks_peak: int
    block_size: int
    preemptions: int
    timeline: tuple[Point, ...]
    # Under speculative decoding: each sequence's verifications of drafts in a step, the tokens they emitted, the
    # drafts verified and those accepted (0 without).
    verifications: int = 0
    verified_tokens: int = 0
    drafted: int = 0
    accepted: int = 0
    # Prefix caching: admissions of a request with a prefix, those that found it cached, the prompt tokens and the
    # KV blocks they found there (not prefilled, not allocated).
    prefix_lookups: int = 0
    prefix_hits: int = 0
    prefix_tokens: int = 0
    prefix_blocks: int = 0
    busy_s: float = 0.0  # the sum of the steps' times: the run's duration less its idle gaps

    @property
    def ttft(self) -> Stats | None:
        return Stats.of([s.ttft_s for s in self.served])

    @property
    def tpot(self) -> Stats | None:
        return Stats.of([t for s in self.served if (t := s.tpot_s) is not None])

    @property
    def itl(self) -> Stats | None:
        return Stats.tallied(gap for s in self.served for gap in s.gaps())

    @property
    def e2e(self) -> Stats | None:
        return Stats.of([s.e2e_s for s in self.served])

    @property
    def output_tokens(self) -> int:
        return sum(len(s.engine_times_s) for s in self.served)

    def goodput(self, slo_ttft_s: float | None, slo_tpot_s: float | None) -> int:
        """Requests that met both targets (a target not given is met)."""
        return sum(1 for s in self.served
                   if (slo_ttft_s is None or s.ttft_s <= slo_ttft_s)
                   and (slo_tpot_s is None or (s.tpot_s or 0.0) <= slo_tpot_s))


@dataclass(frozen=True)
class Side:
    """The replicas of one role: how many, their layout, KV cache and scheduler, and their totals (steps, busy and
    prompt-carrying time summed over the replicas; the most tokens and KV blocks one replica had)."""

    role: Role
    replicas: int
    layout: Layout
    capacity: Capacity
    config: SchedulerConfig
    steps: int
    busy_s: float
    prefill_time_s: float
    max_tokens_in_step: int
    kv_blocks_peak: int
    preemptions: int
    requests: tuple[int, ...]  # each replica's requests

    @property
    def gpus(self) -> int:
        return self.replicas * self.layout.gpus


@dataclass(frozen=True)
class Transfers:
    """The KV transfers of a disaggregated run: the rule and link, their count and bytes (the whole model's KV of
    every prompt; the busiest link's share), each one's time on the link and each request's wait for its KV
    (arrival at the decode replica − the prefill's end: what TTFT pays beyond the prefill)."""

    mode: TransferMode
    link: Link
    count: int
    kv_bytes: float
    link_bytes: float
    time: Stats | None
    wait: Stats | None


@dataclass(frozen=True)
class Deployment:
    """A run on several replicas: the whole run (every request's times; steps, busy time and preemptions summed over
    replicas; the timeline of the first replica that decodes), each role's replicas, and the KV transfers."""

    run: Run
    sides: tuple[Side, ...]
    transfers: Transfers | None

    @property
    def gpus(self) -> int:
        return sum(s.gpus for s in self.sides)


@dataclass(frozen=True)
class RankTotals:
    """Under data-parallel attention (``serving.ranks``), what each rank did: the requests routed to it, its KV
    blocks at most in use, its preemptions."""

    requests: tuple[int, ...]
    kv_blocks_peak: tuple[int, ...]
    preemptions: tuple[int, ...]


@dataclass(frozen=True)
class Simulation:
    """A run and what it was run on: the GPU, the model's step options, the layout, the load, the scheduler, the
    KV cache's capacity, the serving stack, and the latency targets goodput counts against."""

    run: Run
    gpu: GPU
    base: Workload
    layout: Layout
    calibrated: bool
    load: Load
    config: SchedulerConfig
    capacity: Capacity
    stack: Stack
    prompt_text: str
    output_text: str
    seed: int
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    speculation: SpecResult | None = None
    costs: Costs | None = None
    deployment: Deployment | None = None  # on several replicas (serving.replicas): layout etc. are the decoders'
    ranks: RankTotals | None = None  # data-parallel attention's ranks (serving.ranks): capacity is one rank's

    @property
    def gpus(self) -> int:
        """The GPUs the run used: one copy's, or every replica's."""
        return self.layout.gpus if self.deployment is None else self.deployment.gpus

    @property
    def slos(self) -> bool:
        return self.slo_ttft_s is not None or self.slo_tpot_s is not None

    @property
    def goodput(self) -> int:
        """Requests that met the latency targets."""
        return self.run.goodput(self.slo_ttft_s, self.slo_tpot_s)
