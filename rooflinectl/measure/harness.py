"""The measure harness: run a registered kernel, check it, time it honestly, and place it on the roofline.

Per shape, in this order (DESIGN.md, "Measuring honestly"), each step a function of its own with a typed result:

1. ``predict``: the engine's placement of the kernel's op (``kernel.op``) and of the ops it fuses, under the
   spec's roofs.
2. ``check``: fresh random inputs (a recorded seed), the output poisoned with NaN, one run, the relative error
   against the kernel's torch reference in float32/float64 and the kernel's tolerance for the data type. A kernel
   that fails (or raises) is reported as such and neither it nor its baselines are timed. The baselines (torch
   eager, torch.compile) are checked against the same reference with the same tolerance; one that fails or raises
   is reported with its error and not timed.
3. ``time_kernel``: ``bench.do_bench`` over input sets rotated past the L2 (``bench.input_sets``), with the plan's
   timer: CUDA-graph replays by default, CUDA events where the kernel does not capture (``bench.time_figure``;
   each figure's ``Timing.timer`` says which it used).
4. ``shares``: achieved GB/s and TFLOP/s, predicted time and share of the roof, from the engine
   (``engine.roofline.measured_share``), under the spec's roofs and under the ceilings measured in this run
   (``Roofs.with_ceilings``).
5. ``time_baselines``: the baselines, timed the same way (the same timer, the same fallback) on the same rotation;
   torch.compile's was compiled by its check in step 2, before any capture.

``measure_shape`` runs them and builds the shape's record once. The ceilings (copy bandwidth, matmul peaks for the
data types the run's ops need) are measured once per run by ``rooflinectl.measure.ceilings``. Under ``interpret``
(Triton's interpreter, on the CPU) only steps 1 and 2 run. ``measure`` takes a ``MeasureRequest`` (the command's
options) and does the whole run: the command parses, calls it, and renders.

Torch and triton are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..records.kernel import (
    Baseline,
    BaselineName,
    Correctness,
    DeviceInfo,
    LaunchRecord,
    MeasurementFile,
    RunCeilings,
    ShapeRecord,
    Status,
    Timer,
    Timing,
)
from ..specs.hardware import GPU, Roofs
from ..units import MIB
from . import bench as timing
from .anatomy import launch_record
from .bench import REP_MS, WARMUP_MS, Bench
from .ceilings import ceiling_dtypes
from .device import device_info, now, spec_mismatch_notes
from .predicted import Shares, predict, shares

if TYPE_CHECKING:
    from ..engine.count.op import Op
    from ..kernels.base import Inputs, Kernel

INTERPRET_NOTE = "checked in the Triton interpreter: correctness only, no timing"


def shape_text(shape: Iterable[int]) -> str:
    return "x".join(str(s) for s in shape)


def parse_shapes(kernel: Kernel, texts: Iterable[str]) -> list[tuple[int, ...]]:
    """``--shape`` values, each one shape or a comma list ("4096x1024,4096x4096"), parsed by the kernel."""
    shapes: list[tuple[int, ...]] = []
    for text in texts:
        items = [t.strip() for t in text.split(",")]
        if not any(items):
            raise UserError(f"--shape '{text}': no shape given (expected {kernel.shape_format})")
        for item in items:
            if not item:
                raise UserError(f"--shape '{text}': empty item in the list (expected {kernel.shape_format})")
            shapes.append(kernel.parse_shape(item))
    return shapes


def one_line(err: BaseException, limit: int = 300) -> str:
    text = str(err).strip().splitlines()
    msg = f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


# --- the plan ------------------------------------------------------------------------------------------------


class Reporter:
    """What the harness tells its caller while it runs (the CLI draws a progress bar); does nothing by default."""

    def start(self, total: int) -> None: ...

    def step(self, text: str) -> None: ...

    def advance(self) -> None: ...


@dataclass(frozen=True)
class Plan:
    """What one ``measure`` run does."""

    shapes: list[tuple[int, ...]]
    dtype: str
    device: str  # "cuda", or "cpu" under the interpreter
    timed: bool  # False: correctness only (the interpreter)
    baselines: tuple[BaselineName, ...] = ()
    seed: int = 0
    timer: Timer = timing.DEFAULT_TIMER  # "cuda_graph" (do_bench_cudagraph) or "events" (do_bench)
    warmup_ms: float = WARMUP_MS
    rep_ms: float = REP_MS


# --- the steps of one shape ----------------------------------------------------------------------------------


@dataclass
class Checked:
    """Step 2: the kernel's check, the launches of that run, and the inputs that the timing goes on with."""

    correctness: Correctness
    launches: list[LaunchRecord]
    inputs: Inputs
    out: Any
    baselines: list[Baseline]


