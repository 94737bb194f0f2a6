"""flash_attention, flash_decoding and naive_attention under the interpreter: odd shapes against float64.

Odd shapes: lengths not a multiple of any block, 1 and 7 query heads per KV head, a batch of different cache
lengths, splits past a sequence's end. bf16 is left out: the interpreter's bf16 tl.dot is not the GPU's (the H200
checks bf16: benchmarks/attention_gpu.py). tests/kernels/conftest.py sets TRITON_INTERPRET.
"""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl
from kernel_checks import DTYPES, Sm90Job, compile_for_hopper
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.errors import UserError
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.flash_attention import _exp2_fma
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
        # 45 positions: one full block of 32 and a ragged one; two query blocks of 32 and one of 16-wide KV steps;
        # each in both grid orders (query blocks or heads on the fastest axis).
        for cfg in (FlashConfig(32, 16, 4, 2), FlashConfig(64, 32, 4, 2), FlashConfig(32, 16, 4, 2, heads_fast=True),
                    FlashConfig(64, 32, 4, 2, heads_fast=True)):
            out = torch.full_like(q, float("nan"))
            flash_attention(q, kk, v, out, causal, cfg)
            err = relative_error(out, attention_reference(q, kk, v, causal))
            assert err <= k.tolerance(dtype), (causal, cfg, err)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_through_tensor_descriptors(dtype):
    """K and V read by TMA boxes of a (B·g) × S × d view compute the same attention, causal and not, at a length
    that is no multiple of the blocks (the last box reaches past S and reads zeros, not the next head's rows)."""
    from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention

    k = get_kernel("flash_attention")
    inputs = k.make_inputs((2, 4, 2, 45, 16), dtype, "cpu", _gen(9))
    q, kk, v = inputs["q"], inputs["k"], inputs["v"]
    for causal in (False, True):
        out = torch.full_like(q, float("nan"))
        flash_attention(q, kk, v, out, causal, FlashConfig(32, 16, 4, 2, tma=True))
        assert relative_error(out, attention_reference(q, kk, v, causal)) <= k.tolerance(dtype), causal


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_half_the_exponentials_by_polynomial(dtype):
    """Every other column's exp2 by the FMA polynomial computes the same attention, causal and not, at a length
    no multiple of the blocks (masked columns: −inf into the polynomial gives 0)."""
    from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention

    k = get_kernel("flash_attention")
    inputs = k.make_inputs((2, 4, 2, 45, 16), dtype, "cpu", _gen(13))
    q, kk, v = inputs["q"], inputs["k"], inputs["v"]
    for causal in (False, True):
        out = torch.full_like(q, float("nan"))
        flash_attention(q, kk, v, out, causal, FlashConfig(32, 16, 4, 2, heads_fast=True, poly_exp=True))
        assert relative_error(out, attention_reference(q, kk, v, causal)) <= k.tolerance(dtype), causal


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_with_scores_one_block_ahead(dtype):
    """Q·Kᵀ issued a block ahead of the softmax computes the same attention, causal and not, in both grid orders:
    at 45 positions (the first query block has no whole block left of its diagonal, the others one; a ragged
    tail), at 16 (one whole block, nothing ragged) and at 15 (no whole block at all)."""
    from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention

    k = get_kernel("flash_attention")
    for s in (45, 16, 15):
        inputs = k.make_inputs((2, 4, 2, s, 16), dtype, "cpu", _gen(17 + s))
        q, kk, v = inputs["q"], inputs["k"], inputs["v"]
        for causal in (False, True):
            for heads_fast in (False, True):
                out = torch.full_like(q, float("nan"))
                flash_attention(q, kk, v, out, causal, FlashConfig(32, 16, 4, 2, heads_fast=heads_fast,
                                                                   qk_ahead=True))
                err = relative_error(out, attention_reference(q, kk, v, causal))
                assert err <= k.tolerance(dtype), (s, causal, heads_fast, err)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_attention_with_a_register_cap(dtype):
    """A config that caps the registers (two programs an SM on the GPU) launches with the cap and computes the
    same attention, causal and not."""
    from rooflinectl.kernels.flash_attention import FlashConfig, attention_reference, flash_attention

    k = get_kernel("flash_attention")
    inputs = k.make_inputs((2, 4, 2, 45, 16), dtype, "cpu", _gen(23))
    q, kk, v = inputs["q"], inputs["k"], inputs["v"]
    for causal in (False, True):
        out = torch.full_like(q, float("nan"))
        flash_attention(q, kk, v, out, causal, FlashConfig(32, 16, 4, 2, heads_fast=True, max_regs=128))
        assert relative_error(out, attention_reference(q, kk, v, causal)) <= k.tolerance(dtype), causal


