"""The measure harness on a CPU: the per-shape steps (predict, check, time, shares, baselines) with a fake kernel and
a fake clock, against numbers derived by hand; the launch anatomy of a kernel compiled for Hopper."""

from __future__ import annotations

import math

import pytest
from kernel_checks import Sm90Job, compile_for_hopper
from measure_fakes import H100, FakeClock, FakeSoftmax, run_fake

from rooflinectl.engine.count.primitives import matmul_op, softmax_op
from rooflinectl.errors import UserError
from rooflinectl.measure.harness import parse_shapes, predict, shares
from rooflinectl.records.kernel import DeviceInfo, LaunchRecord, RunCeilings


def softmax_kernel():
    from rooflinectl.kernels.registry import get_kernel

    return get_kernel("fused_softmax")


def test_parse_shapes_repeats_and_comma_lists():
    k = softmax_kernel()
    assert parse_shapes(k, ["4096x16384"]) == [(4096, 16384)]
    assert parse_shapes(k, ["4096x1024,4096x4096", "1×7", "8_192x2"]) == [(4096, 1024), (4096, 4096), (1, 7),
                                                                          (8192, 2)]


@pytest.mark.parametrize("text, fragment", [
    ("4096", "has 1 sizes, expected ROWSxCOLS"),
    ("4096x", "is not ROWSxCOLS"),
    ("0x16", "ROWS must be a positive integer"),
    ("axb", "is not ROWSxCOLS"),
    ("4096x1024,", "empty item"),
    (",", "no shape given"),
])
def test_bad_shapes_are_user_errors(text, fragment):
    with pytest.raises(UserError, match=fragment):
        parse_shapes(softmax_kernel(), [text])


def test_roof_share_against_hand_numbers():
    # softmax 512×2048 bf16: bytes = 2 × 1,048,576 × 2 = 4,194,304; FLOPs = 5 × 1,048,576 = 5,242,880.
    # H100 SXM: 3,350 GB/s -> 1.252030 µs of memory; 66.9 TFLOP/s fp32 -> 0.0784 µs of compute: memory-bound.
    op = softmax_op("s", 512, 2048, "bf16")
    predicted = predict(FakeSoftmax(), (512, 2048), "bf16", op, H100.roofs()).predicted_time_s
    pct = shares(op, H100.roofs(), None, 2.0e-6).spec_roof_pct
    assert predicted == pytest.approx(4_194_304 / 3.35e12)
    assert predicted == pytest.approx(1.252030e-6, rel=1e-6)
    assert pct == pytest.approx(62.6015, rel=1e-5)
    rates = shares(op, H100.roofs(), None, 2.0e-6)
    gbps, tflops = rates.achieved_gbps, rates.achieved_tflops
    assert gbps == pytest.approx(2097.152)
    assert tflops == pytest.approx(2.62144)
    # matmul 8192³ bf16: 2 × 8192³ = 1.0995e12 FLOPs; at 989.4 TFLOP/s 1.11128 ms; bytes 3 × 8192² × 2 = 402.65 MB
    # take 0.12 ms at 3.35 TB/s: compute-bound. Measured 1.5 ms -> 74.09% of the spec's roof.
    mm = matmul_op("mm", 8192, 8192, 8192, "bf16")
    predicted = predict(FakeSoftmax(), (8192, 8192), "bf16", mm, H100.roofs()).predicted_time_s
    pct = shares(mm, H100.roofs(), None, 1.5e-3).spec_roof_pct
    assert predicted == pytest.approx(2 * 8192**3 / 989.4e12)
    assert pct == pytest.approx(74.0854, rel=1e-5)
    # The same under measured ceilings of 750 TFLOP/s: 1.46603 ms predicted, 97.74%.
    ceilings = RunCeilings(copy_bandwidth_gbps=3000, tensor_tflops={"bf16": 750.0})
    mroofs = H100.roofs().with_ceilings(ceilings)
    assert mroofs.label == "measured"
    assert mroofs.tensor_tflops["fp16"] == 989.4  # not measured: the spec's
    measured = shares(mm, H100.roofs(), ceilings, 1.5e-3)
    assert measured.measured_roof_pct == pytest.approx(97.7343, rel=1e-5)
    assert measured.measured_predicted_time_s == pytest.approx(2 * 8192**3 / 750e12)
    assert measured.notes == []
    # A tensor op whose data type has no measured ceiling says that its '% of measured' used the spec's peak.
    fp16 = matmul_op("mm", 8192, 8192, 8192, "fp16")
    assert shares(fp16, H100.roofs(), ceilings, 1.5e-3).notes == [
        "no fp16 matmul ceiling measured: '% of measured' uses the spec's peak"]


