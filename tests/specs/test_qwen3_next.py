"""Qwen3-Next's config.json read by the importer: the bundled YAML is what transformers' Qwen3NextConfig of the
published sizes gives, and what is not modelled is refused in one line."""

from __future__ import annotations

import json

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

transformers = pytest.importorskip("transformers")


def write(tmp_path, **changes):
    # The published config.json (Qwen/Qwen3-Next-80B-A3B-Instruct) differs from Qwen3NextConfig's defaults in
    # these two keys only.
    cfg = transformers.Qwen3NextConfig(intermediate_size=5120, max_position_embeddings=262144,
                                       architectures=["Qwen3NextForCausalLM"]).to_dict()
    cfg.update(changes)
    path = tmp_path / "qwen3-next" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg, default=str))
    return path


def test_the_config_reads_as_the_bundled_model(tmp_path):
    got = model_from_hf_config(write(tmp_path)).model_dump()
    bundled = load_model("qwen3-next-80b-a3b").model_dump()
    differ = {k for k in got.keys() | bundled.keys() if got.get(k) != bundled.get(k)}
    # config.json names no multi-token-prediction module, so an import ships none; the bundled model gives the
    # one its checkpoint ships (its mtp.* weights).
    assert differ == {"id", "name", "source", "mtp_layers"}
    assert (bundled["mtp_layers"], "mtp_layers" in got) == (1, False)


def test_layer_types_absent_follow_full_attention_interval(tmp_path):
    path = write(tmp_path, layer_types=None, full_attention_interval=2)
    assert model_from_hf_config(path).layer_pattern == ["linear", "full"]


@pytest.mark.parametrize("changes, field", [
    ({"mlp_only_layers": [0]}, "mlp_only_layers"),
    ({"decoder_sparse_step": 2}, "decoder_sparse_step"),
    ({"layer_types": ["linear_attention"] * 48}, "layer_types"),
    ({"layer_types": ["sliding_attention"] * 48}, "layer_types"),
])
def test_what_is_not_modelled_is_refused_by_its_key(tmp_path, changes, field):
    with pytest.raises(UserError, match=f"field '{field}'"):
        model_from_hf_config(write(tmp_path, **changes))
