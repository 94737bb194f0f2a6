"""flash_attention, flash_decoding and naive_attention under the interpreter: odd shapes against float64.

Odd shapes: lengths not a multiple of any block, 1 and 7 query heads per KV head, a batch of different cache
lengths, splits past a sequence's end. bf16 is left out: the interpreter's bf16 tl.dot is not the GPU's (the H200
checks bf16: benchmarks/attention_gpu.py). tests/kernels/conftest.py sets TRITON_INTERPRET.
"""

from __future__ import annotations

import pytest
import torch
from kernel_checks import DTYPES
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.errors import UserError
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel

pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning",
    "ignore:overflow encountered:RuntimeWarning",
)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1, 16), (2, 7, 1, 37, 32), (1, 4, 2, 70, 16), (1, 2, 2, 33, 64)])
def test_flash_attention_causal(dtype, shape):
    k = get_kernel("flash_attention")
    _check(k, k.make_inputs(shape, dtype, "cpu", _gen(sum(shape))), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_non_causal_and_big_blocks(dtype):
    from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention

    k = get_kernel("flash_attention")
    inputs = k.make_inputs((1, 3, 1, 45, 16), dtype, "cpu", _gen(3))
    q, kk, v = inputs["q"], inputs["k"], inputs["v"]
    for causal in (False, True):
        # 45 positions: one full block of 32 and a ragged one; two query blocks of 32 and one of 16-wide KV steps.
        for cfg in (FlashConfig(32, 16, 4, 2), FlashConfig(64, 32, 4, 2)):
            out = torch.full_like(q, float("nan"))
            flash_attention(q, kk, v, out, causal, cfg)
            err = relative_error(out, attention_reference(q, kk, v, causal))
            assert err <= k.tolerance(dtype), (causal, cfg, err)


def test_flash_attention_masks_the_future():
    """Changing the last position's K and V changes only the last query's output under the causal mask."""
    k = get_kernel("flash_attention")
    inputs = k.make_inputs((1, 2, 1, 20, 16), "fp32", "cpu", _gen(1))
    a = k.make_output(inputs)
    k.run(inputs, a)
    inputs["k"][:, :, -1] += 3.0
    inputs["v"][:, :, -1] -= 5.0
    b = k.make_output(inputs)
    k.run(inputs, b)
    assert torch.equal(a[:, :, :-1], b[:, :, :-1])
    assert not torch.allclose(a[:, :, -1], b[:, :, -1])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("heads", "kv_heads", "lengths"),
    [(4, 4, [1]), (7, 1, [45, 1, 130]), (8, 2, [300, 17]), (14, 2, [64, 65])],
)
def test_flash_decoding_ragged_batch(dtype, heads, kv_heads, lengths):
    from rooflinectl.kernels.flash_decoding import DecodeConfig, make_decode_inputs

    k = get_kernel("flash_decoding")
    # A cache longer than every sequence (its tail is garbage the kernel must not read into the result).
    inputs = make_decode_inputs(len(lengths), heads, kv_heads, lengths, 16, dtype, "cpu", _gen(len(lengths)),
                                l_max=max(lengths) + 40)
    inputs["k"][:, :, max(lengths):] = float("nan")
    inputs["v"][:, :, max(lengths):] = float("nan")
    # Several splits of two 16-position blocks: splits past the short sequences' ends write −inf partials.
    _check(k, inputs, dtype, DecodeConfig(block_n=16, splits=5, num_warps=4, num_stages=2))
    _check(k, inputs, dtype, DecodeConfig(block_n=16, splits=1, num_warps=4, num_stages=2))
    _check(k, inputs, dtype)  # the chosen config


def test_flash_decoding_combine_in_several_head_tiles():
    """Where a group's partials outgrow one combine tile, the heads are combined a few at a time: 7 query heads a
    K/V head, 40 splits (padded to 64) at d 64 fit 4 heads a tile, so two tiles, the second with one padded head."""
    from rooflinectl.kernels.flash_decoding import DecodeConfig, _heads_step, make_decode_inputs

    assert _heads_step(7, 40, 64) == 4 and _heads_step(4, 16, 128) == 4 and _heads_step(4, 32, 128) == 4
    assert _heads_step(4, 64, 128) == 2 and _heads_step(1, 64, 256) == 1
    k = get_kernel("flash_decoding")
    lengths = [633, 17]
    inputs = make_decode_inputs(2, 7, 1, lengths, 64, "fp32", "cpu", _gen(5), l_max=700)
    for b, n in enumerate(lengths):
        inputs["k"][b, :, n:] = float("nan")
        inputs["v"][b, :, n:] = float("nan")
    _check(k, inputs, "fp32", DecodeConfig(block_n=16, splits=40, num_warps=4, num_stages=2))


