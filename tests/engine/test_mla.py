"""Multi-head latent attention (issue 12): each op of a small MLA model pinned to numbers derived by hand from the
rules in engine/count/mla.py, the latent cache, quantized MLA matrices, and the bundled DeepSeek-V3 step."""

from __future__ import annotations

import json

import pytest

from helpers import cli
from rooflinectl.engine.count.quant import bits_per_weight, kernel_name, weight_matrix_bytes
from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence, weight_footprint_bytes
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

# A small MLA model: H 64, 2 layers, h 4 heads, q_lora r_q 32, kv_lora r 16, d_nope 8, d_rope 4, d_v 8 (head_dim
# 8 + 4 = 12), dense MLP 128, vocabulary 100. All sizes in bf16 (a = 2 bytes).
SMALL = {"id": "small-mla", "name": "small", "source": "a test", "hidden_size": 64, "num_layers": 2, "num_heads": 4,
         "num_kv_heads": 4, "head_dim": 12, "intermediate_size": 128, "vocab_size": 100,
         "mla": {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
                 "v_head_dim": 8}}
MODEL = validate(Model, SMALL, "test")


def ops(phase: str, **sizes) -> dict:
    w = resolve_workload(phase, model=MODEL, **sizes)  # type: ignore[arg-type]
    return {op.name: op for op in step_ops(w)}


def fb(op) -> tuple:
    return op.flops, op.bytes


def test_decode_ops_by_hand():
    """Decode, batch 2 (N = 2 tokens), context 10, flash, in the weight-absorbed form."""
    o = ops("decode", batch=2, context=10)
    assert [n for n in o if n not in ("embed", "final_norm", "lm_head")][:14] == [
        "attn_norm", "q_a_proj", "kv_a_proj_with_mqa", "q_a_norm", "q_b_proj", "kv_a_norm", "rope", "kv_write",
        "q_absorb", "latent_attention", "v_up", "o_proj", "attn_residual", "mlp_norm"]
    # attn_norm: 4 FLOPs × 2·64; reads x and writes y (2·2·64·2 B), the gain 64·2.
    assert fb(o["attn_norm"]) == (4 * 2 * 64, 2 * 2 * 64 * 2 + 64 * 2) == (512, 640)
    # q_a_proj 2×64 · 64×32: 2·2·64·32 FLOPs; x 128, W 2048, y 64 elements.
    assert fb(o["q_a_proj"]) == (2 * 2 * 64 * 32, (128 + 2048 + 64) * 2) == (8192, 4480)
    # kv_a_proj_with_mqa 2×64 · 64×(16 + 4): the latent and the one shared RoPE key.
    assert fb(o["kv_a_proj_with_mqa"]) == (2 * 2 * 64 * 20, (128 + 1280 + 40) * 2) == (5120, 2896)
    # q_a_norm over 2×32, gain 32; kv_a_norm over the latent 2×16, gain 16.
    assert fb(o["q_a_norm"]) == (4 * 2 * 32, 2 * 2 * 32 * 2 + 32 * 2) == (256, 320)
    assert fb(o["kv_a_norm"]) == (4 * 2 * 16, 2 * 2 * 16 * 2 + 16 * 2) == (128, 160)
    # q_b_proj 2×32 · 32×4·(8 + 4).
    assert fb(o["q_b_proj"]) == (2 * 2 * 32 * 48, (64 + 1536 + 96) * 2) == (6144, 3392)
    # rope on the RoPE parts only: q_pe 2·4·4 and k_pe 2·4 = 40 elements, 3 FLOPs each; in and out, and the
    # cos/sin rows 2·4.
    assert fb(o["rope"]) == (3 * 40, 2 * 40 * 2 + 2 * 4 * 2) == (120, 176)
    # kv_write: 2 tokens × (16 + 4) values read and written into the cache.
    assert fb(o["kv_write"]) == (0, 40 * 2 + 40 * 2)
    # q_absorb: per head q_nope 2×8 · W_UK 8×16: 2·2·4·8·16; x 2·4·8, W 4·8·16, y 2·4·16.
    assert fb(o["q_absorb"]) == (2 * 2 * 4 * 8 * 16, (64 + 512 + 128) * 2) == (2048, 1408)
    # latent_attention: 2 sequences × 4 heads × 10 positions = 80 scores, each 2·(16 + 4) + 2·16 + 5 = 77 FLOPs;
    # reads Q 2·4·20, the cache 2 sequences × 10 × 20 once for all heads, writes O 2·4·16 (latent).
    att = o["latent_attention"]
    assert (att.kind, att.flops, att.bytes, att.kv_bytes) == ("attention", 80 * 77, (160 + 400 + 128) * 2, 800)
    # v_up: per head o_latent 2×16 · W_UV 16×8.
    assert fb(o["v_up"]) == (2 * 2 * 4 * 16 * 8, (128 + 512 + 64) * 2) == (2048, 1408)
    # o_proj 2×(4·8) · 32×64.
    assert fb(o["o_proj"]) == (2 * 2 * 32 * 64, (64 + 2048 + 128) * 2) == (8192, 4480)
    assert all(o[n].count == 2 for n in ("q_absorb", "latent_attention", "v_up", "o_proj"))
    assert "kv_b_proj" not in o  # absorbed: decode never expands the cache


