"""``analyze generate``: a request's latency, throughput, memory and where its time goes, as text and JSON.
Formats the engine's static ``Generation`` or the simulated ``serving.batch.BatchRun``; computes nothing of its own
beyond shares of the times it is given."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..engine.generate import Generation
from ..engine.memory import MemoryBudget
from ..engine.roofline import Analysis
from ..serving.batch import BatchRun, Method
from ..units import duration, gib, number, plural
from .analysis import bandwidth_text
from .console import print_table

# A served batch: the static one, or the simulated closed batch.
Batch = Generation | BatchRun

# The ops the text table lists by name, largest first; the rest are summed in one row (--json lists them all).
TOP_OPS = 8


def _first(g: Batch) -> Analysis:
    """The analysis that names the GPU, its roofs, the layout and the step options: the static batch's prefill,
    the simulated run's first step."""
    return g.prefill if isinstance(g, Generation) else g.first


def span(g: Batch) -> float:
    """The time the batch's steps take, first to last: the static batch's end-to-end, the run's duration."""
    return g.e2e_s if isinstance(g, Generation) else g.duration_s


def method_json(g: Batch | Method) -> dict[str, Any]:
    """How the batch was served: simulated or the static batch, the stack, chunked prefill and its budget."""
    m = g if isinstance(g, Method) else g.method if isinstance(g, BatchRun) else None
    if m is None or m.static:
        return {"simulated": False, "stack": m.stack.id if m else "roofline", "chunked_prefill": False,
                "max_num_batched_tokens": None, "block_size": None}
    return {"simulated": True, "stack": m.stack.id, "chunked_prefill": m.chunked_prefill,
            "max_num_batched_tokens": m.max_num_batched_tokens if m.chunked_prefill else None,
            "block_size": m.block_size}


def method_text(g: Batch) -> str:
    return g.method.text() if isinstance(g, BatchRun) else Method.static_text()


def _workload_label(g: Batch) -> str:
    w, r = _first(g).workload, g.request
    types = w.types_label()
    kv = f", {w.kv_dtype} KV cache" if w.kv_dtype != w.dtype else ""
    return (f"{w.model.id}, batch {r.batch}, prompt {r.prompt:,}, output {r.output:,}, {types}{kv}, "
            f"{w.attention} attention")


def _bytes(x: float) -> int:
    return round(x)


def memory_json(m: MemoryBudget, largest_batch: int) -> dict[str, Any]:
    return {
        "capacity_bytes": _bytes(m.capacity_bytes),
        "weight_bytes": _bytes(m.weight_bytes),
        "kv_cache_bytes": _bytes(m.kv_cache_bytes),
        "kv_cache_bytes_per_sequence": _bytes(m.kv_cache_bytes_per_sequence),
        "activation_bytes": _bytes(m.activation_bytes),
        "activation_op": m.activations.op,
        "activation_phase": m.activations.phase,
        "reserve_bytes": _bytes(m.reserve_bytes),
        "total_bytes": _bytes(m.total_bytes),
        "fits": m.fits,
        "largest_batch": largest_batch,
    }


def phase_rows(g: Batch) -> list[dict[str, Any]]:
    """Per phase: steps, time, share of the batch's time, the bound of most of its time, and its largest op
    (simulated: ``prefill`` the steps that carry prompt tokens, ``decode`` the decode-only steps)."""
    ops = [o for o in g.op_times() if o.kind != "stack"]
    rows = []
    if isinstance(g, Generation):
        phases = [("prefill", 1, g.ttft_s)]
        if g.decode is not None:
            phases.append(("decode", g.decode.steps, g.decode_time_s))
    else:
        phases = [(k, p.steps, p.time_s) for k, p in g.breakdown.phases.items()]
    for phase, steps, time in phases:
        bound, bound_share = g.phase_bound(phase)
        top = max(ops, key=lambda o: o.prefill_s if phase == "prefill" else o.decode_s)
        top_time = top.prefill_s if phase == "prefill" else top.decode_s
        rows.append({"phase": phase, "steps": steps, "time_s": time, "share": time / span(g), "bound": bound,
                     "bound_share": bound_share, "top_op": top.name, "top_op_share": top_time / time})
    return rows


