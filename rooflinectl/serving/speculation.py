"""Speculative decoding in the simulated engine: a drafter proposes k tokens after a sequence's last one, the model
verifies them in one pass, and the sequence keeps the longest accepted prefix and one token more.

The rules, as vLLM and SGLang run draft-then-verify (Leviathan et al., arXiv 2211.17192, section 3):
- **Verification.** A decoding sequence at ``cached`` positions is scheduled ``1 + d`` new tokens (its last token
  and d drafts, d = min(k, what is left of its output − 1, what the budget leaves)): a group of new = 1 + d over its
  cache, a small prefill. The token budget and the KV cache count all 1 + d positions (``Scheduler``).
- **Acceptance.** ``acceptance`` holds α_i, the probability that draft i is accepted given that drafts 0 … i − 1
  were. A verification of d drafts accepts a prefix of a of them (draft i accepted with probability α_i while the
  ones before it were; drawn with the run's seed) and emits a + 1 tokens at the step's end: the accepted drafts and
  the model's own next token. Expected tokens per verification E = Σ_{i=0..d} Π_{j<i} α_j; with one α for every
  position (1 − α^{d+1}) / (1 − α). The sequence's cache then holds its a accepted drafts (``computed`` + 1 + a).
- **The drafter's cost**, added to the step's (drafting and verifying do not overlap): ``draft`` runs the draft
  model d times, draft step j one token of each drafting sequence after cached + j positions (a decode group of the
  draft model), the first of them together with the step's prompt chunks (the drafter keeps its own KV cache of
  every prompt); ``mtp`` the same with the model's multi-token-prediction module, priced as a one-layer copy of the
  model (its embedding, one layer of its last layer's kind, full, sliding or chunked attention with no layer
  pattern (Qwen3-Next's: full), its norm and LM head: DeepSeek-V3's module, arXiv 2412.19437
  section 2.2, num_nextn_predict_layers 1, run once per draft token as vLLM and SGLang do for k > 1; its 2H → H
  projection of the two normed inputs is not counted, 2·H² weights; the weights and caches of all the model's
  ``mtp_layers`` modules are held), refused for a model that ships none (``mtp_layers`` 0); ``ngram`` drafts by
  matching the prompt and costs nothing. The drafter's steps are priced by the same roofline and stack, less the
  stack's fixed cost per step, which the engine's step pays once.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Literal

from ..errors import UserError
from ..specs.workload import Workload
from ..units import real_number, whole_number
from .capacity import Capacity, kv_capacity
from .kvcache import EVERY_LAYER, Part
from .stepmodel import StepModel

Method = Literal["draft", "mtp", "ngram"]
# The most drafts a step may verify per sequence (vLLM's num_speculative_tokens is a handful; EAGLE's trees reach 60).
MAX_DRAFTS = 64


def parse_spec(text: str) -> tuple[Method, str | None, int]:
    """``draft:MODEL:K``, ``mtp:K`` or ``ngram:K`` as (method, draft model or None, k)."""
    form = f"--spec '{text}': give draft:MODEL:K, mtp:K or ngram:K (K drafts a step, 1 to {MAX_DRAFTS})"
    method, _, rest = text.strip().partition(":")
    draft: str | None = None
    if method == "draft":
        draft, _, rest = rest.rpartition(":")
        if not draft:
            raise UserError(form)
    elif method not in ("mtp", "ngram"):
        raise UserError(form)
    k = whole_number(rest)
    if k is None or not 1 <= k <= MAX_DRAFTS:
        raise UserError(form)
    return method, draft, k  # type: ignore[return-value]


def parse_acceptance(text: str | float | None, k: int) -> tuple[float, ...]:
    """``0.7`` (every position) or ``0.8,0.6,0.4`` (one a position, k of them) as k conditional acceptances."""
    if text is None:
        raise UserError("--spec needs --accept: the chance a draft token is accepted (0.7, or per position "
                        "0.8,0.6,0.4)")
    form = f"--accept '{text}': give one chance in [0, 1] (0.7) or one for each of the {k} positions"
    read = [real_number(v) for v in str(text).split(",")]
    values = [v for v in read if v is not None]
    if len(values) != len(read):
        raise UserError(form)
    if len(values) == 1:
        values *= k
    if len(values) != k or not all(0 <= v <= 1 for v in values):
        raise UserError(form)
    return tuple(values)


def expected_tokens(acceptance: tuple[float, ...], drafts: int | None = None) -> float:
    """E = Σ_{i=0..d} Π_{j<i} α_j: the tokens one verification of d drafts emits on average (d: all of them)."""
    d = len(acceptance) if drafts is None else drafts
    total, reach = 1.0, 1.0
    for alpha in acceptance[:d]:
        reach *= alpha
        total += reach
    return total


@dataclass(frozen=True)
class Speculation:
    """How a run speculates: ``method``, the conditional acceptance of each of its k positions, and the step model
    of its drafter (the draft model's, the MTP module's; None for ngram). ``draft_id`` names the draft model."""

    method: Method
    acceptance: tuple[float, ...]
    drafter: StepModel | None = None
    draft_id: str | None = None

    @property
    def k(self) -> int:
        return len(self.acceptance)

    def label(self) -> str:
        return f"{self.method}{'' if self.draft_id is None else ' ' + self.draft_id}, k = {self.k}"

    def accepted(self, rng: random.Random, drafts: int) -> int:
        """The accepted prefix of one verification of ``drafts`` drafts, drawn."""
        for i in range(drafts):
            if rng.random() >= self.acceptance[i]:
                return i
        return drafts

    def draft_time(self, prompts: dict[tuple[int, int], int], drafting: list[tuple[int, int]]) -> float:
        """The drafter's time in one step: its step j over one token of each ``drafting`` (cached, drafts) sequence
        with drafts > j, after cached + j positions, the step's ``prompts`` {(new, cached): sequences} with step
        0 (the module's docstring)."""
        if self.drafter is None:
            return 0.0
        total = 0.0
        for j in range(max((d for _, d in drafting), default=0 if not prompts else 1)):
            counts = dict(prompts) if j == 0 else {}
            for cached, d in drafting:
                if d > j:
                    counts[1, cached + j] = counts.get((1, cached + j), 0) + 1
            total += self.drafter.time_counts(counts)
        return total

    def pays(self, model: StepModel, batch: int, context: int) -> bool:
        """Whether a steady decode step of ``batch`` sequences after ``context`` cached positions emits more tokens
        a second speculating (batch·E tokens in the verification of k + 1 a sequence plus the k draft steps) than
        without (batch tokens in one decode step); priced without the cost of a new shape."""
        plain = batch / model.time_counts({(1, context): batch}, new_shape=False)
        spent = model.time_verify({}, {(self.k + 1, context): batch}, new_shape=False)
        if self.drafter is not None:
            spent += sum(self.drafter.time_counts({(1, context + j): batch}, new_shape=False) for j in range(self.k))
        return batch * expected_tokens(self.acceptance) / spent > plain

    def break_even(self, model: StepModel, context: int, most: int) -> int | None:
        """The smallest batch, 1 to ``most``, at which speculation stops paying (:meth:`pays`), None where it pays
        up to ``most``. Found by doubling the batch until it stops paying, then bisecting between the last batch
        that paid and that one: it assumes one crossing, as the verification turns compute-bound while the plain
        decode is still bound by the weights' bytes."""
        if not self.pays(model, 1, context):
            return 1
        low = 1
        while low < most:
            high = min(2 * low, most)
            if not self.pays(model, high, context):
                while high - low > 1:
                    mid = (low + high) // 2
                    if self.pays(model, mid, context):
                        low = mid
                    else:
                        high = mid
                return high
            low = high
        return None


def with_drafter(cap: Capacity, weight_bytes: float, drafter: Capacity) -> Capacity:
    """The KV blocks left beside a drafter that holds ``weight_bytes`` of weights and the KV cache of
    ``drafter``'s blocks (each block of a sequence holds both caches' positions). Its activations are not added:
    it runs before or after the model's, never with them, and on fewer tokens. Where either model has sliding or
    chunked layers, a block is the largest amount of bytes that divides each kind's block of positions in both
    (``serving.kvcache``: each part a whole number of blocks)."""
    if cap.parts == EVERY_LAYER and drafter.parts == EVERY_LAYER:
        block, parts = cap.block_bytes + drafter.block_bytes, EVERY_LAYER
    else:
        block, parts = _merged(((cap.block_bytes, cap.parts), (drafter.block_bytes, drafter.parts)))
    weights = cap.weight_bytes + weight_bytes
    room = cap.capacity_bytes - cap.reserve_bytes - weights - cap.activation_bytes
    return replace(cap, weight_bytes=weights, block_bytes=block, parts=parts,
                   blocks=max(0, math.floor(room / block)) if room > 0 else 0)


def _merged(caches: tuple[tuple[float, tuple[Part, ...]], ...]) -> tuple[float, tuple[Part, ...]]:
    """(a block's bytes, the parts) of one pool holding several caches, each (its block's bytes, its parts): the
    bytes a block of positions takes in each kind of layer, summed over the caches, in blocks of their greatest
    common divisor (taken exactly, as fractions: a 4-bit cache's bytes may be halves)."""
    kinds: dict[tuple[int | None, int | None], Fraction] = {}
    for block_bytes, parts in caches:
        for n, window, chunk in parts:
            kinds[window, chunk] = kinds.get((window, chunk), Fraction(0)) + n * Fraction(block_bytes)
    scale = math.lcm(*(f.denominator for f in kinds.values()))
    unit = Fraction(math.gcd(*(int(f * scale) for f in kinds.values())), scale)
    return float(unit), tuple((int(f / unit), window, chunk) for (window, chunk), f in kinds.items())


@dataclass(frozen=True)
class SpecResult:
    """What speculation did in a run: its tokens a verification, the expected count, the run without speculation
    (``plain``: same load, its own KV cache) and the batch at which it stops paying at ``context`` positions."""

    speculation: Speculation
    verifications: int  # a sequence's part in a step that verified drafts
    verified_tokens: int  # the tokens those emitted
    drafted: int
    accepted: int
    plain_duration_s: float
    plain_tpot_s: float | None
    plain_output_tokens: int
    break_even_batch: int | None
    context: int
    batch_limit: int  # the most sequences a step of k + 1 tokens each may hold: the break-even search's end

    @property
    def tokens_per_step(self) -> float:
        return self.verified_tokens / self.verifications if self.verifications else 0.0


def speculate(spec: str, accept: str | float | None, model: StepModel, capacity: Capacity, budget: int,
              block_size: int, reserve: float, workload: Callable[[str], Workload]) -> tuple[Speculation, Capacity]:
    """``--spec`` and ``--accept`` as a Speculation, its drafter priced on ``model``'s GPU, layout and stack (less
    the stack's cost per step), and the KV capacity left beside the drafter's weights and cache. ``workload``
    gives a draft model's step options (the model's dtypes and fusions) by its id."""
    method, draft_id, k = parse_spec(spec)
    m = model.base.model
    if method == "mtp" and m.mtp_layers == 0:
        raise UserError(f"--spec '{spec}': model {m.id} has no multi-token-prediction module (mtp_layers 0) to "
                        f"draft with; give draft:MODEL:K (a draft model) or ngram:K (prompt lookup)")
    acceptance = parse_acceptance(accept, k)
    if model.layout.pp > 1:
        raise UserError("--spec with --pp: speculative decoding under pipeline parallelism is not simulated")
    if method == "ngram":
        return Speculation(method, acceptance), capacity
    stack = None if model.stack is None else model.stack.model_copy(update={"step_overhead_us": 0.0})
    if method == "draft":
        assert draft_id is not None
        drafter = StepModel(workload(draft_id), model.gpu, model.calibrated, model.layout, stack)
        own = kv_capacity(drafter, budget, block_size, reserve)
        weights, cache = own.weight_bytes, own
    else:  # the MTP modules: each one layer of the model's last kind, with its embedding and LM head
        kind = m.layer_attention(m.num_layers - 1)
        if kind not in ("full", "sliding", "chunked"):
            raise UserError(f"--spec '{spec}': model {m.id}'s last layer is '{kind}': a multi-token-prediction "
                            f"module is modelled as a full, sliding or chunked attention layer; give draft:MODEL:K "
                            f"or ngram:K")
        # Every layer of the copy is of that kind: no pattern, and only that kind's window or chunk.
        one_kind = {"layer_pattern": None, "linear_attention": None, "mamba": None,
                    "sliding_window": m.sliding_window if kind == "sliding" else None,
                    "attention_chunk_size": m.attention_chunk_size if kind == "chunked" else None,
                    "moe": None if m.moe is None else m.moe.model_copy(update={"first_dense_layers": 0})}

        def layers(n: int) -> StepModel:
            w = model.base.model_copy(update={"model": m.model_copy(update={"num_layers": n, **one_kind})})
            return StepModel(w, model.gpu, model.calibrated, model.layout, stack)

        drafter = layers(1)
        one, two = (kv_capacity(layers(n), budget, block_size, reserve) for n in (1, 2))
        # A module's own weights: a layer's (two layers' footprint less one's); it shares the embedding and the
        # LM head with the model (DeepSeek-V3, arXiv 2412.19437, section 2.2). Its cache: one layer's. The engine
        # holds every module the checkpoint ships, each with its cache (vLLM's DeepSeekMultiTokenPredictor builds
        # all num_nextn_predict_layers of them; draft j runs module j mod n, one layer either way).
        weights = m.mtp_layers * (two.weight_bytes - one.weight_bytes)
        cache = replace(one, block_bytes=m.mtp_layers * one.block_bytes)
    return (Speculation(method, acceptance, drafter, draft_id if method == "draft" else None),
            with_drafter(capacity, weights, cache))
