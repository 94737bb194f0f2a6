"""Which sequences run in the next step, and how many new tokens each: the scheduler a serving engine runs
(vLLM V1's, in its default policy).

Each step has a token budget (``max_num_batched_tokens``) and a sequence limit (``max_num_seqs``). A running
request always has tokens to compute before its next token: 1 when it decodes, what is left of its prompt while
it is prefilled in chunks. The decodes go first, then the prompts being prefilled, each in the order they were
admitted, each taking min(what it has left, the budget left). Then waiting requests are admitted first come,
first served while the budget, the sequence limit and the KV cache allow: with chunked prefill a prompt may start
with a chunk of what is left of the budget; without it, only a whole prompt that fits the budget left starts.

Steps apart (``mixed`` False, SGLang's default policy: its scheduler runs a prefill batch whenever one can be
formed, and mixes decodes into it only with ``--enable-mixed-chunk``): a step is either prefill or decode. Where
a prompt is being prefilled or a waiting request can be admitted, the step holds only prompts (those being
prefilled, then admissions, under the same budget); else it holds every decode. The running requests stall while
prompts are prefilled, so requests prefilled in one burst decode together and finish together.

Every token scheduled needs a slot in its request's KV blocks (``kvcache.BlockPool``). A running request that
cannot get one preempts the latest admitted running request (vLLM's recompute preemption): that one's blocks are
freed, and it goes back to the front of the queue to prefill again its prompt and the tokens it had generated,
then goes on generating; a request that would have to preempt itself waits instead. Without chunked prefill the
preempted request's prompt and generated tokens must fit one step's budget: a preemption that would leave one
that never fits is refused in one line (TensorRT-LLM, whose budget without chunked prefill is sized for prompts,
starts a request under its default capacity policy only with KV blocks for its whole sequence, and so never
preempts).

Speculative decoding (``drafts`` k > 0, ``serving.speculation``): a decoding request (one that has generated a
token and has one position left before its next) is scheduled 1 + d tokens, its last token and d drafts to verify,
d = min(k, its output left − 1, the budget left − 1, its room in the KV cache − 1); the budget and the cache count
all of them.

Prefix caching (``kvcache.BlockPool``): a request admitted with a prompt prefix whose blocks are cached holds
them and is scheduled only the rest of its prompt (``cached`` = the prefix's full blocks, at most its prompt less
one token, whose logits it needs); a request that computes a prefix not yet cached makes its full blocks the
prefix's.
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UserError
from . import defaults
from .kvcache import BlockPool
from .load import Request

if TYPE_CHECKING:
    from ..specs.stack import Stack


# The largest token budget and sequence limit taken: 16 Mi tokens a step, 1 Mi sequences.
MAX_BATCHED_TOKENS = 2**24
MAX_SEQS = 2**20


def check_limit(flag: str, value: int, most: int) -> None:
    """A scheduler limit is 1 to ``most``; anything else is refused in one line naming its option."""
    if not 1 <= value <= most:
        raise UserError(f"{flag} {value:,}: give 1 to {most:,}")


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduler's limits. Defaults: vLLM V1's for its API server on a data-centre GPU (``serving.defaults``),
    chunked prefill on."""

    max_num_batched_tokens: int = defaults.MAX_NUM_BATCHED_TOKENS
    max_num_seqs: int = defaults.MAX_NUM_SEQS
    chunked_prefill: bool = True
    mixed: bool = True  # prefill chunks and decodes in one step; False: steps apart, prefill first (the docstring)

    def __post_init__(self) -> None:
        check_limit("--max-num-batched-tokens", self.max_num_batched_tokens, MAX_BATCHED_TOKENS)
        check_limit("--max-num-seqs", self.max_num_seqs, MAX_SEQS)

    @classmethod
    def on(cls, stack: Stack | None, max_num_batched_tokens: int | None = None,
           max_num_seqs: int = defaults.MAX_NUM_SEQS,
           chunked_prefill: bool = True, prefill_steps: str | None = None) -> SchedulerConfig:
        """The scheduler of an engine on ``stack``: the limits given, else the stack's (its engine's as its figures
        were fitted: ``max_num_batched_tokens``, ``prefill_steps``), else the defaults above."""
        from ..specs.stack import PREFILL_STEPS

        if prefill_steps is not None and prefill_steps not in PREFILL_STEPS:
            raise UserError(f"--prefill-steps {prefill_steps}: give {' or '.join(PREFILL_STEPS)}")
        if max_num_batched_tokens is None:
            max_num_batched_tokens = (stack.max_num_batched_tokens if stack else None) or cls.max_num_batched_tokens
        steps = prefill_steps or (stack.prefill_steps if stack else "mixed")
        return cls(max_num_batched_tokens, max_num_seqs, chunked_prefill, steps == "mixed")


