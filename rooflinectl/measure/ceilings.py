"""Ceilings measured on the device in hand (``calibrate.run`` writes them into a hardware YAML).

Probes shared by ``measure`` (once per run, for the "% of measured" column) and ``calibrate`` (written into a
hardware file whose ``measured`` section ``analyze --calibrated`` and ``plot`` use as roofs), in this order:

- warm-up: about a second of back-to-back bf16 8192³ matmuls before the first probe (``warm_up_clocks``), so that
  no ceiling is timed on clocks still ramping up from idle.
- bandwidth: a large elementwise copy on the SMs, ``torch.add(src, 0, out=dst)`` (torch's vectorized elementwise
  kernel); bytes = bytes read + bytes written (DESIGN.md). Not ``dst.copy_(src)``: captured in a CUDA graph that
  becomes a memcpy node, run by the copy engine (about 2.8 TB/s on the H200 against 4.27 for an SM kernel), and the
  kernels this ceiling is compared with run on the SMs. Not the project's own Triton copy: the ceiling that
  ``measure --kernel copy`` is set against would then be that kernel by construction.
- compute: an n×n×n product by torch on random data (zeros run faster and overstate the peak), per data type:
  bf16 and fp16 through ``torch.matmul``, tf32 through an fp32 matmul with ``allow_tf32``, fp8 (e4m3) through
  ``torch._scaled_mm`` where the device has fp8 tensor cores (compute capability 8.9 and up). FLOPs = 2·n³. Each
  is timed twice in the same run: with the run's timer (the figure kept) and with the other one (CUDA events, long
  windows, under a graph run), the check; a note says when the two differ by more than ``CHECK_TOLERANCE``.

Every probe is timed with the same timer as the kernels (``bench.time_figure``: CUDA-graph replays by default, CUDA
events where a probe fails to capture, noted). Torch and triton are imported inside the functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..kernels.base import torch_dtype
from ..records.kernel import RunCeilings, Timer
from ..specs.dtypes import TensorDType
from .bench import Bench, time_figure

if TYPE_CHECKING:
    from ..engine.count.op import Op

# The probes' sizes. 8192³ is the size the matmul kernel's target names (≥ 70% of torch's bf16 matmul at
# 8192³) and is large enough to keep every SM of an H100/H200 busy for about a millisecond. The copy moves at
# least 1 GiB each way, and at least 16 L2s, so that the L2 (50-60 MB on Hopper) holds a negligible share of
# it.
MATMUL_SIZE = 8192
COPY_MIN_BYTES = 1 << 30
COPY_L2_MULTIPLE = 16
# Longer warm-up and timing windows than do_bench's defaults (25 and 100 ms): clocks ramp up under a sustained load
# and a ceiling should be the sustained figure.
PROBE_WARMUP_MS = 200
PROBE_REP_MS = 500

# Data types calibrate probes, in this order; each is skipped (with a note) where the device or torch lacks it.
PROBE_DTYPES: tuple[TensorDType, ...] = ("bf16", "fp16", "tf32", "fp8")
# The clocks' warm-up before the first probe: bf16 matmuls of MATMUL_SIZE until this much time has passed (2·8192³ =
# 1.1e12 FLOPs each, 1.4 ms at ~800 TFLOP/s: about 730 of them on an H200). A GPU at idle clocks takes a fraction of
# a second to ramp up.
WARM_UP_S = 1.0
# The matmul ceiling's two timings (graph replay, CUDA events) should agree on a 1 ms kernel: a larger gap than this
# share means one of them measured something else (cold clocks, launch gaps), and the run says so.
CHECK_TOLERANCE = 0.03
COPY_PROBE = "torch.add(src, 0, out=dst), an elementwise kernel on the SMs"


def other_timer(timer: Timer) -> Timer:
    """The second method a ceiling is checked with: events under a graph run, a graph under an events run."""
    return "events" if timer == "cuda_graph" else "cuda_graph"


def ceiling_dtypes(ops: Iterable[Op]) -> list[str]:
    """The data types whose matmul peak a run needs: those of its tensor-core ops, in first-seen order."""
    seen: dict[str, None] = {}
    for op in ops:
        if op.unit == "tensor":
            seen.setdefault(op.dtype, None)
    return list(seen)


def copy_bytes_for(l2_bytes: int | None) -> int:
    """Bytes one side of the bandwidth probe's copy holds: 1 GiB, or 16 L2s if that is more."""
    return max(COPY_MIN_BYTES, COPY_L2_MULTIPLE * (l2_bytes or 0))


def warm_up_clocks(seconds: float = WARM_UP_S, n: int = MATMUL_SIZE) -> float:
    """Run bf16 n³ matmuls back to back until ``seconds`` of wall time have passed (synchronized); the time spent."""
    import time

    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):  # ~10 ms of work a check of the clock: the host never starves the GPU
            torch.matmul(a, b, out=c)
        torch.cuda.synchronize()
    return time.perf_counter() - start


