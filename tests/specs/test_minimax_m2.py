"""MiniMax-M2's config.json read by the importer (model_type minimax_m2): the bundled YAML is what the published
keys give, the count is transformers' own on the meta device and within 1% of the model card's 230 B, its
per-layer Q/K norms are counted by hand, and what is not modelled is refused in one line."""

from __future__ import annotations

import json

import pytest

from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config
from rooflinectl.specs.scenario import resolve_workload

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# MiniMaxAI/MiniMax-M2's config.json, the keys that build the model (token ids, dtype, eps, rope_theta build none).
PUBLISHED = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "attn_type_list": [1] * 62,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 1536,
    "max_position_embeddings": 196608, "mtp_transformer_layers": 1, "num_attention_heads": 48,
    "num_experts_per_tok": 8, "num_hidden_layers": 62, "num_key_value_heads": 8, "num_local_experts": 256,
    "num_mtp_modules": 3, "qk_norm_type": "per_layer", "rotary_dim": 64, "scoring_func": "sigmoid",
    "shared_intermediate_size": 0, "tie_word_embeddings": False, "use_mtp": True, "use_qk_norm": True,
    "use_routing_bias": True, "vocab_size": 200064,
}
# The MiniMax-M2 model card (huggingface.co/MiniMaxAI/MiniMax-M2): 230 B parameters in all, 10 B active.
PUBLISHED_TOTAL = 230e9


def write(tmp_path, cfg):
    path = tmp_path / "minimax-m2" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


def transformers_count(cfg):
    config = transformers.MiniMaxM2Config(**{k: v for k, v in cfg.items() if k != "model_type"})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def test_the_config_reads_as_the_bundled_model(tmp_path):
    got = model_from_hf_config(write(tmp_path, PUBLISHED)).model_dump()
    bundled = load_model("minimax-m2").model_dump()
    assert {k for k in got if got[k] != bundled[k]} == {"name", "source"}  # the id is the folder's


def test_the_count_is_transformers_and_within_1_percent_of_the_model_card():
    model = load_model("minimax-m2")
    assert model.parameter_count() == transformers_count(PUBLISHED)
    assert abs(model.parameter_count() / PUBLISHED_TOTAL - 1) < 0.01  # the MTP modules are not counted


def test_per_layer_qk_norms_by_hand():
    """Gains: (48 + 8) · 128 = 7,168 a layer, against 2 · 128 per head; the norms' FLOPs are the same elements,
    N rows of 6,144 and of 1,024 in place of N·48 and N·8 rows of 128."""
    m = load_model("minimax-m2")
    per_head = m.model_copy(update={"qk_norm_per_layer": False})
    assert m.parameter_count() - per_head.parameter_count() == 62 * ((48 + 8) * 128 - 2 * 128)
    w = resolve_workload("decode", model="minimax-m2", batch=4)
    ops = {o.name: o for o in step_ops(w)}
    heads = {o.name: o for o in step_ops(w.model_copy(update={"model": per_head}))}
    assert ops["q_norm"].flops == heads["q_norm"].flops and ops["k_norm"].flops == heads["k_norm"].flops
    assert ops["q_norm"].bytes - heads["q_norm"].bytes == (6144 - 128) * 2  # the gain, bf16
    assert ops["k_norm"].bytes - heads["k_norm"].bytes == (1024 - 128) * 2


def test_rotary_dim_absent_reads_rope_parameters(tmp_path):
    cfg = {k: v for k, v in PUBLISHED.items() if k != "rotary_dim"}
    assert model_from_hf_config(write(tmp_path, cfg)).rotary_dim is None  # RoPE over the whole head
    cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.25}
    assert model_from_hf_config(write(tmp_path, cfg)).rotary_dim == 32


@pytest.mark.parametrize("changes, field", [
    ({"attn_type_list": [0] + [1] * 61}, "attn_type_list"),
    ({"qk_norm_type": "per_head"}, "qk_norm_type"),
    ({"use_qk_norm": False}, "use_qk_norm"),
    ({"scoring_func": "softmax"}, "scoring_func"),
    ({"shared_intermediate_size": 1536}, "shared_intermediate_size"),
    ({"num_local_experts": None}, "num_local_experts"),
    ({"num_key_value_heads": None}, "num_key_value_heads"),
    ({"n_shared_experts": 2}, "n_shared_experts"),
])
def test_what_is_not_modelled_is_refused_by_its_key(tmp_path, changes, field):
    with pytest.raises(UserError, match=f"field '{field}'"):
        model_from_hf_config(write(tmp_path, {**PUBLISHED, **changes}))


def test_workloads_show_names_the_norm_over_the_whole_q_and_k():
    from rooflinectl.render.workloads import layer_pattern
    from rooflinectl.specs.models import load_model

    assert ", q/k RMSNorm over the whole Q and K" in layer_pattern(load_model("minimax-m2"))
    assert ", q/k RMSNorm per head" in layer_pattern(load_model("qwen3-32b"))
