"""config.json of every model type the importer reads, against transformers' own classes as the oracle.

For each type, its published config, the config with each key the importer reads taken out (the class's default
then applies), and keys its class ignores put in (a window on Llama, biases on Mistral). transformers builds each on
the meta device (no memory, no weights): what rooflinectl accepts must have transformers' parameter count, KV
width and window on every layer. Where a default is ambiguous rooflinectl refuses in one line, and the test names
the refusal it expects; nothing else may be refused.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from typing import Any

import pytest

from hf_published import PUBLISHED
from rooflinectl.errors import UserError
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import model_from_hf_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# The keys the importer reads apart from the model's principal sizes, each taken out in turn where a published
# config gives it.
READ = ("num_key_value_heads", "head_dim", "tie_word_embeddings", "sliding_window", "use_sliding_window",
        "max_window_layers", "layer_types", "sliding_window_pattern", "attention_bias", "mlp_bias", "hidden_act",
        "hidden_activation", "attn_logit_softcapping", "final_logit_softcapping", "q_lora_rank",
        "first_k_dense_replace", "n_shared_experts", "moe_layer_freq", "decoder_sparse_step", "mlp_only_layers",
        "vocab_size", "max_position_embeddings")
# Keys put in, on every type: most of them build nothing on a type whose class does not read them.
ADDED: dict[str, dict[str, Any]] = {
    "a window": {"sliding_window": 4096},
    "a window switched on": {"sliding_window": 4096, "use_sliding_window": True},
    "a window from layer 2": {"sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 2},
    "every layer full": {"layer_types": "full"},
    "every layer sliding": {"sliding_window": 4096, "use_sliding_window": True, "layer_types": "sliding"},
    "attention biases": {"attention_bias": True},
    "MLP biases": {"mlp_bias": True},
    "tied": {"tie_word_embeddings": True},
    "untied": {"tie_word_embeddings": False},
    "null KV heads": {"num_key_value_heads": None},
}
DROP = object()  # a key taken out
# Cases of one type each: a change where its class's default decides, which the published config hides.
ONE_TYPE: list[tuple[str, str, dict[str, Any]]] = [
    # Qwen2Config's use_sliding_window defaults to false: the window is dropped.
    *((t, "a window, its switch left out", {"sliding_window": 4096, "max_window_layers": 0,
                                              "use_sliding_window": DROP}) for t in ("qwen2", "qwen3", "qwen3_moe")),
    # Qwen3Config's head_dim is 128 whatever the hidden size (Qwen3-0.6B: hidden 1,024, 16 heads).
    ("qwen3", "no head_dim at hidden 1024", {"hidden_size": 1024, "num_attention_heads": 16,
                                             "num_key_value_heads": 8, "head_dim": DROP}),
    ("qwen3_moe", "no head_dim at hidden 1024", {"hidden_size": 1024, "num_attention_heads": 16,
                                                 "num_key_value_heads": 8, "head_dim": DROP}),
    # Qwen2/Qwen3's max_window_layers defaults to 28.
    *((t, "a window switched on at 36 layers", {"sliding_window": 4096, "use_sliding_window": True,
                                                 "num_hidden_layers": 36, "max_window_layers": DROP})
      for t in ("qwen2", "qwen3")),
    # Gemma 3's sliding_window_pattern defaults to 6; Gemma 2 alternates.
    ("gemma3", "no pattern", {"sliding_window_pattern": DROP}),
    ("gemma3_text", "a pattern of 4", {"sliding_window_pattern": 4}),
]
# What rooflinectl refuses, with the reason it gives: a default the model's own code and transformers disagree on,
# a bias on latent attention, or a class default that would not divide the heads.
REFUSED: dict[tuple[str, str], str] = {
    **{(t, f"no {k}"): f"field '{k}': missing" for t in ("deepseek_v2", "deepseek_v3", "kimi_k2")
       for k in ("first_k_dense_replace", "n_shared_experts")},
    **{(t, "attention biases"): "field 'attention_bias'" for t in ("deepseek_v2", "deepseek_v3", "kimi_k2")},
    ("deepseek_v2", "MLP biases"): "field 'mlp_bias'",
    ("qwen2", "no num_key_value_heads"): "field 'num_key_value_heads': missing, and the qwen2 default of 32",
    # Principal sizes have no default (the Gemma classes' vocabularies do: Gemma 3 27B's config leaves it out).
    **{(t, "no vocab_size"): "field 'vocab_size': missing" for t in PUBLISHED if t not in ("gemma2", "gemma3_text")},
    # Classes whose field is a plain int refuse null (transformers: StrictDataclassFieldValidationError).
    **{(t, "null KV heads"): "field 'num_key_value_heads': null" for t in
       ("mistral", "mixtral", "qwen3_moe", "gemma2", "gemma3_text", "gemma3", "gpt_oss")},
}


def _set(cfg: dict[str, Any], key: str, value: Any) -> None:
    """Put a key where the decoder's keys are: Gemma 3's text_config, but its tie_word_embeddings at the top."""
    decoder = cfg.get("text_config", cfg)
    if key == "layer_types" and isinstance(value, str):
        value = [f"{value}_attention"] * decoder["num_hidden_layers"]
    where = cfg if key == "tie_word_embeddings" else decoder
    if value is DROP:
        where.pop(key, None)
    else:
        where[key] = value


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    for model_type, published in PUBLISHED.items():
        out.append((model_type, "published", published))
        decoder = published.get("text_config", published)
        for key in READ:
            if key in decoder or (key == "tie_word_embeddings" and key in published):
                cfg = copy.deepcopy(published)
                (cfg if key in cfg else cfg["text_config"]).pop(key)
                out.append((model_type, f"no {key}", cfg))
        for name, keys in ADDED.items():
            cfg = copy.deepcopy(published)
            for key, value in keys.items():
                _set(cfg, key, value)
            out.append((model_type, name, cfg))
    for model_type, name, keys in ONE_TYPE:
        cfg = copy.deepcopy(PUBLISHED[model_type])
        for key, value in keys.items():
            _set(cfg, key, value)
        out.append((model_type, name, cfg))
    return out


def hf_model(cfg: dict[str, Any]) -> Any:
    """transformers' model of a config on the meta device (Kimi K2's config is DeepSeek-V3's; the quantization
    config is left out: the count is of the weights, not a quantizer's packing)."""
    cfg = {k: v for k, v in copy.deepcopy(cfg).items() if k != "quantization_config"}
    if cfg["model_type"] == "kimi_k2":
        cfg["model_type"] = "deepseek_v3"
    config = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        if cfg["model_type"] == "gemma3":
            return transformers.Gemma3ForConditionalGeneration(config)
        return transformers.AutoModelForCausalLM.from_config(config)


