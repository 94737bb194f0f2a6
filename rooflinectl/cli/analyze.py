"""``rooflinectl analyze``: every operation of one inference step placed on a GPU's roofline."""

from __future__ import annotations

import typer

from . import options as opt
from ._app import DEFAULT_GPU, app, command, one_format
from .routing import routed


@command(app, cls=routed(generate=".generate:generate_app", step=".step:step_app", serve=".serve:serve_app"))
def analyze(
    workload: str = typer.Argument("decode", help="A phase (decode, prefill, attention) or a workload YAML file; "
                                   "'analyze step' takes groups of sequences."),
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
    from .. import api
    from .step import print_step

    result = api.analyze(workload, gpu=gpu, batch=batch, context=context, seq_len=seq_len, calibrated=calibrated,
                         tp=tp, ep=ep, pp=pp, model=model, dtype=dtype, kv_dtype=kv_dtype,
                         weight_dtype=weight_dtype, act_dtype=act_dtype, group_size=group_size,
                         attention=attention, causal=causal, fuse=fuse, experts_touched=experts_touched)
    print_step(result, json, csv)