def test_naive_decode_reads_the_latent_twice():
    o = ops("decode", batch=2, context=10, attention="naive")
    # 80 scores. latent_qk: 2·20 FLOPs each; Q 160 + cache 400 + scores 80 elements.
    assert fb(o["latent_qk"]) == (2 * 80 * 20, (160 + 400 + 80) * 2) == (3200, 1280)
    assert o["latent_qk"].kv_bytes == 800
    # softmax over 8 rows of 10.
    assert fb(o["softmax"]) == (5 * 80, 2 * 80 * 2)
    # latent_pv: 2·16 FLOPs per score; reads P 80, the cached latent 2·10·16 again, writes O 2·4·16.
    assert fb(o["latent_pv"]) == (2 * 80 * 16, (80 + 320 + 128) * 2) == (2560, 1056)
    assert o["latent_pv"].kv_bytes == 2 * 10 * 16 * 2


def test_prefill_ops_by_hand():
    """Prefill, batch 2 × 6 tokens (N = 12), causal flash, in the expanded form."""
    o = ops("prefill", batch=2, seq_len=6)
    assert "q_absorb" not in o and "v_up" not in o
    # kv_b_proj 12×16 · 16×4·(8 + 8): each head's K_nope and V from the step's latent.
    assert fb(o["kv_b_proj"]) == (2 * 12 * 16 * 64, (192 + 1024 + 768) * 2) == (24576, 3968)
    # attention: 6·7/2 = 21 unmasked scores per sequence and head, 2·4·21 = 168, each 2·12 + 2·8 + 5 = 45 FLOPs.
    # Q 12·4·12; K_nope 2·6·4·8 and the shared k_pe 2·6·4; V 2·6·4·8; O 12·4·8.
    att = o["attention"]
    assert att.flops == 168 * 45 == 7560
    assert att.bytes == (576 + 384 + 48 + 384 + 384) * 2 == 3552
    assert att.kv_bytes == (384 + 48 + 384) * 2
    # rope: q_pe 12·4·4 and k_pe 12·4 = 240 elements.
    assert fb(o["rope"]) == (3 * 240, 2 * 240 * 2 + 12 * 4 * 2) == (720, 1056)


def test_naive_prefill_by_hand():
    o = ops("prefill", batch=2, seq_len=6, attention="naive")
    # The full 6×6 scores: 2·4·36 = 288.
    assert fb(o["qk"]) == (2 * 288 * 12, (576 + 384 + 48 + 288) * 2) == (6912, 2592)
    assert fb(o["softmax"]) == (5 * 288, 2 * 288 * 2)
    assert fb(o["pv"]) == (2 * 288 * 8, (288 + 384 + 384) * 2) == (4608, 2112)


def test_the_attention_phase_is_the_expanded_core():
    w = resolve_workload("attention", model=MODEL, batch=2, seq_len=6)  # type: ignore[arg-type]
    (att,) = step_ops(w)
    assert (att.name, att.count, att.flops) == ("attention", 2, 7560)


