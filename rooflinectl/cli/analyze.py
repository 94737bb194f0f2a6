"""``rooflinectl analyze``: every operation of one inference step placed on a GPU's roofline."""

from __future__ import annotations

import typer

from . import options as opt
from ._app import DEFAULT_GPU, app, command, console, one_format, print_json
from .options import workload_overrides
from .routing import routed


@command(app, cls=routed(generate=".generate:generate_app"))
def analyze(
    workload: str = typer.Argument("decode", help="A phase (decode, prefill, attention) or a workload YAML file."),
    gpu: opt.Gpu = DEFAULT_GPU,
    model: opt.Model = None,
    batch: opt.Batch = None,
    seq_len: opt.SeqLen = None,
    context: opt.Context = None,
    dtype: opt.Dtype = None,
    kv_dtype: opt.KvDtype = None,
    weight_dtype: opt.WeightDtype = None,
    act_dtype: opt.ActDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    causal: opt.Causal = None,
    fuse: opt.Fuse = None,
    experts_touched: opt.ExpertsTouched = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    json: opt.Json = False,
    csv: opt.Csv = False,
) -> None:
    """Place every operation of one inference step on a GPU's roofline.

    Example: rooflinectl analyze decode --gpu a100 --batch 64 --context 4096

    Mixture of experts: rooflinectl analyze decode --gpu h200 --model mixtral-8x7b --batch 32 --experts-touched 6

    Quantized weights: rooflinectl analyze decode --gpu a100 --model llama-3-8b --weight-dtype int4 --group-size 128

    Tensor parallelism: rooflinectl analyze decode --gpu h100 --model llama-3-70b --tp 4 --batch 32

    Expert parallelism: rooflinectl analyze decode --gpu h200 --model deepseek-v3 --ep 8 --batch 128
    """
    one_format(json, csv)
    # The library is imported here, not at the top: `rooflinectl --help` needs none of it.
    from ..engine.parallel import Layout
    from ..engine.roofline import analyze as analyze_workload
    from ..render.analysis import analysis_json, print_analysis
    from ..specs.hardware import load_gpu
    from ..specs.workload import resolve_workload

    w = resolve_workload(
        workload, **workload_overrides(model, batch, seq_len, context, dtype, kv_dtype, attention, causal, fuse,
                                       experts_touched, weight_dtype, act_dtype, group_size)
    )
    result = analyze_workload(w, load_gpu(gpu), calibrated=calibrated, layout=Layout(tp, ep, pp))
    if json:
        print_json(analysis_json(result))
    elif csv:
        from ..render.csvout import analysis_csv

        print(analysis_csv(result), end="")
    else:
        print_analysis(console(), result)
