"""The collectives ``calibrate --comm`` measured: each curve, and the figures the engine times collectives with
beside the datasheet's (``hardware show`` and the command's own output)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from ..specs.hardware import GPU
from ..specs.measured import MeasuredInterconnect
from ..units import binary_size, duration, number
from .console import console

if TYPE_CHECKING:
    from ..records.calibration import CommCalibration


def curve_table(m: MeasuredInterconnect) -> Table:
    """Every size of every collective: S, the slowest rank's time, algbw and busbw (nccl-tests' columns)."""
    t = Table(title=Text(f"Collectives on {m.gpu_count} × {m.device_name} ({m.backend}, {m.date})"),
              title_justify="left", box=box.SIMPLE_HEAD)
    for name, justify in (("collective", "left"), ("size", "right"), ("time", "right"), ("algbw", "right"),
                          ("busbw", "right")):
        t.add_column(name, justify=justify)  # type: ignore[arg-type]
    for collective, points in m.collectives.items():
        for p in points:
            t.add_row(collective, binary_size(p.bytes), duration(p.time_s), f"{p.algbw_gbps:,.4g} GB/s",
                      f"{p.busbw_gbps:,.4g} GB/s")
    return t


def fit_table(g: GPU) -> Table | None:
    """Per measured collective: the bus bandwidth at the largest size and the time at the smallest, what
    ``analyze --calibrated`` times that collective with, beside the datasheet's one-direction roof and latency."""
    m = g.measured.interconnect if g.measured else None
    if m is None:
        return None
    t = Table(title=Text(f"Measured interconnect ({m.gpu_count} × {m.device_name}, {m.backend}, {m.date})"),
              title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("collective")
    t.add_column("busbw (largest size)", justify="right")
    t.add_column("latency (smallest)", justify="right")
    t.add_column("spec (a direction)", justify="right")
    spec = (f"{number(g.interconnect.per_direction_gbps)} GB/s + {number(g.interconnect.latency_us)} µs"
            if g.interconnect else "—")
    for collective, points in m.collectives.items():
        t.add_row(collective, f"{number(points[-1].busbw_gbps)} GB/s at {binary_size(points[-1].bytes)}",
                  f"{duration(points[0].time_s)} at {binary_size(points[0].bytes)}", spec)
    return t


def print_comm_calibration(done: CommCalibration) -> None:
    c = console()
    c.print(curve_table(done.measured))
    fit = fit_table(done.written)
    if fit is not None:
        c.print(fit)
    if done.measured.backend == "gloo":
        # No "use it" here: analyze --calibrated refuses collectives measured on another device than the spec's.
        c.print("gloo on the CPU: these times are the CPU's and the host's, never a GPU interconnect's; the file "
                "is a test of the pipeline, which analyze --calibrated refuses", highlight=False, markup=False)
        c.print(f"wrote {done.output} (id {done.written.id})", highlight=False, markup=False)
        return
    c.print(f"wrote {done.output} (id {done.written.id}); use it: rooflinectl analyze --calibrated --tp N --gpu "
            f"{done.output}", highlight=False, markup=False)
