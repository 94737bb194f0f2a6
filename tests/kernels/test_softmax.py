"""fused_softmax under the interpreter: every mode (rows, online, split), strides, masked scores, configs.

The interpreter runs each program as numpy code, so shapes stay small; bf16 is left out because the interpreter's
bf16 arithmetic is not the GPU's (the H200 checks bf16: benchmarks/tune_kernels.py). tests/kernels/conftest.py
sets TRITON_INTERPRET.
"""

from __future__ import annotations

import pytest
import torch
from kernel_checks import DTYPES
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel
from rooflinectl.kernels.softmax import SoftmaxConfig

# Rows past the edge and masked lanes compute -inf - -inf in numpy under the interpreter; their results are never
# stored, as on the GPU.
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 781])
def test_softmax_row_lengths(cols, dtype):
    k = get_kernel("fused_softmax")
    _check(k, k.make_inputs((5, cols), dtype, "cpu", _gen(cols)), dtype)



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("hints", [True, False])
def test_softmax_online_path(dtype, reverse, hints):
    # A small chunk forces the two-pass online normalizer over 12 chunks, the last one partial.
    k = get_kernel("fused_softmax")
    cfg = SoftmaxConfig("online", 64, num_warps=4, reverse=reverse, hints=hints)
    inputs = k.make_inputs((3, 741), dtype, "cpu", _gen(1))
    out = _check(k, inputs, dtype, cfg)
    assert k.last_launches()[0].function == "_softmax_online_kernel"
    # Both paths agree.
    assert relative_error(out, _check(k, inputs, dtype)) <= k.tolerance(dtype)



def test_softmax_mode_by_row_length():
    k = get_kernel("fused_softmax")
    assert k.config_for((4096, 16384), "bf16").mode == "rows"
    assert k.config_for((4096, 65536), "bf16").mode == "online"
    long = k.config_for((4096, 262144), "bf16")
    assert long.mode == "split" and long.chunks == 2  # 16 parts of 2 × 8,192
    assert k.config_for((4096, 262144), "fp32") == SoftmaxConfig("split", 8192, num_warps=4, chunks=1)
    # One row of 1,024 in 2 warps (16 elements a thread); shorter rows share a program.
    assert k.config_for((4096, 1024), "bf16") == SoftmaxConfig("rows", 1024, rows_per_program=1, num_warps=2)
    assert k.config_for((4096, 256), "bf16").rows_per_program == 4
    # No PDL under the interpreter.
    assert not any(k.config_for((8, c), "fp32").pdl for c in (100, 30000))



@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_run_picks_the_config_of_the_inputs_dtype(dtype):
    # fp32 and 16-bit rows take different online chunks (32,768 in 32 warps against 16,384 in 16).
    k = get_kernel("fused_softmax")
    _check(k, k.make_inputs((2, 20000), dtype, "cpu", _gen(7)), dtype)
    assert k.last_launches()[0].settings == k.config_for((2, 20000), dtype)
    assert k.last_launches()[0].settings.block == (32768 if dtype == "fp32" else 16384)



@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_softmax_interpret_shapes_cover_every_mode(dtype):
    # `measure --interpret` and test_interpret_shapes run these: each of the three kernels must be among them.
    k = get_kernel("fused_softmax")
    assert {k.config_for(s, dtype).mode for s in k.interpret_shapes} == {"rows", "online", "split"}



def test_softmax_split_parts_never_exceed_the_sms():
    # A row of 10M bf16 elements would be 611 parts of 2 × 8,192: the parts grow instead, one per SM at most.
    from rooflinectl.kernels.base import sm_count

    cfg = get_kernel("fused_softmax").config_for((2, 10_000_000), "bf16")
    assert cfg.mode == "split"
    assert -(-10_000_000 // (cfg.block * cfg.chunks)) <= sm_count() == 132
    k = get_kernel("fused_softmax")
    x = torch.zeros(1, 133 * 16)
    with pytest.raises(ValueError, match="at most 132 parts"):
        k.run({"x": x}, torch.empty_like(x), SoftmaxConfig("split", 16))



@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "block,chunks,hints",
    [(1024, 1, False), (128, 1, False), (128, 1, True), (64, 3, True), (64, 3, False)],
    ids=["one-part", "parts", "parts-hints", "parts-of-chunks-hints", "parts-of-chunks"],
)
def test_softmax_split_path(dtype, block, chunks, hints):
    # Under the interpreter the programs of a row run one after another: every part but the last stops waiting
    # after a few polls and reads its whole row (the fallback), the last finds all parts published and combines
    # them. Both paths write the same softmax.
    k = get_kernel("fused_softmax")
    cfg = SoftmaxConfig("split", block, num_warps=4, chunks=chunks, hints=hints)
    inputs = k.make_inputs((4, 741), dtype, "cpu", _gen(5))
    out = _check(k, inputs, dtype, cfg)
    launch = k.last_launches()[0]
    assert launch.function == "_softmax_split_kernel"
    assert launch.grid == (4 * -(-741 // (block * chunks)),) and launch.config["parts"] == -(-741 // (block * chunks))
    assert relative_error(out, _check(k, inputs, dtype)) <= k.tolerance(dtype)



@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_non_contiguous_rows(dtype):
    k = get_kernel("fused_softmax")
    wide = k.make_inputs((9, 300), dtype, "cpu", _gen(2))["x"]
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype)  # row stride 300, 257 columns
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype, SoftmaxConfig("online", 32, num_warps=4))
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype, SoftmaxConfig("split", 32, num_warps=4, chunks=2))
    tall = k.make_inputs((40, 6), dtype, "cpu", _gen(3))["x"]
    _check(k, {"x": tall.t()}, dtype)  # column stride 6



def test_softmax_masked_scores():
    # -inf entries (masked attention scores) are zeros of the softmax; an all -inf row is NaN, as in torch.
    k = get_kernel("fused_softmax")
    x = torch.randn(3, 100, generator=_gen(4))
    x[0, :50] = -float("inf")
    x[2] = -float("inf")
    split = [SoftmaxConfig("split", 16, num_warps=4, chunks=c, hints=c > 1) for c in (1, 2)]
    for cfg in (None, SoftmaxConfig("online", 16, num_warps=4, hints=True), *split):
        out = torch.empty_like(x)
        k.run({"x": x}, out, cfg)
        torch.testing.assert_close(out[:2], torch.softmax(x[:2], -1))
        assert torch.isnan(out[2]).all()
