"""Expert parallelism with data-parallel attention (``--ep E`` alone): E attention ranks, one a GPU, stepping in
lockstep (SGLang's ``--enable-dp-attention``, TensorRT-LLM's ``enable_attention_dp``, vLLM's data-parallel
deployment with expert parallelism).

- **Ranks.** Each rank is an engine as ``simulate`` runs one: its own scheduler (the run's ``SchedulerConfig``:
  its own token budget and sequence limit) and its own paged KV cache of one GPU's room (``kv_capacity`` of the
  rank's step model: HBM less that GPU's weights, 1/E of the routed experts, and the activations of a step in which
  every rank carries a full budget). A sequence's KV lives on its rank only, so the deployment holds E times one
  GPU's blocks.
- **Routing.** A request goes, on arrival, to the rank holding the fewest requests (waiting or running); among
  those, to the one that has taken the fewest so far, then the lowest index: least loaded (``serving.replicas``'
  rule, SGLang's ``shortest_queue``), with a round robin among equals (SGLang's default policy), so that a light
  load does not pile on rank 0 while every step waits for the busiest rank. A closed loop's client sends its next
  request when its last one finishes.
- **Lockstep.** Every step every rank runs together, because the MoE layers exchange tokens between all ranks
  (all-to-all dispatch and combine); a rank with nothing to run joins with an empty (dummy) batch while any rank
  runs. The step's time is the most any rank's share costs: each rank's groups are priced by
  :class:`RankModel` as one GPU's step in the step model, the step of E ranks that each carry those groups
  (``analyze decode --ep E``'s count of one GPU's share: its ⌈E·B/E⌉ = B sequences' attention, the experts the
  E·N tokens touch among the 1/E it holds, and its N tokens' all-to-all). So the expensive rank sets the pace, and the MoE
  is priced as if every rank carried that rank's tokens: SGLang's ``DpPaddingMode.MAX_LEN``, which pads every
  rank's tokens to the largest rank's (python/sglang/srt/layers/dp_attention.py: its choice for decode steps
  whose ranks are near balance). For a step that carries prompt tokens on some ranks SGLang packs the ranks'
  tokens end to end (``SUM_LEN``), so there the MoE's share of the step is an upper bound.
- **Time between steps.** Where no rank has anything to run, time jumps to the next arrival.

With E = 1 this is ``simulate`` without speculation, step for step (tests/serving/test_ranks.py)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from ..engine.roofline import Analysis
from ..specs.step import Seqs
from .capacity import Capacity
from .kvcache import BlockPool
from .load import Load, Request
from .metrics import Point, RankTotals, Run, Served
from .scheduler import Live, Scheduled, Scheduler, SchedulerConfig
from .simulate import _emit, _thin, check_whole_prompts
from .stepmodel import StepModel


class RankModel(StepModel):
    """The step model of one rank under data-parallel attention: the counts it prices are one rank's groups, and
    :meth:`analyze` analyses the step of all E ranks each carrying those groups, whose one GPU's share
    (``engine.parallel.shard.per_gpu_workload``: ⌈E·c/E⌉ = c of each group) is exactly the rank's groups; the
    attention parts, one sequence each, are the same either way. Under any other layout the plain step model."""

    def analyze(self, seqs: tuple[Seqs, ...]) -> Analysis:
        e = self.layout.batch_shards
        return super().analyze(seqs if e == 1 else tuple(Seqs(g.count * e, g.new, g.cached) for g in seqs))


def _counts(batch: list[Scheduled]) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for s in batch:
        counts[s.new, s.cached] = counts.get((s.new, s.cached), 0) + 1
    return counts


def serve_ranks(load: Load, model: StepModel, capacity: Capacity, config: SchedulerConfig, block_size: int,
                progress: Callable[[int], None] | None = None) -> tuple[Run, RankTotals]:
    """Serve ``load`` on ``model.layout.batch_shards`` ranks in lockstep (the module's docstring), each with
    ``capacity``'s KV blocks and ``config``'s scheduler. The run's KV blocks are the ranks' summed, its peak the
    most in use over all ranks at a step's end of scheduling (at least any rank's own peak); its steps' sequences
    and tokens are every rank's."""
    e = model.layout.batch_shards
    check_whole_prompts(load, config)
    pools = [capacity.pool(block_size) for _ in range(e)]
    ranks = [Scheduler(config, pool) for pool in pools]
    held, taken = [0] * e, [0] * e
    where: dict[int, int] = {}  # a request's rank
    arrivals: list[tuple[float, int, Request]] = []
    opening, queue = load.opening()
    for request in opening:
        heapq.heappush(arrivals, (request.arrival_s, request.id, request))
    served: list[Served] = []
    timeline: list[Point] = []
    t = busy = prefill_time = 0.0
    steps = prefill_steps = most_tokens = peak = 0
    while len(served) < len(load.requests):
        while arrivals and arrivals[0][0] <= t:
            request = heapq.heappop(arrivals)[2]
            i = min(range(e), key=lambda j: (held[j], taken[j]))  # min keeps the first of equals
            ranks[i].add(request)
            held[i] += 1
            taken[i] += 1
            where[request.id] = i
        active = [s for s in ranks if s.running or s.waiting]
        streak = min((s.decode_run() for s in active), default=0)
        if streak > 1:
            start = t
            t, ran = _decode_run(streak, t, model, active, pools, arrivals[0][0] if arrivals else math.inf, timeline)
            busy += t - start
            steps += ran
            most_tokens = max(most_tokens, sum(len(s.running) for s in active))
            peak = max(peak, timeline[-1].kv_blocks)
            continue
        batches = [s.step() for s in ranks]
        if not any(batches):
            if not arrivals:  # nothing runs, nothing will arrive: a bug in the scheduler
                raise RuntimeError("the simulated ranks stalled with requests left")
            # Idle until the next arrival, and the timeline says so (simulate's rule).
            used = sum(p.used for p in pools)
            timeline += [Point(t, 0, 0, used), Point(arrivals[0][0], 0, 0, used)]
            t = arrivals[0][0]
            continue
        used = sum(p.used for p in pools)
        peak = max(peak, used)
        dt = max(model.time_counts(_counts(b)) for b in batches if b)
        t += dt
        busy += dt
        steps += 1
        tokens = sum(s.new for b in batches for s in b)
        most_tokens = max(most_tokens, tokens)
        if any(s.new > 1 or s.live.generated == 0 for b in batches for s in b):
            prefill_steps += 1
            prefill_time += dt
        timeline.append(Point(t, sum(len(b) for b in batches), tokens, used))
        for scheduler, batch in zip(ranks, batches):
            for s in batch:
                live = s.live
                live.computed += s.new
                if live.request.prefix_id is not None:
                    scheduler.share_prefix(live)
                if live.computed == live.target:
                    _emit(live, t, scheduler, served, arrivals, queue, load, progress, model.stack)
                    if live.generated == live.request.output:
                        held[where.pop(live.request.id)] -= 1
    run = Run(served=tuple(sorted(served, key=lambda s: s.request.id)), duration_s=t, steps=steps,
               prefill_steps=prefill_steps, prefill_time_s=prefill_time, max_tokens_in_step=most_tokens,
               kv_blocks=sum(p.total for p in pools), kv_blocks_peak=max([peak] + [p.peak for p in pools]),
               block_size=block_size, preemptions=sum(s.preemptions for s in ranks), timeline=_thin(timeline),
               prefix_lookups=sum(s.prefix_lookups for s in ranks), prefix_hits=sum(s.prefix_hits for s in ranks),
               prefix_tokens=sum(s.prefix_tokens for s in ranks), prefix_blocks=sum(s.prefix_blocks for s in ranks),
               busy_s=busy)
    return run, RankTotals(tuple(taken), tuple(p.peak for p in pools), tuple(s.preemptions for s in ranks))


