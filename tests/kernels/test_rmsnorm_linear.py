"""rmsnorm_linear under the interpreter: gemv and tile kernels, split K, bias, the gain, configs.

The interpreter runs each program as numpy code, so shapes stay small; bf16 is left out because the interpreter's
bf16 arithmetic is not the GPU's (the H200 checks bf16: benchmarks/tune_kernels.py). tests/kernels/conftest.py
sets TRITON_INTERPRET.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from kernel_checks import DTYPES
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, RMSNormLinearConfig

# Rows past the edge and masked lanes compute -inf - -inf in numpy under the interpreter; their results are never
# stored, as on the GPU.
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize(
    "shape, cfg",
    [
        ((1, 300, 33), None),  # M = 1, K not a multiple of the K step, N odd
        (
            (1, 1000, 33),
            RMSNormLinearConfig("gemv", 16, 64, 128, 4, 4, split_k=4),
        ),  # split K, partial last split
        ((20, 512, 70), RMSNormLinearConfig("gemv", 32, 64, 64, 4, 4, split_k=2)),
        ((70, 200, 33), None),  # the tile kernel
        ((70, 1000, 20), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, split_k=4)),
        ((130, 256, 40), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, split_k=2, group_m=2)),
    ],
)
def test_rmsnorm_linear(shape, cfg, with_bias, dtype):
    k = RMSNormLinear(with_bias=with_bias)
    inputs = k.make_inputs(shape, dtype, "cpu", _gen(6))
    cfg = cfg or k.config_for(shape, dtype)
    # The gemv's sum of squares from its own loop, from its own load inside the matmul loop, from the dot's x tile;
    # its tiles through pointers, and through tensor descriptors where the rows are a multiple of 16 bytes.
    # (host_desc: the descriptors made on the host rather than by each program.)
    tma = [False, True] if shape[1] * inputs["x"].element_size() % 16 == 0 else [False]
    variants = [replace(cfg, ss=ss, tma=t, host_desc=False) for ss in ("loop", "inloop", "dot") for t in tma] \
        + ([replace(cfg, ss="dot", tma=True, host_desc=True)] if True in tma else []) \
        if cfg.kind == "gemv" else [cfg]
    for c in variants:
        _check(k, inputs, dtype, c)
        _check(k, inputs, dtype, c)  # again: the split-K counters were reset by the last program
        if c.split_k > 1:
            assert int(k._counters["cpu"].abs().sum()) == 0



def test_rmsnorm_linear_gain_matters():
    # The gain is folded into W_g at load time; a run that ignored it would be far off the reference.
    k = get_kernel("rmsnorm_linear")
    inputs = k.make_inputs((2, 64, 24), "fp32", "cpu", _gen(7))
    out = _check(k, inputs, "fp32")
    no_gain = (inputs["x"] * torch.rsqrt(inputs["x"].pow(2).mean(-1, keepdim=True) + k.eps)) @ inputs["w"].t()
    assert relative_error(out, no_gain) > 0.1



def test_rmsnorm_linear_config_by_shape():
    k = get_kernel("rmsnorm_linear")
    decode = k.config_for((1, 4096, 4096), "bf16")
    assert decode.kind == "gemv" and decode.split_k > 1  # 64 tiles of W rows do not fill 132 SMs
    assert k.config_for((8192, 4096, 4096), "bf16").kind == "tile"


def test_rmsnorm_linear_candidates_fit_the_gpus_shared_memory():
    # 8192×4096×4096 bf16 takes the big tile (128×256×64, 4 stages: 4 × 384 × 64 × 2 = 192 KiB); it fits an H200
    # (227 KiB a block) but not an A100 (163 KiB), whose pick has 3 stages (144 KiB).
    from rooflinectl.kernels.rmsnorm_linear.configs import _smem_estimate
    from rooflinectl.specs.hardware import load_gpu

    k = get_kernel("rmsnorm_linear")
    shape = (8192, 4096, 4096)
    four = k.config_for(shape, "bf16")
    assert four.num_stages == 4 and _smem_estimate(four, "bf16") == 192 * 1024
    assert four in k.candidates(shape, "bf16") and four in k.candidates(shape, "bf16", load_gpu("h200"))
    assert replace(four, num_stages=3) in k.candidates(shape, "bf16")
    assert four not in k.candidates(shape, "bf16", load_gpu("a100"))
    # An A100 has no TMA: its pick (first) is the non-persistent kernel through pointers, 3 stages.
    a100 = k.candidates(shape, "bf16", load_gpu("a100"))
    assert a100[0] == replace(four, num_stages=3, tma=False, host_desc=False, persistent=False,
                              flatten=False, subtile=False)
    assert not any(c.tma for c in a100)
