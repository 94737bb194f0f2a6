"""The batch one GPU serves a request at: the latency–throughput curve (``plot pareto``) and compare's choice
(``compare``), for any way of serving a batch (a :class:`Server`): the static batch of ``engine.generate``, or
the serving simulation's closed batch (``serving.batch``). Memory decides the largest batch; TPOT, which grows
with the batch, decides the batch under a latency target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..errors import UserError
from ..specs.workload import Workload
from ..units import duration, gib
from .generate import Generation, Request, StepAnalyzer, budget_at, check_request, generate, largest_batch
from .memory import MemoryBudget
from .parallel import Layout


class Served(Protocol):
    """A batch of requests served end to end, as compare and the curve read it: this static batch's
    :class:`Generation`, or the serving simulation's closed batch (``serving.batch``)."""

    @property
    def request(self) -> Request: ...
    @property
    def memory(self) -> MemoryBudget: ...
    @property
    def ttft_s(self) -> float: ...
    @property
    def tpot_s(self) -> float | None: ...
    @property
    def e2e_s(self) -> float: ...
    @property
    def output_tokens_per_s_per_gpu(self) -> float: ...
    @property
    def total_tokens_per_s_per_gpu(self) -> float: ...
    def phase_bound(self, phase: str) -> tuple[str, float] | None: ...  # None: the run kept no step's ops


class Server(Protocol):
    """How one GPU (one layout) serves a batch of a request's prompt and output: ``serve(B)`` the batch,
    ``budget(B)`` its memory alone, ``largest()`` the largest batch that fits (0: none), ``most_at_once()`` the
    most requests one step can run (None: no limit but memory)."""

    def serve(self, batch: int) -> Served: ...
    def budget(self, batch: int) -> MemoryBudget: ...
    def largest(self) -> int: ...
    def most_at_once(self) -> int | None: ...


@dataclass(frozen=True)
class StaticServer:
    """The static batch: its prefill in one step, then its decode steps (:func:`generate`)."""

    base: Workload
    prompt: int
    output: int
    analyze_step: StepAnalyzer
    reserve_bytes: float
    gpus: int = 1

    def serve(self, batch: int) -> Generation:
        return generate(self.base, Request(self.prompt, self.output, batch), self.analyze_step, self.reserve_bytes,
                        self.gpus)

    def budget(self, batch: int) -> MemoryBudget:
        return budget_at(self.base, Request(self.prompt, self.output, batch), self.analyze_step, self.reserve_bytes)

    def largest(self) -> int:
        return largest_batch(self.base, self.prompt, self.output, self.analyze_step, self.reserve_bytes)

    def most_at_once(self) -> int | None:
        return None  # every request of the batch is in every step


def curve_batches(largest: int) -> list[int]:
    """The batches of the latency–throughput curve: 1, 2, 4, … up to ``largest``, and ``largest``."""
    out = []
    b = 1
    while b <= largest:
        out.append(b)
        b *= 2
    if largest and out[-1] != largest:
        out.append(largest)
    return out


@dataclass(frozen=True)
class Curve:
    """The latency–throughput curve of one GPU: a served batch per batch size, and the largest batch that fits."""

    gpu: str
    largest_batch: int
    points: tuple[Served, ...]
    limit: MemoryBudget  # at batch 1 when nothing fits (why), else at the largest batch (what binds)
    layout: Layout = Layout()  # how one copy spans GPUs (engine.parallel): every figure is one GPU's


def check_curve_output(output: int) -> None:
    if output < 2:
        raise UserError(f"--output {output}: the curve plots time per output token, which needs at least 2 output "
                        f"tokens (the first comes from the prefill)")


def serve_curve(server: Server, output: int, gpu: str, layout: Layout = Layout()) -> Curve:
    """One GPU's curve: ``server``'s batch at each of ``curve_batches`` of the largest batch that fits."""
    check_curve_output(output)
    largest = server.largest()
    points = tuple(server.serve(b) for b in curve_batches(largest))
    limit = points[-1].memory if points else server.budget(1)
    return Curve(gpu=gpu, largest_batch=largest, points=points, limit=limit, layout=layout)


def latency_throughput_curve(base: Workload, prompt: int, output: int, analyze_step: StepAnalyzer,
                             reserve_bytes: float, gpu: str, layout: Layout = Layout()) -> Curve:
    """The static batch's curve (:func:`serve_curve`)."""
    check_curve_output(output)
    return serve_curve(StaticServer(base, prompt, output, analyze_step, reserve_bytes, layout.gpus), output, gpu,
                       layout)


