"""The paged KV pool's blocks: a full layer keeps every block of a request's positions, a sliding layer at most the
⌈(W − 1)/b⌉ + 1 blocks its window spans, a chunked layer those of one chunk (engine.count.attention.positions_held,
the one rule), so that the simulator and ``analyze`` count one sequence's KV bytes alike. Every figure is derived
by hand below."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.parallel import Layout, kv_bytes_per_sequence_per_gpu
from rooflinectl.serving.capacity import Capacity, kv_capacity
from rooflinectl.serving.kvcache import EVERY_LAYER, UNBOUNDED, BlockPool, kv_blocks
from rooflinectl.serving.load import Lengths, closed_loop
from rooflinectl.serving.scheduler import SchedulerConfig
from rooflinectl.serving.simulate import simulate
from rooflinectl.serving.speculation import with_drafter
from rooflinectl.serving.stepmodel import StepModel
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.specs.step import Seqs

H100 = load_gpu("h100")
W, B = 40, 16  # the tiny model's window and the pool's block size
KV_LAYER_POSITION = 2 * 8 * 128 * 2  # Llama 3 8B's K and V a layer and position: 8 KV heads of 128, bf16
TINY_PARTS = ((1, None, None), (1, W, None))  # 2 full and 2 sliding layers: groups of 2, one of each kind


def tiny(pattern: tuple[str, ...] = ("sliding", "full")):
    """Llama 3 8B cut to 4 layers, 2 sliding (window 40) and 2 full, as a prefill workload of one token."""
    m = load_model("llama-3-8b").model_copy(update={"num_layers": 4, "sliding_window": W,
                                                    "layer_pattern": list(pattern)})
    return resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=1).model_copy(update={"model": m})


def test_the_blocks_a_request_takes_below_at_and_past_the_window():
    # 2 full + 2 sliding layers in groups of 2: a pool block is 16 positions of 2 layers, 16 · 2 · 4,096 B =
    # 131,072 B; a request takes one block a block of its positions in the full group and, in the sliding
    # group, at most the 4 its window spans.
    expected = {1: 1 + 1, 16: 1 + 1, 17: 2 + 2, 40: 3 + 3, 48: 3 + 3, 49: 4 + 4, 64: 4 + 4, 65: 5 + 4,
                100: 7 + 4, 1000: 63 + 4}
    assert {n: kv_blocks(n, B, TINY_PARTS) for n in expected} == expected
    # Every layer's K and V in every block, the charge before: 2 groups × ⌈n/16⌉, 126 blocks at 1,000 positions.
    assert 2 * kv_blocks(1000, B) == 126
    cap = kv_capacity(StepModel(tiny(), H100), 8192, B, 8 * 2**30)
    assert cap.parts == TINY_PARTS
    assert cap.block_bytes == B * 2 * KV_LAYER_POSITION == 131_072
    # Those blocks' bytes are the engine's count of the sequence in blocks of 16: at 100 positions 2 full layers
    # of 112 and 2 sliding layers of 64, (224 + 128) · 4,096 = 1,441,792 B; analyze (one position a block)
    # counts 2 · 100 + 2 · 40 = 280 positions, 1,146,880 B.
    w = tiny()
    assert 11 * cap.block_bytes == kv_cache_bytes_per_sequence(w, 100, B) == 1_441_792
    assert kv_cache_bytes_per_sequence(w, 100) == 280 * KV_LAYER_POSITION == 1_146_880


def test_the_pool_grows_and_bounds_a_request_by_its_parts():
    pool = BlockPool(20, B, parts=TINY_PARTS)
    pool.grow(1, 100)
    assert (pool.used, pool.held[1]) == (11, 11)
    # One more position at a block's start opens a full block only (the window's 4 are held already).
    assert pool.opens(1, 112) == 1 and pool.opens(1, 113) == 0 and pool.needs(1, 113) == 1
    # 20 blocks hold k full blocks of positions beside the 4 of the window while k + 4 ≤ 20: 256 positions,
    # 156 more than it holds.
    assert pool.room(1, 100) == 156
    assert BlockPool(11, B, parts=TINY_PARTS).most_positions == 112  # 7 + 4 blocks
    # Every layer sliding (Mistral 7B v0.1's kind): a request never takes more than the window's 4 blocks.
    sliding = BlockPool(4, B, parts=((1, W, None),))
    assert sliding.most_positions == UNBOUNDED and sliding.blocks_for(10**6) == 4
    assert BlockPool(3, B, parts=((1, W, None),)).most_positions == 48


def test_a_shared_prefix_keeps_its_window_and_a_request_its_own_past_it():
    pool = BlockPool(40, B, parts=TINY_PARTS)
    pool.grow(1, 100)
    # Request 1's first 4 blocks of positions (64) become prefix 7's: the prefix holds them in the full group and
    # its own window's 4 in the sliding group (8); the request keeps its 36 positions past it (3 + 3 = 6): 14 in
    # use, 3 more than the request alone, the sliding blocks it no longer reaches kept for the next hit.
    pool.share(1, 7, 4, 100)
    assert (pool.prefixes[7], pool.held[1], pool.used) == ([8, 1, 4], 6, 14)
    # A second request finds the 4 blocks of positions and takes its own 6 at 100 positions, 13 at 200
    # (136 past the prefix: 9 full, 4 sliding).
    pool.attach(2, 7, 4)
    pool.grow(2, 100)
    assert (pool.held[2], pool.used) == (6, 20)
    pool.grow(2, 200)
    assert (pool.held[2], pool.used) == (13, 27)
    # Every layer full: the prefix is the request's first blocks, nothing more in use.
    plain = BlockPool(40, B)
    plain.grow(1, 100)
    plain.share(1, 7, 4, 100)
    assert (plain.prefixes[7], plain.held[1], plain.used) == ([4, 1, 4], 3, 7)


def test_a_drafter_beside_a_sliding_model_shares_a_block_of_the_common_bytes():
    # The tiny model's blocks (131,072 B: one full and one sliding group) beside a drafter of 3 full layers of
    # 2,048 B a position (98,304 B a block of 16): a block of positions takes 229,376 B in full layers and
    # 131,072 B in sliding ones, 7 and 4 blocks of their greatest common divisor, 32,768 B.
    cap = kv_capacity(StepModel(tiny(), H100), 8192, B, 8 * 2**30)
    drafter = Capacity(cap.capacity_bytes, 0, 0, 0, 98_304.0, 1, 0, EVERY_LAYER)
    both = with_drafter(cap, 0, drafter)
    assert (both.block_bytes, both.parts) == (32_768.0, ((7, None, None), (4, W, None)))
    room = cap.capacity_bytes - cap.reserve_bytes - cap.weight_bytes - cap.activation_bytes
    assert both.blocks == int(room // 32_768)


@pytest.mark.parametrize(("model", "layout", "parts"), [
    ("gemma-3-27b", Layout(), ((5, None, None), (26, 1024, None))),  # 10 full and 52 sliding layers
    ("gpt-oss-120b", Layout(tp=2), ((1, None, None), (1, 128, None))),  # 18 and 18
    ("llama-4-scout", Layout(tp=8), ((1, None, None), (3, None, 8192))),  # 12 full and 36 chunked
    ("mistral-7b", Layout(), ((1, 4096, None),)),  # every layer sliding
    ("llama-3-8b", Layout(pp=2), EVERY_LAYER),
])
def test_the_pool_and_analyze_agree_on_a_sequences_kv_bytes(model, layout, parts):
    # At any length the blocks a request takes are the engine's count of its KV bytes in blocks of the pool's
    # size; with blocks of one position that is analyze's own count of a decode at that length.
    w = resolve_workload("prefill", model=model, batch=1, seq_len=1)
    m = StepModel(w, H100, layout=layout)
    for block_size in (16, 1):
        cap = kv_capacity(m, 8192, block_size, 0)
        assert cap.parts == parts
        pool = cap.pool(block_size)
        per_gpu = m.analyze((Seqs(1, 1),)).workload
        limit = w.model.max_length()
        for n in (1, 15, 16, 17, 127, 128, 129, 1023, 1024, 1025, 4096, 8000, 8128, 8193, 20_000):
            held = pool.blocks_for(n) * cap.block_bytes
            assert held == kv_bytes_per_sequence_per_gpu(per_gpu, layout, n, block_size)
            if block_size == 1 and (limit is None or n <= limit[0]):
                assert held == m.analyze((Seqs(1, 1, n - 1),)).totals.kv_cache_bytes_per_sequence


def test_gemma_3_27b_at_8000_positions_takes_its_window_not_every_layers_cache():
    # 62 layers of 16 KV heads of 128 in bf16, 8,192 B a layer and position; 10 full, 52 sliding through 1,024.
    # In blocks of 16, groups of 2 layers (262,144 B a block): 5 · 500 full + 26 · 65 sliding = 4,190 blocks,
    # 1,098,383,360 B, against analyze's (10 · 8,000 + 52 · 1,024) · 8,192 = 1,091,567,616 B; every layer's
    # 8,000 positions, the charge before, were 62 · 8,000 · 8,192 = 4,063,232,000 B.
    m = StepModel(resolve_workload("prefill", model="gemma-3-27b", batch=1, seq_len=1), load_gpu("h200"))
    cap = kv_capacity(m, 8192, 16, 0)
    assert cap.block_bytes == 262_144 and cap.pool(16).blocks_for(8000) == 4190
    assert 4190 * 262_144 == 1_098_383_360
    assert m.analyze((Seqs(1, 1, 7999),)).totals.kv_cache_bytes_per_sequence == 1_091_567_616


def test_a_closed_batch_of_a_sliding_model_peaks_at_its_requests_blocks():
    # 3 requests of 100 prompt and 10 output tokens hold 109 positions at their end: 7 full + 4 sliding blocks
    # each, 33 in all, in a pool of 40 (every layer's blocks, 2 · 7 = 14 each, would not fit three: 42).
    load = closed_loop(3, 3, Lengths("fixed", 100), Lengths("fixed", 10))
    run = simulate(load, StepModel(tiny(), H100), BlockPool(40, B, parts=TINY_PARTS), SchedulerConfig())
    assert (run.kv_blocks_peak, run.preemptions) == (33, 0)
