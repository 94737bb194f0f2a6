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


def check_supported(w: Workload) -> None:
    """A UserError naming the first feature of ``w`` that measure --workload cannot run as the engine counts it."""
    m = w.model
    if w.phase not in ("decode", "prefill"):
        raise _refuse(w, f"the {w.phase} phase", "it times a decode or a prefill step")
    if m.mla is not None:
        raise _refuse(w, "multi-head latent attention", "no runner for MLA's absorbed attention")
    if m.moe is not None:
        raise _refuse(w, "a mixture of experts", "no runner for the router and the grouped expert matmuls")
    if w.quantized or w.weight_dtype not in (None, w.dtype) or w.act_dtype not in (None, w.dtype):
        raise _refuse(w, "quantized weights or activations", "F.linear multiplies in the activations' type; "
                                                             "a quantized GEMM is another kernel")
    if w.dtype not in RUNNABLE_DTYPES:
        raise _refuse(w, f"--dtype {w.dtype}", f"runs {', '.join(RUNNABLE_DTYPES)}")
    if w.kv_dtype != w.dtype:
        raise _refuse(w, f"a {w.kv_dtype} KV cache beside {w.dtype} activations", "SDPA reads K and V in Q's type")
    features = [
        (m.norm != "rmsnorm", f"{m.norm}", "the runners are RMSNorm's"),
        (m.mlp != "gated_silu", f"the {m.mlp} MLP", "the runner is SiLU(gate)·up"),
        (m.post_norms, "post norms", "no runner places them"),
        (m.qk_norm, "Q/K norms", "no runner places them"),
        (m.attention_sinks, "attention sinks", "SDPA has no sink logits"),
        (m.attn_logit_softcapping is not None, "attention logit soft-capping", "SDPA has no soft cap"),
        (m.final_logit_softcapping is not None, "final logit soft-capping", "F.linear has no soft cap"),
        (m.scale_embeddings, "scaled embeddings", "the gather's runner does not scale"),
        (m.o_bias or m.mlp_bias, "biases on o_proj or the MLP", "only the Q, K, V biases are run"),
        (m.rotary != m.head_dim, "partial rotary embeddings", "the RoPE runner rotates whole heads"),
        (m.head_dim % 2 != 0, "an odd head_dim", "RoPE rotates pairs"),
    ]
    for present, what, why in features:
        if present:
            raise _refuse(w, what, why)
    if "act" in w.fused:
        raise _refuse(w, "--fuse act", "no PyTorch or cuBLAS kernel puts SiLU(gate)·up in a GEMM's epilogue")
    if w.attention == "naive" and w.phase != "decode":
        raise _refuse(w, "naive attention in a prefill", "its causal mask and Q/O layouts need kernels the "
                                                          "engine's qk, softmax and pv do not count")
    if m.sliding_window is not None and m.sliding_layers and w.phase == "prefill" \
            and w.tokens_per_seq > m.sliding_window:
        raise _refuse(w, f"a prefill of {w.tokens_per_seq} tokens through a sliding window of {m.sliding_window}",
                      "SDPA's is_causal cannot express the window, and a mask would compute every score")
