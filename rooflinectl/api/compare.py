"""``compare``: one request on several GPUs, TP degrees and deployments, a row each (the command's rows)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..serving import defaults
from .batches import batch_server, check_once, gpu_list, layout_label
from .common import DEFAULT_GPU, _frame, _gpu, check_numbers, one_or_more, seconds_of_ms

if TYPE_CHECKING:
    from ..engine.choice import Choice
    from ..serving.batch import Method
    from ..serving.cost import Pricing
    from ..serving.deployed import Plan
    from ..specs.hardware import GPU
    from ..specs.workload import Workload
    from .batches import GPUs

__all__ = ["CompareResult", "compare"]


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
    gpus, tp, replicas = gpu_list(gpus), one_or_more(tp, "tp", (int,)), one_or_more(replicas, "replicas", (int,))
    for n in replicas:
        check_replicas(n)
    splits = _splits(disagg)
    check_once("--tp", tp)
    check_once("--replicas", replicas)
    check_once("--disagg", [f"{p}:{d}" for p, d in splits])
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
            server, base, method = batch_server(g, prompt, output, reserve_gib, calibrated, t, ep, pp, stack,
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
                    prefill, _, _ = batch_server(g, prompt, output, reserve_gib, calibrated, plan.prefill_layout.tp, ep,
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


def _splits(disagg: object) -> list[tuple[int, int]]:
    """compare's disaggregated splits: none, one (``"P:D"`` or ``(P, D)``) or a list of them, each parsed."""
    from ..serving.replicas import parse_disagg

    if isinstance(disagg, tuple) and len(disagg) == 2 and all(type(n) is int for n in disagg):
        disagg = [disagg]  # one split given as (P, D)
    if not disagg:
        return []
    return [parse_disagg(d) for d in one_or_more(disagg, "disagg", (str,))]


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
