"""The calibration probes: the documented grid's cases (each case's tensors moving its engine op's bytes, the
held-out model's shapes left out), and probe_samples' structure on the CPU with a tiny grid; no time asserted."""

from __future__ import annotations

import pytest

from rooflinectl.calibrate.probes import (
    DEFAULT_GRID,
    KIB,
    MEMORY_FAMILIES,
    ProbeGrid,
    probe_cases,
    probe_samples,
)
from rooflinectl.engine.count.primitives import matmul_op
from rooflinectl.measure.harness import Reporter


def test_the_default_grid_is_the_documented_one():
    cases = probe_cases(DEFAULT_GRID, "bf16")
    # 14 M × 7 (K, N) GEMMs, 5 × 4 decode and 3 × 2 prefill attentions, 6 runners × 9 sizes (module docstring).
    assert len(cases) == 14 * 7 + 5 * 4 + 3 * 2 + 6 * 9 == 178
    assert DEFAULT_GRID.gemm_m[0] == 1 and DEFAULT_GRID.gemm_m[-1] == 8192
    assert DEFAULT_GRID.memory_bytes[0] == 16 * KIB and DEFAULT_GRID.memory_bytes[-1] == 2**30
    # Qwen2.5 14B (H 5120, K/V 1024, I 13824) is held out: none of its projections' K×N is probed.
    qwen = {(5120, 5120), (5120, 1024), (5120, 13824), (13824, 5120), (5120, 152064)}
    assert not qwen & set(DEFAULT_GRID.gemm_kn)
    labels = [label for label, _ in cases]
    assert len(set(labels)) == len(labels)
    # Each case's tensors, read once and written once, are the bytes its engine op counts.
    for label, case in cases:
        assert case.bytes == case.op.bytes, label


def test_each_probe_carries_its_engine_op():
    cases = dict(probe_cases(DEFAULT_GRID, "bf16"))
    gemm = cases["linear 16x4096x14336"]
    assert gemm.op == matmul_op("linear", 16, 4096, 14336, "bf16")
    dec = cases["sdpa decode b16 L4096"]
    # 16 sequences × 32 heads × 4096 scores, 4·128 + 5 FLOPs each; Q and O 16×32×128, K and V 16×8×4096×128, bf16.
    assert dec.op.flops == 16 * 32 * 4096 * 517
    assert dec.op.bytes == 2 * (2 * 16 * 32 * 128 + 2 * 16 * 8 * 4096 * 128)
    pre = cases["sdpa prefill b1 S2048"]
    assert pre.params == {"causal": True} and pre.op.flops == 32 * (2048 * 2049 // 2) * 517
    for family in MEMORY_FAMILIES:
        big = cases[f"{family} 1 GiB"]
        # Whole rows, at most the size asked, plus RMSNorm's gain (4096 bf16 values: 8 KiB).
        assert 0.9 * 2**30 < big.op.bytes <= 2**30 + (8 * KIB if family == "rmsnorm" else 0), family


def test_probe_samples_on_the_cpu_with_a_tiny_grid():
    grid = ProbeGrid(gemm_m=(1, 3), gemm_kn=((64, 32),), decode_batch=(2,), decode_positions=(16,),
                     prefill_tokens=(8,), prefill_batch=(1,), memory_bytes=(16 * KIB,), vocab=64)
    calls = []

    def fake_time(fn):
        fn()
        calls.append(1)
        return 2e-6, 1e-6, 3e-6

    run = probe_samples("cpu", "fp32", Reporter(), grid=grid, time_fn=fake_time)
    assert [s.label for s in run.samples] == [label for label, _ in probe_cases(grid, "fp32")]
    assert len(run.samples) == 2 + 1 + 1 + len(MEMORY_FAMILIES) and len(calls) == len(run.samples) + 1
    assert {s.family for s in run.samples} == {"linear", "sdpa", *MEMORY_FAMILIES}
    assert all(s.op.count == 1 and s.median_s == 2e-6 and s.input_sets == 1 for s in run.samples)
    assert run.launch_floor_s == 2e-6 and run.timer == "cpu_wall" and run.skipped == []
    real = probe_samples("cpu", "fp32", Reporter(), grid=grid)  # the CPU's own clock: structure only
    assert all(s.p20_s <= s.median_s <= s.p80_s for s in real.samples) and real.launch_floor_s > 0


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_the_grid_builds_in_each_16_bit_type(dtype):
    assert all(c.dtype == dtype for _, c in probe_cases(DEFAULT_GRID, dtype))
