"""The verdict decides from op kinds, never names; the flash comparison comes from the engine's result."""

from __future__ import annotations

import pytest

from rooflinectl.engine.roofline import analyze, is_linear, layer_linears, linear_summary
from rooflinectl.render.verdict import verdict
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload
from rooflinectl.units import decimal_bytes, duration

H100 = load_gpu("h100")


def test_linear_ops_are_told_by_kind_and_the_lm_head_by_per_model():
    a = analyze(resolve_workload("decode", model="llama-3-8b", batch=1, context=4096), H100)
    assert {p.name for p in a.placements if is_linear(p)} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"}
    assert {p.name for p in layer_linears(a)} == {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert {p.name for p in a.placements if p.op.per_model} == {"embed", "final_norm", "lm_head"}


def test_fused_projections_are_still_the_layers_linear_ops():
    a = analyze(resolve_workload("decode", model="llama-3-8b", batch=1, context=4096,
                                 fused=["qkv", "gate_up", "norm_linear", "act", "residual"]), H100)
    names = {p.name for p in layer_linears(a)}
    assert len(names) == 4 and all(p.op.kind == "linear" for p in layer_linears(a))
    assert "lm_head" not in names


def test_decode_linear_intensity_is_about_one_at_batch_one():
    # bf16: 2·m·k·n FLOPs over (k·n + m·(k + n))·2 bytes -> just under 1 FLOP/byte at m = 1.
    intensity, turn = linear_summary(analyze(resolve_workload("decode", model="llama-3-8b", batch=1,
                                                              context=4096), H100))
    assert 0.99 < intensity < 1.0
    assert turn is not None and turn > 1


def test_naive_prefill_carries_its_flash_alternative():
    naive = resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=4096, attention="naive")
    a = analyze(naive, H100)
    assert a.flash is not None
    assert a.flash == analyze(resolve_workload("prefill", model="llama-3-8b", batch=1, seq_len=4096,
                                               attention="flash"), H100)
    assert a.flash.totals.time_s < a.totals.time_s
    line = next(x for x in verdict(a) if x.startswith("Naive attention moves"))
    scores = sum(p.op.bytes * p.op.count for p in a.placements if p.name in ("qk", "softmax", "pv"))
    flash = a.flash.placement("attention")
    # Through the one formatter (units): three significant digits with their prefix, never "140.12 GB".
    assert f"moves {decimal_bytes(scores)} through HBM" in line
    assert f"moves {decimal_bytes(flash.op.bytes * flash.op.count)}:" in line
    assert f"{duration(a.flash.totals.time_s)} instead of {duration(a.totals.time_s)}" in line


@pytest.mark.parametrize(("phase", "size", "attention"), [
    ("prefill", {"seq_len": 512}, "flash"),
    ("decode", {"context": 512}, "naive"),
])
def test_no_flash_alternative_where_the_verdict_does_not_compare(phase, size, attention):
    a = analyze(resolve_workload(phase, model="llama-3-8b", attention=attention, **size), H100)
    assert a.flash is None
    assert not any(x.startswith("Naive attention moves") for x in verdict(a))


def test_mla_prefill_names_the_expanded_keys_and_values_and_the_latent_cache():
    """MLA's prefill reads per-head K and V that kv_b_proj expanded, not its cache: DeepSeek-V3 at 4,096 tokens
    reads 61 layers × 4,096 × (128·128 K_nope + 64 shared k_pe + 128·128 V) × 2 B, from a latent cache of
    61 × 4,096 × 576 × 2 B, 57 times less; decode reads the cache itself."""
    from rooflinectl.render.analysis import totals_lines
    from rooflinectl.render.verdict import kv_read_text

    a = analyze(resolve_workload("prefill", model="deepseek-v3", seq_len=4096), load_gpu("h200"))
    expanded, latent = 61 * 4096 * (128 * 128 + 64 + 128 * 128) * 2, 61 * 4096 * 576 * 2
    assert (expanded, latent) == (16_406_544_384, 287_834_112) and expanded // latent == 57
    assert a.totals.kv_cache_bytes == expanded
    assert kv_read_text(a, decimal_bytes) == \
        f"{decimal_bytes(expanded)} of K and V expanded from {decimal_bytes(latent)} of latent KV cache"
    assert "16.4 GB of K and V expanded from 288 MB of latent KV cache" in totals_lines(a)[1]
    d = analyze(resolve_workload("decode", model="deepseek-v3", context=4096), load_gpu("h200"))
    assert kv_read_text(d, decimal_bytes) == f"{decimal_bytes(latent)} of KV cache"


@pytest.mark.parametrize(("seqs", "said"), [
    (("16x1@100", "8x1@200"), "A mixed step: 24 sequences decode, in 2 groups of their own lengths, 24 tokens"),
    (("1x512@100", "1x256@10"), "A mixed step: 768 prompt tokens are computed, in 2 groups, 768 tokens"),
    (("16x1@100", "1x512"), "A mixed step: 16 sequences decode and 512 prompt tokens are computed beside them, "
                            "528 tokens"),
])
def test_a_mixed_step_says_what_it_holds(seqs, said):
    # Decodes alone had "24 sequences decode and 0 prompt tokens are computed beside them".
    from rooflinectl.specs.scenario import resolve_step
    from rooflinectl.specs.step import Seqs

    w = resolve_step(tuple(Seqs.parse(s) for s in seqs))
    text = " ".join(verdict(analyze(w, load_gpu("h100"))))
    assert said in text and "0 prompt tokens" not in text