@dataclass
class Live:
    """A request inside the engine: ``target`` positions to compute before its next token (its prompt; then one
    more for each token it generates; after a preemption its prompt and the tokens it had generated),
    ``computed`` of them in the KV cache, ``generated`` tokens so far."""

    request: Request
    target: int
    computed: int = 0
    generated: int = 0
    token_times_s: array[float] = field(default_factory=lambda: array("d"))  # 8 bytes a token
    preemptions: int = 0


@dataclass(frozen=True)
class Scheduled:
    """One request's part of a step: ``new`` tokens after ``cached`` positions already in its KV cache."""

    live: Live
    new: int
    cached: int
    drafts: int = 0  # of the new tokens, the drafts it verifies (speculative decoding)


class Scheduler:
    """The waiting queue, the running requests and the KV cache; :meth:`step` forms the next step."""

    def __init__(self, config: SchedulerConfig, pool: BlockPool, drafts: int = 0) -> None:
        self.config = config
        self.pool = pool
        self.drafts = drafts  # the drafts a decoding request verifies a step (0: no speculation)
        # Prefix caching: admissions of a request with a prefix, those that found it cached, the prompt tokens and
        # the blocks they found there.
        self.prefix_lookups = self.prefix_hits = self.prefix_tokens = self.prefix_blocks = 0
        self.waiting: deque[Live] = deque()
        self.running: list[Live] = []
        self.preemptions = 0

    def add(self, request: Request, positions: int | None = None) -> None:
        """Queue ``request``, which will hold ``positions`` here at most (default: prompt + output − 1)."""
        self.queue(Live(request, target=request.prompt), positions)

    def queue(self, live: Live, positions: int | None = None) -> None:
        """Queue ``live``, which may arrive with positions computed elsewhere (a decode replica's request, its
        prompt's KV moved from a prefill replica): it is admitted with them, scheduled what is left."""
        request = live.request
        most = request.prompt + request.output - 1 if positions is None else positions
        if most > self.pool.most_positions:
            raise UserError(f"request {request.id}: {request.prompt:,} + {request.output:,} tokens need "
                            f"{self.pool.blocks_for(most):,} KV blocks; the cache holds {self.pool.total:,}")
        self.waiting.append(live)

    def _preempt_for(self, live: Live, preempted: set[int], scheduled: set[int]) -> bool:
        """Free blocks for ``live``'s next token by preempting the latest admitted running requests, none already
        scheduled in this step; False where none is left to preempt but ``live`` itself."""
        while self.running and self.running[-1] is not live and self.running[-1].request.id not in scheduled:
            victim = self.running.pop()
            target = victim.request.prompt + victim.generated
            if not self.config.chunked_prefill and target > self.config.max_num_batched_tokens:
                raise UserError(f"request {victim.request.id} preempted for KV blocks: without chunked prefill its "
                                f"{target:,} tokens must be prefilled again in one step, more than "
                                f"--max-num-batched-tokens {self.config.max_num_batched_tokens:,} (give a larger "
                                f"budget, a larger KV cache, or chunked prefill)")
            self.pool.free(victim.request.id)
            victim.target = target
            victim.computed = 0
            victim.preemptions += 1
            self.preemptions += 1
            preempted.add(victim.request.id)
            self.waiting.appendleft(victim)
            if self.pool.can_grow(live.request.id, live.computed + 1):
                return True
        return False

    def step(self) -> list[Scheduled]:
        """The next step's requests, each with its new tokens; empty where nothing can run."""
        decodes = [live for live in self.running if live.target - live.computed == 1]
        prompts = [live for live in self.running if live.target - live.computed > 1]
        if self.config.mixed:
            return self._schedule(decodes + prompts, admit=True)
        if prompts or self._admissible():
            out = self._schedule(prompts, admit=True)  # a prefill step: the decodes wait for it
            if out:
                return out
        # No prompt can go on (none, or each waits for KV blocks the decodes will free): the decodes run.
        return self._schedule(decodes, admit=False)

    def _schedule(self, running: list[Live], admit: bool) -> list[Scheduled]:
        """A step of ``running`` (decodes first), then, where ``admit``, waiting requests in the budget left."""
        budget = self.config.max_num_batched_tokens
        block_size = self.pool.block_size
        out: list[Scheduled] = []
        preempted: set[int] = set()
        scheduled: set[int] = set()
        for live in running:
            if budget == 0:
                break
            rid = live.request.id
            if rid in preempted:
                continue
            left = live.target - live.computed
            drafting = self.drafts > 0 and left == 1 and live.generated > 0
            if drafting:
                left += min(self.drafts, live.request.output - live.generated - 1)
            new = min(left, budget)
            # One more position inside a block it already holds (not its first position, not at a block's
            # start) takes no block: nothing to check or grow. Most decode steps of a long batch are these.
            if new != 1 or not live.computed % block_size:
                if not self.pool.can_grow(rid, live.computed + new):
                    room = self.pool.room(rid, live.computed)
                    if room == 0 and not self._preempt_for(live, preempted, scheduled):
                        continue  # it waits, holding its blocks, for others to finish
                    new = min(new, self.pool.room(rid, live.computed))
                self.pool.grow(rid, live.computed + new)
            out.append(Scheduled(live, new, live.computed, new - 1 if drafting else 0))
            scheduled.add(rid)
            budget -= new
        while admit and self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            live = self.waiting[0]
            request = live.request
            admission = self._admission(live, budget)
            if admission is None:
                break
            found, hit, new = admission
            self.waiting.popleft()
            self.running.append(live)
            if request.prefix_id is not None:
                self.prefix_lookups += 1
            if found:
                self.pool.attach(request.id, request.prefix_id, found)  # type: ignore[arg-type]
                self.prefix_hits += 1
                self.prefix_tokens += hit
                self.prefix_blocks += found
                live.computed = hit
            self.pool.grow(request.id, hit + new)
            out.append(Scheduled(live, new, hit))
            budget -= new
        return out

    def _admissible(self) -> bool:
        """Whether the first waiting request could start a prefill step now: a sequence slot, and its admission
        with the whole budget (:meth:`_admission`)."""
        return (bool(self.waiting) and len(self.running) < self.config.max_num_seqs
                and self._admission(self.waiting[0], self.config.max_num_batched_tokens) is not None)

    def _admission(self, live: Live, budget: int) -> tuple[int, int, int] | None:
        """``live``'s admission with ``budget`` tokens left: (its prefix's cached blocks it finds, the positions
        it starts with, its first chunk's tokens); None where it does not fit: without chunked prefill its prompt
        must fit the budget, and the KV cache must hold the chunk's blocks (and a cached prefix's attachment)."""
        found = self._prefix_found(live.request) if live.computed == 0 else 0
        hit = found * self.pool.block_size or live.computed
        left = live.target - hit
        if not self.config.chunked_prefill and left > budget:
            return None
        new = min(left, budget)
        cost = self.pool.attach_cost(live.request.prefix_id) if found else 0  # type: ignore[arg-type]
        # Its own blocks: those of its positions past the prefix it finds (kvcache.BlockPool).
        if self.pool.blocks_for(hit + new - found * self.pool.block_size) + cost > self.pool.total - self.pool.used:
            return None
        return found, hit, new

    def _prefix_found(self, request: Request) -> int:
        """The blocks of ``request``'s prefix it finds cached: the prefix's full blocks, at most its prompt less
        one token."""
        if request.prefix_id is None:
            return 0
        return min(self.pool.cached_prefix(request.prefix_id), request.prefix // self.pool.block_size,
                   (request.prompt - 1) // self.pool.block_size)

    def share_prefix(self, live: Live) -> None:
        """After a step: where ``live`` has computed its prefix's full blocks and no request holds that prefix
        cached, its blocks become the prefix's."""
        request, pool = live.request, self.pool
        blocks = request.prefix // pool.block_size
        if (request.prefix_id is not None and blocks and live.computed >= blocks * pool.block_size
                and request.id not in pool.attached and not pool.cached_prefix(request.prefix_id)
                and request.id in pool.held):
            pool.share(request.id, request.prefix_id, blocks, live.computed)

    def decode_run(self) -> int:
        """How many of the next steps are certain to be the same decodes of every running request, each step one
        token for each, with nothing else scheduled: every running request decodes a generated token (none is
        finishing a prompt), no waiting request can be admitted (none waits, or the sequence limit or the token
        budget is reached), none emits its last token before the run's last step has passed, and the
        free KV blocks hold every request's growth (so none is preempted). 0 where the next step is not such a
        step. The caller must end the run early where a request arrives (it could then be admitted). Always 0
        under speculative decoding, whose steps emit a drawn number of tokens."""
        running = self.running
        if self.drafts or not running or len(running) > self.config.max_num_batched_tokens:
            return 0
        # A waiting request is admitted where the decodes leave budget and a sequence slot: not during the run.
        # With steps apart it needs only a slot: the decodes take none of a prefill step's budget.
        slots = self.config.max_num_seqs if not self.config.mixed else min(self.config.max_num_seqs,
                                                                            self.config.max_num_batched_tokens)
        if self.waiting and len(running) < slots:
            return 0
        steps = min(live.request.output - live.generated for live in running) - 1
        if steps < 1 or any(live.target - live.computed != 1 or live.generated == 0 for live in running):
            return 0
        free = self.pool.total - self.pool.used
        while steps > 0 and self._blocks_to_grow(steps) > free:
            steps //= 2
        return steps

    def _blocks_to_grow(self, steps: int) -> int:
        """The blocks the running requests need to hold ``steps`` more positions each."""
        pool = self.pool
        return sum(pool.needs(live.request.id, live.computed + steps) for live in self.running)

    def finish(self, live: Live) -> None:
        self.running.remove(live)
        self.pool.free(live.request.id)
