"""rmsnorm_linear's tile kernel without the pre-pass (``rstd="tile"``/``"ahead"``, issue 16): the sum of squares of
each row from the x tiles the K loop loads, rstd in the epilogue; through pointers or tensor descriptors (TMA).

Under the interpreter (tests/kernels/conftest.py sets TRITON_INTERPRET): odd M, K, N (not multiples of the blocks),
a K range that ends inside a step, split K with a partial last split, bias and none, fp32 and fp16 (the
interpreter's bf16 tl.dot is wrong: triton-lang/triton#11584), every output poisoned with NaN first. The
interpreter runs tensor descriptors (triton 3.9: rows and columns past the edge read as zeros, a row stride that
is not a multiple of 16 bytes refused), so both paths are checked. A subprocess compiles each variant for sm_90 with
the installed triton (no GPU needed) and reads, in what the compiler made, that the pipeliner's race of
rmsnorm_linear's docstring cannot happen. What only a GPU can tell (that it indeed does not, the speed) is
benchmarks/rmsnorm_linear_gpu.py's.
"""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
from kernel_checks import DTYPES, Sm90Job, compile_for_hopper
from kernel_checks import check as _check
from kernel_checks import gen as _gen

from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel
from rooflinectl.kernels.rmsnorm_linear import EPS, RMSNormLinear, RMSNormLinearConfig
from rooflinectl.specs.hardware import load_gpu

pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)