def test_fusions():
    o = ops("decode", batch=2, context=10, fused=["qkv", "norm_linear", "residual"])
    assert "attn_norm" not in o and "q_a_proj" not in o
    # One matmul 2×64 · 64×(32 + 20), attn_norm in its prologue (4·2·64 FLOPs, the gain 64·2 bytes).
    fusedq = o["attn_norm+qkv_a_proj"]
    assert fb(fusedq) == (2 * 2 * 64 * 52 + 4 * 2 * 64, (128 + 64 * 52 + 2 * 52) * 2 + 64 * 2)
    # o_proj's epilogue reads the residual (2·64) and adds it (1 FLOP each).
    assert fb(o["o_proj+residual"]) == (8192 + 128, 4480 + 128 * 2)
    # Without q_lora_rank: q_proj 64×4·12 fused with kv_a_proj_with_mqa.
    lite = validate(Model, {**SMALL, "mla": {**SMALL["mla"], "q_lora_rank": None}}, "test")
    w = resolve_workload("decode", model=lite, batch=2, context=10, fused=["qkv"])  # type: ignore[arg-type]
    names = {op.name: op for op in step_ops(w)}
    assert "q_a_norm" not in names and "q_b_proj" not in names
    assert names["qkv_a_proj"].flops == 2 * 2 * 64 * (48 + 20)


def test_latent_cache_bytes():
    # 2 layers × (16 + 4) values × 10 positions × 2 bytes.
    w = resolve_workload("decode", model=MODEL, context=10)  # type: ignore[arg-type]
    assert kv_cache_bytes_per_sequence(w) == 2 * 20 * 10 * 2 == 800
    # DeepSeek-V3 in bf16: 61 layers × (512 + 64) × 2 bytes = 70,272 bytes per token (GQA with 128 heads of 192
    # would hold 61 × 2 × 128 × 192 × 2 = 5,996,544).
    v3 = resolve_workload("decode", model="deepseek-v3", context=1)
    assert kv_cache_bytes_per_sequence(v3) == 61 * 576 * 2 == 70_272
    assert kv_cache_bytes_per_sequence(resolve_workload("decode", model="deepseek-v3", context=1,
                                                        kv_dtype="fp8")) == 35_136


def test_parameters_of_the_small_model():
    # Per layer: q_a 64·32 + gain 32 + q_b 32·48 + kv_a 64·20 + gain 16 + kv_b 16·64 + o 32·64 + norms 2·64
    # = 2048 + 32 + 1536 + 1280 + 16 + 1024 + 2048 + 128 = 8,112; MLP 3·64·128 = 24,576.
    # Embedding and LM head 2·100·64 = 12,800, final norm 64.
    assert MODEL.parameter_count() == 2 * (8_112 + 24_576) + 12_800 + 64 == 78_240


def test_quantized_footprint_counts_the_mla_matrices():
    # fp8 per tensor: every linear matrix k·n bytes + 4; the rest (norm gains, embedding, LM head) in bf16.
    w = resolve_workload("decode", model=MODEL, context=10, weight_dtype="fp8")  # type: ignore[arg-type]
    mats = [(64, 32), (32, 48), (64, 20), (16, 64), (32, 64), (64, 128), (64, 128), (128, 64)]
    linear = 2 * sum(k * n for k, n in mats)
    assert linear == 2 * (2048 + 1536 + 1280 + 1024 + 2048 + 3 * 8192)
    assert weight_footprint_bytes(w) == linear + 2 * len(mats) * 4 + (78_240 - linear) * 2
    # The projections read their weights in fp8: q_b_proj 32·48 + 4 bytes.
    q_b = {op.name: op for op in step_ops(w)}["q_b_proj"]
    assert q_b.weight_bytes == 32 * 48 + 4
    # The absorbed W_UK and W_UV stay in bf16 (vLLM and SGLang dequantize kv_b_proj for them).
    assert {op.name: op for op in step_ops(w)}["q_absorb"].weight_bytes == 4 * 8 * 16 * 2


