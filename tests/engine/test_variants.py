"""MLP, norm and attention variants (issue 12): gated GELU-tanh, the plain GELU MLP, gpt-oss's clamped SwiGLU,
LayerNorm, Gemma's four norms and scaled embedding, biases, attention sinks, soft caps, partial RoPE, a
quantized format that covers the experts alone; and the published parameter counts of the bundled gpt-oss and
Gemma 3 models. Every figure derived by hand below, with its source."""

from __future__ import annotations

import pytest

from helpers import cli
from rooflinectl.engine.count.op import (
    CLAMPED_SWIGLU_FLOPS_PER_ELEMENT,
    GELU_TANH_FLOPS_PER_ELEMENT,
    LAYERNORM_FLOPS_PER_ELEMENT,
)
from rooflinectl.engine.count.resident import weight_footprint_bytes
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.workload import Workload


def ops_of(w):
    return {op.name: op for op in step_ops(w)}


def with_model(w: Workload, **update) -> Workload:
    return w.model_copy(update={"model": w.model.model_copy(update=update)})


def test_activation_constants_are_their_steps():
    # GELU-tanh 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): x³ 2, ·0.044715 1, +x 1, ·√(2/π) 1, tanh 1, +1 1,
    # ·x 1, ·0.5 1 = 9. Clamped SwiGLU: min 1, clamp 2, ·1.702 1, sigmoid 4, ·g 1, +1 1, product 1 = 11.
    # LayerNorm: sum 1, subtract 1, square 1, sum 1, ·1/σ 1, gain 1, bias 1 = 7.
    assert (GELU_TANH_FLOPS_PER_ELEMENT, CLAMPED_SWIGLU_FLOPS_PER_ELEMENT, LAYERNORM_FLOPS_PER_ELEMENT) == (9, 11, 7)


def test_gemma3_decode_mlp_norms_and_embedding():
    # Gemma 3 27B (H 5376, I 21504) decode at batch 1 in bf16.
    ops = ops_of(resolve_workload("decode", model="gemma-3-27b", context=4096))
    # GELU_tanh(gate)·up on 21504: (9 + 1) FLOPs each; reads gate and up, writes the product: 3·21504·2 B.
    assert ops["act"].flops == 10 * 21504 == 215_040
    assert ops["act"].bytes == 3 * 21504 * 2 == 129_024
    # Four norms a layer: post_attn_norm after o_proj and post_mlp_norm after down_proj, 4·5376 FLOPs each.
    for name in ("attn_norm", "post_attn_norm", "mlp_norm", "post_mlp_norm"):
        assert ops[name].count == 62 and ops[name].flops == 4 * 5376
    names = list(ops)
    assert names.index("o_proj") < names.index("post_attn_norm") < names.index("attn_residual")
    assert names.index("down_proj") < names.index("post_mlp_norm") < names.index("mlp_residual")
    # The embedding times sqrt(5376): 5376 multiplies.
    assert ops["embed"].flops == 5376
    # Residual fusion folds each add into the post norm, not into o_proj (the norm sits between them).
    fused = ops_of(resolve_workload("decode", model="gemma-3-27b", context=4096, fused=["residual"]))
    assert "post_attn_norm+residual" in fused and "o_proj" in fused and "attn_residual" not in fused
    assert fused["post_mlp_norm+residual"].flops == 4 * 5376 + 5376


def test_gemma3_parameters_against_its_report():
    # Gemma 3 27B (Gemma 3 Technical Report, Table 1: 1,416 M embedding, 25,600 M non-embedding parameters; the
    # 417 M vision encoder not counted). Per layer: Q, K, V, O 5376·(4096 + 2048 + 2048) + 4096·5376
    # = 66,060,288; four norms 4·5376 = 21,504; q/k norms 2·128; MLP 3·5376·21504 = 346,816,512: 412,898,560.
    m = load_model("gemma-3-27b")
    per_layer = 66_060_288 + 21_504 + 256 + 346_816_512
    assert per_layer == 412_898_560
    non_embedding = 62 * per_layer + 5376  # and the final norm
    embedding = 262_208 * 5376  # tied: the LM head is the table
    assert m.parameter_count() == non_embedding + embedding == 27_009_346_304
    assert abs(non_embedding / 25_600e6 - 1) < 0.01 and abs(embedding / 1_416e6 - 1) < 0.01


