"""The measure harness and the measure/calibrate commands, on a CPU: everything that needs no GPU.

- pure pieces: shape parsing, spec detection from a device name, input-set rotation, percent of roof;
- the whole per-shape flow (check, rotate, time, place, baselines) on the CPU with a fake kernel and a fake clock,
  against numbers derived by hand;
- the record's JSON round trip, and the plot loader's keys;
- every exit-2 path of the commands, and the --interpret flow end to end in a subprocess;
- the calibrated hardware YAML: it loads, and `analyze --calibrated` uses its ceilings.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from helpers import cli
from rooflinectl.engine.op import matmul_op, softmax_op
from rooflinectl.errors import UserError
from rooflinectl.kernels.base import Kernel
from rooflinectl.measure.ceilings import calibrated_yaml, measured_section, write_calibrated
from rooflinectl.measure.harness import (
    Plan,
    Reporter,
    achieved,
    baselines_for,
    ceiling_dtypes,
    detect_spec,
    input_sets,
    measured_roofs,
    parse_shapes,
    roof_share,
    run_measure,
)
from rooflinectl.measure.records import Ceilings, DeviceInfo, MeasurementFile, load, save
from rooflinectl.render.measure import print_run
from rooflinectl.specs.hardware import load_gpu

H100 = load_gpu("h100")
H200 = load_gpu("h200")
MIB = 2**20


# --- a kernel that runs on the CPU without Triton, to drive the harness ---------------------------------------


class FakeSoftmax(Kernel):
    """Row softmax by torch; ``mode`` breaks it on purpose: "half" leaves half the output unwritten (NaN from the
    poison), "raise" raises as a kernel that fails to compile would."""

    name = "fake_softmax"
    summary = "test double"
    shape_format = "ROWSxCOLS"
    dtypes = ("bf16", "fp32")
    default_dtype = "bf16"
    default_shapes = [(512, 2048)]
    interpret_shapes = [(3, 7)]

    def __init__(self, mode: str = "ok"):
        super().__init__()
        self.mode = mode
        self.inputs_made = 0
        self.runs = 0

    def op(self, shape, dtype):
        return softmax_op(f"softmax {shape[0]}x{shape[1]}", *shape, dtype)

    def make_inputs(self, shape, dtype, device, generator):
        self.inputs_made += 1
        x = torch.randn(shape, generator=generator, device=device) * 4
        return {"x": x.to(torch.bfloat16 if dtype == "bf16" else torch.float32)}

    def make_output(self, inputs):
        return torch.empty_like(inputs["x"])

    def run(self, inputs, out, config=None):
        self._start_run()
        self.runs += 1
        if self.mode == "raise":
            raise RuntimeError("out of resources: shared memory, Required: 300000, Hardware limit: 232448")
        y = torch.softmax(inputs["x"].float(), dim=-1).to(out.dtype)
        if self.mode == "half":
            out[: out.shape[0] // 2] = y[: out.shape[0] // 2]
        else:
            out.copy_(y)
        self._record(self.run, (out.shape[0],), {"num_warps": 4, "BLOCK": 2048}, None)

    def reference(self, inputs):
        return torch.softmax(inputs["x"].double(), dim=-1)

    def eager(self, inputs):
        return torch.softmax(inputs["x"], dim=-1)

    def tolerance(self, dtype):
        return {"bf16": 1e-2, "fp32": 1e-4}[dtype]

    def config_for(self, shape, dtype):
        return None


class FakeClock:
    """A bench that returns the given (median, p20, p80) in turn and counts the runs it was handed."""

    def __init__(self, *timings):
        self.timings = list(timings)
        self.calls = 0

    def __call__(self, fn, warmup_ms=None, rep_ms=None):
        fn()
        fn()  # rotation: a second call takes the next input set
        self.calls += 1
        return self.timings.pop(0)


def cpu_info(l2_bytes: int | None = 8 * MIB) -> DeviceInfo:
    return DeviceInfo(name="fake GPU", spec="h100-sxm", l2_bytes=l2_bytes)


def run_fake(kernel, shapes, dtype="bf16", timed=True, baselines=("torch",), clock=None, ceilings=None,
             spec=H100, info=None):
    plan = Plan(shapes=shapes, dtype=dtype, device="cpu", timed=timed, baselines=baselines, seed=7)
    return run_measure(kernel, plan, spec, command="rooflinectl measure --kernel fake_softmax", reporter=Reporter(),
                       bench=clock or FakeClock(), ceilings=ceilings, info=info or cpu_info())


# --- pure pieces ----------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("device, spec_id", [
    ("NVIDIA H200", "h200"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # the SXM part's name says no form factor
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"),
])
def test_detect_spec_from_the_device_name(device, spec_id):
    from rooflinectl.specs.hardware import list_gpus

    assert detect_spec(device, list_gpus()).id == spec_id


@pytest.mark.parametrize("device", [
    "NVIDIA H100 NVL",  # a form factor no bundled spec names: never the SXM's numbers
    "NVIDIA A100 80GB PCIe",
    "Tesla V100-SXM2-16GB",  # the bundled V100 is the 32 GB part
    "NVIDIA GH200 480GB",  # not an H200
    "Intel Arc A770",
])
def test_detect_spec_refuses_to_guess(device):
    from rooflinectl.specs.hardware import list_gpus

    with pytest.raises(UserError, match="pass --gpu"):
        detect_spec(device, list_gpus())


def test_detect_spec_reports_a_tie():
    twin = H200.model_copy(update={"id": "h200-copy", "aliases": ["h200"]})
    with pytest.raises(UserError, match=r"matches several specs \(h200, h200-copy\)"):
        detect_spec("NVIDIA H200", [H200, twin])


def test_input_sets_rotate_past_four_l2s():
    l2 = 50 * MIB
    assert input_sets(4 * MIB, l2) == 50  # ceil(4 × 50 / 4)
    assert input_sets(3 * MIB, l2) == 64  # ceil(200 / 3) = 67, capped
    assert input_sets(200 * MIB, l2) == 1  # one set is already 4 L2s
    assert input_sets(199 * MIB, l2) == 2
    assert input_sets(4 * MIB, l2, free_bytes=40 * MIB) == 5  # half of 40 MiB of free memory holds 5 sets
    assert input_sets(4 * MIB, l2, free_bytes=1 * MIB) == 1


def test_roof_share_against_hand_numbers():
    # softmax 512×2048 bf16: bytes = 2 × 1,048,576 × 2 = 4,194,304; FLOPs = 5 × 1,048,576 = 5,242,880.
    # H100 SXM: 3,350 GB/s -> 1.252030 µs of memory; 66.9 TFLOP/s fp32 -> 0.0784 µs of compute: memory-bound.
    op = softmax_op("s", 512, 2048, "bf16")
    predicted, pct = roof_share(op, H100.roofs(), 2.0e-6)
    assert predicted == pytest.approx(4_194_304 / 3.35e12)
    assert predicted == pytest.approx(1.252030e-6, rel=1e-6)
    assert pct == pytest.approx(62.6015, rel=1e-5)
    gbps, tflops = achieved(op, 2.0e-6)
    assert gbps == pytest.approx(2097.152)
    assert tflops == pytest.approx(2.62144)
    # matmul 8192³ bf16: 2 × 8192³ = 1.0995e12 FLOPs; at 989.4 TFLOP/s 1.11128 ms; bytes 3 × 8192² × 2 = 402.65 MB
    # take 0.12 ms at 3.35 TB/s: compute-bound. Measured 1.5 ms -> 74.09% of the spec's roof.
    mm = matmul_op("mm", 8192, 8192, 8192, "bf16")
    predicted, pct = roof_share(mm, H100.roofs(), 1.5e-3)
    assert predicted == pytest.approx(2 * 8192**3 / 989.4e12)
    assert pct == pytest.approx(74.0854, rel=1e-5)
    # The same under measured ceilings of 750 TFLOP/s: 1.46603 ms predicted, 97.74%.
    mroofs = measured_roofs(H100.roofs(), Ceilings(copy_bandwidth_gbps=3000, tensor_tflops={"bf16": 750.0}))
    assert mroofs.label == "measured"
    assert mroofs.tensor_tflops["fp16"] == 989.4  # not measured: the spec's
    assert roof_share(mm, mroofs, 1.5e-3)[1] == pytest.approx(97.7343, rel=1e-5)


def test_ceiling_dtypes_are_those_of_tensor_ops():
    ops = [softmax_op("s", 1, 1, "bf16"), matmul_op("a", 1, 1, 1, "bf16"), matmul_op("b", 1, 1, 1, "fp16"),
           matmul_op("c", 2, 2, 2, "bf16")]
    assert ceiling_dtypes(ops) == ["bf16", "fp16"]


def test_baseline_choices():
    assert baselines_for("all") == ("torch", "compile")
    assert baselines_for("none") == ()
    assert baselines_for("compile") == ("compile",)
    with pytest.raises(UserError, match="--baseline 'eager' is not one of torch, compile, all, none"):
        baselines_for("eager")


# --- the per-shape flow on the CPU ----------------------------------------------------------------------------


def test_timed_flow_gives_the_hand_derived_numbers():
    k = FakeSoftmax()
    clock = FakeClock((2.0e-6, 1.9e-6, 2.2e-6), (3.0e-6, 2.9e-6, 3.1e-6))
    ceilings = Ceilings(copy_bandwidth_gbps=3000.0, copy_bytes=2 << 30)
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
    assert run.ceilings == ceilings and run.timer == "events" and not run.interpret


def test_a_failing_kernel_is_reported_and_not_timed():
    k = FakeSoftmax("half")
    clock = FakeClock()
    run = run_fake(k, [(64, 100)], clock=clock, ceilings=Ceilings(copy_bandwidth_gbps=3000.0))
    (r,) = run.records
    assert r.status == "failed"
    assert math.isinf(r.correctness.rel_error)  # the poison (NaN) showed
    assert not r.correctness.passed
    assert r.time_s is None and r.baselines == [] and clock.calls == 0 and k.runs == 1
    assert run.failed == [r]


def test_a_raising_kernel_is_an_error_record_not_a_crash():
    k = FakeSoftmax("raise")
    run = run_fake(k, [(64, 100), (8, 8)], ceilings=Ceilings(copy_bandwidth_gbps=3000.0))
    assert [r.status for r in run.records] == ["error", "error"]
    assert run.records[0].error.startswith("RuntimeError: out of resources")


def test_untimed_flow_checks_only():
    run = run_fake(FakeSoftmax(), [(3, 7), (5, 781)], dtype="fp32", timed=False, spec=None,
                   info=DeviceInfo(name="CPU (Triton interpreter)"))
    assert [r.status for r in run.records] == ["checked", "checked"]
    assert all(r.time_s is None and r.predicted_time_s is None for r in run.records)
    assert run.interpret and run.timer is None and run.ceilings is None
    assert run.records[0].launches[0].note == "occupancy not computed: no hardware spec (--gpu)"


def test_record_json_round_trip_and_plot_keys(tmp_path):
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=FakeClock((2e-6, 2e-6, 2e-6), (3e-6, 3e-6, 3e-6)),
                   ceilings=Ceilings(copy_bandwidth_gbps=3000.0))
    failing = run_fake(FakeSoftmax("half"), [(4, 4)], ceilings=Ceilings(copy_bandwidth_gbps=1.0))
    run.records += failing.records
    path = tmp_path / "r.json"
    save(run, path)
    data = json.loads(path.read_text())  # standard JSON (inf is the string "Infinity")
    assert data["gpu"]["name"] == "fake GPU"
    for rec in data["records"]:
        assert {"kernel", "op", "shape", "dtype", "flops", "bytes", "time_s"} <= set(rec)
    assert data["records"][0]["op"] == "softmax 512x2048" and data["records"][0]["shape"] == [512, 2048]
    assert data["records"][1]["correctness"]["rel_error"] == "Infinity"
    back = load(path)
    assert back == run
    assert isinstance(back, MeasurementFile)
    # And `plot --measured` reads it: the timed record, with the engine's count.
    from rooflinectl.plot.build import load_measured

    measured = load_measured(path)
    assert measured.gpu.spec == "h100-sxm" and measured.matches(H100)
    assert [(r.op, r.flops, r.bytes, r.time_s) for r in measured.records] == [
        ("softmax 512x2048", 5_242_880, 4_194_304, 2e-6), ("softmax 4x4", 80, 64, None)]


def test_loading_a_foreign_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpu": {"name": "x"}, "records": [], "bogus": 1}')
    with pytest.raises(UserError, match="bad.json: field 'bogus': Extra inputs are not permitted"):
        load(bad)
    bad.write_text("[1, 2")
    with pytest.raises(UserError, match="malformed JSON at line 1"):
        load(bad)


def test_save_to_an_unwritable_path_is_a_user_error(tmp_path):
    run = run_fake(FakeSoftmax(), [(3, 7)], timed=False, spec=None)
    with pytest.raises(UserError, match="cannot write"):
        save(run, tmp_path / "missing" / "r.json")


# --- the commands' exit-2 paths -------------------------------------------------------------------------------


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("args, fragments", [
    (["measure"], ["give --kernel NAME"]),
    (["measure", "--kernel", "fused_softmx"], ["unknown kernel 'fused_softmx'", "did you mean: fused_softmax"]),
    (["measure", "--kernel", "fused_softmax", "--shape", "4096x"], ["shape '4096x' is not ROWSxCOLS"]),
    (["measure", "--kernel", "fused_softmax", "--shape", "0x10"], ["ROWS must be a positive integer"]),
    (["measure", "--kernel", "fused_softmax", "--dtype", "fp64"], ["dtype 'fp64' is not one of bf16, fp16, fp32"]),
    (["measure", "--kernel", "fused_softmax", "--baseline", "eager"], ["--baseline 'eager'"]),
    (["measure", "--kernel", "fused_softmax"], ["no CUDA GPU", "pip install -e '.[gpu]'", "--interpret"]),
    (["measure", "--kernel", "fused_softmax", "--save", "/nonexistent-dir/r.json"],
     ["--save /nonexistent-dir/r.json: cannot write"]),
    (["calibrate", "-o", "/nonexistent-dir/h.yaml"], ["-o /nonexistent-dir/h.yaml: cannot write"]),
])
def test_measure_bad_input_is_one_line_and_exit_2(args, fragments):
    assert_one_line_error(cli(*args), *fragments)


def test_save_to_a_folder_is_refused(tmp_path):
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax", "--save", str(tmp_path)), "is a folder")


def test_no_gpu_leaves_no_file_behind(tmp_path):
    out = tmp_path / "r.json"
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax", "--save", str(out)), "no CUDA GPU")
    assert not out.exists()
    yaml_out = tmp_path / "h.yaml"
    assert_one_line_error(cli("calibrate", "-o", str(yaml_out)), "no CUDA GPU", "pip install -e '.[gpu]'")
    assert not yaml_out.exists()


def test_missing_torch_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax"), "torch is not installed",
                          "pip install -e '.[gpu]'", "--interpret")


def test_unknown_device_asks_for_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA Quadro Q9000")
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax"),
                          "no hardware spec matches the device 'NVIDIA Quadro Q9000'", "--gpu")


def test_device_name_picks_the_spec(monkeypatch):
    from rooflinectl.measure.harness import detect_device_spec

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    assert detect_device_spec().id == "h200"


def test_list_needs_no_torch():
    code = ("import sys, atexit; atexit.register(lambda: print([m for m in ('torch', 'triton') if m in sys.modules], "
            "file=sys.stderr)); from rooflinectl.cli import main; "
            "sys.argv = ['rooflinectl', 'measure', '--list', '--json']; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["fused_softmax", "copy", "matmul", "rmsnorm_linear"]
    assert all(set(r) == {"name", "summary", "available"} for r in rows)
    assert proc.stderr.strip().splitlines()[-1] == "[]"


# --- --interpret end to end, in a fresh process (TRITON_INTERPRET must be set before triton is imported) ------


def rooflinectl(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from rooflinectl.cli import main; sys.argv[0] = 'rooflinectl'; main()"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(COLUMNS="120", NO_COLOR="1")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    out = tmp_path_factory.mktemp("interp") / "softmax.json"
    proc = rooflinectl("measure", "--kernel", "fused_softmax", "--interpret", "--shape", "5x781,1x1",
                       "--dtype", "fp32", "--gpu", "h200", "--seed", "11", "--save", str(out), "--json")
    return proc, out


def test_interpret_checks_correctness_only(interpreted, capsys):
    proc, out = interpreted
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no progress bar, no interpreter warnings
    run = load(out)
    assert MeasurementFile.model_validate_json(proc.stdout) == run  # --json prints what --save writes
    assert run.command == ("rooflinectl measure --kernel fused_softmax --shape 5x781,1x1 --dtype fp32 --gpu h200 "
                           f"--seed 11 --interpret --save {out} --json")
    assert run.interpret and run.gpu.name == "CPU (Triton interpreter)" and run.gpu.spec == "h200"
    assert [r.shape for r in run.records] == [[5, 781], [1, 1]]
    for r in run.records:
        assert r.status == "checked" and r.correctness.passed and r.correctness.rel_error < 1e-4
        assert r.time_s is None and r.correctness.tolerance == 1e-4
    # 5×781 fp32: 2 × 3,905 × 4 = 31,240 bytes (softmax_op); predicted on the H200 spec: 31,240 / 4.8e12 s.
    assert run.records[0].bytes == 31_240
    assert run.records[0].predicted_time_s == pytest.approx(31_240 / 4.8e12)
    # The same record, laid out for a terminal, says that nothing was timed.
    print_run(run)
    text = capsys.readouterr().out
    assert "checked correctness only, in Triton's interpreter on the CPU: nothing was timed" in text
    row = next(line for line in text.splitlines() if line.lstrip().startswith("5x781"))
    assert f"ok {run.records[0].correctness.rel_error:.1e}" in row and "1e-04" in row


def test_interpret_launch_anatomy_says_what_is_unknown(interpreted):
    _, out = interpreted
    launch = load(out).records[0].launches[0]
    assert launch.function == "_softmax_rows_kernel"
    assert launch.grid == [launch.programs] and launch.num_warps == launch.config["num_warps"]
    assert launch.threads_per_program == 32 * launch.num_warps
    # The interpreter compiles nothing: no registers, spills or shared memory, and the occupancy is an upper bound
    # from the warps alone: 64 warps per SM / num_warps.
    assert (launch.n_regs, launch.n_spills, launch.shared_bytes) == (None, None, None)
    assert launch.occupancy_upper_bound
    assert launch.programs_per_sm == 64 // launch.num_warps
    assert any("no compiled kernel" in w for w in launch.warnings)
    assert any("SMs" in w and "sit idle" in w for w in launch.warnings)


def test_anatomy_of_a_kernel_compiled_for_hopper_on_the_cpu():
    """Triton ships ptxas, so a kernel compiles for sm_90 here: the compiler's metadata (shared memory, warps) is
    real. Registers and spills come from loading the binary into a driver, which a CPU machine lacks: they stay
    unknown, and the occupancy, counted from warps and shared memory, is an upper bound and says so.

    Runs in a fresh interpreter without TRITON_INTERPRET: test_kernels.py turns the interpreter on for this whole
    process, and an interpreted kernel cannot be compiled for a GPU target."""
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _HOPPER_ANATOMY], capture_output=True, text=True, env=env)
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stdout + proc.stderr


_HOPPER_ANATOMY = """
import sys, warnings
import pytest
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from rooflinectl.specs.hardware import load_gpu
from rooflinectl.kernels.base import Launch
from rooflinectl.kernels.softmax import _softmax_rows_kernel
from rooflinectl.measure.harness import launch_record

sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "sxr": "i32", "sxc": "i32",
       "syr": "i32", "syc": "i32", "BLOCK": "constexpr", "ROWS": "constexpr", "HINTS": "constexpr",
       "GDC": "constexpr"}
constexprs = {"BLOCK": 1024, "ROWS": 4, "HINTS": True, "GDC": False}
src = ASTSource(fn=_softmax_rows_kernel, signature=sig, constexprs=constexprs)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8})
    except Exception as err:  # no ptxas in this triton build
        print(f"cannot compile for sm_90 here: {err}")
        sys.exit(3)
launch = Launch("_softmax_rows_kernel", (1024,), {"num_warps": 8}, compiled)
rec = launch_record(launch, load_gpu("h200"))
# From the compiler: 8 warps (256 threads) and the shared memory of the row reductions' scratch.
assert rec.num_warps == 8 and rec.threads_per_program == 256
assert rec.shared_bytes == compiled.metadata.shared and rec.shared_bytes > 0
# Not without a driver:
assert rec.n_regs is None and rec.n_spills is None
# 64 warps per SM / 8 = 8 programs (shared memory allows far more); 1,024 programs / (8 x 132) = 1 wave.
assert (rec.programs_per_sm, rec.occupancy, rec.limiter, rec.waves) == (8, 1.0, "warps", 1), rec
assert rec.occupancy_upper_bound
assert rec.last_wave_fill == pytest.approx(1024 / 1056)
assert any("upper bound" in w and "registers" in w for w in rec.warnings)

