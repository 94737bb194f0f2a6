"""The options shared by the commands that take a workload (analyze, plot, explore, occupancy's --gpu).

One definition each, so that a flag reads the same in every command's ``--help``. Only typer is imported here:
the commands import the library inside their functions, and ``rooflinectl --help`` stays light.
"""

from __future__ import annotations

import typer

from ._app import DEFAULT_GPU, split_list

GPU_OPTION = typer.Option(DEFAULT_GPU, "--gpu", "-g", help="GPU id, alias or YAML path (see 'hardware list').")
MODEL_OPTION = typer.Option(None, "--model", "-m", help="Model id, model YAML, or a local Hugging Face config.json.")
BATCH_OPTION = typer.Option(None, "--batch", "-b", help="Sequences in the batch.")
SEQ_LEN_OPTION = typer.Option(None, "--seq-len", "-s", help="Prompt tokens per sequence (prefill, attention).")
CONTEXT_OPTION = typer.Option(None, "--context", "-c", help="KV positions a decode step attends to.")
DTYPE_OPTION = typer.Option(
    None, "--dtype", help="Weights and activations: fp32, bf16, fp16, fp8, int8 (an explicit --weight-dtype or "
    "--act-dtype overrides it for its own part).",
)
WEIGHT_DTYPE_OPTION = typer.Option(
    None, "--weight-dtype", help="The linear layers' weights: bf16, fp16, fp8, fp8_block, int8, int4, int4_zp (int4 "
    "with AWQ's zero points), mxfp4, nvfp4, scales counted (default: --dtype; embedding, LM head, norms and router "
    "stay in the activations' type).",
)
ACT_DTYPE_OPTION = typer.Option(
    None, "--act-dtype", help="Activations, and the matmuls' tensor cores: bf16, fp16, fp8 or int8 (w8a8), fp4 "
    "(with mxfp4 or nvfp4 weights) (default: --dtype).",
)
GROUP_SIZE_OPTION = typer.Option(None, "--group-size", help="int4 and int4_zp weights: weights per fp16 scale (default 128).")
KV_DTYPE_OPTION = typer.Option(None, "--kv-dtype", help="KV cache data type (default: --dtype).")
ATTENTION_OPTION = typer.Option(None, "--attention", help="naive (scores through HBM) or flash (on chip).")
CAUSAL_OPTION = typer.Option(None, "--causal/--no-causal", help="Causal mask (flash skips masked scores).")
FUSE_OPTION = typer.Option(
    None, "--fuse", help="Comma-separated fusions: qkv, gate_up, norm_linear, act, residual ('' for none)."
)
EXPERTS_TOUCHED_OPTION = typer.Option(
    None, "--experts-touched", help="Mixture of experts: distinct experts each MoE layer reads in the step, where "
    "routing is skewed (k to E; default: the uniform expectation E·(1 − (1 − k/E)^tokens)).",
)
CALIBRATED_OPTION = typer.Option(False, "--calibrated", help="Use the GPU file's measured ceilings as roofs, and its "
                                 "calibrated op model (measured.op_model), where it has one, for each op's time.")
JSON_OPTION = typer.Option(False, "--json", help="Print the result as JSON.")
EP_OPTION = typer.Option(
    1, "--ep", help="Expert parallelism (a mixture of experts): GPUs the experts are spread over, attention "
    "data-parallel (DeepSeek's layout), with the all-to-all dispatch and combine (modelled, not measured).",
)
PP_OPTION = typer.Option(
    1, "--pp", help="Pipeline parallelism: stages of L/pp layers, one a GPU (with --tp); memory per stage, the "
    "step's pass through every stage, and the bubble stated.",
)
TP_OPTION = typer.Option(
    1, "--tp", help="Tensor parallelism: GPUs one copy of the model is split over (Megatron layout); every figure "
    "is then one GPU's, with the all-reduces over the GPU file's interconnect (modelled, not measured).",
)
CSV_OPTION = typer.Option(False, "--csv", help="Print the table as CSV (numbers with all their digits).")


def workload_overrides(
    model: str | None,
    batch: int | None,
    seq_len: int | None,
    context: int | None,
    dtype: str | None,
    kv_dtype: str | None,
    attention: str | None,
    causal: bool | None,
    fuse: str | None,
    experts_touched: int | None = None,
    weight_dtype: str | None = None,
    act_dtype: str | None = None,
    group_size: int | None = None,
) -> dict:
    """The workload options as ``resolve_workload``'s keyword overrides (None: not given, the scenario's).
    ``experts_touched`` is analyze's alone: a sweep of batch or length (plot, explore) changes the tokens of the
    step, and with them the experts that can be touched, so there the uniform expectation is the count."""
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
        experts_touched=experts_touched,
        weight_dtype=weight_dtype,
        act_dtype=act_dtype,
        group_size=group_size,
    )