def test_timed_flow_gives_the_hand_derived_numbers():
    k = FakeSoftmax()
    clock = FakeClock((2.0e-6, 1.9e-6, 2.2e-6), (3.0e-6, 2.9e-6, 3.1e-6))
    ceilings = RunCeilings(copy_bandwidth_gbps=3000.0, copy_bytes=2 << 30)
    run = run_fake(k, [(512, 2048)], clock=clock, ceilings=ceilings)
    (r,) = run.records
    assert r.status == "passed" and r.correctness.passed and r.correctness.rel_error < 1e-2
    assert (r.flops, r.bytes) == (5_242_880, 4_194_304)
    assert r.time_s == 2.0e-6
    assert (r.timing.p20_s, r.timing.p80_s) == (1.9e-6, 2.2e-6)
    assert r.achieved_gbps == pytest.approx(2097.152)
    assert r.bound == "memory"
    assert r.predicted_time_s == pytest.approx(1.252030e-6, rel=1e-6)
    assert r.spec_roof_pct == pytest.approx(62.6015, rel=1e-5)
    # Under the copy ceiling of 3,000 GB/s: 4,194,304 / 3e12 = 1.398101 µs, 69.905% of 2 µs.
    assert r.measured_predicted_time_s == pytest.approx(1.398101e-6, rel=1e-6)
    assert r.measured_roof_pct == pytest.approx(69.9051, rel=1e-5)
    (b,) = r.baselines
    assert (b.name, b.time_s, b.speedup) == ("torch", 3.0e-6, pytest.approx(1.5))
    assert b.achieved_gbps == pytest.approx(1398.101, rel=1e-6)
    assert b.rel_error < 1e-2
    # Rotation: 8 MiB of L2 × 4 over a 4 MiB working set (2 MiB in, 2 MiB out) = 8 input sets, each made once.
    assert r.timing.input_sets == 8 and k.inputs_made == 8
    assert clock.calls == 2
    # One launch recorded, its anatomy computed on the spec; no compiled kernel, so an upper bound.
    (launch,) = r.launches
    assert launch.grid == [512] and launch.num_warps == 4 and launch.threads_per_program == 128
    assert launch.occupancy_upper_bound and launch.n_regs is None
    assert launch.waves == 1 and launch.programs_per_sm == 16  # 64 warps / 4 per program
    assert run.ceilings == ceilings and run.timer == "cuda_graph" and not run.interpret  # the default
    assert r.timing.timer == "cuda_graph" and b.timing.timer == "cuda_graph" and r.timing.capture_error is None


def test_a_failing_kernel_is_reported_and_not_timed():
    k = FakeSoftmax("half")
    clock = FakeClock()
    run = run_fake(k, [(64, 100)], clock=clock, ceilings=RunCeilings(copy_bandwidth_gbps=3000.0))
    (r,) = run.records
    assert r.status == "failed"
    assert math.isinf(r.correctness.rel_error)  # the poison (NaN) showed
    assert not r.correctness.passed
    assert r.time_s is None and r.baselines == [] and clock.calls == 0 and k.runs == 1
    assert run.failed == [r]


def test_a_raising_kernel_is_an_error_record_not_a_crash():
    k = FakeSoftmax("raise")
    run = run_fake(k, [(64, 100), (8, 8)], ceilings=RunCeilings(copy_bandwidth_gbps=3000.0))
    assert [r.status for r in run.records] == ["error", "error"]
    assert run.records[0].error.startswith("RuntimeError: out of resources")


def test_untimed_flow_checks_only():
    run = run_fake(FakeSoftmax(), [(3, 7), (5, 781)], dtype="fp32", timed=False, spec=None,
                   info=DeviceInfo(name="CPU (Triton interpreter)"))
    assert [r.status for r in run.records] == ["checked", "checked"]
    assert all(r.time_s is None and r.predicted_time_s is None for r in run.records)
    assert run.interpret and run.timer is None and run.ceilings is None
    assert run.records[0].launches[0].note == "occupancy not computed: no hardware spec (--gpu)"


def test_the_record_names_the_engines_op_its_kind_and_fusions_and_the_shape_apart():
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=FakeClock((2e-6, 2e-6, 2e-6), (3e-6, 3e-6, 3e-6)),
                   ceilings=RunCeilings(copy_bandwidth_gbps=3000.0))
    (r,) = run.records
    assert (r.op, r.op_kind, r.op_fuses, r.shape, r.shape_text) == ("softmax", "attention", [], [512, 2048],
                                                                    "512x2048")
    assert r.notes == [] and run.notes == []


