"""rmsnorm_linear's "cublas" baseline: F.linear alone on the already-normalized x (on a GPU, cuBLAS's matmul), the
speed the fusion must reach (issue 16). Checked on the CPU against the same reference and tolerance as the kernel,
and run through the measure harness with a fake clock, as ``measure --baseline all`` runs it on a GPU."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import DTYPES
from kernel_checks import check as _check
from kernel_checks import gen as _gen
from measure_fakes import FakeClock, cpu_info

from rooflinectl.errors import UserError
from rooflinectl.kernels.base import relative_error
from rooflinectl.kernels.registry import get_kernel
from rooflinectl.kernels.rmsnorm_linear import RMSNormLinear, linear_alone
from rooflinectl.measure.harness import Plan, Reporter, run_measure
from rooflinectl.measure.request import baselines_for
from rooflinectl.records.kernel import BASELINE_LABELS, RunCeilings
from rooflinectl.specs.hardware import load_gpu

pytestmark = pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning", "ignore:divide by zero encountered:RuntimeWarning"
)


def test_cublas_is_rmsnorm_linears_one_further_baseline():
    k = get_kernel("rmsnorm_linear")
    assert set(k.extra_baselines()) == {"cublas"} <= set(BASELINE_LABELS)
    assert set(k.baselines()) == {"torch", "compile", "cublas"}
    # --baseline all: eager, compile and F.linear alone; --baseline cublas alone; refused for a kernel without it.
    assert baselines_for("all", tuple(k.extra_baselines())) == ("torch", "compile", "cublas")
    assert baselines_for("cublas", tuple(k.extra_baselines())) == ("cublas",)
    with pytest.raises(UserError, match=r"--baseline cublas: this kernel has no such baseline \(its own: torch, "
                                        r"compile\)"):
        baselines_for("cublas", tuple(get_kernel("fused_softmax").extra_baselines()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_cublas_baseline_is_eagers_linear_on_its_own_normalized_x(dtype, with_bias):
    k = RMSNormLinear(with_bias=with_bias)
    inputs = k.make_inputs((5, 72, 33), dtype, "cpu", _gen(11))
    # x_normed is exactly the tensor the eager code hands F.linear, so the baseline is eager minus the norm.
    assert inputs["x_normed"].dtype == inputs["x"].dtype and inputs["x_normed"].shape == inputs["x"].shape
    out = k.extra_baselines()["cublas"](inputs)
    assert torch.equal(out, k.eager(inputs))
    assert relative_error(out, k.reference(inputs)) <= k.tolerance(dtype)
    # ... and it carries the gain: F.linear on the normalized x without g is far off the reference.
    x = inputs["x"].to(torch.float32)
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + k.eps)
    no_gain = dict(inputs, x_normed=h.to(inputs["x"].dtype))
    assert relative_error(linear_alone(no_gain), k.reference(inputs)) > 0.1


def test_the_kernel_reads_x_and_w_g_not_the_baselines_x_normed():
    # The fused kernel must not take the shortcut of the baseline's prepared input: with x_normed poisoned it is
    # still right.
    k = get_kernel("rmsnorm_linear")
    inputs = k.make_inputs((3, 100, 33), "fp32", "cpu", _gen(12))
    inputs["x_normed"] = torch.full_like(inputs["x_normed"], float("nan"))
    _check(k, inputs, "fp32")


def test_measure_times_cublas_beside_eager_on_the_same_rotation():
    # The harness flow of `measure --kernel rmsnorm_linear --baseline all` (compile left out: it needs a C compiler
    # on the CPU), the kernel in the interpreter, timed by a fake clock: 10 µs the kernel, 25 eager, 8 F.linear.
    k = RMSNormLinear()
    plan = Plan(shapes=[(3, 100, 33)], dtype="fp32", device="cpu", timed=True, baselines=("torch", "cublas"),
                seed=5)
    clock = FakeClock((10e-6, 9e-6, 11e-6), (25e-6, 24e-6, 26e-6), (8e-6, 7e-6, 9e-6))
    run = run_measure(k, plan, load_gpu("h200"), command="rooflinectl measure --kernel rmsnorm_linear",
                      reporter=Reporter(), bench=clock, ceilings=RunCeilings(copy_bandwidth_gbps=4000.0),
                      info=cpu_info())
    (record,) = run.records
    assert record.status == "passed"
    by_name = {b.name: b for b in record.baselines}
    assert list(by_name) == ["torch", "cublas"]
    cublas = by_name["cublas"]
    assert cublas.error is None and cublas.rel_error <= k.tolerance("fp32")
    assert cublas.time_s == 8e-6 and cublas.speedup == pytest.approx(8e-6 / 10e-6)
    # Rates by the kernel's own count (every baseline's): x (3·100), W (33·100), the gain (100) and y (3·33), 4 bytes
    # each (fp32, tf32 in the dot), over 8 µs; 2·3·33·100 FLOPs of matmul and 4 per x element of RMSNorm.
    assert cublas.achieved_gbps == pytest.approx(4 * (3 * 100 + 33 * 100 + 100 + 3 * 33) / 8e-6 / 1e9)
    assert cublas.achieved_tflops == pytest.approx((2 * 3 * 33 * 100 + 4 * 3 * 100) / 8e-6 / 1e12)
