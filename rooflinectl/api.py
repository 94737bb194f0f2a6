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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .specs.step import Seqs

if TYPE_CHECKING:
    from .engine.choice import Choice, Curve, StaticServer
    from .engine.generate import Generation, StepAnalyzer
    from .engine.roofline import Analysis, Placement, Totals
    from .serving.batch import BatchRun, BatchServer, Method
    from .serving.simulate import Run, Simulation
    from .specs.hardware import GPU
    from .specs.model import Model
    from .specs.workload import Workload

__all__ = ["DEFAULT_GPU", "CompareResult", "GenerateResult", "Seqs", "ServeResult", "StepResult", "analyze",
           "analyze_step", "compare", "generate", "gpu", "model", "serve"]

# The GPU a command or a function uses when none is given.
DEFAULT_GPU = "h100-sxm"


def _frame(rows: list[dict[str, Any]]) -> Any:
    """``rows`` as a pandas DataFrame; pandas is optional, and its absence is said in one line."""
    try:
        import pandas as pd  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        from .errors import UserError

        raise UserError("to_pandas needs pandas: pip install pandas") from None
    return pd.DataFrame(rows)


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested mapping as one level, keys joined by dots; lists are kept as values."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


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
        from .render.analysis import analysis_json

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
        from .render.generate import generation_json

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

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from .render.compare import compare_json

        return compare_json(list(self.choices), list(self.names), self.prompt, self.output, self.model_id,
                            self.method)

    def to_pandas(self) -> Any:
        """One row a GPU and layout, the command's CSV columns."""
        from .render.compare import compare_rows

        return _frame(compare_rows(list(self.choices), list(self.names), self.method))


def gpu(id_or_path: str) -> GPU:
    """A GPU spec by id, alias or YAML path (``rooflinectl hardware list``)."""
    from .specs.hardware import load_gpu

    return load_gpu(id_or_path)


def model(id_or_path: str) -> Model:
    """A model by id, model YAML or a local Hugging Face config.json (``rooflinectl workloads list``)."""
    from .specs.model import load_model

    return load_model(id_or_path)


def _gpu(spec: str | GPU) -> GPU:
    return gpu(spec) if isinstance(spec, str) else spec


def _fusions(fuse: str | Sequence[str] | None) -> list[str] | None:
    """``fuse`` as the scenario's list: a comma-separated string as the command line gives it, or a list."""
    if fuse is None or not isinstance(fuse, str):
        return None if fuse is None else list(fuse)
    from .specs.load import split_list

    return split_list(fuse, "--fuse")


def step_options(*, model: str | Model | None = None, dtype: str | None = None, kv_dtype: str | None = None,
                 weight_dtype: str | None = None, act_dtype: str | None = None, group_size: int | None = None,
                 attention: str | None = None, causal: bool | None = None,
                 fuse: str | Sequence[str] | None = None, experts_touched: int | None = None) -> dict[str, Any]:
    """The options every step shares, as :func:`specs.scenario.resolve_workload`'s overrides (None: the
    scenario's)."""
    return dict(model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                group_size=group_size, attention=attention, causal=causal, fused=_fusions(fuse),
                experts_touched=experts_touched)


def _place(w: Workload, gpu_spec: str | GPU, calibrated: bool, tp: int, ep: int, pp: int) -> StepResult:
    from .engine.parallel import Layout
    from .engine.roofline import analyze as place_step

    return StepResult(place_step(w, _gpu(gpu_spec), calibrated=calibrated, layout=Layout(tp, ep, pp)))


def analyze(workload: str = "decode", *, gpu: str | GPU = DEFAULT_GPU, batch: int | None = None,
            context: int | None = None, seq_len: int | None = None, calibrated: bool = False, tp: int = 1,
            ep: int = 1, pp: int = 1, **options: Any) -> StepResult:
    """Every op of one step on ``gpu``'s roofline: ``workload`` a phase (decode, prefill, attention) or a
    workload YAML; ``options`` those of :func:`step_options` (model, dtypes, attention, fuse …)."""
    from .specs.scenario import resolve_workload

    w = resolve_workload(workload, batch=batch, context=context, seq_len=seq_len, **step_options(**options))
    return _place(w, gpu, calibrated, tp, ep, pp)


def analyze_step(*, seqs: Sequence[Seqs | str], gpu: str | GPU = DEFAULT_GPU, calibrated: bool = False,
                 tp: int = 1, ep: int = 1, pp: int = 1, **options: Any) -> StepResult:
    """A step made of groups of sequences (``Seqs(count, new, cached)`` or ``"16x1@4095"``): a decode or prefill
    step where the groups make one (the same numbers as :func:`analyze`), else a mixed step."""
    from .errors import UserError
    from .specs.scenario import resolve_step

    groups = tuple(Seqs.parse(g) if isinstance(g, str) else g for g in seqs)
    if not groups:
        raise UserError("a step needs at least one group of sequences (--seqs COUNTxNEW[@CACHED])")
    w = resolve_step(groups, **step_options(**options))
    return _place(w, gpu, calibrated, tp, ep, pp)