@dataclass(frozen=True)
class Probe:
    """One ceiling's timing: (median, p20, p80) in s, the timer it used, and why a graph was not used."""

    t: tuple[float, float, float]
    timer: Timer
    capture_error: str | None = None


def _time_probe(fn: Callable[[], object], timer: Timer, bench: Bench, events: Bench) -> Probe:
    t, used, why = time_figure(fn, timer, bench, events, warmup_ms=PROBE_WARMUP_MS, rep_ms=PROBE_REP_MS)
    return Probe(t, used, why)


def probe_copy_bandwidth(bench: Bench, l2_bytes: int | None, *, timer: Timer = "events", events: Bench | None = None,
                         device: str = "cuda") -> tuple[float, int, Probe]:
    """(GB/s, bytes moved per copy, the probe) of ``COPY_PROBE`` over random bf16 data, read + written."""
    import torch

    n = copy_bytes_for(l2_bytes) // 2 if device == "cuda" else 4096
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    moved = 2 * src.numel() * src.element_size()  # read src + write dst

    def copy() -> object:
        return torch.add(src, 0, out=dst)  # x + 0 is x exactly: a copy, through the SMs

    probe = _time_probe(copy, timer, bench, events or bench)
    return moved / probe.t[0] / 1e9, moved, probe


# The vector probe's size: 2^24 fp32 elements (64 MiB in, 64 MiB out), 1.7e10 FLOPs at kernels.fma's defaults,
# about 0.26 ms at an H200's 66.9 TFLOP/s: every SM busy for many waves.
VECTOR_ELEMENTS = 1 << 24
VECTOR_PROBE = "kernels.fma: 2 chains of 256 fp32 FMAs an element (Triton), 128 FLOP/B"


def probe_vector(bench: Bench, *, timer: Timer = "events", events: Bench | None = None,
                 device: str = "cuda") -> tuple[float, Probe]:
    """(TFLOP/s, the probe) of the fp32 vector units: ``VECTOR_PROBE`` over random data, checked first against
    its float64 closed form (a wrong result raises ValueError, and no rate is written)."""
    import torch

    from ..kernels.fma import fma, fma_flops, fma_reference

    x = torch.randn(VECTOR_ELEMENTS if device == "cuda" else 4096, device=device, dtype=torch.float32)
    y = torch.full_like(x, float("nan"))
    fma(x, y)
    ref = fma_reference(x)
    err = float((y.double() - ref).norm() / ref.norm())
    # 256 dependent fp32 FMAs: up to 256 roundings of 2^-24 relative, 1.5e-5; 1e-4 leaves room, and a chain one
    # FMA short is 1e-3 off (tests/kernels/test_fma.py).
    if not err <= 1e-4:
        raise ValueError(f"the fma probe's result is {err:.1e} off its closed form")
    probe = _time_probe(lambda: fma(x, y), timer, bench, events or bench)
    return fma_flops(x.numel()) / probe.t[0] / 1e12, probe


def fp8_supported() -> bool:
    import torch

    return (
        hasattr(torch, "float8_e4m3fn")
        and hasattr(torch, "_scaled_mm")
        and torch.cuda.get_device_capability() >= (8, 9)
    )


