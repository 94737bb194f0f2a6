"""Biases on the Q, K and V projections (Qwen2/Qwen2.5, issue 12): the bias vector read once and N·n_out adds,
the parameters counted; each figure derived by hand below."""

from __future__ import annotations

import json

import pytest

from rooflinectl.engine.transformer import step_ops, weight_footprint_bytes
from rooflinectl.errors import UserError
from rooflinectl.specs.workload import load_model, model_from_hf_config, resolve_workload

# Qwen2 7B (config.json): H = 3584, 28 heads of 128 (q 3584), 4 KV heads (kv 512), I = 18944, V = 152064,
# 28 layers, untied.
H, Q, KV, I, V, L = 3584, 3584, 512, 18944, 152064, 28


def test_qwen2_7b_parameters_include_the_biases():
    # Per layer: Q, K, V 3584·(3584 + 2·512) = 16,515,072; O 3584·3584 = 12,845,056; two norm gains 7,168;
    # biases 3584 + 2·512 = 4,608; MLP 3·3584·18944 = 203,685,888: 233,057,792. 28 layers: 6,525,618,176.
    # Embedding and LM head 2·152064·3584 = 1,089,994,752; final norm 3,584. Total 7,615,616,512, Qwen2-7B's
    # 7.62 B (its model card, and the safetensors' count on Hugging Face); 129,024 of them biases.
    m = load_model("qwen2-7b")
    assert m.qkv_bias
    per_layer = H * (Q + 2 * KV) + Q * H + 2 * H + (Q + 2 * KV) + 3 * H * I
    assert per_layer == 233_057_792
    assert m.parameter_count() == L * per_layer + 2 * V * H + H == 7_615_616_512
    assert m.parameter_count() - m.model_copy(update={"qkv_bias": False}).parameter_count() == 28 * 4608


def test_qwen2_7b_decode_projections_read_and_add_their_bias():
    w = resolve_workload("decode", model="qwen2-7b", batch=4, context=1024)
    ops = {op.name: op for op in step_ops(w)}
    # q_proj at N = 4 in bf16: x 4·3584·2, W 3584·3584·2, bias 3584·2, y 4·3584·2 bytes; 2·4·3584·3584 + 4·3584.
    assert ops["q_proj"].bytes == 4 * 3584 * 2 + 3584 * 3584 * 2 + 3584 * 2 + 4 * 3584 * 2 == 25_754_624
    assert ops["q_proj"].flops == 2 * 4 * 3584 * 3584 + 4 * 3584 == 102_774_784
    assert ops["q_proj"].weight_bytes == 3584 * 3584 * 2 + 3584 * 2
    # k_proj: W 3584·512·2, bias 512·2; 2·4·3584·512 + 4·512 FLOPs.
    assert ops["k_proj"].bytes == 4 * 3584 * 2 + 3584 * 512 * 2 + 512 * 2 + 4 * 512 * 2
    assert ops["k_proj"].flops == 2 * 4 * 3584 * 512 + 4 * 512
    # No bias on O.
    assert ops["o_proj"].flops == 2 * 4 * 3584 * 3584
    # Fused qkv: one bias of 4608, 4·4608 adds.
    fused = {op.name: op for op in step_ops(resolve_workload("decode", model="qwen2-7b", batch=4, context=1024,
                                                             fused=["qkv"]))}
    assert fused["qkv_proj"].flops == 2 * 4 * 3584 * 4608 + 4 * 4608
    assert fused["qkv_proj"].bytes == 4 * 3584 * 2 + 3584 * 4608 * 2 + 4608 * 2 + 4 * 4608 * 2
    # Footprint in bf16: every parameter, biases included, two bytes.
    assert weight_footprint_bytes(w) == 7_615_616_512 * 2


def test_int4_keeps_the_bias_in_dtype():
    # int4 g128 q_proj: 3584·3584/2 + 3584 columns · 28 groups · 2 B = 6,422,528 + 200,704; bias 3584·2 bf16.
    w = resolve_workload("decode", model="qwen2-7b", batch=1, context=64, weight_dtype="int4")
    ops = {op.name: op for op in step_ops(w)}
    assert ops["q_proj"].weight_bytes == 3584 * 3584 // 2 + 3584 * 28 * 2 + 3584 * 2 == 6_630_400


def test_importer_sets_qwen2_bias_and_refuses_attention_bias(tmp_path):
    cfg = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert model_from_hf_config(path).qkv_bias
    path.write_text(json.dumps({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    assert not model_from_hf_config(path).qkv_bias
    # transformers' attention_bias also puts a bias on o_proj, which is not modelled.
    path.write_text(json.dumps({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                "attention_bias": True}))
    with pytest.raises(UserError, match="field 'attention_bias': .*o_proj"):
        model_from_hf_config(path)
