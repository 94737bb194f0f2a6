"""What ``measure --workload`` can run faithfully, and a one-line refusal (UserError, exit 2) for the rest.

A model or op this module refuses would otherwise be timed as some other kernel than the one its count describes,
a wrong measurement. Pure: no torch. Each refusal names what is not run and why.
"""

from __future__ import annotations

from ...errors import UserError
from ...specs.workload import Workload

# The activations' data types torch runs these ops in (F.linear, SDPA and the elementwise ops).
RUNNABLE_DTYPES = ("bf16", "fp16", "fp32")


def _refuse(w: Workload, what: str, why: str) -> UserError:
    return UserError(f"measure --workload: {w.model.id}: {what} is not supported ({why})")


# The Model variants (``Model.variants``) the runners run as the engine counts them; every other variant, a new
# field included, is refused until it is added here:
#   qkv_bias                  F.linear adds the Q, K and V biases in cuBLAS's epilogue
#   sliding_window, layer_pattern   each layer's SDPA reads its own cache, the window's positions in a sliding one
#   rotary_dim                RoPE over the whole head only (a partial one is refused below)
#   tie_embeddings            the LM head is its own GEMM, tied or not
#   max_position_embeddings   a limit on the sizes, no kernel
#   weight_dtype, group_size, quantized   the checkpoint's format; the step's own (w.quantized) is checked below
#   mtp_layers                the multi-token-prediction modules draft for speculation alone: no step runs them
RUNS = ("qkv_bias", "sliding_window", "layer_pattern", "rotary_dim", "tie_embeddings", "max_position_embeddings",
        "weight_dtype", "group_size", "quantized", "mtp_layers")


def check_supported(w: Workload) -> None:
    """A UserError naming the first feature of ``w`` that measure --workload cannot run as the engine counts it."""
    m = w.model
    if w.phase not in ("decode", "prefill"):
        raise _refuse(w, f"the {w.phase} phase", "it times a decode or a prefill step")
    for name, value in m.variants().items():
        if name not in RUNS:
            raise UserError(f"measure --workload: {m.id}: no runner for {m.variant_words(name, value)} (its runners "
                            f"time a Llama-family layer)")
    if w.quantized or w.weight_dtype not in (None, w.dtype) or w.act_dtype not in (None, w.dtype):
        raise _refuse(w, "quantized weights or activations", "F.linear multiplies in the activations' type; "
                                                             "a quantized GEMM is another kernel")
    if w.dtype not in RUNNABLE_DTYPES:
        raise _refuse(w, f"--dtype {w.dtype}", f"runs {', '.join(RUNNABLE_DTYPES)}")
    if w.kv_dtype != w.dtype:
        raise _refuse(w, f"a {w.kv_dtype} KV cache beside {w.dtype} activations", "SDPA reads K and V in Q's type")
    if m.rotary != m.head_dim:
        raise _refuse(w, "partial rotary embeddings", "the RoPE runner rotates whole heads")
    if m.head_dim % 2 != 0:
        raise _refuse(w, "an odd head_dim", "RoPE rotates pairs")
    if "act" in w.fused:
        raise _refuse(w, "--fuse act", "no PyTorch or cuBLAS kernel puts SiLU(gate)·up in a GEMM's epilogue")
    if w.attention == "naive" and w.phase != "decode":
        raise _refuse(w, "naive attention in a prefill", "its causal mask and Q/O layouts need kernels the "
                                                          "engine's qk, softmax and pv do not count")
    if m.sliding_window is not None and m.sliding_layers and w.phase == "prefill" \
            and w.tokens_per_seq > m.sliding_window:
        raise _refuse(w, f"a prefill of {w.tokens_per_seq} tokens through a sliding window of {m.sliding_window}",
                      "SDPA's is_causal cannot express the window, and a mask would compute every score")
