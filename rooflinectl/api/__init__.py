"""The Python API: what the commands compute, for notebooks and scripts (``import rooflinectl as rl``).

Each function takes the command's options as keywords and returns a typed result whose ``to_dict()`` is exactly
the command's ``--json`` (the commands print it from the same call) and whose ``to_pandas()`` is its table, where
pandas is installed. Bad input raises :class:`rooflinectl.errors.UserError` with the command's one-line message.

    import rooflinectl as rl
    r = rl.analyze("decode", gpu="h100", model="llama-3-8b", batch=64, context=4096)
    r.totals.time_s, r.to_dict()["ops"][0]["name"]
    rl.analyze_step(gpu="h100", seqs=[rl.Seqs(16, 1, 4095), rl.Seqs(1, 512, 1024)])

Nothing heavy is imported here: each function imports what it uses when called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from ..serving import defaults
from ..specs.step import Seqs
from .common import (
    DEFAULT_GPU,
    _flat,
    _frame,
    _gpu,
    base_workload,
    check_numbers,
    gpu,
    model,
    name_arg,
    one_or_more,
    seconds_of_ms,
    shown,
    step_options,
)
from .serve import ServeResult, serve

if TYPE_CHECKING:
    from ..engine.choice import Choice, Curve, StaticServer
    from ..engine.generate import Generation, StepAnalyzer
    from ..engine.roofline import Analysis, Placement, Totals
    from ..serving.batch import BatchRun, BatchServer, Method
    from ..serving.cost import Pricing
    from ..serving.deployed import Plan
    from ..specs.hardware import GPU
    from ..specs.workload import Workload

    # One GPU (an id, an alias, a YAML path or a spec) or a list of them.
    GPUs: TypeAlias = str | os.PathLike[str] | GPU | Sequence[str | os.PathLike[str] | GPU]

__all__ = ["DEFAULT_GPU", "CompareResult", "GenerateResult", "Seqs", "ServeResult", "StepResult", "analyze",
           "analyze_step", "compare", "generate", "gpu", "model", "pricing", "serve"]


@dataclass(frozen=True)
class StepResult:
    """One step placed on a GPU's roofline (``analyze``, ``analyze step``): the engine's :class:`Analysis`."""

    analysis: Analysis

    @property
    def totals(self) -> Totals:
        return self.analysis.totals

    @property
    def placements(self) -> tuple[Placement, ...]:
        return self.analysis.placements

    @property
    def workload(self) -> Workload:
        return self.analysis.workload

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from ..render.analysis import analysis_json

        return analysis_json(self.analysis)

    def to_pandas(self) -> Any:
        """One row an op, the columns of ``to_dict()["ops"]``."""
        return _frame(self.to_dict()["ops"])


@dataclass(frozen=True)
class GenerateResult:
    """A batch of requests served end to end (``analyze generate``), and the largest batch that fits."""

    generation: Generation | BatchRun  # the static batch, or the simulated closed batch
    largest_batch: int

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from ..render.generate import generation_json

        return generation_json(self.generation, self.largest_batch)

    def to_pandas(self) -> Any:
        """One row: ``to_dict()`` flattened, its nested keys joined by dots (``latency.ttft_s``)."""
        return _frame([_flat(self.to_dict())])


@dataclass(frozen=True)
class CompareResult:
    """One request on several GPUs (``compare``): a row a GPU and layout."""

    choices: tuple[Choice, ...]
    names: tuple[str, ...]  # each row's GPU name
    prompt: int
    output: int
    model_id: str
    types: str  # the step's data types in words (Workload.types_label: quantized weights named)
    method: Method  # how each batch was served: simulated (stack, chunked prefill) or the static batch
    workload: Workload  # the step options every row ran: the model and its data types
    pricing: tuple[Pricing, ...] = ()  # each row's GPU price and board power (serving.cost.Pricing)
    plans: tuple[Plan, ...] = ()  # each row's deployment: one engine, aggregated replicas, or disaggregated
    load: tuple[int, int | None] | None = None  # a closed loop's (clients, requests); None: a closed batch

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from ..render.compare import compare_json

        return compare_json(list(self.choices), list(self.names), self.prompt, self.output, self.method,
                            self.workload, self.pricing, self.plans, self.load)

    def to_pandas(self) -> Any:
        """One row a GPU and layout, the command's CSV columns."""
        from ..render.compare import compare_rows

        return _frame(compare_rows(list(self.choices), list(self.names), self.method, self.workload, self.pricing,
                                   self.plans))