@contextlib.contextmanager
def _tf32(enabled: bool) -> Iterator[None]:
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def matmul_fn(dtype: str, n: int = MATMUL_SIZE, device: str = "cuda") -> Callable[[], object]:
    """An n×n×n product in ``dtype`` (bf16, fp16, tf32, fp8) on random data; ValueError if unsupported."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    if dtype in ("bf16", "fp16"):
        t = torch_dtype(dtype)
        a = torch.randn(n, n, device=device, dtype=t, generator=g)
        b = torch.randn(n, n, device=device, dtype=t, generator=g)
        return lambda: torch.matmul(a, b)
    if dtype == "tf32":
        a = torch.randn(n, n, device=device, dtype=torch_dtype("tf32"), generator=g)
        b = torch.randn(n, n, device=device, dtype=torch_dtype("tf32"), generator=g)

        def tf32() -> object:
            with _tf32(True):  # inside the call: set when the graph is captured and when events time it
                return torch.matmul(a, b)

        return tf32
    if dtype == "fp8":
        if not fp8_supported():
            raise ValueError("fp8 needs torch._scaled_mm and a device of compute capability 8.9 or higher")
        f8 = torch_dtype("fp8")
        a8 = torch.randn(n, n, device=device, generator=g).to(f8)
        # _scaled_mm takes B column-major: the transpose of a row-major n×n tensor.
        b8 = torch.randn(n, n, device=device, generator=g).to(f8).t()
        one = torch.ones((), device=device, dtype=torch.float32)
        return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    raise ValueError(f"no matmul probe for {dtype}")


def probe_matmul(bench: Bench, dtype: str, n: int = MATMUL_SIZE, *, timer: Timer = "events",
                 events: Bench | None = None, device: str = "cuda") -> tuple[float, Probe]:
    """(TFLOP/s, the probe) of an n×n×n product in ``dtype`` on random data; ValueError if unsupported."""
    flops = 2 * n**3
    probe = _time_probe(matmul_fn(dtype, n, device), timer, bench, events or bench)
    return flops / probe.t[0] / 1e12, probe


def _first_line(err: BaseException) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__


def measure_ceilings(
    bench: Bench,
    l2_bytes: int | None,
    dtypes: Iterable[str],
    on_step: Callable[[str], None] = lambda text: None,
    n: int = MATMUL_SIZE,
    *,
    timer: Timer = "events",
    events: Bench | None = None,
    check: Bench | None = None,
    warm_up: Callable[[], float] | None = None,
    device: str = "cuda",
) -> RunCeilings:
    """Warm the clocks up, then the copy bandwidth and the matmul peak of each of ``dtypes`` (those the device
    cannot run are noted, not fatal), all timed by ``bench`` with ``timer`` (``events`` where a probe does not
    capture); each matmul again by ``check`` with the other timer (default: ``events`` under a graph run, ``bench``
    under an events run), recorded beside it. ``warm_up`` (default ``warm_up_clocks``) returns the seconds spent."""

    events = events or bench
    check_timer = other_timer(timer)
    check = check or (events if check_timer == "events" else bench)
    notes: list[str] = []
    on_step(f"ceiling: warming the clocks up ({WARM_UP_S:g} s of bf16 matmuls {MATMUL_SIZE}³)")
    warm_s = (warm_up or warm_up_clocks)()
    on_step("ceiling: copy on the SMs")
    gbps, moved, copy = probe_copy_bandwidth(bench, l2_bytes, timer=timer, events=events, device=device)
    if copy.capture_error:
        notes.append(f"copy: not captured in a CUDA graph ({copy.capture_error}); timed with CUDA events")
    _empty_cache(device)  # the probe's buffers, freed on its return
    tflops: dict[str, float] = {}
    checked: dict[str, float] = {}
    dtypes = list(dtypes)
    for dtype in dtypes:
        on_step(f"ceiling: {dtype} matmul {n}³")
        try:
            tflops[dtype], probe = probe_matmul(bench, dtype, n, timer=timer, events=events, device=device)
            if probe.capture_error:
                notes.append(f"{dtype} matmul: not captured in a CUDA graph ({probe.capture_error}); timed with "
                             f"CUDA events")
            elif probe.timer == timer:  # checked by the other method only where the first one was the run's
                on_step(f"ceiling: {dtype} matmul {n}³, checked with {check_timer}")
                flops = 2 * n**3
                median, _, _ = check(matmul_fn(dtype, n, device), warmup_ms=PROBE_WARMUP_MS, rep_ms=PROBE_REP_MS)
                checked[dtype] = flops / median / 1e12
                gap = tflops[dtype] / checked[dtype] - 1
                if abs(gap) > CHECK_TOLERANCE:
                    notes.append(f"{dtype} matmul: {timer} gives {tflops[dtype]:,.1f} TFLOP/s, {check_timer} "
                                 f"{checked[dtype]:,.1f} ({gap:+.1%}): more than {CHECK_TOLERANCE:.0%} apart")
        except ValueError as err:
            notes.append(f"{dtype} matmul not measured: {err}")
        except RuntimeError as err:  # torch: not implemented for this device or build
            notes.append(f"{dtype} matmul not measured: {_first_line(err)}")
        _empty_cache(device)
    vector: dict[str, float] = {}
    if device == "cuda":  # a Triton kernel: the CPU runs it only in the interpreter (tests/kernels/test_fma.py)
        on_step("ceiling: fp32 vector FMAs")
        try:
            vector["fp32"], vprobe = probe_vector(bench, timer=timer, events=events, device=device)
            if vprobe.capture_error:
                notes.append(f"fp32 vector: not captured in a CUDA graph ({vprobe.capture_error}); timed with "
                             f"CUDA events")
        except (ValueError, RuntimeError) as err:  # a wrong result, or a device triton cannot compile for
            notes.append(f"fp32 vector rate not measured: {_first_line(err)}")
        _empty_cache(device)
    return RunCeilings.model_validate(dict(
        copy_bandwidth_gbps=gbps, copy_bytes=moved, tensor_tflops=tflops, matmul_size=n if dtypes else None,
        vector_tflops=vector, vector_probe=VECTOR_PROBE if vector else None,
        timer=timer, tensor_tflops_check=checked, check_timer=check_timer if checked else None, warm_up_s=warm_s,
        copy_probe=COPY_PROBE, notes=notes))


def _empty_cache(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()
