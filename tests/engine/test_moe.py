"""Mixture of experts (issue 12): parameter counts against the published ones, and the MoE layer's ops pinned to
numbers derived by hand from the rules in engine/count/op.py and engine/count/transformer.py."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rooflinectl.engine.count.moe import experts_touched, tokens_to_touch
from rooflinectl.engine.count.op import SOFTMAX_FLOPS_PER_ELEMENT, TOPK_FLOPS_PER_ELEMENT_PER_PICK
from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.engine.roofline import analyze
from rooflinectl.errors import UserError
from rooflinectl.render.verdict import verdict
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import load_model, model_from_hf_config
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import GIB

H200 = load_gpu("h200")


def ops_by_name(workload) -> dict:
    return {op.name: op for op in step_ops(workload)}


# --- parameters ------------------------------------------------------------------------------------------------
#
# Mixtral 8x7B: H 4096, 32 layers, 32 heads, 8 KV heads, d 128, 8 experts of width 14,336, top-2, V 32,000.
#   attention per layer 4096·(4096 + 2·1024) + 4096·4096 = 41,943,040; norms 2·4096 = 8,192; router 4096·8 = 32,768
#   one expert 3·4096·14336 = 176,160,768
#   total  32·(41,943,040 + 8,192 + 32,768 + 8·176,160,768) + 2·32,000·4096 + 4096 = 46,702,792,704
#   active 32·(41,943,040 + 8,192 + 32,768 + 2·176,160,768) + 262,144,000 + 4096 = 12,879,925,248
# Qwen3-30B-A3B: H 2048, 48 layers, 32 heads, 4 KV heads, d 128, 128 experts of width 768, top-8, V 151,936.
#   attention 2048·(4096 + 2·512) + 4096·2048 = 18,874,368; norms 2·2048 + q/k norm 2·128 = 4,352;
#   router 2048·128 = 262,144; one expert 3·2048·768 = 4,718,592; tables 2·151,936·2048 = 622,329,856
#   total  48·(18,874,368 + 4,352 + 262,144 + 128·4,718,592) + 622,329,856 + 2048 = 30,532,122,624
#   active 48·(18,874,368 + 4,352 + 262,144 + 8·4,718,592) + 622,329,856 + 2048 = 3,353,032,704
# Qwen3-235B-A22B: H 4096, 94 layers, 64 heads, 4 KV heads, d 128, 128 experts of width 1536, top-8.
#   attention 4096·(8192 + 2·512) + 8192·4096 = 71,303,168; norms 8192 + 256 = 8,448; router 524,288;
#   one expert 3·4096·1536 = 18,874,368; tables 2·151,936·4096 = 1,244,659,712
#   total  94·(71,303,168 + 8,448 + 524,288 + 128·18,874,368) + 1,244,659,712 + 4096 = 235,093,634,560
#   active 94·(71,303,168 + 8,448 + 524,288 + 8·18,874,368) + 1,244,659,712 + 4096 = 22,190,763,520
COUNTED = {
    "mixtral-8x7b": (46_702_792_704, 12_879_925_248),
    "qwen3-30b-a3b": (30_532_122_624, 3_353_032_704),
    "qwen3-235b-a22b": (235_093_634_560, 22_190_763_520),
}


@pytest.mark.parametrize("model", sorted(COUNTED))
def test_parameters_by_hand(model):
    m = load_model(model)
    assert (m.parameter_count(), m.active_parameter_count()) == COUNTED[model]


@pytest.mark.parametrize("model, total, active", [
    # Mistral AI, "Mixtral of experts" (mistral.ai/news/mixtral-of-experts, 2023-12-11): "46.7B total
    # parameters but only uses 12.9B parameters per token".
    ("mixtral-8x7b", 46.7e9, 12.9e9),
    # Qwen3-235B-A22B model card (huggingface.co/Qwen/Qwen3-235B-A22B): 235B in total and 22B activated.
    ("qwen3-235b-a22b", 235e9, 22e9),
])
def test_parameters_match_the_published_within_one_percent(model, total, active):
    m = load_model(model)
    assert m.parameter_count() == pytest.approx(total, rel=0.01)
    assert m.active_parameter_count() == pytest.approx(active, rel=0.01)


def test_qwen3_30b_a3b_matches_its_model_card():
    """Qwen3-30B-A3B model card (huggingface.co/Qwen/Qwen3-30B-A3B): 30.5B in total, 3.3B activated, 29.9B
    non-embedding. Total and non-embedding agree within 0.1%. The activated count is 3,353,032,704 by the
    convention that gives Mixtral's 12.9 B (the embedding table and LM head included): 1.6% above "3.3B", a
    figure given to two digits, which 3.35 B truncates to; without the LM head it would be 3.04 B, and without
    both tables 2.73 B, further off. So the card's 3.3 B is pinned as what it states: 3.3 B ≤ active < 3.4 B."""
    m = load_model("qwen3-30b-a3b")
    assert m.parameter_count() == pytest.approx(30.5e9, rel=0.01)
    tables = 2 * 151_936 * 2048
    assert m.parameter_count() - tables == pytest.approx(29.9e9, rel=0.01)
    assert 3.3e9 <= m.active_parameter_count() < 3.4e9


