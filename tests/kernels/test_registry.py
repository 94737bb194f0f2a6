"""The kernel registry: names, summaries, and no torch or triton at import.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import rooflinectl.kernels
from rooflinectl.errors import UserError
from rooflinectl.kernels.base import Kernel
from rooflinectl.kernels.registry import KERNELS, KernelInfo, get_kernel


def test_registry_names():
    # Every kernel module of the package (one that defines KERNEL) is registered, and nothing else: a new kernel
    # is its module and its entry, with no list here to grow.
    package = Path(rooflinectl.kernels.__file__).parent
    modules = [(p.stem, p) for p in package.glob("*.py")] + [(p.parent.name, p) for p in package.glob("*/__init__.py")]
    defined = {f"rooflinectl.kernels.{name}" for name, p in modules
               if re.search(r"^KERNEL = ", p.read_text(), re.MULTILINE)}
    assert {info.module for info in KERNELS.values()} == defined
    assert len(defined) == len(KERNELS) >= 7
    for name, info in KERNELS.items():
        assert isinstance(info, KernelInfo) and info.name == name and info.summary
        kernel = get_kernel(name)
        assert isinstance(kernel, Kernel) and kernel.name == name and kernel.summary == info.summary
        assert kernel.default_dtype in kernel.dtypes
        dims = len(kernel.shape_format.split("x"))
        assert all(len(s) == dims for s in kernel.default_shapes + kernel.interpret_shapes)


def test_registry_unknown_name_suggests():
    with pytest.raises(UserError, match="did you mean: fused_softmax"):
        get_kernel("softmax")
    with pytest.raises(UserError, match="unknown kernel 'zzz'"):
        get_kernel("zzz")



def test_registry_imports_no_torch_or_triton():
    code = (
        "import sys; import rooflinectl.kernels.registry as r; r.KERNELS['copy'];"
        "print(sorted(m for m in ('torch', 'triton') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
