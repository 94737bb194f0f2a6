"""The measure harness: run a registered kernel, check it, time it honestly, and place it on the roofline.

Per shape, in this order (DESIGN.md, "Measuring honestly"):

1. correctness: fresh random inputs (a recorded seed), the output poisoned with NaN, one run, the relative error
   against the kernel's torch reference in float32/float64 and the kernel's tolerance for the data type. A kernel
   that fails (or raises) is reported as such and neither it nor its baselines are timed.
2. timing: ``triton.testing.do_bench`` (CUDA events, warm-up, the L2 flushed before each run; median and the
   20th/80th percentiles), rotating among several input sets when the working set is under 4 L2s, so that a run
   never finds its inputs in the L2 that the previous run left there. ``timer="cuda_graph"`` replays the runs
   from a CUDA graph instead (``do_bench_cudagraph``): no CPU launch overhead between kernels of a few
   microseconds, and no flush, whose dirty lines a kernel that moves only a few L2s of data would otherwise
   spend part of its time writing back; the rotation is then what keeps the L2 honest.
3. baselines (torch eager, torch.compile), checked against the same reference and timed the same way.
4. the numbers: achieved GB/s and TFLOP/s from the engine's FLOP and byte count of the same op
   (``kernel.op``), the engine's predicted time under the spec's roofs and under the ceilings measured in this run
   (``roofline.place``), and the share of that attainable time the kernel reached.

The ceilings (copy bandwidth, matmul peaks for the data types the run's ops need) are measured once per run by
``rooflinectl.measure.ceilings``. Under ``interpret`` (Triton's interpreter, on the CPU) only step 1 runs.

Torch and triton are imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import itertools
import math
import os
import platform
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from ..engine.roofline import place
from ..errors import UserError
from ..specs.hardware import GPU, Roofs
from ..units import MIB
from .records import (
    Baseline,
    Ceilings,
    Correctness,
    DeviceInfo,
    LaunchRecord,
    MeasurementFile,
    ShapeRecord,
    Timing,
    UnfusedOp,
)

if TYPE_CHECKING:
    from ..engine.op import Op
    from ..kernels.base import Kernel, Launch

INSTALL_HINT = "pip install -e '.[gpu]'"
INTERPRETER_DEVICE_NAME = "CPU (Triton interpreter)"
BASELINE_CHOICES = ("torch", "compile", "all", "none")

# Rotate input sets until they hold this many L2s (the working set of one run times the number of sets).
L2_MULTIPLE = 4
# At most this many input sets, and at most this share of the device's free memory for all of them.
MAX_INPUT_SETS = 64
MAX_FREE_MEMORY_SHARE = 0.5
# do_bench's windows, in ms of GPU time: warm-up runs, then timed runs (triton's defaults are 25 and 100).
WARMUP_MS = 25
REP_MS = 100
QUANTILES = (0.5, 0.2, 0.8)  # median and the 20-80% band, from the same timed runs

Bench = Callable[..., tuple[float, float, float]]  # bench(fn, warmup_ms=, rep_ms=) -> (median, p20, p80) seconds


# --- pure pieces: shapes, spec detection, rotation, the arithmetic of the numbers -------------------------------


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


def shape_text(shape: Sequence[int]) -> str:
    return "x".join(str(s) for s in shape)


_FORM_FACTORS = re.compile(r"^(pcie|sxm\d*|nvl|oam|mezz)$")
_CAPACITY = re.compile(r"^\d+gb$")
_VENDOR_WORDS = {"nvidia", "amd", "tesla", "geforce", "instinct", "radeon"}


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t and t not in _VENDOR_WORDS}


def detect_spec(device_name: str, gpus: Sequence[GPU]) -> GPU:
    """The spec whose id, aliases or name match the device name (``'NVIDIA H200'`` -> the ``h200`` spec).

    A spec matches when every word of one of its names (vendor words aside) is a word of the device name; the
    match with the most words wins. A form factor in the device name (PCIe, SXM, NVL) must be one the spec
    names, so that an H100 PCIe is never compared with the H100 SXM's 3.35 TB/s; so must a memory size ("40GB"),
    where the spec names one. No match, or two specs tied: a UserError asking for --gpu.
    """
    device = _tokens(device_name)
    device_forms = {t for t in device if _FORM_FACTORS.match(t)}
    device_sizes = {t for t in device if _CAPACITY.match(t)}
    scored: list[tuple[int, GPU]] = []
    for gpu in gpus:
        names = [gpu.id, *gpu.aliases, gpu.name]
        spec_words = set().union(*(_tokens(n) for n in names))
        spec_forms = {t for t in spec_words if _FORM_FACTORS.match(t)}
        # "sxm" in the device name matches a spec that says sxm5 and the other way round.
        if device_forms and not any(d.rstrip("0123456789") == s.rstrip("0123456789")
                                    for d in device_forms for s in spec_forms):
            continue
        spec_sizes = {t for t in spec_words if _CAPACITY.match(t)}
        if device_sizes and spec_sizes and not device_sizes & spec_sizes:
            continue
        best = max((len(_tokens(n)) for n in names if _tokens(n) and _tokens(n) <= device), default=0)
        if best:
            scored.append((best, gpu))
    if not scored:
        raise UserError(
            f"no hardware spec matches the device '{device_name}': pass --gpu ID or --gpu FILE "
            f"('rooflinectl hardware list' shows the known ones)"
        )
    scored.sort(key=lambda s: -s[0])
    top = [g for score, g in scored if score == scored[0][0]]
    if len({g.id for g in top}) > 1:
        raise UserError(
            f"the device '{device_name}' matches several specs ({', '.join(sorted(g.id for g in top))}): "
            f"pass --gpu to choose one"
        )
    return top[0]


def input_sets(working_set_bytes: int, l2_bytes: int, free_bytes: int | None = None) -> int:
    """How many input sets to rotate so that together they hold ``L2_MULTIPLE`` L2s (1 when one set already does),
    capped by ``MAX_INPUT_SETS`` and by ``MAX_FREE_MEMORY_SHARE`` of the free device memory."""
    if working_set_bytes <= 0:
        raise ValueError("working set must be positive")
    n = max(1, math.ceil(L2_MULTIPLE * l2_bytes / working_set_bytes))
    n = min(n, MAX_INPUT_SETS)
    if free_bytes is not None:
        n = min(n, max(1, int(MAX_FREE_MEMORY_SHARE * free_bytes // working_set_bytes)))
    return n


def achieved(op: Op, time_s: float) -> tuple[float, float]:
    """(GB/s, TFLOP/s) that ``op``'s engine count reaches in ``time_s``."""
    return op.bytes / time_s / 1e9, op.flops / time_s / 1e12


