"""``rooflinectl plot pareto``: output tokens/s per GPU against time per output token, as the batch grows."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import UserError
from . import options as opt
from ._app import DEFAULT_GPU, command, one_format, print_json

# Its own app: `plot` hands it `plot pareto …` (cli.routing).
pareto_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

# The chart a plain `plot pareto` writes.
DEFAULT_CHART = "pareto.png"

# The most GPUs one chart draws: one colour and marker each (plot.chart.GPU_COLORS).
MAX_GPUS = 6


@command(pareto_app, "pareto")
def pareto(
    gpu: opt.Gpus = None,
    model: opt.Model = None,
    prompt: opt.Prompt = opt.DEFAULT_PROMPT,
    output: opt.Output = opt.DEFAULT_OUTPUT,
    dtype: opt.Dtype = None,
    kv_dtype: opt.KvDtype = None,
    weight_dtype: opt.WeightDtype = None,
    act_dtype: opt.ActDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    fuse: opt.Fuse = None,
    stack: opt.BatchStack = "roofline",
    chunked_prefill: opt.BatchChunkedPrefill = True,
    max_num_batched_tokens: opt.BatchBudget = None,
    reserve_gib: opt.Reserve = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tps = None,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    price_per_gpu_hour: float = typer.Option(None, "--price-per-gpu-hour", help="Dollars per GPU-hour: each point's "
                                             "$ per million output tokens (--json, --csv, and --y usd)."),
    y: str = typer.Option("tokens", "--y", help="The y axis: tokens (output tokens/s per GPU), usd ($ per million "
                          "output tokens, with --price-per-gpu-hour) or joules (J per output token, board power)."),
    chart: Path | None = typer.Option(None, "-o", "--chart", help="The file to write: .png, .svg or .pdf (default "
                               "pareto.png; with --json or --csv, none unless given)."),
    json: bool = typer.Option(False, "--json", help="Print every point (and each GPU's limit) as JSON."),
    csv: bool = typer.Option(False, "--csv", help="Print every point as CSV."),
) -> None:
    """The latency–throughput curve: output tokens/s per GPU against time per output token, one line per GPU as
    the batch grows from 1 to the largest that fits (powers of two and the largest), each point labelled by batch.

    How each point runs: B requests arrive at once and none follows them (a closed batch:
    `analyze serve --concurrency B` with B requests and no refills), simulated step by step with chunked prefill;
    --stack roofline --no-chunked-prefill gives the static batch (every prompt in one prefill step).

    Example: rooflinectl plot pareto --gpu h100 --gpu h200 --gpu b200 --model llama-3-8b --prompt 2048 --output 256
    -o pareto.png

    Tensor parallelism, a curve per GPU and degree: rooflinectl plot pareto --gpu h100 --gpu h200 --model llama-3-70b
    --tp 4 --tp 8

    Cost per token: rooflinectl plot pareto --gpu h100 --gpu b200 --model llama-3-8b --price-per-gpu-hour 2.5
    --y usd -o cost.png
    """
    from .. import api
    from ..plot.chart import check_output
    from ..plot.pareto import check_y
    from ..render.console import say
    from ..units import gib

    one_format(json, csv)
    if chart is None and not (json or csv):  # --json and --csv print the points; a chart only where asked
        chart = Path(DEFAULT_CHART)
    if chart is not None:
        check_output(chart, DEFAULT_CHART)
    names = gpu or [DEFAULT_GPU]
    degrees = tp or [1]
    if len(names) * len(degrees) > MAX_GPUS:
        raise UserError(f"--gpu and --tp: {len(names) * len(degrees)} curves; one chart draws at most {MAX_GPUS}")
    pricing = api.pricing(gpus=names, tp=degrees, price_per_gpu_hour=price_per_gpu_hour)
    check_y(y, pricing)
    curves, base, method = api.curves(
        gpus=names, prompt=prompt, output=output, reserve_gib=reserve_gib, calibrated=calibrated, tp=degrees, ep=ep,
        pp=pp, stack=stack, chunked_prefill=chunked_prefill, max_num_batched_tokens=max_num_batched_tokens,
        model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
        group_size=group_size, attention=attention, fuse=fuse)
    if all(c.largest_batch == 0 for c in curves):
        need = min(curves, key=lambda c: c.limit.total_bytes).limit
        raise UserError(f"{base.model.id} fits on none of the GPUs given: one request needs {gib(need.total_bytes)} "
                        f"({gib(need.weight_bytes)} of weights) of {gib(need.capacity_bytes, 0)}; split it with --tp "
                        f"or --pp, or quantize it (--weight-dtype)")
    title = (f"{base.model.id}, prompt {prompt:,}, output {output:,}, {base.types_label()}, {base.attention} attention\n"
             f"batch 1, 2, 4, … up to the largest that fits (weights + KV cache + activations + reserve)\n"
             f"{method.text()}")
    if chart is not None:
        from ..plot.pareto import draw_pareto

        draw_pareto(curves, title, chart, y, pricing)
    if json or csv:
        from ..render.compare import CURVE_FIELDS, curve_rows, curves_json
        from ..render.csvout import to_csv

        if json:
            print_json(curves_json(curves, prompt, output, None if chart is None else str(chart), method, base,
                                   pricing))
        else:
            print(to_csv(curve_rows(curves, method, base, pricing), CURVE_FIELDS), end="")
    else:
        limits = ", ".join(f"{c.gpu} up to batch {c.largest_batch:,}" if c.largest_batch else f"{c.gpu} does not fit"
                           for c in curves)
        say(f"wrote {chart} ({base.model.id}: {limits})")
