"""``rooflinectl analyze serve``: a serving engine simulated step by step (continuous batching, chunked prefill, a
paged KV cache) under a load."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import typer

from ..serving import defaults
from . import options as opt
from ._app import DEFAULT_GPU, command, console, one_format, print_json

# Its own app: `analyze` hands it `analyze serve …` (cli.routing), and it is not a top-level command.
serve_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@command(serve_app, "serve")
def serve(
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    concurrency: int = typer.Option(None, "--concurrency", help="Clients in a closed loop: each sends its next "
                                    "request when its last one finishes (default 1)."),
    rate: float = typer.Option(None, "--rate", help="Requests per second arriving as a Poisson process (open loop)."),
    trace: str = typer.Option(None, "--trace", help="A trace file: JSON lines or CSV of arrival_s, prompt, output "
                                                     "(arrivals counted from the first)."),
    prompt: opt.ServePrompt = None,
    output: opt.ServeOutput = None,
    requests: opt.Requests = None,
    seed: opt.Seed = 0,
    max_num_batched_tokens: opt.MaxBatchedTokens = None,
    max_num_seqs: opt.MaxSeqs = defaults.MAX_NUM_SEQS,
    chunked_prefill: opt.ChunkedPrefill = True,
    prefill_steps: opt.PrefillSteps = None,
    block_size: opt.BlockSize = defaults.BLOCK_SIZE,
    stack: opt.Stack = "roofline",
    slo_ttft_ms: float = typer.Option(None, "--slo-ttft-ms", help="A TTFT target: goodput counts the requests "
                                      "that meet it."),
    slo_tpot_ms: float = typer.Option(None, "--slo-tpot-ms", help="A TPOT target for goodput."),
    spec: str = typer.Option(None, "--spec", help="Speculative decoding: draft:MODEL:K (a draft model), mtp:K "
                             "(the model's multi-token-prediction module, where its checkpoint ships one: "
                             "DeepSeek-V3, GLM-4.5, MiniMax-M2, Qwen3-Next) or ngram:K (prompt lookup), K drafts a step."),
    accept: str = typer.Option(None, "--accept", help="With --spec: the chance a draft is accepted, 0.7, or per "
                               "position 0.8,0.6,0.4 (each given the ones before it were)."),
    shared_prefix: int = typer.Option(None, "--shared-prefix", help="Every prompt's first TOKENS are the same: "
                                      "prefilled once, their KV blocks shared (prefix caching)."),
    price_per_gpu_hour: float = typer.Option(None, "--price-per-gpu-hour", help="Dollars per GPU-hour: gives "
                                             "dollars per million input and output tokens at the run's throughput."),
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
    replicas: int = typer.Option(1, "--replicas", help="Copies of the model, each an engine on its own GPUs "
                                 "(data parallel): requests go to the least loaded."),
    disagg: str = typer.Option(None, "--disagg", help="P:D: P prefill replicas and D decode replicas apart, each "
                               "request's KV cache moved from one to the other over the interconnect."),
    prefill_tp: int = typer.Option(None, "--prefill-tp", help="With --disagg: a prefill replica's TP (default --tp)."),
    prefill_ep: int = typer.Option(None, "--prefill-ep", help="With --disagg: a prefill replica's EP (default --ep)."),
    decode_tp: int = typer.Option(None, "--decode-tp", help="With --disagg: a decode replica's TP (default --tp)."),
    decode_ep: int = typer.Option(None, "--decode-ep", help="With --disagg: a decode replica's EP (default --ep)."),
    prefill_max_num_batched_tokens: int = typer.Option(None, "--prefill-max-num-batched-tokens", help="With "
                                                       "--disagg: a prefill step's token budget (default "
                                                       "--max-num-batched-tokens)."),
    prefill_max_num_seqs: int = typer.Option(None, "--prefill-max-num-seqs", help="With --disagg: a prefill step's "
                                             "sequence limit (default --max-num-seqs)."),
    kv_transfer: str = typer.Option("after", "--kv-transfer", help="With --disagg: send a request's KV 'after' its "
                                    "prefill (the default, as vLLM, SGLang and TensorRT-LLM do) or 'overlap' it with "
                                    "the prefill layer by layer."),
    json: opt.Json = False,
    csv: opt.Csv = False,
) -> None:
    """Simulate a serving engine step by step: requests arrive, a scheduler with a token budget batches decodes
    with chunks of new prompts, a paged KV cache holds them (preempting by recompute when it is full), and each
    step takes the roofline time of its ops. TTFT, TPOT, ITL and E2E (mean, p50, p90, p99), throughput, goodput.

    Example: rooflinectl analyze serve --gpu h100 --model llama-3-8b --concurrency 32 --prompt 2048 --output 256

    Open loop: rooflinectl analyze serve --gpu h200 --rate 4 --prompt uniform:512-4096 --output 256

    Prefix caching: rooflinectl analyze serve --gpu h100 --concurrency 16 --prompt 2048 --shared-prefix 1536

    Speculative decoding: rooflinectl analyze serve --gpu h200 --model deepseek-v3 --weight-dtype fp8_block --tp 8
    --spec mtp:1 --accept 0.85

    Data-parallel attention: rooflinectl analyze serve --gpu h200 --model deepseek-v3 --weight-dtype fp8_block --ep 8

    Disaggregated: rooflinectl analyze serve --gpu h100 --model llama-3.1-70b --disagg 1:3 --tp 2 --concurrency 64
    """
    one_format(json, csv)
    from .. import api

    bar = _progress(json or csv)
    with bar as tick:
        result = api.serve(gpu=gpu, concurrency=concurrency, rate=rate, trace=trace, prompt=prompt, output=output,
                           requests=requests, seed=seed, max_num_batched_tokens=max_num_batched_tokens,
                           max_num_seqs=max_num_seqs, chunked_prefill=chunked_prefill, block_size=block_size,
                           prefill_steps=prefill_steps,
                           reserve_gib=reserve_gib, stack=stack, slo_ttft_ms=slo_ttft_ms,
                           slo_tpot_ms=slo_tpot_ms, calibrated=calibrated, tp=tp, ep=ep, pp=pp, progress=tick,
                           replicas=replicas, disagg=disagg, prefill_tp=prefill_tp, prefill_ep=prefill_ep,
                           decode_tp=decode_tp, decode_ep=decode_ep, kv_transfer=kv_transfer,
                           prefill_max_num_batched_tokens=prefill_max_num_batched_tokens,
                           prefill_max_num_seqs=prefill_max_num_seqs,
                           spec=spec, accept=accept, shared_prefix=shared_prefix,
                           price_per_gpu_hour=price_per_gpu_hour,
                           model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                           act_dtype=act_dtype, group_size=group_size, attention=attention, fuse=fuse)
    if json:
        print_json(result.to_dict())
    elif csv:
        from ..render.csvout import to_csv
        from ..render.serve import serve_rows

        print(to_csv(serve_rows(result.simulation), ("metric", "mean", "p50", "p90", "p99")), end="")
    else:
        from ..render.serve import print_serve

        print_serve(console(), result.simulation)


def _progress(quiet: bool) -> Any:
    """A context whose value is told each finished request: a rich progress bar on a terminal, silence
    otherwise (--json, --csv, a pipe)."""
    import contextlib
    import sys

    if quiet or not sys.stderr.isatty():
        return contextlib.nullcontext(None)
    from rich.progress import Progress

    @contextlib.contextmanager
    def bar() -> Iterator[Callable[[int], None]]:
        with Progress(transient=True, console=None) as p:
            task = p.add_task("simulating", total=None)
            yield lambda done: p.update(task, completed=done)

    return bar()