def _fresh(kernel: Kernel, shape: tuple[int, ...], plan: Plan, seed: int) -> tuple[Inputs, Any]:
    import torch

    gen = torch.Generator(device=plan.device).manual_seed(seed)
    inputs = kernel.make_inputs(shape, plan.dtype, plan.device, gen)
    return inputs, kernel.make_output(inputs)


def _poison(out: Any) -> None:
    """NaN in a floating output (the largest value in an integer one), so that an unwritten element shows."""
    if out.dtype.is_floating_point:
        out.fill_(float("nan"))
    else:
        import torch

        out.fill_(torch.iinfo(out.dtype).max)


def _compare(out: Any, ref: Any, tolerance: float, seed: int) -> Correctness:
    from ..kernels.base import relative_error

    if tuple(out.shape) != tuple(ref.shape):
        return Correctness(rel_error=math.inf, tolerance=tolerance, passed=False, seed=seed)
    err = relative_error(out, ref)
    return Correctness(rel_error=err, tolerance=tolerance, passed=math.isfinite(err) and err <= tolerance,
                       seed=seed)


def check(kernel: Kernel, shape: tuple[int, ...], plan: Plan, spec: GPU | None, seed: int, reporter: Reporter,
          label: str) -> Checked:
    """Run the kernel once on fresh inputs into a poisoned output and compare it with the reference; when it
    passes and the plan is timed, check the baselines against the same reference too (before it is freed: it can
    be large in float64). Raises what the kernel raises."""
    reporter.step(f"{label}: checking against the reference")
    inputs, out = _fresh(kernel, shape, plan, seed)
    _poison(out)
    kernel.run(inputs, out)
    timing.sync(plan.device)
    launches = [launch_record(launch, spec) for launch in kernel.last_launches()]
    ref = kernel.reference(inputs)
    tolerance = kernel.tolerance(plan.dtype)
    correctness = _compare(out, ref, tolerance, seed)
    baselines: list[Baseline] = []
    if correctness.passed and plan.timed:
        fns = kernel.baselines()
        for name in plan.baselines:
            reporter.step(f"{label}: checking {name}" + (" (compiling)" if name == "compile" else ""))
            try:
                result = fns[name](inputs)
                timing.sync(plan.device)
                # The same tolerance as the kernel's: a speedup over a wrong result means nothing, so a baseline
                # that fails it is reported with its error and not timed, as a failing kernel is not.
                c = _compare(result, ref, tolerance, seed)
                wrong = None if c.passed else (f"wrong result: relative error {c.rel_error:.1e} > tolerance "
                                               f"{tolerance:.0e}: not timed")
                baselines.append(Baseline(name=name, rel_error=c.rel_error, error=wrong))
                del result
            except Exception as err:  # torch.compile can fail on a machine without a C compiler, say
                baselines.append(Baseline(name=name, error=one_line(err)))
    del ref
    return Checked(correctness, launches, inputs, out, baselines)


@dataclass(frozen=True)
class Timed:
    """Step 3: the kernel's timing, and the input sets it rotated among (the baselines use the same)."""

    timing: Timing
    sets: list[tuple[Inputs, Any]]


@dataclass(frozen=True)
class Benches:
    """The timer the plan asks for (``main``) and CUDA events (``events``), which times a figure whose function
    could not be captured in a CUDA graph (``bench.time_figure``)."""

    main: Bench
    events: Bench

    def time(self, fn: Callable[[], object], plan: Plan) -> tuple[tuple[float, float, float], Timer, str | None]:
        return timing.time_figure(fn, plan.timer, self.main, self.events, warmup_ms=plan.warmup_ms,
                                  rep_ms=plan.rep_ms)


def _as_benches(bench: Bench | Benches) -> Benches:
    return bench if isinstance(bench, Benches) else Benches(bench, bench)


