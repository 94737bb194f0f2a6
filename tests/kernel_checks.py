"""The kernel tests' one check: run into a NaN-poisoned output and compare with the torch reference; and their one
way to compile for a GPU on a CPU machine (``compile_for_hopper``)."""

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


def compile_for_hopper(code: str) -> None:
    """Run ``code`` (which compiles kernels for sm_90 and asserts on what the compiler made) in a fresh interpreter
    without TRITON_INTERPRET: tests/kernels/conftest.py turns the interpreter on for the whole process, and an
    interpreted kernel cannot be compiled for a GPU target. ``code`` exits 3, printing why, where this triton build
    cannot compile for sm_90 (no ptxas): the test is then skipped."""
    import os
    import subprocess
    import sys

    import pytest

    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout + proc.stderr
