"""Workload sizes: one rule of which phase has which size (Workload.with_size, length_field, size_problem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.load import validate
from rooflinectl.specs.workload import SIZE_FIELDS, Scenario, length_field, resolve_workload, size_problem

DECODE = resolve_workload("decode", model="llama-3-8b", batch=1, context=4096)
PREFILL = resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=2048)


def test_length_field_names_each_phase_length():
    assert SIZE_FIELDS == ("batch", "context", "seq_len")
    assert length_field("decode") == "context"
    assert length_field("prefill") == "seq_len"
    assert length_field("attention") == "seq_len"


def test_with_size_changes_the_batch_in_every_phase():
    assert DECODE.with_size("batch", 32).batch == 32
    assert PREFILL.with_size("batch", 8).batch == 8
    assert DECODE.with_size("batch", 32).kv_len == 4096  # nothing else moves


def test_context_is_decodes_kv_length():
    w = DECODE.with_size("context", 8192)
    assert (w.kv_len, w.tokens_per_seq) == (8192, 1)
    assert w.length == w.size("context") == 8192


def test_seq_len_is_the_prompt_and_what_it_attends_to():
    w = PREFILL.with_size("seq_len", 512)
    assert (w.tokens_per_seq, w.kv_len) == (512, 512)
    assert w.size("seq_len") == w.length == 512


def test_with_size_matches_resolving_the_same_options():
    assert DECODE.with_size("context", 1024) == resolve_workload("decode", model="llama-3-8b", batch=1, context=1024)
    assert PREFILL.with_size("seq_len", 64) == resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=64)


@pytest.mark.parametrize(("workload", "field"), [(DECODE, "seq_len"), (PREFILL, "context")])
def test_a_size_the_phase_does_not_have_is_a_user_error(workload, field):
    assert size_problem(workload.phase, field)
    with pytest.raises(UserError, match=field):
        workload.with_size(field, 128)
    with pytest.raises(UserError):
        workload.size(field)


@pytest.mark.parametrize("value", [0, -4])
def test_sizes_are_positive(value):
    with pytest.raises(UserError, match="positive integer"):
        DECODE.with_size("batch", value)


def test_an_unknown_size_is_a_user_error():
    with pytest.raises(UserError, match="not a size"):
        DECODE.with_size("heads", 4)  # type: ignore[arg-type]


def test_the_scenario_validator_states_the_same_rule():
    base = {"model": "llama-3-8b"}
    with pytest.raises(UserError, match="its length is seq_len, not context"):
        validate(Scenario, {**base, "phase": "prefill", "seq_len": 128, "context": 64}, "test")
    with pytest.raises(UserError, match="its length is context"):
        validate(Scenario, {**base, "phase": "decode", "context": 128, "seq_len": 64}, "test")


@pytest.mark.parametrize("extra, reason", [
    ({"model_type": "deepseek_v3"}, "field 'model_type': 'deepseek_v3' is not modelled"),
    ({"n_routed_experts": 256}, "field 'n_routed_experts': mixture-of-experts"),
    ({"kv_lora_rank": 512}, "field 'kv_lora_rank'"),
    ({"num_local_experts": True}, "field 'num_local_experts'"),
    ({"tie_word_embeddings": "false"}, "tie_embeddings"),  # bool("false") counted it as tied
    ({"head_dim": 0}, "head_dim"),  # fell back to hidden/heads
    ({"head_dim": False}, "head_dim"),
    ({"hidden_size": 4000, "num_attention_heads": 48}, "not a multiple of num_attention_heads 48"),  # truncated to 83
    ({"hidden_size": "4096"}, "hidden_size"),
    ({"num_attention_heads": None}, "num_heads"),  # a TypeError before validation
])
def test_config_json_that_would_be_analysed_wrongly_is_refused(tmp_path, extra, reason):
    """Issue 18: each of these gave a dense model (or a traceback) instead of one line and exit 2."""
    import json

    from rooflinectl.specs.workload import model_from_hf_config

    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=reason):
        model_from_hf_config(path)


def test_config_json_read_from_its_own_folder_is_named_after_it(tmp_path, monkeypatch):
    import json

    from rooflinectl.specs.workload import model_from_hf_config

    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336,
        "vocab_size": 128256}))
    monkeypatch.chdir(folder)
    assert model_from_hf_config(Path("config.json")).id == "my-llama"  # was ""


def test_a_relative_model_path_is_the_workload_files_own(tmp_path, monkeypatch):
    """Issue 18: it resolved against the current folder, and the error named neither."""
    import shutil

    from rooflinectl.specs.load import data_dir

    (tmp_path / "w" / "models").mkdir(parents=True)
    shutil.copy(data_dir("workloads") / "models" / "llama-3-8b.yaml", tmp_path / "w" / "models" / "mine.yaml")
    (tmp_path / "w" / "mine.yaml").write_text("phase: decode\nmodel: models/mine.yaml\ncontext: 1024\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_workload("w/mine.yaml").model.id == "llama-3-8b"
