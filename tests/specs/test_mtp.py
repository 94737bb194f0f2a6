"""A model's multi-token-prediction modules (``Model.mtp_layers``, ``specs.hf.mtp``): read from each model type's own
config.json key, none where the config states none, refused in one line where the key is not a whole number; the
bundled models that ship them say so, and a model file's count is validated."""

from __future__ import annotations

import json

import pytest

from hf_published import PUBLISHED
from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

# config.json's fields, for the small configs below: a DeepSeek-V3 of four layers, a MiniMax-M2 of two.
DEEPSEEK = {**PUBLISHED["deepseek_v3"], "num_hidden_layers": 4, "first_k_dense_replace": 1}
MINIMAX = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "head_dim": 128, "hidden_size": 3072,
    "intermediate_size": 1536, "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 2,
    "num_key_value_heads": 8, "num_local_experts": 256, "qk_norm_type": "per_layer", "rotary_dim": 64,
    "use_qk_norm": True, "vocab_size": 200064, "use_mtp": True, "num_mtp_modules": 3, "mtp_transformer_layers": 1,
}


def read(tmp_path, cfg):
    path = tmp_path / "model" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(cfg))
    return model_from_hf_config(path)


@pytest.mark.parametrize("name, mtp", [
    ("deepseek-v3", 1), ("deepseek-v3.2-exp", 1), ("glm-4.5", 1), ("minimax-m2", 3), ("qwen3-next-80b-a3b", 1),
    ("kimi-k2", 0),
    ("llama-3.1-8b", 0), ("qwen3-235b-a22b", 0),
])
def test_the_bundled_models_that_ship_modules_say_how_many(name, mtp):
    m = load_model(name)
    assert m.mtp_layers == mtp
    # A model that ships none dumps as before the field existed: its default is no variant.
    assert ("mtp_layers" in m.model_dump()) == (mtp > 0)


@pytest.mark.parametrize("cfg, mtp", [
    (PUBLISHED["deepseek_v3"], 1),  # num_nextn_predict_layers 1
    (PUBLISHED["kimi_k2"], 0),  # num_nextn_predict_layers 0
    ({**DEEPSEEK, "num_nextn_predict_layers": 2}, 2),
    ({**DEEPSEEK, "num_nextn_predict_layers": None}, 0),
    # Left out: none, though DeepseekV3Config defaults it to 1 (no module is built from that default).
    ({k: v for k, v in DEEPSEEK.items() if k != "num_nextn_predict_layers"}, 0),
    (MINIMAX, 3),  # num_mtp_modules where use_mtp
    ({**MINIMAX, "use_mtp": False}, 0),
    ({k: v for k, v in MINIMAX.items() if k != "use_mtp"}, 0),
    # A Llama's config may carry the key (0 or 1 is read as no experts); a Llama runs no module.
    ({**PUBLISHED["llama"], "num_nextn_predict_layers": 1}, 0),
], ids=["deepseek-v3", "kimi-k2", "two", "null", "absent", "minimax-m2", "use_mtp-false", "use_mtp-absent",
        "llama"])
def test_a_config_json_gives_its_model_types_modules(tmp_path, cfg, mtp):
    assert read(tmp_path, cfg).mtp_layers == mtp


@pytest.mark.parametrize("changes, message", [
    ({"num_nextn_predict_layers": "1"},
     "field 'num_nextn_predict_layers': expected a whole number of multi-token-prediction modules, 0 to 64, got '1'"),
    ({"num_nextn_predict_layers": True},
     "field 'num_nextn_predict_layers': expected a whole number of multi-token-prediction modules, 0 to 64, got True"),
    ({"num_nextn_predict_layers": -1},
     "field 'num_nextn_predict_layers': expected a whole number of multi-token-prediction modules, 0 to 64, got -1"),
    ({"num_nextn_predict_layers": 65},
     "field 'num_nextn_predict_layers': expected a whole number of multi-token-prediction modules, 0 to 64, got 65"),
])
def test_a_deepseek_count_that_is_no_whole_number_is_refused(tmp_path, changes, message):
    with pytest.raises(UserError) as err:
        read(tmp_path, {**DEEPSEEK, **changes})
    assert str(err.value).endswith(f"config.json: {message}")


@pytest.mark.parametrize("changes, message", [
    ({"use_mtp": "yes"}, "field 'use_mtp': expected true or false, got 'yes'"),
    ({"mtp_transformer_layers": 2},
     "field 'mtp_transformer_layers': 2 layers a multi-token-prediction module is not modelled (one layer a module "
     "is)"),
    ({"num_mtp_modules": 2.5},
     "field 'num_mtp_modules': expected a whole number of multi-token-prediction modules, 0 to 64, got 2.5"),
])
def test_a_minimax_module_that_is_not_modelled_is_refused(tmp_path, changes, message):
    with pytest.raises(UserError) as err:
        read(tmp_path, {**MINIMAX, **changes})
    assert str(err.value).endswith(f"config.json: {message}")


def test_a_model_file_states_its_count_in_range(tmp_path):
    from helpers import assert_one_line_error, cli

    source = load_model("llama-3.1-8b").model_dump()
    for value, reason in ((-1, "must be greater than or equal to 0"), (65, "must be less than or equal to 64"),
                          ("1", "must be a valid integer")):
        path = tmp_path / f"m{value}.yaml"
        path.write_text(json.dumps({**source, "mtp_layers": value}))
        result = cli("analyze", "decode", "--model", str(path))
        assert_one_line_error(result)
        assert result.stderr == f"error: {path}: field 'mtp_layers': {reason}\n"