@triton.jit
def _exp2_fma_kernel(x_ptr, y_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(y_ptr + offs, _exp2_fma(tl.load(x_ptr + offs)))


def test_exp2_polynomial():
    """The FMA exp2 against torch's over x ≤ 0 (relative error ≤ 2e-4), 0 at −inf and far below 2^−126."""
    x = torch.cat([-torch.linspace(0, 30, 1000), torch.tensor([-float("inf"), -200.0] + [0.0] * 22)])
    y = torch.empty_like(x)
    _exp2_fma_kernel[(1,)](x, y, N=1024)
    ref = torch.exp2(x[:1000].double())
    assert ((y[:1000].double() - ref).abs() / ref).max() <= 2e-4
    assert y[1000] == 0 and y[1001] == 0


def test_flash_attention_grid_order_rule():
    """Heads on the grid's fastest axis for causal d-128 prefill where the (sequence, head) pairs are at most half
    of 132 SMs (1 × 32 and 1 × 64 heads: 32 and 64 ≤ 66), not at 4 × 32 = 128 pairs, not without the mask, not at
    d 64 nor at 256 tokens or fewer."""
    from unittest import mock

    from rooflinectl.kernels import flash_attention as fa

    with mock.patch.object(fa, "sm_count", lambda: 132):
        assert fa._config_for(4096, 128, 32, True).heads_fast and fa._config_for(8192, 128, 64, True).heads_fast
        assert not fa._config_for(4096, 128, 128, True).heads_fast
        assert not fa._config_for(4096, 128, 32, False).heads_fast
        assert not fa._config_for(4096, 64, 32, True).heads_fast and not fa._config_for(256, 128, 32, True).heads_fast


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


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (8, 4), (7, 1)])
def test_flash_decoding_on_the_cuda_cores(dtype, heads, kv_heads):
    """The products as broadcast multiply-and-sum over the group's own rows (no padding to 16) compute the same
    attention: ragged lengths, NaN past each end, several splits and one."""
    from rooflinectl.kernels.flash_decoding import DecodeConfig, make_decode_inputs

    k = get_kernel("flash_decoding")
    lengths = [45, 1, 130]
    inputs = make_decode_inputs(3, heads, kv_heads, lengths, 16, dtype, "cpu", _gen(heads), l_max=139)
    for i, n in enumerate(lengths):
        inputs["k"][i, :, n:] = float("nan")
        inputs["v"][i, :, n:] = float("nan")
    for splits in (3, 1):
        _check(k, inputs, dtype, DecodeConfig(16, splits, 4, 2, tensor_cores=False))


