"""Roofline charts of the engine's results: ``roofline.Analysis`` objects in, a ``plot.chart.Chart`` out.

``build_chart`` turns analyses into a plain description: the roofs with their values and slopes, each GPU's ridge
point, one point per operation (intensity, attainable FLOP/s, bound, share of the step), one trajectory per
operation for a sweep, measured points with their fraction of the roof above them, the legend entries and the
footnotes. It computes nothing but layout: every number is read from the engine's results. Which ops share a
marker and a label is ``plot.labels``' decision, the measured points ``plot.measured``'s; ``draw`` renders the
chart with matplotlib (``plot.draw``, imported lazily, on the Agg backend, so it runs headless).

A chart has one panel per workload (``rooflinectl plot`` with no workload draws decode and prefill side by side);
a panel holds every GPU given, each with its own roofs colour and marker shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from ..engine.count.op import Unit
from ..engine.parallel import Layout
from ..engine.roofline import Analysis, Placement, analyze, sweep
from ..errors import UserError
from ..records.kernel import MeasurementFile
from ..specs.hardware import GPU
from ..specs.workload import SizeField, Workload, length_field
from ..units import gib, si
from .chart import (
    BOUND_COLORS,
    GPU_COLORS,
    GPU_MARKERS,
    MEASURED_COLOR,
    Bound,
    Chart,
    Group,
    LegendEntry,
    OpPoint,
    Panel,
    Ridge,
    Roof,
    Trajectory,
    check_output,
)
from .labels import group_ops, mark_values_group, op_labels
from .measured import load_measured, measured_gpu
from .measured import measured_points as measured_points_of

# The roof of the link the collectives cross, drawn where the chart is of one GPU of several (--tp, --ep, --pp).
INTERCONNECT = "interconnect"

__all__ = ["build_chart", "chart_json", "check_output", "draw", "plot_workloads"]


def build_chart(
    workloads: Sequence[Workload],
    gpus: Sequence[GPU],
    sweep_field: SizeField | None = None,
    values: Sequence[int] | None = None,
    measured: MeasurementFile | None = None,
    measured_source: str = "measured file",
    calibrated: bool = False,
    layout: Layout = Layout(),
) -> Chart:
    """One panel per workload, every GPU in each; a sweep of ``sweep_field`` over ``values`` draws trajectories.
    Over several GPUs (``layout``: TP, EP, PP) every point is one GPU's op, and the interconnect is a roof."""
    if not workloads:
        raise UserError("nothing to plot: give a workload")
    if not gpus:
        raise UserError("nothing to plot: give a GPU")
    if len(gpus) > len(GPU_COLORS):
        raise UserError(f"at most {len(GPU_COLORS)} GPUs fit on one chart, got {len(gpus)}")
    ids = [g.id for g in gpus]
    if len(set(ids)) != len(ids):
        raise UserError(f"a GPU is given twice: {', '.join(ids)}")
    # The GPU the records ran on, or a one-line refusal: never drawn under another GPU's roofs.
    measured_on = measured_gpu(measured, gpus, measured_source).id if measured is not None else None
    panels = []
    every: list[list[Analysis]] = [[] for _ in gpus]  # each GPU's analyses over every panel: whether it fits
    for w in workloads:
        if sweep_field:
            runs = [sweep(w, g, sweep_field, list(values or ()), calibrated, layout) for g in gpus]
        else:
            runs = [[analyze(w, g, calibrated, layout)] for g in gpus]
        for mine, run in zip(every, runs, strict=True):
            mine += run
        panels.append(build_panel(runs, sweep_field, tuple(values or ()), measured, measured_on))
    return Chart(
        title=chart_title(workloads[0], gpus, calibrated, layout),
        panels=tuple(panels),
        legend=legend_entries(gpus, sweep_field, [v for v in values or ()], measured is not None, calibrated,
                              ridge_dtype=workloads[0].dtype, fits=[fit_text(a) for a in every]),
        gpus=tuple(ids),
    )