def batch_for_tpot(server: Server, tpot_s: float, largest: int) -> Served | None:
    """The served batch at the largest batch (up to ``largest``) whose mean TPOT is at most ``tpot_s``; None when
    not even batch 1 meets it. TPOT grows with the batch (every op's count does), so a bisection finds it."""
    best = server.serve(1)
    assert best.tpot_s is not None  # output ≥ 2: checked by the caller
    if best.tpot_s > tpot_s:
        return None
    top = server.serve(largest)  # a target the largest batch meets needs no search (a loose one, the common case)
    assert top.tpot_s is not None
    if top.tpot_s <= tpot_s:
        return top
    lo, hi = 1, largest - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        g = server.serve(mid)
        assert g.tpot_s is not None
        if g.tpot_s <= tpot_s:
            lo, best = mid, g
        else:
            hi = mid - 1
    return best if best.request.batch == lo else server.serve(lo)


@dataclass(frozen=True)
class Choice:
    """The batch one GPU serves a request at, and why: ``rule`` says how the batch was chosen; ``generation`` is
    None when no batch qualifies, and ``note`` then says why."""

    gpu: str
    rule: str
    largest_batch: int
    generation: Served | None
    note: str = ""
    layout: Layout = Layout()  # how one copy spans GPUs (engine.parallel): every figure is one GPU's


def choose(base: Workload, prompt: int, output: int, analyze_step: StepAnalyzer, reserve_bytes: float, gpu: str,
           batch: int | None = None, tpot_s: float | None = None, layout: Layout = Layout()) -> Choice:
    """The static batch's row of ``compare`` (:func:`choose_batch`)."""
    server = StaticServer(base, prompt, output, analyze_step, reserve_bytes, layout.gpus)
    return choose_batch(server, base, prompt, output, gpu, batch, tpot_s, layout)


def does_not_fit(m: MemoryBudget) -> str:
    """Why a row has no numbers when not one request fits: ``m`` the memory of one."""
    return f"does not fit: one request needs {gib(m.total_bytes)} (weights {gib(m.weight_bytes)}) of " \
        f"{gib(m.capacity_bytes, 0)}"


def choose_batch(server: Server, base: Workload, prompt: int, output: int, gpu: str, batch: int | None = None,
                 tpot_s: float | None = None, layout: Layout = Layout()) -> Choice:
    """One GPU's row of ``compare``: at ``batch`` when given (if it fits), at the largest batch whose mean TPOT is
    at most ``tpot_s`` when that is given, else at the largest batch that fits (the most tokens/s per GPU).

    A batch larger than the most requests one step runs (``Server.most_at_once``: with chunked prefill, the token
    budget, since every request a step runs takes a token of it) is never run as one batch: its requests past
    that many wait for the first ones to finish, which only lengthens their TTFT. The two rules that choose the
    batch stop there; ``largest_batch`` stays what memory holds."""
    if batch is not None and tpot_s is not None:
        raise UserError("--batch and --tpot-ms both choose the batch: give one")
    if tpot_s is not None and output < 2:
        raise UserError(f"--tpot-ms with --output {output}: time per output token needs at least 2 output tokens")
    check_request(base, Request(prompt, output, batch or 1))
    largest = server.largest()
    most = server.most_at_once()
    top = largest if most is None else min(largest, most)  # the largest batch one step runs whole
    if tpot_s is not None:
        rule = f"largest with TPOT ≤ {tpot_s * 1e3:g} ms"
    elif batch is not None:
        rule = "given"
    else:
        rule = "largest that fits" if top == largest else f"largest one step runs ({top:,}: the token budget)"
    if largest == 0:
        return Choice(gpu, rule, 0, None, does_not_fit(server.budget(1)), layout)
    if batch is not None:
        if batch > largest:
            return Choice(gpu, rule, largest, None, f"batch {batch:,} does not fit (largest {largest:,})", layout)
        return Choice(gpu, rule, largest, server.serve(batch), layout=layout)
    if tpot_s is not None:
        g = batch_for_tpot(server, tpot_s, top)
        if g is None:
            one = server.serve(1)
            assert one.tpot_s is not None
            return Choice(gpu, rule, largest, None, f"TPOT is {duration(one.tpot_s)} at batch 1", layout)
        return Choice(gpu, rule, largest, g, layout=layout)
    return Choice(gpu, rule, largest, server.serve(top), layout=layout)
