"""``rl.serve``: a serving engine simulated step by step (``analyze serve``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..serving import defaults
from .common import DEFAULT_GPU, _frame, _gpu, base_workload, check_numbers, name_arg, seconds_of_ms, shown

if TYPE_CHECKING:
    from ..serving.metrics import Run, Simulation
    from ..specs.hardware import GPU


@dataclass(frozen=True)
class ServeResult:
    """A simulated serving run (``analyze serve``): the :class:`serving.metrics.Simulation`."""

    simulation: Simulation

    @property
    def run(self) -> Run:
        return self.simulation.run

    def to_dict(self) -> dict[str, Any]:
        """The command's ``--json``."""
        from ..render.serve import serve_json

        return serve_json(self.simulation)

    def to_pandas(self) -> Any:
        """One row a request: arrival, lengths, TTFT, TPOT, E2E, preemptions (seconds)."""
        return _frame([{"id": s.request.id, "arrival_s": s.request.arrival_s, "prompt": s.request.prompt,
                        "output": s.request.output, "ttft_s": s.ttft_s, "tpot_s": s.tpot_s, "e2e_s": s.e2e_s,
                        "preemptions": s.preemptions} for s in self.run.served])

def _given(value: int | None, default: int) -> int:
    """An option's value where given (0 included: it is refused, not taken for the default), else the default."""
    return default if value is None else value


def _check_sides(disagg: object, kv_transfer: str, prefill_tp: int | None, prefill_ep: int | None,
                 decode_tp: int | None, decode_ep: int | None, prefill_tokens: int | None,
                 prefill_seqs: int | None) -> None:
    """The options of ``--disagg``'s two sides: each in range where given, and none without ``--disagg`` (an option
    that would change nothing is refused rather than ignored; ``--kv-transfer`` past its default the same)."""
    from ..engine.parallel import check_degree
    from ..errors import UserError
    from ..serving.scheduler import MAX_BATCHED_TOKENS, MAX_SEQS, check_limit
    from ..serving.transfer import check_mode

    check_mode(kv_transfer)
    degrees = {"--prefill-tp": prefill_tp, "--prefill-ep": prefill_ep, "--decode-tp": decode_tp,
               "--decode-ep": decode_ep}
    limits = {"--prefill-max-num-batched-tokens": (prefill_tokens, MAX_BATCHED_TOKENS),
              "--prefill-max-num-seqs": (prefill_seqs, MAX_SEQS)}
    if disagg is None:
        given = [flag for flag, v in degrees.items() if v is not None]
        given += [flag for flag, (v, _) in limits.items() if v is not None]
        given += ["--kv-transfer"] if kv_transfer != "after" else []
        if given:
            raise UserError(f"{', '.join(given)}: the sides of a disaggregated deployment; give --disagg P:D")
        return
    for flag, degree in degrees.items():
        if degree is not None:
            check_degree(flag, degree)
    for flag, (limit, most) in limits.items():
        if limit is not None:
            check_limit(flag, limit, most)


