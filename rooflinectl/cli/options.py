"""The options the commands share, each written once as a typer ``Annotated`` alias: a command declares
``model: opt.Model = None`` and its default, and the flag, its short name and its help read the same in every
``--help``. What one command alone takes stays in that command's module. Only typer and the data types' names
(``specs.dtypes``, which loads no pydantic) are imported here: the commands import the library inside their
functions, and ``rooflinectl --help`` stays light. A help that lists choices reads them from their one source.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..serving import defaults
from ..specs.choices import ATTENTION_IMPLS, FUSIONS
from ..specs.dtypes import ACT_DTYPES, DEFAULT_GROUP_SIZE, DTYPES, GROUPED_WEIGHT_DTYPES, WEIGHT_DTYPES

# --- the GPU ---------------------------------------------------------------------------------------------------

Gpu = Annotated[str, typer.Option("--gpu", "-g", help="GPU id, alias or YAML path (see 'hardware list').")]
# The serving commands (compare, plot pareto): a GPU each, repeated.
Gpus = Annotated[
    list[str] | None, typer.Option("--gpu", "-g", help="GPU id, alias or YAML path; repeat to compare GPUs.")
]

# --- the workload: model, sizes, data types, attention, fusions -------------------------------------------------

Model = Annotated[
    str | None, typer.Option("--model", "-m", help="Model id, model YAML, or a local Hugging Face config.json.")
]
Batch = Annotated[int | None, typer.Option("--batch", "-b", help="Sequences in the batch.")]
SeqLen = Annotated[int | None, typer.Option("--seq-len", "-s", help="Prompt tokens per sequence (prefill, attention).")]
Context = Annotated[int | None, typer.Option("--context", "-c", help="KV positions a decode step attends to.")]
Dtype = Annotated[str | None, typer.Option(
    "--dtype", help=f"Weights and activations: {', '.join(DTYPES)} (an explicit --weight-dtype or --act-dtype "
    "overrides it for its own part).",
)]
# explore's: it has no --weight-dtype or --act-dtype (its model key changes the model, not its data types).
DtypeAll = Annotated[str | None, typer.Option(
    "--dtype", help=f"Weights, activations and (unless --kv-dtype) the KV cache: {', '.join(DTYPES)}.",
)]
WeightDtype = Annotated[str | None, typer.Option(
    "--weight-dtype", help=f"The linear layers' weights: {', '.join(WEIGHT_DTYPES)}, scales counted (int4_zp: "
    "int4 with AWQ's zero points) (default: --dtype; embedding, LM head, norms and router stay in the activations' "
    "type).",
)]
ActDtype = Annotated[str | None, typer.Option(
    "--act-dtype", help=f"Activations, and the matmuls' tensor cores: {', '.join(ACT_DTYPES)} (fp8 or int8: w8a8; "
    "fp4: with mxfp4 or nvfp4 weights) (default: --dtype).",
)]
GroupSize = Annotated[int | None, typer.Option(
    "--group-size", help=f"{' and '.join(GROUPED_WEIGHT_DTYPES)} weights: weights per fp16 scale (default "
    f"{DEFAULT_GROUP_SIZE}).",
)]
KvDtype = Annotated[str | None, typer.Option(
    "--kv-dtype", help=f"KV cache data type: {', '.join(DTYPES)} (default: --dtype).",
)]
Attention = Annotated[str | None, typer.Option("--attention", help=f"{' or '.join(ATTENTION_IMPLS)}: the "
                                                "scores through HBM (three kernels) or on chip (one).")]
Causal = Annotated[bool | None, typer.Option("--causal/--no-causal", help="Causal mask (flash skips masked scores).")]
Fuse = Annotated[str | None, typer.Option(
    "--fuse", help=f"Comma-separated fusions: {', '.join(FUSIONS)} ('' for none)."
)]
ExpertsTouched = Annotated[int | None, typer.Option(
    "--experts-touched", help="Mixture of experts: distinct experts each MoE layer reads in the step, where "
    "routing is skewed (k to E; default: the uniform expectation E·(1 − (1 − k/E)^tokens)).",
)]

# --- the time model and the layout over GPUs --------------------------------------------------------------------

Calibrated = Annotated[bool, typer.Option(
    "--calibrated", help="Use the GPU file's measured ceilings as roofs, and its calibrated op model "
    "(measured.op_model), where it has one, for each op's time.",
)]
Tp = Annotated[int, typer.Option(
    "--tp", help="Tensor parallelism: GPUs one copy of the model is split over (Megatron layout); every figure "
    "is then one GPU's, with the all-reduces over the GPU file's interconnect (modelled, not measured).",
)]
# The serving commands (compare, plot pareto): a row or a curve per degree.
Tps = Annotated[list[int] | None, typer.Option(
    "--tp", help="Tensor parallelism: GPUs one copy of the model is split over (Megatron layout); repeat for a row "
    "per GPU and degree (default 1).",
)]
Ep = Annotated[int, typer.Option(
    "--ep", help="Expert parallelism (a mixture of experts): GPUs the experts are spread over, attention "
    "data-parallel (DeepSeek's layout), with the all-to-all dispatch and combine (modelled, not measured).",
)]
Pp = Annotated[int, typer.Option(
    "--pp", help="Pipeline parallelism: stages of L/pp layers, one a GPU (with --tp); memory per stage, the "
    "step's pass through every stage, and the bubble stated.",
)]

# --- a request (analyze generate, compare, plot pareto) ---------------------------------------------------------

# The request the serving commands size when none is given.
DEFAULT_PROMPT = defaults.PROMPT
DEFAULT_OUTPUT = defaults.OUTPUT
Prompt = Annotated[int, typer.Option("--prompt", "-p", help="Prompt tokens per request.")]
Output = Annotated[int, typer.Option("--output", help="Tokens each request generates (the first by the prefill).")]
# How the batch is served: simulated (a closed batch, serving.batch) or the static batch.
BatchStack = Annotated[str, typer.Option("--stack", help="The serving stack whose costs the simulated batch pays "
                                         "(an id of stacks/ or a YAML path; default roofline, no cost beyond the "
                                         "ops' roofline times).")]
BatchChunkedPrefill = Annotated[bool, typer.Option(
    "--chunked-prefill/--no-chunked-prefill", help="Simulate the batch as a serving engine runs it: prompts in "
    "chunks of the token budget beside the decodes of those already prefilled (default). --no-chunked-prefill "
    "prefills every prompt in one step; with --stack roofline that is the static batch of earlier releases.")]
BatchBudget = Annotated[int | None, typer.Option(
    "--max-num-batched-tokens", help="Tokens one simulated step may compute with chunked prefill (default: the stack's, "
    f"else vLLM's {defaults.MAX_NUM_BATCHED_TOKENS:,}); it also sizes the activations the memory check counts.")]
Reserve = Annotated[float | None, typer.Option(
    "--reserve-gib", help="HBM the framework holds beyond weights, KV cache and activations (CUDA context, "
    "workspaces, CUDA graphs, fragmentation); default 10% of the GPU's, as vLLM's --gpu-memory-utilization 0.9.",
)]

# --- what is printed ---------------------------------------------------------------------------------------------

Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]
Csv = Annotated[bool, typer.Option("--csv", help="Print the table as CSV (numbers with all their digits).")]


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
) -> dict[str, Any]:
    """The workload options as ``resolve_workload``'s keyword overrides (None: not given, the scenario's), by
    the API's one rule (``api.step_options``). ``experts_touched`` is analyze's alone: a sweep of batch or length
    (plot, explore) changes the tokens of the step, and with them the experts that can be touched, so there the
    uniform expectation is the count."""
    from ..api.common import step_options

    return dict(batch=batch, seq_len=seq_len, context=context,
                **step_options(model=model, dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                               act_dtype=act_dtype, group_size=group_size, attention=attention, causal=causal,
                               fuse=fuse, experts_touched=experts_touched))


# --- a serving simulation (analyze serve, plot serve) -------------------------------------------------------------

ServePrompt = Annotated[str | None, typer.Option("--prompt", help="Prompt tokens: a number, uniform:A-B or "
                                                                   f"normal:MEAN,SD (default {defaults.PROMPT}; a trace's own).")]
ServeOutput = Annotated[str | None, typer.Option("--output", help="Output tokens: a number, uniform:A-B or "
                                                                   f"normal:MEAN,SD (default {defaults.OUTPUT}; a trace's own).")]
Requests = Annotated[int | None, typer.Option("--requests", help=f"Requests in a run (default max("
                                               f"{defaults.REQUESTS}, {defaults.REQUESTS_PER_CLIENT} × concurrency) in "
                                               f"a closed loop, {defaults.REQUESTS} in an open loop).")]
Seed = Annotated[int, typer.Option("--seed", help="Seed of the drawn lengths and arrivals.")]
MaxBatchedTokens = Annotated[int | None, typer.Option(
    "--max-num-batched-tokens", help=f"Tokens one step may compute (default: the stack's, else vLLM's "
    f"{defaults.MAX_NUM_BATCHED_TOKENS:,}).")]
MaxSeqs = Annotated[int, typer.Option("--max-num-seqs", help=f"Sequences one step may hold (vLLM's "
                                                             f"{defaults.MAX_NUM_SEQS}).")]
ChunkedPrefill = Annotated[bool, typer.Option("--chunked-prefill/--no-chunked-prefill",
                                              help="Prefill prompts in chunks beside decodes (vLLM's default).")]
PrefillSteps = Annotated[str | None, typer.Option(
    "--prefill-steps", help="mixed: prompt chunks in the decodes' step (vLLM, TensorRT-LLM); separate: a step of "
    "prompts whenever one can be formed, else of decodes (SGLang). Default: the stack's.")]
BlockSize = Annotated[int, typer.Option("--block-size", help=f"Positions a KV block holds (vLLM's "
                                                                 f"{defaults.BLOCK_SIZE}).")]
Stack = Annotated[str, typer.Option("--stack", help="The serving stack's costs beyond the roofline: a fixed cost a "
                                    "step, a gap a kernel, the bandwidth and peak its kernels reach, its fusions (an "
                                    "id of stacks/, or a YAML path; default roofline, the floor).")]