def test_a_timing_failure_keeps_the_check():
    class Boom(FakeClock):
        def __call__(self, fn, warmup_ms=None, rep_ms=None):
            raise RuntimeError("CUDA out of memory")

    run = run_fake(FakeSoftmax(), [(64, 100)], clock=Boom(), ceilings=RunCeilings(copy_bandwidth_gbps=3000.0))
    (r,) = run.records
    assert r.status == "error" and r.error == "RuntimeError: CUDA out of memory"
    assert r.correctness.passed and r.launches and r.time_s is None and r.baselines == []


_SOFTMAX = "rooflinectl.kernels.softmax:"
_ROWS_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "sxr": "i32", "sxc": "i32",
             "syr": "i32", "syc": "i32"}
_ROWS = {"BLOCK": 1024, "ROWS": 4, "HINTS": True}


def test_anatomy_of_a_kernel_compiled_for_hopper_on_the_cpu():
    """Triton ships ptxas, so a kernel compiles for sm_90 here: the compiler's metadata (shared memory, warps) is
    real. Registers and spills come from loading the binary into a driver, which a CPU machine lacks: they stay
    unknown, and the occupancy, counted from warps and shared memory, is an upper bound and says so.

    Compiled in a fresh interpreter without TRITON_INTERPRET (``kernel_checks.compile_for_hopper``), which also
    computes the launch record there, from the compiled kernel itself. The GPU-only code paths compile for sm_90 too:
    the rows kernel as a programmatic dependent (griddepcontrol), the online kernel's cache hints, and the split
    kernel's atomics, bounded wait and fallback."""
    split_sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "count_ptr": "*i32", "part_ptr": "*fp32", "n_cols": "i32",
                 "n_parts": "i32", "sxr": "i32", "sxc": "i32", "syr": "i32", "syc": "i32"}
    rows, pdl, online, *splits = compile_for_hopper([
        Sm90Job(_SOFTMAX + "_softmax_rows_kernel", _ROWS_SIG, {**_ROWS, "GDC": False}, num_warps=8,
                launch_on="h200", grid=(1024,)),
        Sm90Job(_SOFTMAX + "_softmax_rows_kernel", _ROWS_SIG, {**_ROWS, "GDC": True}, num_warps=8),
        Sm90Job(_SOFTMAX + "_softmax_online_kernel", _ROWS_SIG,
                {"BLOCK": 16384, "HINTS": True, "GDC": True, "REVERSE": True}, num_warps=16),
        *(Sm90Job(_SOFTMAX + "_softmax_split_kernel", split_sig,
                  {"BLOCK": 8192, "CHUNKS": chunks, "PARTS": 16, "HINTS": chunks > 1, "MAX_POLLS": 1024,
                   "FALLBACK_BLOCK": 1024}, num_warps=8) for chunks in (1, 2)),
    ])
    assert rows.launch is not None
    rec = LaunchRecord.model_validate(rows.launch)
    # From the compiler: 8 warps (256 threads) and the shared memory of the row reductions' scratch.
    assert rec.function == "_softmax_rows_kernel" and rec.grid == [1024]
    assert rec.num_warps == 8 and rec.threads_per_program == 256
    assert rec.shared_bytes == rows.shared and rec.shared_bytes > 0
    # Not without a driver:
    assert rec.n_regs is None and rec.n_spills is None
    # 64 warps per SM / 8 = 8 programs (shared memory allows far more); 1,024 programs / (8 x 132) = 1 wave.
    assert (rec.programs_per_sm, rec.occupancy, rec.limiter, rec.waves) == (8, 1.0, "warps", 1), rec
    assert rec.occupancy_upper_bound
    assert rec.last_wave_fill == pytest.approx(1024 / 1056)
    assert any("upper bound" in w and "registers" in w for w in rec.warnings)

    assert "griddepcontrol.wait" in pdl.ptx and "griddepcontrol.launch_dependents" in pdl.ptx
    assert "griddepcontrol.wait" in online.ptx and "evict_last" in online.ptx and "evict_first" in online.ptx
    for split in splits:
        lines = split.ptx.splitlines()
        assert any("atom." in line and "acq_rel" in line and ".add" in line for line in lines), "publish: acq_rel add"
        assert any("acquire" in line and "atom." not in line for line in lines), "poll: a load-acquire"
