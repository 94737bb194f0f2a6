"""The measure and calibrate commands: every exit-2 path, --interpret end to end in a fresh process, the wiring
when a GPU is there (faked), and the golden output of `measure --interpret`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from measure_fakes import H200, MIB, FakeSoftmax, run_fake

from helpers import cli, option_help
from rooflinectl.records.kernel import DeviceInfo, MeasurementFile, RunCeilings, load
from rooflinectl.render.measure import print_run
from rooflinectl.specs.hardware import load_gpu

GOLDEN = Path(__file__).parents[1] / "golden"


def test_the_help_lists_every_timer_baseline_and_collective():
    """The help texts name the choices their options take (written out, so that --help imports no pydantic model):
    each timer, each --baseline choice, and each collective, in COLLECTIVES' order."""
    from rooflinectl.measure.bench import TIMERS
    from rooflinectl.measure.request import BASELINE_CHOICES
    from rooflinectl.specs.measured import COLLECTIVES

    for flag, names in (("--timer", TIMERS), ("--baseline", BASELINE_CHOICES)):
        text = option_help("measure", flag)
        assert all(re.search(rf"\b{n}\b", text) for n in names), text
    assert ", ".join(COLLECTIVES) in option_help("calibrate", "--collectives")


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


def test_calibrate_without_a_gpu_suggests_no_option_it_lacks(tmp_path, monkeypatch):
    """Issue 18: calibrate without CUDA suggested --interpret, which only measure has."""
    result = cli("calibrate", "-o", str(tmp_path / "h.yaml"))
    assert_one_line_error(result, "no CUDA GPU", "no CPU mode", "on the machine with the GPU")
    assert "--interpret" not in result.stderr
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    result = cli("calibrate", "-o", str(tmp_path / "h.yaml"))
    assert_one_line_error(result, "calibrate needs torch and triton", "on the machine with the GPU")
    assert "--interpret" not in result.stderr


def test_missing_torch_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax"), "torch is not installed",
                          "pip install -e '.[gpu]'", "--interpret")


def test_unknown_device_asks_for_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA Quadro Q9000")
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax"),
                          "no hardware spec matches the device 'NVIDIA Quadro Q9000'", "--gpu")


def test_list_needs_no_torch():
    code = ("import sys, atexit; atexit.register(lambda: print([m for m in ('torch', 'triton') if m in sys.modules], "
            "file=sys.stderr)); from rooflinectl.cli import main; "
            "sys.argv = ['rooflinectl', 'measure', '--list', '--json']; main()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [r["name"] for r in rows] == ["fused_softmax", "copy", "matmul", "rmsnorm_linear", "flash_attention",
                                        "flash_decoding", "flash_decoding_paged", "naive_attention"]
    # "available" (whether a registered kernel's module was installed) is gone: every registered kernel ships
    # with the package, so it was always true (issue 11, dead code).
    assert all(set(r) == {"name", "summary"} for r in rows)
    assert proc.stderr.strip().splitlines()[-1] == "[]"



# --- --interpret end to end, in a fresh process (TRITON_INTERPRET must be set before triton is imported) ------


def rooflinectl(*args: str, columns: int = 120) -> subprocess.CompletedProcess:
    code = "import sys; from rooflinectl.cli import main; sys.argv[0] = 'rooflinectl'; main()"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(COLUMNS=str(columns), NO_COLOR="1")
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



# --- the commands' wiring and layout when a GPU is there (the GPU faked) -------------------------------------


def fake_gpu(monkeypatch, name="NVIDIA H200"):
    import rooflinectl.measure.device as device
    import rooflinectl.measure.harness as harness

    def info(spec, device_kind):
        return DeviceInfo(name=name, spec=spec.id, driver="580.159.03", sm_count=132, l2_bytes=60 * MIB)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: name)
    monkeypatch.setattr(harness, "device_info", info)
    monkeypatch.setattr(device, "device_info", info)