def test_a_dense_model_is_all_active():
    m = load_model("llama-3-8b")
    assert m.active_parameter_count() == m.parameter_count() == 8_030_261_248
    assert (m.dense_layers, m.moe_layers) == (32, 0)


# --- the experts touched ---------------------------------------------------------------------------------------


def test_expected_experts_touched_by_hand():
    one = resolve_workload("decode", model="mixtral-8x7b", batch=1)
    assert experts_touched(one) == 2  # one token touches exactly its top-2
    # 32 tokens: 8·(1 − (1 − 2/8)^32) = 8·(1 − 0.75^32) = 8 − 8·1.0045e-4 = 7.99920
    w = resolve_workload("decode", model="mixtral-8x7b", batch=32)
    assert experts_touched(w) == pytest.approx(float(8 * (1 - Fraction(3, 4) ** 32)), rel=1e-15)
    assert experts_touched(w) == pytest.approx(7.9992, abs=1e-4)
    # A prefill of 2,048 tokens touches all of them (0.75^2048 underflows: 8 exactly).
    assert experts_touched(resolve_workload("prefill", model="mixtral-8x7b", seq_len=2048)) == 8
    # Qwen3-30B-A3B at batch 8: 128·(1 − (120/128)^8) = 128·(1 − 0.9375^8) = 128·0.40328 = 51.62, under N·k = 64.
    q = resolve_workload("decode", model="qwen3-30b-a3b", batch=8)
    assert experts_touched(q) == pytest.approx(128 * (1 - 0.9375**8)) == pytest.approx(51.62, abs=0.01)
    # Stated: the user's count, whatever the batch.
    assert experts_touched(resolve_workload("decode", model="mixtral-8x7b", batch=32, experts_touched=5)) == 5
    assert experts_touched(resolve_workload("decode", model="llama-3-8b")) == 0


@pytest.mark.parametrize("model", sorted(COUNTED))
def test_expected_experts_rise_with_tokens_between_k_and_both_limits(model):
    m = load_model(model)
    assert m.moe is not None
    e, k = m.moe.num_experts, m.moe.experts_per_token
    last = 0.0
    for batch in (1, 2, 3, 8, 17, 64, 100, 1000, 10**5):
        x = experts_touched(resolve_workload("decode", model=model, batch=batch))
        assert k <= x <= min(e, batch * k)
        assert x >= last
        last = x
    assert last == e


def test_the_batch_at_which_99_percent_of_the_experts_are_touched():
    # Mixtral: 0.75^16 = 0.01002 misses (> 1%), 0.75^17 = 0.00752 (≤ 1%): 17 tokens.
    assert tokens_to_touch(8, 2, 0.99) == 17
    # Qwen3 (128 experts, top-8): 0.9375^71 = 0.01023, 0.9375^72 = 0.00959: 72 tokens.
    assert tokens_to_touch(128, 8, 0.99) == 72
    assert tokens_to_touch(8, 8, 0.99) == 1  # top-E touches all at one token
    # Half of them: 0.75^2 = 0.5625, 0.75^3 = 0.42: 3 tokens.
    assert tokens_to_touch(8, 2, 0.5) == 3