def roof_share(op: Op, roofs: Roofs, time_s: float) -> tuple[float, float]:
    """(predicted time, percent of the roof reached): the engine's predicted time of ``op`` under ``roofs`` over
    the measured time. 100% is the roofline itself: the binding roof's bandwidth for a memory-bound op, its peak
    FLOP/s for a compute-bound one."""
    predicted = place(op, roofs).time_s
    return predicted, 100.0 * predicted / time_s


def measured_roofs(spec: Roofs, ceilings: Ceilings) -> Roofs:
    """The spec's roofs with the ceilings measured in this run put in: HBM bandwidth from the copy, the tensor peak
    of each measured data type from its matmul. What was not measured keeps the spec's figure (as
    ``GPU.roofs(calibrated=True)`` does)."""
    return spec.model_copy(update={
        "label": "measured",
        "bandwidth_gbps": ceilings.copy_bandwidth_gbps or spec.bandwidth_gbps,
        "tensor_tflops": {**spec.tensor_tflops, **ceilings.tensor_tflops},
    })


def ceiling_dtypes(ops: Iterable[Op]) -> list[str]:
    """The data types whose matmul peak a run needs: those of its tensor-core ops, in first-seen order."""
    seen: dict[str, None] = {}
    for op in ops:
        if op.unit == "tensor":
            seen.setdefault(op.dtype, None)
    return list(seen)


