"""The MLA counts against torch's own (issue 12): transformers' DeepseekV3ForCausalLM of a small config, run once
on the CPU under ``torch.utils.flop_counter.FlopCounterMode``, multiplies exactly the matmul FLOPs the engine
counts for the same prefill, and has exactly its parameters. transformers runs the expanded form (its decode
attends over the expanded cache, not the absorbed latent one), so prefill is what it can check; skipped where
transformers is not installed."""

from __future__ import annotations

import pytest

from rooflinectl.engine.count.transformer import step_ops
from rooflinectl.specs.load import validate
from rooflinectl.specs.model import Model
from rooflinectl.specs.scenario import resolve_workload

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

# H 64, 2 layers (the first dense), 4 heads, q_lora 32, kv_lora 16, d_nope 8, d_rope 4, d_v 8, MLP 128, 8 routed
# experts of width 32, top-2, 1 shared, vocabulary 100.
SIZES = {"hidden_size": 64, "num_layers": 2, "num_heads": 4, "intermediate_size": 128, "vocab_size": 100}
MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8}
MOE = {"num_experts": 8, "experts_per_token": 2, "expert_intermediate_size": 32, "num_shared_experts": 1,
       "first_dense_layers": 1}


def test_prefill_matmul_flops_and_parameters_match_transformers():
    from torch.utils.flop_counter import FlopCounterMode

    cfg = transformers.DeepseekV3Config(
        vocab_size=100, hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2,
        first_k_dense_replace=1, n_group=1, topk_group=1, q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8,
        qk_rope_head_dim=4, v_head_dim=8, max_position_embeddings=64, tie_word_embeddings=False,
        # eager attention materializes Q·Kᵀ and P·V as bmm; eager experts run one F.linear per expert (the
        # grouped_mm kernel is not counted by FlopCounterMode)
        attn_implementation="eager", experts_implementation="eager")
    torch.manual_seed(0)
    hf = transformers.DeepseekV3ForCausalLM(cfg).eval()
    ids = torch.randint(0, 100, (2, 6))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        hf(ids, logits_to_keep=1, use_cache=False)  # logits for the last token, as the engine's lm_head
    counts = {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}

    model = validate(Model, {"id": "t", "name": "t", "source": "test", **SIZES, "num_kv_heads": 4, "head_dim": 12,
                             "mla": MLA, "moe": MOE}, "test")
    # e_score_correction_bias is a buffer in transformers, so its parameters are the engine's exactly.
    assert sum(p.numel() for p in hf.parameters()) == model.parameter_count() == 109_472
    w = resolve_workload("prefill", model=model, batch=2, seq_len=6, attention="naive")  # type: ignore[arg-type]
    ops = step_ops(w)
    n, h, e = 12, 64, 8
    # Every linear and expert op is matmul alone; the router's matmul is its 2·N·H·E (the rest is softmax, top-k).
    mm = sum(op.flops * op.count for op in ops if op.kind in ("linear", "expert"))
    mm += sum(2 * n * h * e * op.count for op in ops if op.kind == "router")
    # By hand (N = 12 tokens): per layer q_a 2·12·64·32 + kv_a 2·12·64·20 + q_b 2·12·32·48 + kv_b 2·12·16·64 +
    # o 2·12·32·64 = 190,464, two layers 380,928; dense MLP 3·2·12·64·128 = 589,824; router 2·12·64·8 = 12,288;
    # experts 3·2·(12·2)·64·32 = 294,912; shared 3·2·12·64·32 = 147,456; lm_head 2·2·64·100 = 25,600.
    assert counts["aten.mm"] == mm == 380_928 + 589_824 + 12_288 + 294_912 + 147_456 + 25_600 == 1_451_008
    # Naive attention's qk and pv: the full 6×6 scores of 2 sequences × 4 heads, 2·(12 + 8) FLOPs each, 2 layers.
    bmm = sum(op.flops * op.count for op in ops if op.name in ("qk", "pv"))
    assert counts["aten.bmm"] == bmm == 2 * (2 * 4 * 36) * 2 * (12 + 8) == 23_040