# The GPU-only code paths compile for sm_90 too: the rows kernel as a programmatic dependent (griddepcontrol),
# and the split kernel's atomics, bounded wait and fallback.
from rooflinectl.kernels.softmax import _softmax_split_kernel

pdl = ASTSource(fn=_softmax_rows_kernel, signature=sig, constexprs={**constexprs, "GDC": True})
ptx = triton.compile(pdl, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
assert "griddepcontrol.wait" in ptx and "griddepcontrol.launch_dependents" in ptx
split_sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "count_ptr": "*i32", "part_ptr": "*fp32", "n_cols": "i32",
             "n_parts": "i32", "sxr": "i32", "sxc": "i32", "syr": "i32", "syc": "i32", **{
             k: "constexpr" for k in ("BLOCK", "CHUNKS", "PARTS", "HINTS", "MAX_POLLS", "FALLBACK_BLOCK")}}
from rooflinectl.kernels.softmax import _softmax_online_kernel

online_sig = {**{k: v for k, v in sig.items() if k != "ROWS"}, "REVERSE": "constexpr"}
online = ASTSource(fn=_softmax_online_kernel, signature=online_sig,
                   constexprs={"BLOCK": 16384, "REVERSE": True, "HINTS": True, "GDC": True})
ptx = triton.compile(online, target=GPUTarget("cuda", 90, 32), options={"num_warps": 16}).asm["ptx"]
assert "griddepcontrol.wait" in ptx and "evict_last" in ptx and "evict_first" in ptx
for chunks in (1, 2):
    split = ASTSource(fn=_softmax_split_kernel, signature=split_sig, constexprs={
        "BLOCK": 8192, "CHUNKS": chunks, "PARTS": 16, "HINTS": chunks > 1, "MAX_POLLS": 1024, "FALLBACK_BLOCK": 1024})
    ptx = triton.compile(split, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
    lines = ptx.splitlines()
    assert any("atom." in line and "acq_rel" in line and ".add" in line for line in lines), "publish: acq_rel add"
    assert any("acquire" in line and "atom." not in line for line in lines), "poll: a load-acquire"
"""


# --- calibrate's hardware file --------------------------------------------------------------------------------


def fake_measured():
    ceilings = Ceilings(copy_bandwidth_gbps=4251.37, copy_bytes=2 << 30,
                        tensor_tflops={"bf16": 760.04, "fp16": 771.2, "tf32": 401.9, "fp8": 1302.55})
    return measured_section(ceilings, device_name="NVIDIA H200", date="2026-12-01T10:00:00+00:00",
                            command="rooflinectl calibrate -o my-h200.yaml --gpu h200", torch_version="2.11.0",
                            triton_version="3.6.0", driver="580.159.03")


def test_calibrated_yaml_loads_and_analyze_uses_it(tmp_path):
    out = tmp_path / "my-h200.yaml"
    gpu = write_calibrated(H200, fake_measured(), out)
    loaded = load_gpu(str(out))
    assert loaded == gpu
    assert loaded.id == "my-h200" and loaded.aliases == []  # never shadows the bundled h200 by accident
    assert loaded.measured.copy_bandwidth_gbps == 4251.4
    assert loaded.measured.tensor_tflops == {"bf16": 760.0, "fp16": 771.2, "tf32": 401.9, "fp8": 1302.5}
    assert loaded.memory == H200.memory and loaded.compute == H200.compute  # the spec's content, unchanged
    assert out.read_text().startswith("# NVIDIA H200 SXM 141GB: the spec sheet's numbers")
    assert not (tmp_path / "my-h200.yaml.tmp").exists()

    result = cli("analyze", "decode", "--gpu", str(out), "--calibrated", "--json")
    assert result.exit_code == 0, result.output
    hw = json.loads(result.stdout)["hardware"]
    assert hw["id"] == "my-h200"
    assert hw["bandwidth_gbps"] == 4251.4
    assert hw["peak_tflops"] == 760.0  # decode runs in bf16
    spec = json.loads(cli("analyze", "decode", "--gpu", str(out), "--json").stdout)["hardware"]
    assert spec["bandwidth_gbps"] == 4800 and spec["peak_tflops"] == 989.4


def test_calibrated_file_named_like_the_spec_keeps_its_aliases(tmp_path):
    text = calibrated_yaml(H200, fake_measured(), tmp_path / "h200.yaml")
    out = tmp_path / "h200.yaml"
    out.write_text(text)
    gpu = load_gpu(str(out))
    assert gpu.id == "h200" and gpu.aliases == H200.aliases and gpu.measured is not None


# --- the commands' wiring and layout when a GPU is there (the GPU faked) -------------------------------------


def test_timed_run_lays_out_every_number(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    clock = FakeClock((2.0e-6, 1.9e-6, 2.2e-6), (3.0e-6, 2.9e-6, 3.1e-6))
    run = run_fake(FakeSoftmax(), [(512, 2048)], clock=clock,
                   ceilings=Ceilings(copy_bandwidth_gbps=3000.0, tensor_tflops={"bf16": 760.0}))
    print_run(run)
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if line.lstrip().startswith("512x2048")]
    # shape, check, time, band, GB/s, TFLOP/s, predicted, %spec, %meas (the numbers of the test above)
    assert rows[0] == ["512x2048", "ok", f"{run.records[0].correctness.rel_error:.1e}", "2", "µs", "1.9–2.2", "µs",
                       "2,097", "2.6", "1.25", "µs", "63", "70"]
    # the torch baseline: time, band, GB/s, TFLOP/s, its error, the kernel's speedup
    assert rows[1][:11] == ["512x2048", "torch", "eager", "3", "µs", "2.9–3.1", "µs", "1,398", "1.7",
                            f"{run.records[0].baselines[0].rel_error:.1e}", "1.50"]
    # the launch: grid 512, 4 warps, 128 threads, no registers/spills/smem known, 16 per SM, ≤100%, 1 wave
    assert rows[2] == ["512x2048", "run", "512", "4", "128", "-", "-", "-", "16", "≤100%", "1", "warps"]
    assert "ceilings measured in this run: copy 3,000 GB/s, bf16 matmul 760 TFLOP/s" in text
    assert "reproduce: rooflinectl measure --kernel fake_softmax" in text


def fake_gpu(monkeypatch, name="NVIDIA H200"):
    import rooflinectl.measure.harness as harness

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    monkeypatch.setattr(harness, "device_info", lambda spec, device: DeviceInfo(
        name=name, spec=spec.id, driver="580.159.03", sm_count=132, l2_bytes=60 * MIB))


def test_measure_detects_the_spec_and_exits_1_on_a_wrong_result(monkeypatch, tmp_path):
    import rooflinectl.measure.harness as harness

    fake_gpu(monkeypatch)
    seen = {}

    def fake_run(kernel, plan, spec, *, command, reporter=None):
        seen.update(kernel=kernel.name, plan=plan, spec=spec.id, command=command)
        return run_fake(FakeSoftmax("half"), [(4, 4)], ceilings=Ceilings(copy_bandwidth_gbps=1.0))

    monkeypatch.setattr(harness, "run_measure", fake_run)
    out = tmp_path / "r.json"
    result = cli("measure", "--kernel", "fused_softmax", "--shape", "4096x4096", "--baseline", "all",
                 "--seed", "5", "--save", str(out))
    assert result.exit_code == 1, result.output
    assert seen["spec"] == "h200" and seen["kernel"] == "fused_softmax"
    plan = seen["plan"]
    assert (plan.shapes, plan.dtype, plan.device, plan.timed, plan.baselines, plan.seed) == (
        [(4096, 4096)], "bf16", "cuda", True, ("torch", "compile"), 5)
    assert seen["command"] == ("rooflinectl measure --kernel fused_softmax --shape 4096x4096 --dtype bf16 "
                               f"--baseline all --gpu h200 --seed 5 --save {out}")
    assert "FAILED inf" in result.stdout and "wrong result: not timed" in result.stdout
    assert load(out).records[0].status == "failed"


def test_calibrate_writes_a_loadable_file(monkeypatch, tmp_path):
    import rooflinectl.measure.ceilings as probes

    fake_gpu(monkeypatch)
    asked = {}

    def fake_ceilings(bench, l2_bytes, dtypes, on_step=lambda text: None, n=8192):
        asked.update(l2=l2_bytes, dtypes=tuple(dtypes))
        return Ceilings(copy_bandwidth_gbps=4251.37, tensor_tflops={"bf16": 760.04, "fp16": 771.2},
                        notes=["fp8 matmul not measured: test"])

    monkeypatch.setattr(probes, "measure_ceilings", fake_ceilings)
    out = tmp_path / "lab-h200.yaml"
    result = cli("calibrate", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert asked == {"l2": 60 * MIB, "dtypes": ("bf16", "fp16", "tf32", "fp8")}
    gpu = load_gpu(str(out))
    assert gpu.id == "lab-h200" and gpu.memory == H200.memory
    m = gpu.measured
    assert (m.device_name, m.driver, m.copy_bandwidth_gbps, m.tensor_tflops) == (
        "NVIDIA H200", "580.159.03", 4251.4, {"bf16": 760.0, "fp16": 771.2})
    assert m.command == f"rooflinectl calibrate -o {out} --gpu h200"
    assert m.torch_version == torch.__version__
    rows = {line.strip().split("  ")[0]: line.split() for line in result.stdout.splitlines() if "/s" in line}
    assert rows["copy bandwidth (read + write)"][-5:] == ["4,251", "GB/s", "4,800", "GB/s", "89%"]
    assert rows["bf16 matmul"][-5:] == ["760.0", "TFLOP/s", "989.4", "TFLOP/s", "77%"]
    assert "fp8 matmul not measured: test" in result.stdout
    as_json = json.loads(cli("calibrate", "-o", str(out), "--json").stdout)
    assert as_json["id"] == "lab-h200" and as_json["measured"]["copy_bandwidth_gbps"] == 4251.4