def one_line(err: BaseException, limit: int = 300) -> str:
    text = str(err).strip().splitlines()
    msg = f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")
    return msg if len(msg) <= limit else msg[: limit - 1] + "…"


def _plain(value):
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def launch_record(launch: Launch, gpu: GPU | None) -> LaunchRecord:
    """One launch's anatomy: what the launch and its compiled kernel say, and, through
    ``occupancy.launch_anatomy``, the occupancy and waves it gives on ``gpu`` and its warnings."""
    warp_size = gpu.limits.warp_size if gpu else 32
    warps = launch.num_warps
    fields = dict(
        function=launch.function,
        grid=list(launch.grid),
        programs=launch.programs,
        num_warps=warps,
        threads_per_program=warps * warp_size if warps else None,
        n_regs=launch.n_regs,
        n_spills=launch.n_spills,
        shared_bytes=launch.shared_bytes,
        config={k: _plain(v) for k, v in launch.config.items()},
    )
    if gpu is None or warps is None:
        why = "no hardware spec (--gpu)" if gpu is None else "the launch does not say its num_warps"
        return LaunchRecord(**fields, note=f"occupancy not computed: {why}")
    from ..engine.occupancy import launch_anatomy

    try:
        a = launch_anatomy(gpu, tuple(launch.grid), warps, launch.n_regs, launch.n_spills, launch.shared_bytes)
    except UserError as err:  # a launch that the spec's limits cannot hold: say so rather than guess
        return LaunchRecord(**fields, note=f"occupancy not computed on {gpu.id}: {err}")
    occ = a.occupancy
    return LaunchRecord(
        **fields,
        programs_per_sm=occ.blocks_per_sm,
        occupancy=occ.occupancy,
        occupancy_upper_bound=not a.metadata_complete,
        limiter=", ".join(occ.binding) or None,
        waves=a.waves,
        last_wave_fill=a.last_wave_fill,
        warnings=list(a.warnings),
    )


# --- the run -------------------------------------------------------------------------------------------------


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
    baselines: tuple[str, ...] = ()
    seed: int = 0
    timer: str = "events"  # "events" (do_bench) or "cuda_graph" (do_bench_cudagraph)
    warmup_ms: float = WARMUP_MS
    rep_ms: float = REP_MS


def baselines_for(choice: str) -> tuple[str, ...]:
    if choice not in BASELINE_CHOICES:
        raise UserError(f"--baseline '{choice}' is not one of {', '.join(BASELINE_CHOICES)}")
    return {"all": ("torch", "compile"), "none": ()}.get(choice, (choice,))


def set_interpret(kernel_module: str) -> None:
    """Make Triton interpret kernels on the CPU: TRITON_INTERPRET must be set before the kernel module is imported,
    since ``triton.jit`` reads it when it wraps the function."""
    if os.environ.get("TRITON_INTERPRET") != "1" and kernel_module in sys.modules:
        raise UserError(f"--interpret: {kernel_module} was imported before TRITON_INTERPRET was set; "
                        f"run it in a fresh process")
    os.environ["TRITON_INTERPRET"] = "1"


def require_gpu_stack() -> tuple[str, str]:
    """torch's and triton's versions; a UserError saying what to install when either is missing."""
    try:
        import torch
        import triton
    except ImportError as err:
        missing = getattr(err, "name", None) or "torch/triton"
        raise UserError(
            f"measure needs torch and triton ({missing} is not installed): {INSTALL_HINT} (with no GPU, a CPU "
            f"build of torch and then --interpret checks correctness on the CPU)"
        ) from None
    return torch.__version__, triton.__version__


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise UserError(
            f"no CUDA GPU is visible to torch {torch.__version__}: on a machine with an NVIDIA GPU run "
            f"{INSTALL_HINT}, or use --interpret to check correctness on the CPU"
        )


def driver_version() -> str | None:
    """The NVIDIA driver's version (pynvml, else nvidia-smi), or None."""
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # not installed, or no NVML: try the command
        pass
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if out.returncode == 0 and lines else None