def serve(*, gpu: str | os.PathLike[str] | GPU = DEFAULT_GPU, concurrency: int | None = None,
          rate: float | None = None, trace: str | os.PathLike[str] | None = None, prompt: int | str | None = None,
          output: int | str | None = None, requests: int | None = None, seed: int = 0,
          max_num_batched_tokens: int | None = None, max_num_seqs: int = defaults.MAX_NUM_SEQS,
          chunked_prefill: bool = True, block_size: int = defaults.BLOCK_SIZE, reserve_gib: float | None = None, stack: str = "roofline",
          slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None, calibrated: bool = False,
          tp: int = 1, ep: int = 1, pp: int = 1, progress: Any = None, spec: str | None = None,
          accept: str | float | None = None, shared_prefix: int | None = None,
          price_per_gpu_hour: float | None = None, disagg: str | tuple[int, int] | None = None, replicas: int = 1,
          prefill_tp: int | None = None, prefill_ep: int | None = None, decode_tp: int | None = None,
          decode_ep: int | None = None, prefill_max_num_batched_tokens: int | None = None,
          prefill_max_num_seqs: int | None = None, kv_transfer: str = "after", prefill_steps: str | None = None,
          **options: Any) -> ServeResult:
    """A serving engine simulated step by step on ``gpu``: ``concurrency`` clients in a closed loop (the
    default, 1), Poisson arrivals at ``rate`` requests/s, or a ``trace`` file; ``prompt`` and ``output`` lengths
    fixed or drawn (``"uniform:256-1024"``, ``"normal:512,128"``; by default 2,048 and 256, and none with a trace,
    whose requests give theirs); the scheduler's limits as vLLM names them;
    ``stack`` the serving stack's costs (an id of ``stacks/`` or a YAML path; its fusions unless ``fuse`` is given).
    ``requests``: by default 200 under a rate, and max(200, 8 × concurrency) in a closed loop, at most
    ``MAX_REQUESTS``, so that the p99 rests on at least two samples above it.
    ``progress`` is called with the count of finished requests. ``spec``: speculative decoding, ``draft:MODEL:K``,
    ``mtp:K`` or ``ngram:K``, with ``accept`` the chance each draft is accepted (``0.7``, or per position
    ``"0.8,0.6,0.4"``); the run is then also simulated without it, for the speed-up. ``shared_prefix``: every
    prompt's first tokens are one prefix, cached once its first request has computed them (a trace's ``prefix``
    field gives each request's). ``price_per_gpu_hour``: dollars per million input and output tokens
    (``serving.cost``); joules per output token come from the GPU file's board power where it has one.
    ``ep`` with ``tp`` 1: expert parallelism with data-parallel attention, ``ep`` ranks each with its own
    scheduler and KV cache, stepping in lockstep at the pace of the most expensive (``serving.ranks``).
    ``replicas``: that many copies of the model, each an engine, requests routed to the least loaded;
    ``disagg=(P, D)`` (or ``"P:D"``): P prefill replicas (``prefill_tp``, ``prefill_ep`` and their own token budget
    ``prefill_max_num_batched_tokens`` and sequence limit ``prefill_max_num_seqs``, by default ``tp``, ``ep`` and
    the scheduler's) and D decode
    replicas (``decode_tp``, ``decode_ep``), each request's KV cache moved between them ``kv_transfer`` ``"after"``
    its prefill or ``"overlap"``-ped with it layer by layer (``serving.replicas``, ``serving.transfer``).
    ``prefill_steps``: ``"mixed"`` (prefill chunks beside the decodes) or ``"separate"`` (steps of prompts apart
    from steps of decodes, prompts first), by default the stack's (``serving.scheduler``);
    ``max_num_batched_tokens`` by default the stack's, else 8,192."""
    from ..engine.memory import reserve_bytes
    from ..engine.parallel import Layout
    from ..errors import UserError
    from ..serving.capacity import kv_capacity
    from ..serving.cost import run_costs
    from ..serving.kvcache import BlockPool
    from ..serving.load import MAX_REQUESTS, Lengths, closed_loop, open_loop, read_trace, with_shared_prefix
    from ..serving.metrics import Simulation
    from ..serving.ranks import RankModel, serve_ranks
    from ..serving.scheduler import SchedulerConfig
    from ..serving.simulate import compared, simulate
    from ..serving.speculation import speculate
    from ..serving.stepmodel import StepModel
    from ..specs.stack import load_stack

    check_numbers(dict(concurrency=concurrency, requests=requests, seed=seed,
                       max_num_batched_tokens=max_num_batched_tokens,
                       max_num_seqs=max_num_seqs, block_size=block_size, tp=tp, ep=ep, pp=pp, replicas=replicas,
                       shared_prefix=shared_prefix, prefill_tp=prefill_tp, prefill_ep=prefill_ep, decode_tp=decode_tp,
                       decode_ep=decode_ep, prefill_max_num_batched_tokens=prefill_max_num_batched_tokens,
                       prefill_max_num_seqs=prefill_max_num_seqs),
                  dict(rate=rate, reserve_gib=reserve_gib, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
                       price_per_gpu_hour=price_per_gpu_hour),
                  dict(chunked_prefill=chunked_prefill, calibrated=calibrated),
                  required=("seed", "max_num_seqs", "block_size", "tp", "ep", "pp", "replicas", "chunked_prefill",
                            "calibrated"))
    if trace is not None:
        trace = name_arg(trace, "trace")
    if spec is not None and not isinstance(spec, str):
        raise UserError(f"spec: give 'draft:MODEL:K', 'mtp:K' or 'ngram:K', not {shown(spec)} "
                        f"({type(spec).__name__})")
    if accept is not None and (isinstance(accept, bool) or not isinstance(accept, (str, int, float))):
        raise UserError(f"accept: give a chance (0.7) or one a position ('0.8,0.6'), not {shown(accept)} "
                        f"({type(accept).__name__})")
    if progress is not None and not callable(progress):
        raise UserError(f"progress: give a function of the finished requests' count, not {shown(progress)} "
                        f"({type(progress).__name__})")
    _check_sides(disagg, kv_transfer, prefill_tp, prefill_ep, decode_tp, decode_ep, prefill_max_num_batched_tokens,
                 prefill_max_num_seqs)
    given = [name for name, v in (("--concurrency", concurrency), ("--rate", rate), ("--trace", trace))
             if v is not None]
    if len(given) > 1:
        raise UserError(f"{' and '.join(given)}: give one load (a closed loop, an open loop or a trace)")
    layout = Layout(tp, ep, pp)
    if layout.dp_attention and (replicas != 1 or spec is not None or accept is not None):
        raise UserError(f"--ep {ep} alone with {'--replicas' if replicas != 1 else '--spec or --accept'}: "
                        f"data-parallel attention is simulated on one deployment without speculation")
    slo_ttft, slo_tpot = seconds_of_ms(slo_ttft_ms, "--slo-ttft-ms"), seconds_of_ms(slo_tpot_ms, "--slo-tpot-ms")
    if trace is not None and (prompt is not None or output is not None):
        raise UserError("--prompt or --output with --trace: the trace gives each request's lengths")
    prompt_len = Lengths.parse(str(defaults.PROMPT if prompt is None else prompt), "--prompt")
    output_len = Lengths.parse(str(defaults.OUTPUT if output is None else output), "--output")
    if trace is not None:
        if requests is not None:
            raise UserError("--requests with --trace: the trace's requests are the run's")
        load = read_trace(trace)
    elif rate is not None:
        load = open_loop(rate, defaults.REQUESTS if requests is None else requests, prompt_len, output_len, seed)
    else:
        c = 1 if concurrency is None else concurrency
        default = min(max(defaults.REQUESTS, defaults.REQUESTS_PER_CLIENT * c), MAX_REQUESTS)
        load = closed_loop(c, default if requests is None else requests, prompt_len, output_len, seed)
    if shared_prefix is not None:
        load = with_shared_prefix(load, shared_prefix)
    BlockPool.check_block_size(block_size)
    g = _gpu(gpu)
    costs = load_stack(name_arg(stack, "stack"), g.compute_capability)
    config = SchedulerConfig.on(costs, max_num_batched_tokens, max_num_seqs, chunked_prefill, prefill_steps)
    max_num_batched_tokens = config.max_num_batched_tokens
    if options.get("fuse") is None:
        options = {**options, "fuse": list(costs.fused)}
    step_model = (RankModel if layout.dp_attention else StepModel)(base_workload(**options), g, calibrated, layout,
                                                                   costs)
    limit = step_model.base.model.max_length()
    longest = max(load.requests, key=lambda r: r.prompt + r.output)
    if limit is not None and longest.prompt + longest.output - 1 > limit[0]:
        raise UserError(f"a request of {longest.prompt:,} prompt and {longest.output:,} output tokens needs "
                        f"{longest.prompt + longest.output - 1:,} positions; model {step_model.base.model.id}'s "
                        f"{limit[1]} is {limit[0]:,}")
    if disagg is not None or replicas != 1:
        if spec is not None or accept is not None or any(r.prefix_id is not None for r in load.requests):
            raise UserError("--spec, --accept and prefixes with --disagg or --replicas: not simulated on several "
                            "replicas; give one engine")
        return _deployed(load, step_model, disagg, replicas, config, block_size, reserve_bytes(
            g.capacity_bytes, reserve_gib),
            (_given(prefill_tp, tp), _given(prefill_ep, ep), _given(decode_tp, tp), _given(decode_ep, ep), pp),
            (prefill_max_num_batched_tokens, prefill_max_num_seqs), kv_transfer, progress, price_per_gpu_hour,
            (prompt_len.text(), output_len.text()) if trace is None else ("trace", "trace"), seed, slo_ttft, slo_tpot)
    capacity = kv_capacity(step_model, max_num_batched_tokens, block_size, reserve_bytes(g.capacity_bytes,
                                                                                          reserve_gib))
    speculation, spec_capacity, ranks = None, capacity, None
    if layout.dp_attention:
        run, ranks = serve_ranks(load, step_model, capacity, config, block_size, progress)
    elif spec is not None:
        speculation, spec_capacity = speculate(spec, accept, step_model, capacity, max_num_batched_tokens, block_size,
                                               reserve_bytes(g.capacity_bytes, reserve_gib),
                                               lambda draft: base_workload(**{**options, "model": draft}))
    elif accept is not None:
        raise UserError("--accept without --spec: give the drafter (--spec draft:MODEL:K, mtp:K or ngram:K)")
    if ranks is None:
        run = simulate(load, step_model, spec_capacity.pool(block_size),
                       config, progress, speculation, seed)
    outcome = None
    if speculation is not None:
        plain_model = StepModel(step_model.base, g, calibrated, layout, costs)
        plain = simulate(load, plain_model, capacity.pool(block_size), config)
        outcome = compared(speculation, run, plain, plain_model, load, config)
    texts = ("trace", "trace") if trace is not None else (prompt_len.text(), output_len.text())
    spent = run_costs(run.duration_s, run.busy_s, run.prefill_time_s, sum(s.request.prompt for s in run.served),
                      run.output_tokens, layout.gpus, price_per_gpu_hour, None if g.power is None else g.power.board_w)
    return ServeResult(Simulation(run, g, step_model.base, layout, calibrated, load, config, spec_capacity, costs,
                                  texts[0], texts[1], seed, slo_ttft, slo_tpot, outcome, spent, None, ranks))