@pytest.mark.parametrize("dtype", DTYPES)
def test_flash_decoding_in_head_slices(dtype):
    """A group's query heads split over several programs (each re-reading the K/V blocks) compute the same
    attention: 16 heads a K/V head in 2 and 4 slices, 6 in 3, ragged lengths with NaN past each end, several
    splits and one, and with 40 splits at d 64 a slice's partials in more than one combine tile; each slice's
    arrival counter returns to zero. A slice count that does not divide the group is refused."""
    from rooflinectl.kernels.flash_decoding import _COUNTERS, DecodeConfig, flash_decoding, make_decode_inputs

    k = get_kernel("flash_decoding")
    for heads, kv_heads, d, slices, splits in ((32, 2, 16, 2, 3), (32, 2, 16, 4, 1), (12, 2, 16, 3, 5),
                                               (32, 2, 64, 2, 40)):
        lengths = [633, 17] if splits == 40 else [45, 1, 130]
        inputs = make_decode_inputs(len(lengths), heads, kv_heads, lengths, d, dtype, "cpu", _gen(heads + slices),
                                    l_max=max(lengths) + 9)
        for i, n in enumerate(lengths):
            inputs["k"][i, :, n:] = float("nan")
            inputs["v"][i, :, n:] = float("nan")
        _check(k, inputs, dtype, DecodeConfig(16, splits, 4, 2, head_slices=slices))
        counts = _COUNTERS.get(inputs["q"].device, len(lengths) * kv_heads * slices)
        assert int(counts.abs().sum()) == 0
    q = inputs["q"]
    with pytest.raises(ValueError, match="do not split into 3 slices"):
        flash_decoding(q, inputs["k"], inputs["v"], inputs["lengths"], torch.empty_like(q),
                       DecodeConfig(16, 2, 4, 2, head_slices=3))
    # The kernel reads lengths[b] at element b: a strided view (a column of a wider tensor) read other
    # sequences' lengths, past the cache; it is refused, as is a vector of another size.
    wide = torch.stack([inputs["lengths"], torch.full_like(inputs["lengths"], 999_999)], dim=1)
    for bad in (wide[:, 0], inputs["lengths"][:1]):
        with pytest.raises(ValueError, match="lengths must be a contiguous vector of 2"):
            flash_decoding(q, inputs["k"], inputs["v"], bad, torch.empty_like(q), DecodeConfig(16, 2, 4, 2))


def _decode_job(group: int, slice_: int, paged: bool = False) -> Sm90Job:
    ints = ("n_kv_heads", "chunk", "n_splits", "stb", "l_table", "sqb", "sqh", "skb", "skh", "skn", "svb", "svh",
            "svn", "sob", "soh")
    sig = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "o_ptr": "*bf16", "len_ptr": "*i32",
           "part_o_ptr": "*fp32", "part_lse_ptr": "*fp32", "count_ptr": "*i32", "table_ptr": "*i32",
           "qk_scale": "fp32", **{n: "i32" for n in ints}}
    consts = {"sqd": 1, "skd": 1, "svd": 1, "sod": 1, "HEAD_D": 128, "GROUP": group, "GROUP_PAD": 16,
              "BLOCK_N": 64, "SPLITS_PAD": 16, "HEADS_STEP": min(slice_, 8), "ONE_SPLIT": False,
              "PAGE": 16 if paged else 0, "TABLE_PAD": 32 if paged else 0, "DOT": True, "SLICE": slice_,
              "TABLE_WAITS_LEN": False, "K_ROWS": paged}
    aligned = tuple(n for n in sig if n.endswith("_ptr") or n in ("sqb", "sqh", "skb", "skh", "skn", "svb", "svh",
                                                                   "svn", "sob", "soh"))
    return Sm90Job("rooflinectl.kernels.flash_decoding:_flash_decode_kernel", sig, consts, num_warps=4,
                   num_stages=3, aligned=aligned)


def test_paged_decoding_gathers_page_numbers_in_one_layout():
    """For sm_90: the paged kernel loads K as rows (V's layout), so a block's page numbers are gathered once for
    both, where K as columns gathers them twice (each gather a round trip through shared memory); the loop's
    buffers stay the same."""
    rows, cols = _decode_job(16, 8, True), _decode_job(16, 8, True)
    cols.constexprs["K_ROWS"] = False
    made_rows, made_cols = compile_for_hopper([rows, cols])
    assert 2 * made_rows.ttgir.count("tt.gather") == made_cols.ttgir.count("tt.gather") > 0
    assert made_rows.ptx.count("ld.shared") < made_cols.ptx.count("ld.shared")
    assert made_rows.shared == made_cols.shared and "cp.async" in made_rows.ptx


