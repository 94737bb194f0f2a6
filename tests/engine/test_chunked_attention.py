"""Chunked local attention and the NoPE layers (Llama 4), counted by hand: each query of a chunked layer attends
to the positions of its own chunk of C, ⌊p/C⌋·C … p; the NoPE full layers attend everywhere without RoPE."""

from __future__ import annotations

from rooflinectl.engine.count.attention import group_scores, positions_read
from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs

C = 8192
KV_TOKEN_LAYER = 2 * 8 * 128 * 2  # K and V of 8 KV heads of 128, bf16: 4,096 B a position and layer


def ops(w):
    return {op.name: op for op in step_ops(w)}


def test_decode_at_128k_reads_its_chunk_in_the_chunked_layers_and_everything_in_the_full_ones():
    # Context 131,072 = 16 chunks: the new token at position 131,071 is the last of its chunk and reads all 8,192
    # of it; one more (131,073) starts a chunk and reads itself alone. The 12 full layers read every position.
    at = ops(resolve_workload("decode", model="llama-4-scout", context=131072))
    assert at["attention_chunked"].count == 36 and at["attention"].count == 12
    assert at["attention_chunked"].kv_bytes == C * KV_TOKEN_LAYER
    assert at["attention"].kv_bytes == 131072 * KV_TOKEN_LAYER
    past = ops(resolve_workload("decode", model="llama-4-scout", context=131073))
    assert past["attention_chunked"].kv_bytes == KV_TOKEN_LAYER
    assert past["attention"].kv_bytes == 131073 * KV_TOKEN_LAYER
    # Flash decode: 2·d + 2·d FLOPs a score (QKᵀ and PV) on 40 heads; the chunk's 8,192 scores, or 1.
    assert at["attention_chunked"].flops >= 40 * C * 4 * 128
    assert past["attention_chunked"].flops < at["attention_chunked"].flops / 8000


def test_prefill_scores_are_each_chunks_triangle():
    # A prefill of 20,000 tokens: two whole chunks (8,192·8,193/2 each) and 3,616 tokens of a third
    # (3,616·3,617/2): 73,656,592 scores a head, against the full layers' 20,000·20,001/2 = 200,010,000.
    g = Seqs(1, 20000, 0)
    assert group_scores(g, causal=True, causal_skip=True, chunk=C) == 2 * (C * (C + 1) // 2) + 3616 * 3617 // 2
    assert group_scores(g, causal=True, causal_skip=True, chunk=C) == 73_656_592
    assert group_scores(g, causal=True, causal_skip=True) == 200_010_000
    assert positions_read(g, None, C) == 20000  # the queries together read every position
    # Naive attention computes the T × (positions read) matrix, mask or not.
    assert group_scores(g, causal=True, causal_skip=False, chunk=C) == 20000 * 20000


def test_a_prefill_chunk_across_a_chunk_boundary():
    # 512 new tokens after 8,000 cached: queries at 8,000 … 8,191 see 8,001 … 8,192 positions (1,554,528 scores),
    # those at 8,192 … 8,511 see 1 … 320 (51,360); the K and V read are positions 0 … 8,511, from the first
    # query's chunk on.
    g = Seqs(1, 512, 8000)
    assert group_scores(g, causal=True, causal_skip=True, chunk=C) == (8001 + 8192) * 192 // 2 + 320 * 321 // 2
    assert positions_read(g, None, C) == 8512
    # From 8,192 cached on, the 512 queries sit in the second chunk and read only its positions: 8,192 … 8,703.
    assert positions_read(Seqs(1, 512, 8192), None, C) == 512


def test_the_kv_cache_holds_a_chunk_in_the_chunked_layers():
    # The chunked layers hold min(positions, C) (the chunk's blocks stay until it ends: planned for C); the NoPE
    # full layers every position. At 131,072: (36·8,192 + 12·131,072)·4,096 B = 7,650,410,496 B; a short
    # sequence of 1,000 holds 1,000 everywhere.
    w = resolve_workload("decode", model="llama-4-scout", context=131072)
    assert kv_cache_bytes_per_sequence(w) == (36 * C + 12 * 131072) * KV_TOKEN_LAYER == 7_650_410_496
    assert kv_cache_bytes_per_sequence(w, 1000) == 48 * 1000 * KV_TOKEN_LAYER


def test_nope_layers_skip_rope_and_scale_their_queries():
    # Scout: RoPE and the weightless Q/K norm on the 36 chunked layers only; the 12 NoPE layers multiply Q by
    # their position's temperature, one FLOP an element of Q (N·5,120), reading and writing Q and a scale a token.
    w = resolve_workload("prefill", model="llama-4-scout", batch=2, seq_len=100)
    found = ops(w)
    assert found["rope"].count == 36 and found["qk_l2_norm"].count == 36
    assert found["q_temperature"].count == 12
    assert found["q_temperature"].flops == 200 * 5120
    assert found["q_temperature"].bytes == (2 * 200 * 5120 + 200) * 2
    # The weightless norm: 3 FLOPs an element (no gain) over each head of Q and K, 200·(40 + 8) rows of 128.
    assert found["qk_l2_norm"].flops == 3 * 200 * 48 * 128 and found["qk_l2_norm"].weight_bytes == 0
    # Maverick has no Q/K norm (use_qk_norm false).
    assert "qk_l2_norm" not in ops(resolve_workload("prefill", model="llama-4-maverick", batch=2, seq_len=100))


def test_maverick_alternates_dense_and_moe_layers():
    # 24 dense layers (MLP 16,384) and 24 MoE (router, 128 experts of 8,192, one shared of 8,192).
    found = ops(resolve_workload("decode", model="llama-4-maverick", context=4096))
    assert found["gate_proj"].count == 24 and found["gate_proj"].gemm.n == 16384
    assert found["router"].count == 24 and found["expert_gate_proj"].count == 24
    assert found["shared_gate_proj"].count == 24 and found["shared_gate_proj"].gemm.n == 8192


def test_the_serving_step_model_is_told_attention_is_not_affine_in_context():
    from rooflinectl.specs.models import load_model

    assert not load_model("llama-4-scout").attention_affine_in_context
    assert load_model("llama-3.1-8b").attention_affine_in_context


def test_the_runners_refuse_llama4_in_one_line():
    # measure --workload and profile allow-list the variants they run: chunked attention is not among them.
    import pytest

    from rooflinectl.errors import UserError
    from rooflinectl.measure.step.support import check_supported
    from rooflinectl.profile.build import check_buildable
    from rooflinectl.specs.models import load_model

    w = resolve_workload("decode", model="llama-4-scout", context=4096)
    with pytest.raises(UserError) as measured:
        check_supported(w)
    with pytest.raises(UserError) as profiled:
        check_buildable(load_model("llama-4-scout"))
    for refusal in (measured, profiled):
        assert "\n" not in str(refusal.value) and "chunked" in str(refusal.value)