def device_info(spec: GPU | None, device: str) -> DeviceInfo:
    if device != "cuda":
        return DeviceInfo(name=INTERPRETER_DEVICE_NAME, spec=spec.id if spec else None,
                          spec_name=spec.name if spec else None)
    import torch

    props = torch.cuda.get_device_properties(0)
    major, minor = torch.cuda.get_device_capability(0)
    return DeviceInfo(
        name=torch.cuda.get_device_name(0),
        spec=spec.id if spec else None,
        spec_name=spec.name if spec else None,
        driver=driver_version(),
        cuda=torch.version.cuda,
        compute_capability=f"{major}.{minor}",
        sm_count=props.multi_processor_count,
        l2_bytes=getattr(props, "L2_cache_size", None),
    )


def spec_mismatch_notes(spec: GPU, info: DeviceInfo) -> list[str]:
    """Where the spec compared against visibly is not the device (a wrong --gpu)."""
    notes = []
    if info.sm_count is not None and info.sm_count != spec.sm_count:
        notes.append(f"the spec {spec.id} has {spec.sm_count} SMs, the device {info.sm_count}: is --gpu right?")
    if info.compute_capability and spec.compute_capability and info.compute_capability != spec.compute_capability:
        notes.append(f"the spec {spec.id} is compute capability {spec.compute_capability}, the device "
                     f"{info.compute_capability}: is --gpu right?")
    return notes


def detect_device_spec() -> GPU:
    """The spec of the CUDA device in hand, by its name (see ``detect_spec``)."""
    import torch

    from ..specs.hardware import list_gpus

    return detect_spec(torch.cuda.get_device_name(0), list_gpus())


def now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def do_bench(fn: Callable[[], object], *, warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS,
             timer: str = "events") -> tuple[float, float, float]:
    """(median, 20th, 80th percentile) in seconds of ``fn`` on the GPU, from one set of timed runs."""
    import inspect

    import torch
    import triton.testing

    if timer == "cuda_graph":
        bench = triton.testing.do_bench_cudagraph
        if "quantiles" not in inspect.signature(bench).parameters:
            raise UserError(f"--cuda-graph: triton {triton.__version__}'s do_bench_cudagraph gives no quantiles; "
                            f"time without --cuda-graph")
        # Older tritons refuse to capture on the default stream; newer ones make their own side stream anyway.
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = bench(fn, rep=rep_ms, quantiles=list(QUANTILES), return_mode="median")
    else:
        ms = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=list(QUANTILES),
                                     return_mode="median")
    median, p20, p80 = (m / 1e3 for m in ms)
    return median, p20, p80


def _working_set(inputs: dict, out) -> int:
    tensors = [t for t in inputs.values() if hasattr(t, "nbytes")]
    return sum(int(t.nbytes) for t in tensors) + int(out.nbytes)


def _poison(out) -> None:
    """NaN in a floating output (the largest value in an integer one), so that an unwritten element shows."""
    if out.dtype.is_floating_point:
        out.fill_(float("nan"))
    else:
        import torch

        out.fill_(torch.iinfo(out.dtype).max)


def _fresh(kernel: Kernel, shape, plan: Plan, seed: int):
    import torch

    gen = torch.Generator(device=plan.device).manual_seed(seed)
    inputs = kernel.make_inputs(shape, plan.dtype, plan.device, gen)
    return inputs, kernel.make_output(inputs)


def _check(out, ref, tolerance: float, seed: int) -> Correctness:
    from ..kernels.base import relative_error

    if tuple(out.shape) != tuple(ref.shape):
        return Correctness(rel_error=math.inf, tolerance=tolerance, passed=False, seed=seed)
    err = relative_error(out, ref)
    return Correctness(rel_error=err, tolerance=tolerance, passed=math.isfinite(err) and err <= tolerance,
                       seed=seed)


def _timing(median: float, p20: float, p80: float, plan: Plan, sets: int) -> Timing:
    return Timing(median_s=median, p20_s=p20, p80_s=p80, timer=plan.timer, input_sets=sets)