def test_paged_decoding_k_as_rows_or_columns_is_the_same_result():
    """K loaded as rows and transposed for the product gives the output of K loaded as columns on ragged lengths
    through a block table, on the tensor cores and off: to fp32 rounding here (the interpreter's products are
    numpy's, whose order follows the operand's layout), bit for bit in bf16 on the H100 (the lab's check)."""
    from unittest import mock

    from rooflinectl.kernels import flash_decoding as fd
    from rooflinectl.kernels.paged_decoding import make_paged_inputs

    inputs = make_paged_inputs(3, 8, 2, [45, 1, 130], 16, 16, "fp32", "cpu", _gen(21))
    for dot in (True, False):
        outs = []
        for k_rows in (True, False):
            out = torch.full_like(inputs["q"], float("nan"))
            with mock.patch.object(fd, "_PAGED_K_ROWS", k_rows):
                fd.flash_decoding(inputs["q"], inputs["k"], inputs["v"], inputs["lengths"], out,
                                  fd.DecodeConfig(16, 2, 4, 2, tensor_cores=dot), table=inputs["table"])
            outs.append(out)
        assert relative_error(outs[0], outs[1]) < 1e-6


def test_paged_decoding_in_head_slices_is_the_one_slice_result():
    """The rule now runs a group of 16 in two slices where the SMs sit half idle, paged or not: through a block
    table of 16-position pages (ragged lengths), 2 and 4 slices give the one-slice output bit for bit."""
    from rooflinectl.kernels.flash_decoding import DecodeConfig, flash_decoding
    from rooflinectl.kernels.paged_decoding import make_paged_inputs

    inputs = make_paged_inputs(2, 16, 1, [37, 70], 32, 16, "fp32", "cpu", _gen(16))
    outs = []
    for slices in (1, 2, 4):
        out = torch.full_like(inputs["q"], float("nan"))
        flash_decoding(inputs["q"], inputs["k"], inputs["v"], inputs["lengths"], out,
                       DecodeConfig(16, 3, 4, 2, tensor_cores=False, head_slices=slices), table=inputs["table"])
        outs.append(out)
    assert not torch.isnan(outs[0]).any()
    assert all(torch.equal(o, outs[0]) for o in outs[1:])


def test_flash_decoding_head_slices_compile_for_sm90_with_the_same_pipeline():
    """For an H100/H200 (sm_90, the installed triton's compiler): the decode kernel with its group of 16 heads in
    one program, in two slices of 8 and in four of 4, contiguous and paged, compiles, and slicing changes none of
    the loop's buffers: the same shared memory (K and V blocks in flight, cp.async) in each."""
    jobs = [_decode_job(16, s, paged) for paged in (False, True) for s in (16, 8, 4)]
    made = compile_for_hopper(jobs)
    for i in (0, 3):
        whole, halves, quarters = made[i:i + 3]
        assert whole.shared == halves.shared == quarters.shared > 0
        assert all("cp.async" in k.ptx for k in (whole, halves, quarters))