def _place(w: Workload, gpu_spec: str | os.PathLike[str] | GPU, calibrated: bool, tp: int, ep: int,
           pp: int) -> StepResult:
    from ..engine.parallel import Layout
    from ..engine.roofline import analyze as place_step

    check_numbers(dict(tp=tp, ep=ep, pp=pp), {}, dict(calibrated=calibrated), required=("tp", "ep", "pp", "calibrated"))
    return StepResult(place_step(w, _gpu(gpu_spec), calibrated=calibrated, layout=Layout(tp, ep, pp)))


def analyze(workload: str | os.PathLike[str] = "decode", *, gpu: str | os.PathLike[str] | GPU = DEFAULT_GPU,
            batch: int | None = None, context: int | None = None, seq_len: int | None = None,
            calibrated: bool = False, tp: int = 1, ep: int = 1, pp: int = 1, **options: Any) -> StepResult:
    """Every op of one step on ``gpu``'s roofline: ``workload`` a phase (decode, prefill, attention) or a
    workload YAML; ``options`` those of :func:`step_options` (model, dtypes, attention, fuse …)."""
    from ..specs.scenario import resolve_workload

    check_numbers(dict(batch=batch, context=context, seq_len=seq_len), {})
    w = resolve_workload(name_arg(workload, "workload"), batch=batch, context=context, seq_len=seq_len,
                         **step_options(**options))
    return _place(w, gpu, calibrated, tp, ep, pp)


def analyze_step(*, seqs: Seqs | str | Sequence[Seqs | str], gpu: str | GPU = DEFAULT_GPU, calibrated: bool = False,
                 tp: int = 1, ep: int = 1, pp: int = 1, **options: Any) -> StepResult:
    """A step made of groups of sequences (``Seqs(count, new, cached)`` or ``"16x1@4095"``): a decode or prefill
    step where the groups make one (the same numbers as :func:`analyze`), else a mixed step."""
    from ..errors import UserError
    from ..specs.scenario import resolve_step

    if isinstance(seqs, (str, Seqs)):
        seqs = [seqs]
    if not isinstance(seqs, Sequence):
        raise UserError(f"seqs: give Seqs(count, new, cached), 'COUNTxNEW@CACHED' or a list of them, not "
                        f"{shown(seqs)} ({type(seqs).__name__})")
    for g in seqs:
        if not isinstance(g, (str, Seqs)):
            raise UserError(f"seqs: give each group as Seqs(count, new, cached) or 'COUNTxNEW@CACHED', not {shown(g)}")
    groups = tuple(Seqs.parse(g) if isinstance(g, str) else g for g in seqs)
    if not groups:
        raise UserError("a step needs at least one group of sequences (--seqs COUNTxNEW[@CACHED])")
    w = resolve_step(groups, **step_options(**options))
    return _place(w, gpu, calibrated, tp, ep, pp)


def step_analyzer(g: GPU, calibrated: bool, tp: int = 1, ep: int = 1, pp: int = 1) -> StepAnalyzer:
    """Each step of a request placed under ``g``'s roofs, on one GPU of the layout (engine.parallel)."""
    from ..engine.parallel import Layout, check_interconnect
    from ..engine.roofline import analyze as place_step

    layout = Layout(tp, ep, pp)
    check_interconnect(g, layout)

    def analyze_one(w: Workload) -> Analysis:
        return place_step(w, g, calibrated, layout)

    return analyze_one


def layout_label(gpu_id: str, tp: int, ep: int, pp: int, several: bool) -> str:
    """A row's (a curve's) name: the GPU, and its degrees where they are not 1 or where several TP degrees are
    compared ("h100-sxm TP4", "h200 EP8", "h100-sxm TP4 PP2")."""
    parts = [gpu_id]
    if tp > 1 or several:
        parts.append(f"TP{tp}")
    if ep > 1:
        parts.append(f"EP{ep}")
    if pp > 1:
        parts.append(f"PP{pp}")
    return " ".join(parts)


