"""config.json's `architectures` (issue 12): an entry the importer does not know is refused by name, never
counted as a dense Llama."""

from __future__ import annotations

import json

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.errors import UserError
from rooflinectl.specs.models import model_from_hf_config

DENSE = {"hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 8,
         "intermediate_size": 1024,
         "vocab_size": 1000}
MOE = {"num_local_experts": 8, "num_experts_per_tok": 2}
QWEN3_MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 256}


@pytest.mark.parametrize("model_type, architecture, extra", [
    ("llama", "LlamaForCausalLM", {}),
    ("mistral", "MistralForCausalLM", {}),
    ("qwen2", "Qwen2ForCausalLM", {}),
    ("mixtral", "MixtralForCausalLM", MOE),
    ("qwen3_moe", "Qwen3MoeForCausalLM", QWEN3_MOE),
    ("qwen3", "Qwen3ForCausalLM", {}),
    ("phi3", "Phi3ForCausalLM", {}),
    ("gemma2", "Gemma2ForCausalLM", {}),
    ("gemma3_text", "Gemma3ForCausalLM", {}),
    ("gpt_oss", "GptOssForCausalLM", MOE),
])
def test_known_architectures_are_read(tmp_path, model_type, architecture, extra):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "architectures": [architecture], **DENSE, **extra}))
    assert model_from_hf_config(path).hidden_size == 512


@pytest.mark.parametrize("architectures, reason", [
    # A known class of another model type: Gemma 3's in a llama config.
    (["Gemma3ForCausalLM"], "'Gemma3ForCausalLM' is not modelled for model_type llama"),
    (["LlamaForSequenceClassification"], "'LlamaForSequenceClassification' is not modelled"),
    (["LlamaForCausalLM", "LlavaForConditionalGeneration"], "'LlavaForConditionalGeneration'"),
    ([7], "7 is not modelled"),
    ("LlamaForCausalLM", "expected a list"),
])
def test_unknown_architectures_are_refused(tmp_path, architectures, reason):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "architectures": architectures, **DENSE}))
    with pytest.raises(UserError, match=f"field 'architectures': .*{reason}"):
        model_from_hf_config(path)


def test_cli_refuses_an_unknown_architecture_in_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "architectures": ["Phi3ForCausalLM"], **DENSE}))
    assert_one_line_error(cli("analyze", "decode", "--model", str(path), "--context", "64"), "Phi3ForCausalLM")


def test_a_config_without_a_model_type_is_refused_not_read_as_llama(tmp_path):
    # The features are read by model type: a Mistral config with no model_type had its 4,096-token window
    # dropped (decode at 32,768 tokens: 5.53 ms against the window's 4.41) and exited 0.
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["MistralForCausalLM"], "sliding_window": 4096, **DENSE}))
    with pytest.raises(UserError, match="field 'model_type' is missing"):
        model_from_hf_config(path)
    assert_one_line_error(cli("analyze", "decode", "--model", str(path), "--context", "64"), "'model_type'")
