"""``rooflinectl analyze``: every operation of one inference step placed on a GPU's roofline."""

from __future__ import annotations

import typer

from ..engine.roofline import analyze as analyze_workload
from ..render.analysis import analysis_json, print_analysis
from ..specs.workload import resolve_workload
from ._app import DEFAULT_GPU, app, command, console, print_json, split_list

# Options shared by the commands that take a workload (analyze, plot, explore).
GPU_OPTION = typer.Option(DEFAULT_GPU, "--gpu", "-g", help="GPU id, alias or YAML path (see 'hardware list').")
MODEL_OPTION = typer.Option(None, "--model", "-m", help="Model id, model YAML, or a local Hugging Face config.json.")
BATCH_OPTION = typer.Option(None, "--batch", "-b", help="Sequences in the batch.")
SEQ_LEN_OPTION = typer.Option(None, "--seq-len", "-s", help="Prompt tokens per sequence (prefill, attention).")
CONTEXT_OPTION = typer.Option(None, "--context", "-c", help="KV positions a decode step attends to.")
DTYPE_OPTION = typer.Option(None, "--dtype", help="Weights and activations: fp32, bf16, fp16, fp8, int8.")
KV_DTYPE_OPTION = typer.Option(None, "--kv-dtype", help="KV cache data type (default: --dtype).")
ATTENTION_OPTION = typer.Option(None, "--attention", help="naive (scores through HBM) or flash (on chip).")
CAUSAL_OPTION = typer.Option(None, "--causal/--no-causal", help="Causal mask (flash skips masked scores).")
FUSE_OPTION = typer.Option(
    None, "--fuse", help="Comma-separated fusions: qkv, gate_up, norm_linear, act, residual ('' for none)."
)
CALIBRATED_OPTION = typer.Option(False, "--calibrated", help="Use the GPU file's measured ceilings as roofs.")


def workload_overrides(model, batch, seq_len, context, dtype, kv_dtype, attention, causal, fuse) -> dict:
    return dict(
        model=model,
        batch=batch,
        seq_len=seq_len,
        context=context,
        dtype=dtype,
        kv_dtype=kv_dtype,
        attention=attention,
        causal=causal,
        fused=split_list(fuse, "--fuse") if fuse is not None else None,
    )


@command(app)
def analyze(
    workload: str = typer.Argument("decode", help="A phase (decode, prefill, attention) or a workload YAML file."),
    gpu: str = GPU_OPTION,
    model: str = MODEL_OPTION,
    batch: int = BATCH_OPTION,
    seq_len: int = SEQ_LEN_OPTION,
    context: int = CONTEXT_OPTION,
    dtype: str = DTYPE_OPTION,
    kv_dtype: str = KV_DTYPE_OPTION,
    attention: str = ATTENTION_OPTION,
    causal: bool = CAUSAL_OPTION,
    fuse: str = FUSE_OPTION,
    calibrated: bool = CALIBRATED_OPTION,
    json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
):
    """Place every operation of one inference step on a GPU's roofline.

    Example: rooflinectl analyze decode --gpu a100 --batch 64 --context 4096
    """
    from ..specs.hardware import load_gpu

    w = resolve_workload(
        workload, **workload_overrides(model, batch, seq_len, context, dtype, kv_dtype, attention, causal, fuse)
    )
    result = analyze_workload(w, load_gpu(gpu), calibrated=calibrated)
    if json:
        print_json(analysis_json(result))
    else:
        print_analysis(console(), result)