def base_workload(**options: Any) -> Workload:
    """The serving commands' model and step options (:func:`step_options`) as a one-token prefill: a request's
    steps are this with their own sizes (``engine.generate.step_workload``)."""
    from .specs.scenario import resolve_workload

    return resolve_workload("prefill", batch=1, seq_len=1, **step_options(**options))


def step_analyzer(g: GPU, calibrated: bool, tp: int = 1, ep: int = 1, pp: int = 1) -> StepAnalyzer:
    """Each step of a request placed under ``g``'s roofs, on one GPU of the layout (engine.parallel)."""
    from .engine.parallel import Layout, check_interconnect
    from .engine.roofline import analyze as place_step

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
    from .engine.choice import StaticServer
    from .engine.memory import reserve_bytes
    from .engine.parallel import Layout
    from .errors import UserError
    from .serving.batch import BatchServer, Method
    from .serving.scheduler import SchedulerConfig
    from .specs.stack import load_stack

    if max_num_batched_tokens is not None and not chunked_prefill:
        raise UserError("--max-num-batched-tokens with --no-chunked-prefill: without chunked prefill one step "
                        "holds the whole batch's prompts; the budget is chunked prefill's")
    budget = SchedulerConfig.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
    method = Method(load_stack(stack), chunked_prefill, budget)
    if not method.static and options.get("fuse") is None:
        options = {**options, "fuse": list(method.stack.fused)}
    base = base_workload(**options)
    analyze_one = step_analyzer(g, calibrated, tp, ep, pp)
    reserve = reserve_bytes(g.capacity_bytes, reserve_gib)
    if method.static:
        return StaticServer(base, prompt, output, analyze_one, reserve, tp * ep * pp), base, method
    return (BatchServer(base, g, prompt, output, reserve, method, analyze_one, calibrated, Layout(tp, ep, pp)), base,
            method)


def generate(*, gpu: str | GPU = DEFAULT_GPU, prompt: int = 2048, output: int = 256, batch: int = 1,
             reserve_gib: float | None = None, calibrated: bool = False, tp: int = 1, ep: int = 1, pp: int = 1,
             stack: str = "roofline", chunked_prefill: bool = True, max_num_batched_tokens: int | None = None,
             **options: Any) -> GenerateResult:
    """``batch`` requests of ``prompt`` tokens and ``output`` new tokens arriving at once, with no request after
    them: TTFT, TPOT, latency, tokens/s and memory. With ``chunked_prefill`` (the default) the serving simulation
    runs them (a closed batch: ``analyze serve --concurrency B`` with B requests and no refills), prompts in chunks
    of ``max_num_batched_tokens`` (default 8,192) beside the decodes, on ``stack``; with ``chunked_prefill=False``
    and the ``roofline`` stack, the static batch: every prompt in one prefill step, then the decode steps. A batch
    that does not fit is a UserError naming the largest that does."""
    from .engine.generate import Request, check_request
    from .errors import UserError
    from .render.generate import memory_sum
    from .serving.batch import BatchServer

    g = _gpu(gpu)
    server, base, _ = _server(g, prompt, output, reserve_gib, calibrated, tp, ep, pp, stack, chunked_prefill,
                              max_num_batched_tokens, options)
    request = Request(prompt, output, batch)
    check_request(base, request)
    memory = server.budget(batch)
    block = server.method.block_size if isinstance(server, BatchServer) and server.method.chunked_prefill else None
    if not memory.fits:
        where = g.id if tp * ep * pp == 1 else f"{g.id} at --tp {tp} --ep {ep} --pp {pp} (per GPU)"
        raise UserError(f"batch {batch:,} does not fit on {where}: "
                        f"{memory_sum(memory, batch, request.longest_context, block)}; "
                        f"largest batch that fits: "
                        f"{server.largest():,} (--reserve-gib sets the reserve)")
    return GenerateResult(server.serve(batch), server.largest())


