"""``rooflinectl profile``'s flow: build the model, run the step under torch.profiler inside the op ranges,
charge every kernel to an engine op, and put the engine's count and prediction beside each.

Timing and attribution (docs/profile.md says the same for users):

- Attribution always comes from one *eager* step profiled inside the ranges (``profile.ranges``): a kernel is
  tied to the aten op that launched it by the profiler's correlation id, and that op to its ranges.
- With ``--cuda-graph`` (the default on a GPU) the step, the cache's position reset first, is captured once and
  replayed ``reps`` times under the profiler. A replayed kernel has no launching op to correlate with, so the
  replay's kernels are matched to the eager step's by position: the capture runs the same code as the eager step,
  so the i-th kernel of a replay is the i-th of the eager step. The match is checked name by name; where it
  fails (a different count or name), the per-op times stay the eager step's and a note says so. Each kernel's
  time is then its mean over the replays.
- On the CPU there are no kernels: each CPU op's self time (its time less its children's) is charged instead,
  labelled "CPU time, not a GPU figure"; no share of a GPU's roof is given for it.
"""

from __future__ import annotations

import math
import platform
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from ..engine.calibrated import op_class, predict_time
from ..engine.count.op import Op
from ..engine.count.transformer import step_ops
from ..engine.roofline import achieved_rates, measured_share, place
from ..errors import UserError
from ..measure.device import device_info, now, spec_mismatch_notes
from ..records.profile import KernelTime, OpProfile, ProfileRecord, Timer
from ..specs.hardware import GPU, Roofs
from ..specs.scenario import resolve_workload
from ..specs.workload import Workload
from ..units import duration
from . import build as hf
from .attribute import Attribution, Event, NameTime, attribute

ATTN_IMPLEMENTATIONS = ("sdpa", "eager")
# Timed steps: replays of the graph (or eager steps) after WARMUP untimed ones; the mean is reported. Ten steps of
# a Llama-3-8B decode are about 0.1 s on an H200 (10.2 ms a step there).
WARMUP, REPS = 3, 10


@dataclass(frozen=True)
class ProfileRequest:
    model: str
    phase: str
    batch: int
    # The step's length, as analyze takes it: decode's context, prefill's seq_len; the other phase's is refused,
    # and None is the bundled scenario's (workloads/decode.yaml, prefill.yaml).
    context: int | None = None
    seq_len: int | None = None
    attn_implementation: str = "sdpa"
    cuda_graph: bool | None = None  # None: on a GPU where it captures
    device: str = "cuda"
    module: str | None = None
    command: str = "rooflinectl profile"
    reps: int = REPS


def workload_of(req: ProfileRequest) -> Workload:
    """The engine's workload for the step: the model, the sizes, the device's data type, flash attention for
    sdpa (one kernel; scores on chip) and naive for eager (qk, softmax, pv through memory), nothing fused (each
    module runs its own kernels)."""
    if req.phase not in ("decode", "prefill"):
        raise UserError(f"--phase {req.phase!r}: decode or prefill")
    if req.attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise UserError(f"--attn-implementation {req.attn_implementation!r}: {' or '.join(ATTN_IMPLEMENTATIONS)}")
    return resolve_workload(req.phase, model=req.model, batch=req.batch, dtype=hf.engine_dtype(req.device),
                            attention="naive" if req.attn_implementation == "eager" else "flash", fused=[],
                            context=req.context, seq_len=req.seq_len)


def core_ops(ops: list[Op]) -> list[str]:
    """The attention core's ops of the step, by kind: attention (flash), or qk, softmax and pv (naive). Every layer
    of a model profile builds attends alike (a window in every layer, or in none: ``build.check_buildable``)."""
    return [o.name for o in ops if o.kind == "attention"]


