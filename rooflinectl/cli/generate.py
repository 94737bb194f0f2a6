"""``rooflinectl analyze generate``: a batch of requests served end to end, from the engine's own steps."""

from __future__ import annotations

import typer

from ..errors import UserError
from . import options as opt
from ._app import DEFAULT_GPU, command, console, one_format, print_json
from .serving import base_workload, step_analyzer

# Its own app: `analyze` hands it `analyze generate …` (cli.routing), and it is not a top-level command.
generate_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@command(generate_app, "generate")
def generate(
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    prompt: opt.Prompt = opt.DEFAULT_PROMPT,
    output: opt.Output = opt.DEFAULT_OUTPUT,
    batch: int = typer.Option(1, "--batch", "-b", help="Requests served together (one prefill, then decode)."),
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

    Example: rooflinectl analyze generate --gpu h100 --model llama-3-8b --prompt 2048 --output 256 --batch 32

    Tensor parallelism: rooflinectl analyze generate --gpu h100 --model llama-3-70b --tp 4 --batch 32
    """
    one_format(json, csv)
    from ..engine.generate import Request, generate, largest_batch
    from ..engine.memory import reserve_bytes
    from ..render.generate import memory_sum, print_generation
    from ..specs.hardware import load_gpu

    base = base_workload(model, dtype, kv_dtype, weight_dtype, act_dtype, group_size, attention, fuse)
    g = load_gpu(gpu)
    analyze_step = step_analyzer(g, calibrated, tp, ep, pp)
    reserve = reserve_bytes(g.capacity_bytes, reserve_gib)
    request = Request(prompt, output, batch)
    result = generate(base, request, analyze_step, reserve, gpus=tp * ep * pp)
    largest = largest_batch(base, prompt, output, analyze_step, reserve)
    if not result.memory.fits:
        where = g.id if tp * ep * pp == 1 else f"{g.id} at --tp {tp} --ep {ep} --pp {pp} (per GPU)"
        raise UserError(f"batch {batch:,} does not fit on {where}: "
                        f"{memory_sum(result.memory, batch, request.longest_context)}; largest batch that fits: "
                        f"{largest:,} (--reserve-gib sets the reserve)")
    if json:
        from ..render.generate import generation_json

        print_json(generation_json(result, largest))
    elif csv:
        from ..render.csvout import generation_csv

        print(generation_csv(result), end="")
    else:
        print_generation(console(), result, largest)