def test_fp8_block_scales():
    # DeepSeek-V3's q_a_proj, 7168×1536 in 128×128 blocks: 56 × 12 fp32 scales.
    assert weight_matrix_bytes("fp8_block", 7168, 1536, 128) == 7168 * 1536 + 4 * 56 * 12
    # Sides not multiples of 128 pad their edge blocks: kv_a_proj_with_mqa's 576 columns are 5 blocks.
    assert weight_matrix_bytes("fp8_block", 7168, 576, 128) == 7168 * 576 + 4 * 56 * 5
    # 8 bits and one 32-bit scale per 128·128 weights; the kernel is named by its blocks.
    assert bits_per_weight("fp8_block") == 8 + 32 / (128 * 128)
    w = resolve_workload("decode", model="deepseek-v3", context=64, weight_dtype="fp8_block", act_dtype="fp8")
    assert kernel_name(w) == "w8a8: fp8 in 128×128 blocks on the fp8 tensor cores"


def test_workloads_show_names_the_latent_attention():
    result = cli("workloads", "show", "deepseek-v3")
    assert result.exit_code == 0, result.output
    assert "latent attention (MLA: 512 + 64 cached values a token and layer)" in " ".join(result.output.split())


@pytest.mark.parametrize("change, reason", [
    ({"head_dim": 8}, "head_dim \\(8\\) must be mla.qk_nope_head_dim \\+ mla.qk_rope_head_dim \\(8 \\+ 4 = 12\\)"),
    ({"num_kv_heads": 2}, "num_kv_heads \\(2\\) must be num_heads \\(4\\) with MLA"),
    ({"qk_norm": True}, "qk_norm is not modelled with MLA"),
    ({"qkv_bias": True}, "qkv_bias is not modelled with MLA"),
    ({"mla": {**SMALL["mla"], "kv_lora_rank": 0}}, "kv_lora_rank"),
    ({"mla": {**SMALL["mla"], "q_lora_rank": 2**21}}, "q_lora_rank"),
    ({"mla": {"kv_lora_rank": 16}}, "qk_nope_head_dim"),
])
def test_an_inconsistent_mla_model_is_refused_in_one_line(change, reason):
    with pytest.raises(UserError, match=reason) as err:
        validate(Model, {**SMALL, **change}, "m.yaml")
    assert "\n" not in str(err.value)


def test_a_dense_model_dumps_no_mla():
    assert "mla" not in load_model("llama-3-8b").model_dump()
    assert load_model("deepseek-v3").model_dump()["mla"]["kv_lora_rank"] == 512


def test_deepseek_v3_decode_runs_and_names_the_latent_ops():
    args = ("analyze", "decode", "--gpu", "h200", "--model", "deepseek-v3", "--batch", "64", "--context", "8192",
            "--weight-dtype", "fp8")
    result = cli(*args)
    assert result.exit_code == 0, result.output
    for name in ("kv_a_proj_with_mqa", "q_absorb", "latent_attention", "v_up"):
        assert name in result.output
    data = json.loads(cli(*args, "--json").output)
    names = [op["name"] for op in data["ops"]]
    assert names.index("q_absorb") < names.index("latent_attention") < names.index("v_up") < names.index("o_proj")
    kinds = {op.name: op.kind for op in step_ops(resolve_workload("decode", model="deepseek-v3", context=64))}
    assert kinds["latent_attention"] == "attention" and kinds["q_absorb"] == kinds["v_up"] == "linear"


def test_deepseek_v3_reads_its_latent_cache_once_per_sequence():
    # batch 64 × 8,192 positions × 61 layers × 576 values × 2 bytes.
    a = analyze(resolve_workload("decode", model="deepseek-v3", batch=64, context=8192), load_gpu("h200"))
    assert a.totals.kv_cache_bytes == 64 * 8192 * 61 * 576 * 2


@pytest.mark.parametrize("model", ["deepseek-v3", "kimi-k2", "deepseek-v2", "deepseek-v2-lite"])
def test_a_decode_step_of_one_token_reads_exactly_the_active_weights(model):
    """In bf16 at batch 1 the layers read each weight one token uses once (the absorbed W_UK and W_UV are
    kv_b_proj's two halves, read in decode in its place; the k experts touched), and the embedding one row:
    2 bytes × (active parameters − the V×H table + H)."""
    w = resolve_workload("decode", model=model, context=64, batch=1)
    m = w.model
    read = sum(op.weight_bytes * op.count for op in step_ops(w))
    assert read == 2 * (m.active_parameter_count() - m.vocab_size * m.hidden_size + m.hidden_size)