def measure_shape(
    kernel: Kernel,
    shape: tuple[int, ...],
    plan: Plan,
    spec: GPU | None,
    ceilings: Ceilings | None,
    bench: Bench,
    reporter: Reporter,
    seed: int,
    l2_bytes: int | None,
) -> ShapeRecord:
    """Check, time and place one shape (see the module docstring for the order)."""
    op = kernel.op(shape, plan.dtype)
    label = f"{kernel.name} {shape_text(shape)} {plan.dtype}"
    rec = ShapeRecord(
        kernel=kernel.name, op=op.name, shape=list(shape), shape_text=shape_text(shape),
        shape_format=kernel.shape_format, dtype=plan.dtype, flops=op.flops, bytes=op.bytes, unit=op.unit,
        op_dtype=op.dtype, op_kind=op.kind, status="checked",
    )
    notes: list[str] = []
    spec_roofs = spec.roofs() if spec else None
    if spec_roofs is not None:
        try:
            rec.predicted_time_s = place(op, spec_roofs).time_s
            rec.bound = place(op, spec_roofs).bound
        except UserError as err:
            notes.append(f"no prediction: {err}")
        rec.unfused = [_unfused(u, spec_roofs) for u in kernel.unfused_ops(shape, plan.dtype)]

    # 1. correctness, on fresh random inputs with a poisoned output
    reporter.step(f"{label}: checking against the reference")
    try:
        inputs, out = _fresh(kernel, shape, plan, seed)
        _poison(out)
        kernel.run(inputs, out)
        _sync(plan.device)
        launches = kernel.last_launches()
        ref = kernel.reference(inputs)
        rec.correctness = _check(out, ref, kernel.tolerance(plan.dtype), seed)
    except Exception as err:  # the kernel raised (a compile error, out of resources): report it, go on
        rec.status, rec.error, rec.notes = "error", one_line(err), notes
        return rec
    rec.launches = [launch_record(launch, spec) for launch in launches]
    if not rec.correctness.passed:
        rec.status = "failed"
        notes.append("wrong result: not timed")
        rec.notes = notes
        return rec
    if not plan.timed:
        rec.status = "checked"
        notes.append("checked in the Triton interpreter: correctness only, no timing")
        rec.notes = notes
        return rec

    # The baselines' own errors against the same reference, before it is freed (it can be large in float64).
    baseline_fns = kernel.baselines()
    baselines: dict[str, Baseline] = {}
    for name in plan.baselines:
        reporter.step(f"{label}: checking {name}" + (" (compiling)" if name == "compile" else ""))
        try:
            result = baseline_fns[name](inputs)
            _sync(plan.device)
            baselines[name] = Baseline(name=name, rel_error=_check(result, ref, math.inf, seed).rel_error)
            del result
        except Exception as err:  # torch.compile can fail on a machine without a C compiler, say
            baselines[name] = Baseline(name=name, error=one_line(err))
    del ref

    # 2. timing, rotating input sets past the L2
    l2 = l2_bytes if l2_bytes is not None else (int(spec.memory.l2_size_mib * MIB) if spec else 0)
    free = _free_memory(plan.device)
    n_sets = input_sets(_working_set(inputs, out), l2, free) if l2 else 1
    reporter.step(f"{label}: timing ({n_sets} input set{'s' if n_sets > 1 else ''})")
    try:
        sets = [(inputs, out)] + [_fresh(kernel, shape, plan, seed + i) for i in range(1, n_sets)]
        cycle = itertools.cycle(sets)

        def run_kernel():
            i, o = next(cycle)
            kernel.run(i, o)

        t = bench(run_kernel, warmup_ms=plan.warmup_ms, rep_ms=plan.rep_ms)
    except Exception as err:  # out of memory, a launch that fails only when timed: report it, go on
        rec.status, rec.error, rec.notes = "error", one_line(err), notes
        return rec
    rec.status = "passed"
    rec.timing = _timing(*t, plan=plan, sets=n_sets)
    rec.time_s = t[0]
    rec.achieved_gbps, rec.achieved_tflops = achieved(op, t[0])
    if spec_roofs is not None and rec.predicted_time_s is not None:
        rec.spec_roof_pct = roof_share(op, spec_roofs, t[0])[1]
        if ceilings is not None and ceilings.copy_bandwidth_gbps:
            mroofs = measured_roofs(spec_roofs, ceilings)
            rec.measured_predicted_time_s, rec.measured_roof_pct = roof_share(op, mroofs, t[0])
            if op.unit == "tensor" and op.dtype not in ceilings.tensor_tflops:
                notes.append(f"no {op.dtype} matmul ceiling measured: '% of measured' uses the spec's peak")

    # 3. baselines, timed the same way on the same rotation
    for name in plan.baselines:
        b = baselines[name]
        if b.error is not None:
            continue
        reporter.step(f"{label}: timing {name}")
        fn = baseline_fns[name]
        bcycle = itertools.cycle(sets)

        def run_baseline(fn=fn, bcycle=bcycle):
            return fn(next(bcycle)[0])

        try:
            bt = bench(run_baseline, warmup_ms=plan.warmup_ms, rep_ms=plan.rep_ms)
        except Exception as err:
            baselines[name] = b.model_copy(update={"error": one_line(err)})
            continue
        gbps, tflops = achieved(op, bt[0])
        baselines[name] = b.model_copy(update={
            "time_s": bt[0], "timing": _timing(*bt, plan=plan, sets=n_sets), "achieved_gbps": gbps,
            "achieved_tflops": tflops, "speedup": bt[0] / t[0],
        })
    rec.baselines = list(baselines.values())
    rec.notes = notes
    return rec