def test_flash_decoding_takes_two_head_slices_where_a_big_group_leaves_sms_idle():
    """On 132 SMs: 1 × 64/4 (group 16) at 4,096 positions takes 16 splits, 4 × 16 = 64 programs, half the SMs or
    fewer, so the rule runs the group in two slices (measured faster on the H200: 9.1 against 9.9 µs) and the
    candidates offer one slice beside it; at 16,384 (32 splits, 128 programs), for 1 × 32/8 (group 4) and for
    16 × 64/4 the rule keeps one slice, and the candidates offer two only where the SMs sit half idle."""
    from unittest import mock

    from rooflinectl.kernels import flash_decoding as fd

    with mock.patch.object(fd, "sm_count", lambda: 132):
        rule = fd.decode_config(1, 4, 4096, group=16)
        assert (rule.splits, rule.head_slices) == (16, 2)
        candidates = fd.decode_candidates(1, 4, 4096, group=16)
        assert candidates[0] == rule and fd.replace(rule, head_slices=1) in candidates
        assert fd.decode_config(1, 4, 16384, group=16).head_slices == 1
        assert fd.decode_config(1, 8, 4096, group=4).head_slices == 1
        assert fd.decode_config(16, 4, 4096, group=16).head_slices == 1
        assert not [c for c in fd.decode_candidates(1, 8, 4096, group=4) if c.head_slices > 1]
        assert not [c for c in fd.decode_candidates(16, 4, 4096, group=16) if c.head_slices > 1]


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
    """The rule's choices on a 132-SM H200 at shapes it was measured at (the table beside decode_config)."""
    from unittest import mock

    from rooflinectl.kernels import flash_decoding as fd

    with mock.patch.object(fd, "sm_count", lambda: 132):
        got = {(b, g, n): (c.splits, c.block_n, c.num_stages)
               for b, g, n in [(1, 8, 1024), (1, 8, 16384), (1, 32, 16384), (1, 32, 1024), (16, 4, 4096),
                               (16, 8, 4096), (16, 16, 1024), (16, 32, 1024), (64, 16, 4096), (256, 4, 1000),
                               (256, 8, 1000), (1, 8, 1), (2, 8, 300)]
               for c in [fd.decode_config(b, g, n)]}
    # Latency regime (pairs ≤ 132/4), rounded down to a power of two: 1 × 8 pairs at 1,024 want ⌈132/8⌉ = 17 ->
    # 16; at 16,384 a split of 132/8 would pass 512 positions, so two programs an SM: ⌈264/8⌉ = 33 -> 32; 32 MHA
    # pairs at 16,384: ⌈264/32⌉ = 9 -> 8, at 1,024 ⌈132/32⌉ = 5 -> 4. 2 × 300 (16 pairs): 8 splits, 300
    # positions in blocks of 64 give 5. Bandwidth regime: ⌊132/pairs⌋ splits; the blocks by one wave: 64 pairs ×
    # 2 and 128 × 1 ≤ 132 programs: 128s; 256 ≤ 3·132: 64s in 3 stages; 512 ≤ 5·132: 64s in 2 stages; 1,024 of
    # 4,096 positions: 128s, of 1,000: 64s; 2,048 ≥ 12·132: 64s. One position: one split of 128.
    assert got == {(1, 8, 1024): (16, 64, 3), (1, 8, 16384): (32, 64, 3), (1, 32, 16384): (8, 64, 3),
                   (1, 32, 1024): (4, 64, 3), (16, 4, 4096): (2, 128, 3), (16, 8, 4096): (1, 128, 3),
                   (16, 16, 1024): (1, 64, 3), (16, 32, 1024): (1, 64, 2), (64, 16, 4096): (1, 128, 3),
                   (256, 4, 1000): (1, 64, 3), (256, 8, 1000): (1, 64, 3), (1, 8, 1): (1, 128, 3),
                   (2, 8, 300): (5, 64, 3)}
    # A group of 16 query heads a K/V head at d 128 (1 × 64/4): the one-wave rule's 32 splits put 4 heads in a
    # combine tile (16,384 / (32 · 128)), 4 rounds; 16 splits put 8, two rounds: 16 (3,000 and 4,096 positions:
    # 188 and 256 a split). At 16,384 positions 16 splits would pass 512 positions each: no cap, 32. Groups of 4 keep 16
    # (1 × 8 pairs at 1,024) and 7 at batch 1 keep 32 (4 heads a tile at 32 splits: two rounds).
    with mock.patch.object(fd, "sm_count", lambda: 132):
        assert fd.decode_config(1, 4, 3000, group=16).splits == 16
        assert fd.decode_config(1, 4, 4096, group=16).splits == 16
        assert fd.decode_config(1, 4, 16384, group=16).splits == 32
        assert fd.decode_config(1, 8, 1024, group=4).splits == 16
        assert fd.decode_config(1, 4, 4096, group=7).splits == 32
        assert fd.decode_config(1, 4, 4096).splits == 32  # the group not given: no cap


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("heads", "kv_heads", "lengths", "page"),
                         [(4, 4, [1], 16), (7, 1, [45, 1, 130], 16), (8, 2, [300, 17], 32), (6, 2, [33, 70], 1)])