def capture_note(what: str, t: Timing) -> list[str]:
    """The note a figure timed with events, where the run asked for a CUDA graph, carries."""
    if t.capture_error is None:
        return []
    return [f"{what}: not captured in a CUDA graph ({t.capture_error}); timed with CUDA events instead"]


def time_kernel(kernel: Kernel, shape: tuple[int, ...], plan: Plan, checked: Checked, bench: Bench | Benches,
                seed: int, l2_bytes: int, reporter: Reporter, label: str) -> Timed:
    """Time the kernel over enough fresh input sets to hold ``bench.L2_MULTIPLE`` L2s (one without an L2 size),
    each set drawn from its own seed (``seed + i``): the same seed would give the same data."""
    work = timing.working_set_bytes([*checked.inputs.values(), checked.out])
    n_sets = timing.input_sets(work, l2_bytes, timing.free_memory(plan.device)) if l2_bytes else 1
    reporter.step(f"{label}: timing ({n_sets} input set{'s' if n_sets > 1 else ''})")
    sets = [(checked.inputs, checked.out)] + [_fresh(kernel, shape, plan, seed + i) for i in range(1, n_sets)]
    t, used, why = _as_benches(bench).time(timing.rotated(lambda s: kernel.run(*s), sets), plan)
    return Timed(timing.timing(t, used, n_sets, why), sets)


def time_baselines(kernel: Kernel, op: Op, plan: Plan, checked: list[Baseline], timed: Timed,
                   bench: Bench | Benches, spec_roofs: Roofs | None, reporter: Reporter, label: str
                   ) -> list[Baseline]:
    """Step 5: each checked baseline timed on the kernel's rotation, its rates, and the kernel's speedup over it."""
    fns = kernel.baselines()
    out = []
    for b in checked:
        if b.error is not None:
            out.append(b)
            continue
        reporter.step(f"{label}: timing {b.name}")
        fn = fns[b.name]

        def call(s: tuple[Inputs, Any], fn: Callable[[Inputs], Any] = fn) -> Any:
            return fn(s[0])

        try:
            t, used, why = _as_benches(bench).time(timing.rotated(call, timed.sets), plan)
        except Exception as err:
            out.append(b.model_copy(update={"error": one_line(err)}))
            continue
        rates = shares(op, spec_roofs, None, t[0])
        out.append(b.model_copy(update={
            "time_s": t[0], "timing": timing.timing(t, used, len(timed.sets), why),
            "achieved_gbps": rates.achieved_gbps, "achieved_tflops": rates.achieved_tflops,
            "speedup": t[0] / timed.timing.median_s,
        }))
    return out


def measure_shape(kernel: Kernel, shape: tuple[int, ...], plan: Plan, spec: GPU | None,
                  ceilings: RunCeilings | None, bench: Bench | Benches, reporter: Reporter, seed: int,
                  l2_bytes: int | None) -> ShapeRecord:
    """Check, time and place one shape (the steps of the module docstring); its record, built once."""
    op = kernel.op(shape, plan.dtype)
    label = f"{kernel.name} {shape_text(shape)} {plan.dtype}"
    spec_roofs = spec.roofs() if spec else None
    prediction = predict(kernel, shape, plan.dtype, op, spec_roofs)

    def record(status: Status, *, checked: Checked | None = None, error: str | None = None,
               timed: Timed | None = None, rates: Shares = Shares(), baselines: list[Baseline] | None = None,
               notes: Iterable[str] = ()) -> ShapeRecord:
        return ShapeRecord(
            kernel=kernel.name, op=op.name, shape=list(shape), shape_text=shape_text(shape),
            # Whole counts (records.ShapeRecord): every kernel's count is a whole number held in a float.
            shape_format=kernel.shape_format, dtype=plan.dtype, flops=round(op.flops), bytes=round(op.bytes),
            unit=op.compute_unit,
            op_dtype=op.dtype, op_kind=op.kind, op_fuses=list(op.fuses), status=status,
            correctness=checked.correctness if checked else None, error=error,
            time_s=timed.timing.median_s if timed else None, timing=timed.timing if timed else None,
            achieved_gbps=rates.achieved_gbps, achieved_tflops=rates.achieved_tflops, bound=prediction.bound,
            predicted_time_s=prediction.predicted_time_s, spec_roof_pct=rates.spec_roof_pct,
            measured_predicted_time_s=rates.measured_predicted_time_s, measured_roof_pct=rates.measured_roof_pct,
            baselines=baselines or [], launches=checked.launches if checked else [], unfused=prediction.unfused,
            notes=[*prediction.notes, *notes, *rates.notes],
        )

    try:
        checked = check(kernel, shape, plan, spec, seed, reporter, label)
    except Exception as err:  # the kernel raised (a compile error, out of resources): report it, go on
        return record("error", error=one_line(err))
    if not checked.correctness.passed:
        return record("failed", checked=checked, notes=["wrong result: not timed"])
    if not plan.timed:
        return record("checked", checked=checked, notes=[INTERPRET_NOTE])

    l2 = l2_bytes if l2_bytes is not None else (int(spec.memory.l2_size_mib * MIB)
                                                 if spec and spec.memory.l2_size_mib else 0)
    try:
        timed = time_kernel(kernel, shape, plan, checked, bench, seed, l2, reporter, label)
    except Exception as err:  # out of memory, a launch that fails only when timed: report it, go on
        return record("error", checked=checked, error=one_line(err))
    rates = shares(op, spec_roofs, ceilings, timed.timing.median_s)
    baselines = time_baselines(kernel, op, plan, checked.baselines, timed, bench, spec_roofs, reporter, label)
    notes = capture_note("kernel", timed.timing)
    notes += [n for b in baselines if b.timing for n in capture_note(f"baseline {b.name}", b.timing)]
    if "torch" in plan.baselines and (picked := kernel.baseline_note(checked.inputs)):
        notes.append(picked)  # which SDPA backend the torch baseline ran (the attention kernels)
    return record("passed", checked=checked, timed=timed, rates=rates, baselines=baselines, notes=notes)


