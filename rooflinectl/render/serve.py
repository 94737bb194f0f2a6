"""``analyze serve``: a simulated run as a table of latency percentiles and throughput, and as JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console
from rich.table import Table

from ..units import duration, gib, number, plural, si
from .deployment import deployment_json, deployment_lines
from .deployment import label as deployment_label

if TYPE_CHECKING:
    from ..serving.metrics import Simulation, Stats

METRICS = (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "E2E"))


def _stats(s: Stats | None) -> dict[str, float] | None:
    return None if s is None else {"mean": s.mean, "p50": s.p50, "p90": s.p90, "p99": s.p99}


def serve_json(r: Simulation) -> dict[str, Any]:
    """The one ``--json`` shape of ``analyze serve`` (docs/serving.md lists every key)."""
    run, cap, w = r.run, r.capacity, r.base
    load = r.load
    return {
        "hardware": {"id": r.gpu.id, "name": r.gpu.name, "roofs": r.gpu.roofs(r.calibrated).label},
        "workload": {"model": w.model.id, "dtype": w.dtype, "kv_dtype": w.kv_dtype, "weight_dtype": w.weights,
                     "act_dtype": w.matmul_dtype, "attention": w.attention, "fused": list(w.fused)},
        "layout": {"tp": r.layout.tp, "ep": r.layout.ep, "pp": r.layout.pp, "gpus": r.layout.gpus},
        "load": {"kind": load.kind, "concurrency": load.concurrency or None, "rate": load.rate or None,
                 "requests": len(load.requests), "prompt": r.prompt_text, "output": r.output_text, "seed": r.seed},
        "scheduler": {"max_num_batched_tokens": r.config.max_num_batched_tokens,
                      "max_num_seqs": r.config.max_num_seqs, "chunked_prefill": r.config.chunked_prefill,
                      "prefill_steps": "mixed" if r.config.mixed else "separate"},
        "stack": r.stack.model_dump(exclude={"notes", "name", "families"}),
        "kv_cache": {"blocks": run.kv_blocks, "block_size": run.block_size, "block_bytes": cap.block_bytes,
                     "peak_blocks": run.kv_blocks_peak, "capacity_bytes": cap.capacity_bytes,
                     "weight_bytes": cap.weight_bytes, "activation_bytes": cap.activation_bytes,
                     "reserve_bytes": cap.reserve_bytes,
                     "parts": [{"blocks": n, "window": window, "chunk": chunk} for n, window, chunk in cap.parts]},
        "ttft_s": _stats(run.ttft),
        "tpot_s": _stats(run.tpot),
        "itl_s": _stats(run.itl),
        "e2e_s": _stats(run.e2e),
        "throughput": {
            "duration_s": run.duration_s,
            "requests_per_s": len(run.served) / run.duration_s,
            "output_tokens_per_s": run.output_tokens / run.duration_s,
            "output_tokens_per_s_per_gpu": run.output_tokens / run.duration_s / r.gpus,
            **({"goodput_requests_per_s": r.goodput / run.duration_s,
                "slo_ttft_s": r.slo_ttft_s, "slo_tpot_s": r.slo_tpot_s} if r.slos else {}),
        },
        "steps": {"count": run.steps, "prefill_steps": run.prefill_steps,
                  "prefill_time_share": run.prefill_time_s / _busy(r),
                  "max_tokens": run.max_tokens_in_step, "preemptions": run.preemptions},
        "timeline": [{"time_s": p.time_s, "sequences": p.sequences, "tokens": p.tokens, "kv_blocks": p.kv_blocks}
                     for p in run.timeline],
        "speculation": _speculation_json(r),
        "prefix_cache": _prefix_json(r),
        "cost": _cost_json(r),
        "deployment": deployment_json(r),
        "data_parallel_attention": _ranks_json(r),
    }


def _ranks_json(r: Simulation) -> dict[str, Any] | None:
    """Data-parallel attention's ranks (``serving.ranks``), None without: each rank's KV blocks, and per rank its
    requests, its peak of blocks in use and its preemptions."""
    k = r.ranks
    if k is None:
        return None
    return {"ranks": len(k.requests), "routing": "least loaded", "kv_blocks_per_rank": r.capacity.blocks,
            "requests": list(k.requests), "kv_peak_blocks": list(k.kv_blocks_peak), "preemptions": list(k.preemptions)}


def _parts_text(parts: tuple[tuple[int, int | None, int | None], ...]) -> str:
    """What a block holds where it is not every layer's: the blocks a sequence takes in each kind of layer."""
    if len(parts) == 1 and parts[0] == (1, None, None):
        return ""
    words = [f"{n} for each block of its last {window:,} positions in the sliding layers" if window is not None
             else f"{n} for each block of its current chunk of {chunk:,} in the chunked layers" if chunk is not None
             else f"{n} for each block of its positions in the full layers" for n, window, chunk in parts]
    return "; a sequence takes " + " and ".join(words)


