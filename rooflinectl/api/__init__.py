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
from typing import TYPE_CHECKING, Any

from ..serving import defaults
from ..specs.step import Seqs
from .batches import batch_server, check_once, gpu_list, layout_label, step_analyzer
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
    shown,
    step_options,
)
from .compare import CompareResult, compare
from .serve import ServeResult, serve

if TYPE_CHECKING:
    from ..engine.choice import Curve
    from ..engine.generate import Generation
    from ..engine.roofline import Analysis, Placement, Totals
    from ..serving.batch import BatchRun, Method
    from ..serving.cost import Pricing
    from ..specs.hardware import GPU
    from ..specs.workload import Workload
    from .batches import GPUs

__all__ = ["DEFAULT_GPU", "CompareResult", "GenerateResult", "Seqs", "ServeResult", "StepResult", "analyze",
           "analyze_step", "base_workload", "compare", "generate", "gpu", "model", "pricing", "serve", "step_analyzer"]


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
    server, base, _ = batch_server(g, prompt, output, reserve_gib, calibrated, tp, ep, pp, stack, chunked_prefill,
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


def pricing(*, gpus: GPUs = (DEFAULT_GPU,), tp: int | Sequence[int] = (1,),
            price_per_gpu_hour: float | None = None) -> tuple[Pricing, ...]:
    """Each GPU's (and TP degree's, in :func:`compare`'s and :func:`curves`' order) price and board power."""
    from ..serving.cost import Pricing

    gpus, tp = gpu_list(gpus), one_or_more(tp, "tp", (int,))
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
    gpus, tp = gpu_list(gpus), one_or_more(tp, "tp", (int,))
    check_once("--tp", tp)
    out, base = [], None
    for spec in gpus:
        g = _gpu(spec)
        for t in tp:
            server, base, method = batch_server(g, prompt, output, reserve_gib, calibrated, t, ep, pp, stack,
                                           chunked_prefill, max_num_batched_tokens, options)
            out.append(serve_curve(server, output, layout_label(g.id, t, ep, pp, several=len(tp) > 1),
                                   Layout(t, ep, pp)))
    assert base is not None
    return out, base, method