def test_measure_detects_the_spec_and_exits_1_on_a_wrong_result(monkeypatch, tmp_path):
    import rooflinectl.measure.harness as harness

    fake_gpu(monkeypatch)
    seen = {}

    def fake_run(kernel, plan, spec, *, command, reporter=None):
        seen.update(kernel=kernel.name, plan=plan, spec=spec.id, command=command)
        return run_fake(FakeSoftmax("half"), [(4, 4)], ceilings=RunCeilings(copy_bandwidth_gbps=1.0))

    monkeypatch.setattr(harness, "run_measure", fake_run)
    out = tmp_path / "r.json"
    result = cli("measure", "--kernel", "fused_softmax", "--shape", "4096x4096", "--baseline", "all",
                 "--seed", "5", "--save", str(out))
    assert result.exit_code == 1, result.output
    assert seen["spec"] == "h200" and seen["kernel"] == "fused_softmax"
    plan = seen["plan"]
    assert (plan.shapes, plan.dtype, plan.device, plan.timed, plan.baselines, plan.seed, plan.timer) == (
        [(4096, 4096)], "bf16", "cuda", True, ("torch", "compile"), 5, "cuda_graph")  # graph replay by default
    assert seen["command"] == ("rooflinectl measure --kernel fused_softmax --shape 4096x4096 --dtype bf16 "
                               f"--baseline all --gpu h200 --seed 5 --timer cuda_graph --save {out}")
    assert "FAILED inf" in result.stdout and "wrong result: not timed" in result.stdout
    assert load(out).records[0].status == "failed"


def test_calibrate_writes_a_loadable_file(monkeypatch, tmp_path):
    import rooflinectl.measure.ceilings as probes

    fake_gpu(monkeypatch)
    asked = {}

    def fake_ceilings(bench, l2_bytes, dtypes, on_step=lambda text: None, n=8192, *, timer, **kw):
        asked.update(l2=l2_bytes, dtypes=tuple(dtypes), timer=timer)
        return RunCeilings(copy_bandwidth_gbps=4251.37, tensor_tflops={"bf16": 760.04, "fp16": 771.2},
                           timer=timer, tensor_tflops_check={"bf16": 790.0, "fp16": 771.0}, check_timer="events",
                           notes=["fp8 matmul not measured: test"])

    monkeypatch.setattr(probes, "measure_ceilings", fake_ceilings)
    # The op model's probes: a tiny grid on the CPU, every probe "taking" 5 µs, the launch floor too.
    import rooflinectl.calibrate.op_model as op_model
    from rooflinectl.calibrate.probes import KIB, ProbeGrid

    real_probes = op_model.probe_samples
    tiny = ProbeGrid(gemm_m=(1,), gemm_kn=((64, 32),), decode_batch=(2,), decode_positions=(16,), prefill_tokens=(8,),
                     prefill_batch=(1,), memory_bytes=(16 * KIB,), vocab=64)
    monkeypatch.setattr(op_model, "probe_samples", lambda device, dtype, reporter, grid: real_probes(
        "cpu", dtype, reporter, grid=tiny, time_fn=lambda fn: (fn(), (5e-6,) * 3)[1]))
    out = tmp_path / "lab-h200.yaml"
    result = cli("calibrate", "-o", str(out))
    assert result.exit_code == 0, result.output
    om = load_gpu(str(out)).measured.op_model
    assert om is not None and om.launch_floor_s == 5e-6 and om.grid.startswith("bf16; F.linear M 1–1 ")
    assert "op model: " in result.stdout and "launch floor 5 µs" in result.stdout
    assert asked == {"l2": 60 * MIB, "dtypes": ("bf16", "fp16", "tf32", "fp8"), "timer": "cuda_graph"}
    gpu = load_gpu(str(out))
    assert gpu.id == "lab-h200" and gpu.memory == H200.memory
    m = gpu.measured
    assert (m.device_name, m.driver, m.copy_bandwidth_gbps, m.tensor_tflops) == (
        "NVIDIA H200", "580.159.03", 4251.4, {"bf16": 760.0, "fp16": 771.2})
    assert m.command == f"rooflinectl calibrate -o {out} --gpu h200"
    assert m.torch_version == torch.__version__
    rows = {line.strip().split("  ")[0]: line.split() for line in result.stdout.splitlines() if "/s" in line}
    assert rows["copy bandwidth (read + write)"][-6:] == ["4,251", "GB/s", "4,800", "GB/s", "89%", "-"]
    # The check: the same matmul timed by CUDA events in the same run, 790.0; 760.0 / 790.0 − 1 = −3.8%.
    assert rows["bf16 matmul"][-7:] == ["760.0", "TFLOP/s", "989.4", "TFLOP/s", "77%", "790.0", "(-3.8%)"]
    assert (m.timer, m.tensor_tflops_check) == ("cuda_graph", {"bf16": 790.0, "fp16": 771.0})
    assert "check: each matmul timed again by events in the same run" in " ".join(result.stdout.split())
    assert "fp8 matmul not measured: test" in result.stdout
    as_json = json.loads(cli("calibrate", "-o", str(out), "--json").stdout)
    assert as_json["id"] == "lab-h200" and as_json["measured"]["copy_bandwidth_gbps"] == 4251.4



