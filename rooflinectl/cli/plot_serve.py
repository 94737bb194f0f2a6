"""``rooflinectl plot serve``: a serving engine's latency percentiles against its load, and its batch and KV
cache over time, from one simulation per load (``analyze serve``)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..errors import UserError
from ..serving import defaults
from . import options as opt
from ._app import DEFAULT_GPU, command, one_format, print_json, split_ints

# Its own app: `plot` hands it `plot serve …` (cli.routing).
plot_serve_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

# The most loads one chart simulates: each is a full run, and the lines stay readable.
MAX_LOADS = 12


@command(plot_serve_app, "serve")
def plot_serve(
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    concurrency: str = typer.Option(None, "--concurrency", help="Comma-separated clients of closed loops, a run "
                                    "each (default 1,8,32,128)."),
    rate: str = typer.Option(None, "--rate", help="Comma-separated request rates (Poisson), a run each."),
    prompt: opt.ServePrompt = None,
    output: opt.ServeOutput = None,
    requests: opt.Requests = None,
    seed: opt.Seed = 0,
    max_num_batched_tokens: opt.MaxBatchedTokens = None,
    max_num_seqs: opt.MaxSeqs = defaults.MAX_NUM_SEQS,
    chunked_prefill: opt.ChunkedPrefill = True,
    block_size: opt.BlockSize = defaults.BLOCK_SIZE,
    stack: opt.Stack = "roofline",
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
    pp: opt.Pp = 1,
    chart: Path = typer.Option(Path("serve.png"), "-o", "--chart", help="The file to write: .png, .svg or .pdf."),
    json: bool = typer.Option(False, "--json", help="Print every run's results (as analyze serve --json) as JSON."),
) -> None:
    """A serving engine's TTFT and TPOT percentiles against its load (a simulated run per load), and the most
    loaded run's batch and KV cache over time.

    Example: rooflinectl plot serve --gpu h100 --model llama-3-8b --concurrency 1,8,32,128 -o serve.png

    Open loop: rooflinectl plot serve --gpu h200 --rate 1,2,4,8 --prompt uniform:512-4096 --output 256
    """
    one_format(json, False)
    from ..plot.chart import check_output

    check_output(chart, "serve.png")
    if concurrency is not None and rate is not None:
        raise UserError("--concurrency and --rate: give one list of loads")
    # Each load once, in order, as plot's sweeps take their values: a repeat would simulate the same run twice.
    if rate is not None:
        rates = sorted({_rate(v) for v in rate.split(",")})
        loads = [{"rate": r} for r in rates]
    else:
        # None: the default loads; "" is refused by split_ints, not taken for them
        loads = [{"concurrency": c} for c in sorted(set(split_ints("1,8,32,128" if concurrency is None
                                                                   else concurrency, "--concurrency")))]
    if len(loads) > MAX_LOADS:
        raise UserError(f"{len(loads)} loads: one chart simulates at most {MAX_LOADS}")
    from .. import api
    from ..plot.serve import draw_serve
    from ..render.console import say
    from ..units import plural

    runs = [api.serve(gpu=gpu, **load, prompt=prompt, output=output, requests=requests, seed=seed,
                      max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                      chunked_prefill=chunked_prefill, block_size=block_size, reserve_gib=reserve_gib, stack=stack,
                      calibrated=calibrated, tp=tp, pp=pp, model=model, dtype=dtype, kv_dtype=kv_dtype,
                      weight_dtype=weight_dtype, act_dtype=act_dtype, group_size=group_size, attention=attention,
                      fuse=fuse) for load in loads]
    first = runs[0].simulation
    title = (f"{first.base.model.id} on {first.gpu.name}, prompt {first.prompt_text}, output {first.output_text}, "
             f"stack {first.stack.id}")
    draw_serve([r.simulation for r in runs], title, chart)
    if json:
        print_json({"chart": str(chart), "runs": [r.to_dict() for r in runs]})
    else:
        say(f"wrote {chart} ({plural(len(runs), 'run')})")


def _rate(text: str) -> float:
    from ..units import real_number

    rate = real_number(text)
    if rate is None:
        raise UserError(f"--rate '{text[:40]}': give requests per second, e.g. 1,2,4")
    return rate
