"""config.json import of Gemma 2/3, gpt-oss, Phi-3 and dense Qwen3 (issue 12): the configs as published on
Hugging Face (keys that change no count, such as token ids and dropouts, left out) read back as the bundled
models, their parameter counts against the published ones, and what is refused, in one line."""

from __future__ import annotations

import json

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

# https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json
GPT_OSS_120B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
    "initial_context_length": 4096, "intermediate_size": 2880,
    "layer_types": ["sliding_attention", "full_attention"] * 18, "max_position_embeddings": 131072,
    "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "num_local_experts": 128, "output_router_logits": False,
    "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                       "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
    "rms_norm_eps": 1e-05, "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                                            "original_max_position_embeddings": 4096, "rope_type": "yarn"},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "vocab_size": 201088,
}
# https://huggingface.co/google/gemma-3-27b-it/blob/main/config.json: the text decoder in text_config, which
# leaves out the keys at Gemma3TextConfig's defaults (vocab_size 262208, sliding_window_pattern 6, …).
GEMMA_3_27B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "image_token_index": 262144, "mm_tokens_per_image": 256, "model_type": "gemma3",
    "text_config": {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                    "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                    "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
    "vision_config": {"hidden_size": 1152, "image_size": 896, "intermediate_size": 4304,
                      "model_type": "siglip_vision_model", "num_attention_heads": 16, "num_hidden_layers": 27,
                      "patch_size": 14},
}
# https://huggingface.co/google/gemma-2-27b/blob/main/config.json
GEMMA_2_27B = {
    "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "head_dim": 128, "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 4608, "intermediate_size": 36864, "max_position_embeddings": 8192, "model_type": "gemma2",
    "num_attention_heads": 32, "num_hidden_layers": 46, "num_key_value_heads": 16, "query_pre_attn_scalar": 144,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "vocab_size": 256000,
}
# https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/blob/main/config.json
PHI_3_MINI = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "embd_pdrop": 0.0, "hidden_act": "silu",
    "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096, "model_type": "phi3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05, "rope_scaling": None,
    "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": False, "vocab_size": 32064,
}
# https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 12288, "max_position_embeddings": 40960, "max_window_layers": 36,
    "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": False,
    "use_sliding_window": False, "vocab_size": 151936,
}

# https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
LLAMA_3_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu",
    "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 500000.0, "tie_word_embeddings": False, "vocab_size": 128256,
}

COUNTING = ("id", "name", "source")  # what an import names differently from a bundled file


