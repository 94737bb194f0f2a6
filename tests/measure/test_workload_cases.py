"""measure --workload's cases: every engine op of a step mapped to a runner at its exact shapes, read from the op's
kind and shape fields (never its name), each case's tensors moving the engine op's bytes, and the refusals. The
engine's counts themselves are recounted by hand in test_workload_recount.py."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.measure.step.cases import Case, TensorSpec, _case, build_cases
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

FAMILIES = {"linear", "norm_linear", "rmsnorm", "rope", "kv_write", "sdpa", "qk", "softmax", "pv", "act",
            "residual", "embed"}
VARIANTS = [
    ("decode", dict(batch=16, context=4096)),
    ("decode", dict(batch=1, context=1024, attention="naive")),
    ("decode", dict(batch=64, context=4096, fused=["norm_linear"])),
    ("decode", dict(batch=8, context=2048, fused=["qkv", "gate_up", "residual"])),
    ("prefill", dict(batch=1, seq_len=2048)),
    ("prefill", dict(batch=4, seq_len=512, fused=["norm_linear", "qkv", "gate_up"])),
    ("prefill", dict(batch=2, seq_len=4096, dtype="fp16")),
]


@pytest.mark.parametrize("model", ["llama-3-8b", "qwen2.5-14b", "mistral-7b"])
@pytest.mark.parametrize("phase, sizes", VARIANTS)
def test_every_op_has_a_case_moving_the_bytes_the_engine_counts(model, phase, sizes):
    w = resolve_workload(phase, model=model, **sizes)
    ops = step_ops(w)
    cases = build_cases(w)
    assert [c.name for c in cases] == [o.name for o in ops]
    for case, op in zip(cases, ops, strict=True):
        assert case.family in FAMILIES
        assert case.count == op.count
        assert case.op == op and case.bytes == op.bytes, case.name
        assert case.dtype == w.dtype
        assert all(t.dtype in (w.dtype, "int64") for t in case.inputs)


def _by_name(cases: list[Case]) -> dict[str, Case]:
    return {c.name: c for c in cases}


def _shapes(case: Case) -> dict[str, tuple[int, ...]]:
    return {t.name: t.shape for t in case.inputs}


def test_llama_3_8b_decode_shapes_by_hand():
    # Llama 3 8B (config.json): H 4096, 32 heads, 8 KV heads, d 128, I 14336, V 128256, 32 layers.
    c = _by_name(build_cases(resolve_workload("decode", model="llama-3-8b", batch=16, context=4096)))
    assert _shapes(c["q_proj"]) == {"x": (16, 4096), "w": (4096, 4096)}
    assert _shapes(c["k_proj"]) == {"x": (16, 4096), "w": (1024, 4096)}
    assert _shapes(c["down_proj"]) == {"x": (16, 14336), "w": (4096, 14336)}
    assert _shapes(c["lm_head"]) == {"x": (16, 4096), "w": (128256, 4096)}
    assert _shapes(c["attention"]) == {"q": (16, 1, 32, 128), "k": (16, 8, 4096, 128), "v": (16, 8, 4096, 128)}
    assert c["attention"].outputs == ((16, 32, 1, 128),)
    assert c["attention"].params == {"causal": False}  # one query attends to every cached position
    assert _shapes(c["rope"]) == {"q": (16, 32, 128), "k": (16, 8, 128), "cos": (16, 64), "sin": (16, 64)}
    assert c["kv_write"].params == {"start": 4095}  # the new token in the last of the 4096 positions
    assert _shapes(c["act"]) == {"gate": (16, 14336), "up": (16, 14336)}
    assert c["q_proj"].count == 32 and c["lm_head"].count == 1 and c["embed"].count == 1
    # The decode GEMV 16×4096×4096 by hand: 2·16·4096·4096 FLOPs; x, W and y in bf16.
    assert c["q_proj"].op.flops == 2 * 16 * 4096 * 4096
    assert c["q_proj"].bytes == 2 * (16 * 4096 + 4096 * 4096 + 16 * 4096)
    # Attention: 16·32 heads × 4096 scores, 4·128 + 5 FLOPs a score; Q, K, V, O read or written once.
    assert c["attention"].op.flops == 16 * 32 * 4096 * (4 * 128 + 5)
    assert c["attention"].bytes == 2 * (2 * 16 * 32 * 128 + 2 * 16 * 8 * 4096 * 128)
    # The gather: 16 distinct rows of the table, and the 16×4096 output; the ids are not counted.
    assert c["embed"].bytes == 2 * (16 * 4096 + 16 * 4096)


def test_qwen_biases_and_fused_projection_by_hand():
    # Qwen2.5 14B: H 5120, 40 heads, 8 KV heads, d 128: Q 5120, K and V 1024 each; Q/K/V biases.
    c = _by_name(build_cases(resolve_workload("prefill", model="qwen2.5-14b", batch=1, seq_len=2048,
                                              fused=["norm_linear", "qkv"])))
    qkv = c["attn_norm+qkv_proj"]
    assert qkv.family == "norm_linear"
    assert _shapes(qkv) == {"x": (2048, 5120), "w": (7168, 5120), "g": (5120,), "bias": (7168,)}
    # 2·M·K·N + RMSNorm's 4 per x element + one bias add per output.
    assert qkv.op.flops == 2 * 2048 * 5120 * 7168 + 4 * 2048 * 5120 + 2048 * 7168
    assert "bias" not in _shapes(c["o_proj"])
    att = c["attention"]
    assert att.params == {"causal": True}
    assert att.op.flops == 40 * (2048 * 2049 // 2) * (4 * 128 + 5)  # S(S+1)/2 scores a head, causal
    assert _shapes(c["lm_head"])["x"] == (1, 5120)  # the last token of the sequence only


def test_mistral_sliding_window_reads_the_window():
    # Mistral 7B v0.1: every layer slides over W = 4096: a decode step at 8192 positions reads 4096.
    c = _by_name(build_cases(resolve_workload("decode", model="mistral-7b", batch=4, context=8192)))
    assert "attention" not in c
    assert _shapes(c["attention_local"])["k"] == (4, 8, 4096, 128)
    assert c["kv_write"].params == {"start": 8191 % 4096}  # a ring buffer of 4096 slots


def test_naive_decode_groups_query_heads_by_kv_head():
    c = _by_name(build_cases(resolve_workload("decode", model="llama-3-8b", batch=2, context=1024,
                                              attention="naive")))
    # 32 heads over 8 KV heads: 4 query heads a KV head; K read once per KV head, as the engine counts it.
    assert _shapes(c["qk"]) == {"q": (16, 4, 128), "k": (16, 1024, 128)}
    assert c["qk"].outputs == ((16, 4, 1024),)
    assert _shapes(c["pv"]) == {"p": (16, 4, 1024), "v": (16, 1024, 128)}
    assert c["softmax"].op.flops == 5 * 2 * 32 * 1024


@pytest.mark.parametrize("phase, sizes", [("decode", dict(batch=4, context=2048, attention="naive")),
                                          ("prefill", dict(batch=1, seq_len=512, fused=["norm_linear", "qkv"]))])
def test_a_case_follows_the_ops_fields_not_its_name(phase, sizes):
    """The same op under another name gets the same runner and tensors: the case reads the op's kind and shape."""
    from dataclasses import replace

    w = resolve_workload(phase, model="qwen2.5-14b", **sizes)
    for op in step_ops(w):
        case, renamed = _case(w, op), _case(w, replace(op, name="renamed"))
        assert (renamed.family, renamed.inputs, renamed.outputs, renamed.params) == \
            (case.family, case.inputs, case.outputs, case.params), op.name


