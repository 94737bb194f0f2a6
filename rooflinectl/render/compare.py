"""``compare`` and the points of ``plot pareto``: rows of plain values, as a table, JSON or CSV. Formats the
engine's ``Choice`` and ``Curve`` objects; computes nothing of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..engine.choice import Choice, Curve, Served
from ..engine.parallel import Layout
from ..serving.batch import Method
from ..serving.cost import Pricing
from ..specs.dtypes import GROUPED_WEIGHT_DTYPES
from ..specs.workload import Workload
from ..units import duration, number
from .console import print_table
from .csvout import to_csv  # noqa: F401  (compare's and pareto's --csv)
from .generate import method_json


def _bound(g: Served) -> str:
    """The bound of most of the decode time, with that share (the prefill's for a single output token)."""
    phase = "decode" if g.tpot_s is not None else "prefill"
    bound, share = g.phase_bound(phase)
    return f"{bound} {share:.0%}" + ("" if phase == "decode" else " (prefill)")


TYPE_FIELDS = ("dtype", "weight_dtype", "group_size", "act_dtype", "kv_dtype")
COMPARE_FIELDS = ("gpu", "tp", "ep", "pp", "gpus", "name", "rule", "batch", "largest_batch", "ttft_s", "tpot_s", "e2e_s",
                  "output_tokens_per_s_per_gpu", "total_tokens_per_s_per_gpu", "bound", "note", "stack",
                  "chunked_prefill", *TYPE_FIELDS, "usd_per_million_output_tokens", "joules_per_output_token")


def _costs(g: Served | None, pricing: Sequence[Pricing], i: int) -> dict[str, float | None]:
    """A served batch's dollars per million output tokens and joules per output token (serving.cost.Pricing);
    None without a price, a board power, or a batch."""
    usd, joules = pricing[i].per_output_token(g.output_tokens_per_s_per_gpu) if g and i < len(pricing) else (None,
                                                                                                           None)
    return {"usd_per_million_output_tokens": usd, "joules_per_output_token": joules}


def _method(m: Method) -> dict[str, Any]:
    """A row's method columns: the stack, and chunked prefill (false: the static batch on the roofline stack)."""
    j = method_json(m)
    return {"stack": j["stack"], "chunked_prefill": j["chunked_prefill"]}


def _types(w: Workload) -> dict[str, Any]:
    """A row's data types: the step's, the linear layers' weights (with int4's group) and inputs, the KV cache's."""
    group = w.group_size if w.weights in GROUPED_WEIGHT_DTYPES else None
    return {"dtype": w.dtype, "weight_dtype": w.weights, "group_size": group, "act_dtype": w.matmul_dtype,
            "kv_dtype": w.kv_dtype}


def _degrees(layout: Layout) -> dict[str, Any]:
    """A row's layout (engine.parallel): the degrees and the GPUs one copy of the model spans."""
    return {"tp": layout.tp, "ep": layout.ep, "pp": layout.pp, "gpus": layout.gpus}


def compare_rows(choices: Sequence[Choice], names: Sequence[str], method: Method,
                 workload: Workload, pricing: Sequence[Pricing] = ()) -> list[dict[str, Any]]:
    """One row per GPU; the request's numbers are None where no batch qualifies (``note`` says why)."""
    rows = []
    for i, (c, name) in enumerate(zip(choices, names, strict=True)):
        g = c.generation
        rows.append({
            "gpu": c.gpu, **_degrees(c.layout), "name": name, "rule": c.rule,
            "batch": g.request.batch if g else None, "largest_batch": c.largest_batch,
            "ttft_s": g.ttft_s if g else None, "tpot_s": g.tpot_s if g else None, "e2e_s": g.e2e_s if g else None,
            "output_tokens_per_s_per_gpu": g.output_tokens_per_s_per_gpu if g else None,
            "total_tokens_per_s_per_gpu": g.total_tokens_per_s_per_gpu if g else None,
            "bound": _bound(g) if g else None, "note": c.note, **_method(method), **_types(workload),
            **_costs(g, pricing, i),
        })
    return rows


def compare_json(choices: Sequence[Choice], names: Sequence[str], prompt: int, output: int, method: Method,
                 workload: Workload, pricing: Sequence[Pricing] = ()) -> dict[str, Any]:
    price = pricing[0].price_per_gpu_hour if pricing else None
    return {"request": {"prompt": prompt, "output": output}, "model": workload.model.id, **_types(workload),
            "method": method_json(method), "price_per_gpu_hour": price,
            "gpus": compare_rows(choices, names, method, workload, pricing)}


def compare_notes(choices: Sequence[Choice]) -> list[str]:
    """Why a GPU has no row of numbers."""
    return [f"{c.gpu}: {c.note}" for c in choices if c.generation is None]


# The columns a narrow terminal drops first (``render.console.print_table``): the largest batch, which equals the
# batch under the default rule, and the end-to-end latency, which is TTFT + (output − 1) × TPOT.
COMPARE_OPTIONAL_COLUMNS = ("largest", "end-to-end")


def compare_table(choices: Sequence[Choice], names: Sequence[str], title: str, method: Method,
                  workload: Workload, pricing: Sequence[Pricing] = ()) -> Table:
    """The rows as a table; with a price (``pricing``), the columns $ per million output tokens and J per output
    token."""
    priced = any(p.price_per_gpu_hour is not None for p in pricing)
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                  show_edge=False)
    for col, justify in (("GPU", "left"), ("batch", "right"), ("largest", "right"), ("TTFT", "right"),
                         ("TPOT", "right"), ("end-to-end", "right"), ("out tok/s/GPU", "right"),
                         *((("$/M out", "right"), ("J/tok", "right")) if priced else ()), ("decode bound", "left")):
        table.add_column(col, justify=justify, no_wrap=True)
    for row in compare_rows(choices, names, method, workload, pricing):
        costs = [_maybe(row["usd_per_million_output_tokens"]), _maybe(row["joules_per_output_token"])] if priced else []
        if row["batch"] is None:
            table.add_row(row["gpu"], "—", f"{row['largest_batch']:,}", "—", "—", "—", "—", *costs, "—")
            continue
        tpot = duration(row["tpot_s"]) if row["tpot_s"] is not None else "—"
        table.add_row(row["gpu"], f"{row['batch']:,}", f"{row['largest_batch']:,}", duration(row["ttft_s"]), tpot,
                      duration(row["e2e_s"]), number(row['output_tokens_per_s_per_gpu']), *costs, row["bound"])
    return table


