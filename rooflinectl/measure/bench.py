"""Timing on the GPU: CUDA-graph replays (the default) or CUDA events, over input sets rotated past the L2.

- ``do_bench``: the median and the 20th/80th percentiles of one set of timed runs, after a warm-up.
  ``timer="cuda_graph"`` (``DEFAULT_TIMER``) replays the runs from a CUDA graph (``do_bench_cudagraph``): no
  CPU launch gap between kernels of a few microseconds, and no L2 flush, whose dirty lines a kernel that moves
  only a few L2s of data would otherwise spend part of its time writing back; the rotation is then what keeps
  the L2 honest. ``timer="events"`` is ``triton.testing.do_bench``: CUDA events around each run, the L2
  flushed before each, so that a µs kernel's figure holds the launch gap and the flush's write-back (on the
  H200: 24.5 µs for a GEMV that graph replay times at 15.1 µs). A function that cannot be captured raises
  ``CaptureError``.
- ``time_figure``: one figure with the asked timer, falling back to CUDA events where the capture raised, and
  which timer it used.
- ``input_sets``: how many sets of inputs to rotate among, so that a run never finds its inputs in the L2 that
  the previous run left there (together they hold ``L2_MULTIPLE`` L2s).

Torch and triton are imported inside the functions.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, get_args

from ..errors import UserError
from ..records.kernel import Timer, Timing

# Rotate input sets until they hold this many L2s (the working set of one run times the number of sets).
L2_MULTIPLE = 4
# At most this many input sets, and at most this share of the device's free memory for all of them.
MAX_INPUT_SETS = 64
MAX_FREE_MEMORY_SHARE = 0.5
# do_bench's windows, in ms of GPU time: warm-up runs, then timed runs (triton's defaults are 25 and 100).
WARMUP_MS = 25
REP_MS = 100
QUANTILES = (0.5, 0.2, 0.8)  # median and the 20-80% band, from the same timed runs
DEFAULT_TIMER: Timer = "cuda_graph"
TIMERS: tuple[Timer, ...] = get_args(Timer)


class CaptureError(RuntimeError):
    """The function could not be captured in (or replayed from) a CUDA graph; ``time_figure`` then uses events."""


class Bench(Protocol):
    """bench(fn, warmup_ms=, rep_ms=) -> (median, p20, p80) in seconds of ``fn``."""

    def __call__(self, fn: Callable[[], object], warmup_ms: float = ..., rep_ms: float = ...
                 ) -> tuple[float, float, float]: ...


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


def do_bench(fn: Callable[[], object], *, warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS,
             timer: Timer = "events") -> tuple[float, float, float]:
    """(median, 20th, 80th percentile) in seconds of ``fn`` on the GPU, from one set of timed runs."""
    import inspect

    import torch
    import triton  # type: ignore[import-untyped]  # triton ships no type information
    import triton.testing  # type: ignore[import-untyped]

    if timer == "cuda_graph":
        bench = triton.testing.do_bench_cudagraph
        if "quantiles" not in inspect.signature(bench).parameters:
            raise UserError(f"--timer cuda_graph: triton {triton.__version__}'s do_bench_cudagraph gives no "
                            f"quantiles; use --timer events")
        # The runs go on a side stream (below; triton's own capture makes one too), which does not wait for the
        # default stream: the inputs drawn there must be written first (on the H200, a gather read token ids not
        # yet written, a device-side assert, until this sync).
        torch.cuda.synchronize()
        try:
            # Older tritons refuse to capture on the default stream; newer ones make their own side stream anyway.
            side = torch.cuda.Stream()  # type: ignore[no-untyped-call]  # torch's Stream is unannotated
            with torch.cuda.stream(side):
                ms = bench(fn, rep=rep_ms, quantiles=list(QUANTILES), return_mode="median")
        except Exception as err:  # a kernel that syncs, allocates or reads the host in its call cannot be captured
            torch.cuda.synchronize()
            raise CaptureError(_first_line(err)) from err
    else:
        ms = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=list(QUANTILES),
                                     return_mode="median")
    median, p20, p80 = (m / 1e3 for m in ms)
    return median, p20, p80


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")[:200]


def time_figure(fn: Callable[[], object], timer: Timer, bench: Bench, events: Bench, *, warmup_ms: float = WARMUP_MS,
                rep_ms: float = REP_MS) -> tuple[tuple[float, float, float], Timer, str | None]:
    """((median, p20, p80) in s, the timer used, why the graph was not used or None): ``bench`` times with
    ``timer``; where that is ``cuda_graph`` and the capture raises ``CaptureError``, ``events`` times the same
    ``fn`` (with the same windows) instead, and the figure says so. Any other error is raised."""
    try:
        return bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms), timer, None
    except CaptureError as err:
        if timer != "cuda_graph":
            raise
        return events(fn, warmup_ms=warmup_ms, rep_ms=rep_ms), "events", str(err)


def gpu_bench(timer: Timer) -> Bench:
    """``do_bench`` with ``timer``, as a Bench."""

    def bench(fn: Callable[[], object], warmup_ms: float = WARMUP_MS, rep_ms: float = REP_MS
              ) -> tuple[float, float, float]:
        return do_bench(fn, warmup_ms=warmup_ms, rep_ms=rep_ms, timer=timer)

    return bench


def timing(t: tuple[float, float, float], timer: Timer, sets: int, capture_error: str | None = None) -> Timing:
    median, p20, p80 = t
    return Timing(median_s=median, p20_s=p20, p80_s=p80, timer=timer, input_sets=sets, capture_error=capture_error)


def rotated(call: Callable[[Any], object], sets: Sequence[Any]) -> Callable[[], object]:
    """A function of no arguments that calls ``call`` on the next of ``sets`` each time (round robin)."""
    cycle = itertools.cycle(sets)

    def run() -> object:
        return call(next(cycle))

    return run


def working_set_bytes(tensors: Sequence[Any]) -> int:
    """Bytes of the tensors one run reads and writes (its inputs and output)."""
    return sum(int(t.nbytes) for t in tensors if hasattr(t, "nbytes"))


def free_memory(device: str) -> int | None:
    """Free device memory in bytes (None off the GPU), after torch's cache is released."""
    if device != "cuda":
        return None
    import torch

    torch.cuda.empty_cache()  # blocks torch caches but no longer uses count as free
    return int(torch.cuda.mem_get_info()[0])


def available_memory(device: str) -> int | None:
    """Bytes a run on ``device`` may allocate: the GPU's free memory; on the CPU the memory Linux reports
    available (/proc/meminfo's MemAvailable: free and reclaimable), else the machine's physical memory; None
    where neither is known."""
    if device == "cuda":
        return free_memory(device)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # given in kB (KiB)
    except OSError:
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
