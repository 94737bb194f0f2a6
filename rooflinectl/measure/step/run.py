"""One ``measure --workload`` run: every op checked and timed, then the whole step, with the predictions beside.

Per op, in the step's order (``cases.build_cases``): the check (``execute.check``, seed + 1000·i); then, if it
passed, the timing: ``bench.do_bench(..., timer="cuda_graph")`` over input sets rotated past the L2
(``bench.input_sets`` of the bytes one run moves, the weights of a linear op and the K and V caches of attention
rotated with the rest, so that a decode GEMV reads W from HBM), capped by the free memory; the number of sets is
recorded. Then the whole step (``step.py``) timed as one graph. On the CPU (``--device cpu``) the same paths run,
timed with ``time.perf_counter`` and labelled as CPU wall time.

Predictions: each op placed under the spec's roofs (``engine.roofline.place``), and under the calibrated model
where the caller passes one (``calibrated(op)`` → seconds of one instance, or None where it has no figure).
Errors are prediction / measurement − 1. A prediction is a GPU's: a CPU run has none, nor errors or roof shares
(``CPU_NO_PREDICTION_NOTE`` says why), so that no figure of the GPU's reads as one of the CPU run.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...engine.calibrated import op_class, predict_time
from ...engine.count.op import Op
from ...engine.roofline import measured_share, place
from ...errors import UserError
from ...records.kernel import DeviceInfo
from ...records.step import (
    CPU_TIME_NOTE,
    OpCheck,
    OpTiming,
    WorkloadOp,
    WorkloadRun,
    WorkloadSpec,
    WorkloadStep,
)
from ...specs.hardware import GPU
from ...specs.workload import Workload
from ...units import MIB
from .. import bench
from ..device import device_info, now, require_cuda, require_gpu_stack, resolve_spec, set_interpret
from ..harness import Reporter, one_line
from .cases import Case, build_cases, runner_on
from .execute import check, materialize, run
from .graph import StepMemory, build_step, plan_memory

Calibrated = Callable[[Op], "float | None"]
# (median, p20, p80) seconds of fn.
TimeFn = Callable[[Callable[[], object]], tuple[float, float, float]]
NO_CALIBRATED_NOTE = ("no calibrated model: run rooflinectl calibrate -o FILE on this GPU, then measure with "
                      "--gpu FILE")
CPU_NO_PREDICTION_NOTE = "no predictions: a roofline predicts a GPU's time, not this CPU run's (see rooflinectl analyze)"
CPU_REPS = 5  # timed runs of each op (and of the step) on the CPU, after 2 warm-up runs: a test of the paths
NORM_LINEAR_MODULE = "rooflinectl.kernels.rmsnorm_linear"


@dataclass(frozen=True)
class WorkloadRequest:
    workload: Workload
    device: str = "cuda"  # "cuda", or "cpu" to run every path on the CPU
    gpu: str | None = None  # the spec the predictions use (default: the device's)
    seed: int | None = None
    command: str = ""
    warmup_ms: float = bench.WARMUP_MS
    rep_ms: float = bench.REP_MS


def cpu_time(fn: Callable[[], object], reps: int = CPU_REPS) -> tuple[float, float, float]:
    """(median, p20, p80) of ``reps`` wall-clock runs of ``fn`` after two warm-up runs."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    q = statistics.quantiles(times, n=10, method="inclusive")
    return statistics.median(times), q[1], q[7]


def gpu_time(warmup_ms: float, rep_ms: float) -> TimeFn:
    def timed(fn: Callable[[], object]) -> tuple[float, float, float]:
        return bench.do_bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, timer="cuda_graph")
    return timed


