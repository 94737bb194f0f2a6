"""GLM-4.5's config.json read by the importer (model_type glm4_moe): the bundled YAML is what transformers'
Glm4MoeConfig of the published keys gives, the count is transformers' own on the meta device and within 1% of the
model card's 355 B, and what is not modelled is refused in one line."""

from __future__ import annotations

import json

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# zai-org/GLM-4.5's config.json, the keys that build the model (the token ids, dtype, eps and rope_theta build no
# weight). GLM-4.6's differs in max_position_embeddings alone (202,752).
PUBLISHED = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 5120, "partial_rotary_factor": 0.5, "intermediate_size": 12288,
    "max_position_embeddings": 131072, "moe_intermediate_size": 1536, "norm_topk_prob": True,
    "num_attention_heads": 96, "n_group": 1, "topk_group": 1, "n_routed_experts": 160, "n_shared_experts": 1,
    "routed_scaling_factor": 2.5, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "num_hidden_layers": 92,
    "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "tie_word_embeddings": False, "use_qk_norm": True,
    "vocab_size": 151552,
}
# The GLM-4.5 model card (huggingface.co/zai-org/GLM-4.5) and the GLM-4.5 repository's README: 355 B parameters
# in all, 32 B active.
PUBLISHED_TOTAL = 355e9


def write(tmp_path, cfg):
    path = tmp_path / "glm-4.5" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


def transformers_count(cfg):
    config = transformers.Glm4MoeConfig(**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def test_the_config_reads_as_the_bundled_model(tmp_path):
    got = model_from_hf_config(write(tmp_path, PUBLISHED)).model_dump()
    bundled = load_model("glm-4.5").model_dump()
    assert {k for k in got if got[k] != bundled[k]} == {"name", "source"}  # the id is the folder's, glm-4.5


def test_transformers_own_config_reads_the_same(tmp_path):
    """Glm4MoeConfig.to_dict() keeps partial_rotary_factor in rope_parameters, not at the top."""
    cfg = transformers.Glm4MoeConfig(**{k: v for k, v in PUBLISHED.items() if k != "model_type"}).to_dict()
    assert "partial_rotary_factor" not in cfg
    got = model_from_hf_config(write(tmp_path, json.loads(json.dumps(cfg, default=str))))
    assert got.model_dump() == model_from_hf_config(write(tmp_path, PUBLISHED)).model_dump()


def test_the_count_is_transformers_and_within_1_percent_of_the_model_card():
    model = load_model("glm-4.5")
    assert model.parameter_count() == transformers_count(PUBLISHED) == 352_797_814_784
    assert abs(model.parameter_count() / PUBLISHED_TOTAL - 1) < 0.01  # 0.62% under: the MTP layer is not counted


def test_glm_4_6_is_glm_4_5_at_a_longer_context(tmp_path):
    got = model_from_hf_config(write(tmp_path, {**PUBLISHED, "max_position_embeddings": 202752})).model_dump()
    bundled = load_model("glm-4.5").model_dump()
    assert {k for k in got if got[k] != bundled[k]} == {"name", "source", "max_position_embeddings"}


SMALL = {**PUBLISHED, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
         "head_dim": 64, "num_hidden_layers": 4, "moe_intermediate_size": 64, "n_routed_experts": 8,
         "num_experts_per_tok": 2, "vocab_size": 1000}


@pytest.mark.parametrize("changes", [
    {},
    {"attention_bias": False, "use_qk_norm": False},
    {"n_shared_experts": 2, "first_k_dense_replace": 0},
    {"partial_rotary_factor": 1.0, "tie_word_embeddings": True},
], ids=str)
def test_variants_count_as_transformers_builds_them(tmp_path, changes):
    cfg = {**SMALL, **changes}
    assert model_from_hf_config(write(tmp_path, cfg)).parameter_count() == transformers_count(cfg)


def test_class_defaults_fill_what_a_config_leaves_out(tmp_path):
    """Glm4MoeConfig: partial_rotary_factor 0.5, one shared expert, the first layer dense, no biases or Q/K norm."""
    cfg = {k: v for k, v in SMALL.items() if k not in ("partial_rotary_factor", "n_shared_experts",
                                                        "first_k_dense_replace", "attention_bias", "use_qk_norm")}
    m = model_from_hf_config(write(tmp_path, cfg))
    assert (m.rotary_dim, m.moe.num_shared_experts, m.moe.first_dense_layers, m.qkv_bias, m.qk_norm) == (
        32, 1, 1, False, False)
    assert m.parameter_count() == transformers_count(cfg)


@pytest.mark.parametrize("changes, field", [
    ({"use_qk_norm": "yes"}, "use_qk_norm"),
    ({"attention_bias": 1}, "attention_bias"),
    ({"n_routed_experts": None}, "n_routed_experts"),
    ({"num_key_value_heads": None}, "num_key_value_heads"),
    ({"head_dim": None}, "head_dim"),  # 5,120 / 96 heads is no whole head
    ({"kv_lora_rank": 512}, "kv_lora_rank"),
])
def test_what_is_not_modelled_is_refused_by_its_key(tmp_path, changes, field):
    with pytest.raises(UserError, match=f"field '{field}'"):
        model_from_hf_config(write(tmp_path, {**PUBLISHED, **changes}))