def test_tokens_to_touch_moves_up_where_the_logarithms_round_short():
    """E 7, top-3: a token misses an expert with probability 4/7. The fraction 1 − (1 − 3/7)² as computed in
    floating point, 0.6734693877551021, lies 8.2e-17 above 1 − (4/7)² = 33/49 (exactly: Fraction), so two
    tokens, whose expectation is exactly 33/49 of the experts, fall short of it and three (1 − 64/343 = 279/343)
    reach it. The logarithms' ratio ln(1 − fraction)/ln(4/7) rounds to 2.0 (IEEE doubles), whose ceiling is short
    by one: the check against the formula moves it up to 3."""
    fraction = 1 - (1 - 3 / 7) ** 2
    assert fraction == 0.6734693877551021
    assert Fraction(33, 49) < Fraction(fraction) <= Fraction(279, 343)
    assert tokens_to_touch(7, 3, fraction) == 3


# --- the MoE layer's ops, Mixtral decode by hand -----------------------------------------------------------------
# H 4096, E 8, k 2, I_e 14,336, bf16 (2 bytes). One expert's gate (or up, or down) weights: 4096·14336·2 =
# 117,440,512 bytes.
H, E, K, IE = 4096, 8, 2, 14336
EXPERT_W = H * IE * 2


def test_mixtral_decode_batch_1_moe_ops_by_hand():
    ops = ops_by_name(resolve_workload("decode", model="mixtral-8x7b", batch=1, context=4096))
    assert [n for n in ops if n.startswith(("router", "expert", "moe"))] == [
        "router", "expert_gate_proj", "expert_up_proj", "expert_act", "expert_down_proj", "moe_combine"]
    router = ops["router"]
    # 2·1·4096·8 = 65,536 FLOPs of gate + (5 softmax + 1·2 top-k) per logit × 8 logits = 56.
    assert router.flops == 2 * 1 * H * E + (SOFTMAX_FLOPS_PER_ELEMENT + TOPK_FLOPS_PER_ELEMENT_PER_PICK * K) * E \
        == 65_592
    # Reads x 4096 and W_gate 4096×8 in bf16; writes 2 weights (bf16) and 2 ids (int32): 8,192 + 65,536 + 12.
    assert router.bytes == (H + H * E) * 2 + K * (2 + 4) == 73_740
    assert (router.kind, router.weight_bytes, router.count) == ("router", 65_536, 32)
    gate = ops["expert_gate_proj"]
    # One token, two experts: 2 pairs. 2·2·4096·14336 FLOPs; reads the token's row once per expert (2·4096·2),
    # the two experts' weights (2·117,440,512), writes 2×14336 in bf16.
    assert gate.flops == 2 * 2 * H * IE == 234_881_024
    assert gate.bytes == 2 * H * 2 + 2 * EXPERT_W + 2 * IE * 2 == 234_954_752
    assert (gate.kind, gate.weight_bytes) == ("expert", 234_881_024)
    assert ops["expert_up_proj"] == gate.__class__(**{**gate.__dict__, "name": "expert_up_proj"})
    down = ops["expert_down_proj"]
    assert down.flops == 2 * 2 * IE * H == 234_881_024
    assert down.bytes == 2 * IE * 2 + 2 * EXPERT_W + 2 * H * 2 == 234_954_752
    act = ops["expert_act"]
    # SiLU(gate)·up on 2×14336: 5 FLOPs each; reads gate and up, writes the product.
    assert (act.flops, act.bytes) == (5 * 2 * IE, 3 * 2 * IE * 2) == (143_360, 172_032)
    combine = ops["moe_combine"]
    # Per element 2 multiplies by the router weights and 1 add: 3·4096; reads 2×4096 outputs and 2 weights,
    # writes 4096: (8,192 + 2 + 4,096)·2 bytes.
    assert (combine.flops, combine.bytes) == (3 * H, (2 * H + 2 + H) * 2) == (12_288, 24_580)
    # FLOPs follow the k experts each token uses: 2·N·k·(3·H·I_e) = 2·1·2·3·4096·14336 in the three matmuls.
    assert gate.flops + ops["expert_up_proj"].flops + down.flops == 2 * 1 * 2 * 3 * H * IE == 704_643_072