def read(tmp_path, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return model_from_hf_config(path)


@pytest.mark.parametrize("cfg, bundled", [(GPT_OSS_120B, "gpt-oss-120b"), (GEMMA_3_27B, "gemma-3-27b")])
def test_a_published_config_reads_as_the_bundled_model(tmp_path, cfg, bundled):
    imported = read(tmp_path, cfg).model_dump(exclude=set(COUNTING))
    assert imported == load_model(bundled).model_dump(exclude=set(COUNTING))


def test_gemma3_says_the_vision_tower_is_not_counted(tmp_path):
    assert "vision tower is not counted" in read(tmp_path, GEMMA_3_27B).source
    # Gemma3ForCausalLM's own config (model_type gemma3_text) reads the same decoder.
    text = {"architectures": ["Gemma3ForCausalLM"], **GEMMA_3_27B["text_config"]}
    assert read(tmp_path, text).model_dump(exclude=set(COUNTING)) \
        == load_model("gemma-3-27b").model_dump(exclude=set(COUNTING))


def test_gemma2_27b(tmp_path):
    m = read(tmp_path, GEMMA_2_27B)
    assert (m.mlp, m.post_norms, m.scale_embeddings, m.tie_embeddings) == ("gated_gelu_tanh", True, True, True)
    assert (m.attn_logit_softcapping, m.final_logit_softcapping) == (50.0, 30.0)
    # Gemma2DecoderLayer: layer 0 sliding, layer 1 full, alternating; 23 of 46 through 4096.
    assert (m.sliding_window, m.layer_pattern, m.sliding_layers) == (4096, ["sliding", "full"], 23)
    assert not m.qk_norm  # Gemma 3's, not Gemma 2's
    # Per layer 4608·(4096 + 2·2048) + 4096·4608 = 56,623,104, four norms 18,432, MLP 3·4608·36864
    # = 509,607,936: 566,249,472 × 46 = 26,047,475,712; tied embedding 256000·4608 = 1,179,648,000; final norm
    # 4608: 27,227,128,320, the 27.2 B of the safetensors count on its Hugging Face page.
    assert m.parameter_count() == 46 * 566_249_472 + 1_179_648_000 + 4608 == 27_227_128_320


def test_phi3_mini(tmp_path):
    m = read(tmp_path, PHI_3_MINI)
    # sliding_window 2047 with no pattern: every layer slides (Phi3Attention passes it to every layer).
    assert (m.sliding_window, m.layer_pattern, m.sliding_layers) == (2047, None, 32)
    assert (m.mlp, m.qkv_bias, m.rotary_dim) == ("gated_silu", False, None)
    assert "--fuse qkv,gate_up" in m.source  # its checkpoint's fused qkv_proj and gate_up_proj
    # Per layer 4·3072² = 37,748,736 + MLP 3·3072·8192 = 75,497,472 + norms 6,144 = 113,252,352; × 32, plus
    # 2·32064·3072 = 197,001,216 and 3072: 3,821,079,552, the "3.8 billion parameters" of Abdin et al. 2024,
    # 'Phi-3 Technical Report' (within 1%).
    assert m.parameter_count() == 32 * 113_252_352 + 197_001_216 + 3072 == 3_821_079_552
    assert abs(m.parameter_count() / 3.8e9 - 1) < 0.01
    # Phi-4-mini's partial_rotary_factor 0.75: RoPE on int(128 · 0.75) = 96 of each head's 128 dimensions.
    partial = read(tmp_path, {**PHI_3_MINI, "head_dim": 128, "partial_rotary_factor": 0.75})
    assert partial.rotary_dim == 96


def test_partial_rotary_dims_are_truncated_as_phi3_does(tmp_path):
    """Phi-3 mini's heads are 3072/32 = 96 wide; partial_rotary_factor 0.34 gives 96·0.34 = 32.64, which
    Phi3RotaryEmbedding truncates, int(32.64) = 32 dimensions (16 frequencies, each rotating a pair): not
    round()'s 33."""
    m = read(tmp_path, {**PHI_3_MINI, "partial_rotary_factor": 0.34})
    assert (m.head_dim, m.rotary_dim) == (96, 32)
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding

    hf = transformers.Phi3Config(hidden_size=3072, num_attention_heads=32, partial_rotary_factor=0.34)
    assert 2 * Phi3RotaryEmbedding(hf).inv_freq.numel() == m.rotary_dim


def test_qwen3_dense(tmp_path):
    m = read(tmp_path, QWEN3_8B)
    assert (m.qk_norm, m.qkv_bias, m.sliding_window, m.moe) == (True, False, None, None)
    # Per layer 4096·(4096 + 2·1024) + 4096·4096 = 41,943,040, q/k norms 256, norms 8,192, MLP 3·4096·12288
    # = 150,994,944: 192,946,432 × 36 = 6,946,071,552 (+ final norm 4096: the card's 6.95 B non-embedding);
    # 2·151936·4096 = 1,244,659,712: 8,190,735,360, Qwen3-8B's model card's 8.2 B (within 1%).
    assert m.parameter_count() == 36 * 192_946_432 + 4096 + 1_244_659_712 == 8_190_735_360
    assert abs(m.parameter_count() / 8.2e9 - 1) < 0.01


def test_qwen_max_window_layers(tmp_path):
    # Qwen2/Qwen3 with use_sliding_window: the layers from max_window_layers on slide.
    m = read(tmp_path, {**QWEN3_8B, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 30})
    assert m.layer_pattern == ["full"] * 30 + ["sliding"] * 6 and m.sliding_layers == 6
    # max_window_layers at or beyond the layers: no layer slides, no window.
    none = read(tmp_path, {**QWEN3_8B, "use_sliding_window": True, "sliding_window": 4096})
    assert (none.sliding_window, none.layer_pattern) == (None, None)


def test_qwen_max_window_layers_defaults_to_28(tmp_path):
    """use_sliding_window with no max_window_layers: Qwen2Config's and Qwen3Config's default, 28, so of
    Qwen3-8B's 36 layers the last 8 (28 … 35) slide."""
    cfg = {k: v for k, v in QWEN3_8B.items() if k != "max_window_layers"}
    m = read(tmp_path, {**cfg, "use_sliding_window": True, "sliding_window": 4096})
    assert m.layer_pattern == ["full"] * 28 + ["sliding"] * 8 and m.sliding_layers == 8
    transformers = pytest.importorskip("transformers")
    assert transformers.Qwen2Config().max_window_layers == transformers.Qwen3Config().max_window_layers == 28
    hf = transformers.Qwen3Config(use_sliding_window=True, sliding_window=4096, num_hidden_layers=36)
    assert [t.removesuffix("_attention") for t in hf.layer_types] == m.layer_pattern


def test_layer_types_are_read_and_folded_to_their_period(tmp_path):
    # gpt-oss's 36 entries fold to [sliding, full]; an irregular list stays whole.
    assert read(tmp_path, GPT_OSS_120B).layer_pattern == ["sliding", "full"]
    types = ["full_attention"] + ["sliding_attention"] * 35
    m = read(tmp_path, {**GPT_OSS_120B, "layer_types": types})
    assert m.layer_pattern == ["full"] + ["sliding"] * 35 and m.sliding_layers == 35


@pytest.mark.parametrize("cfg, reason", [
    ({**PHI_3_MINI, "model_type": "phi3small", "architectures": ["Phi3SmallForCausalLM"]},
     "field 'model_type': 'phi3small' is not modelled: Phi-3-small's block-sparse attention"),
    ({**PHI_3_MINI, "model_type": "phimoe", "architectures": ["PhiMoEForCausalLM"]},
     "'phimoe' is not modelled: Phi-3.5-MoE's experts"),
    ({**GEMMA_3_27B, "text_config": None}, "field 'text_config'"),
    ({**GEMMA_3_27B, "text_config": {**GEMMA_3_27B["text_config"], "model_type": "llama"}},
     "field 'text_config.model_type'"),
    ({**GPT_OSS_120B, "layer_types": ["chunked_attention", "full_attention"] * 18}, "field 'layer_types'"),
    ({**GPT_OSS_120B, "layer_types": ["sliding_attention"] * 35}, "field 'layer_types': expected 36 entries"),
    ({**GEMMA_2_27B, "hidden_activation": "gelu"}, "field 'hidden_activation'"),
    ({**PHI_3_MINI, "hidden_act": "gelu_pytorch_tanh"}, "field 'hidden_act'"),
    ({**PHI_3_MINI, "partial_rotary_factor": 2}, "field 'partial_rotary_factor'"),
    ({**GEMMA_3_27B, "text_config": {**GEMMA_3_27B["text_config"], "sliding_window_pattern": 0}},
     "field 'sliding_window_pattern'"),
    ({**GPT_OSS_120B, "architectures": ["Gemma2ForCausalLM"]}, "'Gemma2ForCausalLM' is not modelled for model_type"),
])
def test_what_is_not_modelled_is_refused(tmp_path, cfg, reason):
    with pytest.raises(UserError, match=reason):
        read(tmp_path, cfg)


def test_cli_imports_gpt_oss_and_refuses_phimoe_in_one_line(tmp_path):
    path = tmp_path / "gpt-oss-120b" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(GPT_OSS_120B))
    result = cli("analyze", "decode", "--gpu", "b200", "--model", str(path), "--context", "8192")
    assert result.exit_code == 0, result.output
    assert "attention_local" in result.output and "mxfp4" in result.output
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**PHI_3_MINI, "model_type": "phimoe"}))
    assert_one_line_error(cli("analyze", "decode", "--model", str(bad), "--context", "64"), "phimoe")