def hf_window(attention: Any) -> int | None:
    """A decoder layer's window in transformers: the attention's own ``sliding_window`` (Qwen2, Gemma, gpt-oss),
    else the config's where the attention's forward passes it (Mistral, Mixtral, Phi-3), else none (Llama,
    DeepSeek)."""
    if hasattr(attention, "sliding_window"):
        return attention.sliding_window  # type: ignore[no-any-return]
    if "sliding_window" in inspect.getsource(type(attention).forward):
        return getattr(attention.config, "sliding_window", None)
    return None


def hf_facts(model: Any) -> tuple[int, list[int | None], set[int]]:
    """(parameters of the language model and its head, each layer's window, the KV widths of non-latent
    attention): Gemma 3's vision tower and projector are not counted; a tied head is one parameter."""
    params = sum(p.numel() for n, p in model.named_parameters()
                 if "vision_tower" not in n and "multi_modal_projector" not in n)
    layers = [m for n, m in model.named_modules()
              if re.fullmatch(r"(.*\.)?layers\.\d+\.self_attn", n) and "vision" not in n]
    kv = {m.config.num_key_value_heads * m.head_dim for m in layers if not hasattr(m, "kv_lora_rank")}
    return params, [hf_window(m) for m in layers], kv


def ours(m: Model) -> tuple[int, list[int | None], set[int]]:
    windows = [m.sliding_window if m.layer_slides(i) else None for i in range(m.num_layers)]
    return m.parameter_count(), windows, set() if m.mla else {m.num_kv_heads * m.head_dim}


@pytest.mark.parametrize("model_type, case, cfg", cases(), ids=[f"{t}: {c}" for t, c, _ in cases()])
def test_config_json_reads_as_transformers_builds_it(tmp_path, model_type, case, cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    refused = REFUSED.get((model_type, case))
    if refused is not None:
        with pytest.raises(UserError, match=refused):
            model_from_hf_config(path)
        if case == "null KV heads":  # refused by transformers too
            with pytest.raises(Exception, match="num_key_value_heads"):
                hf_model(cfg)
        return
    assert ours(model_from_hf_config(path)) == hf_facts(hf_model(cfg))