def test_mixtral_decode_batch_32_reads_the_expected_experts():
    ops = ops_by_name(resolve_workload("decode", model="mixtral-8x7b", batch=32, context=4096))
    # 32 tokens × top-2 = 64 pairs. Experts read: 8·(1 − 0.75^32) = 7.9992, so the gate's weights are
    # 7.9992 · 117,440,512 = 939,429,718.53 bytes, rounded to 939,429,719 (all 8 would be 939,524,096).
    weights = round(8 * (1 - Fraction(3, 4) ** 32) * EXPERT_W)
    assert weights == 939_429_719
    gate = ops["expert_gate_proj"]
    assert gate.flops == 2 * 64 * H * IE == 7_516_192_768
    assert gate.weight_bytes == weights
    # 64 rows of x (524,288 bytes), the weights, 64×14336 out (1,835,008 bytes).
    assert gate.bytes == 64 * H * 2 + weights + 64 * IE * 2 == 941_789_015
    assert ops["expert_down_proj"].bytes == 64 * IE * 2 + weights + 64 * H * 2 == 941_789_015
    # The router's gate is the same matrix for every token: 2·32·4096·8 + (5 + 2)·32·8.
    assert ops["router"].flops == 2 * 32 * H * E + 7 * 32 * E == 2_098_944
    # Stated skew: 4 experts touched read exactly 4 experts' weights.
    skewed = ops_by_name(resolve_workload("decode", model="mixtral-8x7b", batch=32, experts_touched=4))
    assert skewed["expert_gate_proj"].weight_bytes == 4 * EXPERT_W == 469_762_048
    assert skewed["expert_gate_proj"].flops == gate.flops  # the same 64 pairs are computed


