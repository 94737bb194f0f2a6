"""rmsnorm_linear's persistent prefill kernel (issue 16): programs that walk several tiles, x and W_g through
host-made tensor descriptors, y stored through one (whole or in halves) or through pointers.

Under the interpreter (tests/kernels/conftest.py sets TRITON_INTERPRET), fp32 and fp16 (the interpreter's bf16
tl.dot is wrong: triton-lang/triton#11584), outputs poisoned with NaN first, fewer programs than tiles (the SM
count patched down) so that each program walks several. A subprocess compiles it for sm_90 with the installed
triton. Speed is benchmarks/rmsnorm_linear_gpu.py's.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from kernel_checks import DTYPES, Sm90Job, compile_for_hopper
from kernel_checks import gen as _gen

import rooflinectl.kernels.rmsnorm_linear.persistent as persistent
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, RMSNormLinearConfig
from rooflinectl.specs.hardware import load_gpu

pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)

P = RMSNormLinearConfig("tile", 16, 16, 32, 4, 3, persistent=True, tma=True, host_desc=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize(
    "shape",
    [
        (70, 72, 40),  # 5 × 3 tiles over 3 programs; M, N past the tiles' edge; K = 2¼ steps; y through TMA
        (33, 128, 63),  # N odd: y's rows are not a multiple of 16 bytes, stored through pointers
        (5, 64, 16),  # one tile: one program
    ],
)
def test_persistent_matches_the_reference(shape, with_bias, dtype, monkeypatch):
    monkeypatch.setattr(persistent, "sm_count", lambda: 3)
    k = RMSNormLinear(with_bias=with_bias)
    inputs = k.make_inputs(shape, dtype, "cpu", _gen(31))
    ref = k.reference(inputs)
    out = k.make_output(inputs)
    tiles = -(-shape[0] // P.block_m) * -(-shape[2] // P.block_n)
    for flatten in (False, True):
        for subtile in (False, True):
            cfg = replace(P, flatten=flatten, subtile=subtile)
            out.fill_(float("nan"))
            k.run(inputs, out, cfg)
            err = relative_error(out, ref)
            assert err <= k.tolerance(dtype), (cfg, err)
            rstd, main = k.last_launches()
            assert rstd.function == "_rstd_kernel" and main.function == "_tile_persistent_kernel"
            assert main.grid == (min(3, tiles),)


def test_persistent_options_go_together():
    k = get_kernel("rmsnorm_linear")
    inputs = k.make_inputs((3, 64, 24), "fp32", "cpu", _gen(32))
    out = k.make_output(inputs)
    for cfg in (replace(P, host_desc=False), replace(P, tma=False, host_desc=False), replace(P, split_k=2),
                replace(P, rstd="tile"), RMSNormLinearConfig("gemv", 16, 64, 64, 4, 4, persistent=True),
                RMSNormLinearConfig("tile", 16, 32, 32, 4, 2, flatten=True)):
        with pytest.raises(ValueError, match="persistent"):
            k.run(inputs, out, cfg)


def test_a_view_that_tma_cannot_read_falls_back_to_pointers():
    # config_for sees only the shape: x sliced one element in (its base 4 bytes off 16) runs the same gemv through
    # pointers, and gives the right answer.
    k = RMSNormLinear()
    inputs = k.make_inputs((1, 64, 40), "fp32", "cpu", _gen(33))
    wide = torch.zeros((1, 65), dtype=torch.float32)
    wide[:, 1:] = inputs["x"]
    inputs["x"] = wide[:, 1:]
    assert k.config_for((1, 64, 40), "fp32").tma
    out = k.make_output(inputs)
    out.fill_(float("nan"))
    k.run(inputs, out)
    assert relative_error(out, k.reference(inputs)) <= k.tolerance("fp32")
    (launch,) = k.last_launches()
    assert launch.config["tma"] is False and launch.config["ss"] == "dot"


def test_offered_for_big_tiles_where_tma_fits():
    k = get_kernel("rmsnorm_linear")
    shape = (2048, 4096, 14336)
    offered = [c for c in k.candidates(shape, "bf16") if c.persistent]
    # The pick (4 stages, flattened, y in halves; runs 16b, 34a), its 3-stage and whole-y twins, 128×128 tiles.
    assert offered[0] == k.config_for(shape, "bf16")
    assert {(c.block_n, c.flatten, c.subtile, c.num_stages) for c in offered} == {
        (256, True, True, 4), (256, True, True, 3), (256, True, False, 4), (128, True, True, 4)}
    assert all(c.tma and c.host_desc and c.split_k == 1 for c in offered)
    assert not any(c.persistent for c in k.candidates(shape, "bf16", load_gpu("a100")))  # no TMA
    assert not any(c.persistent for c in k.candidates((2048, 4095, 14336), "bf16"))  # 8,190-byte rows


def test_compiles_for_sm90_with_the_installed_triton():
    """Without TRITON_INTERPRET, in a fresh interpreter: wgmma fed through TMA with host-made descriptors, y
    stored through TMA only where asked, within an H200's shared memory; with PDL, the wait for the pre-pass
    (griddepcontrol.wait) in the flattened loop. Skipped where triton has no ptxas."""
    sig = {"rstd_ptr": "*fp32", "b_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32", "sym": "i32",
           "x_td": "tensordesc<bf16[128, 64]>", "w_td": "tensordesc<bf16[256, 64]>"}
    # (flatten, y_tma, subtile, pdl)
    variants = [(False, False, False, False), (True, False, False, False), (True, True, True, False),
                (True, True, True, True)]
    jobs = []
    for flatten, y_tma, subtile, pdl in variants:
        consts = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "HAS_BIAS": True, "PROGRAMS": 132,
                  "FLATTEN": flatten, "Y_TMA": y_tma, "SUBTILE": subtile, "PDL": pdl}
        y = {"y_td": "tensordesc<bf16[128, 128]>"} if y_tma else {}
        jobs.append(Sm90Job("rooflinectl.kernels.rmsnorm_linear.persistent:_tile_persistent_kernel", {**sig, **y},
                            consts if y_tma else {**consts, "y_td": None}, num_warps=8, num_stages=3,
                            aligned=("rstd_ptr", "b_ptr", "y_ptr", "N", "K", "sym")))
    for (flatten, y_tma, _, pdl), made in zip(variants, compile_for_hopper(jobs), strict=True):
        assert ("griddepcontrol.wait" in made.ptx) == pdl, (flatten, y_tma, pdl)
        assert "wgmma" in made.ptx, (flatten, y_tma)
        # Loads through TMA (x, W_g); the store through it too where y_tma (cp.async.bulk.tensor ... global.shared).
        assert "cp.async.bulk.tensor" in made.ptx and "tensormap.replace" not in made.ptx, (flatten, y_tma)
        assert ("cp.async.bulk.tensor.2d.global.shared" in made.ptx) == y_tma, (flatten, y_tma)
        assert made.shared <= 232448, (flatten, y_tma, made.shared)  # an H200's 227 KiB