def test_tensor_spec_counts_what_the_rule_reads():
    table = TensorSpec("table", (100, 8), "bf16", "randn", counted=3 * 8 * 2)
    assert table.nbytes == 1600 and table.counted_bytes == 48
    assert TensorSpec("cache", (2, 3), "fp32", "nan", read=False).counted_bytes == 0


@pytest.mark.parametrize("phase, overrides, fragment", [
    ("decode", dict(model="mixtral-8x7b"), "no runner for a mixture of experts"),
    ("decode", dict(model="qwen3-30b-a3b"), "no runner for Q/K norms"),
    # MLA without its experts: the first variant named is the attention's.
    ("decode", dict(model=load_model("deepseek-v2-lite").model_copy(update={"moe": None})),
     "multi-head latent attention"),
    ("decode", dict(model="llama-3-8b", weight_dtype="int4"), "quantized"),
    ("decode", dict(model="llama-3-8b", dtype="fp8"), "--dtype fp8"),
    ("decode", dict(model="llama-3-8b", kv_dtype="fp8"), "KV cache"),
    ("decode", dict(model="llama-3-8b", fused=["gate_up", "act"]), "--fuse act"),
    ("prefill", dict(model="llama-3-8b", attention="naive"), "naive attention in a prefill"),
    ("prefill", dict(model="mistral-7b", seq_len=8192), "sliding window"),
    ("decode", dict(model="gemma-3-27b"), "no runner for the MLP (gated_gelu_tanh)"),
    ("attention", dict(model="llama-3-8b"), "the attention phase"),
])
def test_what_cannot_be_run_faithfully_is_refused(phase, overrides, fragment):
    w = resolve_workload(phase, **overrides)
    with pytest.raises(UserError, match="measure --workload") as err:
        build_cases(w)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_the_steps_memory_plan_by_hand():
    from rooflinectl.measure.step.graph import plan_memory

    w = resolve_workload("decode", model="llama-3-8b", batch=16, context=4096)
    cases = build_cases(w)
    # One layer's weights, bf16: Q and O 4096², K and V 4096×1024, gate, up and down 4096×14336, two gains of 4096.
    layer = 2 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096)
    cache = 2 * 16 * 1024 * 4096 * 2  # K and V: 16 sequences × 4096 positions × 1024 values × 2 bytes
    distinct = plan_memory(w, cases, None)
    assert distinct.layers == "distinct" and distinct.note is None
    shared = plan_memory(w, cases, int((distinct.bytes - 1) / 0.8))
    assert shared.layers == "shared_weights" and distinct.bytes - shared.bytes == 31 * layer
    assert "436 MB of weights" in shared.note
    both = plan_memory(w, cases, int((shared.bytes - 1) / 0.8))
    assert both.layers == "shared_weights_and_caches" and shared.bytes - both.bytes == 31 * cache
    with pytest.raises(UserError, match="the step needs"):
        plan_memory(w, cases, int((both.bytes - 1) / 0.8))