def _busy(r: Simulation) -> float:
    """The time the steps' shares are of: the steps' times summed (on several replicas, theirs), the run's
    duration less its idle gaps, as the cost split's (``serving.cost``); a run without steps has none."""
    return r.run.busy_s or 1.0


def _cost_json(r: Simulation) -> dict[str, Any]:
    c = r.costs
    assert c is not None
    return {"price_per_gpu_hour": c.price_per_gpu_hour, "usd_per_million_input_tokens": c.usd_per_million_input,
            "usd_per_million_output_tokens": c.usd_per_million_output,
            "usd_per_million_output_tokens_all_on_output": c.usd_per_million_output_all_on_output,
            "board_w": c.board_w, "joules_per_output_token": c.joules_per_output_token, "busy_s": c.busy_s,
            "input_tokens": c.input_tokens}


def _prefix_json(r: Simulation) -> dict[str, Any] | None:
    """Prefix caching's figures, None where no request has a prefix."""
    run = r.run
    if not any(q.prefix_id is not None for q in r.load.requests):
        return None
    return {"lookups": run.prefix_lookups, "hits": run.prefix_hits,
            "hit_rate": run.prefix_hits / run.prefix_lookups if run.prefix_lookups else 0.0,
            "tokens_not_prefilled": run.prefix_tokens, "blocks_saved": run.prefix_blocks}


def _speculation_json(r: Simulation) -> dict[str, Any] | None:
    """Speculative decoding's figures, None where the run did not speculate."""
    spec = r.speculation
    if spec is None:
        return None
    from ..serving.speculation import expected_tokens

    run, s = r.run, spec.speculation
    tpot = run.tpot
    return {"method": s.method, "draft_model": s.draft_id, "k": s.k, "acceptance": list(s.acceptance),
            "expected_tokens_per_step": expected_tokens(s.acceptance), "tokens_per_step": spec.tokens_per_step,
            "verifications": spec.verifications, "drafted": spec.drafted, "accepted": spec.accepted,
            "plain": {"duration_s": spec.plain_duration_s, "tpot_s": spec.plain_tpot_s,
                      "output_tokens_per_s": spec.plain_output_tokens / spec.plain_duration_s},
            "speedup": {"output_tokens_per_s": (run.output_tokens / run.duration_s)
                        / (spec.plain_output_tokens / spec.plain_duration_s),
                        "tpot": None if tpot is None or spec.plain_tpot_s is None else spec.plain_tpot_s / tpot.mean},
            "break_even_batch": spec.break_even_batch, "break_even_context": spec.context,
            "break_even_search_limit": spec.batch_limit}


def serve_rows(r: Simulation) -> list[dict[str, Any]]:
    """One row a metric: its mean and percentiles, seconds (``--csv``, ``to_pandas``)."""
    data = serve_json(r)
    return [{"metric": key, **(data[key] or {})} for key, _ in METRICS]