def compare(*, gpus: Sequence[str | GPU] = (DEFAULT_GPU,), prompt: int = 2048, output: int = 256,
            batch: int | None = None, tpot_ms: float | None = None, reserve_gib: float | None = None,
            calibrated: bool = False, tp: Sequence[int] = (1,), ep: int = 1, pp: int = 1, stack: str = "roofline",
            chunked_prefill: bool = True, max_num_batched_tokens: int | None = None,
            **options: Any) -> CompareResult:
    """One request on each GPU of ``gpus`` (and each TP degree of ``tp``): at ``batch``, at the largest batch
    whose mean TPOT is at most ``tpot_ms``, or at the largest batch that fits; each batch served as
    :func:`generate` serves it (``stack``, ``chunked_prefill``, ``max_num_batched_tokens``)."""
    from .engine.choice import choose_batch
    from .engine.parallel import Layout
    from .errors import UserError

    if tpot_ms is not None and not tpot_ms > 0:
        raise UserError(f"--tpot-ms {tpot_ms}: give a positive number of milliseconds")
    choices, names = [], []
    base = None
    for spec in gpus:
        g = _gpu(spec)
        for t in tp:
            label = layout_label(g.id, t, ep, pp, several=len(tp) > 1)
            server, base, method = _server(g, prompt, output, reserve_gib, calibrated, t, ep, pp, stack,
                                           chunked_prefill, max_num_batched_tokens, options)
            choices.append(choose_batch(server, base, prompt, output, label, batch,
                                        None if tpot_ms is None else tpot_ms / 1e3, layout=Layout(t, ep, pp)))
            names.append(g.name)
    assert base is not None
    return CompareResult(tuple(choices), tuple(names), prompt, output, base.model.id, base.types_label(), method)


def curves(*, gpus: Sequence[str | GPU] = (DEFAULT_GPU,), prompt: int = 2048, output: int = 256,
           reserve_gib: float | None = None, calibrated: bool = False, tp: Sequence[int] = (1,), ep: int = 1,
           pp: int = 1, stack: str = "roofline", chunked_prefill: bool = True,
           max_num_batched_tokens: int | None = None, **options: Any) -> tuple[list[Curve], Workload, Method]:
    """``plot pareto``'s curves: on each GPU of ``gpus`` and TP degree of ``tp``, the request served as
    :func:`generate` serves it at batch 1, 2, 4, … and the largest that fits; and the step options they ran."""
    from .engine.choice import check_curve_output, serve_curve
    from .engine.parallel import Layout

    check_curve_output(output)
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


@dataclass(frozen=True)
class ServeResult:
    """A simulated serving run (``analyze serve``): the :class:`serving.simulate.Simulation`."""

    simulation: Simulation

    @property
    def run(self) -> Run:
        return self.simulation.run

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from .render.serve import serve_json

        return serve_json(self.simulation)

    def to_pandas(self) -> Any:
        """One row a request: arrival, lengths, TTFT, TPOT, E2E, preemptions (seconds)."""
        return _frame([{"id": s.request.id, "arrival_s": s.request.arrival_s, "prompt": s.request.prompt,
                        "output": s.request.output, "ttft_s": s.ttft_s, "tpot_s": s.tpot_s, "e2e_s": s.e2e_s,
                        "preemptions": s.preemptions} for s in self.run.served])


def _positive_ms(value: float | None, what: str) -> float | None:
    from .errors import UserError

    if value is None:
        return None
    if not value > 0 or value != value or value == float("inf"):
        raise UserError(f"{what} {value}: give a positive number of milliseconds")
    return value / 1e3