C = RMSNormLinearConfig
# (rstd, tma, host_desc): through pointers, through descriptors made by each program, made on the host.
VARIANTS = [("tile", False, False), ("ahead", False, False), ("tile", True, False), ("ahead", True, False),
            ("tile", True, True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize(
    "shape, cfg",
    [
        # M = 70 over 64-row tiles, N = 33 over 32-column ones, K = 200: three steps of 64 and a partial fourth.
        ((70, 200, 33), C("tile", 64, 32, 64, 4, 4)),
        # Split K: K = 1000 in 4 splits of 256 (4 steps each), the last one 232 (a partial step at K's end).
        ((70, 1000, 20), C("tile", 64, 32, 64, 4, 4, split_k=4)),
        # Split 2 over whole steps (EVEN_K), 130 rows in groups of 2 tile rows.
        ((130, 256, 40), C("tile", 64, 32, 64, 4, 4, split_k=2, group_m=2)),
        # One row (M = 1 through the tile kernel), 16-row tiles.
        ((1, 136, 24), C("tile", 16, 32, 32, 4, 2)),
    ],
)
def test_tile_without_prepass_matches_the_reference(shape, cfg, with_bias, dtype):
    k = RMSNormLinear(with_bias=with_bias)
    inputs = k.make_inputs(shape, dtype, "cpu", _gen(21))
    for rstd, tma, host in VARIANTS:
        c = replace(cfg, rstd=rstd, tma=tma, host_desc=host)
        _check(k, inputs, dtype, c)
        (launch,) = k.last_launches()  # one launch: no pre-pass
        assert launch.function == "_tile_ss_kernel" and launch.config["rstd"] == rstd
        if c.split_k > 1:
            _check(k, inputs, dtype, c)  # again: the last program of each tile reset its counter
            assert int(k._counters["cpu"].abs().sum()) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_pointer_path_takes_a_row_stride_tma_cannot(dtype):
    # K = 301: 602 or 1,204 bytes a row, not a multiple of 16: the pointers run it, the descriptors refuse it.
    k = RMSNormLinear(with_bias=True)
    inputs = k.make_inputs((37, 301, 45), dtype, "cpu", _gen(22))
    cfg = C("tile", 32, 32, 64, 4, 3, split_k=2)
    for rstd in ("tile", "ahead"):
        _check(k, inputs, dtype, replace(cfg, rstd=rstd))
    out = k.make_output(inputs)
    with pytest.raises(ValueError, match="16-byte aligned"):
        k.run(inputs, out, replace(cfg, rstd="tile", tma=True))


def _float64_reference(inputs, eps: float) -> torch.Tensor:
    x = inputs["x"].double()
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * inputs["g"].double()
    return h @ inputs["w"].double().t()


@pytest.mark.parametrize("rstd, tma, host", VARIANTS)
def test_matches_a_float64_reference_to_fp32s_precision(rstd, tma, host):
    # As tests/kernels/test_tolerances.py checks the measured kernels: the interpreter's fp32 (no tf32) sums K = 304
    # products with an error near √K·u = 1.0e-6 (u = 6.0e-8); x scaled by 0.1 makes mean(x²) ≈ 1e-2, so that eps
    # (1e-6) moved 1000× shifts rstd by (1 + 0.1)^-½, 4.7%, and is caught. K = 304: 1,216 bytes a row, TMA's 16.
    k = RMSNormLinear()
    inputs = k.make_inputs((5, 304, 33), "fp32", "cpu", _gen(11))
    inputs["x"] = inputs["x"] * 0.1
    out = k.make_output(inputs)
    out.fill_(float("nan"))
    k.run(inputs, out, C("tile", 16, 32, 64, 4, 2, split_k=2, rstd=rstd, tma=tma, host_desc=host))
    err = relative_error(out, _float64_reference(inputs, EPS))
    assert err <= 1e-6, f"{rstd} tma={tma}: {err:.2e}"
    assert relative_error(out, _float64_reference(inputs, EPS * 1000)) > 1e-4


def test_gemv_with_the_sum_of_squares_from_the_dots_tile_matches_a_float64_reference():
    # ss="dot": as above, K = 300 in 2 splits (the second ends inside a step), M = 1.
    k = RMSNormLinear()
    inputs = k.make_inputs((1, 300, 33), "fp32", "cpu", _gen(13))
    inputs["x"] = inputs["x"] * 0.1
    out = k.make_output(inputs)
    out.fill_(float("nan"))
    k.run(inputs, out, C("gemv", 16, 64, 128, 4, 4, split_k=2, ss="dot"))
    assert relative_error(out, _float64_reference(inputs, EPS)) <= 1e-6
    assert relative_error(out, _float64_reference(inputs, EPS * 1000)) > 1e-4


def test_options_of_the_other_kernels_are_refused():
    k = get_kernel("rmsnorm_linear")
    inputs = k.make_inputs((3, 64, 24), "fp32", "cpu", _gen(23))
    out = k.make_output(inputs)
    for cfg in (C("gemv", 16, 64, 64, 4, 4, rstd="tile"), C("tile", 16, 32, 32, 4, 2, tma=True),
                C("tile", 16, 32, 32, 4, 2, warp_spec=True)):
        with pytest.raises(ValueError, match="options of the tile kernel without the pre-pass"):
            k.run(inputs, out, cfg)
    with pytest.raises(ValueError, match="host_desc is an option of tma"):
        k.run(inputs, out, C("gemv", 16, 64, 64, 4, 4, host_desc=True))
    with pytest.raises(ValueError, match="unknown rmsnorm_linear rstd 'rows'"):
        k.run(inputs, out, C("tile", 16, 32, 32, 4, 2, rstd="rows"))
    with pytest.raises(ValueError, match="unknown rmsnorm_linear gemv ss 'tile'"):
        k.run(inputs, out, C("gemv", 16, 64, 64, 4, 4, ss="tile"))


# The prefill shapes of issue 16 (M ≥ 128): up to M = 256 the small tile, beyond it the persistent kernel.
PREFILL = [(128, 4096, 14336), (256, 8192, 8192), (512, 8192, 8192), (2048, 4096, 14336), (8192, 4096, 4096),
           (16384, 8192, 8192)]


@pytest.mark.parametrize("shape", PREFILL)
def test_the_kernel_without_the_prepass_is_offered_where_it_won_once_and_never_picked(shape):
    # Measured on the H200 (docs/kernels-tuning.md runs 16a-16c): without the pre-pass 1.15-1.5× slower than with it
    # at M ≥ 512; up to M = 256 faster at one shape of three (128×4096×4096). So it is offered only up to 256,
    # through host-made descriptors, and config_for keeps the pre-pass everywhere.
    k = get_kernel("rmsnorm_linear")
    chosen = k.config_for(shape, "bf16")
    assert chosen.kind == "tile" and chosen.rstd == "prepass"
    offered = k.candidates(shape, "bf16")
    assert offered[0] == chosen
    without = {(c.rstd, c.tma, c.host_desc) for c in offered if c.rstd != "prepass"}
    assert without == ({("tile", True, True)} if shape[0] <= 256 else set())
    assert not any(c.warp_spec for c in offered)  # a no-op on sm_90 (rmsnorm_linear_configs._WARP_SPEC_MIN_CC)
    # The persistent kernel is the pick beyond M = 256 (run 16b), and up to M = 128 where 128×128 tiles give at
    # least 3/4 of the SMs one (N = 14336: 112 of 132), there with pdl (run 34a).
    assert chosen.persistent == (shape[0] > 256 or shape == (128, 4096, 14336))
    assert chosen.pdl == (shape == (128, 4096, 14336))


def test_tma_and_warp_specialization_go_by_the_gpu_and_the_row_stride():
    k = get_kernel("rmsnorm_linear")
    # An A100 (compute capability 8.0) has no TMA: the pointer paths only, at every size.
    for shape in [(8, 4096, 14336), (128, 4096, 14336), (2048, 4096, 14336)]:
        assert not any(c.tma or c.persistent for c in k.candidates(shape, "bf16", load_gpu("a100")))
    # A B200 (10.0): warp specialization of the kernel without the pre-pass too.
    assert any(c.warp_spec and c.tma for c in k.candidates((128, 4096, 14336), "bf16", load_gpu("b200")))
    # K = 4095 in bf16: 8,190 bytes a row, not a multiple of 16: no TMA.
    for m in (8, 128, 2048):
        assert not any(c.tma for c in k.candidates((m, 4095, 14336), "bf16"))
    # Decode keeps the gemv and its own candidates, through TMA on Hopper (the pick), not on an A100.
    decode = k.candidates((8, 4096, 14336), "bf16")
    assert all(c.kind == "gemv" and c.rstd == "prepass" and c.ss == "dot" for c in decode)
    assert decode[0].tma and decode[0].host_desc  # measured fastest (rmsnorm_linear_configs._GEMV_SS)
    assert {c.tma for c in decode} == {True, False}


def test_split_k_never_starts_a_partial_second_wave():
    # rmsnorm_linear_configs._split_for on a 132-SM H200, two gemv programs an SM (264): 96 tiles of 64 W rows
    # (N = 6144) split 2 (192 programs; 3 would be 288), 160 tiles (N = 10240) not split (2 would be 320), 64 tiles
    # (N = 4096) split 4 (256). 64 rows of x take 128-row W tiles, one program an SM: 4096×14336 (112 tiles) not
    # split, 8192×8192 (64 tiles) split 2.
    k = get_kernel("rmsnorm_linear")
    assert k.config_for((1, 4096, 6144), "bf16").split_k == 2
    assert k.config_for((1, 8192, 10240), "bf16").split_k == 1
    assert k.config_for((1, 4096, 4096), "bf16").split_k == 4
    wide = k.config_for((64, 4096, 14336), "bf16")
    assert (wide.block_n, wide.num_warps, wide.num_stages, wide.split_k) == (128, 8, 4, 1)
    assert k.config_for((64, 8192, 8192), "bf16").split_k == 2
    # 16×3584×18944: 296 tiles of 64 W rows; 4 stages (80 KiB) fit two programs an SM (264 at once), 3 stages
    # (60 KiB) three (396): 3 stages, unsplit. 448 tiles (N = 28672) fit neither at once: 4 stages. 224 tiles
    # (N = 14336) fit two an SM: 4 stages.
    assert [k.config_for(s, "bf16").num_stages for s in ((16, 3584, 18944), (16, 4096, 28672), (1, 4096, 14336))] \
        == [3, 4, 4]
    assert k.config_for((16, 3584, 18944), "bf16").split_k == 1
    # Prefill: 512×4096×4096 is 64 tiles of 128×256, fewer than half of 132 SMs: 128×128 tiles (128 of them).
    mid = k.config_for((512, 4096, 4096), "bf16")
    assert (mid.block_m, mid.block_n, mid.num_stages, mid.persistent) == (128, 128, 4, True)
    assert k.config_for((512, 8192, 8192), "bf16").block_n == 256  # 128 tiles: more than half


# What the launcher tells the compiler of 16-byte aligned pointers and strides (as on the GPU at K = 4096), and the
# arguments the tile kernel without the pre-pass and the gemv take besides their descriptors.
_SIG = {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "ss_ptr": "*fp32",
        "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "k_per_split": "i32", "sxm": "i32", "swn": "i32",
        "sym": "i32", "eps": "fp32"}
_ALIGNED = tuple(k for k, v in _SIG.items() if v.startswith("*") or k in ("N", "K", "k_per_split", "sxm", "swn", "sym"))
_TILE_STAGES, _GEMV_STAGES = 3, 4


def _descriptors(host: bool, x_block: list[int], w_block: list[int]) -> tuple[dict, dict]:
    """The signature and constants of a kernel's x_td, w_td: host-made descriptors of these blocks, or None."""
    if host:
        return {"x_td": f"tensordesc<bf16{x_block}>", "w_td": f"tensordesc<bf16{w_block}>"}, {"HOST_DESC": True}
    return {}, {"x_td": None, "w_td": None, "HOST_DESC": False}


def _tile_job(ahead: bool, tma: bool, host: bool) -> Sm90Job:
    dsig, dconsts = _descriptors(host, [128, 64], [256, 64])
    consts = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1, "HAS_BIAS": True,
              "EVEN_K": True, "WARP_SPEC": False, "SS_AHEAD": ahead, "TMA": tma, **dconsts}
    return Sm90Job("rooflinectl.kernels.rmsnorm_linear.tile:_tile_ss_kernel", {**_SIG, **dsig}, consts,
                   num_warps=8, num_stages=_TILE_STAGES, aligned=_ALIGNED)


def _gemv_job(ss: str, tma: bool, host: bool) -> Sm90Job:
    dsig, dconsts = _descriptors(host, [16, 128], [64, 128])
    consts = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "BLOCK_KSS": 256, "SPLIT_K": 1, "HAS_BIAS": True,
              "EVEN_K": True, "SS_INLOOP": ss == "inloop", "SS_DOT": ss == "dot", "TMA": tma, **dconsts}
    return Sm90Job("rooflinectl.kernels.rmsnorm_linear.gemv:_gemv_kernel", {**_SIG, **dsig}, consts, num_warps=4,
                   num_stages=_GEMV_STAGES, aligned=_ALIGNED)