def print_serve(out: Console, r: Simulation) -> None:
    run, cap = r.run, r.capacity
    where = f" ({r.layout.label()})" if r.deployment is None and not r.layout.single else ""
    if r.deployment is not None:
        where = f", {deployment_label(r)}"
    title = (f"{r.base.model.id} on {r.gpu.name}{where}: "
             f"{r.load.text()}, {plural(len(r.load.requests), 'request')} of {r.prompt_text} prompt and "
             f"{r.output_text} output tokens")
    out.print(title, highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), show_edge=False)
    for col in ("metric", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="left" if col == "metric" else "right", no_wrap=True)
    for key, label in METRICS:
        s = getattr(run, key.removesuffix("_s"))
        if s is None:
            table.add_row(label, "—", "—", "—", "—")
        else:
            table.add_row(label, duration(s.mean), duration(s.p50), duration(s.p90), duration(s.p99))
    out.print(table)
    gpus = r.gpus
    tokens_s = run.output_tokens / run.duration_s
    lines = [
        f"throughput: {number(len(run.served) / run.duration_s)} requests/s, {number(tokens_s)} output tokens/s"
        + (f" ({number(tokens_s / gpus)} per GPU)" if gpus > 1 else "")
        + f" over {duration(run.duration_s)}",
        f"steps: {run.steps:,}{'' if r.config.mixed else ' (prompts and decodes in separate steps)'}; "
        f"{run.prefill_time_s / _busy(r):.0%} of the busy time in steps that carry prompt tokens; at most "
        f"{run.max_tokens_in_step:,} tokens a step; {plural(run.preemptions, 'preemption')}",
        *_ranks_lines(r),
        *([f"KV cache: {run.kv_blocks:,} blocks of {run.block_size} positions ({si(cap.block_bytes, 'B')} each"
           f"{_parts_text(cap.parts)}), at "
           f"most {run.kv_blocks_peak:,} in use; beside weights {gib(cap.weight_bytes)}, activations "
           f"{gib(cap.activation_bytes)} and a reserve of {gib(cap.reserve_bytes)} in {gib(cap.capacity_bytes, 0)}"
           + (" a GPU" if r.ranks is not None else "")]
          if r.deployment is None else deployment_lines(r)),
        "TPOT is each request's (E2E − TTFT)/(output − 1), averaged over requests; ITL every gap between tokens.",
    ]
    if r.slos:
        lines.append(f"goodput: {number(r.goodput / run.duration_s)} requests/s meet the targets "
                     f"({r.goodput:,} of {len(run.served):,})")
    prefix = _prefix_json(r)
    if prefix is not None:
        lines.append(f"prefix cache: {prefix['hits']:,} of {prefix['lookups']:,} admissions found their prefix "
                     f"cached ({prefix['hit_rate']:.0%}): {prefix['tokens_not_prefilled']:,} prompt tokens not "
                     f"prefilled, {prefix['blocks_saved']:,} KV blocks not allocated")
    lines += _speculation_lines(r)
    lines += _cost_lines(r)
    lines.append(_stack_line(r))
    for line in lines:
        out.print(line, highlight=False)


def _ranks_lines(r: Simulation) -> list[str]:
    k = r.ranks
    if k is None:
        return []
    return [f"attention data-parallel over {len(k.requests)} ranks in lockstep, each with its own scheduler and KV "
            f"cache of {r.capacity.blocks:,} blocks (the KV cache below is theirs summed; the steps' tokens are "
            f"every rank's); requests to the least loaded rank: {', '.join(f'{n:,}' for n in k.requests)}"]