def test_footprint_holds_every_expert_while_decode_reads_the_touched_ones():
    w = resolve_workload("decode", model="mixtral-8x7b", batch=1, context=4096)
    a = analyze(w, H200)
    held = 46_702_792_704 * 2  # every parameter in bf16
    # KV cache: 32 layers · 2 · 1024 · 4096 positions · 2 bytes = 536,870,912 per sequence.
    kv = 32 * 2 * 1024 * 4096 * 2
    assert a.totals.memory_bytes == held + kv
    # Batch 1 reads every weight but the 6 experts of each layer it does not use and the embedding rows of
    # other tokens: (46,702,792,704 − 32·6·176,160,768 − (32,000 − 1)·4096)·2
    # = (46,702,792,704 − 33,822,867,456 − 131,067,904)·2 = 12,748,857,344·2.
    read = (46_702_792_704 - 32 * 6 * 176_160_768 - (32_000 - 1) * 4096) * 2
    assert a.totals.weight_bytes == read == 25_497_714_688
    # The largest batch holds all the experts too: (139.8 GiB − 93,405,585,408 B) / 536,870,912 B = 105.6.
    assert H200.memory.hbm_capacity_gib == 139.8
    assert a.totals.max_batch == int((139.8 * GIB - held) // kv) == 105


def test_prefill_reads_every_expert_once():
    w = resolve_workload("prefill", model="mixtral-8x7b", batch=1, seq_len=2048)
    ops = ops_by_name(w)
    assert ops["expert_gate_proj"].weight_bytes == 8 * EXPERT_W
    a = analyze(w, H200)
    # Every weight once, but the embedding table, of which 2,048 rows are read.
    assert a.totals.weight_bytes == (46_702_792_704 - (32_000 - 2048) * 4096) * 2


def test_qwen3_qk_norm_is_an_rmsnorm_over_each_head():
    ops = ops_by_name(resolve_workload("decode", model="qwen3-30b-a3b", batch=4))
    # 4 tokens × 32 heads = 128 rows of d = 128: 4 FLOPs each; reads and writes them, reads the gain (128).
    q, k = ops["q_norm"], ops["k_norm"]
    assert (q.flops, q.bytes, q.weight_bytes) == (4 * 128 * 128, (2 * 128 * 128 + 128) * 2, 256)
    assert (k.flops, k.bytes) == (4 * 16 * 128, (2 * 16 * 128 + 128) * 2)  # 4 tokens × 4 KV heads
    names = [op.name for op in step_ops(resolve_workload("decode", model="qwen3-30b-a3b"))]
    assert names.index("v_proj") < names.index("q_norm") < names.index("k_norm") < names.index("rope")


@pytest.mark.parametrize("fused", [[], ["gate_up"], ["qkv", "gate_up", "norm_linear", "act", "residual"]])
@pytest.mark.parametrize("phase, size", [("decode", {"batch": 8}), ("prefill", {"seq_len": 512})])
def test_moe_steps_have_unique_names_and_the_same_flops_fused_or_not(fused, phase, size):
    ops = step_ops(resolve_workload(phase, model="qwen3-30b-a3b", fused=fused, **size))
    assert len({op.name for op in ops}) == len(ops)
    experts = [op for op in ops if op.kind == "expert"]
    assert experts and all(op.count == 48 for op in experts)
    n = 8 if phase == "decode" else 512
    # The expert matmuls: 2·N·k·3·H·I_e FLOPs per layer, fused or not (act adds its 5 per element).
    matmul = sum(op.flops for op in experts) - (5 * n * 8 * 768 if "act" in fused else 0)
    assert matmul == 2 * n * 8 * 3 * 2048 * 768


def test_first_dense_layers_and_shared_experts():
    """A DeepSeek-like layout by hand: 4 layers, the first dense (MLP 512), then 3 MoE layers of 16 experts of
    width 64, top-4, and 2 shared experts of width 96 (one gated MLP of width 192)."""
    m = validate(Model, {
        "id": "toy", "name": "toy", "source": "a test", "hidden_size": 256, "num_layers": 4, "num_heads": 4,
        "num_kv_heads": 2, "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000,
        "moe": {"num_experts": 16, "experts_per_token": 4, "expert_intermediate_size": 64, "num_shared_experts": 2,
                "shared_expert_intermediate_size": 96, "first_dense_layers": 1}}, "test")
    # Attention per layer 256·(256 + 2·128) + 256·256 = 196,608; norms 512. Dense MLP 3·256·512 = 393,216.
    # MoE layer: router 256·16 = 4,096, experts 16·3·256·64 = 786,432, shared 3·256·192 = 147,456.
    # Embedding and LM head 2·1000·256 = 512,000; final norm 256.
    # 788,480 + 393,216 + 3·937,984 + 512,256 = 4,507,904; active: 12 of the 16 experts left out in 3 layers.
    assert m.parameter_count() == 4 * (196_608 + 512) + 393_216 + 3 * (4_096 + 786_432 + 147_456) + 512_256 \
        == 4_507_904
    assert m.active_parameter_count() == 4_507_904 - 3 * 12 * 3 * 256 * 64 == 2_738_432
    ops = step_ops(resolve_workload("decode", model=m, batch=2))  # type: ignore[arg-type]
    count = {op.name: op.count for op in ops}
    assert len(count) == len(ops)
    assert count["q_proj"] == count["mlp_norm"] == count["mlp_residual"] == 4
    assert count["gate_proj"] == count["down_proj"] == 1
    assert count["router"] == count["expert_gate_proj"] == count["shared_gate_proj"] == 3
    names = [op.name for op in ops]
    # Execution order within the kinds of layer: the dense MLP, then the MoE one, then the residual.
    assert names.index("down_proj") < names.index("router") < names.index("moe_combine") \
        < names.index("mlp_residual")
    combine = {op.name: op for op in ops}["moe_combine"]
    # 2 tokens: per element 4 multiplies, 3 adds and the shared output's add (8); reads 8 routed rows, 8 weights
    # and 2 shared rows, writes 2 rows: (8·256 + 8 + 2·256 + 2·256)·2 bytes.
    assert combine.flops == 8 * 2 * 256
    assert combine.bytes == (8 * 256 + 8 + 2 * 256 + 2 * 256) * 2


# --- validation --------------------------------------------------------------------------------------------------

TOY = {"id": "t", "name": "t", "source": "test", "hidden_size": 64, "num_layers": 2, "num_heads": 2,
       "num_kv_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 100}


@pytest.mark.parametrize("moe, reason", [
    ({"num_experts": 4, "experts_per_token": 5, "expert_intermediate_size": 8}, "experts_per_token \\(5\\) exceeds"),
    ({"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 8, "first_dense_layers": 2},
     "first_dense_layers \\(2\\) leaves none"),
    ({"num_experts": 4, "experts_per_token": 2, "expert_intermediate_size": 8,
      "shared_expert_intermediate_size": 8}, "num_shared_experts is 0"),
    ({"num_experts": 0, "experts_per_token": 1, "expert_intermediate_size": 8}, "num_experts"),
    ({"num_experts": 4, "experts_per_token": 2}, "expert_intermediate_size"),
])
def test_an_impossible_moe_section_is_refused_in_one_line(moe, reason):
    with pytest.raises(UserError, match=reason) as err:
        validate(Model, {**TOY, "moe": moe}, "m.yaml")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("model, batch, touched, reason", [
    ("mixtral-8x7b", 32, 9, "touches 2 to 8 of them"),
    ("mixtral-8x7b", 32, 1, "touches 2 to 8 of them"),
    ("mixtral-8x7b", 1, 3, "a step of 1 token touches exactly 2"),
    ("mixtral-8x7b", 2, 5, "a step of 2 tokens touches 2 to 4"),
    ("llama-3-8b", 8, 2, "llama-3-8b has no experts"),
])
def test_experts_touched_must_be_possible(model, batch, touched, reason):
    with pytest.raises(UserError, match=reason):
        resolve_workload("decode", model=model, batch=batch, experts_touched=touched)


# --- config.json -------------------------------------------------------------------------------------------------

# The published configs' architecture keys (huggingface.co/mistralai/Mixtral-8x7B-v0.1 and Qwen/Qwen3-30B-A3B,
# config.json), with keys the importer does not read (rope_theta, router_aux_loss_coef …) left in.
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_act": "silu",
           "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 32768,
           "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
           "num_local_experts": 8, "output_router_logits": False, "rms_norm_eps": 1e-05, "rope_theta": 1e6,
           "router_aux_loss_coef": 0.02, "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000}
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "attention_bias": False,
             "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
             "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
             "mlp_only_layers": [], "moe_intermediate_size": 768, "norm_topk_prob": True,
             "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
             "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1e6, "sliding_window": None,
             "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936}


def _config(tmp_path, cfg: dict, folder: str):
    (tmp_path / folder).mkdir()
    path = tmp_path / folder / "config.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("cfg, bundled", [(MIXTRAL, "mixtral-8x7b"), (QWEN3_MOE, "qwen3-30b-a3b")])
def test_a_published_moe_config_reads_as_the_bundled_model(tmp_path, cfg, bundled):
    imported = model_from_hf_config(_config(tmp_path, cfg, bundled))
    same = {"id", "name", "source"}
    assert imported.model_dump(exclude=same) == load_model(bundled).model_dump(exclude=same)


@pytest.mark.parametrize("base, change, reason", [
    (QWEN3_MOE, {"decoder_sparse_step": 2}, "field 'decoder_sparse_step': 2 puts dense layers"),
    (QWEN3_MOE, {"mlp_only_layers": [0, 47]}, "field 'mlp_only_layers'"),
    (QWEN3_MOE, {"kv_lora_rank": 512}, "field 'kv_lora_rank'"),
    (QWEN3_MOE, {"num_local_experts": 8}, "field 'num_local_experts'"),
    (QWEN3_MOE, {"attention_bias": "true"}, "field 'attention_bias': expected true or false"),
    (QWEN3_MOE, {"moe_intermediate_size": None}, "moe.expert_intermediate_size"),
    (MIXTRAL, {"num_local_experts": None}, "field 'num_local_experts': missing|num_experts"),
    (MIXTRAL, {"num_experts_per_tok": 9}, "experts_per_token \\(9\\) exceeds num_experts \\(8\\)"),
    (MIXTRAL, {"moe_intermediate_size": 1024}, "field 'moe_intermediate_size'"),
    (MIXTRAL, {"n_routed_experts": 256}, "field 'n_routed_experts'"),
    # deepseek_v3 is modelled: a Mixtral config under its name is refused by its class, and without the class
    # by the key DeepSeek does not use
    (MIXTRAL, {"model_type": "deepseek_v3"}, "'MixtralForCausalLM' is not modelled for model_type deepseek_v3"),
    (MIXTRAL, {"model_type": "deepseek_v3", "architectures": None}, "field 'num_local_experts'"),
])
def test_moe_configs_refuse_what_is_not_modelled(tmp_path, base, change, reason):
    cfg = {**base, **change}
    with pytest.raises(UserError, match=reason) as err:
        model_from_hf_config(_config(tmp_path, cfg, "m"))
    assert "\n" not in str(err.value)


def test_a_mixtral_config_without_its_experts_is_not_read_as_dense(tmp_path):
    """Issue 12: a Mixtral config without its expert keys was analysed as a dense Llama."""
    cfg = {k: v for k, v in MIXTRAL.items() if k not in ("num_local_experts", "num_experts_per_tok")}
    with pytest.raises(UserError, match="field 'num_local_experts': missing from the mixtral config"):
        model_from_hf_config(_config(tmp_path, cfg, "m"))


# --- the verdict ---------------------------------------------------------------------------------------------------


def test_the_verdict_explains_moe_decode():
    lines = verdict(analyze(resolve_workload("decode", model="mixtral-8x7b", batch=4), H200))
    text = " ".join(lines)
    # 8·(1 − 0.75^4) = 8·0.68359 = 5.469 experts at batch 4; 99% of 8 at batch 17.
    assert "reads 5.469 distinct experts per layer (expected under uniform routing" in text
    assert "grow with batch until every expert is touched: the expected count reaches 99% of 8 at batch 17." in text
    # Each read serves N·k / touched = 8 / 5.469 = 1.46 tokens.
    assert "serve 1.46 tokens on average" in text
    past = " ".join(verdict(analyze(resolve_workload("decode", model="mixtral-8x7b", batch=32), H200)))
    assert "at batch 17, which this batch is past" in past
    stated = " ".join(verdict(analyze(resolve_workload("decode", model="mixtral-8x7b", batch=32,
                                                        experts_touched=3), H200)))
    assert "reads 3 distinct experts per layer, as stated (--experts-touched); uniform routing would touch " \
        "7.999, and 99% of the 8 from 17 tokens on." in stated
    assert "expert weights read grow" not in stated
    dense = " ".join(verdict(analyze(resolve_workload("decode", model="llama-3-8b"), H200)))
    assert "expert" not in dense


# --- properties --------------------------------------------------------------------------------------------------


def _toy_moe(e: int, k: int) -> Model:
    return validate(Model, {**TOY, "moe": {"num_experts": e, "experts_per_token": k,
                                            "expert_intermediate_size": 8}}, "test")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.data())
def test_expected_experts_touched_stay_between_k_and_their_limits_and_rise_with_tokens(data):
    e = data.draw(st.integers(1, 2**16), label="E")
    k = data.draw(st.integers(1, e), label="k")
    model = _toy_moe(e, k)
    batches = sorted(data.draw(st.lists(st.integers(1, 2**20), min_size=2, max_size=5, unique=True)))
    touched = [experts_touched(resolve_workload("decode", model=model, batch=b, context=8))  # type: ignore[arg-type]
               for b in batches]
    for b, x in zip(batches, touched):
        assert k <= x <= min(e, b * k)
    assert touched == sorted(touched)
    n = tokens_to_touch(e, k, 0.99)
    # The batch the verdict names is the first whose expectation reaches 99% of E.
    assert e * (1 - (1 - k / e) ** n) >= 0.99 * e * (1 - 1e-12)
    assert n == 1 or e * (1 - (1 - k / e) ** (n - 1)) < 0.99 * e


def test_a_saved_moe_scenario_round_trips_with_its_experts_touched(tmp_path):
    import yaml

    from rooflinectl.specs.scenario import scenario_from_workload

    w = resolve_workload("decode", model="qwen3-30b-a3b", batch=64, experts_touched=40)
    path = tmp_path / "saved.yaml"
    path.write_text(yaml.safe_dump(scenario_from_workload(w).model_dump(exclude_none=True)))
    assert "experts_touched: 40" in path.read_text()
    assert resolve_workload(str(path)) == w


def test_qwen3_30b_a3b_decode_batch_8_reads_a_fraction_of_its_experts():
    """Qwen3-30B-A3B at batch 8: 8 tokens × top-8 = 64 pairs among 128 experts. Expected experts touched
    128·(1 − (15/16)^8) = 128·(1 − 2,562,890,625/4,294,967,296) = 51.62. One expert's gate weights are
    2048·768·2 = 3,145,728 bytes, so the gate reads 128·3,145,728·1,732,076,671/4,294,967,296
    = 1,732,076,671·3/32 = 162,382,187.906 bytes, rounded to 162,382,188 (of 402,653,184 for all 128)."""
    ops = ops_by_name(resolve_workload("decode", model="qwen3-30b-a3b", batch=8))
    exact = 128 * (1 - Fraction(15, 16) ** 8) * 2048 * 768 * 2
    assert exact == Fraction(1_732_076_671 * 3, 32)
    gate = ops["expert_gate_proj"]
    assert gate.weight_bytes == round(exact) == 162_382_188
    # 64 rows of x (64·2048·2 = 262,144 bytes) in, 64×768 (98,304 bytes) out.
    assert gate.bytes == 262_144 + 162_382_188 + 98_304 == 162_742_636
    assert gate.flops == 2 * 64 * 2048 * 768 == 201_326_592
    # The router: 2·8·2048·128 = 4,194,304 of gate and (5 + 8)·8·128 = 13,312 of softmax and top-8.
    assert ops["router"].flops == 4_194_304 + 13_312
