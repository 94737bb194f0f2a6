"""The engine's counts, pinned to numbers derived by hand from the counting rules in DESIGN.md and ops.py."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.op import (
    GATED_ACT_FLOPS_PER_ELEMENT,
    RMSNORM_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
)
from rooflinectl.engine.count.resident import weight_footprint_bytes
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.roofline import analyze
from rooflinectl.render.verdict import verdict
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload


def ops_by_name(workload) -> dict:
    return {op.name: op for op in step_ops(workload)}


# Llama 3 8B: H = 4096, 32 heads, 8 KV heads, d = 128, I = 14336, V = 128256, 32 layers.
H, HEADS, KV_HEADS, D, I, V, L = 4096, 32, 8, 128, 14336, 128256, 32


def test_decode_batch1_llama3_8b_counts():
    ops = ops_by_name(resolve_workload("decode", model="llama-3-8b", batch=1, context=4096, dtype="bf16"))
    # q_proj: 1×4096 · 4096×4096 -> 2·1·4096·4096 FLOPs; x, W, y in bf16 (2 bytes).
    assert ops["q_proj"].flops == 2 * 4096 * 4096 == 33_554_432
    assert ops["q_proj"].bytes == (4096 + 4096 * 4096 + 4096) * 2 == 33_570_816
    assert ops["q_proj"].count == L
    # k_proj: 4096 -> 8 KV heads × 128 = 1024 columns.
    assert ops["k_proj"].flops == 2 * 4096 * 1024
    assert ops["k_proj"].bytes == (4096 + 4096 * 1024 + 1024) * 2 == 8_398_848
    # Flash decode: one query per head sees all 4096 positions: 32·4096 scores, 4·d + softmax FLOPs each.
    scores = HEADS * 4096
    assert ops["attention"].flops == scores * (4 * D + SOFTMAX_FLOPS_PER_ELEMENT) == 67_764_224
    # Reads Q (4096) and writes O (4096); reads K and V: 4096 positions × 1024 (GQA: KV heads only).
    assert ops["attention"].bytes == (2 * 4096 + 2 * 4096 * 1024) * 2 == 16_793_600
    assert ops["attention"].kv_bytes == 2 * 4096 * 1024 * 2
    # act works on the MLP width: reads gate and up, writes their product.
    assert ops["act"].flops == GATED_ACT_FLOPS_PER_ELEMENT * I == 71_680
    assert ops["act"].bytes == 3 * I * 2 == 86_016
    # RMSNorm reads x and its gain, writes y.
    assert ops["attn_norm"].flops == RMSNORM_FLOPS_PER_ELEMENT * H
    assert ops["attn_norm"].bytes == 3 * H * 2
    # lm_head once per model.
    assert ops["lm_head"].count == 1
    assert ops["lm_head"].flops == 2 * H * V == 1_050_673_152
    assert ops["lm_head"].bytes == (H + H * V + V) * 2 == 1_050_937_856


def test_decode_op_order_matches_the_issue():
    names = [op.name for op in step_ops(resolve_workload("decode", attention="naive"))]
    assert names == [
        "embed", "attn_norm", "q_proj", "k_proj", "v_proj", "rope", "kv_write", "qk", "softmax", "pv",
        "o_proj", "attn_residual", "mlp_norm", "gate_proj", "up_proj", "act", "down_proj", "mlp_residual",
        "final_norm", "lm_head",
    ]


def test_prefill_naive_counts_full_scores_and_flash_causal_counts_half():
    naive = ops_by_name(resolve_workload("prefill", seq_len=2048, batch=2, attention="naive"))
    flash = ops_by_name(resolve_workload("prefill", seq_len=2048, batch=2, attention="flash", causal=True))
    full = 2 * HEADS * 2048 * 2048
    assert naive["qk"].flops == 2 * full * D
    # The score matrix is written by qk, read and written by softmax, read by pv.
    assert naive["softmax"].bytes == 2 * full * 2
    assert naive["qk"].bytes == (2 * 2048 * H + 2 * 2048 * KV_HEADS * D + full) * 2
    causal = 2 * HEADS * 2048 * 2049 // 2
    assert flash["attention"].flops == causal * (4 * D + SOFTMAX_FLOPS_PER_ELEMENT)
    non_causal = ops_by_name(resolve_workload("prefill", seq_len=2048, batch=2, causal=False))
    assert non_causal["attention"].flops == full * (4 * D + SOFTMAX_FLOPS_PER_ELEMENT)


def test_prefill_lm_head_runs_on_last_token_only():
    ops = ops_by_name(resolve_workload("prefill", seq_len=512, batch=3))
    assert ops["lm_head"].flops == 2 * 3 * H * V
    assert ops["q_proj"].flops == 2 * 3 * 512 * H * H


def test_attention_phase_is_attention_core_of_every_layer():
    ops = step_ops(resolve_workload("attention", seq_len=1024, attention="naive"))
    assert [op.name for op in ops] == ["qk", "softmax", "pv"]
    assert all(op.count == L for op in ops)


def test_norm_linear_fusion_removes_the_normalized_round_trip():
    plain = ops_by_name(resolve_workload("decode", batch=8))
    fused = ops_by_name(resolve_workload("decode", batch=8, fused=["qkv", "norm_linear"]))
    assert "attn_norm" not in fused
    qkv_cols = HEADS * D + 2 * KV_HEADS * D
    tokens = 8
    unfused_bytes = plain["attn_norm"].bytes + plain["q_proj"].bytes + plain["k_proj"].bytes + plain["v_proj"].bytes
    fused_op = fused["attn_norm+qkv_proj"]
    assert fused_op.bytes == (tokens * H + H + H * qkv_cols + tokens * qkv_cols) * 2
    # What disappears: the norm's write and its three re-reads of normalized x (one per projection),
    # and the raw x that q/k/v each re-read beyond the first.
    assert unfused_bytes - fused_op.bytes == (tokens * H * 2 + 2 * tokens * H) * 2
    assert fused_op.flops == 2 * tokens * H * qkv_cols + RMSNORM_FLOPS_PER_ELEMENT * tokens * H


def test_act_and_residual_fusion():
    fused = ops_by_name(resolve_workload("decode", batch=4, fused=["gate_up", "act", "residual"]))
    assert "act" not in fused and "mlp_residual" not in fused
    op = fused["gate_up_proj+act"]
    # gate_up reads x (4×H) and W (H×2I), writes only SiLU(gate)·up (4×I).
    assert op.bytes == (4 * H + H * 2 * I + 4 * I) * 2
    down = fused["down_proj+residual"]
    assert down.bytes == (4 * I + I * H + 4 * H + 4 * H) * 2


def test_act_fusion_needs_gate_up():
    from rooflinectl.errors import UserError

    with pytest.raises(UserError, match="gate_up"):
        resolve_workload("decode", fused=["act"])


def test_a_residual_add_reads_x_and_the_branch_and_writes_their_sum():
    """Unfused, each residual add is its own kernel over N×H: reads x and the branch's output, writes the sum, one
    add per element. Decode at batch 4: N·H = 4·4096 = 16,384 elements; 3·16,384·2 = 98,304 bytes in bf16."""
    ops = ops_by_name(resolve_workload("decode", batch=4))
    for name in ("attn_residual", "mlp_residual"):
        assert (ops[name].flops, ops[name].bytes, ops[name].count) == (4 * H, 3 * 4 * H * 2, L)
        assert ops[name].bytes == 98_304


def test_kv_dtype_narrows_only_the_cache():
    ops = ops_by_name(resolve_workload("decode", context=1000, kv_dtype="fp8"))
    assert ops["attention"].kv_bytes == 2 * 1000 * KV_HEADS * D * 1
    assert ops["kv_write"].bytes == 2 * KV_HEADS * D * 2 + 2 * KV_HEADS * D * 1


# Published parameter counts (Hugging Face model cards / safetensors metadata).
@pytest.mark.parametrize(
    "model, params",
    [
        ("llama-2-7b", 6_738_415_616),  # meta-llama/Llama-2-7b-hf: 6.74B
        ("llama-3-8b", 8_030_261_248),  # meta-llama/Meta-Llama-3-8B: 8.03B
        ("llama-2-13b", 13_015_864_320),  # meta-llama/Llama-2-13b-hf: 13.0B
        ("llama-2-70b", 68_976_648_192),  # meta-llama/Llama-2-70b-hf: 69.0B
        ("mistral-7b", 7_241_732_096),  # mistralai/Mistral-7B-v0.1: 7.24B
    ],
)
def test_parameter_counts_match_published(model, params):
    assert load_model(model).parameter_count() == params


def test_weight_bytes_read_in_decode_equal_the_model_less_unread_embedding_rows():
    w = resolve_workload("decode", batch=1)
    a = analyze(w, load_gpu("h100"))
    model = load_model("llama-3-8b")
    # Every weight is read once, except the embedding table, of which one row per token is read.
    expected = (model.parameter_count() - V * H + 1 * H) * 2
    assert a.totals.weight_bytes == expected


def test_a_prefill_reads_the_embedding_table_at_most_once():
    """Issue 18: a 70B prefill at batch 64 read more weight bytes than the model has, since the gather counted
    one table row per token. Llama 3 70B: H = 8192, V = 128,256, 80 layers, 64 heads, 8 KV heads, d = 128,
    I = 28,672. Parameters by hand: per layer 8192·(8192 + 2·1024) + 8192·8192 + 3·8192·28672 + 2·8192
    = 855,654,400; × 80 = 68,452,352,000; embedding and LM head 128,256·8192 = 1,050,673,152 each; final norm
    8192: 70,553,706,496 in all, 141,107,412,992 bytes in bf16."""
    w = resolve_workload("prefill", model="llama-3-70b", batch=64, seq_len=4096)
    assert w.model.parameter_count() == 70_553_706_496
    embed = ops_by_name(w)["embed"]
    # 64 × 4096 = 262,144 tokens > 128,256 rows: the whole table once, not 262,144 rows (4,294,967,296 B).
    assert embed.weight_bytes == 128_256 * 8192 * 2 == 2_101_346_304
    # Its traffic: the table once, and x written for every token (262,144 × 8192 × 2 = 4,294,967,296 B).
    assert embed.bytes == 2_101_346_304 + 4_294_967_296
    a = analyze(w, load_gpu("h200"))
    # Every weight read exactly once: the layers' W and gains, the table, the final gain and the LM head.
    assert a.totals.weight_bytes == 141_107_412_992 == w.model.parameter_count() * 2
    # Decode at batch 64: 64 tokens, 64 rows (each counted distinct, the most a gather of 64 tokens reads).
    d = ops_by_name(resolve_workload("decode", model="llama-3-70b", batch=64, context=4096))["embed"]
    assert d.weight_bytes == 64 * 8192 * 2 == 1_048_576


def test_decode_verdict_reads_no_more_weights_than_the_model_has():
    # Decode at batch 1: one embedding row, 8192 × 2 bytes, instead of the whole 2,101,346,304-byte table.
    w = resolve_workload("decode", model="llama-3-70b", batch=1, context=4096)
    a = analyze(w, load_gpu("h200"))
    expected = 141_107_412_992 - 2_101_346_304 + 16_384
    assert a.totals.weight_bytes == expected == 139_006_083_072
    assert any("reads 139 GB of weights" in line for line in verdict(a))  # 139,006,083,072 B in 3 digits (units.si)


def test_fp32_matmuls_run_on_the_vector_units_and_tf32_on_the_tensor_cores():
    from rooflinectl.engine.count.primitives import matmul_op

    ops = ops_by_name(resolve_workload("decode", dtype="fp32", fused=["norm_linear"]))
    assert {ops[n].unit for n in ("attn_norm+q_proj", "o_proj", "attention", "lm_head")} == {"vector"}
    assert matmul_op("x", 8, 8, 8, "tf32").unit == "tensor"
    assert matmul_op("x", 8, 8, 8, "bf16").unit == "tensor"


@pytest.mark.parametrize("phase", ["decode", "prefill", "attention"])
@pytest.mark.parametrize("attention", ["naive", "flash"])
@pytest.mark.parametrize("fused", [[], ["qkv", "gate_up", "norm_linear", "act", "residual"]])
def test_op_names_are_unique_in_a_step_and_every_op_has_a_kind(phase, attention, fused):
    # Analysis.placement(name) and a record's op name rely on it.
    ops = step_ops(resolve_workload(phase, attention=attention, fused=fused))
    assert len({op.name for op in ops}) == len(ops)
    assert all(op.kind for op in ops)
    assert all(op.count == 1 for op in ops if op.per_model)


def test_a_quantized_footprint_keeps_the_rest_in_dtype():
    """Llama 3 8B with --dtype fp8 --weight-dtype fp8_block: the linear layers in fp8 with an fp32 scale per
    128×128 block, and the rest (embedding, LM head, norms) in the workload's dtype, fp8: 1 byte, not 2.
    Linear per layer: Q and O 4096×4096 (32·32 blocks each), K and V 4096×1024 (32·8), gate, up and down
    4096×14336 or 14336×4096 (32·112): 218,103,808 weights and 4·(2·1024 + 2·256 + 3·3584) = 53,248 scale bytes;
    × 32 layers: 6,979,321,856 + 1,703,936. The rest: 8,030,261,248 − 6,979,321,856 = 1,050,939,392 parameters."""
    linear = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    scales = 32 * 4 * (2 * 32 * 32 + 2 * 32 * 8 + 3 * 32 * 112)
    rest = 8_030_261_248 - linear
    assert (linear, scales, rest) == (6_979_321_856, 1_703_936, 1_050_939_392)
    fp8 = resolve_workload("decode", dtype="fp8", weight_dtype="fp8_block")
    assert weight_footprint_bytes(fp8) == linear + scales + rest * 1 == 8_031_965_184
    # The same weights beside bf16 activations keep the rest in 2 bytes.
    bf16 = resolve_workload("decode", dtype="bf16", weight_dtype="fp8_block")
    assert weight_footprint_bytes(bf16) == linear + scales + rest * 2


def test_an_experts_only_format_leaves_the_shared_experts_in_dtype():
    """A DeepSeek-like model whose checkpoint quantizes its routed experts alone (``quantized: experts``, as
    gpt-oss's MXFP4 does): the shared experts are not experts of that format, and stay in bf16 with the attention
    and the dense MLP. The model of test_moe.py's test_first_dense_layers_and_shared_experts: H 256, 4 layers
    (the first dense), 3 MoE layers of 16 experts of width 64 and 2 shared of width 96; 4,507,904 parameters.
    Routed experts: 3 layers × 16 × (gate, up 256×64; down 64×256) = 144 matrices of 16,384 weights; in mxfp4
    each is 16,384·4/8 = 8,192 bytes and one 1-byte scale per 32 weights along k (64·8 = 256·2 = 512): 8,704.
    The rest, 4,507,904 − 144·16,384 = 2,148,608 parameters (the shared experts' 3·3·256·192 = 442,368 among
    them), in bf16."""
    m = validate(Model, {
        "id": "toy", "name": "toy", "source": "a test", "hidden_size": 256, "num_layers": 4, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000,
        "moe": {"num_experts": 16, "experts_per_token": 4, "expert_intermediate_size": 64, "num_shared_experts": 2,
                "shared_expert_intermediate_size": 96, "first_dense_layers": 1},
        "weight_dtype": "mxfp4", "quantized": "experts"}, "test")
    assert m.parameter_count() == 4_507_904
    w = resolve_workload("decode", model=m, batch=2)  # type: ignore[arg-type]
    assert (w.weights, w.dtype) == ("mxfp4", "bf16")
    experts = 144 * (16_384 // 2 + 512)
    rest = 4_507_904 - 144 * 16_384
    assert (experts, rest) == (1_253_376, 2_148_608)
    assert weight_footprint_bytes(w) == experts + rest * 2 == 5_550_592
