"""Biases on the Q, K and V projections (Qwen2/Qwen2.5, issue 12): the bias vector read once and N·n_out adds,
the parameters counted; each figure derived by hand below."""

from __future__ import annotations

import json

import pytest

from rooflinectl.engine.count.resident import weight_footprint_bytes
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config
from rooflinectl.specs.scenario import resolve_workload

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


def test_importer_sets_qwen2_bias_and_reads_attention_and_mlp_bias(tmp_path):
    cfg = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "hidden_size": 512,
           "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1024,
           "vocab_size": 1000}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = model_from_hf_config(path)
    assert (m.qkv_bias, m.o_bias, m.mlp_bias) == (True, False, False)
    path.write_text(json.dumps({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    assert not model_from_hf_config(path).qkv_bias
    # transformers' attention_bias puts a bias on q, k, v and o_proj (issue 12: o_proj's is modelled now), and
    # Llama's mlp_bias on gate, up and down.
    path.write_text(json.dumps({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                "attention_bias": True, "mlp_bias": True}))
    m = model_from_hf_config(path)
    assert (m.qkv_bias, m.o_bias, m.mlp_bias) == (True, True, True)
    # Per layer beyond the unbiased count: q, k, v biases 512 + 2·512 (8 KV heads of 64), o 512, MLP 2·1024 + 512.
    plain = m.model_copy(update={"qkv_bias": False, "o_bias": False, "mlp_bias": False})
    assert m.parameter_count() - plain.parameter_count() == 2 * (3 * 512 + 512 + 2 * 1024 + 512) == 9_216
    path.write_text(json.dumps({**cfg, "model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                "attention_bias": "yes"}))
    with pytest.raises(UserError, match="field 'attention_bias': expected true or false"):
        model_from_hf_config(path)


def test_o_and_mlp_biases_are_read_and_added():
    # Llama 3 8B with every bias, decode at batch 2 in bf16 (H 4096, I 14336): o_proj reads its 4096-element
    # bias (8,192 B) and adds 2·4096; down_proj likewise; gate_proj its 14336 (28,672 B), 2·14336 adds.
    w = resolve_workload("decode", model="llama-3-8b", batch=2, context=128)
    biased = w.model_copy(update={"model": w.model.model_copy(update={"o_bias": True, "mlp_bias": True})})
    plain, ops = ({op.name: op for op in step_ops(x)} for x in (w, biased))
    assert ops["o_proj"].bytes - plain["o_proj"].bytes == 4096 * 2
    assert ops["o_proj"].flops - plain["o_proj"].flops == 2 * 4096
    assert ops["gate_proj"].bytes - plain["gate_proj"].bytes == 14336 * 2
    assert ops["down_proj"].flops - plain["down_proj"].flops == 2 * 4096
    assert ops["q_proj"] == plain["q_proj"]  # qkv_bias not set
