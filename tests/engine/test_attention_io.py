"""engine.count.attention_io: the flash tiling's K/V stream and where it is served, against counts derived by hand."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.attention_io import (
    AttentionShape,
    decode_op,
    flash_attention_op,
    flash_tiling,
    naive_attention_ops,
    paper_block_q,
)
from rooflinectl.units import KIB, MIB

L2 = 60 * MIB  # an H200's L2 (hardware/h200.yaml)


def test_paper_block_q():
    # FlashAttention Algorithm 1: B_c = ⌈M/4d⌉, B_r = min(B_c, d). 228 KiB of bf16 is M = 116,736 elements:
    # ⌈116,736/512⌉ = 228, min(228, 128) = 128 at d = 128; at d = 64 min(456, 64) = 64.
    assert paper_block_q(228 * KIB, 128, "bf16") == 128
    assert paper_block_q(228 * KIB, 64, "bf16") == 64
    # 48 KiB of fp32 (M = 12,288) at d = 128: ⌈12,288/512⌉ = 24, floored to 16.
    assert paper_block_q(48 * KIB, 128, "fp32") == 16


def test_causal_stream_at_4096():
    # 4,096 queries in 32 blocks of 128; block i streams 128·(i+1) positions: 128·(32·33/2) = 67,584 positions.
    s = AttentionShape(1, 32, 8, 4096, 4096, 128, causal=True)
    t = flash_tiling(s, "bf16", l2_bytes=L2, block_q=128)
    assert t.query_blocks == 32 and t.kv_positions_streamed == 67_584
    # Each position is 2·128·2 = 512 B of K and V, for each of 32 query heads.
    assert t.stream_bytes == 32 * 67_584 * 512
    # One KV head's K and V: 4,096 · 512 B = 2 MiB, in a 60 MiB L2: HBM reads them once, 8 heads · 2 MiB.
    assert t.working_set_bytes == 2 * MIB and t.served_from == "l2" and t.hbm_kv_bytes == 8 * 2 * MIB
    op = flash_attention_op(s, "bf16", t)
    # Q and O: 32·4,096·128·2 B = 32 MiB each. FLOPs: 32 heads · 4,096·4,097/2 scores · (4·128 + 5).
    assert op.bytes == 2 * 32 * MIB + 16 * MIB
    assert op.flops == 32 * (4096 * 4097 // 2) * 517


def test_past_the_l2_each_block_rereads_hbm():
    # 131,072 positions: K and V of a head are 131,072 · 512 B = 64 MiB > 60 MiB; non-causal, 1,024 query blocks
    # each stream all 131,072 positions from HBM: N²d²/M's regime (N·(N/B_r)·2d elements per head).
    s = AttentionShape(1, 1, 1, 131_072, 131_072, 128, causal=False)
    t = flash_tiling(s, "bf16", l2_bytes=L2, block_q=128)
    assert t.served_from == "hbm"
    assert t.hbm_kv_bytes == 1024 * 131_072 * 512
    # Halving the block doubles the traffic (the bound's 1/M).
    assert flash_tiling(s, "bf16", l2_bytes=L2, block_q=64).hbm_kv_bytes == 2 * t.hbm_kv_bytes


def test_causal_with_past_positions():
    # 3 queries over 10 positions (7 in the cache), block of 2: block 0 sees up to position 8 (9 rows), block 1
    # (one query) all 10: 19 positions. Scores: 3·7 + 3·4/2 = 27.
    s = AttentionShape(1, 1, 1, 3, 10, 16, causal=True)
    assert flash_tiling(s, "fp16", l2_bytes=L2, block_q=2).kv_positions_streamed == 19
    assert s.scores == 27


def test_naive_and_decode_counts():
    s = AttentionShape(1, 32, 8, 4096, 4096, 128, causal=True)
    qk, sm, pv = naive_attention_ops(s, "bf16")
    scores = 32 * 4096 * 4096 * 2  # 1 GiB of bf16 scores, written by qk, read and written by softmax, read by pv
    assert qk.bytes == 32 * MIB + 8 * MIB + scores
    assert sm.bytes == 2 * scores
    assert pv.bytes == scores + 8 * MIB + 32 * MIB
    # Decode, 16 sequences of 4,096 positions: K and V 16·4,096·8·128·2 B = 128 MiB each; q and o 16·32·128·2.
    op = decode_op(16, 32, 8, [4096] * 16, 128, "bf16")
    assert op.bytes == 2 * 128 * MIB + 2 * 16 * 32 * 128 * 2
    assert op.flops == 32 * 16 * 4096 * 517


def test_shape_checks():
    with pytest.raises(ValueError, match="multiple"):
        AttentionShape(1, 6, 4, 8, 8, 16, causal=False)
    with pytest.raises(ValueError, match="q_len <= kv_len"):
        AttentionShape(1, 4, 4, 9, 8, 16, causal=True)
