"""DeepSeek-V3.2-Exp's config.json read by the importer (model_type deepseek_v32): the bundled YAML is what
transformers' DeepseekV32Config of the published sizes gives (its defaults are the published config's sizes:
index_n_heads 64, index_head_dim 128, index_topk 2,048), with transformers' parameter count, and what is not
modelled is refused in one line."""

from __future__ import annotations

import json

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.models import load_model, model_from_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def write(tmp_path, drop=(), **changes):
    cfg = transformers.DeepseekV32Config(architectures=["DeepseekV32ForCausalLM"]).to_dict()
    cfg.update(changes)
    for key in drop:
        del cfg[key]
    path = tmp_path / "deepseek-v3.2" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg, default=str))
    return path


def test_the_config_reads_as_the_bundled_model(tmp_path):
    got = model_from_hf_config(write(tmp_path)).model_dump()
    bundled = load_model("deepseek-v3.2-exp").model_dump()
    assert {k for k in got if got[k] != bundled[k]} == {"id", "name", "source"}


def test_the_index_keys_left_out_take_the_class_defaults(tmp_path):
    model = model_from_hf_config(write(tmp_path, drop=("index_n_heads", "index_head_dim", "index_topk")))
    assert model.sparse_attention == load_model("deepseek-v3.2-exp").sparse_attention


def test_parameters_are_transformers(tmp_path):
    """transformers builds the published config on the meta device: 671,877,929,216 parameters, the indexer's
    61 × 13,959,424 among them; a smaller top-k changes no weight, more index heads do."""
    for changes in ({}, {"index_n_heads": 32, "index_topk": 512}):
        cfg = transformers.DeepseekV32Config(**changes)
        with torch.device("meta"):
            built = transformers.DeepseekV32ForCausalLM(cfg)
        expected = sum(p.numel() for p in built.parameters())
        (tmp_path / str(len(changes))).mkdir()
        path = write(tmp_path / str(len(changes)), **changes)
        assert model_from_hf_config(path).parameter_count() == expected


def test_layers_other_than_indexed_are_refused_by_their_key(tmp_path):
    with pytest.raises(UserError, match="field 'layer_types'"):
        model_from_hf_config(write(tmp_path, layer_types=["full_attention"] * 61))
