"""Workload sizes: one rule of which phase has which size (Workload.with_size, length_field, size_problem)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rooflinectl.errors import UserError
from rooflinectl.specs.load import validate
from rooflinectl.specs.scenario import Scenario, resolve_workload
from rooflinectl.specs.workload import SIZE_FIELDS, length_field, size_problem

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
    # deepseek_v3 is modelled (tests/engine/test_mla.py); without its experts and latent ranks it is refused
    ({"model_type": "deepseek_v3"}, "field 'n_routed_experts': missing from the deepseek_v3 config"),
    ({"n_routed_experts": 256}, "field 'n_routed_experts': mixture-of-experts"),
    ({"kv_lora_rank": 512}, "field 'kv_lora_rank'"),
    ({"num_local_experts": True}, "field 'num_local_experts'"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings"),  # bool("false") counted it as tied
    ({"head_dim": 0}, "head_dim"),  # fell back to hidden/heads
    ({"head_dim": False}, "head_dim"),
    ({"hidden_size": 4000, "num_attention_heads": 48}, "not a multiple of num_attention_heads 48"),  # truncated to 83
    ({"hidden_size": "4096"}, "hidden_size"),
    ({"num_attention_heads": None}, "num_attention_heads"),  # a TypeError before validation
])
def test_config_json_that_would_be_analysed_wrongly_is_refused(tmp_path, extra, reason):
    """Issue 18: each of these gave a dense model (or a traceback) instead of one line and exit 2."""
    import json

    from rooflinectl.specs.models import model_from_hf_config

    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=reason):
        model_from_hf_config(path)


def test_config_json_read_from_its_own_folder_is_named_after_it(tmp_path, monkeypatch):
    import json

    from rooflinectl.specs.models import model_from_hf_config

    folder = tmp_path / "my-llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336,
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


# --- issue 18: the model's positions, plausible ranges, names, inline models -------------------------------------


# Each bundled model's config.json on Hugging Face (the file's own `source`): max_position_embeddings, and the
# sliding window where the model uses one (Mistral 7B v0.1: 4096; Qwen2 7B's is turned off by
# use_sliding_window: false).
PUBLISHED_POSITIONS = {
    "llama-2-7b": (4096, None), "llama-2-13b": (4096, None), "llama-2-70b": (4096, None),
    "llama-3-8b": (8192, None), "llama-3-70b": (8192, None), "llama-3.1-405b": (131072, None),
    "llama-3.1-8b": (131072, None), "llama-3.1-70b": (131072, None),
    "mistral-7b": (32768, 4096), "qwen2-7b": (131072, None), "qwen2.5-72b": (131072, None),
    "qwen2.5-14b": (131072, None),
    "mixtral-8x7b": (32768, None),  # sliding_window: null
    "qwen3-30b-a3b": (40960, None), "qwen3-235b-a22b": (40960, None),  # use_sliding_window: false
    "qwen3-32b": (40960, None),  # use_sliding_window: false
    # Chunked attention (8,192) is modelled and sets no limit: Scout's 10M, Maverick's 1M positions.
    "llama-4-scout": (10485760, None), "llama-4-maverick": (1048576, None),
    # Sliding windows, modelled (issue 12): Gemma 3's local layers 1024, gpt-oss's 128.
    "gemma-3-27b": (131072, 1024), "gpt-oss-120b": (131072, 128), "gpt-oss-20b": (131072, 128),
    "deepseek-v3": (163840, None), "deepseek-v2": (163840, None), "deepseek-v2-lite": (163840, None),
    "kimi-k2": (131072, None),  # no sliding_window key
    "deepseek-v3.2-exp": (163840, None),  # a sparse top-2,048 selection, no window
    "qwen3-next-80b-a3b": (262144, None),  # no window: Gated DeltaNet layers beside full attention
    "nemotron-h-8b": (8192, None),  # no window: Mamba-2 layers beside full attention
    "glm-4.5": (131072, None),  # config.json's max_position_embeddings (GLM-4.6's: 202,752)
    "minimax-m2": (196608, None),  # config.json's max_position_embeddings
}


def test_every_bundled_model_states_its_published_positions():
    from rooflinectl.specs.models import list_models

    models = {m.id: m for m in list_models()}
    assert set(models) == set(PUBLISHED_POSITIONS)  # a new model file must state its limit here too
    for model_id, (positions, window) in PUBLISHED_POSITIONS.items():
        m = models[model_id]
        assert (m.max_position_embeddings, m.sliding_window) == (positions, window), model_id
        assert "config.json" in m.source


@pytest.mark.parametrize("phase, field, model, limit, named", [
    # Decode: the context counts the new token (it attends to itself), so context = 8192 is the last valid step.
    ("decode", "context", "llama-3-8b", 8192, "max_position_embeddings"),
    ("prefill", "seq_len", "llama-3-8b", 8192, "max_position_embeddings"),
    ("attention", "seq_len", "llama-2-7b", 4096, "max_position_embeddings"),
    # Mistral 7B v0.1: 32,768 positions; its 4,096-position sliding window is modelled and sets no limit.
    ("decode", "context", "mistral-7b", 32768, "max_position_embeddings"),
    ("prefill", "seq_len", "mistral-7b", 32768, "max_position_embeddings"),
])
def test_a_length_beyond_the_models_positions_is_refused_at_limit_plus_one(phase, field, model, limit, named):
    at_limit = resolve_workload(phase, model=model, **{field: limit})
    assert at_limit.kv_len == limit  # the positions a step uses: kv_len in every phase
    with pytest.raises(UserError) as err:
        resolve_workload(phase, model=model, **{field: limit + 1})
    message = str(err.value)
    assert f"{field} {limit + 1:,}" in message and model in message and f"{named} of {limit:,}" in message
    # The same rule through with_size (sweeps, plot, explore).
    with pytest.raises(UserError, match=named):
        at_limit.with_size(field, limit + 1)


def test_a_model_that_states_no_limit_is_not_limited(tmp_path):
    import json

    from rooflinectl.specs.models import model_from_hf_config

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 2,
                                "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}))
    m = model_from_hf_config(path)
    assert (m.max_position_embeddings, m.sliding_window, m.max_length()) == (None, None, None)
    assert resolve_workload("decode", model=str(path), context=1_000_000).kv_len == 1_000_000


@pytest.mark.parametrize("extra, expected", [
    ({"max_position_embeddings": 4096}, (4096, None)),
    # Mistral 7B v0.1's config: the window is on (no use_sliding_window key) and is the tighter limit.
    ({"model_type": "mistral", "max_position_embeddings": 32768, "sliding_window": 4096}, (32768, 4096)),
    # Qwen2 7B's config: a window given but turned off.
    ({"model_type": "qwen2", "max_position_embeddings": 131072, "sliding_window": 131072,
      "use_sliding_window": False}, (131072, None)),
    ({"model_type": "mistral", "max_position_embeddings": 32768, "sliding_window": None}, (32768, None)),
])
def test_config_json_positions_are_read(tmp_path, extra, expected):
    import json

    from rooflinectl.specs.models import model_from_hf_config

    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    m = model_from_hf_config(path)
    assert (m.max_position_embeddings, m.sliding_window) == expected


@pytest.mark.parametrize("extra, reason", [
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"max_position_embeddings": "4096"}, "max_position_embeddings"),
    ({"model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": "false"}, "field 'use_sliding_window'"),
])
def test_config_json_bad_positions_are_refused(tmp_path, extra, reason):
    import json

    from rooflinectl.specs.models import model_from_hf_config

    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "intermediate_size": 14336, "vocab_size": 32000, **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(UserError, match=reason):
        model_from_hf_config(path)


LLAMA_3_8B = {"id": "m", "name": "M", "source": "test", "hidden_size": 4096, "num_layers": 32, "num_heads": 32,
              "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 128256}


@pytest.mark.parametrize("field, value, reason", [
    # One past each range (specs/sizes.py states them): refused by name, not counted.
    ("hidden_size", 2**20 + 1, "less than or equal to 1048576"),
    ("num_layers", 10**9, "less than or equal to 16384"),
    ("num_heads", 2**14 + 1, "less than or equal to 16384"),
    ("head_dim", 2**14 + 1, "less than or equal to 16384"),
    ("intermediate_size", 2**22 + 1, "less than or equal to 4194304"),
    ("vocab_size", 2**24 + 1, "less than or equal to 16777216"),
    ("max_position_embeddings", 2**30 + 1, "less than or equal to 1073741824"),
    ("num_layers", 10**400, "less than or equal to 16384"),  # beyond float range: no OverflowError
    ("id", "", "at least 1 character"),
    ("name", "", "at least 1 character"),
    ("id", "x" * 129, "at most 128 characters"),
    ("source", "", "at least 1 character"),
])
def test_model_sizes_and_names_outside_their_ranges_are_refused(field, value, reason):
    from rooflinectl.specs.model import Model

    with pytest.raises(UserError, match=f"field '{field}': .*{reason}"):
        validate(Model, {**LLAMA_3_8B, field: value}, "test")


def test_the_largest_sizes_in_range_still_load():
    from rooflinectl.specs.model import Model

    m = validate(Model, {**LLAMA_3_8B, "hidden_size": 2**20, "num_layers": 2**14, "intermediate_size": 2**22,
                         "vocab_size": 2**24, "max_position_embeddings": 2**30}, "test")
    assert m.max_length() == (2**30, "max_position_embeddings")


@pytest.mark.parametrize("field, value, reason", [
    ("batch", 2**20 + 1, "less than or equal to 1048576"),
    ("context", 2**30 + 1, "less than or equal to 1073741824"),
    ("batch", 10**309, "less than or equal to 1048576"),  # was an OverflowError in the roofline
    ("model", "", "1 to 4,096 characters, not 0"),
])
def test_scenario_sizes_outside_their_ranges_are_refused(field, value, reason):
    with pytest.raises(UserError, match=f"field '{field}': .*{reason}"):
        validate(Scenario, {"phase": "decode", "model": "llama-3-8b", "context": 4096, field: value}, "test")


def test_an_incomplete_inline_model_names_its_missing_field(tmp_path):
    """Issue 18: it said "field 'model.str' … (and 9 more errors)", naming the string form it is not."""
    inline = {k: v for k, v in LLAMA_3_8B.items() if k != "num_kv_heads"}
    with pytest.raises(UserError) as err:
        validate(Scenario, {"phase": "decode", "context": 64, "model": inline}, "w.yaml")
    assert str(err.value) == "w.yaml: field 'model.num_kv_heads': missing"
    # A typo in an inline model is named before the field it leaves missing.
    typo = {**inline, "num_kv_head": 8}
    with pytest.raises(UserError, match=r"field 'model.num_kv_head': unknown key; field 'model.num_kv_heads': missing$"):
        validate(Scenario, {"phase": "decode", "context": 64, "model": typo}, "w.yaml")
    # Neither a name nor a mapping: said so, once.
    with pytest.raises(UserError, match=r"field 'model': .*a model id, a model file's path, or an inline model"
                                        r" \(a mapping of its fields\), not int$"):
        validate(Scenario, {"phase": "decode", "context": 64, "model": 5}, "w.yaml")
    # A complete one still loads, from a file too.
    path = tmp_path / "w.yaml"
    import yaml
    path.write_text(yaml.safe_dump({"phase": "decode", "context": 64, "model": LLAMA_3_8B}))
    assert resolve_workload(str(path)).model.hidden_size == 4096
    # And dumps back as the same mapping, with no serializer warning (a plain validator on the field lost the
    # union's serializer: 'workloads show --json' warned "Expected `str`").
    import warnings

    scenario = validate(Scenario, {"phase": "decode", "context": 64, "model": LLAMA_3_8B}, "w.yaml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dumped = scenario.model_dump(exclude_none=True)
    assert dumped["model"] == {**LLAMA_3_8B, "mlp": "gated_silu", "tie_embeddings": False}


@pytest.mark.parametrize("data, message", [
    ({"phase": "decode", "context": 64, "fused": ["act"]},
     "test: field 'fused': fusion 'act' goes in the epilogue of the fused gate_up matmul: add 'gate_up'"),
    ({"phase": "decode", "context": 64, "fused": ["qkv", "qkv"]}, "test: field 'fused': a fusion is listed twice"),
    ({"phase": "decode"},
     "test: field '(top level)': a decode scenario needs 'context' (the KV length each new token attends to)"),
    ({"phase": "decode", "context": 64, "model": {**LLAMA_3_8B, "num_kv_heads": 5}},
     "test: field 'model': num_heads (32) must be a multiple of num_kv_heads (5)"),
])
def test_a_rule_of_the_specs_reads_as_its_own_words(data, message):
    """A rule's message is the rule, on the field it is about where it is about one: a ValueError's read
    "field '(top level)': Value error, fusion 'act' …"."""
    with pytest.raises(UserError) as err:
        validate(Scenario, {"model": "llama-3-8b", **data}, "test")
    assert str(err.value) == message
