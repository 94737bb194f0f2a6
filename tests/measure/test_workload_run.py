"""measure --workload on the CPU (--device cpu): every path runs (cases, checks, the step in sequence, the
record), with no GPU's prediction beside the CPU's times; the predictions and errors a GPU run makes pinned
through the same functions with a fake timer; no time is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import assert_one_line_error, cli
from rooflinectl.errors import UserError
from rooflinectl.measure.harness import Reporter
from rooflinectl.measure.step import runners
from rooflinectl.measure.step.cases import build_cases
from rooflinectl.measure.step.run import (
    CPU_NO_PREDICTION_NOTE,
    NO_CALIBRATED_NOTE,
    WorkloadRequest,
    op_model_time,
    op_record,
    run_workload,
    step_predicted,
    with_time,
)
from rooflinectl.records.step import WorkloadRun, as_measurement, load_workload
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

# The Triton rmsnorm_linear kernel (--fuse norm_linear) runs in the interpreter here: TRITON_INTERPRET must be set
# before triton is first imported in the process (tests/kernels/conftest.py does the same).
os.environ["TRITON_INTERPRET"] = "1"
TINY = str(Path(__file__).parent / "data" / "tiny-gqa.yaml")
# A fake timer: every op and the step "take" 1 ms (p20 0.9, p80 1.1), so that errors are known by hand.
FAKE_TIME = (1e-3, 0.9e-3, 1.1e-3)


def fake_time(fn):
    fn()  # the runs still happen: a runner that raises is still caught
    return FAKE_TIME


class Recorder(Reporter):
    def __init__(self):
        self.total, self.steps, self.advanced = None, [], 0

    def start(self, total):
        self.total = total

    def step(self, text):
        self.steps.append(text)

    def advance(self):
        self.advanced += 1


def _run(phase="decode", calibrated=None, **sizes):
    w = resolve_workload(phase, model=TINY, **sizes)
    rec = Recorder()
    run = run_workload(WorkloadRequest(w, device="cpu", gpu="h200", seed=7, command="test"), rec,
                       calibrated=calibrated, time_fn=fake_time)
    return run, rec


def test_every_op_checked_and_the_step_run_with_no_gpus_prediction():
    run, rec = _run(batch=2, context=64, calibrated=lambda op: 2e-3)
    assert not run.failed and all(o.check and o.check.passed for o in run.ops)
    assert rec.total == len(run.ops) + 1 == rec.advanced
    assert rec.steps[-1] == "the whole step"
    head = next(o for o in run.ops if o.name == "lm_head")
    # lm_head of the tiny model: x 2×64, W 128×64, y 2×128, bf16: 256 + 16384 + 512 bytes.
    assert head.bytes == 17152 and head.flops == 2 * 2 * 64 * 128
    assert head.achieved_gbps == pytest.approx(17152 / 1e-3 / 1e9)
    assert head.timing.p20_s < head.timing.median_s < head.timing.p80_s
    # --gpu h200 and an op model given: the CPU's wall time is no H200's, so nothing predicts or compares with it.
    for o in run.ops:
        assert (o.bound, o.predicted_spec_s, o.predicted_calibrated_s, o.error_spec_pct, o.error_calibrated_pct,
                o.roof_pct) == (None,) * 6
    step = run.step
    assert (step.predicted_spec_s, step.predicted_calibrated_s, step.error_spec_pct, step.error_calibrated_pct) == \
        (None,) * 4
    assert run.gpu.spec is None and run.gpu.spec_name is None  # compared against no spec
    assert CPU_NO_PREDICTION_NOTE in run.notes and NO_CALIBRATED_NOTE not in run.notes
    counts = sum(o.count for o in run.ops)
    assert step.sum_ops_s == pytest.approx(1e-3 * counts)
    assert step.timing.median_s == 1e-3 and step.capture == "sequential" and step.layers == "distinct"
    assert step.output_finite is True
    att = next(o for o in run.ops if o.name == "attention")
    assert att.backend.startswith("picked by torch: ")
    # Labelled by the device that ran them: on the CPU no runner is cuBLAS.
    assert head.runner == "F.linear (torch's CPU BLAS mm)"
    assert not any("cuBLAS" in o.runner for o in run.ops)


def _gpu_records(calibrated=None):
    """The records a GPU run makes of the tiny model's decode ops (batch 2, context 64) under the H200's roofs, each
    "taking" 1 ms: the functions run_workload calls per op on a GPU."""
    h200 = load_gpu("h200")
    cases = build_cases(resolve_workload("decode", model=TINY, batch=2, context=64))
    return h200, [with_time(op_record(c, h200, calibrated, "cuda"), c.op, FAKE_TIME, 1, h200) for c in cases]


def test_a_gpu_runs_predictions_errors_and_roof_share_by_hand():
    h200, ops = _gpu_records()
    bw = h200.memory.hbm_bandwidth_gbps * 1e9
    head = next(o for o in ops if o.name == "lm_head")
    # lm_head: 17,152 bytes, memory-bound under the H200's roofs.
    assert head.predicted_spec_s == pytest.approx(17152 / bw) and head.bound == "memory"
    assert head.error_spec_pct == pytest.approx((17152 / bw / 1e-3 - 1) * 100)
    assert head.roof_pct == pytest.approx(17152 / bw / 1e-3 * 100)
    assert head.predicted_calibrated_s is None and head.error_calibrated_pct is None
    assert step_predicted(ops) == (pytest.approx(sum(o.predicted_spec_s * o.count for o in ops)), None)


def test_a_calibrated_model_is_used_where_given():
    _, ops = _gpu_records(calibrated=lambda op: 2e-3)
    assert all(o.predicted_calibrated_s == 2e-3 and o.error_calibrated_pct == pytest.approx(100) for o in ops)
    assert step_predicted(ops)[1] == pytest.approx(2e-3 * sum(o.count for o in ops))
    _, partial = _gpu_records(calibrated=lambda op: None if op.kind == "gather" else 1e-6)
    assert step_predicted(partial)[1] is None  # a step with an op unpredicted has no calibrated total


def test_a_wrong_runner_fails_its_check_and_is_not_timed(monkeypatch):
    import torch.nn.functional as F

    monkeypatch.setattr(runners, "gated_act", lambda gate, up: F.silu(gate))  # forgets × up
    run, _ = _run(batch=2, context=64)
    act = next(o for o in run.ops if o.name == "act")
    assert act.failed and act.check.rel_error > act.check.tolerance and act.timing is None
    assert [o.name for o in run.failed] == ["act"]
    assert all(o.timing is not None for o in run.ops if o.name != "act")


def test_a_runner_that_raises_is_recorded(monkeypatch):
    def boom(*a):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(runners, "rmsnorm", boom)
    run, _ = _run(batch=2, context=64)
    norms = [o for o in run.ops if o.kind == "norm"]
    assert norms and all(o.error.startswith("RuntimeError: CUDA out of memory") for o in norms)
    assert run.step.error is not None and run.step.timing is None


@pytest.mark.parametrize("phase, sizes", [
    ("decode", dict(batch=3, context=17, attention="naive")),
    ("prefill", dict(batch=2, seq_len=16, dtype="fp32", fused=["norm_linear", "qkv", "gate_up", "residual"])),
    ("prefill", dict(batch=2, seq_len=16, dtype="fp16", fused=["norm_linear"])),
])
def test_every_path_on_the_cpu(phase, sizes):
    run, _ = _run(phase, **sizes)
    assert not run.failed, [(o.name, o.check, o.error) for o in run.failed]
    assert run.step.output_finite and run.step.timing is not None


def test_norm_linear_in_bf16_on_the_cpu_is_refused():
    w = resolve_workload("decode", model=TINY, fused=["norm_linear"])
    with pytest.raises(UserError, match="use --dtype fp32 or fp16"):
        run_workload(WorkloadRequest(w, device="cpu"), Reporter(), time_fn=fake_time)


def test_the_cli_on_the_cpu_end_to_end(tmp_path):
    out = tmp_path / "run.json"
    r = cli("measure", "--workload", "decode", "--model", TINY, "--batch", "2", "--context", "32", "--device", "cpu",
            "--gpu", "h200", "--seed", "3", "--json", "--save", str(out))
    assert r.exit_code == 0, r.output
    run = WorkloadRun.model_validate(json.loads(r.stdout))
    assert run.kind == "workload" and run.timer == "cpu_wall" and run.device == "cpu"
    assert run.workload.model == "tiny-gqa" and run.workload.kv_len == 32 and run.workload.batch == 2
    assert run.gpu.spec is None and run.seed == 3 and "--device cpu" in run.command
    assert any("not a GPU figure" in n for n in run.notes)
    assert not run.failed and run.step.timing is not None
    saved = load_workload(out)
    assert saved.ops == run.ops
    # On the chart: CPU times are no GPU's, so no record has a time (plot --measured draws none of them).
    m = as_measurement(saved)
    assert [r.op for r in m.records] == [o.name for o in run.ops] and all(r.time_s is None for r in m.records)
    table = cli("measure", "--workload", "decode", "--model", TINY, "--batch", "2", "--context", "32",
                "--device", "cpu", "--gpu", "h200")
    assert table.exit_code == 0, table.output
    assert "CPU wall time" in table.stdout and "no calibrated model" not in table.stdout
    # No column of the H200's predictions beside CPU times: the header and the note say so, in one line each.
    header = next(line for line in table.stdout.splitlines() if line.split()[:1] == ["op"])
    assert header.split() == ["op", "×", "measured", "p20–p80", "GB/s", "TF/s"]
    assert CPU_NO_PREDICTION_NOTE in table.stdout.splitlines()
    assert "step predicted" not in table.stdout and "h200" not in table.stdout.split("reproduce:")[0].lower()
    # Every line within the width but the command to reproduce, which stays one line (a paste runs one command).
    assert max(len(line) for line in table.stdout.splitlines() if not line.startswith("reproduce: ")) <= 100


@pytest.mark.parametrize("args, fragments", [
    (["--model", "mixtral-8x7b"], ["no runner for a mixture of experts"]),
    (["--model", "deepseek-v3"], ["deepseek-v3: no runner for a mixture of experts"]),
    (["--fuse", "gate_up,act"], ["--fuse act is not supported"]),
    (["--device", "tpu"], ["--device tpu"]),
    ([], ["no CUDA GPU is visible"]),  # this machine has none: the default device is cuda
])
def test_refusals_through_the_cli(args, fragments):
    assert_one_line_error(cli("measure", "--workload", "decode", *args), *fragments)


def test_a_quantized_workload_file_is_refused(tmp_path):
    f = tmp_path / "q.yaml"
    f.write_text("phase: decode\nmodel: llama-3-8b\nbatch: 1\ncontext: 1024\nweight_dtype: int4\n")
    assert_one_line_error(cli("measure", "--workload", str(f), "--device", "cpu"), "quantized")


def test_workload_options_belong_to_workload():
    assert_one_line_error(cli("measure", "--kernel", "fused_softmax", "--batch", "4"),
                          "--batch belongs to measure --workload")


def test_plot_measured_draws_a_gpu_runs_ops(tmp_path):
    from rooflinectl.plot.measured import load_measured
    from rooflinectl.records.kernel import DeviceInfo
    from rooflinectl.records.step import save

    run, _ = _run(batch=2, context=64)
    gpu_run = run.model_copy(update={"device": "cuda", "timer": "cuda_graph",
                                     "gpu": DeviceInfo(name="NVIDIA H200", spec="h200")})
    f = tmp_path / "run.json"
    save(gpu_run, f)
    m = load_measured(f)
    assert [r.op for r in m.records] == [o.name for o in run.ops]
    assert all(r.time_s == 1e-3 and r.op_kind == o.kind for r, o in zip(m.records, run.ops, strict=True))
    out = tmp_path / "chart.png"
    r = cli("plot", "decode", "--gpu", "h200", "--model", TINY, "--batch", "2", "--context", "64",
            "--measured", str(f), "--output", str(out))
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 0
    cpu = tmp_path / "cpu.json"
    save(run, cpu)  # a CPU run's times are no GPU's: nothing to draw, said in one line
    assert_one_line_error(cli("plot", "decode", "--gpu", "h200", "--measured", str(cpu), "--output",
                              str(tmp_path / "x.png")), "measured on the CPU, whose times have no place")


def test_the_gpu_files_op_model_times_each_op_as_analyze_calibrated_does():
    """--gpu FILE with an op model (calibrate -o FILE): each op's calibrated prediction is the time analyze
    --calibrated gives the same op of the same workload, and the step's is their sum × counts."""
    from rooflinectl.engine.roofline import analyze

    example = str(Path(__file__).parents[2] / "docs" / "results" / "op-model-example" / "h200-issue14.yaml")
    w = resolve_workload("decode", model=TINY, batch=2, context=64)
    spec = load_gpu(example)
    ops = [op_record(c, spec, op_model_time(spec), "cuda") for c in build_cases(w)]  # what a GPU run records
    placed = {p.op.name: p for p in analyze(w, spec, calibrated=True).placements}
    assert [o.name for o in ops] == list(placed)
    for o in ops:
        assert o.predicted_calibrated_s == pytest.approx(placed[o.name].time_s, rel=1e-12)
        assert o.predicted_calibrated_s >= spec.measured.op_model.launch_floor_s
    assert step_predicted(ops)[1] == pytest.approx(sum(p.time_s * p.op.count for p in placed.values()))


