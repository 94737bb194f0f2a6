"""``rooflinectl compare``: one request on several GPUs, side by side."""

from __future__ import annotations

import typer

from . import options as opt
from ._app import DEFAULT_GPU, app, command, console, one_format, print_json


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
    stack: opt.BatchStack = "roofline",
    chunked_prefill: opt.BatchChunkedPrefill = True,
    max_num_batched_tokens: opt.BatchBudget = None,
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
    price_per_gpu_hour: float = typer.Option(None, "--price-per-gpu-hour", help="Dollars per GPU-hour: adds "
                                             "$ per million output tokens and joules per output token."),
    json: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
    csv: bool = typer.Option(False, "--csv", help="Print the rows as CSV."),
) -> None:
    """One request on several GPUs: TTFT, TPOT, end-to-end latency and output tokens/s per GPU at the batch each
    serves (given, the largest under a TPOT target, or the largest that fits; neither past the requests one step
    runs, the token budget), the largest batch, the bound.

    How the batch runs: B requests (--batch) arrive at once and none follows them (a closed batch:
    `analyze serve --concurrency B` with B requests and no refills), simulated step by step with chunked prefill,
    so TTFT, TPOT and E2E are the requests' means and the memory check counts one step of the token budget.
    --stack roofline --no-chunked-prefill gives the static batch (every prompt in one prefill step).

    Example: rooflinectl compare --gpu a100 --gpu h100 --gpu h200 --gpu b200 --gpu mi300x --model llama-3-8b
    --tpot-ms 20

    Tensor parallelism, a row per GPU and degree: rooflinectl compare --gpu h100 --gpu h200 --model llama-3-70b
    --tp 4 --tp 8

    Cost and energy: rooflinectl compare --gpu h100 --gpu b200 --model llama-3-8b --tpot-ms 20
    --price-per-gpu-hour 2.5
    """
    from .. import api
    from ..render.compare import COMPARE_FIELDS, compare_rows, print_compare
    from ..render.csvout import to_csv

    one_format(json, csv)
    result = api.compare(gpus=gpu or [DEFAULT_GPU], prompt=prompt, output=output, batch=batch, tpot_ms=tpot_ms,
                         stack=stack, chunked_prefill=chunked_prefill, max_num_batched_tokens=max_num_batched_tokens,
                         reserve_gib=reserve_gib, calibrated=calibrated, tp=tp or [1], ep=ep, pp=pp, model=model,
                         dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                         group_size=group_size, attention=attention, fuse=fuse,
                         price_per_gpu_hour=price_per_gpu_hour)
    choices, names = list(result.choices), list(result.names)
    if json:
        print_json(result.to_dict())
    elif csv:
        print(to_csv(compare_rows(choices, names, result.method, result.workload, result.pricing), COMPARE_FIELDS),
              end="")
    else:
        rule = choices[0].rule
        title = (f"{result.model_id}, prompt {prompt:,}, output {output:,}, {result.types}; batch: {rule}\n"
                 f"{result.method.text()}")
        print_compare(console(), choices, names, title, result.method, result.workload, result.pricing)
