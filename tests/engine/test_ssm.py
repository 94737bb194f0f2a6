"""Nemotron-H 8B's Mamba-2 layers, counted by hand: a fixed state per sequence in 24 of its 52 layers, K and V in
4 attention layers, 24 MLP layers apart, and the state as fixed memory in the serving simulator."""

from __future__ import annotations

from rooflinectl.engine.count.resident import kv_cache_bytes_per_sequence
from rooflinectl.engine.count.ssm import chunked_flops
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.footprint import kv_cache_bytes_per_token, recurrent_state_bytes
from rooflinectl.specs.models import load_model
from rooflinectl.specs.scenario import resolve_workload

MODEL = "nemotron-h-8b"
# Per Mamba-2 layer and sequence, bf16: the SSM state, 128 heads × 64 × 128 = 1,048,576 values, and the conv's,
# (4 − 1) taps × (8,192 + 2·8·128 = 10,240 channels) = 30,720 values.
STATE = 128 * 64 * 128 * 2
CONV_STATE = 3 * 10240 * 2
# Per attention layer and position: K and V of 8 KV heads of 128, bf16.
KV_POSITION_LAYER = 2 * 8 * 128 * 2


def long_model():
    # The 8K checkpoint's limit raised to 128k, the sizes unchanged: the counts at 131,072 positions.
    return load_model(MODEL).model_copy(update={"max_position_embeddings": 131072})


def ops(**kw):
    return {op.name: op for op in step_ops(resolve_workload("decode", model=long_model(), **kw))}


def test_published_parameter_count():
    # 8,100,852,736: per Mamba-2 layer in_proj 4,096 × (2·8,192 + 2·1,024 + 128) = 76,021,760, conv 10,240 × (4
    # + 1), dt_bias, A_log, D 3 × 128, norm 8,192, out_proj 8,192 × 4,096, block norm 4,096: 109,640,064; per
    # attention layer Q, K, V, O 4,096 × (4,096 + 2·1,024) + 4,096² and its norm: 41,947,136; per MLP layer up and
    # down 2 × 4,096 × 21,504 and its norm: 176,164,864; embedding and LM head 2 × 131,072 × 4,096, final norm.
    # transformers 5.25's NemotronHForCausalLM builds the same on the meta device (tests/specs/test_nemotron_h.py).
    # The model card (nvidia/Nemotron-H-8B-Base-8K) says "8B": 1.26% below this count, its rounding.
    m = load_model(MODEL)
    assert m.parameter_count() == 24 * 109_640_064 + 4 * 41_947_136 + 24 * 176_164_864 + 2 * 131072 * 4096 + 4096
    assert m.parameter_count() == 8_100_852_736
    assert abs(m.parameter_count() / 8e9 - 1) < 0.013
    assert m.layer_counts() == {(False, "mamba"): 24, (False, "full"): 4, (False, "mlp"): 24}


def test_kv_cache_only_on_the_attention_layers_at_128k():
    w = resolve_workload("decode", model=long_model(), context=131072)
    state = 24 * (STATE + CONV_STATE)
    assert kv_cache_bytes_per_sequence(w) == 4 * 131072 * KV_POSITION_LAYER + state
    assert kv_cache_bytes_per_sequence(w, 1) == 4 * KV_POSITION_LAYER + state
    assert kv_cache_bytes_per_token(long_model()) == 4 * KV_POSITION_LAYER == 16_384
    assert recurrent_state_bytes(long_model()) == state == 51_806_208
    at = {op.name: op for op in step_ops(w)}
    assert at["attention"].count == 4 and at["attention"].kv_bytes == 131072 * KV_POSITION_LAYER
    assert at["kv_write"].count == 4  # K and V written on the 4 attention layers only


