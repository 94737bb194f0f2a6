"""Nemotron-H's config.json read by the importer: the bundled YAML is what the published keys give, transformers'
NemotronHForCausalLM of them has the same parameters on the meta device, and what is not modelled is refused in one
line."""

from __future__ import annotations

import json

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
# The keys of the published config.json (nvidia/Nemotron-H-8B-Base-8K) that set its shape, under their names there.
PUBLISHED = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 4096,
    "num_hidden_layers": 52, "hybrid_override_pattern": PATTERN, "num_attention_heads": 32,
    "num_key_value_heads": 8, "attention_head_dim": 128, "intermediate_size": 21504, "mlp_hidden_act": "relu2",
    "vocab_size": 131072, "tie_word_embeddings": False, "max_position_embeddings": 8192, "mamba_num_heads": 128,
    "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "expand": 2,
    "use_conv_bias": True, "chunk_size": 128, "use_bias": False, "attention_bias": False, "mlp_bias": False,
}


def write(tmp_path, **changes):
    path = tmp_path / "nemotron-h" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**PUBLISHED, **changes}))
    return path


def test_the_config_reads_as_the_bundled_model(tmp_path):
    got = model_from_hf_config(write(tmp_path)).model_dump()
    bundled = load_model("nemotron-h-8b").model_dump()
    assert {k for k in got if got[k] != bundled[k]} == {"id", "name", "source"}


def test_transformers_builds_the_same_parameters_on_the_meta_device(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    keys = {k: v for k, v in PUBLISHED.items() if k not in ("model_type", "attention_head_dim")}
    cfg = transformers.NemotronHConfig(**keys)
    with torch.device("meta"):
        hf = transformers.NemotronHForCausalLM(cfg)
    assert sum(p.numel() for p in hf.parameters()) == load_model("nemotron-h-8b").parameter_count() == 8_100_852_736


def test_transformers_list_of_block_types_reads_as_the_pattern(tmp_path):
    # NemotronHConfig.to_dict writes layers_block_type and leaves num_hidden_layers out (the list's length).
    names = {"M": "linear_attention", "*": "full_attention", "-": "mlp"}
    keys = {k: v for k, v in PUBLISHED.items() if k not in ("hybrid_override_pattern", "num_hidden_layers")}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**keys, "layers_block_type": [names[c] for c in PATTERN]}))
    assert model_from_hf_config(path).layer_pattern == load_model("nemotron-h-8b").layer_pattern


@pytest.mark.parametrize("changes, field", [
    ({"hybrid_override_pattern": "ME*-" * 13}, "hybrid_override_pattern"),
    ({"mlp_hidden_act": "silu"}, "mlp_hidden_act"),
    ({"use_bias": True}, "use_bias"),
    ({"num_hidden_layers": 50}, "num_hidden_layers"),
    ({"hybrid_override_pattern": "*-" * 26}, "hybrid_override_pattern"),
    ({"n_groups": 3}, "n_groups"),
])
def test_what_is_not_modelled_is_refused_by_its_key(tmp_path, changes, field):
    with pytest.raises(UserError, match=f"'?{field}'?"):
        model_from_hf_config(write(tmp_path, **changes))
