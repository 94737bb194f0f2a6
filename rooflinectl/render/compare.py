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
from ..serving.deployed import Plan, ServedLoad
from ..specs.dtypes import GROUPED_WEIGHT_DTYPES
from ..specs.workload import Workload
from ..units import duration, number, si
from .console import print_table
from .csvout import to_csv  # noqa: F401  (compare's and pareto's --csv)
from .generate import method_json


def _bound(g: Served) -> str | None:
    """The bound of most of the decode time, with that share (the prefill's for a single output token); None for a
    run that kept no step's ops (a deployment's)."""
    phase = "decode" if g.tpot_s is not None else "prefill"
    found = g.phase_bound(phase)
    if found is None:
        return None
    bound, share = found
    return f"{bound} {share:.0%}" + ("" if phase == "decode" else " (prefill)")


# A row's deployment (serving.deployed.Plan): "engine", "aggregated" or "disaggregated"; the aggregated copies
# (null when disaggregated); the prefill and decode replicas and their layouts (null unless disaggregated).
DEPLOYMENT_FIELDS = ("deployment", "replicas", "prefill_replicas", "prefill_tp", "prefill_ep", "decode_replicas",
                     "decode_tp", "decode_ep")
# A disaggregated row's KV transfer: a request's time on the busiest link and TTFT's wait for it after the prefill
# (means), and its bytes (the whole model's KV of the prompt).
TRANSFER_FIELDS = ("kv_transfer_s", "kv_wait_s", "kv_bytes_per_request")
TYPE_FIELDS = ("dtype", "weight_dtype", "group_size", "act_dtype", "kv_dtype")
COMPARE_FIELDS = ("gpu", "tp", "ep", "pp", "gpus", *DEPLOYMENT_FIELDS, "name", "rule", "batch", "largest_batch", "ttft_s", "tpot_s", "e2e_s",
                  "output_tokens_per_s_per_gpu", "total_tokens_per_s_per_gpu", "bound", "note", "stack",
                  "chunked_prefill", *TYPE_FIELDS, "usd_per_million_output_tokens", "joules_per_output_token",
                  *TRANSFER_FIELDS)


def _costs(g: Served | None, pricing: Sequence[Pricing], i: int) -> dict[str, float | None]:
    """A served batch's dollars per million output tokens and joules per output token (serving.cost.Pricing; a
    deployment's, its simulation's: ``serving.deployed``); None without a price, a board power, or a batch."""
    if isinstance(g, ServedLoad):
        return {"usd_per_million_output_tokens": g.usd_per_million_output_tokens,
                "joules_per_output_token": g.joules_per_output_token}
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


def _deployment(plan: Plan) -> dict[str, Any]:
    """A row's deployment (DEPLOYMENT_FIELDS); ``gpus`` all of its GPUs, what the throughput per GPU divides by."""
    split = plan.kind == "disaggregated"
    return {"gpus": plan.gpus, "deployment": plan.kind, "replicas": None if split else plan.replicas,
            "prefill_replicas": plan.prefill if split else None,
            "prefill_tp": plan.prefill_layout.tp if split else None,
            "prefill_ep": plan.prefill_layout.ep if split else None,
            "decode_replicas": plan.replicas if split else None, "decode_tp": plan.layout.tp if split else None,
            "decode_ep": plan.layout.ep if split else None}


def _transfer(g: Served | None) -> dict[str, float | None]:
    if not isinstance(g, ServedLoad):
        return dict.fromkeys(TRANSFER_FIELDS)
    return {"kv_transfer_s": g.kv_transfer_s, "kv_wait_s": g.kv_wait_s, "kv_bytes_per_request": g.kv_bytes_per_request}


def compare_rows(choices: Sequence[Choice], names: Sequence[str], method: Method,
                 workload: Workload, pricing: Sequence[Pricing] = (),
                 plans: Sequence[Plan] = ()) -> list[dict[str, Any]]:
    """One row per GPU, layout and deployment (``plans``, by default one engine a row); the request's numbers are
    None where no batch qualifies (``note`` says why)."""
    rows = []
    for i, (c, name) in enumerate(zip(choices, names, strict=True)):
        g = c.generation
        plan = plans[i] if plans else Plan(c.layout)
        rows.append({
            "gpu": c.gpu, **_degrees(c.layout), **_deployment(plan), "name": name, "rule": c.rule,
            "batch": g.request.batch if g else None, "largest_batch": c.largest_batch,
            "ttft_s": g.ttft_s if g else None, "tpot_s": g.tpot_s if g else None, "e2e_s": g.e2e_s if g else None,
            "output_tokens_per_s_per_gpu": g.output_tokens_per_s_per_gpu if g else None,
            "total_tokens_per_s_per_gpu": g.total_tokens_per_s_per_gpu if g else None,
            "bound": _bound(g) if g else None, "note": c.note, **_method(method), **_types(workload),
            **_costs(g, pricing, i), **_transfer(g),
        })
    return rows


def _requests(choices: Sequence[Choice], load: tuple[int, int | None]) -> int:
    """A closed loop's requests: as given, else as the simulation drew them (``rl.serve``'s default)."""
    runs = [c.generation.simulation for c in choices if isinstance(c.generation, ServedLoad)]
    return len(runs[0].load.requests) if runs else (load[1] or 0)


def _load_json(choices: Sequence[Choice], load: tuple[int, int | None] | None) -> dict[str, Any]:
    if load is None:
        return {"kind": "closed batch", "concurrency": None, "requests": None}
    return {"kind": "closed loop", "concurrency": load[0], "requests": _requests(choices, load)}


