"""Sliding-window attention and per-layer patterns (issue 12): a sliding layer reads min(Lk, W + T − 1) KV
positions, computes F(Lk) − F(Lk − T) causal scores per (sequence, head) with F(n) = Σ_{j ≤ n} min(j, W), holds
min(length, W) positions of cache (in blocks of b, at most the ⌈(W − 1)/b⌉ + 1 blocks its window spans); its ops
are named _local with their own counts. Every figure derived by hand below."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooflinectl.engine.count.attention import group_scores, positions_held, positions_read, scores_computed
from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.errors import UserError
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs


def ops_of(w):
    return {op.name: op for op in step_ops(w)}


def test_prefill_scores_through_a_window_by_hand():
    # S = 10 prompt tokens through W = 4: the queries at positions 1 … 10 see 1, 2, 3, 4, 4, 4, 4, 4, 4, 4 keys,
    # 1 + 2 + 3 + 4·7 = 34; the closed form F(10) = 4·5/2 + (10 − 4)·4 = 10 + 24 = 34.
    w = resolve_workload("prefill", model="mistral-7b", seq_len=10)
    assert scores_computed(w, causal_skip=True, window=4) == 34
    # Without the window: 10·11/2 = 55; naive computes the whole 10 × 10 either way.
    assert scores_computed(w, causal_skip=True) == 55
    assert scores_computed(w, causal_skip=False, window=4) == 100
    # Decode at context 10 through W = 4: the new token sees 4 positions, F(10) − F(9) = 34 − 30.
    d = resolve_workload("decode", model="mistral-7b", context=10)
    assert scores_computed(d, causal_skip=True, window=4) == 4 == positions_read(d.uniform, 4)


@given(t=st.integers(1, 40), extra=st.integers(0, 40), window=st.integers(1, 50))
def test_the_closed_form_is_the_sum_over_queries(t, extra, window):
    # T new tokens at the end of Lk = T + extra positions: query at 1-based position j sees min(j, W) keys.
    lk = t + extra
    g = Seqs(count=1, new=t, cached=extra)
    brute = sum(min(j, window) for j in range(lk - t + 1, lk + 1))
    assert group_scores(g, causal=True, causal_skip=True, window=window) == brute
    # The keys the T queries read together: positions lk − t − W + 2 … lk, at most lk.
    assert positions_read(g, window) == min(lk, window + t - 1)


def test_a_sliding_layer_holds_at_most_the_blocks_its_window_spans():
    # A window of W = 40 positions starting anywhere in a block of 16 spans at most ⌈39/16⌉ + 1 = 4 blocks
    # (positions 15 … 54: blocks 0 … 3); a full layer holds ⌈n/16⌉ blocks.
    held = [positions_held(n, 40, block_size=16) // 16 for n in (1, 16, 17, 40, 48, 49, 64, 65, 100, 1000)]
    assert held == [1, 1, 2, 3, 3, 4, 4, 4, 4, 4]
    assert [positions_held(n, None, block_size=16) // 16 for n in (40, 65, 1000)] == [3, 5, 63]
    # One position a block: the window itself (a ring buffer of W), what analyze counts.
    assert [positions_held(n, 40) for n in (39, 40, 41, 1000)] == [39, 40, 40, 40]
    # A window a multiple of the block, as gpt-oss's 128 in blocks of 16: 8 blocks when aligned, 9 when not.
    assert positions_held(128, 128, block_size=16) == 128 and positions_held(129, 128, block_size=16) == 144
    assert positions_held(10_000, 128, block_size=16) == 9 * 16
    # A chunk starts at a multiple of C: C = 48 in blocks of 16 is 3 whole blocks; C = 40 in blocks of 16
    # (gcd 8) starts at offset 0 or 8 of a block, 40 + 8 positions spanning ⌈(40 + 16 − 8)/16⌉ = 3 blocks.
    assert positions_held(10_000, None, 48, 16) == 48 and positions_held(10_000, None, 40, 16) == 48
    assert positions_held(10_000, None, 40) == 40
    # gpt-oss-120b at 4,096 positions in blocks of 16: 18 full layers of 4,096 and 18 sliding ones of 9 blocks
    # (144 positions), 2,048 B a layer and position: (73,728 + 2,592)·2,048 B; analyze's 76,032 positions below.
    g = resolve_workload("decode", model="gpt-oss-120b", context=4096)
    assert kv_cache_bytes_per_sequence(g, 4096, 16) == 76_320 * 2048 == 156_303_360


def test_mistral_decode_reads_its_window_only():
    # Mistral 7B v0.1 (h 32, g 8, d 128, every layer sliding, W 4096) decode at batch 2, context 8192, bf16:
    # each sequence's new token reads 4096 positions: 2·32·4096 = 262,144 scores of 4·128 + 5 = 517 FLOPs;
    # K and V 2 sequences × 4096 × 1024 × 2 B = 16,777,216 B each; Q and O 2·4096·2 = 16,384 B each.
    ops = ops_of(resolve_workload("decode", model="mistral-7b", batch=2, context=8192))
    local = ops["attention_local"]
    assert "attention" not in ops and local.count == 32
    assert local.flops == 2 * 32 * 4096 * 517 == 135_528_448
    assert local.bytes == 2 * 16_384 + 2 * 16_777_216 == 33_587_200
    assert local.kv_bytes == 33_554_432
    # Below the window the layer reads the whole context: the same op as full attention's.
    short = ops_of(resolve_workload("decode", model="mistral-7b", batch=2, context=1000))["attention_local"]
    assert short.flops == 2 * 32 * 1000 * 517


def test_mistral_prefill_beyond_its_window():
    # Prefill of 8192 tokens through W = 4096, flash: per head F(8192) = 4096·4097/2 + 4096·4096
    # = 8,390,656 + 16,777,216 = 25,167,872 scores (full causal: 8192·8193/2 = 33,558,528).
    w = resolve_workload("prefill", model="mistral-7b", seq_len=8192)
    local = ops_of(w)["attention_local"]
    assert local.flops == 32 * 25_167_872 * 517
    # The whole prompt's K and V are read (its first queries see the first positions): 8192 × 1024 × 2 B each.
    assert local.kv_bytes == 2 * 8192 * 1024 * 2
    # Naive: the full 8192 × 8192 scores, masked or not, through HBM.
    naive = ops_of(resolve_workload("prefill", model="mistral-7b", seq_len=8192, attention="naive"))
    assert naive["qk_local"].flops == 2 * 32 * 8192 * 8192 * 128
    assert {"qk_local", "softmax_local", "pv_local"} <= set(naive)


def test_gemma3_pattern_counts_each_kind_of_layer():
    # Gemma 3 27B: 62 layers of period [5 sliding, 1 full] from layer 0: full at 5, 11, …, 59 (10 of them), 52
    # sliding (layers 60 and 61 included).
    m = load_model("gemma-3-27b")
    assert [m.layer_slides(i) for i in range(12)] == [True] * 5 + [False] + [True] * 5 + [False]
    assert m.layer_slides(60) and m.layer_slides(61)
    assert m.sliding_layers == 52
    ops = ops_of(resolve_workload("decode", model="gemma-3-27b", context=32768))
    assert (ops["attention"].count, ops["attention_local"].count) == (10, 52)
    # The ops both kinds share are merged with their counts added; the order stays the block's.
    names = [op.name for op in step_ops(resolve_workload("decode", model="gemma-3-27b", context=32768))]
    assert names.index("kv_write") < names.index("attention") < names.index("attention_local") < names.index("o_proj")
    assert ops["o_proj"].count == ops["q_proj"].count == 62
    # Gemma 3 27B decode (h 32, g 16, d 128) at 32768: a full layer reads 32768 positions, a local one 1024;
    # scores × (4·128 + 5).
    assert ops["attention"].flops == 32 * 32768 * 517
    assert ops["attention_local"].flops == 32 * 1024 * 517
    # The attention phase: the core of every layer, each kind with its count.
    core = ops_of(resolve_workload("attention", model="gemma-3-27b", seq_len=2048))
    assert (core["attention"].count, core["attention_local"].count) == (10, 52)


def test_kv_cache_bytes_per_token_of_a_sliding_pattern():
    # Gemma 3 27B in bf16: K and V of 16 heads × 128 = 2·2048·2 = 8,192 B per position and layer.
    # At 32768: 10 full layers × 32768 + 52 sliding × 1024 = 327,680 + 53,248 = 380,928 positions:
    # 3,120,562,176 B a sequence (all-full: 62·32768·8192 = 16,642,998,272 B).
    w = resolve_workload("decode", model="gemma-3-27b", context=32768)
    assert kv_cache_bytes_per_sequence(w) == 380_928 * 8192 == 3_120_562_176
    # Within the window every layer holds every position: 62·512·8192.
    assert kv_cache_bytes_per_sequence(resolve_workload("decode", model="gemma-3-27b", context=512)) \
        == 62 * 512 * 8192 == 260_046_848
    # gpt-oss-120b (36 layers, 8 KV heads × 64, 18 sliding of 128) at 4096: K and V 2·512·2 = 2,048 B per
    # position; 18·4096 + 18·128 = 76,032 positions, 155,713,536 B; per token of context beyond the window
    # only the 18 full layers grow: 18·2048 = 36,864 B.
    g = resolve_workload("decode", model="gpt-oss-120b", context=4096)
    assert kv_cache_bytes_per_sequence(g) == 76_032 * 2048 == 155_713_536
    longer = resolve_workload("decode", model="gpt-oss-120b", context=4097)
    assert kv_cache_bytes_per_sequence(longer) - kv_cache_bytes_per_sequence(g) == 36_864


def test_dense_and_moe_layers_with_a_pattern():
    # 8 layers, the first 3 dense, pattern [sliding, full]: dense 0 s, 1 f, 2 s; MoE 3 f, 4 s, 5 f, 6 s, 7 f.
    m = load_model("mixtral-8x7b").model_copy(update={"num_layers": 8, "sliding_window": 64,
                                                       "layer_pattern": ["sliding", "full"]})
    m = m.model_copy(update={"moe": m.moe.model_copy(update={"first_dense_layers": 3})})
    assert m.layer_counts() == {(False, "sliding"): 2, (False, "full"): 1, (True, "full"): 3, (True, "sliding"): 2}


def test_mistral_is_limited_by_its_positions_not_its_window():
    assert resolve_workload("decode", model="mistral-7b", context=32768).kv_len == 32768
    with pytest.raises(UserError, match="max_position_embeddings of 32,768"):
        resolve_workload("decode", model="mistral-7b", context=32769)


@pytest.mark.parametrize("update, reason", [
    ({"layer_pattern": ["sliding", "full"]}, "gives no sliding_window"),
    ({"sliding_window": 128, "layer_pattern": ["full"]}, "has no sliding layer"),
    ({"sliding_window": 128, "layer_pattern": ["sliding"] * 33}, "33 entries, more than the 32 layers"),
    ({"sliding_window": 128, "layer_pattern": ["local"]}, "layer_pattern"),
])
def test_bad_patterns_are_refused(update, reason):
    data = {**load_model("llama-3-8b").model_dump(), **update}
    with pytest.raises(ValueError, match=reason):
        Model.model_validate(data)


@given(layers=st.integers(1, 60), dense=st.integers(0, 59),
       pattern=st.lists(st.sampled_from(["sliding", "full"]), min_size=1, max_size=8))
def test_layer_counts_are_the_walk_over_the_layers(layers, dense, pattern):
    # layer_counts counts by whole periods; walking layer by layer (layer_slides) must agree.
    if "sliding" not in pattern or len(pattern) > layers or dense >= layers:
        return
    m = load_model("mixtral-8x7b").model_copy(update={"num_layers": layers, "sliding_window": 64,
                                                       "layer_pattern": pattern})
    m = m.model_copy(update={"moe": m.moe.model_copy(update={"first_dense_layers": dense})})
    walk: dict[tuple[bool, str], int] = {}
    for i in range(layers):
        key = (i >= dense, "sliding" if m.layer_slides(i) else "full")
        walk[key] = walk.get(key, 0) + 1
    assert m.layer_counts() == walk
    assert m.sliding_layers == sum(m.layer_slides(i) for i in range(layers))
