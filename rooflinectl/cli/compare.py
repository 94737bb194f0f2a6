"""``rooflinectl compare``: one request on several GPUs, side by side."""

from __future__ import annotations

import typer

from ..serving import defaults
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
    replicas: list[int] = typer.Option(None, "--replicas", help="N > 1: a row per GPU and TP degree of N "
                                       "aggregated copies of the model (analyze serve --replicas N); repeatable."),
    disagg: list[str] = typer.Option(None, "--disagg", help="P:D: a row per GPU of P prefill and D decode "
                                     "replicas (analyze serve --disagg P:D); repeatable."),
    prefill_tp: int = typer.Option(None, "--prefill-tp", help="With --disagg: a prefill replica's TP (default "
                                   "--tp)."),
    decode_tp: int = typer.Option(None, "--decode-tp", help="With --disagg: a decode replica's TP (default --tp)."),
    kv_transfer: str = typer.Option("after", "--kv-transfer", help="With --disagg: send a request's KV 'after' its "
                                    "prefill (the default) or 'overlap' it with the prefill layer by layer."),
    concurrency: int = typer.Option(None, "--concurrency", help="Every row a closed loop of this many clients, each "
                                    "sending its next request when its last ends (analyze serve --concurrency), "
                                    "instead of a closed batch."),
    requests: int = typer.Option(None, "--requests", help="With --concurrency: requests in all (default "
                                 f"max({defaults.REQUESTS}, {defaults.REQUESTS_PER_CLIENT} × concurrency))."),
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

    A row without numbers (the model does not fit, no batch meets --tpot-ms, --batch does not fit) says why under
    the table. Exit code 2, with one line naming each row's reason and nothing on stdout, when no row has numbers:
    the request has no answer on those GPUs (as analyze generate refuses a batch that does not fit, and plot pareto
    a model that fits on none).

    Example: rooflinectl compare --gpu a100 --gpu h100 --gpu h200 --gpu b200 --gpu mi300x --model llama-3-8b
    --tpot-ms 20

    Tensor parallelism, a row per GPU and degree: rooflinectl compare --gpu h100 --gpu h200 --model llama-3-70b
    --tp 4 --tp 8

    Cost and energy: rooflinectl compare --gpu h100 --gpu b200 --model llama-3-8b --tpot-ms 20
    --price-per-gpu-hour 2.5

    Deployments: --replicas N and --disagg P:D add rows, per GPU, simulated by analyze serve on the same load:
    N copies of each --tp layout, requests to the least loaded; P prefill replicas (--prefill-tp, default --tp)
    and D decode replicas (--decode-tp, default --tp), each request's KV moved between them (the KV xfer column:
    its time on the link). TTFT, TPOT and E2E are the requests' means; out tok/s/GPU divides by every GPU of the
    deployment (P × prefill TP + D × decode TP); $ and J per output token are the deployment's (all its GPUs paid
    for the run, each GPU's power over its busy time); the largest batch is what the replicas' KV caches hold at
    once (a disaggregated row's: its decode replicas'). --concurrency C serves every row, one engine's too, as a
    closed loop of C clients instead. Aggregated on 8 GPUs or 2 prefill + 6 decode:
    rooflinectl compare --gpu h100 --model llama-3-8b --batch 64 --replicas 8 --disagg 2:6
    """
    from .. import api
    from ..render.compare import COMPARE_FIELDS, compare_rows, compare_title, print_compare
    from ..render.csvout import to_csv

    one_format(json, csv)
    result = api.compare(gpus=gpu or [DEFAULT_GPU], prompt=prompt, output=output, batch=batch, tpot_ms=tpot_ms,
                         stack=stack, chunked_prefill=chunked_prefill, max_num_batched_tokens=max_num_batched_tokens,
                         reserve_gib=reserve_gib, calibrated=calibrated, tp=tp or [1], ep=ep, pp=pp, model=model,
                         dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype, act_dtype=act_dtype,
                         group_size=group_size, attention=attention, fuse=fuse,
                         price_per_gpu_hour=price_per_gpu_hour, replicas=replicas or [1], disagg=disagg or [],
                         prefill_tp=prefill_tp, decode_tp=decode_tp, kv_transfer=kv_transfer,
                         concurrency=concurrency, requests=requests)
    choices, names, plans = list(result.choices), list(result.names), list(result.plans)
    if json:
        print_json(result.to_dict())
    elif csv:
        print(to_csv(compare_rows(choices, names, result.method, result.workload, result.pricing, plans),
                     COMPARE_FIELDS), end="")
    else:
        title = compare_title(result.model_id, prompt, output, result.types, choices, result.method, result.load)
        print_compare(console(), choices, names, title, result.method, result.workload, result.pricing, plans,
                      result.load)