def test_each_variant_compiles_for_sm90_with_the_installed_triton_without_the_race():  # and the gemv's
    """In a fresh interpreter without TRITON_INTERPRET (as tests/measure/test_harness.py compiles for Hopper): the
    pointer path pipelines its loads through cp.async, the TMA path reads through cp.async.bulk.tensor, both feed
    wgmma. And the race of rmsnorm_linear's docstring is absent: where the pipeliner gives x fewer shared buffers
    than stages (x read by a synchronous load for the sum of squares), the wgmma takes x from registers, never
    from those buffers; where it reads x from shared memory, x has a buffer a stage. (The pattern the measured
    kernels avoid, the x tile's shared buffer feeding both, fails this: 2 buffers at 3 stages, read by the wgmma.)
    Skipped where this triton build has no ptxas."""
    # (ahead, tma, host): through pointers, through descriptors made by each program, made on the host.
    tiles = [(False, False, False), (True, False, False), (False, True, False), (True, True, False),
             (False, True, True)]
    gemvs = [(ss, tma, False) for ss in ("loop", "inloop", "dot") for tma in (False, True)] + [("dot", True, True)]
    made = compile_for_hopper([_tile_job(*v) for v in tiles] + [_gemv_job(*v) for v in gemvs])
    for (ahead, tma, host), k in zip(tiles, made[:len(tiles)], strict=True):
        assert "wgmma" in k.ptx, (ahead, tma)
        if tma:  # descriptors made by each program (tensormap.replace in global scratch), or passed in
            assert "cp.async.bulk.tensor" in k.ptx and ("tensormap.replace" in k.ptx) != host, (ahead, tma, host)
        else:
            assert "cp.async.cg" in k.ptx or "cp.async.ca" in k.ptx, (ahead, tma)
        # x's shared buffers (128×64 bf16), and where the wgmma takes its A operand (x) from.
        (x_buffers,) = [int(n) for n in re.findall(r"local_alloc[^\n]*?!ttg.memdesc<(\d+)x128x64xbf16", k.ttgir)]
        a_from = set(re.findall(r"ttng.warp_group_dot [^\n]*?\} : (tensor|!ttg.memdesc)", k.ttgir))
        assert a_from in ({"tensor"}, {"!ttg.memdesc"}), (ahead, tma, a_from)
        if a_from == {"!ttg.memdesc"}:
            assert x_buffers >= _TILE_STAGES, (ahead, tma, x_buffers)
        assert a_from == ({"!ttg.memdesc"} if ahead else {"tensor"}), (ahead, tma, a_from)
    # The gemv (x is the wgmma's B operand, 16×128 tiles, 4 stages): with ss "dot" the wgmma reads an immutable copy
    # of x (the register tensor x + 0.0 stored for it), never the pipelined x buffers, of which there are then fewer
    # than stages; with "loop" and "inloop" x feeds only the dot and has a buffer a stage.
    for (ss, tma, host), k in zip(gemvs, made[len(tiles):], strict=True):
        assert ("cp.async.bulk.tensor" in k.ptx) == tma and ("tensormap.replace" in k.ptx) == (tma and not host), \
            (ss, tma)
        (x_buffers,) = [int(n) for n in re.findall(r"local_alloc[^\n]*?!ttg.memdesc<(\d+)x16x128xbf16", k.ttgir)]
        (b_operand,) = re.findall(r"ttng.warp_group_dot [^\n]*?\} : [^*]+\* (!ttg.memdesc<[^>]*>)", k.ttgir)
        if ss == "dot":
            assert "mutable" not in b_operand and x_buffers < _GEMV_STAGES, (ss, tma, b_operand, x_buffers)
        else:
            assert "mutable" in b_operand and x_buffers == _GEMV_STAGES, (ss, tma, b_operand, x_buffers)
