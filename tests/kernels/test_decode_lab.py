"""benchmarks/decode_lab.py, the lab copy of flash_decoding whose timings docs/attention.md quotes: every switch
that still computes attention (stage 4, the two-kernel path, the tile combine, K as rows, no tensor-core dots)
gives the float64 result under the interpreter, so that its timings are of correct kernels."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from kernel_checks import gen as _gen

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.flash_decoding import decode_reference, make_decode_inputs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from decode_lab import lab_decode  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytest.mark.parametrize(
    "switches",
    [{}, {"combine_tile": True}, {"k_rows": True}, {"two": True}, {"combine_tile": True, "no_dot": True},
     {"combine_tile": True, "peel": True}, {"combine_tile": True, "tma": True}],
)
@pytest.mark.parametrize(("heads", "kv_heads", "lengths", "d"), [(8, 2, [45, 1, 130], 16), (7, 1, [64, 65], 32)])
def test_lab_switches_compute_attention(switches, heads, kv_heads, lengths, d):
    x = make_decode_inputs(len(lengths), heads, kv_heads, lengths, d, "fp32", "cpu", _gen(0), l_max=max(lengths) + 7)
    for b, n in enumerate(lengths):  # past each sequence's end the cache is NaN: never read into the result
        x["k"][b, :, n:] = float("nan")
        x["v"][b, :, n:] = float("nan")
    ref = decode_reference(x["q"], x["k"], x["v"], x["lengths"])
    for splits, block_n in [(3, 16), (5, 32)]:
        out = torch.full_like(x["q"], float("nan"))
        lab_decode(x["q"], x["k"], x["v"], x["lengths"], out, splits, block_n, **switches)
        assert relative_error(out, ref) <= 5e-3


def test_lab_no_len_reads_every_position_of_the_cache():
    """``no_len`` takes every sequence as the cache's whole length (the lengths are not loaded): right only when
    they are all L_max, as in the timed shapes."""
    x = make_decode_inputs(2, 8, 2, [50, 50], 16, "fp32", "cpu", _gen(1))
    out = torch.full_like(x["q"], float("nan"))
    lab_decode(x["q"], x["k"], x["v"], x["lengths"], out, 3, 16, combine_tile=True, no_len=True)
    assert relative_error(out, decode_reference(x["q"], x["k"], x["v"], x["lengths"])) <= 5e-3