def test_flash_decoding_split_rule():
    """The rule's choices on a 132-SM H200 at the shapes it was measured at (the table beside decode_config)."""
    from unittest import mock

    from rooflinectl.kernels import flash_decoding as fd

    with mock.patch.object(fd, "sm_count", lambda: 132):
        got = {(b, n): (c.splits, c.block_n) for b, n in [(1, 1024), (1, 4096), (1, 16384), (16, 1024), (16, 4096),
                                                          (64, 4096), (1, 1), (2, 300)]
               for c in [fd.decode_config(b, 8, n)]}
    # 1 × 1,024: 132 SMs over 8 pairs want 17 splits; 1,024 positions give 16 of 64. 1 × 16,384: 17 splits would
    # be 964 positions each (> 512), so two programs an SM: 33, capped at 32. Batch 16: 128 pairs, 2 splits.
    assert got == {(1, 1024): (16, 64), (1, 4096): (16, 64), (1, 16384): (32, 64), (16, 1024): (2, 64),
                   (16, 4096): (2, 64), (64, 4096): (1, 128), (1, 1): (1, 128), (2, 300): (5, 64)}


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_decoding_harness_shapes(dtype):
    k = get_kernel("flash_decoding")
    for shape in k.interpret_shapes:
        _check(k, k.make_inputs(shape, dtype, "cpu", _gen(7)), dtype)


def test_flash_decoding_counters_reset():
    """The arrival counters return to zero after each launch, so a second run combines again."""
    from rooflinectl.kernels.flash_decoding import _COUNTERS, DecodeConfig

    k = get_kernel("flash_decoding")
    inputs = k.make_inputs((2, 4, 2, 50, 16), "fp32", "cpu", _gen(2))
    cfg = DecodeConfig(block_n=16, splits=3, num_warps=4, num_stages=2)
    for _ in range(2):
        _check(k, inputs, "fp32", cfg)
    assert int(_COUNTERS.get("cpu", 4).abs().sum()) == 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 2, 2, 1, 16), (2, 7, 1, 37, 32)])
def test_naive_attention(dtype, shape):
    k = get_kernel("naive_attention")
    _check(k, k.make_inputs(shape, dtype, "cpu", _gen(4)), dtype)


def test_attention_shapes_refused():
    for name in ("flash_attention", "flash_decoding", "naive_attention"):
        k = get_kernel(name)
        with pytest.raises(UserError, match="not a multiple of 3 KV heads"):
            k.parse_shape("1x32x3x128x128")
        with pytest.raises(UserError, match="head dim 96"):
            k.parse_shape("1x32x8x128x96")
    with pytest.raises(UserError, match="at most 65,536 tokens"):
        get_kernel("naive_attention").parse_shape("1x1x1x70000x64")


@pytest.mark.parametrize("causal", [True, False])
def test_the_reference_by_blocks_of_queries_equals_the_whole_score_matrix(monkeypatch, causal):
    """attention_reference works one batch, head and block of queries at a time (the 16,384- and 32,768-token
    default shapes asked for 64 and 256 GiB of float64 scores at once on the H200); blocks of 7 rows over 37
    queries, 3 query heads per K/V head, equal softmax(QKᵀ/√d + mask)·V over the whole matrix to float64's
    rounding."""
    import math

    from rooflinectl.kernels import flash_attention as fa

    monkeypatch.setattr(fa, "REFERENCE_ROWS", 7)
    g = torch.Generator().manual_seed(5)
    q, k, v = torch.randn(2, 6, 37, 16, generator=g), torch.randn(2, 2, 37, 16, generator=g), \
        torch.randn(2, 2, 37, 16, generator=g)
    kk, vv = (t.double().repeat_interleave(3, dim=1) for t in (k, v))
    s = q.double() @ kk.transpose(-1, -2) / math.sqrt(16)
    if causal:
        s = s.masked_fill(torch.ones(37, 37, dtype=torch.bool).triu(1), -math.inf)
    whole = torch.softmax(s, dim=-1) @ vv
    assert torch.allclose(fa.attention_reference(q, k, v, causal), whole, rtol=0, atol=1e-13)