def fit_text(analyses: Sequence[Analysis]) -> str:
    """Whether the weights and KV cache fit on the GPU (``Totals.fits``, activations not counted), at every size
    drawn: "fits: 15.2 of 80 GiB", or at the largest that does not: "does NOT fit: 451.4 of 80 GiB at batch 256"."""
    worst = max(analyses, key=lambda a: a.totals.memory_bytes / a.totals.capacity_bytes)
    t = worst.totals
    held = f"{gib(t.memory_bytes).removesuffix(' GiB')} of {gib(t.capacity_bytes, 0)}"
    if t.fits:
        return f"fits: {held}"
    w = worst.workload
    sizes = {a.workload.size(f) for a in analyses for f in ("batch",)}
    where = f" at batch {w.batch:,}" if len(sizes) > 1 else ""
    return f"does NOT fit: {held}{where}"


def chart_title(w: Workload, gpus: Sequence[GPU], calibrated: bool, layout: Layout = Layout()) -> str:
    on = " vs ".join(g.name for g in gpus)
    if not layout.single:
        on += f" · {layout.label()}, one GPU's ops"
    kv = f", KV cache {w.kv_dtype}" if w.kv_dtype != w.dtype else ""
    fused = f", fused {'+'.join(w.fused)}" if w.fused else ""
    roofs = " (measured roofs)" if calibrated else ""
    if calibrated and any(g.measured is not None and g.measured.op_model is not None for g in gpus):
        roofs = " (measured roofs, calibrated op model)"  # its times size the points (their share of the step)
    return f"{w.model.name} on {on}{roofs} · {w.types_label()}{kv} · {w.attention} attention{fused}"


def panel_title(w: Workload, sweep_field: SizeField | None, values: Sequence[int]) -> str:
    """'decode · batch 1, 8, 64 · context 4096': the phase, then its sizes (``specs.workload``: batch, and the
    phase's length), the swept one with all its values."""

    def size(field: SizeField) -> str:
        shown = ", ".join(str(v) for v in values) if field == sweep_field else str(w.size(field))
        return f"{field} {shown}"

    return f"{w.phase} · {size('batch')} · {size(length_field(w.phase))}"


def build_panel(
    runs: Sequence[Sequence[Analysis]],
    sweep_field: SizeField | None = None,
    values: tuple[int, ...] = (),
    measured: MeasurementFile | None = None,
    measured_on: str | None = None,
) -> Panel:
    """``runs[i]`` are GPU i's analyses: one, or one per value of ``sweep_field`` (``values``, in that order);
    ``measured``'s records are drawn on the GPU of id ``measured_on`` (``plot.measured.measured_gpu``)."""
    first = runs[0][0]
    if not sweep_field:
        values = ()
    multi_gpu = len(runs) > 1

    roofs: list[Roof] = []
    ridges: list[Ridge] = []
    points: list[OpPoint] = []
    trajectories: list[Trajectory] = []
    groups: list[Group] = []
    off_chart: list[str] = []
    for analyses in runs:
        gpu = analyses[0].gpu.id
        per_op: dict[str, list[OpPoint]] = {}
        for i, a in enumerate(analyses):
            value = values[i] if sweep_field else None
            for p in a.placements:
                if p.op.flops <= 0:
                    if p.name not in off_chart:
                        off_chart.append(p.name)
                    continue
                point = op_point(gpu, p, value)
                points.append(point)
                per_op.setdefault(p.name, []).append(point)
        if sweep_field:
            trajectories += [Trajectory(gpu, op, sweep_field, tuple(pts)) for op, pts in per_op.items()]
        groups += group_ops(gpu, per_op)
        a0 = analyses[0]
        ridges.append(Ridge(gpu, a0.ridge, a0.peak_flops,
                            f"{gpu + ' ' if multi_gpu else ''}ridge {a0.ridge:.0f} FLOP/B"))

    if sweep_field:
        groups = mark_values_group(groups)

    measured_points, measured_notes = measured_points_of(runs, measured, measured_on)
    for analyses in runs:
        roofs += roof_lines(analyses[0], on_chip=not multi_gpu)
    # Intensity 1 is always on the chart, so that the memory roofs show a stretch long enough to read.
    xs = [p.intensity for p in points] + [r.intensity for r in ridges] + [m.intensity for m in measured_points]
    xs.append(1.0)
    ys = [p.flops for p in points] + [m.flops for m in measured_points] + [r.at(1.0) for r in roofs
                                                                           if r.name in ("HBM", INTERCONNECT)]
    xlim, ylim = _limits(xs, ys, [r.value for r in roofs if r.kind == "compute"] + [m.flops for m in measured_points])
    roofs = [_span(r, roofs, xlim, ylim) for r in roofs]

    footnotes = []
    if off_chart:
        footnotes.append(f"Not drawn: {', '.join(off_chart)} (0 FLOPs: pure data movement has no place on a log "
                         f"intensity axis).")
    footnotes += measured_notes
    if multi_gpu:
        footnotes.append("L2 and SRAM roofs are left out with several GPUs (one GPU's chart draws them).")
    if any(r.name == INTERCONNECT for r in roofs):
        footnotes.append(f"The {INTERCONNECT} roof is the collectives' bandwidth, one direction (modelled, not "
                         f"measured): they move bytes and compute nothing, so they have no point; their time is in "
                         f"the step ({first.layout.label()}, every point one GPU's op).")
    return Panel(
        title=panel_title(first.workload, sweep_field, values),
        phase=first.workload.phase,
        roofs=tuple(roofs),
        ridges=tuple(ridges),
        points=tuple(points),
        trajectories=tuple(trajectories),
        groups=tuple(groups),
        labels=tuple(op_labels(groups, sweep_field)),
        measured=tuple(measured_points),
        footnotes=tuple(footnotes),
        xlim=xlim,
        ylim=ylim,
        sweep_field=sweep_field,
        values=values,
    )


