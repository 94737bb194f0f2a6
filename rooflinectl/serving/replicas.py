"""Serving on several replicas at once: data-parallel copies of the model, each an engine that prefills and decodes
(aggregated), or prefill replicas and decode replicas apart (disaggregated), a request's KV cache moving between
them (``serving.transfer``).

Each replica is an engine as ``simulate`` runs one: its own scheduler, paged KV cache, step model (its layout, its
token budget) and clock. One event loop runs them side by side, in time order: the replica whose clock is the
earliest among those with requests runs its next step (or a run of identical decode steps that stops at the next
event or another replica's clock), after every event up to that time has been delivered: an arrival, a prefill
that ended, a KV cache that arrived.

Routing: a request goes to the replica (prefill or aggregated) holding the fewest requests (waiting or running;
a decode replica counts those whose KV is on its way too), the lowest index on a tie: the least-loaded policy of
SGLang's router and of Dynamo's. A closed loop's client sends its next request when its last one finishes.

Disaggregated: a prefill replica's steps carry prompt chunks only. When a request's prompt is computed its first
token is ready and its blocks are freed; its KV cache goes to the decode replica then holding the fewest requests,
over the prefill replica's link and the decode replica's, each carrying one transfer at a time (first come, first
served). The request joins the decode replica's queue when its KV has arrived, holding its prompt's positions and
its first token, which the client sees then (TTFT counts the transfer); the decode replica admits it as its KV
blocks allow and decodes the rest (preempted, it is recomputed there, as on one engine). A request of one output
token ends at its prefill.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable
from typing import cast

from ..engine.parallel import Layout
from ..errors import UserError
from ..specs.stack import Stack
from ..units import whole_number
from .capacity import Capacity
from .cost import Costs, split_costs
from .kvcache import BlockPool
from .load import Load, Request
from .metrics import Deployment, Point, Role, Run, Served, Side, Stats, Transfers
from .scheduler import Live, Scheduler, SchedulerConfig
from .simulate import _thin, decode_run, delivery_delay, refill_delay
from .stepmodel import StepModel
from .transfer import KvTransfer

_ARRIVE, _PREFILLED, _LANDED = 0, 1, 2  # the kinds of event
# The most replicas of one role: 64 nodes of 8 GPUs, one GPU a replica.
MAX_REPLICAS = 512


class Replica:
    """One engine of a deployment: its role, step model, KV cache and scheduler, its clock and its totals."""

    def __init__(self, role: Role, model: StepModel, pool: BlockPool, config: SchedulerConfig) -> None:
        self.role = role
        self.model = model
        self.pool = pool
        self.scheduler = Scheduler(config, pool)
        self.clock = 0.0
        self.held = 0  # requests routed here and not gone (a decode replica's include those in transit to it)
        self.taken = 0  # requests routed here in all
        self.steps = self.prefill_steps = self.most_tokens = 0
        self.busy = self.prefill_time = 0.0
        self.link_free = 0.0  # a disaggregated replica's link: when its last transfer ends
        self.started: dict[int, float] = {}  # a prefill replica's requests: when their first step began
        self.timeline: list[Point] = []

    @property
    def working(self) -> bool:
        return bool(self.scheduler.running or self.scheduler.waiting)

    def wake(self, t: float, idle: bool) -> None:
        """Bring the clock to ``t``, where a request reached the replica; one that was ``idle`` until then says so
        in its timeline (0 sequences from its last step to ``t``: simulate's rule), so that a chart of it does not
        draw the last step's batch across the gap."""
        if idle and t > self.clock:
            self.timeline += [Point(self.clock, 0, 0, self.pool.used), Point(t, 0, 0, self.pool.used)]
        self.clock = max(self.clock, t)

    def step(self, horizon: float) -> tuple[list[tuple[Live, int]], list[Live]]:
        """Run the next step from the clock (a run of identical decode steps, stopping at ``horizon``, where the
        scheduler finds one). Returns the requests whose prompt a prefill replica computed, each with its last
        chunk's tokens, and the requests that emitted their last token."""
        sch = self.scheduler
        run = sch.decode_run() if self.role != "prefill" else 0
        if run > 1:
            start = self.clock
            self.clock, ran = decode_run(run, start, self.model, sch, self.pool, horizon, self.timeline)
            self.busy += self.clock - start
            self.steps += ran
            self.most_tokens = max(self.most_tokens, len(sch.running))
            return [], []
        batch = sch.step()
        if not batch:  # a replica with requests always runs some: else a bug in the scheduler
            raise RuntimeError("a simulated replica stalled with requests left")
        counts: dict[tuple[int, int], int] = {}
        for s in batch:
            counts[s.new, s.cached] = counts.get((s.new, s.cached), 0) + 1
        start = self.clock
        dt = self.model.time_counts(counts)
        t = self.clock = start + dt
        self.busy += dt
        self.steps += 1
        tokens = sum(s.new for s in batch)
        self.most_tokens = max(self.most_tokens, tokens)
        if any(s.new > 1 or s.live.generated == 0 for s in batch):
            self.prefill_steps += 1
            self.prefill_time += dt
        self.timeline.append(Point(t, len(batch), tokens, self.pool.used))
        prefilled: list[tuple[Live, int]] = []
        finished: list[Live] = []
        for s in batch:
            live = s.live
            if self.role == "prefill":
                self.started.setdefault(live.request.id, start)
            live.computed += s.new
            if live.computed < live.target:
                continue
            if self.role == "prefill":
                sch.finish(live)
                prefilled.append((live, s.new))
                continue
            live.generated += 1
            live.token_times_s.append(t)
            if live.generated < live.request.output:
                live.target += 1
            else:
                sch.finish(live)
                finished.append(live)
        return prefilled, finished


def serve_replicas(load: Load, sides: list[tuple[Role, list[Replica], Layout, Capacity]],
                   transfer: KvTransfer | None, stack: Stack | None = None,
                   progress: Callable[[int], None] | None = None) -> Deployment:
    """Serve ``load`` on the replicas of ``sides`` (the module's docstring): an aggregated side alone, or a
    prefill side and a decode side with ``transfer``. ``stack``: its delays between engine and client
    (``simulate.delivery_delay``), added to every token a client sees."""
    replicas = [r for _, group, _, _ in sides for r in group]
    entry = [r for r in replicas if r.role != "decode"]
    decoders = [r for r in replicas if r.role == "decode"]
    events: list[tuple[float, int, int, object]] = []  # (time, order, kind, payload), a heap
    order = iter(range(2**62))
    opening, queue = load.opening()
    for request in opening:
        heapq.heappush(events, (request.arrival_s, next(order), _ARRIVE, request))
    served: list[Served] = []
    sent: list[tuple[float, float, float, float]] = []  # each transfer: (KV bytes, link bytes, link time, wait)

    def done(live: Live, t: float) -> None:
        delay = delivery_delay(live.token_times_s, stack)
        served.append(Served(live.request, live.token_times_s, live.preemptions, delay))
        if progress is not None:
            progress(len(served))
        following = load.refill(queue, t, refill_delay(stack))
        if following is not None:
            heapq.heappush(events, (following.arrival_s, next(order), _ARRIVE, following))

    def least(group: list[Replica]) -> Replica:
        return min(group, key=lambda r: r.held)  # min keeps the first of equals: the lowest index

    while len(served) < len(load.requests):
        working = [r for r in replicas if r.working]
        now = min((r.clock for r in working), default=math.inf)
        if events and events[0][0] <= now:
            te, _, kind, payload = heapq.heappop(events)
            if kind == _ARRIVE:
                assert isinstance(payload, Request)
                r = least(entry)
                idle = not r.working
                r.scheduler.add(payload, payload.prompt if r.role == "prefill" else None)
                r.held += 1
                r.taken += 1
            elif kind == _PREFILLED:
                live, source, last_chunk = cast(tuple[Live, Replica, int], payload)
                source.held -= 1
                if live.request.output == 1:
                    live.generated = 1
                    live.token_times_s.append(te)
                    done(live, te)
                    continue
                assert transfer is not None
                r = least(decoders)
                prompt = live.request.prompt
                landed = transfer.finish(max(source.link_free, r.link_free), source.started.pop(live.request.id),
                                         te, prompt, last_chunk)
                source.link_free = r.link_free = landed
                sent.append((transfer.request_bytes(prompt), transfer.link_bytes(prompt), transfer.seconds(prompt),
                             landed - te))
                heapq.heappush(events, (landed, next(order), _LANDED, (live, r)))
                r.held += 1
                r.taken += 1
                continue
            else:  # a KV cache landed: its request holds its prompt's positions and its first token
                live, r = cast(tuple[Live, Replica], payload)
                idle = not r.working
                live.computed, live.target, live.generated = live.request.prompt, live.request.prompt + 1, 1
                live.token_times_s = array('d', (te,))
                r.scheduler.queue(live)
            r.wake(te, idle)
            continue
        if not working:  # nothing runs and nothing will arrive: a bug
            raise RuntimeError("the simulated deployment stalled with requests left")
        r = min(working, key=lambda x: x.clock)
        horizon = min([x.clock for x in working if x is not r] + ([events[0][0]] if events else []),
                      default=math.inf)
        prefilled, finished = r.step(horizon)
        for live, last in prefilled:
            heapq.heappush(events, (r.clock, next(order), _PREFILLED, (live, r, last)))
        for live in finished:
            r.held -= 1
            done(live, r.clock)
    return _deployment(served, sides, transfer, sent)


def _deployment(served: list[Served], sides: list[tuple[Role, list[Replica], Layout, Capacity]],
                transfer: KvTransfer | None, sent: list[tuple[float, float, float, float]]) -> Deployment:
    """The run's totals, by side and over the whole."""
    summary = []
    for role, group, layout, capacity in sides:
        summary.append(Side(role, len(group), layout, capacity, group[0].scheduler.config,
                            sum(r.steps for r in group), sum(r.busy for r in group),
                            sum(r.prefill_time for r in group), max(r.most_tokens for r in group),
                            max(r.pool.peak for r in group), sum(r.scheduler.preemptions for r in group),
                            tuple(r.taken for r in group)))
    replicas = [r for _, group, _, _ in sides for r in group]
    decoding = next(r for r in replicas if r.role != "prefill")
    run = Run(served=tuple(sorted(served, key=lambda s: s.request.id)),
              duration_s=max(r.clock for r in replicas), steps=sum(s.steps for s in summary),
              prefill_steps=sum(r.prefill_steps for r in replicas),
              prefill_time_s=sum(s.prefill_time_s for s in summary),
              max_tokens_in_step=max(s.max_tokens_in_step for s in summary), kv_blocks=decoding.pool.total,
              # the run's cache is a decoding replica's: its blocks and its side's peak (each side's in "sides")
              kv_blocks_peak=next(s.kv_blocks_peak for s in summary if s.role != "prefill"),
              block_size=decoding.pool.block_size,
              preemptions=sum(s.preemptions for s in summary), timeline=_thin(decoding.timeline),
              busy_s=sum(s.busy_s for s in summary))
    transfers = None
    if transfer is not None:
        transfers = Transfers(transfer.mode, transfer.link, len(sent), math.fsum(x[0] for x in sent),
                              math.fsum(x[1] for x in sent), Stats.of([x[2] for x in sent]),
                              Stats.of([x[3] for x in sent]))
    return Deployment(run, tuple(summary), transfers)


def parse_disagg(value: object) -> tuple[int, int]:
    """``--disagg P:D`` (or a pair of ints): P prefill replicas and D decode replicas, each at least 1."""
    if isinstance(value, str):
        numbers = [whole_number(p) for p in value.split(":")]
        if len(numbers) != 2 or None in numbers:
            raise UserError(f"--disagg {value[:40]}: give P:D, the prefill and decode replicas (e.g. 2:6)")
        value = (numbers[0], numbers[1])
    if not (isinstance(value, tuple) and len(value) == 2 and all(type(n) is int for n in value)):
        raise UserError(f"disagg {value!r}: give 'P:D' or a pair (P, D), the prefill and decode replicas")
    p, d = value
    if not (1 <= p <= MAX_REPLICAS and 1 <= d <= MAX_REPLICAS):
        raise UserError(f"--disagg {p}:{d}: give 1 to {MAX_REPLICAS} replicas of each")
    return p, d


def check_replicas(replicas: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= MAX_REPLICAS:
        raise UserError(f"--replicas {replicas}: give 1 to {MAX_REPLICAS}")


def side(role: Role, count: int, model: StepModel, capacity: Capacity, config: SchedulerConfig,
         block_size: int) -> tuple[Role, list[Replica], Layout, Capacity]:
    """``count`` replicas of one role, each with its own KV cache of ``capacity``'s blocks; they share ``model``'s
    caches of step times (pure: the same step costs the same on each), and each has its own set of the attention
    shapes it has run, since each engine process builds its own plans (a stack's ``new_shape_us``)."""
    return role, [Replica(role, _own_shapes(model) if count > 1 else model, capacity.pool(block_size), config)
                  for _ in range(count)], model.layout, capacity


def _own_shapes(model: StepModel) -> StepModel:
    """``model`` with the same step-time caches and a set of seen attention shapes of its own."""
    import copy

    own = copy.copy(model)
    own.seen_shapes = set()
    return own


def deployment_costs(d: Deployment, input_tokens: int, price_per_gpu_hour: float | None,
                     board_w: float | None) -> Costs:
    """A deployment's costs (``cost.split_costs``): disaggregated, the prefill GPUs' on the input tokens;
    aggregated, the prompt-carrying steps' share of the busy time."""
    run = d.run
    prefill = [s for s in d.sides if s.role == "prefill"]
    share = (prefill[0].gpus / d.gpus if prefill
             else run.prefill_time_s / run.busy_s if run.busy_s else 0.0)
    busy = math.fsum(s.busy_s * s.layout.gpus for s in d.sides)
    return split_costs(run.duration_s, d.gpus, share, busy, input_tokens, run.output_tokens, price_per_gpu_hour,
                       board_w)
