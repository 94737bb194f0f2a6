"""The event loop of a simulated serving engine (its results and their metrics: ``serving.metrics``).

Time advances step by step: the requests that have arrived join the queue, the scheduler forms the step, the step
model prices it (with the serving stack's costs), and at the step's end every request whose target was
reached emits a token.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator, Sequence

from ..errors import UserError
from ..specs.stack import Stack
from .kvcache import BlockPool
from .load import Load, Request
from .metrics import Point, Run, Served
from .scheduler import Live, Scheduler, SchedulerConfig
from .speculation import SpecResult, Speculation
from .stepmodel import StepModel

# The most points of the run's timeline a result keeps (evenly spaced over its steps): enough for a chart.
TIMELINE_POINTS = 500


def refill_delay(stack: Stack | None) -> float:
    """Seconds between a closed loop's request finishing in the engine and its client's next reaching it."""
    return stack.refill_latency_us / 1e6 if stack is not None else 0.0


def delivery_delay(times: Sequence[float], stack: Stack | None) -> float:
    """How long after the engine made its tokens at ``times`` a request's client sees each: the stack's
    ``request_latency_us`` + ``stream_lag_steps`` × the request's mean interval between tokens in the engine (a
    request of one token has no interval: the latency alone). TTFT and E2E include the delay; TPOT and ITL,
    differences of delayed times, do not."""
    if stack is None:
        return 0.0
    delay = stack.request_latency_us / 1e6
    if stack.stream_lag_steps and len(times) > 1:
        delay += stack.stream_lag_steps * (times[-1] - times[0]) / (len(times) - 1)
    return delay


def check_whole_prompts(load: Load, config: SchedulerConfig) -> None:
    """Without chunked prefill a step must hold a whole prompt: a load with a longer one would never run, refused
    in one line. (A request preempted there must be prefilled again whole, its prompt and the tokens it had
    generated: the scheduler refuses such a preemption when it happens, ``Scheduler``.)"""
    if not config.chunked_prefill:
        longest = max(r.prompt for r in load.requests)
        if longest > config.max_num_batched_tokens:
            raise UserError(f"without chunked prefill a step must hold a whole prompt: {longest:,} tokens > "
                            f"--max-num-batched-tokens {config.max_num_batched_tokens:,}")


def simulate(load: Load, model: StepModel, pool: BlockPool, config: SchedulerConfig,
             progress: Callable[[int], None] | None = None, speculation: Speculation | None = None,
             seed: int = 0) -> Run:
    """Serve ``load`` on the engine ``model`` prices (its stack's costs included), with ``pool``'s KV cache and
    ``config``'s scheduler. ``progress`` is told each finished request. With ``speculation`` each decoding
    sequence verifies drafts a step, its drafter's time is added to the step's, and its accepted drafts are drawn
    from ``seed`` (``serving.speculation``)."""
    check_whole_prompts(load, config)
    scheduler = Scheduler(config, pool, 0 if speculation is None else speculation.k)
    rng = random.Random(seed)
    verifications = verified = drafted = accepted = 0
    arrivals: list[tuple[float, int, Request]] = []  # (time, id, request), a heap
    opening, queue = load.opening()
    for request in opening:
        heapq.heappush(arrivals, (request.arrival_s, request.id, request))
    served: list[Served] = []
    timeline: list[Point] = []
    t = 0.0
    steps = prefill_steps = most_tokens = 0
    prefill_time = busy = 0.0
    while len(served) < len(load.requests):
        while arrivals and arrivals[0][0] <= t:
            scheduler.add(heapq.heappop(arrivals)[2])
        run = scheduler.decode_run()
        if run > 1:
            start = t
            t, ran = decode_run(run, t, model, scheduler, pool, arrivals[0][0] if arrivals else math.inf,
                                timeline)
            busy += t - start
            steps += ran
            most_tokens = max(most_tokens, len(scheduler.running))
            continue
        batch = scheduler.step()
        if not batch:
            if not arrivals:  # nothing runs, nothing will arrive: a bug in the scheduler
                raise RuntimeError("the simulated engine stalled with requests left")
            # Idle until the next arrival: the timeline says so (0 sequences from now to then), so that a chart
            # of it does not draw the last step's batch across the gap.
            timeline += [Point(t, 0, 0, pool.used), Point(arrivals[0][0], 0, 0, pool.used)]
            t = arrivals[0][0]
            continue
        groups: dict[tuple[int, int], int] = {}  # the step's groups: identical (new, cached) counted together
        verifying: dict[tuple[int, int], int] = {}  # those that verify drafts
        tokens, prefilling = 0, False  # the step's tokens; whether it carries a prompt's (a first token's) work
        for s in batch:
            into = verifying if s.drafts else groups
            into[s.new, s.cached] = into.get((s.new, s.cached), 0) + 1
            tokens += s.new
            prefilling = prefilling or (s.new > 1 and not s.drafts) or s.live.generated == 0
        dt = model.time_verify(groups, verifying) if verifying else model.time_counts(groups)
        if speculation is not None:
            prompts: dict[tuple[int, int], int] = {}
            for s in batch:
                if s.new > 1 and not s.drafts or s.live.generated == 0:
                    prompts[s.new, s.cached] = prompts.get((s.new, s.cached), 0) + 1
            dt += speculation.draft_time(prompts, [(s.cached, s.drafts) for s in batch if s.drafts])
        t += dt
        busy += dt
        steps += 1
        most_tokens = max(most_tokens, tokens)
        if prefilling:
            prefill_steps += 1
            prefill_time += dt
        timeline.append(Point(t, len(batch), tokens, pool.used))
        for s in batch:
            live = s.live
            if s.drafts and speculation is not None:
                kept = speculation.accepted(rng, s.drafts)
                live.computed += 1 + kept
                verifications, verified = verifications + 1, verified + kept + 1
                drafted, accepted = drafted + s.drafts, accepted + kept
                for _ in range(kept + 1):  # kept ≤ output left − 1: only the last can finish the request
                    _emit(live, t, scheduler, served, arrivals, queue, load, progress, model.stack)
                continue
            live.computed += s.new
            if live.request.prefix_id is not None:
                scheduler.share_prefix(live)
            if live.computed == live.target:
                _emit(live, t, scheduler, served, arrivals, queue, load, progress, model.stack)
    return Run(served=tuple(sorted(served, key=lambda s: s.request.id)), duration_s=t, steps=steps,
               prefill_steps=prefill_steps, prefill_time_s=prefill_time, max_tokens_in_step=most_tokens,
               kv_blocks=pool.total, kv_blocks_peak=pool.peak, block_size=pool.block_size,
               preemptions=scheduler.preemptions, timeline=_thin(timeline), verifications=verifications,
               verified_tokens=verified, drafted=drafted, accepted=accepted,
               prefix_lookups=scheduler.prefix_lookups, prefix_hits=scheduler.prefix_hits,
               prefix_tokens=scheduler.prefix_tokens, prefix_blocks=scheduler.prefix_blocks, busy_s=busy)


def decode_run(most: int, t: float, model: StepModel, scheduler: Scheduler, pool: BlockPool, horizon: float,
               timeline: list[Point]) -> tuple[float, int]:
    """Up to ``most`` steps of the same decodes of every running request (``Scheduler.decode_run``) from time
    ``t``: each step priced as the loop prices it, the requests' state advanced once at the end, which is what
    the loop would leave (every request one position, one token and one block's share further a step). Ends
    early at the end of a step that reaches ``horizon`` (by then a request may have arrived, and be admitted).
    Returns (time, steps run)."""
    running = scheduler.running
    groups: dict[int, int] = {}  # cached positions → requests, in the loop's order
    for live in running:
        groups[live.computed] = groups.get(live.computed, 0) + 1
    opened = [0] * most  # blocks opened in each step: where a request's next position starts a new block
    for live in running:
        for i in range(-live.computed % pool.block_size, most, pool.block_size):
            opened[i] += pool.opens(live.request.id, live.computed + i)
    times: list[float] = []
    used, n = pool.used, len(running)
    for i in range(most):
        if i and horizon <= t:
            break
        t += model.time_counts({(1, cached + i): count for cached, count in groups.items()})
        used += opened[i]
        times.append(t)
        timeline.append(Point(t, n, n, used))
    ran = len(times)
    for live in running:
        live.computed += ran
        live.target += ran
        live.generated += ran
        live.token_times_s.extend(times)
        pool.grow(live.request.id, live.computed)
    return t, ran


def _emit(live: Live, t: float, scheduler: Scheduler, served: list[Served],
          arrivals: list[tuple[float, int, Request]], queue: Iterator[Request], load: Load,
          progress: Callable[[int], None] | None, stack: Stack | None) -> None:
    """``live`` reached its target at ``t``: it emits a token; the last one finishes it (a closed loop's client
    then sends its next request: ``Load.refill``). Its client sees its tokens as ``delivery_delay`` says (``stack``'s
    delays)."""
    live.generated += 1
    live.token_times_s.append(t)
    if live.generated < live.request.output:
        live.target += 1
        return
    scheduler.finish(live)
    delay = delivery_delay(live.token_times_s, stack)
    served.append(Served(live.request, live.token_times_s, live.preemptions, delay))
    if progress is not None:
        progress(len(served))
    following = load.refill(queue, t, refill_delay(stack))
    if following is not None:
        heapq.heappush(arrivals, (following.arrival_s, following.id, following))


def _thin(points: list[Point]) -> tuple[Point, ...]:
    """At most TIMELINE_POINTS of the run's points, evenly spaced, the last kept."""
    if len(points) <= TIMELINE_POINTS:
        return tuple(points)
    step = len(points) / TIMELINE_POINTS
    return tuple(points[min(len(points) - 1, round(i * step))] for i in range(TIMELINE_POINTS - 1)) + (points[-1],)


def compared(speculation: Speculation, run: Run, plain: Run, plain_model: StepModel, load: Load,
             config: SchedulerConfig) -> SpecResult:
    """What speculation did in ``run`` against ``plain`` (the same load without it), and the batch at which it
    stops paying (``Speculation.break_even``) at a request's middle context, its mean prompt and half its mean
    output, up to the most sequences a step of k + 1 tokens each may hold."""
    requests = load.requests
    context = round(sum(r.prompt + r.output / 2 for r in requests) / len(requests))
    most = max(1, min(config.max_num_seqs, config.max_num_batched_tokens // (speculation.k + 1)))
    tpot = plain.tpot
    return SpecResult(speculation, run.verifications, run.verified_tokens, run.drafted, run.accepted,
                      plain.duration_s, None if tpot is None else tpot.mean, plain.output_tokens,
                      speculation.break_even(plain_model, context, most), context, most)