def _unfused(op: Op, roofs: Roofs) -> UnfusedOp:
    try:
        predicted = place(op, roofs).time_s * op.count
    except UserError:
        predicted = None
    return UnfusedOp(op=op.name, flops=op.flops * op.count, bytes=op.bytes * op.count, predicted_time_s=predicted)


def _free_memory(device: str) -> int | None:
    if device != "cuda":
        return None
    import torch

    torch.cuda.empty_cache()  # blocks torch caches but no longer uses count as free
    return torch.cuda.mem_get_info()[0]


def run_measure(
    kernel: Kernel,
    plan: Plan,
    spec: GPU | None,
    *,
    command: str,
    reporter: Reporter | None = None,
    bench: Bench | None = None,
    ceilings: Ceilings | None = None,
    info: DeviceInfo | None = None,
) -> MeasurementFile:
    """Measure ``kernel`` on every shape of ``plan``; the record of the whole run.

    ``bench`` (default: triton's do_bench with ``plan.timer``) and ``ceilings`` (default: measured now, when the
    plan is timed) and ``info`` (default: read from the device) can be given, which is how the tests run the whole
    arithmetic on a CPU.
    """
    import torch
    import triton

    reporter = reporter or Reporter()
    for shape in plan.shapes:
        kernel.check(shape, plan.dtype)
    ceiling_bench = bench
    if bench is None:
        def bench(fn, warmup_ms=WARMUP_MS, rep_ms=REP_MS):
            return do_bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, timer=plan.timer)

        # The ceilings are timed as calibrate times them, with CUDA events, whatever the kernel's timer.
        def ceiling_bench(fn, warmup_ms=WARMUP_MS, rep_ms=REP_MS):
            return do_bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, timer="events")
    info = info or device_info(spec, plan.device)
    notes = spec_mismatch_notes(spec, info) if spec else []
    ops = [kernel.op(shape, plan.dtype) for shape in plan.shapes]
    shape_steps = len(plan.shapes)
    reporter.start(shape_steps + (1 if plan.timed and ceilings is None else 0))
    if plan.timed and ceilings is None:
        from .ceilings import measure_ceilings

        ceilings = measure_ceilings(ceiling_bench, info.l2_bytes, ceiling_dtypes(ops), on_step=reporter.step)
        reporter.advance()
    records = []
    for i, shape in enumerate(plan.shapes):
        records.append(measure_shape(kernel, shape, plan, spec, ceilings, bench, reporter,
                                     seed=plan.seed + 1000 * i, l2_bytes=info.l2_bytes))
        reporter.advance()
    return MeasurementFile(
        gpu=info,
        torch_version=torch.__version__,
        triton_version=triton.__version__,
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
        notes=notes,
    )
