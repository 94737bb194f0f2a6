"""``rooflinectl compare``: one request on several GPUs, side by side."""

from __future__ import annotations

import typer

from ..errors import UserError
from . import options as opt
from ._app import DEFAULT_GPU, app, command, console, one_format, print_json
from .serving import base_workload, layout_label, step_analyzer


@command(app)
def compare(
    gpu: opt.Gpus = None,
    model: opt.Model = None,
    prompt: opt.Prompt = opt.DEFAULT_PROMPT,
    output: opt.Output = opt.DEFAULT_OUTPUT,
    batch: int = typer.Option(None, "--batch", "-b", help="Requests served together on every GPU (default: the "
                              "largest batch that fits on each)."),
    tpot_ms: float = typer.Option(None, "--tpot-ms", help="A latency target: on each GPU the largest batch whose "
                                  "mean time per output token is at most this many ms."),
    dtype: opt.Dtype = None,
    kv_dtype: opt.KvDtype = None,
    weight_dtype: opt.WeightDtype = None,
    act_dtype: opt.ActDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    fuse: opt.Fuse = None,
    reserve_gib: opt.Reserve = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tps = None,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    csv: bool = typer.Option(False, "--csv", help="Print the rows as CSV."),
) -> None:
    """One request on several GPUs: TTFT, TPOT, end-to-end latency and output tokens/s per GPU at the batch each
    serves (given, the largest under a TPOT target, or the largest that fits), the largest batch, the bound.

    Example: rooflinectl compare --gpu a100 --gpu h100 --gpu h200 --gpu b200 --gpu mi300x --model llama-3-8b
    --tpot-ms 20

    Tensor parallelism, a row per GPU and degree: rooflinectl compare --gpu h100 --gpu h200 --model llama-3-70b
    --tp 4 --tp 8
    """
    from ..engine.generate import choose
    from ..engine.memory import reserve_bytes
    from ..engine.parallel import Layout
    from ..render.compare import (
        COMPARE_FIELDS,
        compare_json,
        compare_notes,
        compare_rows,
        compare_table,
        to_csv,
    )
    from ..specs.hardware import load_gpu

    one_format(json, csv)
    if tpot_ms is not None and not tpot_ms > 0:
        raise UserError(f"--tpot-ms {tpot_ms}: give a positive number of milliseconds")
    base = base_workload(model, dtype, kv_dtype, weight_dtype, act_dtype, group_size, attention, fuse)
    gpus = [load_gpu(name) for name in (gpu or [DEFAULT_GPU])]
    degrees = tp or [1]
    choices, names = [], []
    for g in gpus:
        reserve = reserve_bytes(g.capacity_bytes, reserve_gib)
        for t in degrees:
            label = layout_label(g.id, t, ep, pp, several=len(degrees) > 1)
            choices.append(choose(base, prompt, output, step_analyzer(g, calibrated, t, ep, pp), reserve, label, batch,
                                  None if tpot_ms is None else tpot_ms / 1e3, layout=Layout(t, ep, pp)))
            names.append(g.name)
    if json:
        print_json(compare_json(choices, names, prompt, output))
    elif csv:
        print(to_csv(compare_rows(choices, names), COMPARE_FIELDS), end="")
    else:
        rule = choices[0].rule
        title = f"{base.model.id}, prompt {prompt:,}, output {output:,}, {base.dtype}; batch: {rule}"
        out = console()
        out.print(compare_table(choices, names, title))
        notes = compare_notes(choices)
        if notes:
            out.print()
        for line in notes:
            out.print(line, highlight=False)