def op_point(gpu: str, p: Placement, value: int | None = None) -> OpPoint:
    bound: Bound = "compute" if p.bound == "compute" else "memory"  # Placement.bound, as the chart's Literal
    return OpPoint(gpu=gpu, op=p.name, kind=p.op.kind, intensity=p.intensity, flops=p.attainable_flops, bound=bound,
                   share=p.share, value=value)


def roof_lines(a: Analysis, on_chip: bool = True) -> list[Roof]:
    """The roofs of one analysis' GPU: HBM, L2 and SRAM where known; the compute roofs of the data types in play
    (the workload's data type on its unit, and every (unit, dtype) an op of the step is placed under: fp32 vector
    for the elementwise work). Spans are set later, once the axes' limits are known."""
    r, gpu = a.roofs, a.gpu
    derived = gpu.memory.derived
    measured = " measured" if r.label == "measured" else ""
    out = [Roof(gpu.id, "memory", "HBM", r.bandwidth, 1.0, f"HBM {si(r.bandwidth, 'B/s')}{measured}",
                0, 0)]
    for name, gbps, field in (("L2", r.l2_bandwidth_gbps, "l2_bandwidth_gbps"),
                              ("SRAM", r.smem_bandwidth_gbps, "smem_bandwidth_gbps")):
        if gbps is None or not on_chip:
            continue
        how = derived.get(field, "")
        note = " (estimated)" if how.startswith("estimated") else " (derived)" if how else ""
        out.append(Roof(gpu.id, "memory", name, gbps * 1e9, 1.0, f"{name} {si(gbps * 1e9, 'B/s')}{note}",
                        0, 0))
    if not a.layout.single and r.interconnect_gbps is not None and gpu.interconnect is not None:
        # Over several GPUs: the link the collectives cross, one direction (engine/parallel/'s roof for them).
        bw = r.interconnect_gbps * 1e9
        out.append(Roof(gpu.id, "memory", INTERCONNECT, bw, 1.0,
                        f"{gpu.interconnect.name} {si(bw, 'B/s')} a direction", 0, 0))
    in_play: list[tuple[Unit, str]] = [(a.compute_unit, a.workload.matmul_dtype)]  # a.compute_unit
    for p in a.placements:
        if p.op.unit != "link" and (p.op.compute_unit, p.op.dtype) not in in_play:  # a collective has no compute roof
            in_play.append((p.op.compute_unit, p.op.dtype))
    for unit, dtype in sorted(in_play, key=lambda ud: -r.peak(ud[1], ud[0])):
        peak = r.peak(dtype, unit)
        unit_name = "TOPS" if dtype == "int8" else "FLOP/s"
        out.append(Roof(gpu.id, "compute", f"{dtype} {unit}", peak, 0.0,
                        f"{dtype} {unit} {si(peak, unit_name)}{measured}", 0, 0))
    return out


def _span(roof: Roof, roofs: Sequence[Roof], xlim: tuple[float, float], ylim: tuple[float, float]) -> Roof:
    """Memory roofs rise from the axes' edge to their GPU's highest compute roof; compute roofs run from where
    they meet their GPU's HBM roof to the right edge."""
    mine = [r for r in roofs if r.gpu == roof.gpu]
    top = max(r.value for r in mine if r.kind == "compute")
    hbm = next(r.value for r in mine if r.name == "HBM")
    if roof.kind == "memory":
        return replace(roof, x_from=max(xlim[0], ylim[0] / roof.value), x_to=min(xlim[1], top / roof.value))
    return replace(roof, x_from=max(xlim[0], roof.value / hbm), x_to=xlim[1])


