"""explore/describe.py: the notes and hints on one op, by its kind, phase and bound."""

from __future__ import annotations

from explore_helpers import (
    H100,
)

from rooflinectl.engine.roofline import analyze
from rooflinectl.explore.describe import describe
from rooflinectl.specs.scenario import resolve_workload


def test_describe_gives_the_rule_for_each_kind_of_op():
    prefill_naive = analyze(resolve_workload("prefill", attention="naive"), H100)
    decode = analyze(resolve_workload("decode"), H100)
    text = {name: "\n".join(describe(a.placement(name), a)) for a, name in
            ((prefill_naive, "softmax"), (prefill_naive, "gate_proj"), (decode, "attention"), (decode, "act"))}
    assert "FlashAttention (key a)" in text["softmax"]
    assert "compute-bound" in text["gate_proj"] and "fp8 peaks at 1,979 TFLOP/s" in text["gate_proj"]
    assert "each sequence reads its own KV cache" in text["attention"]
    assert "--fuse gate_up + act" in text["act"]


def test_hints_follow_the_ops_kind_not_its_name():
    """An op renamed keeps its advice: naive attention's softmax, a projection in decode, the flash kernel."""
    from dataclasses import replace

    from rooflinectl.explore.describe import hints

    prefill_naive = analyze(resolve_workload("prefill", attention="naive"), H100)
    decode = analyze(resolve_workload("decode"), H100)
    for a, name, fragment in ((prefill_naive, "softmax", "FlashAttention (key a)"),
                              (decode, "down_proj", "batching (key b)"),
                              (decode, "attention", "each sequence reads its own KV cache")):
        p = a.placement(name)
        renamed = replace(p, op=replace(p.op, name="renamed"))
        assert any(fragment in h for h in hints(renamed, a)), (name, hints(renamed, a))
        assert hints(renamed, a) == hints(p, a)


def test_moe_ops_get_advice_for_what_they_are():
    """Mixture of experts: the expert matmuls are told that batching touches more experts, mlp_norm is not offered
    norm_linear (it does not apply in an MoE layer) and the residual folds into moe_combine."""
    from rooflinectl.specs.hardware import load_gpu

    a = analyze(resolve_workload("decode", model="mixtral-8x7b", batch=8), load_gpu("h200"))
    expert = " ".join(describe(a.placement("expert_gate_proj"), a))
    assert "a larger batch also touches more experts, until 99% of the 8 are at batch 17" in expert
    assert "elementwise" not in expert
    assert "norm_linear" not in " ".join(describe(a.placement("mlp_norm"), a))
    assert "epilogue of moe_combine" in " ".join(describe(a.placement("mlp_residual"), a))
    assert "the matmul of expert_gate_proj and expert_up_proj" in " ".join(describe(a.placement("expert_act"), a))
    assert "H×E gate" in " ".join(describe(a.placement("router"), a))


def test_the_first_line_names_the_ops_kind_and_what_it_fuses():
    """The op panel's heading says what the op is, from the engine's Op: its kind, and the kinds fused into it."""
    decode = analyze(resolve_workload("decode", fused=["norm_linear", "qkv"]), H100)
    names = [p.name for p in decode.placements]
    fused = next(n for n in names if n.startswith("attn_norm+"))
    assert describe(decode.placement(fused), decode)[0].startswith(f"{fused} ×32 (linear+norm): ")
    assert describe(decode.placement("attention"), decode)[0].startswith("attention ×32 (attention): ")
    assert describe(decode.placement("lm_head"), decode)[0].startswith("lm_head (linear): ")


def test_fusion_advice_names_the_models_own_norm_activation_and_projections():
    """The --fuse advice in the model's words: Gemma 3's GELU-tanh gate, gpt-oss's clamped SwiGLU, MLA's first
    projections; decode attention over MLA's latent cache gets no 'fewer KV heads' advice (one latent serves all
    heads)."""
    from rooflinectl.engine.roofline import analyze
    from rooflinectl.explore.describe import fusion_for, hints
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    def advice(model: str) -> tuple[dict[str, str | None], dict[str, list[str]]]:
        a = analyze(resolve_workload("decode", model=model, batch=4, context=2048), load_gpu("h100"))
        return ({p.name: fusion_for(p, a) for p in a.placements},
                {p.name: hints(p, a) for p in a.placements if p.op.kind == "attention"})

    fuse, _ = advice("gemma-3-27b")
    assert fuse["act"] == "gate_up + act (GELU_tanh(gate)·up in the epilogue of the matmul of gate_proj and up_proj)"
    # Gemma's post norms: the residual add goes in the norm's epilogue; the norm itself is the host, not folded.
    assert fuse["attn_residual"] == "residual (the add in the epilogue of post_attn_norm)"
    assert fuse["post_attn_norm"] is None and fuse["q_proj"] is None
    fuse, _ = advice("gpt-oss-120b")
    assert "(clamp(up)+1)·g·σ(1.702g) in the epilogue" in str(fuse["expert_act"])
    fuse, attention = advice("deepseek-v3")
    assert fuse["attn_norm"] == "norm_linear (RMSNorm in the prologue of q_a_proj and kv_a_proj_with_mqa)"
    # On the H100 (ridge 295 FLOP/byte) the latent attention, about 240 FLOP/byte, is memory-bound: advised.
    assert any("batching does not help" in h for h in attention["latent_attention"])
    assert not any("fewer KV heads" in h for hs in attention.values() for h in hs)
    _, attention = advice("llama-3-8b")
    assert any("fewer KV heads" in h for h in attention["attention"])
