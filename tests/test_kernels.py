"""The Triton kernels, run through Triton's interpreter on a CPU: correctness on odd shapes, the registry, counts.

The interpreter runs each program as numpy code, so shapes stay small; bf16 is left out because the interpreter's
bf16 arithmetic is not the GPU's (the H200 checks bf16: benchmarks/tune_kernels.py).
"""

import os

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported anywhere

import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import replace  # noqa: E402

import pytest  # noqa: E402

from rooflinectl.errors import UserError  # noqa: E402
from rooflinectl.kernels.registry import KERNELS, KernelInfo, get_kernel  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from rooflinectl.kernels.base import Kernel, relative_error  # noqa: E402
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, RMSNormLinearConfig  # noqa: E402
from rooflinectl.kernels.softmax import SoftmaxConfig  # noqa: E402

DTYPES = ["fp32", "fp16"]

# Rows past the edge and masked lanes compute -inf - -inf in numpy under the interpreter; their results are never
# stored, as on the GPU.
pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _check(kernel: Kernel, inputs, dtype, config=None):
    out = kernel.make_output(inputs)
    out.fill_(float("nan"))  # poison: an element the kernel does not write fails the check
    kernel.run(inputs, out, config)
    assert not torch.isnan(out).any(), "NaN in the output: an element was not written"
    err = relative_error(out, kernel.reference(inputs))
    assert err <= kernel.tolerance(dtype), f"relative error {err:.2e} > {kernel.tolerance(dtype):.0e}"
    return out


# ---- registry ----------------------------------------------------------------------------------------------


def test_registry_names():
    assert set(KERNELS) == {"fused_softmax", "copy", "matmul", "rmsnorm_linear"}
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


def test_parse_shape():
    k = get_kernel("fused_softmax")
    assert k.parse_shape("4096x16384") == (4096, 16384)
    with pytest.raises(UserError, match="ROWSxCOLS"):
        k.parse_shape("4096")
    with pytest.raises(UserError):
        k.parse_shape("4096xabc")
    with pytest.raises(UserError, match="positive"):
        k.parse_shape("0x8")
    with pytest.raises(UserError, match="dtype"):
        k.check((4, 4), "fp8")


# ---- counts (the same op.py functions that the engine uses) -----------------------------------------------


def test_op_counts():
    sm = get_kernel("fused_softmax").op((4096, 4096), "bf16")
    assert sm.bytes == 2 * 4096 * 4096 * 2 and sm.flops == 5 * 4096 * 4096
    cp = get_kernel("copy").op((1 << 20,), "fp32")
    assert cp.bytes == 2 * (1 << 20) * 4 and cp.flops == 0
    mm = get_kernel("matmul").op((8192, 8192, 8192), "bf16")
    assert mm.flops == 2 * 8192**3 and mm.bytes == 3 * 8192 * 8192 * 2 and mm.weight_bytes == 0
    m, k, n = 1, 4096, 14336
    rl = get_kernel("rmsnorm_linear")
    fused = rl.op((m, k, n), "bf16")
    # x, W and the gain read once, y written once; 2mnk of matmul and 4 per x element of RMSNorm.
    assert fused.bytes == (m * k + n * k + k + m * n) * 2
    assert fused.flops == 2 * m * n * k + 4 * m * k
    norm, linear = rl.unfused_ops((m, k, n), "bf16")
    # Unfused, the normalized x is written by the norm and read again by the linear: 2·m·k more elements.
    assert norm.bytes + linear.bytes - fused.bytes == 2 * m * k * 2
    assert get_kernel("copy").unfused_ops((8,), "bf16") == []
    assert RMSNormLinear(with_bias=True).op((m, k, n), "bf16").bytes == fused.bytes + n * 2


