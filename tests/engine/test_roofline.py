"""Placement on the roofline: properties that must hold for any op (hypothesis) and hand-checked cases."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rooflinectl.engine.count.op import Op
from rooflinectl.engine.count.primitives import matmul_op
from rooflinectl.engine.roofline import analyze, batch_at_ridge, measured_share, place, sweep
from rooflinectl.errors import UserError
from rooflinectl.specs.hardware import Roofs, load_gpu
from rooflinectl.specs.scenario import resolve_workload

ROOFS = Roofs(gpu_id="test", label="spec", bandwidth_gbps=2000.0, tensor_tflops={"bf16": 300.0},
              vector_tflops={"fp32": 20.0})


def op_with(flops: float, nbytes: float) -> Op:
    return Op(name="x", kind="matmul", flops=flops, bytes=nbytes, unit="tensor", dtype="bf16", reads="", writes="", computes="")


positive = st.floats(min_value=1.0, max_value=1e15, allow_nan=False, allow_infinity=False)


@given(flops=positive, nbytes=positive)
def test_attainable_is_under_both_roofs_and_time_is_the_larger_term(flops, nbytes):
    p = place(op_with(flops, nbytes), ROOFS)
    assert p.attainable_flops <= ROOFS.peak("bf16", "tensor") * (1 + 1e-12)
    assert p.attainable_flops <= p.intensity * ROOFS.bandwidth * (1 + 1e-12)
    assert p.time_s == max(flops / 300e12, nbytes / 2000e9)
    assert p.bound == ("compute" if flops / 300e12 > nbytes / 2000e9 else "memory")
    # The attainable rate is exactly the op's FLOPs over its predicted time.
    assert math.isclose(p.attainable_flops, flops / p.time_s, rel_tol=1e-9)


@given(a=positive, b=positive, nbytes=positive)
def test_attainable_rises_with_intensity(a, b, nbytes):
    lo, hi = sorted((a, b))
    assert place(op_with(lo, nbytes), ROOFS).attainable_flops <= place(op_with(hi, nbytes), ROOFS).attainable_flops


def test_continuous_at_the_ridge():
    ridge = ROOFS.ridge("bf16")
    assert ridge == 300e12 / 2000e9 == 150.0
    below = place(op_with(ridge * (1 - 1e-9) * 1e6, 1e6), ROOFS).attainable_flops
    above = place(op_with(ridge * (1 + 1e-9) * 1e6, 1e6), ROOFS).attainable_flops
    assert math.isclose(below, above, rel_tol=1e-6)
    assert math.isclose(below, 300e12, rel_tol=1e-6)


def test_h100_decode_batch1_q_proj_is_memory_bound_at_intensity_one():
    a = analyze(resolve_workload("decode", batch=1), load_gpu("h100"))
    q = a.placement("q_proj")
    assert q.bound == "memory"
    assert q.intensity == pytest.approx(1.0, rel=1e-3)  # 2·k·n FLOPs over k·n·2 bytes of weight
    assert q.time_s == pytest.approx(33_570_816 / 3350e9)
    assert a.ridge == pytest.approx(989.4e12 / 3350e9)
    assert sum(p.share for p in a.placements) == pytest.approx(1.0)


def test_prefill_linear_layers_are_compute_bound():
    a = analyze(resolve_workload("prefill", seq_len=4096, batch=4), load_gpu("h100"))
    assert a.placement("gate_proj").bound == "compute"
    assert a.totals.tokens_per_s == pytest.approx(4 * 4096 / a.totals.time_s)


def test_batching_raises_decode_intensity_until_the_ridge():
    results = sweep(resolve_workload("decode"), load_gpu("h100"), "batch", [1, 8, 64, 512])
    intensities = [r.placement("gate_proj").intensity for r in results]
    assert intensities == sorted(intensities)
    assert [r.placement("gate_proj").bound for r in results] == ["memory", "memory", "memory", "compute"]
    # Attention reads each sequence's own KV cache: its intensity does not move with batch.
    attn = [r.placement("attention").intensity for r in results]
    assert max(attn) == pytest.approx(min(attn))


def test_batch_at_ridge_solves_the_intensity_equation():
    k, n = 4096, 14336
    m = batch_at_ridge(k * n, k + n, "bf16", 295.0)
    op = matmul_op("x", 1, k, n, "bf16")
    # At m rows the matmul's intensity equals the ridge.
    intensity = 2 * m * k * n / ((m * k + k * n + m * n) * 2)
    assert intensity == pytest.approx(295.0)
    assert op.intensity < 295
    assert batch_at_ridge(64, 64, "bf16", 1e6) is None


def test_a_dtype_without_a_peak_is_a_user_error():
    w = resolve_workload("decode", dtype="int8")
    gpu = load_gpu("h100")
    assert analyze(w, gpu).peak_flops == 1978.9e12
    no_fp8 = gpu.model_copy(update={"compute": gpu.compute.model_copy(update={"tensor_tflops": {"bf16": 1.0}})})
    with pytest.raises(UserError, match="no tensor-core peak for fp8"):
        analyze(resolve_workload("decode", dtype="fp8"), no_fp8)


def test_memory_fit_and_largest_batch():
    a = analyze(resolve_workload("decode", model="llama-3-70b", context=8192), load_gpu("h100"))
    # 70.55e9 parameters × 2 bytes = 141 GB > 80 GiB: the weights alone do not fit on one H100.
    assert not a.totals.fits
    assert a.totals.max_batch == 0
    b = analyze(resolve_workload("decode", batch=1, context=4096), load_gpu("h100"))
    per_seq = 32 * 2 * 1024 * 4096 * 2
    weights = 8_030_261_248 * 2
    assert b.totals.max_batch == (80 * 2**30 - weights) // per_seq
    assert b.totals.memory_bytes == weights + per_seq


# --- a measured time's share of its roof -------------------------------------------------------------------------


def test_measured_share_of_a_compute_bound_matmul():
    # matmul 8192³ bf16 on the H100 SXM: 2 × 8192³ = 1.0995e12 FLOPs at 989.4 TFLOP/s -> 1.11128 ms predicted,
    # compute-bound (3 × 8192² × 2 bytes take 0.12 ms at 3.35 TB/s). Measured 1.5 ms -> 74.09% of the roof.
    roofs = load_gpu("h100").roofs()
    mm = matmul_op("mm", 8192, 8192, 8192, "bf16")
    share = measured_share(mm, roofs, 1.5e-3)
    assert share.placement.bound == "compute"
    assert share.predicted_time_s == pytest.approx(2 * 8192**3 / 989.4e12)
    assert share.fraction == pytest.approx(0.740854, rel=1e-5)
    assert share.attainable_flops == pytest.approx(989.4e12)
    assert share.achieved_flops == pytest.approx(2 * 8192**3 / 1.5e-3)
    assert share.achieved_tflops == pytest.approx(share.achieved_flops / 1e12)
    assert share.achieved_gbps == pytest.approx(3 * 8192**2 * 2 / 1.5e-3 / 1e9)


def test_measured_share_of_a_memory_bound_op():
    # 4 194 304 bytes and 5 242 880 FLOPs in 2 µs: 2097.152 GB/s and 2.62144 TFLOP/s; at 3.35 TB/s the bytes take
    # 1.25203 µs -> 62.60% of the roof.
    op = Op(name="softmax", kind="elementwise", flops=5_242_880, bytes=4_194_304, unit="vector", dtype="fp32",
            reads="", writes="", computes="")
    share = measured_share(op, load_gpu("h100").roofs(), 2.0e-6)
    assert share.placement.bound == "memory"
    assert share.predicted_time_s == pytest.approx(4_194_304 / 3.35e12)
    assert share.fraction == pytest.approx(0.626015, rel=1e-5)
    assert share.achieved_gbps == pytest.approx(2097.152)
    assert share.achieved_tflops == pytest.approx(2.62144)


@given(flops=positive, nbytes=positive, time_s=st.floats(min_value=1e-9, max_value=10.0))
def test_measured_fraction_is_achieved_over_attainable(flops, nbytes, time_s):
    share = measured_share(op_with(flops, nbytes), ROOFS, time_s)
    assert share.fraction == pytest.approx(share.achieved_flops / share.attainable_flops, rel=1e-9)


def test_measured_share_needs_a_positive_time():
    with pytest.raises(ValueError):
        measured_share(op_with(1.0, 1.0), ROOFS, 0.0)


def test_sweep_changes_one_size_through_with_size():
    gpu = load_gpu("h100")
    decode = resolve_workload("decode", context=1024)
    runs = sweep(decode, gpu, "context", [512, 2048])
    assert [a.workload for a in runs] == [decode.with_size("context", 512), decode.with_size("context", 2048)]
    prefill = resolve_workload("prefill", seq_len=256)
    assert [a.workload.length for a in sweep(prefill, gpu, "seq_len", [128, 512])] == [128, 512]


@pytest.mark.parametrize(("phase", "field"), [("decode", "seq_len"), ("prefill", "context")])
def test_sweep_refuses_a_size_the_phase_does_not_have_even_with_no_values(phase, field):
    with pytest.raises(UserError):
        sweep(resolve_workload(phase), load_gpu("h100"), field, [])


def test_sweep_refuses_a_non_positive_size():
    with pytest.raises(UserError, match="positive integer"):
        sweep(resolve_workload("decode"), load_gpu("h100"), "batch", [8, 0])


def test_achieved_rates_need_no_roof():
    """4096×4096 bf16 softmax: 2·4096·4096·2 B = 67,108,864 B and 5·4096·4096 = 83,886,080 FLOPs in 20 µs give
    3,355.4432 GB/s and 4.194304 TFLOP/s, with or without a spec."""
    from rooflinectl.engine.count.primitives import softmax_op
    from rooflinectl.engine.roofline import achieved_rates
    from rooflinectl.measure.harness import shares

    op = softmax_op("softmax", 4096, 4096, "bf16")
    gbps, tflops = achieved_rates(op, 20e-6)
    assert gbps == pytest.approx(3355.4432)
    assert tflops == pytest.approx(4.194304)
    no_spec = shares(op, None, None, 20e-6)
    assert (no_spec.achieved_gbps, no_spec.achieved_tflops) == (gbps, tflops)
    assert no_spec.spec_roof_pct is None


# --- issue 18: no step beyond what any GPU could run, no infinite or absurd total ---------------------------------


def test_a_step_beyond_any_gpu_is_refused_with_one_line(tmp_path):
    """Every size inside its range, but the product absurd. Attention alone, by hand: batch 2^20, 2^14 heads,
    a causal prompt of S = 2^30 (S·(S+1)/2 ≈ 2^59 scores per head), 4·d + 5 = 4·64 + 5 = 261 FLOPs per score,
    2^14 layers: 2^20 · 2^14 · 2^59 · 261 · 2^14 = 2^107 · 261 ≈ 4.2e34 FLOPs, beyond 1e30. (The linear layers
    add 2 · 2^50 tokens · 2^44 weights per layer · 2^14 layers = 2^109 ≈ 6.5e32: 4.3e34 in all.)"""
    import json

    from rooflinectl.engine.roofline import MAX_STEP_COUNT

    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 2**20, "num_hidden_layers": 2**14,
                                "num_attention_heads": 2**14, "head_dim": 64, "intermediate_size": 2**22,
                                "vocab_size": 1024}))
    w = resolve_workload("prefill", model=str(path), batch=2**20, seq_len=2**30)
    attention_flops = 2**20 * 2**14 * (2**30 * (2**30 + 1) // 2) * (4 * 64 + 5) * 2**14
    assert 4.2e34 < attention_flops < 4.3e34 and MAX_STEP_COUNT == 1e30
    with pytest.raises(UserError, match=r"huge prefill, batch 1048576, seq_len 1073741824.*counts 4\.3e\+34 FLOPs, "
                                        r"beyond the 1e\+30"):
        analyze(w, load_gpu("h100"))


def test_the_largest_sizes_in_range_give_finite_totals(tmp_path):
    """A decode step of the largest model every range allows, at the largest batch and context: the counts stay
    Python ints until divided, every total is a finite float, and the step is under the bound (hand: the MLP's
    3 matmuls, 2 · 2^20 tokens · 2^20 · 2^22 · 3 · 2^14 layers ≈ 1.9e28 FLOPs)."""
    import json

    path = tmp_path / "largest.json"
    path.write_text(json.dumps({"model_type": "llama", "hidden_size": 2**20, "num_hidden_layers": 2**14,
                                "num_attention_heads": 2**14, "num_key_value_heads": 2**14, "head_dim": 2**6,
                                "intermediate_size": 2**22, "vocab_size": 2**24}))
    a = analyze(resolve_workload("decode", model=str(path), batch=2**20, context=2**30), load_gpu("h100"))
    t = a.totals
    assert all(math.isfinite(x) and x > 0 for x in (t.flops, t.bytes, t.time_s, t.tokens_per_s, t.weight_bytes,
                                                     t.kv_cache_bytes, t.memory_bytes))
    assert 2 * 2**20 * 2**20 * 2**22 * 3 * 2**14 < t.flops < 1e30
    assert (t.fits, t.max_batch) == (False, 0)


def test_times_are_added_left_to_right_on_every_python():
    # 1e16 + 1 rounds to 1e16 in float64: a left fold (Python 3.10's and 3.11's sum) gives 0 here, 3.12's
    # compensated sum 1. The engine's totals, compared to the bit with its fast decode series, add the first way.
    from rooflinectl.engine.placement import add_times

    assert add_times([1e16, 1.0, -1e16]) == 0.0
    assert add_times([]) == 0 and add_times(iter([0.5, 0.25])) == 0.75