def _speculation_lines(r: Simulation) -> list[str]:
    data = _speculation_json(r)
    if data is None:
        return []
    spec = r.speculation
    assert spec is not None
    accept = ", ".join(f"{a:g}" for a in spec.speculation.acceptance)
    tpot = data["speedup"]["tpot"]
    where = data["break_even_batch"]
    # A run whose requests end at their first token (--output 1) or before a draft is verified verifies none:
    # its tokens a step are no measure of the acceptance.
    verified = (f"{data['tokens_per_step']:.2f} tokens a sequence and step (expected "
                f"{data['expected_tokens_per_step']:.2f}), {spec.accepted:,} of {spec.drafted:,} drafts accepted"
                if spec.drafted else f"no step verified drafts (each request ended before one; expected "
                f"{data['expected_tokens_per_step']:.2f} tokens a sequence and step)")
    return [
        f"speculation: {spec.speculation.label()}, acceptance {accept}: {verified}",
        f"against the same run without it: {data['speedup']['output_tokens_per_s']:.2f}× the output tokens/s"
        + ("" if tpot is None else f", TPOT {duration(spec.plain_tpot_s or 0.0)} → "
           f"{duration(spec.plain_tpot_s / tpot if spec.plain_tpot_s else 0.0)} ({tpot:.2f}×)"),
        (f"speculation stops paying at a batch of {where:,} (a steady decode step at {spec.context:,} positions)"
         if where is not None else f"speculation pays at every batch up to {spec.batch_limit:,} (a steady decode "
                                   f"step at {spec.context:,} positions)"),
    ]


def _cost_lines(r: Simulation) -> list[str]:
    c = r.costs
    if c is None:
        return []
    lines = []
    if c.usd_per_million_input is not None and c.usd_per_million_output is not None:
        lines.append(f"cost at ${c.price_per_gpu_hour:g} a GPU-hour: ${number(c.usd_per_million_input)} per million "
                     f"input tokens and ${number(c.usd_per_million_output)} per million output tokens (the time "
                     f"of steps carrying prompts to the input); ${number(c.usd_per_million_output_all_on_output or 0)}"
                     f" per million output tokens with all of it on them")
    if c.joules_per_output_token is not None:
        lines.append(f"energy: at most {number(c.joules_per_output_token)} J per output token ({number(c.board_w or 0)}"
                     f" W board power × {plural(r.gpus, 'GPU')} × {duration(c.busy_s)} busy"
                     + (")" if r.deployment is None else " a GPU on average)"))
    return lines


def _stack_line(r: Simulation) -> str:
    """The serving stack's costs beyond the ops, those it has (the floor says it has none)."""
    st = r.stack
    timed = "the calibrated op model times the ops" if r.calibrated else "the ops at the roofs' times"
    costs = []
    if st.step_overhead_us:
        costs.append(f"{duration(st.step_overhead_us / 1e6)} a step")
    if st.kernel_gap_us:
        costs.append(f"{duration(st.kernel_gap_us / 1e6)} a kernel")
    if st.sequence_overhead_us:
        costs.append(f"{duration(st.sequence_overhead_us / 1e6)} a sequence in a step")
    if st.request_latency_us:
        costs.append(f"{duration(st.request_latency_us / 1e6)} between engine and client a request")
    if st.refill_latency_us:
        costs.append(f"a closed loop's next request reaches the engine {duration(st.refill_latency_us / 1e6)} after "
                     "the last")
    if st.stream_lag_steps:
        costs.append(f"tokens reach the client {number(st.stream_lag_steps)} of the request's TPOT later")
    if st.new_shape_us:
        costs.append(f"{duration(st.new_shape_us / 1e6)} a new attention shape")
    if st.kv_position_ns:
        costs.append(f"{duration(st.kv_position_ns / 1e9)} a KV position and layer")
    if not r.calibrated and (st.bandwidth_efficiency, st.compute_efficiency) != (1, 1):
        costs.append(f"{st.bandwidth_efficiency:.0%} of the bandwidth and {st.compute_efficiency:.0%} of the peak")
    if st.attention_efficiency != 1:
        costs.append(f"attention at {st.attention_efficiency:.0%} of its op's rate")
    if st.collective_efficiency != 1:
        costs.append(f"collectives at {st.collective_efficiency:.0%} of the link's rate")
    if st.attention != "varlen":
        costs.append(f"{st.attention} attention (every query over the whole batch's KV)")
    family = f" (its figures for compute capability {st.family}.x)" if st.family else ""
    return f"stack {st.id}{family}: {timed}" + (f"; {', '.join(costs)}" if costs else ", no cost beyond them")