def _decode_steps(g: Batch) -> dict[str, Any]:
    if isinstance(g, Generation):
        d = g.decode
        return {"steps": d.steps if d else 0, "first_context": d.first.workload.kv_len if d else None,
                "last_context": d.last.workload.kv_len if d else None,
                "analysed_every_step": d.analysed_every_step if d else True}
    contexts = g.decode_contexts()
    return {"steps": g.decode_steps, "first_context": contexts[0] if contexts else None,
            "last_context": contexts[1] if contexts else None,
            "analysed_every_step": False}


def _simulation_json(g: Batch) -> dict[str, Any]:
    """The simulated run's own figures: its steps, its duration, and the requests' percentiles."""
    if isinstance(g, Generation):
        return {}
    from .serve import _stats

    run = g.run
    return {"simulation": {"steps": run.steps, "prefill_steps": run.prefill_steps, "duration_s": run.duration_s,
                           "max_tokens_in_step": run.max_tokens_in_step, "kv_blocks_peak": run.kv_blocks_peak,
                           "ttft_s": _stats(run.ttft), "tpot_s": _stats(run.tpot), "e2e_s": _stats(run.e2e)}}


def generation_json(g: Batch, largest_batch: int) -> dict[str, Any]:
    """The one ``--json`` shape of ``analyze generate`` (docs/serving.md lists every key)."""
    a, r = _first(g), g.request
    w = a.workload
    return {
        "hardware": {"id": a.gpu.id, "name": a.gpu.name, "roofs": a.roofs.label,
                     "bandwidth_gbps": a.roofs.bandwidth_gbps, "peak_tflops": a.peak_flops / 1e12,
                     # Whether the GPU file's calibrated op model timed the ops (--calibrated, engine/calibrated.py).
                     "op_model": a.op_model is not None},
        "workload": {"model": w.model.id, "dtype": w.dtype, "kv_dtype": w.kv_dtype, "weight_dtype": w.weights,
                     "act_dtype": w.matmul_dtype, "attention": w.attention, "fused": list(w.fused)},
        "request": {"prompt": r.prompt, "output": r.output, "batch": r.batch, "gpus": g.gpus},
        "method": method_json(g),
        # More than one GPU only: the layout (engine.parallel); every figure is then one GPU's.
        **({"parallel": {"tp": a.layout.tp, "ep": a.layout.ep, "pp": a.layout.pp, "gpus": a.layout.gpus,
                         "notes": list(a.layout_notes)}}
           if not a.layout.single else {}),
        "latency": {
            "ttft_s": g.ttft_s,
            "tpot_s": g.tpot_s,
            "tpot_first_s": g.tpot_first_s,
            "tpot_last_s": g.tpot_last_s,
            "decode_s": g.decode_time_s,
            "e2e_s": g.e2e_s,
        },
        "throughput": {
            "output_tokens_per_s_per_gpu": g.output_tokens_per_s_per_gpu,
            "total_tokens_per_s_per_gpu": g.total_tokens_per_s_per_gpu,
            "output_tokens_per_s_per_request": g.output_tokens_per_s_per_request,
            "decode_tokens_per_s_per_request": g.decode_tokens_per_s_per_request,
        },
        "decode_steps": _decode_steps(g),
        "phases": phase_rows(g),
        "ops": [{"name": o.name, "kind": o.kind, "prefill_s": o.prefill_s, "decode_s": o.decode_s,
                 "total_s": o.total_s, "share": o.total_s / span(g)} for o in g.op_times()],
        "memory": memory_json(g.memory, largest_batch),
        **_simulation_json(g),
    }


def _table(title: str) -> Table:
    """A table under a one-line title (a Text: a user's names are never markup), no outer edge."""
    return Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                 show_edge=False)


def title_lines(g: Batch) -> list[str]:
    a = _first(g)
    where = a.gpu.name if a.layout.single else f"{a.layout.gpus} × {a.gpu.name} ({a.layout.label()}, per GPU)"
    return [_workload_label(g),
            f"on {where}, {a.roofs.label} roofs: {bandwidth_text(a)}, "
            f"{number(a.peak_flops / 1e12)} TFLOP/s {a.workload.matmul_dtype}"
            + ("; each op timed by the calibrated op model" if a.op_model is not None else ""), method_text(g),
            *a.layout_notes]