# ---- correctness under the interpreter ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_interpret_shapes(name, dtype):
    kernel = get_kernel(name)
    for i, shape in enumerate(kernel.interpret_shapes):
        inputs = kernel.make_inputs(shape, dtype, "cpu", _gen(i))
        _check(kernel, inputs, dtype)
        launches = kernel.last_launches()
        assert launches and all(la.programs >= 1 for la in launches)
        # What `measure` times (run without a config) is what config_for chose for that shape and dtype: the
        # kernel's main launch (its last; rmsnorm_linear may launch a pre-pass first) carries that config.
        assert launches[-1].settings == kernel.config_for(shape, dtype), shape
        # Under the interpreter there is no compiled kernel: resources unknown, warps as asked.
        assert launches[-1].handle is None and launches[-1].n_regs is None
        assert launches[-1].num_warps == launches[-1].config["num_warps"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cols", [1, 7, 781])
def test_softmax_row_lengths(cols, dtype):
    k = get_kernel("fused_softmax")
    _check(k, k.make_inputs((5, cols), dtype, "cpu", _gen(cols)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reverse", [True, False])
@pytest.mark.parametrize("hints", [True, False])
def test_softmax_online_path(dtype, reverse, hints):
    # A small chunk forces the two-pass online normalizer over 12 chunks, the last one partial.
    k = get_kernel("fused_softmax")
    cfg = SoftmaxConfig("online", 64, num_warps=4, reverse=reverse, hints=hints)
    inputs = k.make_inputs((3, 741), dtype, "cpu", _gen(1))
    out = _check(k, inputs, dtype, cfg)
    assert k.last_launches()[0].function == "_softmax_online_kernel"
    # Both paths agree.
    assert relative_error(out, _check(k, inputs, dtype)) <= k.tolerance(dtype)


def test_softmax_mode_by_row_length():
    k = get_kernel("fused_softmax")
    assert k.config_for((4096, 16384), "bf16").mode == "rows"
    assert k.config_for((4096, 65536), "bf16").mode == "online"
    long = k.config_for((4096, 262144), "bf16")
    assert long.mode == "split" and long.chunks == 2  # 16 parts of 2 × 8,192
    assert k.config_for((4096, 262144), "fp32") == SoftmaxConfig("split", 8192, num_warps=4, chunks=1)
    # One row of 1,024 in 2 warps (16 elements a thread); shorter rows share a program.
    assert k.config_for((4096, 1024), "bf16") == SoftmaxConfig("rows", 1024, rows_per_program=1, num_warps=2)
    assert k.config_for((4096, 256), "bf16").rows_per_program == 4
    # No PDL under the interpreter.
    assert not any(k.config_for((8, c), "fp32").pdl for c in (100, 30000))


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_run_picks_the_config_of_the_inputs_dtype(dtype):
    # fp32 and 16-bit rows take different online chunks (32,768 in 32 warps against 16,384 in 16).
    k = get_kernel("fused_softmax")
    _check(k, k.make_inputs((2, 20000), dtype, "cpu", _gen(7)), dtype)
    assert k.last_launches()[0].settings == k.config_for((2, 20000), dtype)
    assert k.last_launches()[0].settings.block == (32768 if dtype == "fp32" else 16384)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_softmax_interpret_shapes_cover_every_mode(dtype):
    # `measure --interpret` and test_interpret_shapes run these: each of the three kernels must be among them.
    k = get_kernel("fused_softmax")
    assert {k.config_for(s, dtype).mode for s in k.interpret_shapes} == {"rows", "online", "split"}


def test_softmax_split_parts_never_exceed_the_sms():
    # A row of 10M bf16 elements would be 611 parts of 2 × 8,192: the parts grow instead, one per SM at most.
    from rooflinectl.kernels.base import sm_count

    cfg = get_kernel("fused_softmax").config_for((2, 10_000_000), "bf16")
    assert cfg.mode == "split"
    assert -(-10_000_000 // (cfg.block * cfg.chunks)) <= sm_count() == 132
    k = get_kernel("fused_softmax")
    x = torch.zeros(1, 133 * 16)
    with pytest.raises(ValueError, match="at most 132 parts"):
        k.run({"x": x}, torch.empty_like(x), SoftmaxConfig("split", 16))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "block,chunks,hints",
    [(1024, 1, False), (128, 1, False), (128, 1, True), (64, 3, True), (64, 3, False)],
    ids=["one-part", "parts", "parts-hints", "parts-of-chunks-hints", "parts-of-chunks"],
)
def test_softmax_split_path(dtype, block, chunks, hints):
    # Under the interpreter the programs of a row run one after another: every part but the last stops waiting
    # after a few polls and reads its whole row (the fallback), the last finds all parts published and combines
    # them. Both paths write the same softmax.
    k = get_kernel("fused_softmax")
    cfg = SoftmaxConfig("split", block, num_warps=4, chunks=chunks, hints=hints)
    inputs = k.make_inputs((4, 741), dtype, "cpu", _gen(5))
    out = _check(k, inputs, dtype, cfg)
    launch = k.last_launches()[0]
    assert launch.function == "_softmax_split_kernel"
    assert launch.grid == (4 * -(-741 // (block * chunks)),) and launch.config["parts"] == -(-741 // (block * chunks))
    assert relative_error(out, _check(k, inputs, dtype)) <= k.tolerance(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_non_contiguous_rows(dtype):
    k = get_kernel("fused_softmax")
    wide = k.make_inputs((9, 300), dtype, "cpu", _gen(2))["x"]
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype)  # row stride 300, 257 columns
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype, SoftmaxConfig("online", 32, num_warps=4))
    _check(k, {"x": wide[:, 13 : 13 + 257]}, dtype, SoftmaxConfig("split", 32, num_warps=4, chunks=2))
    tall = k.make_inputs((40, 6), dtype, "cpu", _gen(3))["x"]
    _check(k, {"x": tall.t()}, dtype)  # column stride 6


def test_softmax_masked_scores():
    # -inf entries (masked attention scores) are zeros of the softmax; an all -inf row is NaN, as in torch.
    k = get_kernel("fused_softmax")
    x = torch.randn(3, 100, generator=_gen(4))
    x[0, :50] = -float("inf")
    x[2] = -float("inf")
    split = [SoftmaxConfig("split", 16, num_warps=4, chunks=c, hints=c > 1) for c in (1, 2)]
    for cfg in (None, SoftmaxConfig("online", 16, num_warps=4, hints=True), *split):
        out = torch.empty_like(x)
        k.run({"x": x}, out, cfg)
        torch.testing.assert_close(out[:2], torch.softmax(x[:2], -1))
        assert torch.isnan(out[2]).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_copy_odd_lengths(dtype):
    k = get_kernel("copy")
    for n in (1, 4095, 5003):
        inputs = k.make_inputs((n,), dtype, "cpu", _gen(n))
        out = _check(k, inputs, dtype)
        assert torch.equal(out, inputs["x"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_odd_shapes(dtype):
    k = get_kernel("matmul")
    for shape in ((1, 40, 1), (33, 70, 17)):
        _check(k, k.make_inputs(shape, dtype, "cpu", _gen(5)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize(
    "shape, cfg",
    [
        ((1, 300, 33), None),  # M = 1, K not a multiple of the K step, N odd
        (
            (1, 1000, 33),
            RMSNormLinearConfig("gemv", 16, 64, 128, 4, 4, split_k=4),
        ),  # split K, partial last split
        ((20, 512, 70), RMSNormLinearConfig("gemv", 32, 64, 64, 4, 4, split_k=2)),
        ((70, 200, 33), None),  # the tile kernel
        ((70, 1000, 20), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, split_k=4)),
        ((130, 256, 40), RMSNormLinearConfig("tile", 64, 32, 64, 4, 4, split_k=2, group_m=2)),
    ],
)
def test_rmsnorm_linear(shape, cfg, with_bias, dtype):
    k = RMSNormLinear(with_bias=with_bias)
    inputs = k.make_inputs(shape, dtype, "cpu", _gen(6))
    cfg = cfg or k.config_for(shape, dtype)
    variants = [replace(cfg, ss="loop"), replace(cfg, ss="inloop")] if cfg.kind == "gemv" else [cfg]
    for c in variants:  # the sum of squares from its own loop, and from its own load inside the matmul loop
        _check(k, inputs, dtype, c)
        _check(k, inputs, dtype, c)  # again: the split-K counters were reset by the last program
        if c.split_k > 1:
            assert int(k._counters["cpu"].abs().sum()) == 0


def test_rmsnorm_linear_gain_matters():
    # The gain is folded into W_g at load time; a run that ignored it would be far off the reference.
    k = get_kernel("rmsnorm_linear")
    inputs = k.make_inputs((2, 64, 24), "fp32", "cpu", _gen(7))
    out = _check(k, inputs, "fp32")
    no_gain = (inputs["x"] * torch.rsqrt(inputs["x"].pow(2).mean(-1, keepdim=True) + k.eps)) @ inputs["w"].t()
    assert relative_error(out, no_gain) > 0.1


def test_rmsnorm_linear_config_by_shape():
    k = get_kernel("rmsnorm_linear")
    decode = k.config_for((1, 4096, 4096), "bf16")
    assert decode.kind == "gemv" and decode.split_k > 1  # 64 tiles of W rows do not fill 132 SMs
    assert k.config_for((8192, 4096, 4096), "bf16").kind == "tile"


def test_baselines_match_reference():
    for name in sorted(KERNELS):
        k = get_kernel(name)
        shape = k.interpret_shapes[-1]
        inputs = k.make_inputs(shape, "fp32", "cpu", _gen(8))
        base = k.baselines()
        assert set(base) == {"torch", "compile"}
        assert relative_error(base["torch"](inputs), k.reference(inputs)) <= k.tolerance("fp32")


def test_sm_count_without_a_device_is_the_tuned_one():
    # Under the interpreter the configs follow the SM count they were tuned on (H100/H200), so that CI exercises
    # the same split-K paths as the GPU; on a GPU the device's own count is read.
    from rooflinectl.kernels.base import TUNED_SM_COUNT, sm_count

    assert sm_count() == TUNED_SM_COUNT == 132