def test_gpt_oss_parameters_against_its_model_card():
    # OpenAI, gpt-oss model card (Aug 2025), table of parameters: 120b 116.83 B total, 5.13 B active;
    # 20b 20.91 B, 3.61 B; the active counts leave the embedding table out (the unembedding is in).
    # Attention per layer: Q 2880·4096, K and V 2·2880·512, O 4096·2880 = 26,542,080; biases 4096 + 2·512 + 2880
    # = 8,000; sinks 64; norms 2·2880: 26,555,904 (×36 = 956,012,544, the card's 0.96 B).
    # An expert: 3·2880·2880 + biases 2·2880 + 2880 = 24,891,840; the router 2880·128 + 128 = 368,768.
    # Embedding and unembedding 2·201088·2880 = 1,158,266,880; final norm 2880.
    attention, expert, table = 26_555_904, 24_891_840, 201_088 * 2880
    big = load_model("gpt-oss-120b")
    total = 36 * (attention + 368_768 + 128 * expert) + 2 * table + 2880
    assert big.parameter_count() == total == 116_829_156_672
    active = 36 * (attention + 368_768 + 4 * expert) + 2 * table + 2880
    assert big.active_parameter_count() == active == 5_711_982_912
    assert abs(total / 116.83e9 - 1) < 0.01 and abs((active - table) / 5.13e9 - 1) < 0.01
    small = load_model("gpt-oss-20b")
    total = 24 * (attention + 2880 * 32 + 32 + 32 * expert) + 2 * table + 2880
    active = 24 * (attention + 2880 * 32 + 32 + 4 * expert) + 2 * table + 2880
    assert (small.parameter_count(), small.active_parameter_count()) == (total, active) \
        == (20_914_757_184, 4_187_440_704)
    assert abs(total / 20.91e9 - 1) < 0.01 and abs((active - table) / 3.61e9 - 1) < 0.01


def test_gpt_oss_decode_sinks_biases_and_experts():
    # gpt-oss-20b (h 64, g 8, d 64, window 128) decode at batch 1, context 4096, bf16 everywhere.
    w = resolve_workload("decode", model="gpt-oss-20b", context=4096, weight_dtype="bf16")
    ops = ops_of(w)
    # Full layers: 64 heads × 4096 scores × (4·64 + 5) + the sink's 4 FLOPs per row (64 rows); bytes Q and O
    # 4096·2 each, K and V 4096 × 512 × 2 each, the 64 sink logits 128 B.
    assert ops["attention"].flops == 64 * 4096 * 261 + 4 * 64 == 68_419_840
    assert ops["attention"].bytes == 2 * 8192 + 2 * 4096 * 512 * 2 + 128 == 8_405_120
    assert ops["attention"].weight_bytes == 128
    # Sliding layers: 128 positions.
    assert ops["attention_local"].flops == 64 * 128 * 261 + 256 == 2_138_368
    assert (ops["attention"].count, ops["attention_local"].count) == (12, 12)
    # o_proj's bias: 2880 elements read, 2880 adds.
    assert ops["o_proj"].flops == 2 * 4096 * 2880 + 2880
    # The router (GptOssTopKRouter): the 2880×32 gate 2·2880·32, the bias 32 adds, the top 4 of 32 logits
    # 4·32 compares, then a softmax over the 4 picked only, 5·4 (not over all 32 as Mixtral's).
    assert ops["router"].flops == 2 * 2880 * 32 + 32 + 4 * 32 + 5 * 4 == 184_500
    # One token picks 4 experts: their gate matmul 2·4·2880·2880 + 4·2880 bias adds; weights and biases of the
    # 4 experts: 4·(2880·2880 + 2880)·2 B.
    assert ops["expert_gate_proj"].flops == 2 * 4 * 2880 * 2880 + 4 * 2880
    assert ops["expert_gate_proj"].weight_bytes == 4 * (2880 * 2880 + 2880) * 2 == 66_378_240
    # The clamped SwiGLU on the 4 pairs' 2880 elements: 11 FLOPs each.
    assert ops["expert_act"].flops == 11 * 4 * 2880 == 126_720


def test_gpt_oss_mxfp4_covers_the_experts_only():
    # gpt-oss-120b, its checkpoint's MXFP4 (weight_dtype mxfp4, quantized: experts): q_proj stays bf16,
    # 2880·4096·2 + its bias 4096·2 B; an expert's 2880×2880 gate in MXFP4: 2880·2880/2 + one scale byte per 32
    # along k, 2880·90 = 4,147,200 + 259,200 = 4,406,400 B, and its bf16 bias 5,760 B; 4 experts at batch 1.
    w = resolve_workload("decode", model="gpt-oss-120b", context=4096)
    assert w.weights == "mxfp4"
    ops = ops_of(w)
    assert ops["q_proj"].weight_bytes == 2880 * 4096 * 2 + 4096 * 2
    assert ops["q_proj"].dtype == "bf16"
    assert ops["expert_gate_proj"].weight_bytes == 4 * (4_406_400 + 5_760) == 17_648_640
    # Footprint: 36·128·3 = 13,824 expert matrices in MXFP4 (60,914,073,600 B), the other
    # 116,829,156,672 − 13,824·2880·2880 = 2,167,371,072 parameters in bf16.
    assert weight_footprint_bytes(w) == 13_824 * 4_406_400 + 2_167_371_072 * 2 == 65_248_815_744
    # An explicit format keeps the model's scope: fp8 experts, attention still bf16.
    fp8 = ops_of(resolve_workload("decode", model="gpt-oss-120b", context=4096, weight_dtype="fp8"))
    assert fp8["q_proj"].weight_bytes == 2880 * 4096 * 2 + 4096 * 2
    assert fp8["expert_gate_proj"].weight_bytes == 4 * (2880 * 2880 + 4 + 5_760)