def test_a_config_without_tie_word_embeddings_has_its_own_lm_head(tmp_path):
    """LlamaConfig's tie_word_embeddings defaults to false (as Mistral's, Qwen2/3's and Phi-3's do; Gemma's true,
    as the importer's Gemma defaults say): Llama 3 8B's config without the key is untied, 8,030,261,248
    parameters with its LM head of 128,256·4096 = 525,336,576, the bundled model."""
    m = read(tmp_path, {k: v for k, v in LLAMA_3_8B.items() if k != "tie_word_embeddings"})
    assert m.tie_embeddings is False
    assert m.parameter_count() == 8_030_261_248
    assert m.model_dump(exclude=set(COUNTING)) == load_model("llama-3-8b").model_dump(exclude=set(COUNTING))
    transformers = pytest.importorskip("transformers")
    assert transformers.LlamaConfig().tie_word_embeddings is False


def test_an_expert_count_of_one_in_a_dense_config_reads_as_dense(tmp_path):
    """num_experts: 1 or num_local_experts: 1 in a Llama config says "no experts" (one MLP a layer): the config
    is the dense Llama 3 8B, not refused as an architecture with experts. transformers' LlamaForCausalLM of that
    config, built on the meta device, is dense too: 8,030,261,248 parameters."""
    cfg = {**LLAMA_3_8B, "num_experts": 1, "num_local_experts": 1}
    m = read(tmp_path, cfg)
    assert m.moe is None
    assert m.model_dump(exclude=set(COUNTING)) == load_model("llama-3-8b").model_dump(exclude=set(COUNTING))
    assert m.parameter_count() == 8_030_261_248
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**{
            k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}))
    assert sum(p.numel() for p in hf.parameters()) == m.parameter_count()