# --- the run -------------------------------------------------------------------------------------------------


def run_measure(
    kernel: Kernel,
    plan: Plan,
    spec: GPU | None,
    *,
    command: str,
    reporter: Reporter | None = None,
    bench: Bench | None = None,
    ceilings: RunCeilings | None = None,
    info: DeviceInfo | None = None,
    events_bench: Bench | None = None,
) -> MeasurementFile:
    """Measure ``kernel`` on every shape of ``plan``; the record of the whole run.

    ``bench`` (default: triton's do_bench with ``plan.timer``), ``events_bench`` (what times a figure that could
    not be captured in a CUDA graph; default: CUDA events, or ``bench`` when that is given), ``ceilings``
    (default: measured now, when the plan is timed, with the same timer) and ``info`` (default: read from the
    device) can be given, which is how the tests run the whole arithmetic on a CPU.
    """
    from .device import require_gpu_stack

    torch_version, triton_version = require_gpu_stack()
    reporter = reporter or Reporter()
    for shape in plan.shapes:
        kernel.check(shape, plan.dtype)
    # The kernels, their baselines and the ceilings are all timed with the plan's timer (and its fallback).
    events = events_bench or bench or timing.gpu_bench("events")
    benches = Benches(bench or timing.gpu_bench(plan.timer), events)
    info = info or device_info(spec, plan.device)
    probe = plan.timed and ceilings is None
    reporter.start(len(plan.shapes) + (1 if probe else 0))
    if probe:
        from .ceilings import measure_ceilings, other_timer

        dtypes = ceiling_dtypes(kernel.op(shape, plan.dtype) for shape in plan.shapes)
        check = bench or timing.gpu_bench(other_timer(plan.timer))
        ceilings = measure_ceilings(benches.main, info.l2_bytes, dtypes, on_step=reporter.step, timer=plan.timer,
                                    events=benches.events, check=check)
        reporter.advance()
    records = []
    for i, shape in enumerate(plan.shapes):
        records.append(measure_shape(kernel, shape, plan, spec, ceilings, benches, reporter,
                                     seed=plan.seed + 1000 * i, l2_bytes=info.l2_bytes))
        reporter.advance()
    return MeasurementFile(
        gpu=info,
        torch_version=torch_version,
        triton_version=triton_version,
        python_version=platform.python_version(),
        date=now(),
        command=command,
        interpret=not plan.timed,
        seed=plan.seed,
        timer=plan.timer if plan.timed else None,
        warmup_ms=plan.warmup_ms if plan.timed else None,
        rep_ms=plan.rep_ms if plan.timed else None,
        ceilings=ceilings,
        records=records,
        notes=spec_mismatch_notes(spec, info) if spec else [],
    )