def print_compare(console: Console, choices: Sequence[Choice], names: Sequence[str], title: str,
                  method: Method, workload: Workload, pricing: Sequence[Pricing] = ()) -> None:
    """``compare``'s text: the table, whole at the console's width, then why a GPU has no numbers."""
    print_table(console, compare_table(choices, names, title, method, workload, pricing), COMPARE_OPTIONAL_COLUMNS)
    notes = compare_notes(choices)
    if notes:
        console.print()
    for line in notes:
        console.print(line, highlight=False)


def _maybe(x: float | None) -> str:
    return "—" if x is None else number(x)


CURVE_FIELDS = ("gpu", "tp", "ep", "pp", "gpus", "batch", "largest_batch", "tpot_s", "ttft_s", "e2e_s", "output_tokens_per_s_per_gpu",
                "total_tokens_per_s_per_gpu", "memory_bytes", "capacity_bytes", "stack", "chunked_prefill", *TYPE_FIELDS,
                "usd_per_million_output_tokens", "joules_per_output_token")


def curve_rows(curves: Sequence[Curve], method: Method, workload: Workload,
               pricing: Sequence[Pricing] = ()) -> list[dict[str, Any]]:
    """Every point of every GPU's curve (a GPU where nothing fits has none)."""
    return [{"gpu": c.gpu, **_degrees(c.layout), "batch": g.request.batch, "largest_batch": c.largest_batch, "tpot_s": g.tpot_s,
             "ttft_s": g.ttft_s, "e2e_s": g.e2e_s, "output_tokens_per_s_per_gpu": g.output_tokens_per_s_per_gpu,
             "total_tokens_per_s_per_gpu": g.total_tokens_per_s_per_gpu,
             "memory_bytes": round(g.memory.total_bytes), "capacity_bytes": round(g.memory.capacity_bytes),
             **_method(method), **_types(workload), **_costs(g, pricing, i)}
            for i, c in enumerate(curves) for g in c.points]


def curves_json(curves: Sequence[Curve], prompt: int, output: int, path: str | None, method: Method,
                workload: Workload, pricing: Sequence[Pricing] = ()) -> dict[str, Any]:
    """``plot pareto --json``; ``path`` the chart written with it (None: none, without ``-o``)."""
    return {
        "path": path,
        "request": {"prompt": prompt, "output": output},
        "model": workload.model.id, **_types(workload),
        "method": method_json(method),
        "gpus": [{"gpu": c.gpu, **_degrees(c.layout), "largest_batch": c.largest_batch,
                  "fits": c.largest_batch > 0,
                  "memory_at_limit_bytes": round(c.limit.total_bytes),
                  "capacity_bytes": round(c.limit.capacity_bytes)} for c in curves],
        "price_per_gpu_hour": pricing[0].price_per_gpu_hour if pricing else None,
        "points": curve_rows(curves, method, workload, pricing),
    }
