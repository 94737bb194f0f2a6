"""torch.profiler's events as ``attribute.Event``: the kernels of a GPU run, or the CPU ops of a CPU run, each with
the rooflinectl ranges around it and the CPU calls below the innermost one.

The tree is the profiler's own (``FunctionEvent.cpu_parent``, built from the CPU ops' nesting on their thread).
A kernel is tied to the aten op that launched it by the profiler's correlation id: the kernel's
``linked_correlation_id`` is the launching op's ``id`` (``torch.autograd.profiler._parse_kineto_results``), and
that op's ancestors give the ranges. A kernel that no op launched, or whose op is outside every range, is kept
with no range (unattributed), never dropped.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from .attribute import Event, Range
from .ranges import PREFIX


def _is_annotation(e: Any) -> bool:
    return bool(getattr(e, "is_user_annotation", False)) or e.name.startswith(PREFIX)


def _context(e: Any) -> tuple[tuple[Range, ...], tuple[str, ...], int]:
    """(the rooflinectl ranges above ``e``, outermost first; the CPU calls from the innermost range down to
    ``e``, outermost first; the id of the outermost of those calls)."""
    calls: list[Any] = []
    ranges: list[Range] = []
    node = e
    while node is not None:
        if node.name.startswith(PREFIX):
            ranges.append(Range(node.name.removeprefix(PREFIX), int(node.id)))
        elif not _is_annotation(node) and not ranges:
            calls.append(node)
        node = node.cpu_parent
    calls.reverse()
    ranges.reverse()
    return tuple(ranges), tuple(c.name for c in calls), int(calls[0].id) if calls else -1


def _us(e: Any) -> float:
    return float(e.time_range.start)


def cpu_events(events: Iterable[Any]) -> list[Event]:
    """Every CPU op (not the ranges themselves) with its self CPU time: a parent's time less its children's, so
    that the ops' times add up to the time spent in ops, each microsecond once."""
    out = []
    for e in events:
        if _is_annotation(e) or _device(e) != "CPU":
            continue
        ranges, calls, call_id = _context(e)
        out.append(Event(name=e.name, time_s=float(e.self_cpu_time_total) * 1e-6, ranges=ranges, calls=calls,
                         call_id=call_id, start_s=_us(e) * 1e-6))
    return out


def _device(e: Any) -> str:
    return str(getattr(e, "device_type", "CPU")).rsplit(".", 1)[-1]


# The profiler's own bookkeeping, which some torch versions list among the device's events: not the model's work.
PROFILER_OVERHEAD = frozenset({"Activity Buffer Request"})


def kernels(events: Iterable[Any]) -> list[Any]:
    """The device's own events (kernels, memcpy, memset), not the device-side mirror of the ranges nor the
    profiler's bookkeeping, in the order they started."""
    out = [e for e in events if _device(e) == "CUDA" and not _is_annotation(e)
           and not e.name.startswith("gpu_user_annotation") and e.name not in PROFILER_OVERHEAD]
    return sorted(out, key=_us)


# The CUDA runtime's and driver's calls that launch device work (cudaLaunchKernel, cudaLaunchKernelExC,
# cuLaunchKernelEx, cudaMemcpyAsync, cudaGraphLaunch …): on the CPU side, a kernel's correlation id is theirs.
_RUNTIME_CALL = re.compile(r"^cu(da)?[A-Z]")


def _launchers(events: list[Any]) -> tuple[dict[int, Any], dict[int, Any]]:
    """(the CPU ops by id that no correlation links elsewhere, the runtime's launch calls by id)."""
    ops, calls = {}, {}
    for e in events:
        if _device(e) != "CPU" or _is_annotation(e):
            continue
        if _RUNTIME_CALL.match(e.name):
            calls[int(e.id)] = e
        elif int(getattr(e, "linked_correlation_id", 0) or 0) == 0:
            ops[int(e.id)] = e
    return ops, calls


def _launcher(k: Any, ops: dict[int, Any], calls: dict[int, Any]) -> Any | None:
    """The CPU op that launched kernel ``k``. Two shapes of torch.profiler's events are read: a kernel whose
    ``linked_correlation_id`` is the launching op's id; and (torch 2.11, seen on the H200) a kernel whose own
    ``id`` is the correlation id of the runtime call that launched it (``cudaLaunchKernel`` …, no linked id), whose
    CPU parent is the op."""
    linked = int(getattr(k, "linked_correlation_id", 0) or 0)
    if linked:
        return ops.get(linked)
    call = calls.get(int(k.id))
    return call.cpu_parent if call is not None else None


def gpu_events(events: list[Any]) -> list[Event]:
    """Every kernel with its device time, tied to its launching op's ranges and calls."""
    ops, calls = _launchers(events)
    out = []
    for k in kernels(events):
        launcher = _launcher(k, ops, calls)
        ranges, calls_above, call_id = _context(launcher) if launcher is not None else ((), (), -1)
        out.append(Event(name=k.name, time_s=kernel_time_s(k), ranges=ranges, calls=calls_above, call_id=call_id,
                         start_s=_us(k) * 1e-6))
    return out


def kernel_time_s(k: Any) -> float:
    return float(k.time_range.end - k.time_range.start) * 1e-6


def match_replays(eager: Sequence[Event], replayed: Sequence[tuple[str, float]], reps: int) -> list[Event] | None:
    """The eager step's events with each kernel's mean time over ``reps`` graph replays, where the replays'
    kernels (name, seconds), in the order they started, are the eager step's kernels ``reps`` times over, name
    for name; None where they are not (a different count, or a name out of place)."""
    n = len(eager)
    if n == 0 or reps < 1 or len(replayed) != n * reps:
        return None
    chunks = [replayed[i * n:(i + 1) * n] for i in range(reps)]
    if any(name != e.name for chunk in chunks for (name, _), e in zip(chunk, eager, strict=True)):
        return None
    return [replace(e, time_s=statistics.fmean(chunk[i][1] for chunk in chunks)) for i, e in enumerate(eager)]