def run_profile(req: ProfileRequest, gpu: str | None = None, default_gpu: str = "h100-sxm") -> ProfileRecord:
    """The whole flow. The roofs that predict are ``gpu``'s (a spec id or file), else the CUDA device's by its
    name, else on the CPU ``default_gpu``'s (given for reference)."""
    tf_version = hf.require_transformers()
    import torch

    if req.device not in ("cuda", "cpu"):
        raise UserError(f"--device {req.device!r}: cuda or cpu")
    if req.device == "cuda" and not torch.cuda.is_available():
        raise UserError(f"--device cuda: no CUDA GPU is visible to torch {torch.__version__} (--device cpu runs the "
                        f"same flow on the CPU)")
    spec = _spec(gpu, req.device, default_gpu)
    graph = req.device == "cuda" if req.cuda_graph is None else req.cuda_graph
    if graph and req.device != "cuda":
        raise UserError("--cuda-graph needs --device cuda (a CUDA graph replays GPU kernels)")
    # A config.json goes to transformers first, so that an architecture it does not know is named as such; then
    # the engine, which may refuse what transformers accepts (its validation names the field).
    config = hf.config_from_json(req.model) if req.module is None and req.model.endswith(".json") else None
    w = workload_of(req)
    if config is not None:  # transformers builds the user's config as it is; its variants must be ones profile maps
        hf.check_buildable(w.model, config.model_type)
    ops = step_ops(w)
    if req.module is not None:
        built = hf.user_module(req.module, req.device)
    else:
        config = config if config is not None else hf.config_from_model(w.model)
        hf.check_fits(w, req.device, hf.available_bytes(req.device))
        built = hf.decoder_step(hf.build_model(config, req.device, req.attn_implementation), config, w, req.device)
    notes: list[str] = []
    with torch.no_grad():
        events = _eager_events(built, req.device)
        if graph:
            events, step_s, graph_notes = _graph_times(built, events, req.reps)
            notes += graph_notes
        else:
            step_s = _eager_wall(built, req.device, req.reps)
    timer: Timer = "cuda_graph" if graph and not any(n.startswith("no CUDA graph") for n in notes) else "eager"
    a = attribute(events, [(o.name, o.kind) for o in ops], core_ops(ops))
    info = device_info(spec, req.device)
    if req.device == "cuda":
        notes += spec_mismatch_notes(spec, info)  # a --gpu that visibly is not the device
    else:
        info = info.model_copy(update={"name": f"CPU ({platform.processor() or platform.machine()})"})
        notes.append(f"CPU time, not a GPU figure: the CPU ops' self time; predictions are for {spec.name}, "
                     f"given for reference, with no share of its roof")
        notes.append(f"--device cpu runs the model in {w.dtype}, not the bf16 of a GPU run: the CPU's bf16 matmuls are "
                     f"slow and beside the point")
    if a.harness is not None:
        notes.append(f"not in the step: the cache position's reset before it, {a.harness.events} "
                     f"{'kernels' if req.device == 'cuda' else 'CPU ops'}, {duration(a.harness.time_s)}")
    return _record(req, w, ops, a, spec, info, step_s, timer, tf_version, str(torch.__version__), notes)


def _spec(gpu: str | None, device: str, default_gpu: str) -> GPU:
    from ..measure.device import detect_device_spec
    from ..specs.hardware import load_gpu

    if gpu is not None:
        return load_gpu(gpu)
    return detect_device_spec() if device == "cuda" else load_gpu(default_gpu)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _eager_events(built: hf.Built, device: str) -> list[Event]:
    """One eager step inside the ranges, profiled: its events (after WARMUP untimed steps)."""
    import torch

    from . import ranges, trace

    for _ in range(WARMUP):
        built.reset()
        built.step()
    _sync(device)
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with ranges.installed(built.model, built.cache):
        with _profiler(activities) as prof:
            with ranges.harness_range():
                built.reset()
            built.step()
            _sync(device)
    raw = list(prof.events())
    return trace.gpu_events(raw) if device == "cuda" else trace.cpu_events(raw)


def _eager_wall(built: hf.Built, device: str, reps: int) -> float:
    """One eager step's wall time, the mean of ``reps`` (CUDA events on a GPU, the CPU's clock on the CPU)."""
    import time

    import torch

    if device == "cuda":
        # torch.cuda.Event is unannotated.
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        for _ in range(reps):
            built.reset()
            built.step()
        end.record()
        torch.cuda.synchronize()
        return float(start.elapsed_time(end)) * 1e-3 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        built.reset()
        built.step()
    return (time.perf_counter() - t0) / reps


