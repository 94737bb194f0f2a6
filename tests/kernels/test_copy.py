"""copy under the interpreter: odd lengths, exact.

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

from rooflinectl.kernels.registry import get_kernel

# Rows past the edge and masked lanes compute -inf - -inf in numpy under the interpreter; their results are never
# stored, as on the GPU.
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_odd_lengths(dtype):
    k = get_kernel("copy")
    for n in (1, 4095, 5003):
        inputs = k.make_inputs((n,), dtype, "cpu", _gen(n))
        out = _check(k, inputs, dtype)
        assert torch.equal(out, inputs["x"])