def test_decode_state_traffic_is_constant_in_context_while_attention_grows():
    short, long = ops(context=4096), ops(context=131072)
    for at in (short, long):
        scan = at["ssm_scan"]
        assert scan.count == 24 and scan.kind == "recurrent" and scan.unit == "vector"
        # The state read (the sequence has cached positions) and written; the token's x and y (8,192 each), B and
        # C (1,024 each) and dt (128), bf16.
        assert scan.kv_bytes == STATE
        assert scan.bytes == 2 * STATE + (2 * 8192 + 2 * 1024 + 128) * 2
        # 5·P·S a head: 5 × 1,048,576; x·dt and D·x 3 a channel; the gates 6 a head.
        assert scan.flops == 5 * 1048576 + 3 * 8192 + 6 * 128
        conv = at["conv1d"]
        # x, B, C read and written, the 10,240 × 4 taps and 10,240 biases, the conv state read and written.
        assert conv.kv_bytes == CONV_STATE
        assert conv.bytes == 2 * CONV_STATE + 2 * 10240 * 2 + 10240 * 5 * 2
        assert conv.flops == (2 * 4 + 1 + 4) * 10240
    assert short["ssm_scan"] == long["ssm_scan"] and short["conv1d"] == long["conv1d"]
    assert short["attention"].kv_bytes == 4096 * KV_POSITION_LAYER
    assert long["attention"].kv_bytes == 131072 * KV_POSITION_LAYER


def test_every_layer_is_one_branch():
    at = ops(context=4096)
    # One norm and one residual add a layer: attn_norm before the 28 mixers, mlp_norm before the 24 MLPs.
    assert at["attn_norm"].count == at["attn_residual"].count == 28
    assert at["mlp_norm"].count == at["mlp_residual"].count == 24
    assert at["in_proj"].gemm is not None and at["in_proj"].gemm.n == 2 * 8192 + 2 * 1024 + 128
    assert "gate_proj" not in at and at["up_proj"].count == 24  # up, ReLU², down
    assert at["act"].flops == 2 * 21504 and "rope" not in at  # squared ReLU 2 an element; no RoPE


def test_prefill_runs_the_chunked_form():
    # 2,048 tokens: 16 chunks of 128; per chunk 8 groups × 2·c²·S and 128 heads × (c²·(2·P + 1) + 4·c·P·S
    # + c·(S + P) + 2·P·S).
    w = resolve_workload("prefill", model=load_model(MODEL), batch=2, seq_len=2048)
    c, p, s = 128, 64, 128
    per_chunk = 8 * 2 * c * c * s + 128 * (c * c * (2 * p + 1) + 4 * c * p * s + c * (s + p) + 2 * p * s)
    assert chunked_flops(2048, load_model(MODEL).mamba) == 16 * per_chunk
    scan = {op.name: op for op in step_ops(w)}["ssm_scan_chunked"]
    assert scan.flops == 2 * 16 * per_chunk + 4096 * (3 * 8192 + 6 * 128)
    assert scan.kv_bytes == 0 and scan.unit == "tensor"  # no state to read before the first chunk


def test_tensor_parallel_splits_the_heads_groups_and_their_state():
    from rooflinectl.engine.parallel import Layout, kv_bytes_per_sequence_per_gpu, per_gpu_workload

    one = resolve_workload("decode", model=MODEL, context=4096)
    per_gpu = per_gpu_workload(one, Layout(tp=4))
    mamba = per_gpu.model.mamba
    assert mamba is not None and (mamba.num_heads, mamba.n_groups) == (32, 2)
    # The 8 KV heads split by 4, the state (heads) and the conv (x, B, C channels) by 4 too.
    assert kv_bytes_per_sequence_per_gpu(per_gpu, Layout(tp=4)) == (4 * 4096 * KV_POSITION_LAYER
                                                                    + 24 * (STATE + CONV_STATE)) // 4


def test_the_serving_capacity_gives_each_sequence_its_state_in_whole_blocks():
    from rooflinectl.serving.capacity import kv_capacity
    from rooflinectl.serving.stepmodel import StepModel
    from rooflinectl.specs.hardware import load_gpu

    cap = kv_capacity(StepModel(resolve_workload("decode", model=MODEL), load_gpu("h200")), 2048, 16, 0.0)
    # A block: 16 positions of the 4 attention layers' K and V; the state: 51,806,208 B, 197.6 blocks → 198.
    assert cap.block_bytes == 16 * 4 * KV_POSITION_LAYER == 262_144
    assert cap.state_blocks == 198


def test_pipeline_stages_hold_equal_shares_of_each_kind():
    from rooflinectl.engine.parallel.stages import stage_workload

    # The pattern is not periodic: each stage's model takes the first stage's L/p entries, and the kinds' counts
    # must be 1/p of the whole (24 Mamba-2, 4 attention, 24 MLP): 13 layers at pp 4, 6 + 1 + 6.
    stage = stage_workload(resolve_workload("decode", model=MODEL), 4).model
    assert stage.layer_counts() == {(False, "mamba"): 6, (False, "full"): 1, (False, "mlp"): 6}