def _error_pct(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None:
        return None
    return (predicted / measured - 1) * 100


def set_count(case: Case, l2_bytes: int, device: str) -> int:
    """Input sets to rotate: ``bench.input_sets`` of the bytes one run moves, capped so that the sets' allocations
    (the whole KV cache of a kv_write, the whole table of a gather) take at most bench's share of free memory."""
    if not l2_bytes:
        return 1
    n = bench.input_sets(case.bytes, l2_bytes)
    alloc = sum(t.nbytes for t in case.inputs) + case.bytes
    free = bench.free_memory(device)
    if free is not None:
        n = min(n, max(1, int(bench.MAX_FREE_MEMORY_SHARE * free // alloc)))
    return n


def op_record(case: Case, spec: GPU | None, calibrated: Calibrated | None, device: str) -> WorkloadOp:
    """``case``'s record before it runs: its count, and its predictions under ``spec`` and ``calibrated``."""
    op = case.op
    rec = WorkloadOp(name=op.name, kind=op.kind, count=op.count, flops=int(op.flops), bytes=int(op.bytes),
                     unit=op.compute_unit, op_dtype=op.dtype, fuses=list(op.fuses), elementwise=op.elementwise,
                     dtype=case.dtype, runner=runner_on(case.runner, device))
    update: dict[str, Any] = {}
    if spec is not None:
        p = place(op, spec.roofs())
        update.update(predicted_spec_s=p.time_s, bound=p.bound)
    if calibrated is not None:
        update["predicted_calibrated_s"] = calibrated(op)
    return rec.model_copy(update=update)


def with_time(rec: WorkloadOp, op: Op, t: tuple[float, float, float], sets: int, spec: GPU | None) -> WorkloadOp:
    """``rec`` with its timing, each prediction's error, its rates and (under ``spec``) its share of the roof."""
    median, p20, p80 = t
    update: dict[str, Any] = {"timing": OpTiming(median_s=median, p20_s=p20, p80_s=p80, input_sets=sets),
                              "error_spec_pct": _error_pct(rec.predicted_spec_s, median),
                              "error_calibrated_pct": _error_pct(rec.predicted_calibrated_s, median)}
    if spec is not None:
        share = measured_share(op.times(1), spec.roofs(), median)
        update.update(achieved_gbps=share.achieved_gbps, achieved_tflops=share.achieved_tflops,
                      roof_pct=share.fraction * 100)
    else:
        update.update(achieved_gbps=op.bytes / median / 1e9, achieved_tflops=op.flops / median / 1e12)
    return rec.model_copy(update=update)


def _runner(case: Case) -> Callable[[dict[str, Any]], object]:
    def call(tensors: dict[str, Any]) -> object:
        return run(case, tensors)
    return call


def _versions(device: str) -> tuple[str, str]:
    if device == "cuda":
        return require_gpu_stack("measure")
    from importlib.metadata import PackageNotFoundError, version

    import torch

    # triton's version without importing it: the interpreter must be chosen before triton is first imported.
    try:
        return str(torch.__version__), version("triton")
    except PackageNotFoundError:
        return str(torch.__version__), "not installed"


def _prepare(request: WorkloadRequest, cases: list[Case]) -> tuple[GPU | None, DeviceInfo, str, str]:
    w, device = request.workload, request.device
    needs_triton = any(c.family == "norm_linear" for c in cases)
    if device == "cpu" and needs_triton:
        if w.dtype == "bf16":
            raise UserError("measure --workload --device cpu: the Triton rmsnorm_linear kernel (--fuse norm_linear) "
                            "runs in Triton's interpreter on the CPU, whose bf16 arithmetic is not the GPU's: "
                            "use --dtype fp32 or fp16")
        set_interpret(NORM_LINEAR_MODULE)
    versions = _versions(device)
    if device == "cuda":
        require_cuda("measure")
    spec = resolve_spec(request.gpu, device)
    info = device_info(spec, device) if device == "cuda" else DeviceInfo(
        name=f"CPU ({platform.machine() or 'unknown'})", spec=spec.id if spec else None,
        spec_name=spec.name if spec else None)
    return spec, info, *versions


def _run_step(w: Workload, cases: list[Case], ops: list[WorkloadOp], device: str, seed: int, time_fn: TimeFn,
              memory: StepMemory) -> WorkloadStep:
    import torch

    timed = [o.timing.median_s * o.count for o in ops if o.timing is not None]
    sum_ops = sum(timed) if len(timed) == len(ops) else None
    pred, pred_cal = step_predicted(ops)
    step = WorkloadStep(sum_ops_s=sum_ops, capture="cuda_graph" if device == "cuda" else "sequential",
                        layers=memory.layers, memory_bytes=memory.bytes, predicted_spec_s=pred,
                        predicted_calibrated_s=pred_cal)
    try:
        gen = torch.Generator(device=device).manual_seed(seed - 1)
        fn = build_step(w, cases, memory, device, gen)
        out = fn()
        bench.sync(device)
        finite = bool(torch.isfinite(out).all())
        t = time_fn(fn)
    except Exception as err:  # an out-of-memory or a capture failure: the per-op table still stands
        return step.model_copy(update={"error": one_line(err)})
    median, p20, p80 = t
    return step.model_copy(update={"timing": OpTiming(median_s=median, p20_s=p20, p80_s=p80, input_sets=1),
                                   "output_finite": finite, "error_spec_pct": _error_pct(pred, median),
                                   "error_calibrated_pct": _error_pct(pred_cal, median)})


def step_predicted(ops: list[WorkloadOp]) -> tuple[float | None, float | None]:
    """The step's predicted time under the spec's roofs and under the calibrated model: Σ each op's × its count,
    or None where an op has no such prediction (a step with an op unpredicted has no total)."""
    spec = [o.predicted_spec_s for o in ops]
    cal = [o.predicted_calibrated_s for o in ops]
    return (sum(p * o.count for p, o in zip(spec, ops, strict=True) if p is not None) if ops and None not in spec
            else None,
            sum(c * o.count for c, o in zip(cal, ops, strict=True) if c is not None) if ops and None not in cal
            else None)


def op_model_time(spec: GPU) -> Calibrated | None:
    """One instance's time by the GPU file's calibrated op model (``engine.calibrated``, what ``analyze
    --calibrated`` times each op with), or None where the file has none."""
    model = spec.measured.op_model if spec.measured is not None else None
    if model is None:
        return None
    roofs = spec.roofs(calibrated=True)

    def time(op: Op) -> float | None:
        return predict_time(op, model, roofs)[0] if op_class(op) is not None else None

    return time


# What checking one op holds at once, over its inputs and outputs (``Case.alloc_bytes``): those, a reference in
# fp32 of both (2× their bytes in bf16 or fp16) and the flattened copies compared (execute.check): under 4×.
CHECK_MEMORY_FACTOR = 4


def check_fits(cases: list[Case], device: str) -> None:
    """Refuse, before any op runs, a workload whose largest op cannot be checked in the memory the device has
    (``bench.available_memory``): CHECK_MEMORY_FACTOR × its inputs and outputs. The whole step is bounded after
    the ops (``plan_memory``: one layer replayed, or the step's error beside the per-op table)."""
    room = bench.available_memory(device)
    if room is None or not cases:
        return
    big = max(cases, key=lambda c: c.alloc_bytes)
    need = CHECK_MEMORY_FACTOR * big.alloc_bytes
    if need > room:
        where = "the GPU has free" if device == "cuda" else "the CPU has available"
        raise UserError(f"measure --workload: checking op {big.name} takes about {need / 1e9:,.1f} GB (its inputs "
                        f"and outputs and their reference), more than the {room / 1e9:,.1f} GB {where}: give a "
                        f"smaller --batch or length")


def run_workload(request: WorkloadRequest, reporter: Reporter, calibrated: Calibrated | None = None,
                 time_fn: TimeFn | None = None) -> WorkloadRun:
    """Check and time every op of the request's workload, then the whole step; the run's record."""
    import torch

    w, device = request.workload, request.device
    cases = build_cases(w)  # refuses what cannot be run before any device is touched
    spec, info, torch_version, triton_version = _prepare(request, cases)
    check_fits(cases, device)
    seed = request.seed if request.seed is not None else int(torch.randint(0, 2**31 - 1, (1,)).item())
    time_fn = time_fn or (gpu_time(request.warmup_ms, request.rep_ms) if device == "cuda" else cpu_time)
    l2 = info.l2_bytes or (int(spec.memory.l2_size_mib * MIB) if spec and spec.memory.l2_size_mib else 0)
    if device == "cuda":
        calibrated = calibrated if calibrated is not None or spec is None else op_model_time(spec)
        notes = [] if calibrated is not None else [NO_CALIBRATED_NOTE]
    else:  # CPU wall time beside a GPU's prediction reads as a prediction of the CPU run: none is made
        spec, calibrated, info = None, None, info.model_copy(update={"spec": None, "spec_name": None})
        notes = [CPU_TIME_NOTE, CPU_NO_PREDICTION_NOTE]
    reporter.start(len(cases) + 1)
    ops: list[WorkloadOp] = []
    for i, case in enumerate(cases):
        reporter.step(f"{case.name} ×{case.count}")
        rec = op_record(case, spec, calibrated, device)
        try:
            c = check(case, device, seed + 1000 * i)
            rec = rec.model_copy(update={"check": OpCheck(rel_error=c.rel_error, tolerance=c.tolerance,
                                                          passed=c.passed, seed=c.seed, note=c.note)})
            if case.family == "sdpa":
                gen = torch.Generator(device=device).manual_seed(seed + 1000 * i)
                t0 = materialize(case, device, gen)
                from .runners import sdpa_backend

                rec = rec.model_copy(update={"backend": "picked by torch: " + sdpa_backend(
                    t0["q"].transpose(1, 2), t0["k"], t0["v"], bool(case.params["causal"]))})
                del t0
            if c.passed:
                n_sets = set_count(case, l2, device) if device == "cuda" else 1
                gen = torch.Generator(device=device).manual_seed(seed + 1000 * i + 1)
                sets = [materialize(case, device, gen) for _ in range(n_sets)]
                rec = with_time(rec, case.op, time_fn(bench.rotated(_runner(case), sets)), n_sets, spec)
                del sets
        except UserError:
            raise
        except Exception as err:  # the kernel raised (out of memory, no kernel for these inputs): say so
            rec = rec.model_copy(update={"error": one_line(err)})
        ops.append(rec)
        reporter.advance()
    reporter.step("the whole step")
    try:
        memory = plan_memory(w, cases, bench.available_memory(device))
    except UserError as err:  # the step does not fit even with one layer replayed: the per-op table still stands
        step = WorkloadStep(capture="cuda_graph" if device == "cuda" else "sequential",
                            layers="shared_weights_and_caches", memory_bytes=0, error=str(err))
    else:
        if memory.note:
            notes.append(memory.note)
        step = _run_step(w, cases, ops, device, seed, time_fn, memory)
    reporter.advance()
    command = request.command + (f" --gpu {spec.id}" if request.gpu is None and spec is not None else "") \
        + (f" --seed {seed}" if request.seed is None else "")  # what repeats this run: the spec and seed it used
    return WorkloadRun(
        command=command, gpu=info, device="cuda" if device == "cuda" else "cpu",
        torch_version=torch_version, triton_version=triton_version, python_version=platform.python_version(),
        date=now(), seed=seed, timer="cuda_graph" if device == "cuda" else "cpu_wall",
        warmup_ms=request.warmup_ms, rep_ms=request.rep_ms,
        workload=WorkloadSpec(model=w.model.id, phase=w.phase, batch=w.batch, tokens_per_seq=w.tokens_per_seq,
                              kv_len=w.kv_len, dtype=w.dtype, kv_dtype=w.kv_dtype, attention=w.attention,
                              causal=w.causal, fused=list(w.fused)),
        ops=ops, step=step, notes=notes)