def _serial(layout: Any, flag: str) -> None:
    """A layout a disaggregated side simulates: expert parallelism only with tensor parallelism on the same
    GPUs."""
    from ..errors import UserError

    if layout.dp_attention:
        raise UserError(f"{flag} {layout.ep} alone in analyze serve: expert parallelism's data-parallel attention is "
                        f"not simulated yet; give --tp {layout.ep} with it (the experts spread over the TP GPUs)")


def _check_sides_fit(load: Any, prefill: tuple[int, Any, Any], decode: tuple[int, Any, Any], block_size: int) -> None:
    """A disaggregated deployment whose prefill replicas cannot hold the longest prompt, or whose decode replicas
    the longest request (its prompt and output but the last token; none with one output token, which ends at its
    prefill), is refused in one line naming each side that does not fit, its replicas and GPUs, and the sum that
    overflows one of its GPUs (each ``Capacity`` is one GPU's)."""
    from ..errors import UserError
    from ..units import plural

    decoding = [r for r in load.requests if r.output > 1]
    longest_prompt = max(r.prompt for r in load.requests)
    longest = max(decoding, key=lambda r: r.prompt + r.output, default=None)
    needs = {"prefill": (longest_prompt, f"a prompt of {longest_prompt:,} tokens"),
             "decode": (0, "one KV block") if longest is None else (
                 longest.prompt + longest.output - 1,
                 f"a request of {longest.prompt:,} prompt and {longest.output:,} output tokens")}
    short = []
    for role, (count, layout, capacity) in (("prefill", prefill), ("decode", decode)):
        positions, what = needs[role]
        overflow = capacity.overflow(positions, block_size)
        if overflow is not None:
            short.append((role, f"the {role} side ({plural(count, f'{role} replica')} of {layout.label()}, "
                                f"{plural(count * layout.gpus, 'GPU')}) cannot hold {what}: each GPU needs "
                                f"{overflow}"))
    if short:
        p, d = prefill[0], decode[0]
        raise UserError(f"--disagg {p}:{d}: {'; '.join(why for _, why in short)}; give a larger "
                        f"{' and '.join(f'--{role}-tp' for role, _ in short)}")


