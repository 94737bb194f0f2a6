"""The attention kernels' baselines: torch's SDPA with each fused backend forced, and the sentence naming the
backend torch picks for the torch-eager baseline. On the CPU a backend that cannot run the inputs raises (the
harness then reports that baseline's error instead of a time); one that runs is checked against the reference."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.flash_attention import KERNEL as FLASH
from rooflinectl.kernels.flash_attention import SDPA_BACKENDS
from rooflinectl.kernels.flash_decoding import KERNEL as DECODE
from rooflinectl.records.kernel import BASELINE_LABELS

PICKED = "torch eager: SDPA's backend as torch picks it for these inputs: "


@pytest.mark.parametrize("kernel, shape", [(FLASH, (1, 4, 2, 37, 16)), (DECODE, (2, 4, 2, 40, 16))],
                         ids=["flash_attention", "flash_decoding"])
def test_each_sdpa_backend_is_a_baseline_that_runs_or_says_why_not(kernel, shape):
    assert set(kernel.extra_baselines()) == set(SDPA_BACKENDS) <= set(BASELINE_LABELS)
    assert set(kernel.baselines()) == {"torch", "compile", *SDPA_BACKENDS}
    inputs = kernel.make_inputs(shape, "fp32", "cpu", torch.Generator().manual_seed(3))
    ref = kernel.reference(inputs)
    ran = 0
    for name, fn in kernel.extra_baselines().items():
        try:
            out = fn(inputs)
        except RuntimeError as err:  # the backend cannot run these inputs here: a one-line reason, not a time
            assert str(err).strip(), name
            continue
        ran += 1
        assert relative_error(out, ref) <= kernel.tolerance("fp32"), name
    assert ran >= 1  # the CPU runs SDPA's flash backend in fp32 (torch's CPU FlashAttention)
    note = kernel.baseline_note(inputs)
    assert note.startswith(PICKED) and note.removeprefix(PICKED) in SDPBackend.__members__


def test_kernels_without_sdpa_offer_no_more_baselines():
    from rooflinectl.kernels.softmax import KERNEL as SOFTMAX

    assert SOFTMAX.extra_baselines() == {} and SOFTMAX.baseline_note({}) is None
    assert set(SOFTMAX.baselines()) == {"torch", "compile"}
