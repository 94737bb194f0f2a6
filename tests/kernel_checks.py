"""The kernel tests' one check: run into a NaN-poisoned output and compare with the torch reference."""

from __future__ import annotations

DTYPES = ["fp32", "fp16"]


def gen(seed: int = 0):
    import torch

    return torch.Generator().manual_seed(seed)


def check(kernel, inputs, dtype, config=None):
    import torch

    from rooflinectl.kernels.base import relative_error

    out = kernel.make_output(inputs)
    out.fill_(float("nan"))  # poison: an element the kernel does not write fails the check
    kernel.run(inputs, out, config)
    assert not torch.isnan(out).any(), "NaN in the output: an element was not written"
    err = relative_error(out, kernel.reference(inputs))
    assert err <= kernel.tolerance(dtype), f"relative error {err:.2e} > {kernel.tolerance(dtype):.0e}"
    return out
