"""The int4 and fp4 tensor peaks (issue 12): where a chip has them, the dense figure, each derived here by hand
from the sources the hardware files cite; where it has none, no peak, so that nothing is placed under a roof the
chip lacks."""

from __future__ import annotations

import pytest

from rooflinectl.specs.hardware import load_gpu

# Dense INT4 tensor TOPS. A100 40/80 GB: NVIDIA A100 whitepaper (2020), Table 1: INT4 Tensor 1,248 | 2,496 TOPS
# (dense | sparse). RTX 4090: Ada GPU Architecture whitepaper v2.1, Appendix A: Peak INT4 Tensor 1,321.2 | 2,642.4.
# L4, L40S: no datasheet INT4 figure; Ada runs INT4 at twice INT8 (the RTX 4090 column; the L40 datasheet's
# INT8 362, INT4 724), so SMs × 4,096 dense INT4 ops/clk/SM × boost clock. A10G: no NVIDIA datasheet; the GA102
# rate of the A10 datasheet (INT4 500 | 1,000 TOPS at 72 SMs, 1.695 GHz = 72 × 4,096 × 1.695 GHz).
INT4_TOPS = {
    "a100-40gb": 1248,
    "a100-80gb": 1248,
    "rtx4090": 1321.2,
    "l4": 485,  # 58 × 4,096 × 2.04 GHz = 484.7, 2 × the dense INT8 242.5
    "l40s": 1465.7,  # 142 × 4,096 × 2.52 GHz = 1,465.7, 2 × the dense INT8 733
    "a10g": 560.3,  # 80 × 4,096 × 1.71 GHz = 560.3
}
# Dense FP4 tensor TFLOPS. B200: NVIDIA HGX B200 specifications, FP4 Tensor 18 PFLOPS with sparsity, halved.
# B300: NVIDIA HGX B300 per-GPU specifications, FP4 14 PFLOPS without sparsity (Blackwell Ultra's FP4 sparse rate,
# 18, is not twice its dense one).
# GB300: NVIDIA GB300 NVL72, FP4 1,080 PFLOPS dense for 72 GPUs. GB200: NVIDIA GB200 NVL72, FP4 1,440 PFLOPS with
# sparsity for 72 GPUs, halved.
# RTX 5090 and RTX PRO 6000 Blackwell: NVIDIA's 3,352 and 4,000 AI TOPS (FP4 with sparsity), halved.
# MI355X: 256 CUs x 16,384 MXFP4 FLOP/clk x 2.4 GHz, twice its FP8 rate (AMD: "up to 10 PFLOPS FP4", dense).
FP4_TFLOPS = {"b200": 9000, "b300": 14000, "gb300": 15000, "gb200": 10000, "rtx5090": 1676, "rtx-pro-6000": 2000,
              "mi355x": 10066.3}


@pytest.mark.parametrize("gpu, tops", INT4_TOPS.items())
def test_int4_peaks_are_the_dense_figures(gpu, tops):
    assert load_gpu(gpu).compute.tensor_tflops["int4"] == tops


def test_derived_int4_peaks_follow_from_sms_and_clock():
    """SMs × 4,096 dense INT4 ops per clock per SM × boost clock (Ampere GA102 and Ada, twice their INT8 2,048)."""
    for gpu in ("l4", "l40s", "a10g"):
        g = load_gpu(gpu)
        assert g.sm_count * 4096 * g.boost_clock_mhz * 1e6 / 1e12 == pytest.approx(INT4_TOPS[gpu], abs=0.5)  # L4: 484.6 vs 2 × 242.5
    # Ada's INT4 is twice its INT8 where both are given.
    for gpu in ("rtx4090", "l4", "l40s"):
        peaks = load_gpu(gpu).compute.tensor_tflops
        assert peaks["int4"] == pytest.approx(2 * peaks["int8"], abs=0.35)


def test_no_gpu_claims_an_int4_or_fp4_peak_it_lacks():
    """Hopper (H100, H200) and Blackwell (B200) list no INT4 tensor figure, Volta and CDNA3 (V100, MI300X) none
    either; FP4 tensor cores are Blackwell's and CDNA 4's (MI355X) among the bundled GPUs."""
    from rooflinectl.specs.hardware import list_gpus

    for g in list_gpus():
        peaks = g.compute.tensor_tflops
        assert ("int4" in peaks) == (g.id in INT4_TOPS), g.id
        assert ("fp4" in peaks) == (g.id in FP4_TFLOPS), g.id
    for gpu, tflops in FP4_TFLOPS.items():
        assert load_gpu(gpu).compute.tensor_tflops["fp4"] == tflops