# The phase table's columns a narrow terminal drops first (``render.console.print_table``): the step count, which
# the summary's TPOT line and --json also give.
PHASE_OPTIONAL_COLUMNS = ("steps",)


def phase_table(g: Batch) -> Table:
    table = _table("phases")
    for col, justify in (("phase", "left"), ("steps", "right"), ("time", "right"), ("share", "right"),
                         ("bound (of its time)", "left"), ("largest op (of its time)", "left")):
        table.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in phase_rows(g):
        table.add_row(row["phase"], f"{row['steps']:,}", duration(row["time_s"]), f"{row['share']:.1%}",
                      f"{row['bound']} ({row['bound_share']:.0%})", f"{row['top_op']} ({row['top_op_share']:.1%})")
    return table


def ops_table(g: Batch) -> Table:
    """The ops that take most of the batch's time, largest first, each split into prefill and decode."""
    total = span(g)
    ops = sorted(g.op_times(), key=lambda o: o.total_s, reverse=True)
    table = _table("time by op, all steps")
    for col in ("op", "prefill", "decode", "total", "share"):
        table.add_column(col, justify="left" if col == "op" else "right", no_wrap=True)
    for o in ops[:TOP_OPS]:
        table.add_row(o.name, duration(o.prefill_s), duration(o.decode_s), duration(o.total_s),
                      f"{o.total_s / total:.1%}")
    rest = ops[TOP_OPS:]
    if rest:
        rest_s = sum(o.total_s for o in rest)
        table.add_row(f"{len(rest)} other ops", duration(sum(o.prefill_s for o in rest)),
                      duration(sum(o.decode_s for o in rest)), duration(rest_s), f"{rest_s / total:.1%}")
    return table


def memory_sum(m: MemoryBudget, batch: int, longest_context: int, paged: tuple[int, int] | None = None) -> str:
    """The budget as one sum: weights + KV cache + activations + reserve = total of capacity (``paged``: as in
    :func:`memory_lines`)."""
    return (f"{gib(m.weight_bytes)} weights + {gib(m.kv_cache_bytes)} KV cache "
            f"({_kv_text(batch, longest_context, paged)}) + {gib(m.activation_bytes)} activations "
            f"({m.activations.phase} {m.activations.op}) + {gib(m.reserve_bytes)} reserve = "
            f"{gib(m.total_bytes)} of {gib(m.capacity_bytes, 0)}")


def summary_lines(g: Batch, largest_batch: int) -> list[str]:
    if isinstance(g, BatchRun):
        return simulated_lines(g, largest_batch)
    r = g.request
    lines = [f"time to first token:   {duration(g.ttft_s)} (the prefill of {r.batch:,} × {r.prompt:,} tokens)"]
    if g.decode is not None:
        d = g.decode
        lines.append(f"time per output token: {duration(d.mean_time_s)} mean of {d.steps:,} steps "
                     f"({duration(d.step_times_s[0])} at context {d.first.workload.kv_len:,} … "
                     f"{duration(d.step_times_s[-1])} at {d.last.workload.kv_len:,})")
    else:
        lines.append("time per output token: none (one output token: the prefill gives it, no decode step)")
    per_request = f"{number(g.output_tokens_per_s_per_request)} output tokens/s over the request"
    if g.decode_tokens_per_s_per_request is not None:
        per_request += f", {number(g.decode_tokens_per_s_per_request)} while decoding (1 / TPOT)"
    lines += [
        f"end-to-end latency:    {duration(g.e2e_s)}",
        f"per GPU:               {number(g.output_tokens_per_s_per_gpu)} output tokens/s, "
        f"{number(g.total_tokens_per_s_per_gpu)} tokens/s with the prompts",
        f"per request:           {per_request}",
        *memory_lines(g.memory, r.batch, r.longest_context, largest_batch),
    ]
    return lines