def _graph_times(built: hf.Built, eager: list[Event], reps: int) -> tuple[list[Event], float, list[str]]:
    """Capture the step (reset first), replay it ``reps`` times under the profiler, and give each eager event
    its kernel's mean replay time where the replay's kernels match the eager step's one to one (module
    docstring). Returns (events, one replay's wall time, notes). A step that does not capture is timed eagerly,
    with a note saying why."""
    import torch

    from . import trace

    try:
        stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch's Stream is unannotated
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            built.reset()
            built.step()
        torch.cuda.current_stream().wait_stream(stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            built.reset()
            built.step()
        g.replay()
        torch.cuda.synchronize()
    except Exception as err:  # a step that does not capture (host sync, dynamic shape): timed eagerly
        message = " ".join(str(err).split())[:160]
        return eager, _eager_wall(built, "cuda", reps), [f"no CUDA graph (the step did not capture: "
                                                        f"{type(err).__name__}: {message}); timed eagerly"]
    # torch.cuda.Event is unannotated.
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record()
    for _ in range(reps):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    step_s = float(start.elapsed_time(end)) * 1e-3 / reps
    with _profiler([torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(reps):
            g.replay()
        torch.cuda.synchronize()
    replayed = [(k.name, trace.kernel_time_s(k)) for k in trace.kernels(list(prof.events()))]
    matched = trace.match_replays(eager, replayed, reps)
    if matched is None:
        return eager, step_s, [f"the replays' kernels ({len(replayed)} in {reps} replays) do not match the eager "
                               f"step's {len(eager)} one to one: per-op times are the eager step's kernel times; "
                               f"the step's wall time is the replay's"]
    return matched, step_s, []


@contextmanager
def _profiler(activities: list[Any]) -> Iterator[Any]:
    """torch.profiler.profile over ``activities``, without torch's warning, printed on every GPU run, that it
    clears its events at the end of each cycle (one profile is one cycle here: nothing is lost)."""
    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Warning: Profiler clears events")
        with torch.profiler.profile(activities=activities) as prof:
            yield prof


def _whole(op: Op) -> Op:
    """The op's every instance in the step as one: FLOPs and bytes times its count."""
    return replace(op, flops=op.flops * op.count, bytes=op.bytes * op.count, count=1)


def _kernel_times(items: tuple[NameTime, ...], total: float) -> list[KernelTime]:
    return [KernelTime(name=i.name, time_s=i.time_s, launches=i.events,
                       step_pct=100 * i.time_s / total if total > 0 else 0.0) for i in items]


def _calibrated_s(op: Op, whole: Op, spec: GPU, roofs: Roofs | None) -> float | None:
    """The op's time in the step under the GPU file's calibration: its op model's time for one instance × the
    count, where the file has an op model (``engine.calibrated``: the model is not linear in the count), else
    the whole count at the measured ceilings; None without measured ceilings."""
    if roofs is None:
        return None
    model = spec.measured.op_model if spec.measured is not None else None
    if model is not None and op_class(op) is not None:
        return predict_time(op, model, roofs)[0] * op.count
    return place(whole, roofs).time_s


def _record(req: ProfileRequest, w: Workload, ops: list[Op], a: Attribution, spec: GPU, info: Any,
            step_s: float, timer: Timer, tf_version: str, torch_version: str, notes: list[str]) -> ProfileRecord:
    gpu_clock = req.device == "cuda"
    spec_roofs = spec.roofs(False)
    calibrated = spec.roofs(True) if spec.measured is not None else None
    rows = []
    for op, got in zip(ops, a.ops, strict=True):
        whole = _whole(op)
        measured = got.time_s if got.events and got.time_s > 0 else None
        gbps = tflops = pct = None
        if measured is not None:
            gbps, tflops = achieved_rates(whole, measured)
            if gpu_clock:
                pct = 100 * measured_share(whole, spec_roofs, measured).fraction
        rows.append(OpProfile(
            op=op.name, kind=op.kind, fuses=list(op.fuses), unit=op.compute_unit, op_dtype=op.dtype, count=op.count,
            flops=round(whole.flops), bytes=max(1, round(whole.bytes)),
            predicted_s=place(whole, spec_roofs).time_s,
            calibrated_s=_calibrated_s(op, whole, spec, calibrated),
            measured_s=measured, launches=got.events, achieved_gbps=gbps, achieved_tflops=tflops, roof_pct=pct,
            overhead=_kernel_times(got.overhead, a.total_s)))
    unattributed = _kernel_times(a.unattributed, a.total_s)
    return ProfileRecord(
        gpu=info, torch_version=torch_version, transformers_version=tf_version,
        python_version=platform.python_version(), date=now(), command=req.command, model=req.model,
        workload=w.label(), phase="decode" if w.phase == "decode" else "prefill", batch=w.batch, length=w.kv_len if w.phase == "decode" else w.tokens_per_seq,
        attn_implementation=req.attn_implementation, device="cuda" if req.device == "cuda" else "cpu",
        clock="gpu kernels" if gpu_clock else "cpu ops", timer=timer, step_s=step_s,
        profiled_s=a.total_s, work_s=a.work_s, overhead_s=a.overhead_s, unattributed_s=a.unattributed_s,
        launches=a.events, ops=rows, unattributed=unattributed,
        summary=summary(a, gpu_clock), notes=notes)


def summary(a: Attribution, gpu: bool) -> str:
    """'44% of the step is in kernels the roofline does not count; the largest is X, 2.4 ms in 64 launches'."""
    what, launches = ("kernels", "launches") if gpu else ("CPU ops", "calls")
    groups: dict[str, list[NameTime]] = {}
    for o in a.ops:
        for k in o.overhead:
            groups.setdefault(f"{k.name} (in {o.op})", []).append(k)
    for u in a.unattributed:
        groups.setdefault(u.name, []).append(u)
    if a.total_s <= 0:
        return f"no {what} ran in the step"
    uncounted = a.overhead_s + a.unattributed_s
    share = uncounted / a.total_s
    if not groups:
        return f"every one of the step's {what} is work the roofline counts"
    name, items = max(groups.items(), key=lambda kv: (math.fsum(i.time_s for i in kv[1]), kv[0]))
    t = math.fsum(i.time_s for i in items)
    n = sum(i.events for i in items)
    return (f"{share:.0%} of the step is in {what} the roofline does not count; the largest is {name}, "
            f"{duration(t)} in {n:,} {launches}")