def _server(g: GPU, prompt: int, output: int, reserve_gib: float | None, calibrated: bool, tp: int, ep: int,
            pp: int, stack: str, chunked_prefill: bool, max_num_batched_tokens: int | None,
            options: dict[str, Any]) -> tuple[StaticServer | BatchServer, Workload, Method]:
    """How ``g`` serves a batch of the request: the static batch of ``engine.generate`` (no chunked prefill, a
    stack with no costs), else the simulated closed batch (``serving.batch``); and the step options it runs."""
    from ..engine.choice import StaticServer
    from ..engine.memory import reserve_bytes
    from ..engine.parallel import Layout
    from ..errors import UserError
    from ..serving.batch import BatchServer, Method
    from ..serving.scheduler import SchedulerConfig
    from ..specs.stack import load_stack

    if max_num_batched_tokens is not None and not chunked_prefill:
        raise UserError("--max-num-batched-tokens with --no-chunked-prefill: without chunked prefill one step "
                        "holds the whole batch's prompts; the budget is chunked prefill's")
    costs = load_stack(name_arg(stack, "stack"), g.compute_capability)
    method = Method(costs, chunked_prefill, SchedulerConfig.on(costs, max_num_batched_tokens).max_num_batched_tokens)
    if not method.static and options.get("fuse") is None:
        options = {**options, "fuse": list(method.stack.fused)}
    base = base_workload(**options)
    analyze_one = step_analyzer(g, calibrated, tp, ep, pp)
    reserve = reserve_bytes(g.capacity_bytes, reserve_gib)
    if method.static:
        return StaticServer(base, prompt, output, analyze_one, reserve, tp * ep * pp), base, method
    return (BatchServer(base, g, prompt, output, reserve, method, analyze_one, calibrated, Layout(tp, ep, pp)), base,
            method)


def generate(*, gpu: str | GPU = DEFAULT_GPU, prompt: int = defaults.PROMPT, output: int = defaults.OUTPUT, batch: int = 1,
             reserve_gib: float | None = None, calibrated: bool = False, tp: int = 1, ep: int = 1, pp: int = 1,
             stack: str = "roofline", chunked_prefill: bool = True, max_num_batched_tokens: int | None = None,
             **options: Any) -> GenerateResult:
    """``batch`` requests of ``prompt`` tokens and ``output`` new tokens arriving at once, with no request after
    them: TTFT, TPOT, latency, tokens/s and memory. With ``chunked_prefill`` (the default) the serving simulation
    runs them (a closed batch: ``analyze serve --concurrency B`` with B requests and no refills), prompts in chunks
    of ``max_num_batched_tokens`` (default 8,192) beside the decodes, on ``stack``; with ``chunked_prefill=False``
    and the ``roofline`` stack, the static batch: every prompt in one prefill step, then the decode steps. A batch
    that does not fit is a UserError naming the largest that does."""
    from ..engine.generate import Request, check_request
    from ..errors import UserError
    from ..render.generate import memory_sum
    from ..serving.batch import BatchServer

    check_numbers(dict(prompt=prompt, output=output, batch=batch, tp=tp, ep=ep, pp=pp,
                       max_num_batched_tokens=max_num_batched_tokens), dict(reserve_gib=reserve_gib),
                  dict(chunked_prefill=chunked_prefill, calibrated=calibrated),
                  required=("prompt", "output", "batch", "tp", "ep", "pp", "chunked_prefill", "calibrated"))
    g = _gpu(gpu)
    server, base, _ = _server(g, prompt, output, reserve_gib, calibrated, tp, ep, pp, stack, chunked_prefill,
                              max_num_batched_tokens, options)
    request = Request(prompt, output, batch)
    check_request(base, request)
    memory = server.budget(batch)
    block = server.paged if isinstance(server, BatchServer) else None
    if not memory.fits:
        where = g.id if tp * ep * pp == 1 else f"{g.id} at --tp {tp} --ep {ep} --pp {pp} (per GPU)"
        raise UserError(f"batch {batch:,} does not fit on {where}: "
                        f"{memory_sum(memory, batch, request.longest_context, block)}; "
                        f"largest batch that fits: "
                        f"{server.largest():,} (--reserve-gib sets the reserve)")
    return GenerateResult(server.serve(batch), server.largest())