def _deployed(load: Any, model: Any, disagg: str | tuple[int, int] | None, replicas: int,
              config: Any, block_size: int, reserve: float, degrees: tuple[int, int, int, int, int],
              prefill_limits: tuple[int | None, int | None], kv_transfer: str, progress: Any, price: float | None,
              texts: tuple[str, str], seed: int, slo_ttft: float | None, slo_tpot: float | None) -> ServeResult:
    """``serve`` on several replicas: aggregated copies of ``model``, or prefill and decode replicas apart."""
    from ..engine.parallel import Layout
    from ..errors import UserError
    from ..serving.capacity import kv_capacity
    from ..serving.metrics import Simulation
    from ..serving.replicas import check_replicas, deployment_costs, parse_disagg, serve_replicas, side
    from ..serving.scheduler import SchedulerConfig
    from ..serving.stepmodel import StepModel
    from ..serving.transfer import KvTransfer, kv_link

    g, base, stack = model.gpu, model.base, model.stack
    if disagg is None:
        check_replicas(replicas)
        decode_model, decode_capacity = model, kv_capacity(model, config.max_num_batched_tokens, block_size, reserve)
        sides = [side("aggregated", replicas, model, decode_capacity, config, block_size)]
        transfer = None
    else:
        if replicas != 1:
            raise UserError("--replicas with --disagg: give the prefill and decode replicas as --disagg P:D")
        p, d = parse_disagg(disagg)
        ptp, pep, dtp, dep, pp = degrees
        prefill_layout, decode_layout = Layout(ptp, pep, pp), Layout(dtp, dep, pp)
        _serial(prefill_layout, "--prefill-ep")
        _serial(decode_layout, "--decode-ep")
        prefill_config = SchedulerConfig(_given(prefill_limits[0], config.max_num_batched_tokens),
                                         _given(prefill_limits[1], config.max_num_seqs), config.chunked_prefill,
                                         config.mixed)
        prefill_model = StepModel(base, g, model.calibrated, prefill_layout, stack)
        decode_model = StepModel(base, g, model.calibrated, decode_layout, stack)
        prefill_capacity = kv_capacity(prefill_model, prefill_config.max_num_batched_tokens, block_size, reserve)
        decode_capacity = kv_capacity(decode_model, config.max_num_batched_tokens, block_size, reserve)
        _check_sides_fit(load, (p, prefill_layout, prefill_capacity), (d, decode_layout, decode_capacity), block_size)
        gpus = p * prefill_layout.gpus + d * decode_layout.gpus
        transfer = KvTransfer(base, prefill_layout, decode_layout, kv_link(g, gpus), kv_transfer)  # type: ignore[arg-type]
        sides = [side("prefill", p, prefill_model, prefill_capacity, prefill_config, block_size),
                 side("decode", d, decode_model, decode_capacity, config, block_size)]
    deployment = serve_replicas(load, sides, transfer, stack, progress)
    run = deployment.run
    spent = deployment_costs(deployment, sum(s.request.prompt for s in run.served), price,
                             None if g.power is None else g.power.board_w)
    return ServeResult(Simulation(run, g, base, decode_model.layout, model.calibrated, load, config, decode_capacity,
                                  stack, texts[0], texts[1], seed, slo_ttft, slo_tpot, None, spent, deployment))
