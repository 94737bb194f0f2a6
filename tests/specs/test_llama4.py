"""Llama 4 Scout and Maverick: the config.json importer (model_type llama4 with its text_config, and
llama4_text) and the parameter counts against Meta's model cards."""

from __future__ import annotations

import json

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

# meta-llama/Llama-4-Maverick-17B-128E-Instruct's config.json, its text_config's keys that set the count (the
# published values; the vision_config is left out: it is not read).
MAVERICK_TEXT = {
    "model_type": "llama4_text", "attention_bias": False, "attention_chunk_size": 8192, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 5120, "interleave_moe_layer_step": 2, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576, "num_attention_heads": 40,
    "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 128,
    "rope_theta": 500000.0, "use_qk_norm": False, "vocab_size": 202048, "attn_temperature_tuning": True,
    "tie_word_embeddings": False,
}
# meta-llama/Llama-4-Scout-17B-16E-Instruct's: 16 experts on every layer, its Q/K norm, 10M positions.
SCOUT_TEXT = {**MAVERICK_TEXT, "interleave_moe_layer_step": 1, "num_local_experts": 16, "use_qk_norm": True,
              "max_position_embeddings": 10485760, "attn_temperature_tuning": 4}
COUNTING = {"id", "name", "source"}


def read(tmp_path, text, top=True):
    cfg = {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "text_config": text} \
        if top else {**text, "architectures": ["Llama4ForCausalLM"]}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return model_from_hf_config(path)


@pytest.mark.parametrize("text, bundled", [(SCOUT_TEXT, "llama-4-scout"), (MAVERICK_TEXT, "llama-4-maverick")])
def test_the_published_configs_read_as_the_bundled_models(tmp_path, text, bundled):
    imported = read(tmp_path, text)
    assert imported.model_dump(exclude=COUNTING) == load_model(bundled).model_dump(exclude=COUNTING)
    assert "vision tower is not counted" in imported.source
    (tmp_path / "t").mkdir()
    assert read(tmp_path / "t", text, top=False).model_dump(exclude=COUNTING) == imported.model_dump(exclude=COUNTING)


def test_the_layers_of_maverick():
    # interleave_moe_layer_step 2: layers 1, 3, …, 47 MoE (24), the even ones dense; no_rope_layer_interval 4:
    # layers 3, 7, …, 47 NoPE and full (12, all odd, so all MoE), the other 36 chunked (24 dense, 12 MoE).
    m = load_model("llama-4-maverick")
    assert m.layer_counts() == {(False, "chunked"): 24, (True, "chunked"): 12, (True, "full"): 12}
    assert [m.layer_is_moe(i) for i in range(4)] == [False, True, False, True]
    assert [m.layer_attention(i) for i in range(8)] == ["chunked"] * 3 + ["full"] + ["chunked"] * 3 + ["full"]
    assert (m.dense_layers, m.moe_layers) == (24, 24)


def test_scout_parameters_within_one_percent_of_the_model_card():
    # H 5120; Q 40·128 = 5120, K and V 8·128 = 1024: attention 5120·(5120 + 2048) + 5120·5120 = 62,914,560, two
    # norm gains 10,240 (the weightless Q/K norm has none). MoE layer: router 5120·16 = 81,920, 16 experts and
    # one shared of 3·5120·8192 = 125,829,120 each: 2,139,176,960. 48 layers: 105,700,884,480; embedding and LM
    # head 2·202048·5120 = 2,068,971,520; final norm 5,120: 107,769,861,120. The card's 109 B includes the vision
    # encoder (below); the text decoder alone is 1.1% under it.
    m = load_model("llama-4-scout")
    expert = 3 * 5120 * 8192
    layer = 62_914_560 + 10_240 + 5120 * 16 + 17 * expert
    assert m.parameter_count() == 48 * layer + 2 * 202048 * 5120 + 5120 == 107_769_861_120
    # Active: the top-1 expert and the shared one: 48·(62,924,800 + 81,920 + 2·125,829,120) + 2,068,976,640.
    assert m.active_parameter_count() == 48 * (62_924_800 + 81_920 + 2 * expert) + 2 * 202048 * 5120 + 5120
    # 17.17 B: +1.0% from the card's two-digit "17B" active.
    assert m.active_parameter_count() == pytest.approx(17e9, rel=0.02)


def test_maverick_parameters_within_one_percent_of_the_model_card():
    # 24 dense layers: attention 62,914,560 + gains 10,240 + MLP 3·5120·16384 = 251,658,240: 314,583,040. 24 MoE
    # layers: 62,924,800 + router 5120·128 = 655,360 + 129 experts (128 routed, 1 shared) of 125,829,120:
    # 16,295,536,640. With the embedding, LM head and final norm: 400,711,848,960, +0.18% from the card's 400 B.
    m = load_model("llama-4-maverick")
    dense, moe = 314_583_040, 62_924_800 + 5120 * 128 + 129 * 125_829_120
    assert m.parameter_count() == 24 * (dense + moe) + 2 * 202048 * 5120 + 5120 == 400_711_848_960
    assert m.parameter_count() == pytest.approx(400e9, rel=0.01)
    assert m.active_parameter_count() == pytest.approx(17e9, rel=0.02)  # 17.18 B: the card's "17B"


def test_scout_with_its_vision_encoder_matches_the_card():
    """The card's 109 B counts the vision encoder and projector, which the engine does not: built by
    transformers from the published vision_config (34 layers of 1408, MLP 5632, 16 heads, 336-pixel images of
    14-pixel patches, 4096-wide projector and output), they hold 871,932,416 parameters."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama4 import modeling_llama4

    vision = dict(hidden_size=1408, intermediate_size=5632, num_attention_heads=16, num_hidden_layers=34,
                  image_size=336, patch_size=14, projector_input_dim=4096, projector_output_dim=4096,
                  vision_output_dim=4096, pixel_shuffle_ratio=0.5)
    cfg = transformers.Llama4Config(vision_config=vision, text_config={"hidden_size": 5120})
    with torch.device("meta"):
        parts = [modeling_llama4.Llama4VisionModel(cfg.vision_config), modeling_llama4.Llama4MultiModalProjector(cfg)]
    encoder = sum(p.numel() for part in parts for p in part.parameters())
    assert encoder == 871_932_416
    assert load_model("llama-4-scout").parameter_count() + encoder == pytest.approx(109e9, rel=0.01)  # −0.33%


@pytest.mark.parametrize("change, reason", [
    ({"moe_layers": [0, 2]}, "moe_layers"),
    ({"no_rope_layers": [1, 0]}, "no_rope_layers"),
    ({"attention_chunk_size": None}, "attention_chunk_size"),
    ({"interleave_moe_layer_step": 0}, "interleave_moe_layer_step"),
])
def test_what_llama4_does_not_model_is_refused_by_its_key(tmp_path, change, reason):
    with pytest.raises(UserError, match=reason):
        read(tmp_path, {**MAVERICK_TEXT, **change})