def test_an_op_too_large_for_the_devices_memory_is_refused_before_any_runs(monkeypatch):
    """The tiny model's lm_head at batch 2 (x 2×64 and W 128×64 in, y 2×128 out, bf16) allocates
    (128 + 8192 + 256)·2 = 17,152 B; its check takes 4× that. With less memory available than the largest op's
    check, nothing runs: the reporter never starts."""
    from rooflinectl.measure import bench
    from rooflinectl.measure.step.cases import build_cases

    w = resolve_workload("decode", model=TINY, batch=2, context=64)
    cases = {c.name: c for c in build_cases(w)}
    assert cases["lm_head"].alloc_bytes == (2 * 64 + 128 * 64 + 2 * 128) * 2 == 17_152
    need = 4 * max(c.alloc_bytes for c in cases.values())
    rec = Recorder()
    monkeypatch.setattr(bench, "available_memory", lambda device: need - 1)
    with pytest.raises(UserError, match="more than the 0.0 GB the CPU has available: give a smaller --batch"):
        run_workload(WorkloadRequest(w, device="cpu", gpu="h200", seed=7, command="test"), rec, time_fn=fake_time)
    assert rec.total is None
    monkeypatch.setattr(bench, "available_memory", lambda device: need)
    run, _ = _run(batch=2, context=64)
    assert not run.failed


def test_a_batch_of_a_million_on_the_cpu_is_one_line():
    # Llama 3 8B at context 4,096: one layer's K and V caches alone are 2 × 10⁶ × 4,096 × 8 × 128 × 2 B = 16.8 TB.
    assert_one_line_error(cli("measure", "--workload", "decode", "--device", "cpu", "--batch", "1000000"),
                          "checking op attention takes about", "give a smaller --batch or length")
