"""``rooflinectl analyze``: every operation of one inference step placed on a GPU's roofline."""

from __future__ import annotations

import typer

from ._app import app, command, console, one_format, print_json
from .options import (
    ACT_DTYPE_OPTION,
    ATTENTION_OPTION,
    BATCH_OPTION,
    CALIBRATED_OPTION,
    CAUSAL_OPTION,
    CONTEXT_OPTION,
    CSV_OPTION,
    DTYPE_OPTION,
    EP_OPTION,
    EXPERTS_TOUCHED_OPTION,
    FUSE_OPTION,
    GPU_OPTION,
    GROUP_SIZE_OPTION,
    JSON_OPTION,
    KV_DTYPE_OPTION,
    MODEL_OPTION,
    PP_OPTION,
    SEQ_LEN_OPTION,
    TP_OPTION,
    WEIGHT_DTYPE_OPTION,
    workload_overrides,
)
from .routing import routed


@command(app, cls=routed(generate=".generate:generate_app"))
def analyze(
    workload: str = typer.Argument("decode", help="A phase (decode, prefill, attention) or a workload YAML file."),
    gpu: str = GPU_OPTION,
    model: str = MODEL_OPTION,
    batch: int = BATCH_OPTION,
    seq_len: int = SEQ_LEN_OPTION,
    context: int = CONTEXT_OPTION,
    dtype: str = DTYPE_OPTION,
    kv_dtype: str = KV_DTYPE_OPTION,
    weight_dtype: str = WEIGHT_DTYPE_OPTION,
    act_dtype: str = ACT_DTYPE_OPTION,
    group_size: int = GROUP_SIZE_OPTION,
    attention: str = ATTENTION_OPTION,
    causal: bool = CAUSAL_OPTION,
    fuse: str = FUSE_OPTION,
    experts_touched: int = EXPERTS_TOUCHED_OPTION,
    calibrated: bool = CALIBRATED_OPTION,
    tp: int = TP_OPTION,
    ep: int = EP_OPTION,
    pp: int = PP_OPTION,
    json: bool = JSON_OPTION,
    csv: bool = CSV_OPTION,
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