def compare(*, gpus: GPUs = (DEFAULT_GPU,), prompt: int = defaults.PROMPT, output: int = defaults.OUTPUT,
            batch: int | None = None, tpot_ms: float | None = None, reserve_gib: float | None = None,
            calibrated: bool = False, tp: int | Sequence[int] = (1,), ep: int = 1, pp: int = 1, stack: str = "roofline",
            chunked_prefill: bool = True, max_num_batched_tokens: int | None = None,
            price_per_gpu_hour: float | None = None, replicas: int | Sequence[int] = (1,),
            disagg: str | tuple[int, int] | Sequence[str | tuple[int, int]] = (), prefill_tp: int | None = None,
            decode_tp: int | None = None, kv_transfer: str = "after", concurrency: int | None = None,
            requests: int | None = None, **options: Any) -> CompareResult:
    """One request on each GPU of ``gpus`` (and each TP degree of ``tp``): at ``batch``, at the largest batch
    whose mean TPOT is at most ``tpot_ms``, or at the largest batch that fits; each batch served as
    :func:`generate` serves it (``stack``, ``chunked_prefill``, ``max_num_batched_tokens``); with
    ``price_per_gpu_hour`` and the GPU files' board power, dollars and joules per output token
    (``serving.cost.Pricing``).

    Deployments beside them, each row :func:`serve` of the same load: ``replicas`` N > 1, N aggregated copies of
    each TP layout; each ``disagg`` P:D, P prefill replicas of ``prefill_tp`` and D decode replicas of
    ``decode_tp`` (by default each ``tp``), the KV moved ``kv_transfer``. ``concurrency``: every row (one engine
    too) is that closed loop of clients sending ``requests`` in all, not a closed batch (``serving.deployed``).

    Where no row has a result (nothing fits, no batch meets ``tpot_ms``, ``batch`` fits nowhere), the request has no
    answer: a UserError names each row's reason, as ``plot pareto`` refuses a model that fits on none of its GPUs."""
    from ..engine.choice import choose_batch
    from ..engine.parallel import Layout, check_degree
    from ..errors import UserError
    from ..serving.batch import BatchServer
    from ..serving.cost import Pricing
    from ..serving.deployed import Plan
    from ..serving.replicas import check_replicas
    from ..serving.transfer import check_mode
    from .deployed import Options, check_disagg, deployment_choice

    check_numbers(dict(prompt=prompt, output=output, batch=batch, ep=ep, pp=pp, prefill_tp=prefill_tp,
                       decode_tp=decode_tp, concurrency=concurrency, requests=requests,
                       max_num_batched_tokens=max_num_batched_tokens),
                  dict(tpot_ms=tpot_ms, reserve_gib=reserve_gib, price_per_gpu_hour=price_per_gpu_hour),
                  dict(chunked_prefill=chunked_prefill, calibrated=calibrated),
                  required=("prompt", "output", "ep", "pp", "chunked_prefill", "calibrated"))
    seconds_of_ms(tpot_ms, "--tpot-ms")
    gpus, tp, replicas = _gpus(gpus), one_or_more(tp, "tp", (int,)), one_or_more(replicas, "replicas", (int,))
    for n in replicas:
        check_replicas(n)
    splits = _splits(disagg)
    _once("--tp", tp)
    _once("--replicas", replicas)
    _once("--disagg", [f"{p}:{d}" for p, d in splits])
    check_mode(kv_transfer)
    if kv_transfer != "after" and not splits:
        raise UserError("--kv-transfer: the KV moves between the sides of a disaggregated deployment; give --disagg P:D")
    load = _closed_loop(concurrency, requests, batch, tpot_ms)
    served = load is not None or splits or any(n > 1 for n in replicas)
    if served and not chunked_prefill:
        raise UserError("--no-chunked-prefill with --replicas, --disagg or --concurrency: those rows are analyze "
                        "serve's simulation, whose replicas run chunked prefill")
    if (prefill_tp is not None or decode_tp is not None) and not splits:
        raise UserError("--prefill-tp and --decode-tp are the layouts of --disagg P:D: give the split")
    for flag, degree in (("--prefill-tp", prefill_tp), ("--decode-tp", decode_tp)):
        if degree is not None:
            check_degree(flag, degree)
    choices, names, plans, prices = [], [], [], []
    base = method = None
    seen: dict[str, str | os.PathLike[str] | GPU] = {}
    for spec in gpus:
        g = _gpu(spec)
        if g.id in seen:  # the same rows twice, simulated twice: a slip, said in one line
            raise UserError(f"--gpu {spec if isinstance(spec, str) else g.id}: {g.id} is already compared (as "
                            f"{seen[g.id] if isinstance(seen[g.id], str) else g.id}); name each GPU once")
        seen[g.id] = spec
        price = Pricing(price_per_gpu_hour, None if g.power is None else g.power.board_w)
        rows = [Plan(Layout(t, ep, pp), n) for t in tp for n in replicas]
        sides = list(dict.fromkeys((t if prefill_tp is None else prefill_tp, t if decode_tp is None else decode_tp)
                                   for t in tp))
        rows += [Plan(Layout(d, ep, pp), dn, pn, Layout(p, ep, pp)) for p, d in sides for pn, dn in splits]
        for plan in rows:
            t = plan.layout.tp
            server, base, method = _server(g, prompt, output, reserve_gib, calibrated, t, ep, pp, stack,
                                           chunked_prefill, max_num_batched_tokens, options)
            tpot_s = None if tpot_ms is None else tpot_ms / 1e3
            if plan.kind == "engine" and load is None:
                label = layout_label(g.id, t, ep, pp, several=len(tp) > 1)
                choice = choose_batch(server, base, prompt, output, label, batch, tpot_s, layout=plan.layout)
            else:
                assert isinstance(server, BatchServer)  # chunked prefill: checked above
                label = layout_label(g.id, t, ep, pp, several=len(tp) > 1) if plan.kind == "engine" else \
                    f"{g.id} {plan.name()}"
                if plan.kind == "disaggregated":
                    prefill, _, _ = _server(g, prompt, output, reserve_gib, calibrated, plan.prefill_layout.tp, ep,
                                            pp, stack, chunked_prefill, max_num_batched_tokens, options)
                    assert isinstance(prefill, BatchServer)
                    check_disagg(g, plan, server, prefill, prompt, output)
                shared = Options(prompt, output, reserve_gib, calibrated, stack, method.max_num_batched_tokens,
                                 price_per_gpu_hour, kv_transfer, options)
                choice = deployment_choice(g, plan, server, shared, base, label, batch, tpot_s, load)
            choices.append(choice)
            names.append(g.name)
            plans.append(plan)
            prices.append(price)
    assert base is not None and method is not None
    if all(c.generation is None for c in choices):
        raise UserError(_no_result(base.model.id, choices))
    return CompareResult(tuple(choices), tuple(names), prompt, output, base.model.id, base.types_label(), method,
                         base, tuple(prices), tuple(plans), load)