def test_paged_decoding_equals_contiguous(dtype, heads, kv_heads, lengths, page):
    """Through a block table of pages scattered at random (the slots past each length and the spare pages NaN),
    the output is bit-identical to the contiguous kernel's on the same positions under the same config, and
    within tolerance of float64: several splits, one split, the rule's; pages held before the loop and (page 1,
    more pages a split than a register tile holds) read inside it."""
    from rooflinectl.kernels.flash_decoding import DecodeConfig, decode_reference, flash_decoding
    from rooflinectl.kernels.paged_decoding import gather_pages, make_paged_inputs

    x = make_paged_inputs(len(lengths), heads, kv_heads, lengths, 16, page, dtype, "cpu", _gen(page),
                          spare_pages=3)
    unused = torch.ones(x["k"].shape[0], dtype=torch.bool)
    unused[x["table"].flatten().long()] = False
    x["k"][unused] = float("nan")
    x["v"][unused] = float("nan")
    for i, n in enumerate(lengths):
        for j, p in enumerate(x["table"][i].tolist()):
            x["k"][p, max(0, n - j * page):] = float("nan")
            x["v"][p, max(0, n - j * page):] = float("nan")
    kc, vc = gather_pages(x["k"], x["table"]).contiguous(), gather_pages(x["v"], x["table"]).contiguous()
    ref = decode_reference(x["q"], kc, vc, x["lengths"])
    k = get_kernel("flash_decoding_paged")
    # 7 splits: chunks of 48 positions for pages of 32, so splits start inside pages, and the last split's chunk
    # reaches past the table's width (7 × 48 = 336 > 320 positions at 300 and 17).
    for cfg in (DecodeConfig(block_n=16, splits=5, num_warps=4, num_stages=2),
                DecodeConfig(block_n=16, splits=7, num_warps=4, num_stages=2),
                DecodeConfig(block_n=16, splits=1, num_warps=4, num_stages=2), None):
        paged = torch.full_like(x["q"], float("nan"))
        used, _, _ = flash_decoding(x["q"], x["k"], x["v"], x["lengths"], paged, cfg, table=x["table"])
        contiguous = torch.full_like(x["q"], float("nan"))
        flash_decoding(x["q"], kc, vc, x["lengths"], contiguous, used)
        assert torch.equal(paged, contiguous), used
        assert relative_error(paged, ref) <= k.tolerance(dtype)


def test_paged_decoding_table_tile():
    """A split holds its page numbers in registers when they fit 512 (one more than its pages where it may start
    inside one, to a power of two): 256 positions in pages of 16 -> 17 -> 32; pages of 1 -> 257 -> 512; 1,024
    positions in pages of 1 -> 2,048 > 512, read per block instead; no pages, none."""
    from rooflinectl.kernels.flash_decoding import _table_pad

    assert _table_pad(256, 16) == 32 and _table_pad(256, 1) == 512 and _table_pad(1024, 1) == 0
    assert _table_pad(64, 64) == 2 and _table_pad(4096, 0) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_decoding_harness_shapes(dtype):
    k = get_kernel("flash_decoding_paged")
    for shape in k.interpret_shapes:
        _check(k, k.make_inputs(shape, dtype, "cpu", _gen(11)), dtype)


def test_paged_decoding_counts_the_table():
    """Bytes: flash_decoding's (q and o, K and V once) plus the table's int32 page numbers: 16 × ⌈4,096/16⌉ × 4."""
    paged = get_kernel("flash_decoding_paged").op((16, 32, 8, 4096, 128, 16), "bf16")
    plain = get_kernel("flash_decoding").op((16, 32, 8, 4096, 128), "bf16")
    assert paged.bytes == plain.bytes + 16 * 256 * 4 and paged.kv_bytes == plain.kv_bytes
    assert paged.flops == plain.flops
    with pytest.raises(UserError, match="power of two"):
        get_kernel("flash_decoding_paged").parse_shape("1x4x4x16x16x24")


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