def _limits(xs: list[float], ys: list[float], tops: list[float]) -> tuple[tuple[float, float], tuple[float, float]]:
    """Whole decades on x around every point and ridge; y from under the lowest point to above the highest roof
    or measured point (``tops``: one measured above every roof is drawn, not cut off). Floats: ``10 ** 30`` is an
    int, which matplotlib's limits refuse past float range. Every value is finite and positive (the specs' and the
    records' ranges), so every limit is."""
    x_lo = 10.0 ** math.floor(math.log10(min(xs) / 1.5))
    x_hi = 10.0 ** math.ceil(math.log10(max(xs) * 3))
    y_lo = 10.0 ** math.floor(math.log10(min(ys) / 1.5))
    y_hi = max(tops) * 4
    return (x_lo, x_hi), (y_lo, y_hi)


# --- legend ------------------------------------------------------------------------------------------------


def legend_entries(
    gpus: Sequence[GPU],
    sweep_field: SizeField | None,
    values: Sequence[int],
    measured: bool,
    calibrated: bool,
    ridge_dtype: str,
    fits: Sequence[str] | None = None,
) -> tuple[LegendEntry, ...]:
    fit = list(fits) if fits is not None else [""] * len(gpus)
    entries = [
        LegendEntry(f"{g.name} ({g.id}){' measured roofs' if calibrated else ''}"
                    + (f"\n{fit[i]}" if fit[i] else ""),
                    "gpu", GPU_COLORS[i], GPU_MARKERS[i], "-")
        for i, g in enumerate(gpus)
    ]
    entries += [
        LegendEntry("memory-bound op", "bound", BOUND_COLORS["memory"], "o"),
        LegendEntry("compute-bound op", "bound", BOUND_COLORS["compute"], "o"),
        LegendEntry("marker area ∝ share of the step's time", "share", "#999999", "o"),
        *([LegendEntry(f"label %: share of the step on {' · '.join(g.id for g in gpus)}", "note", "#333333")]
          if len(gpus) > 1 and not sweep_field else []),
        LegendEntry(f"ridge: HBM meets the {ridge_dtype} roof", "ridge", "#333333", "D"),
    ]
    if fits is not None:
        entries.append(LegendEntry("fits: weights + KV cache in HBM (activations not counted)", "note", "#333333"))
    if sweep_field:
        entries.append(LegendEntry(f"{sweep_field} {' → '.join(str(v) for v in values)}", "sweep",
                                   "#555555", None, "-"))
    if measured:
        entries.append(LegendEntry("measured (% of the roof above it)", "measured", MEASURED_COLOR, "X"))
    return tuple(entries)


def chart_json(chart: Chart, path: Path | None = None) -> dict[str, Any]:
    """The chart as JSON-ready data (``--json``): every dataclass field, with the path written first."""
    data = asdict(chart)
    if path is not None:
        data = {"path": str(path), **data}
    return data


# --- output --------------------------------------------------------------------------------------------------


def draw(chart: Chart, path: Path | None = None, style: str = "light") -> Any:
    """Render ``chart`` with matplotlib (``plot.draw``) in ``style`` (light or dark); write it to ``path`` when
    given. Returns the figure (a matplotlib Figure, typed Any: matplotlib is imported only here)."""
    from .draw import draw_chart

    return draw_chart(chart, path, style)


def plot_workloads(
    workloads: Sequence[Workload],
    gpus: Sequence[GPU],
    path: Path,
    sweep_field: SizeField | None = None,
    values: Sequence[int] | None = None,
    measured_path: Path | None = None,
    calibrated: bool = False,
    style: str = "light",
    layout: Layout = Layout(),
) -> Chart:
    """Build the chart of ``workloads`` on ``gpus`` and write it to ``path``: what ``rooflinectl plot`` does."""
    check_output(path)
    measured = load_measured(measured_path) if measured_path is not None else None
    chart = build_chart(workloads, gpus, sweep_field, values, measured, str(measured_path), calibrated, layout)
    fig = draw(chart, path, style)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return chart