def _no_result(model_id: str, choices: Sequence[Choice]) -> str:
    """Why ``compare`` has nothing to show, in one line: each row's reason (the rows with the same one named
    together), and, where nothing fits anywhere, what would make it fit (``plot pareto``'s advice)."""
    rows: dict[str, list[str]] = {}
    for c in choices:
        rows.setdefault(c.note, []).append(c.gpu)
    reasons = "; ".join(f"{', '.join(gpus)}: {note}" for note, gpus in rows.items())
    advice = ("; split it with --tp or --pp, or quantize it (--weight-dtype)"
              if all(c.largest_batch == 0 for c in choices) else "")
    return f"{model_id}: no row has a result: {reasons}{advice}"


def _once(flag: str, values: Sequence[object]) -> None:
    """Each value of a repeatable option once: a repeat would give the same row (or curve) twice, a slip."""
    from ..errors import UserError

    repeated = sorted({str(v) for v in values if list(values).count(v) > 1})
    if repeated:
        raise UserError(f"{flag} {', '.join(repeated)}: given more than once; name each once")


def _splits(disagg: object) -> list[tuple[int, int]]:
    """compare's disaggregated splits: none, one (``"P:D"`` or ``(P, D)``) or a list of them, each parsed."""
    from ..serving.replicas import parse_disagg

    if isinstance(disagg, tuple) and len(disagg) == 2 and all(type(n) is int for n in disagg):
        disagg = [disagg]  # one split given as (P, D)
    if not disagg:
        return []
    return [parse_disagg(d) for d in one_or_more(disagg, "disagg", (str,))]


