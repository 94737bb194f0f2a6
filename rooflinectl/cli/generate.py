"""``rooflinectl analyze generate``: a batch of requests served end to end: simulated as a closed batch
(``serving.batch``), or the static batch of the engine's own steps."""

from __future__ import annotations

import typer

from . import options as opt
from ._app import DEFAULT_GPU, command, console, one_format, print_json

# Its own app: `analyze` hands it `analyze generate …` (cli.routing), and it is not a top-level command.
generate_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@command(generate_app, "generate")
def generate(
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    prompt: opt.Prompt = opt.DEFAULT_PROMPT,
    output: opt.Output = opt.DEFAULT_OUTPUT,
    batch: int = typer.Option(1, "--batch", "-b", help="Requests arriving together, none after them (a closed "
                              "batch)."),
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
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    json: opt.Json = False,
    csv: opt.Csv = False,
) -> None:
    """A batch of requests from prompt to last token: time to first token, time per output token, end-to-end
    latency, tokens/s per GPU and per request, memory, and which phase and op take the time.

    How the batch runs: B requests (--batch) arrive at once and none follows them (a closed batch:
    `analyze serve --concurrency B` with B requests and no refills), simulated step by step with chunked prefill,
    so TTFT, TPOT and E2E are the requests' means and the memory check counts one step of the token budget.
    --stack roofline --no-chunked-prefill gives the static batch (every prompt in one prefill step).

    Example: rooflinectl analyze generate --gpu h100 --model llama-3-8b --prompt 2048 --output 256 --batch 32

    Tensor parallelism: rooflinectl analyze generate --gpu h100 --model llama-3-70b --tp 4 --batch 32

    The static batch: rooflinectl analyze generate --gpu h100 --batch 32 --stack roofline --no-chunked-prefill
    """
    one_format(json, csv)
    from .. import api

    result = api.generate(gpu=gpu, prompt=prompt, output=output, batch=batch, reserve_gib=reserve_gib, stack=stack,
                          chunked_prefill=chunked_prefill, max_num_batched_tokens=max_num_batched_tokens,
                          calibrated=calibrated, tp=tp, ep=ep, pp=pp, model=model, dtype=dtype, kv_dtype=kv_dtype,
                          weight_dtype=weight_dtype, act_dtype=act_dtype, group_size=group_size,
                          attention=attention, fuse=fuse)
    if json:
        print_json(result.to_dict())
    elif csv:
        from ..render.csvout import generation_csv

        print(generation_csv(result.generation), end="")
    else:
        from ..render.generate import print_generation

        print_generation(console(), result.generation, result.largest_batch)
