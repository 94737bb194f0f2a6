"""rmsnorm_linear's pre-pass settings, programmatic dependent launch (pdl) and the persistent kernel's occupancy.

Under the interpreter (tests/kernels/conftest.py sets TRITON_INTERPRET), fp32 and fp16, outputs poisoned with NaN
first: the pre-pass at K past its one-step block, the pdl configs (which the interpreter, having no grid
dependency control, runs without it) and two persistent programs an SM. A subprocess compiles the GPU-only
instructions for sm_90 with the installed triton.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from kernel_checks import DTYPES, Sm90Job, compile_for_hopper
from kernel_checks import gen as _gen

import rooflinectl.kernels.rmsnorm_linear.persistent as persistent
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, RMSNormLinearConfig, configs
from rooflinectl.kernels.rmsnorm_linear.tile import _rstd_kernel

pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)

P = RMSNormLinearConfig("tile", 16, 16, 32, 4, 3, persistent=True, tma=True, host_desc=True, flatten=True)


def test_the_prepass_reads_one_row_a_program_in_steps_of_up_to_4096_columns():
    # run 34a's pick: one row, 8 warps; the step the row's length rounded up to a power of two, at most 4,096.
    assert configs.rstd_settings(128, 4096) == {"BLOCK_K": 4096, "ROWS": 1, "num_warps": 8}
    assert configs.rstd_settings(512, 3584)["BLOCK_K"] == 4096
    assert configs.rstd_settings(512, 8192)["BLOCK_K"] == 4096  # two steps
    assert configs.rstd_settings(3, 40)["BLOCK_K"] == 64


@pytest.mark.parametrize("k", [40, 4096, 9000])  # one partial step, one whole step, three steps (the last partial)
def test_the_prepass_matches_torch(k):
    x = torch.randn((5, k), generator=_gen(40), dtype=torch.float32) * 3.0
    rstd = torch.full((5,), float("nan"))
    settings = configs.rstd_settings(5, k)
    _rstd_kernel[(5 // settings["ROWS"],)](x, rstd, 5, k, x.stride(0), 1e-6, **settings)
    # By hand: 1/sqrt(mean(x²) + eps) of each row.
    want = 1.0 / torch.sqrt((x.double() ** 2).sum(-1) / k + 1e-6)
    torch.testing.assert_close(rstd.double(), want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "shape, cfg",
    [
        ((70, 200, 33), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, pdl=True)),  # the tile kernel, unsplit
        ((70, 1000, 20), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, split_k=4, pdl=True)),  # split K
        ((70, 72, 40), replace(P, pdl=True)),  # persistent, y through TMA
        ((33, 128, 63), replace(P, subtile=True, pdl=True)),  # persistent, y through pointers (N odd)
    ],
)
def test_pdl_configs_run_without_it_under_the_interpreter(shape, cfg, dtype, monkeypatch):
    monkeypatch.setattr(persistent, "sm_count", lambda: 3)
    k = RMSNormLinear(with_bias=True)
    inputs = k.make_inputs(shape, dtype, "cpu", _gen(41))
    out = k.make_output(inputs)
    for _ in range(2):  # again: split K's counters were reset by the last program
        out.fill_(float("nan"))
        k.run(inputs, out, cfg)
        assert relative_error(out, k.reference(inputs)) <= k.tolerance(dtype)
    rstd, main = k.last_launches()
    assert rstd.function == "_rstd_kernel" and rstd.grid == (shape[0],)  # one row a program
    assert main.config["pdl"] is False  # the interpreter has no grid dependency control


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_persistent_programs_an_sm(dtype, monkeypatch):
    # 5 × 3 = 15 tiles of 16×16 at 70×72×40; 3 "SMs", two programs each: 6 programs, each walking 2 or 3 tiles.
    monkeypatch.setattr(persistent, "sm_count", lambda: 3)
    k = RMSNormLinear()
    inputs = k.make_inputs((70, 72, 40), dtype, "cpu", _gen(42))
    out = k.make_output(inputs)
    out.fill_(float("nan"))
    k.run(inputs, out, replace(P, occupancy=2))
    assert relative_error(out, k.reference(inputs)) <= k.tolerance(dtype)
    assert k.last_launches()[1].grid == (6,)


def test_pdl_and_occupancy_belong_to_their_kernels():
    k = RMSNormLinear()
    inputs = k.make_inputs((3, 64, 24), "fp32", "cpu", _gen(43))
    out = k.make_output(inputs)
    for cfg, what in ((RMSNormLinearConfig("gemv", 16, 64, 64, 4, 4, pdl=True), "pdl"),
                      (RMSNormLinearConfig("tile", 16, 32, 32, 4, 2, rstd="tile", pdl=True), "pdl"),
                      (RMSNormLinearConfig("tile", 16, 32, 32, 4, 2, occupancy=2), "occupancy"),
                      (replace(P, occupancy=0), "occupancy")):
        with pytest.raises(ValueError, match=what):
            k.run(inputs, out, cfg)


def test_the_pdl_instructions_compile_for_sm90_with_the_installed_triton():
    """Without TRITON_INTERPRET, in a fresh interpreter: the pre-pass signals its dependents
    (griddepcontrol.launch_dependents) only with LAUNCH_DEPENDENTS, the tile kernel waits (griddepcontrol.wait)
    only with PDL, split or not. Skipped where triton has no ptxas."""
    pre_sig = {"x_ptr": "*bf16", "rstd_ptr": "*fp32", "M": "i32", "K": "i32", "sxm": "i32", "eps": "fp32"}
    tile_sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "rstd_ptr": "*fp32", "b_ptr": "*bf16", "y_ptr": "*bf16",
                "ws_ptr": "*fp32", "count_ptr": "*i32", "M": "i32", "N": "i32", "K": "i32", "k_per_split": "i32",
                "sxm": "i32", "swn": "i32", "sym": "i32"}
    jobs = [Sm90Job("rooflinectl.kernels.rmsnorm_linear.tile:_rstd_kernel", pre_sig,
                    {"BLOCK_K": 4096, "ROWS": 1, "LAUNCH_DEPENDENTS": signal}, num_warps=8, num_stages=3,
                    aligned=("x_ptr", "rstd_ptr", "K", "sxm")) for signal in (False, True)]
    variants = [(1, False), (1, True), (4, True)]  # (split_k, pdl)
    jobs += [Sm90Job("rooflinectl.kernels.rmsnorm_linear.tile:_tile_kernel", tile_sig,
                     {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": split, "HAS_BIAS": False,
                      "EVEN_K": True, "PDL": pdl}, num_warps=4, num_stages=4,
                     aligned=tuple(n for n in tile_sig if n not in ("M",))) for split, pdl in variants]
    made = compile_for_hopper(jobs)
    assert ["griddepcontrol.launch_dependents" in m.ptx for m in made[:2]] == [False, True]
    for (split, pdl), m in zip(variants, made[2:], strict=True):
        assert ("griddepcontrol.wait" in m.ptx) == pdl, (split, pdl)
        assert "wgmma" in m.ptx