def _kv_text(batch: int, longest_context: int, paged: tuple[int, int] | None) -> str:
    """The KV cache's positions: exact (the static batch) or in whole blocks of the paged cache."""
    if paged is None:
        return f"{batch:,} × {longest_context:,} positions"
    blocks, block_size = paged
    return f"{batch:,} × {blocks:,} blocks of {block_size} positions"


# The summary's labels ("time to first token:   ") are this wide; a value that wraps keeps under itself.
LABEL_WIDTH = len("time to first token:   ")


def print_labelled(console: Console, lines: list[str]) -> None:
    """The summary's lines, each a LABEL_WIDTH label then its value; a value too long for the console wraps at
    its words under itself, never under the label."""
    grid = Table.grid()
    grid.add_column(no_wrap=True, min_width=LABEL_WIDTH)
    grid.add_column()
    for line in lines:
        grid.add_row(Text(line[:LABEL_WIDTH]), Text(line[LABEL_WIDTH:]))
    console.print(grid)


def memory_lines(m: MemoryBudget, batch: int, longest_context: int, largest_batch: int,
                 paged: tuple[int, int] | None = None) -> list[str]:
    """The memory budget in four lines of the summary's layout (``paged``: the paged cache's blocks a sequence
    takes in its attention layers at its longest, and their size in positions), each part on a line of its own
    so that no line outgrows a 100-column terminal."""
    pad = " " * LABEL_WIDTH
    return [
        f"memory:                {gib(m.total_bytes)} of {gib(m.capacity_bytes, 0)}, "
        f"{'fits' if m.fits else 'does not fit'}; largest batch that fits: {largest_batch:,}",
        f"{pad}= {gib(m.weight_bytes)} weights + {gib(m.kv_cache_bytes)} KV cache "
        f"({_kv_text(batch, longest_context, paged)})",
        f"{pad}+ {gib(m.activation_bytes)} activations (the largest op: {m.activations.phase} "
        f"{m.activations.op})",
        f"{pad}+ {gib(m.reserve_bytes)} reserve",
    ]


def simulated_lines(g: BatchRun, largest_batch: int) -> list[str]:
    """The summary of a simulated closed batch: the requests' means, with the spread the chunks give them."""
    r, t = g.request, g.ttft
    if r.batch == 1:
        lines = [f"time to first token:   {duration(t.mean)} (one request)"]
    else:
        lines = [f"time to first token:   {duration(t.mean)} mean of {r.batch:,} requests (p50 {duration(t.p50)}, "
                 f"p99 {duration(t.p99)})"]
    if g.tpot_s is not None and g.tpot_first_s is not None and g.tpot_last_s is not None:
        lines.append(f"time per output token: {duration(g.tpot_s)} mean of (E2E − TTFT) / {r.output - 1:,} "
                     f"(decode-only steps {duration(g.tpot_first_s)} … {duration(g.tpot_last_s)})")
    elif g.tpot_s is not None:
        lines.append(f"time per output token: {duration(g.tpot_s)} mean of (E2E − TTFT) / {r.output - 1:,}")
    else:
        lines.append("time per output token: none (one output token: the prefill gives it, no decode step)")
    per_request = f"{number(g.output_tokens_per_s_per_request)} output tokens/s over the request"
    if g.decode_tokens_per_s_per_request is not None:
        per_request += f", {number(g.decode_tokens_per_s_per_request)} while decoding (1 / TPOT)"
    return [*lines,
            f"end-to-end latency:    {duration(g.e2e_s)} mean; the last token at {duration(g.duration_s)} "
            f"({plural(g.run.steps, 'step')})",
            f"per GPU:               {number(g.output_tokens_per_s_per_gpu)} output tokens/s, "
            f"{number(g.total_tokens_per_s_per_gpu)} tokens/s with the prompts",
            f"per request:           {per_request}",
            *memory_lines(g.memory, r.batch, r.longest_context, largest_batch, g.paged)]


def print_generation(console: Console, g: Batch, largest_batch: int) -> None:
    for line in title_lines(g):
        console.print(Text(line), highlight=False)
    console.print()
    print_table(console, phase_table(g), PHASE_OPTIONAL_COLUMNS)
    console.print()
    print_labelled(console, summary_lines(g, largest_batch))
    console.print()
    print_table(console, ops_table(g))
