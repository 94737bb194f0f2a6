"""A config.json key left out, or given to a model type whose class ignores it, reads as transformers' class reads
it: the figures below are transformers 5.25's on the meta device (tests/specs/test_hf_oracle.py builds every case)
or derived by hand. And what no config may do: a traceback from a key of the wrong type, or work in proportion to
a number before the number is checked."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from helpers import assert_one_line_error, cli
from hf_published import PUBLISHED
from rooflinectl.errors import UserError
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import model_from_hf_config


def config(model_type: str, drop: tuple[str, ...] = (), **keys: Any) -> dict[str, Any]:
    """A published config with keys taken out and put in, in Gemma 3's text_config where it nests its decoder
    (its tie_word_embeddings stays at the top)."""
    cfg = copy.deepcopy(PUBLISHED[model_type])
    decoder = cfg.get("text_config", cfg)
    for key in drop:
        decoder.pop(key)
    for key, value in keys.items():
        (cfg if key == "tie_word_embeddings" else decoder)[key] = value
    return cfg


def read(tmp_path, cfg: dict[str, Any]) -> Model:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return model_from_hf_config(path)


def test_gpt_oss_without_layer_types_alternates(tmp_path):
    # GptOssConfig: layer i slides when (i + 1) % 2, 18 of 36 layers.
    m = read(tmp_path, config("gpt_oss", drop=("layer_types",)))
    assert (m.sliding_window, m.layer_pattern, m.sliding_layers) == (128, ["sliding", "full"], 18)


def test_a_qwen_window_is_off_unless_switched_on_and_qwen3_moe_slides_every_layer(tmp_path):
    for t in ("qwen2", "qwen3", "qwen3_moe"):  # use_sliding_window defaults to false: the window is dropped
        m = read(tmp_path, config(t, drop=("use_sliding_window",), sliding_window=4096, max_window_layers=0))
        assert m.sliding_window is None
    # Qwen3MoeAttention slides every layer while the window is on, whatever max_window_layers (48 here) says.
    m = read(tmp_path, config("qwen3_moe", use_sliding_window=True, sliding_window=4096))
    assert (m.sliding_window, m.layer_pattern, m.sliding_layers) == (4096, None, 48)


@pytest.mark.parametrize("model_type, kv_heads", [
    ("llama", 32), ("phi3", 32), ("mistral", 8), ("mixtral", 8), ("qwen3", 32), ("qwen3_moe", 4), ("gemma2", 4),
    ("gemma3", 4), ("gemma3_text", 4), ("gpt_oss", 8)])
def test_missing_kv_heads_are_the_class_default(tmp_path, model_type, kv_heads):
    # LlamaConfig and Phi3Config: the heads; MistralConfig 8, Qwen3Config 32, Qwen3MoeConfig 4, Gemma 4, gpt-oss 8.
    assert read(tmp_path, config(model_type, drop=("num_key_value_heads",))).num_kv_heads == kv_heads


def test_a_default_kv_head_count_that_does_not_divide_the_heads_is_refused_by_its_key(tmp_path):
    # Qwen2-7B has 28 heads; Qwen2Config's default of 32 KV heads does not divide them.
    with pytest.raises(UserError, match="field 'num_key_value_heads': missing, and the qwen2 default of 32"):
        read(tmp_path, config("qwen2", drop=("num_key_value_heads",)))
    with pytest.raises(UserError, match="field 'num_key_value_heads': null"):
        read(tmp_path, config("mistral", num_key_value_heads=None))


def test_deepseek_keys_without_one_default_are_refused_and_q_lora_rank_is_1536(tmp_path):
    # DeepSeek-V3: 671,026,404,352 parameters (its model card's 671 B), the same without q_lora_rank (1536 in
    # DeepseekV3Config and DeepSeek's own code); 708.9 B were printed with the three keys left out.
    m = read(tmp_path, config("deepseek_v3", drop=("q_lora_rank",)))
    assert m.mla is not None and m.mla.q_lora_rank == 1536
    assert m.parameter_count() == 671_026_404_352
    for key in ("first_k_dense_replace", "n_shared_experts"):
        with pytest.raises(UserError, match=f"field '{key}': missing from the deepseek_v3 config"):
            read(tmp_path, config("deepseek_v3", drop=(key,)))


def test_biases_and_windows_only_where_the_class_builds_them(tmp_path):
    # DeepseekV3MLP and MistralAttention have no biases; LlamaAttention has no window.
    assert read(tmp_path, config("deepseek_v3", mlp_bias=True)).parameter_count() == 671_026_404_352
    mistral = read(tmp_path, config("mistral", attention_bias=True, mlp_bias=True))
    assert (mistral.qkv_bias, mistral.o_bias, mistral.mlp_bias) == (False, False, False)
    assert mistral.parameter_count() == 7_241_732_096  # Mistral 7B, as transformers builds it
    assert read(tmp_path, config("llama", sliding_window=4096)).sliding_window is None
    # Mistral keeps its window with layer_types all full (MistralConfig warns and ignores them).
    full = read(tmp_path, config("mistral", layer_types=["full_attention"] * 32))
    assert (full.sliding_window, full.layer_pattern) == (4096, None)
    with pytest.raises(UserError, match="field 'mlp_bias': biases on DeepSeek-V2's MLPs"):
        read(tmp_path, config("deepseek_v2", mlp_bias=True))


def test_mistral_s_default_window_qwen3_s_head_dim_and_gemma_3_s_top_level_tie(tmp_path):
    assert read(tmp_path, config("mistral", drop=("sliding_window",))).sliding_window == 4096
    # Qwen3Config's head_dim is 128 whatever hidden / heads is (1024 / 16 = 64 here): Qwen3-0.6B's shape.
    m = read(tmp_path, config("qwen3", drop=("head_dim",), hidden_size=1024, num_attention_heads=16))
    assert m.head_dim == 128
    # Gemma 3 27B untied at the top: its 262,208 × 5,376 LM head (1,409,630,208) beside the 27,009,346,304.
    tied, untied = (read(tmp_path, config("gemma3", tie_word_embeddings=t)) for t in (True, False))
    assert (tied.tie_embeddings, untied.tie_embeddings) == (True, False)
    assert untied.parameter_count() == 27_009_346_304 + 262_208 * 5376 == 28_418_976_512
    assert read(tmp_path, config("gemma3")).tie_embeddings is True  # Gemma3Config's default


@pytest.mark.parametrize("cfg, reason", [
    ({**PUBLISHED["llama"], "model_type": []}, "field 'model_type': expected a name"),
    ({**PUBLISHED["llama"], "model_type": {"a": 1}}, "field 'model_type': expected a name"),
    ({**PUBLISHED["gpt_oss"], "layer_types": [["sliding_attention"]] * 36}, "field 'layer_types'"),
    ({**PUBLISHED["gpt_oss"], "layer_types": [{"a": 1}] * 36}, "field 'layer_types'"),
    ({**PUBLISHED["gpt_oss"], "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": 3}},
     "modules_to_not_convert': expected a list of module names, got 3"),
    ({**PUBLISHED["gpt_oss"], "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": "lm_head"}},
     "modules_to_not_convert': expected a list of module names, got 'lm_head'"),
])
def test_keys_of_the_wrong_type_are_one_line(tmp_path, cfg, reason):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert_one_line_error(cli("analyze", "decode", "--model", str(path)), reason)


@pytest.mark.parametrize("cfg", [
    config("gemma3_text", num_hidden_layers=10**9, sliding_window_pattern=10**9),
    config("qwen2", num_hidden_layers=10**9, use_sliding_window=True, sliding_window=4096),
    config("gpt_oss", drop=("layer_types",), num_hidden_layers=100_000),
])
def test_too_many_layers_are_refused_before_a_list_of_them_is_built(tmp_path, cfg):
    # A billion layers would take gigabytes as a list (and then a quadratic search for its period).
    with pytest.raises(UserError, match="field 'num_hidden_layers'"):
        read(tmp_path, cfg)


def test_the_largest_layer_count_folds_its_pattern(tmp_path):
    # 16,384 Qwen2 layers, the first 28 full: one pattern of 16,384 entries, its own period (no shorter prefix
    # repeats to it); 16,384 Gemma 3 layers fold to their period of six.
    m = read(tmp_path, config("qwen2", num_hidden_layers=2**14, use_sliding_window=True, sliding_window=4096))
    assert m.layer_pattern == ["full"] * 28 + ["sliding"] * (2**14 - 28) and m.sliding_layers == 2**14 - 28
    g = read(tmp_path, config("gemma3_text", num_hidden_layers=2**14))
    assert g.layer_pattern == ["sliding"] * 5 + ["full"] and g.sliding_layers == 2**14 - 2**14 // 6