def _decode_run(most: int, t: float, model: StepModel, active: list[Scheduler], pools: list[BlockPool],
                horizon: float, timeline: list[Point]) -> tuple[float, int]:
    """Up to ``most`` lockstep steps in which every rank with requests decodes all its running requests (each
    rank's ``Scheduler.decode_run`` at least ``most``), from time ``t``: each step the most any rank's decodes
    cost, the requests' state advanced once at the end (``simulate.decode_run``'s rule for one engine). Ends early
    at the end of a step that reaches ``horizon``. Returns (time, steps run)."""
    groups = []  # each active rank's {cached positions: requests}
    opened = [0] * most  # blocks opened in each step over all ranks
    for scheduler in active:
        found: dict[int, int] = {}
        for live in scheduler.running:
            found[live.computed] = found.get(live.computed, 0) + 1
            for i in range(-live.computed % scheduler.pool.block_size, most, scheduler.pool.block_size):
                opened[i] += scheduler.pool.opens(live.request.id, live.computed + i)
        groups.append(found)
    times: list[float] = []
    used = sum(p.used for p in pools)
    n = sum(len(s.running) for s in active)
    for i in range(most):
        if i and horizon <= t:
            break
        t += max(model.time_counts({(1, cached + i): count for cached, count in g.items()}) for g in groups)
        used += opened[i]
        times.append(t)
        timeline.append(Point(t, n, n, used))
    ran = len(times)
    for scheduler in active:
        for live in scheduler.running:
            _advance(live, ran, times)
            scheduler.pool.grow(live.request.id, live.computed)
    return t, ran


def _advance(live: Live, ran: int, times: list[float]) -> None:
    """``live`` decoded ``ran`` tokens, emitted at ``times``."""
    live.computed += ran
    live.target += ran
    live.generated += ran
    live.token_times_s.extend(times)