def test_plain_gelu_mlp_and_layernorm():
    # Llama 3 8B's sizes (H 4096, I 14336) with a plain GELU-tanh MLP and LayerNorm, decode at batch 2, bf16.
    base = resolve_workload("decode", model="llama-3-8b", batch=2, context=128)
    w = with_model(base, mlp="gelu_tanh", norm="layernorm")
    ops = ops_of(w)
    assert "gate_proj" not in ops and {"up_proj", "act", "down_proj"} <= set(ops)
    # act: GELU_tanh(up) on 2×14336, 9 FLOPs each; reads up, writes its result.
    assert ops["act"].flops == 9 * 2 * 14336 and ops["act"].bytes == 2 * 2 * 14336 * 2
    # LayerNorm over 2×4096: 7 FLOPs each; reads x, gain and bias, writes y.
    assert ops["attn_norm"].flops == 7 * 2 * 4096
    assert ops["attn_norm"].bytes == 2 * 2 * 4096 * 2 + 2 * 4096 * 2
    # Parameters: per layer up and down 2·4096·14336 (not 3), four norm vectors (gain and bias of two norms).
    m = w.model
    dense = base.model
    assert dense.parameter_count() - m.parameter_count() == 32 * (4096 * 14336 - 2 * 4096) - 4096
    # norm_linear with LayerNorm: 7 FLOPs per x element and gain and bias in the projection's prologue.
    nl = ops_of(w.model_copy(update={"fused": ("norm_linear",)}))
    assert nl["attn_norm+q_proj"].flops == 2 * 2 * 4096 * 4096 + 7 * 2 * 4096
    # A plain MLP has no gate to fuse.
    with pytest.raises(UserError, match="fusion 'gate_up'.*no gate"):
        Workload.model_validate({**dict(w), "fused": ("gate_up",)})


def test_soft_caps_and_partial_rope():
    base = resolve_workload("decode", model="llama-3-8b", batch=2, context=128)
    capped = ops_of(with_model(base, attn_logit_softcapping=50.0, final_logit_softcapping=30.0))
    plain = ops_of(base)
    # 3 FLOPs (divide, tanh, multiply) on each of 2·32·128 scores, and on each of 2·128256 logits.
    assert capped["attention"].flops - plain["attention"].flops == 3 * 2 * 32 * 128
    assert capped["lm_head"].flops - plain["lm_head"].flops == 3 * 2 * 128_256
    # RoPE on the first 96 of 128 dimensions of each of 32 + 8 heads: 3·2·40·96 FLOPs; reads and writes them,
    # and cos/sin rows of 96.
    rope = ops_of(with_model(base, rotary_dim=96))["rope"]
    assert rope.flops == 3 * 2 * 40 * 96
    assert rope.bytes == 2 * 2 * 40 * 96 * 2 + 2 * 96 * 2


def test_the_cli_analyses_the_bundled_variants():
    for args in (("analyze", "decode", "--gpu", "b200", "--model", "gpt-oss-120b", "--weight-dtype", "mxfp4"),
                 ("analyze", "decode", "--gpu", "h200", "--model", "gemma-3-27b", "--context", "32768"),
                 ("analyze", "prefill", "--gpu", "h100", "--model", "gpt-oss-20b", "--seq-len", "4096"),
                 ("analyze", "decode", "--gpu", "h200", "--model", "mistral-7b", "--context", "32768")):
        result = cli(*args)
        assert result.exit_code == 0, result.output
    assert "attention_local" in cli("analyze", "decode", "--gpu", "h200", "--model", "gemma-3-27b").output


def test_naive_softmax_carries_the_sinks():
    # gpt-oss-20b naive prefill of 256 tokens: 64 heads × 256 rows; softmax over the 256 positions read (a
    # sliding layer's queries read min(256, 128 + 256 − 1) = 256 too): 5 FLOPs a score + 4 a row for the sink;
    # the scores in and out, 2·16384·256·2 B, and the 64 sink logits, 128 B.
    ops = ops_of(resolve_workload("prefill", model="gpt-oss-20b", seq_len=256, attention="naive"))
    for name in ("softmax", "softmax_local"):
        assert ops[name].flops == 5 * 16384 * 256 + 4 * 16384 == 21_037_056
        assert ops[name].bytes == 2 * 16384 * 256 * 2 + 128 == 16_777_344
        assert ops[name].weight_bytes == 128