def serve(*, gpu: str | GPU = DEFAULT_GPU, concurrency: int | None = None, rate: float | None = None,
          trace: str | None = None, prompt: int | str = 2048, output: int | str = 256, requests: int | None = None,
          seed: int = 0, max_num_batched_tokens: int = 8192, max_num_seqs: int = 256, chunked_prefill: bool = True,
          block_size: int = 16, reserve_gib: float | None = None, stack: str = "roofline",
          slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None, calibrated: bool = False,
          tp: int = 1, ep: int = 1, pp: int = 1, progress: Any = None, spec: str | None = None,
          accept: str | float | None = None, shared_prefix: int | None = None,
          price_per_gpu_hour: float | None = None, **options: Any) -> ServeResult:
    """A serving engine simulated step by step on ``gpu``: ``concurrency`` clients in a closed loop (the
    default, 1), Poisson arrivals at ``rate`` requests/s, or a ``trace`` file; ``prompt`` and ``output`` lengths
    fixed or drawn (``"uniform:256-1024"``, ``"normal:512,128"``); the scheduler's limits as vLLM names them;
    ``stack`` the serving stack's costs (an id of ``stacks/`` or a YAML path; its fusions unless ``fuse`` is given).
    ``requests``: by default max(200, 8 × concurrency), so that the p99 rests on at least two samples above it.
    ``progress`` is called with the count of finished requests. ``spec``: speculative decoding, ``draft:MODEL:K``,
    ``mtp:K`` or ``ngram:K``, with ``accept`` the chance each draft is accepted (``0.7``, or per position
    ``"0.8,0.6,0.4"``); the run is then also simulated without it, for the speed-up. ``shared_prefix``: every
    prompt's first tokens are one prefix, cached once its first request has computed them (a trace's ``prefix``
    field gives each request's). ``price_per_gpu_hour``: dollars per million input and output tokens
    (``serving.cost``); joules per output token come from the GPU file's board power where it has one."""
    from .engine.memory import reserve_bytes
    from .engine.parallel import Layout
    from .errors import UserError
    from .serving.cost import run_costs
    from .serving.kvcache import BlockPool
    from .serving.load import Lengths, closed_loop, open_loop, read_trace, with_shared_prefix
    from .serving.scheduler import SchedulerConfig
    from .serving.simulate import Simulation, compared, simulate
    from .serving.speculation import speculate
    from .serving.stepmodel import StepModel, kv_capacity
    from .specs.stack import load_stack

    given = [name for name, v in (("--concurrency", concurrency), ("--rate", rate), ("--trace", trace))
             if v is not None]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)}: give one load (a closed loop, an open loop or a trace)")
    if ep > 1:
        raise UserError("--ep in analyze serve: expert parallelism's data-parallel attention is not simulated yet; "
                        "use --tp")
    slo_ttft, slo_tpot = _positive_ms(slo_ttft_ms, "--slo-ttft-ms"), _positive_ms(slo_tpot_ms, "--slo-tpot-ms")
    prompt_len = Lengths.parse(str(prompt), "--prompt")
    output_len = Lengths.parse(str(output), "--output")
    if trace is not None:
        if requests is not None:
            raise UserError("--requests with --trace: the trace's requests are the run's")
        load = read_trace(trace)
    elif rate is not None:
        load = open_loop(rate, 200 if requests is None else requests, prompt_len, output_len, seed)
    else:
        c = 1 if concurrency is None else concurrency
        load = closed_loop(c, max(200, 8 * c) if requests is None else requests, prompt_len, output_len, seed)
    if shared_prefix is not None:
        load = with_shared_prefix(load, shared_prefix)
    config = SchedulerConfig(max_num_batched_tokens, max_num_seqs, chunked_prefill)
    BlockPool.check_block_size(block_size)
    g = _gpu(gpu)
    layout = Layout(tp, ep, pp)
    costs = load_stack(stack)
    if options.get("fuse") is None:
        options = {**options, "fuse": list(costs.fused)}
    step_model = StepModel(base_workload(**options), g, calibrated, layout, costs)
    capacity = kv_capacity(step_model, max_num_batched_tokens, block_size, reserve_bytes(g.capacity_bytes,
                                                                                          reserve_gib))
    limit = step_model.base.model.max_length()
    longest = max(load.requests, key=lambda r: r.prompt + r.output)
    if limit is not None and longest.prompt + longest.output - 1 > limit[0]:
        raise UserError(f"a request of {longest.prompt:,} prompt and {longest.output:,} output tokens needs "
                        f"{longest.prompt + longest.output - 1:,} positions; model {step_model.base.model.id}'s "
                        f"{limit[1]} is {limit[0]:,}")
    speculation, spec_capacity = None, capacity
    if spec is not None:
        speculation, spec_capacity = speculate(spec, accept, step_model, capacity, max_num_batched_tokens, block_size,
                                               reserve_bytes(g.capacity_bytes, reserve_gib),
                                               lambda draft: base_workload(**{**options, "model": draft}))
    elif accept is not None:
        raise UserError("--accept without --spec: give the drafter (--spec draft:MODEL:K, mtp:K or ngram:K)")
    run = simulate(load, step_model, BlockPool(spec_capacity.blocks, block_size), config, progress, speculation,
                   seed)
    outcome = None
    if speculation is not None:
        plain_model = StepModel(step_model.base, g, calibrated, layout, costs)
        plain = simulate(load, plain_model, BlockPool(capacity.blocks, block_size), config)
        outcome = compared(speculation, run, plain, plain_model, load, config)
    texts = ("trace", "trace") if trace is not None else (prompt_len.text(), output_len.text())
    spent = run_costs(run.duration_s, run.busy_s, run.prefill_time_s, sum(s.request.prompt for s in run.served),
                      run.output_tokens, layout.gpus, price_per_gpu_hour, None if g.power is None else g.power.board_w)
    return ServeResult(Simulation(run, g, step_model.base, layout, calibrated, load, config, spec_capacity, costs,
                                  texts[0], texts[1], seed, slo_ttft, slo_tpot, outcome, spent))