def _gpus(gpus: GPUs) -> tuple[str | os.PathLike[str] | GPU, ...]:
    """The GPUs to compare: one (an id, a path or a spec) or a list of them."""
    from ..specs.hardware import GPU

    return one_or_more(gpus, "gpus", (str, os.PathLike, GPU))


def _closed_loop(concurrency: int | None, requests: int | None, batch: int | None,
                 tpot_ms: float | None) -> tuple[int, int | None] | None:
    """compare's load: None, a closed batch of the chosen size; else (clients, requests) of a closed loop."""
    from ..errors import UserError

    if concurrency is None:
        if requests is not None:
            raise UserError("--requests without --concurrency: a closed batch's requests are its batch")
        return None
    if batch is not None or tpot_ms is not None:
        raise UserError("--concurrency with --batch or --tpot-ms: give one load (the clients of a closed loop, or "
                        "a closed batch)")
    return concurrency, requests


def pricing(*, gpus: GPUs = (DEFAULT_GPU,), tp: int | Sequence[int] = (1,),
            price_per_gpu_hour: float | None = None) -> tuple[Pricing, ...]:
    """Each GPU's (and TP degree's, in :func:`compare`'s and :func:`curves`' order) price and board power."""
    from ..serving.cost import Pricing

    gpus, tp = _gpus(gpus), one_or_more(tp, "tp", (int,))
    out = []
    for spec in gpus:
        g = _gpu(spec)
        out += [Pricing(price_per_gpu_hour, None if g.power is None else g.power.board_w)] * len(tp)
    return tuple(out)


def curves(*, gpus: GPUs = (DEFAULT_GPU,), prompt: int = defaults.PROMPT, output: int = defaults.OUTPUT,
           reserve_gib: float | None = None, calibrated: bool = False, tp: int | Sequence[int] = (1,), ep: int = 1,
           pp: int = 1, stack: str = "roofline", chunked_prefill: bool = True,
           max_num_batched_tokens: int | None = None, **options: Any) -> tuple[list[Curve], Workload, Method]:
    """``plot pareto``'s curves: on each GPU of ``gpus`` and TP degree of ``tp``, the request served as
    :func:`generate` serves it at batch 1, 2, 4, … and the largest that fits; and the step options they ran."""
    from ..engine.choice import check_curve_output, serve_curve
    from ..engine.parallel import Layout

    check_numbers(dict(prompt=prompt, output=output, ep=ep, pp=pp, max_num_batched_tokens=max_num_batched_tokens),
                  dict(reserve_gib=reserve_gib), dict(chunked_prefill=chunked_prefill, calibrated=calibrated),
                  required=("prompt", "output", "ep", "pp", "chunked_prefill", "calibrated"))
    check_curve_output(output)
    gpus, tp = _gpus(gpus), one_or_more(tp, "tp", (int,))
    _once("--tp", tp)
    out, base = [], None
    for spec in gpus:
        g = _gpu(spec)
        for t in tp:
            server, base, method = _server(g, prompt, output, reserve_gib, calibrated, t, ep, pp, stack,
                                           chunked_prefill, max_num_batched_tokens, options)
            out.append(serve_curve(server, output, layout_label(g.id, t, ep, pp, several=len(tp) > 1),
                                   Layout(t, ep, pp)))
    assert base is not None
    return out, base, method


