"""Qwen3-Next's Gated DeltaNet layers, counted by hand: a fixed state per sequence in 36 of its 48 layers, K and V
in the other 12 (gated full attention), and the recurrent state as fixed memory in the serving simulator."""

from __future__ import annotations

from rooflinectl.engine.count.recurrent import chunked_flops_per_head
from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.footprint import kv_cache_bytes_per_token, recurrent_state_bytes
from rooflinectl.serving.kvcache import BlockPool
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

MODEL = "qwen3-next-80b-a3b"
# Per linear layer and sequence, bf16: the delta rule's state, 32 value heads × 128 × 128 = 524,288 values, and
# the conv's, (4 − 1) taps × (2·16·128 + 32·128 = 8,192 channels) = 24,576 values.
STATE = 32 * 128 * 128 * 2
CONV_STATE = 3 * 8192 * 2
# Per full layer and position: K and V of 2 KV heads of 256, bf16.
KV_POSITION_LAYER = 2 * 2 * 256 * 2


def ops(**kw):
    return {op.name: op for op in step_ops(resolve_workload("decode", model=MODEL, **kw))}


def test_published_parameter_count():
    # 79,674,391,296: transformers 5.25's Qwen3NextForCausalLM of the published config.json, built on the meta
    # device (config: Qwen/Qwen3-Next-80B-A3B-Instruct; sum of its parameters' numel); the model card's "80B"
    # is 0.41% above. Active: 3.87 B with the embedding and LM head (2 × 151,936 × 2,048), the card's "3B".
    m = load_model(MODEL)
    assert m.parameter_count() == 79_674_391_296
    assert abs(m.parameter_count() / 80e9 - 1) < 0.01
    assert m.layer_counts() == {(True, "linear"): 36, (True, "full"): 12}


def test_decode_state_traffic_is_constant_in_context_while_full_attention_grows():
    short, long = ops(context=4096), ops(context=131072)
    for at in (short, long):
        rule = at["delta_rule"]
        assert rule.count == 36 and rule.kind == "recurrent"
        # The state read (the sequence has cached positions) and written; the token's q and k (2,048 each), v
        # and the output (4,096 each), β and a (32 each), bf16.
        assert rule.kv_bytes == STATE
        assert rule.bytes == 2 * STATE + (2 * 2048 + 2 * 4096 + 2 * 32) * 2
        # 7·d_k·d_v + 2·d_v a value head; q, k L2 norms and q's scale 7 a key channel; gates 9 a value head.
        assert rule.flops == 32 * (7 * 128 * 128 + 2 * 128) + 7 * 2048 + 9 * 32
        conv = at["conv1d"]
        assert conv.kv_bytes == CONV_STATE and conv.bytes == 2 * CONV_STATE + 2 * 8192 * 2 + 8192 * 4 * 2
    assert short["delta_rule"] == long["delta_rule"] and short["conv1d"] == long["conv1d"]
    assert short["attention"].count == long["attention"].count == 12
    assert short["attention"].kv_bytes == 4096 * KV_POSITION_LAYER
    assert long["attention"].kv_bytes == 131072 * KV_POSITION_LAYER


def test_kv_cache_only_on_the_full_layers_and_the_state_fixed():
    w = resolve_workload("decode", model=MODEL, context=131072)
    state = 36 * (STATE + CONV_STATE)
    assert kv_cache_bytes_per_sequence(w) == 12 * 131072 * KV_POSITION_LAYER + state
    assert kv_cache_bytes_per_sequence(w, 1) == 12 * KV_POSITION_LAYER + state
    m = load_model(MODEL)
    assert kv_cache_bytes_per_token(m) == 12 * KV_POSITION_LAYER == 24_576
    assert recurrent_state_bytes(m) == state == 39_518_208


def test_prefill_runs_the_chunked_form():
    # 2,048 tokens: 32 chunks of 64; per chunk and value head c²·(5·d_k + 3·d_v) + 6·c·d_k·d_v + d_k·d_v.
    at = {op.name: op for op in step_ops(resolve_workload("prefill", model=MODEL, batch=2, seq_len=2048))}
    per_chunk = 64 * 64 * (8 * 128) + 6 * 64 * 128 * 128 + 128 * 128
    assert chunked_flops_per_head(2048, 128, 128) == 32 * per_chunk
    rule = at["delta_rule_chunked"]
    assert rule.flops == 2 * 32 * 32 * per_chunk + 4096 * (7 * 2048 + 9 * 32)
    assert rule.kv_bytes == 0 and rule.unit == "tensor"  # no state to read before the first chunk


def test_tensor_parallel_splits_the_linear_heads_and_their_state():
    one = resolve_workload("decode", model=MODEL, context=4096)
    from rooflinectl.engine.parallel import Layout, kv_bytes_per_sequence_per_gpu, per_gpu_workload
    layout = Layout(tp=4)
    per_gpu = per_gpu_workload(one, layout)
    assert per_gpu.model.linear_attention is not None and per_gpu.model.linear_attention.num_value_heads == 8
    # The 2 KV heads are replicated past tp 2 (one a GPU); the state splits by 4.
    assert kv_bytes_per_sequence_per_gpu(per_gpu, layout) == (12 * 4096 * KV_POSITION_LAYER // 2
                                                               + 36 * (STATE + CONV_STATE) // 4)


def test_the_block_pool_holds_each_sequences_state_from_its_first_position():
    pool = BlockPool(total=100, block_size=16, state_blocks=5)
    assert pool.blocks_for(0) == 0 and pool.blocks_for(1) == 6 and pool.blocks_for(33) == 8
    pool.grow(1, 33)
    assert pool.used == 8 and pool.room(1, 33) == (100 - 8 + 8 - 5) * 16 - 33
    assert pool.most_positions == 95 * 16


def test_the_serving_capacity_gives_each_sequence_its_state_in_whole_blocks():
    from rooflinectl.serving.capacity import kv_capacity
    from rooflinectl.serving.stepmodel import StepModel
    from rooflinectl.specs.hardware import load_gpu

    cap = kv_capacity(StepModel(resolve_workload("decode", model=MODEL), load_gpu("h200")), 2048, 16, 0.0)
    # A block: 16 positions of the 12 full layers' K and V; the state: 39,518,208 B, 100.5 blocks → 101.
    assert cap.block_bytes == 16 * 12 * KV_POSITION_LAYER == 393_216
    assert cap.state_blocks == 101
