"""engine/footprint.py: a model's KV cache per token and weight bytes, by the engine's own functions, against hand
arithmetic (sizes from each model's config.json, as workloads/models/ cites)."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.footprint import (
    kv_cache_bytes_per_token,
    kv_cache_bytes_per_token_past_window,
    weight_bytes,
    weight_bytes_by_format,
)
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload


@pytest.mark.parametrize("model, layers, kv_heads, head_dim", [
    ("llama-3-8b", 32, 8, 128),  # 131,072 B in bf16
    ("llama-3-70b", 80, 8, 128),  # 327,680 B
    ("mixtral-8x7b", 32, 8, 128),
    ("qwen3-30b-a3b", 48, 4, 128),  # 98,304 B
])
def test_kv_cache_bytes_per_token_is_layers_times_k_and_v_times_kv_heads_times_head_dim(model, layers, kv_heads,
                                                                                          head_dim):
    m = load_model(model)
    assert kv_cache_bytes_per_token(m) == layers * 2 * kv_heads * head_dim * 2
    assert kv_cache_bytes_per_token(m, "fp8") == layers * 2 * kv_heads * head_dim
    assert kv_cache_bytes_per_token(m, "fp32") == layers * 2 * kv_heads * head_dim * 4


def test_kv_cache_per_token_times_context_is_the_engines_cache_of_a_sequence():
    """The same rule as analyze's: a decode at context 4096 holds 4096 tokens' worth per sequence."""
    m = load_model("llama-3-8b")
    w = resolve_workload("decode", context=4096)
    assert kv_cache_bytes_per_sequence(w) == 4096 * kv_cache_bytes_per_token(m) == 4096 * 131_072


def test_weight_bytes_by_format():
    """Llama 3 8B: 8,030,261,248 parameters (test_catalog derives them) × 2 B in bf16, × 4 in fp32; fp8 adds one
    fp32 scale per matrix (7 a layer) to its linear layers' k·n bytes, the rest (1,050,939,392 parameters:
    embedding, LM head, norms) in bf16."""
    m = load_model("llama-3-8b")
    params = 8_030_261_248
    assert weight_bytes(m, "bf16") == 2 * params
    assert weight_bytes(m, "fp32") == 4 * params
    linear = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert params - linear == 1_050_939_392
    assert weight_bytes(m, "fp8") == linear + 32 * 7 * 4 + (params - linear) * 2
    assert weight_bytes_by_format(m) == {"bf16": 2 * params}  # no quantized format of its own


@pytest.mark.parametrize("model, full_layers, kv_heads, head_dim, window", [
    # Gemma 3 27B: 62 layers, 5 sliding : 1 full from layer 0, so 10 full (layers 5, 11, …, 59); 16 KV heads of
    # 128; window 1,024. Past the window only the full layers grow: 10 × 2 × 16 × 128 × 2 B = 81,920 B a token.
    ("gemma-3-27b", 10, 16, 128, 1024),
    # gpt-oss-120b: 36 layers alternating sliding/full, 18 full; 8 KV heads of 64; window 128:
    # 18 × 2 × 8 × 64 × 2 B = 36,864 B a token.
    ("gpt-oss-120b", 18, 8, 64, 128),
    # Mistral 7B v0.1: every layer slides through 4,096: nothing more past it.
    ("mistral-7b", 0, 8, 128, 4096),
])
def test_past_the_window_only_the_full_layers_grow(model, full_layers, kv_heads, head_dim, window):
    m = load_model(model)
    assert m.sliding_window == window
    assert kv_cache_bytes_per_token_past_window(m) == full_layers * 2 * kv_heads * head_dim * 2


def test_a_model_without_a_window_has_no_past_the_window_figure():
    assert kv_cache_bytes_per_token_past_window(load_model("llama-3-8b")) is None