def test_golden_measure_interpret(update_golden):
    """`measure --interpret` at a fixed width (100), no colour, the seed fixed; the date and the versions, which
    change from machine to machine, masked. Regenerate with `pytest --update-golden` and review the diff."""
    proc = rooflinectl("measure", "--kernel", "fused_softmax", "--interpret", "--seed", "1", "--gpu", "h200",
                       columns=100)
    assert proc.returncode == 0, proc.stderr
    text = mask_versions(proc.stdout)
    path = GOLDEN / "measure_interpret_fused_softmax_h200.txt"
    if update_golden:
        path.write_text(text)
    assert path.exists(), f"{path} missing: run pytest --update-golden"
    assert text == path.read_text()


def mask_versions(text: str) -> str:
    """The line 'torch X, triton Y; DATE' with its versions and date masked; rel. errors are the seed's."""
    return re.sub(r"^torch \S+, triton \S+(, driver \S+)?; \S+$", "torch <version>, triton <version>; <date>", text,
                  flags=re.M)


@pytest.mark.parametrize("kernel", ["matmul", "rmsnorm_linear"])
def test_interpret_refuses_bf16_for_kernels_that_multiply_in_tl_dot(kernel):
    """Issue 18: the interpreter multiplies bf16 bit patterns in tl.dot (triton-lang/triton#11584), so a correct
    kernel was reported wrong with exit 1. Asked for bf16, one line and exit 2 say why."""
    assert_one_line_error(cli("measure", "--kernel", kernel, "--interpret", "--dtype", "bf16"),
                          "--interpret", "triton-lang/triton#11584", "--dtype fp16")


def test_a_save_that_fails_loses_no_result(monkeypatch, tmp_path):
    """A full disk at --save used to leave nothing on stdout: the record was written before the tables printed, so
    a GPU run's minutes were lost. Now the tables print first, then the save's one-line error, exit 2."""
    import rooflinectl.measure.request as request
    import rooflinectl.records.kernel as kernel_records
    from rooflinectl.errors import UserError

    run = kernel_records.load(Path(__file__).parents[1] / "fuzz" / "data" / "record.json")
    monkeypatch.setattr(request, "measure", lambda req, reporter=None: run)

    def full_disk(run, path):
        raise UserError(f"--save {path}: cannot write: No space left on device")

    monkeypatch.setattr(kernel_records, "save", full_disk)
    kernel = run.records[0].kernel
    for fmt in ([], ["--json"]):
        result = cli("measure", "--kernel", kernel, "--save", str(tmp_path / "r.json"), *fmt)
        assert result.exit_code == 2 and "No space left on device" in result.stderr
        assert run.records[0].shape_text in result.stdout and "saved" not in result.stdout  # the results, shown


@pytest.mark.parametrize("command", [["measure", "--kernel", "fused_softmax"], ["calibrate", "-o", "x.yaml"]])
def test_an_unknown_gpu_is_said_before_the_missing_device(command, tmp_path, monkeypatch):
    # On a machine without a GPU, --gpu h10 was reported as "no CUDA GPU is visible".
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(cli(*command, "--gpu", "h10"), "unknown GPU 'h10'")
