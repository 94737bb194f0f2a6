"""calibrate's vector probe (kernels/fma.py) in Triton's interpreter: its result against the chains' closed form in
float64, and its FLOP count by hand."""

from __future__ import annotations

import pytest
import torch

from rooflinectl.kernels.fma import CHAINS, fma, fma_flops, fma_reference


def test_the_fma_chains_match_their_closed_form():
    # 3,000 elements (not a multiple of the 1,024-element block), 8 FMAs a chain so the interpreter is quick.
    x = torch.randn(3000, generator=torch.Generator().manual_seed(2)) * 10
    y = torch.full_like(x, float("nan"))
    fma(x, y, iters=8)
    ref = fma_reference(x, iters=8)
    # fp32 rounding of 8 dependent FMAs: a few units of 2^-24 relative each; 1e-6 is ten times that.
    assert torch.isfinite(y).all() and ((y.double() - ref).norm() / ref.norm()).item() < 1e-6
    wrong = fma_reference(x, iters=7)  # one FMA fewer is caught
    assert ((y.double() - wrong).norm() / wrong.norm()).item() > 1e-4


def test_fma_flops_by_hand():
    # 2 chains × 256 FMAs × 2 FLOPs = 1,024 FLOPs an element; 2^24 elements read and written in fp32: 1,024 FLOP/B.
    assert CHAINS == 2 and fma_flops(2**24) == 1024 * 2**24
    assert fma_flops(2**24) / (8 * 2**24) == 128


def test_fma_refuses_what_it_does_not_run():
    with pytest.raises(ValueError, match="fma: x"):
        fma(torch.zeros(4, dtype=torch.float16), torch.zeros(4, dtype=torch.float16))


def test_calibrates_vector_probe_checks_the_kernel_then_divides_its_flops_by_the_time():
    """measure.ceilings.probe_vector in the interpreter (4,096 elements off the GPU), with a fake timer of 2 ms:
    2·2·256·4,096 = 4,194,304 FLOPs / 2 ms = 0.002097152 TFLOP/s, and the timer asked for the probes' windows."""
    from rooflinectl.measure import ceilings

    asked = []

    def bench(fn, warmup_ms, rep_ms):
        fn()
        asked.append((warmup_ms, rep_ms))
        return 2e-3, 1.9e-3, 2.1e-3

    tflops, probe = ceilings.probe_vector(bench, timer="events", device="cpu")
    assert tflops == pytest.approx(2 * 2 * 256 * 4096 / 2e-3 / 1e12, rel=1e-12) == pytest.approx(0.002097152)
    assert probe.timer == "events" and asked == [(ceilings.PROBE_WARMUP_MS, ceilings.PROBE_REP_MS)]
