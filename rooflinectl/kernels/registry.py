"""The measured kernels by name: the one place where a kernel is registered, named and summarized.

Adding a kernel: its module in this package (a ``Kernel`` subclass and ``KERNEL = TheKernel()``), an entry below,
its test under tests/kernels/ and its docs. Importing this module imports no torch and no triton: ``get_kernel``
imports the one kernel module asked for, and only then.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import UserError, closest


@dataclass(frozen=True)
class KernelInfo:
    """What ``measure --list`` shows of a kernel without importing it, and where its ``KERNEL`` object lives."""

    name: str
    summary: str
    module: str


_INFOS = (
    KernelInfo(
        "fused_softmax",
        "row softmax in fp32: whole rows on chip, online normalizer, or rows split across programs",
        "rooflinectl.kernels.softmax",
    ),
    KernelInfo("copy", "device-to-device copy: the bandwidth probe", "rooflinectl.kernels.copy"),
    KernelInfo(
        "matmul",
        "C = A·B with fp32 accumulation (tf32 for fp32): the Triton compute probe",
        "rooflinectl.kernels.matmul",
    ),
    KernelInfo(
        "rmsnorm_linear",
        "y = RMSNorm(x)·Wᵀ fused: the normalized activations never reach HBM",
        "rooflinectl.kernels.rmsnorm_linear",
    ),
    KernelInfo(
        "flash_attention",
        "prefill attention, causal, GQA: online softmax over K/V blocks, the scores never reach HBM",
        "rooflinectl.kernels.flash_attention",
    ),
    KernelInfo(
        "flash_decoding",
        "one query token against a KV cache: positions split across programs, a GQA group per program",
        "rooflinectl.kernels.flash_decoding",
    ),
    KernelInfo(
        "flash_decoding_paged",
        "flash_decoding over a paged KV cache: pages read through a block table",
        "rooflinectl.kernels.paged_decoding",
    ),
    KernelInfo(
        "naive_attention",
        "attention in three kernels, QKᵀ scores written to HBM, softmax, P·V: what flash avoids",
        "rooflinectl.kernels.naive_attention",
    ),
)

KERNELS: dict[str, KernelInfo] = {info.name: info for info in _INFOS}


def info_for_module(module: str) -> KernelInfo:
    """The entry of the kernel that lives in ``module`` (how a Kernel finds its own name and summary)."""
    for info in _INFOS:
        if info.module == module:
            return info
    raise LookupError(f"no kernel is registered from the module {module}")


def get_kernel(name: str) -> Any:
    """The kernel registered as ``name`` (its module imported now), a ``base.Kernel``; UserError naming the closest
    names if unknown. Typed ``Any``, not ``Kernel``: a Kernel reads its name and summary from this module, and this
    module must not import base back (no import cycle); callers annotate what they get."""
    info = KERNELS.get(name)
    if info is None:
        raise UserError(f"unknown kernel '{name}'{closest(name, KERNELS)}; known: {', '.join(KERNELS)}")
    return importlib.import_module(info.module).KERNEL