def compare_json(choices: Sequence[Choice], names: Sequence[str], prompt: int, output: int, method: Method,
                 workload: Workload, pricing: Sequence[Pricing] = (), plans: Sequence[Plan] = (),
                 load: tuple[int, int | None] | None = None) -> dict[str, Any]:
    price = pricing[0].price_per_gpu_hour if pricing else None
    return {"request": {"prompt": prompt, "output": output}, "model": workload.model.id, **_types(workload),
            "method": method_json(method), "load": _load_json(choices, load), "price_per_gpu_hour": price,
            "gpus": compare_rows(choices, names, method, workload, pricing, plans)}


def compare_title(model_id: str, prompt: int, output: int, types: str, choices: Sequence[Choice], method: Method,
                  load: tuple[int, int | None] | None) -> str:
    """The table's caption: the request, how each row's batch was chosen, and how it was served."""
    head = f"{model_id}, prompt {prompt:,}, output {output:,}, {types}"
    if load is None:
        return f"{head}; batch: {choices[0].rule}\n{method.text()}"
    return (f"{head}\nsimulated closed loop of {load[0]:,} clients, {_requests(choices, load):,} requests (each "
            f"client sends its next when its last ends); chunked prefill, {method.max_num_batched_tokens:,} tokens "
            f"a step; stack {method.stack.id}")


def compare_notes(choices: Sequence[Choice], plans: Sequence[Plan] = ()) -> list[str]:
    """Why a GPU has no row of numbers; what each deployment's row is."""
    lines = [f"{c.gpu}: {c.note}" for c in choices if c.generation is None]
    deployed = [(c, p) for c, p in zip(choices, plans, strict=True) if p.kind != "engine"]
    for c, p in deployed:
        line = f"{c.gpu}: {p.words()}"
        g = c.generation
        d = g.simulation.deployment if isinstance(g, ServedLoad) else None
        if isinstance(g, ServedLoad) and d is not None and d.transfers is not None and g.kv_transfer_s is not None:
            t = d.transfers
            when = "after the prefill" if t.mode == "after" else "layer by layer with the prefill"
            line += (f"; KV {si(g.kv_bytes_per_request or 0.0, 'B')} a request, {duration(g.kv_transfer_s)} on "
                     f"{t.link.name} {when}")
        lines.append(line)
    if deployed:
        lines.append("Deployments: analyze serve's simulation of the same load, tok/s per GPU over all their GPUs; "
                     "largest: what their replicas' KV caches hold at once (the decode replicas'); no bound (the "
                     "run keeps no step's ops)")
    return lines


# The columns a narrow terminal drops first (``render.console.print_table``): the largest batch, which equals the
# batch under the default rule, and the end-to-end latency, which is TTFT + (output − 1) × TPOT; then, beside
# deployments, the bound (one engine's only), the GPUs and the KV transfer (the lines under the table give each
# deployment's); last, the joules, beside the dollars of the same throughput.
COMPARE_OPTIONAL_COLUMNS = ("largest", "end-to-end", "decode bound", "GPUs", "KV xfer", "J/tok")


def compare_table(choices: Sequence[Choice], names: Sequence[str], title: str, method: Method,
                  workload: Workload, pricing: Sequence[Pricing] = (), plans: Sequence[Plan] = (),
                  load: tuple[int, int | None] | None = None) -> Table:
    """The rows as a table; with a price (``pricing``), the columns $ per million output tokens and J per output
    token; beside deployments (``plans``), the GPUs of each row's deployment and, where one is disaggregated, its
    KV transfer's time."""
    priced = any(p.price_per_gpu_hour is not None for p in pricing)
    deployed = any(p.kind != "engine" for p in plans)
    split = any(p.kind == "disaggregated" for p in plans)
    table = Table(title=Text(title), title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                  show_edge=False)
    for col, justify in (("GPU", "left"), *((("GPUs", "right"),) if deployed else ()),
                         ("batch" if load is None else "clients", "right"), ("largest", "right"), ("TTFT", "right"),
                         ("TPOT", "right"), ("end-to-end", "right"), ("out tok/s/GPU", "right"),
                         *((("$/M out", "right"), ("J/tok", "right")) if priced else ()),
                         *((("KV xfer", "right"),) if split else ()), ("decode bound", "left")):
        table.add_column(col, justify=justify, no_wrap=True)
    for row in compare_rows(choices, names, method, workload, pricing, plans):
        gpus = [f"{row['gpus']:,}"] if deployed else []
        costs = [_maybe(row["usd_per_million_output_tokens"]), _maybe(row["joules_per_output_token"])] if priced else []
        kv = [duration(row["kv_transfer_s"]) if row["kv_transfer_s"] is not None else "—"] if split else []
        if row["batch"] is None:
            table.add_row(row["gpu"], *gpus, "—", f"{row['largest_batch']:,}", "—", "—", "—", "—", *costs, *kv, "—")
            continue
        tpot = duration(row["tpot_s"]) if row["tpot_s"] is not None else "—"
        table.add_row(row["gpu"], *gpus, f"{row['batch']:,}", f"{row['largest_batch']:,}", duration(row["ttft_s"]),
                      tpot, duration(row["e2e_s"]), number(row['output_tokens_per_s_per_gpu']), *costs, *kv,
                      row["bound"] or "—")
    return table


def print_compare(console: Console, choices: Sequence[Choice], names: Sequence[str], title: str,
                  method: Method, workload: Workload, pricing: Sequence[Pricing] = (), plans: Sequence[Plan] = (),
                  load: tuple[int, int | None] | None = None) -> None:
    """``compare``'s text: the table, whole at the console's width, then why a GPU has no numbers and what each
    deployment is."""
    print_table(console, compare_table(choices, names, title, method, workload, pricing, plans, load),
                COMPARE_OPTIONAL_COLUMNS)
    notes = compare_notes(choices, plans or [Plan(c.layout) for c in choices])
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
