"""The roofline of one analysis drawn in terminal characters: log-log axes, the roofs, the ridge, the ops.

Draws only what the engine computed: each op sits at (its intensity, its attainable FLOP/s) from its Placement,
the memory roof is the roofs' bandwidth, the flat roofs are the peaks the ops were placed under. An op with no
FLOPs (a gather, a copy) has intensity 0, which a log axis cannot show: it is listed in ``off_chart``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from rich.style import Style

from ..engine.roofline import Analysis, Placement
from ..render.analysis import BOUND_STYLE
from ..units import si
from .canvas import Canvas, LogAxis, decade_ceil, decade_floor

# The x axis always spans at least these intensities (FLOP/byte), so that moving a knob moves the points and not
# the axes: 0.1 holds the elementwise ops (residual adds sit at 1/6), 10^4 is a decade right of every bundled
# GPU's ridge.
MIN_X_SPAN = (0.1, 1e4)
Y_LABEL_WIDTH = 4  # "100T"
# The top of the y axis, as a multiple of the highest peak: room for the roof's label above it.
HEADROOM = 4.0
MARKERS = ((0.10, "●"), (0.01, "•"), (0.0, "·"))  # by share of the step time: ≥10 %, ≥1 %, less
LABEL_SHARE = 0.05  # points holding less of the step time than this go unlabelled (the table names them)
SELECTED_MARKER = "◆"
SELECTED_STYLE = Style(color="yellow", bold=True)
ROOF_STYLE = Style(color="green")
VECTOR_ROOF_STYLE = Style(color="green", dim=True)
AXIS_STYLE = Style(dim=True)


@dataclass
class Chart:
    """What was drawn, and where: the tests and the widget read these rather than parse characters."""

    canvas: Canvas
    x: LogAxis  # intensity, over the plot columns
    y: LogAxis  # attainable FLOP/s, over the plot rows (bottom up)
    left: int  # first plot column
    top: int  # first plot row
    points: dict[str, tuple[int, int]] = field(default_factory=dict)  # op name -> (col, row)
    labels: dict[str, str] = field(default_factory=dict)  # label text -> its style name
    ridge_col: int | None = None
    roof_rows: dict[str, int] = field(default_factory=dict)  # compute roof label -> row
    off_chart: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return self.canvas.lines()

    def col(self, intensity: float) -> int:
        return self.left + self.x.cell(intensity)

    def row(self, flops: float) -> int:
        return self.top + self.y.cells - 1 - self.y.cell(flops)


def marker(share: float) -> str:
    return next(ch for threshold, ch in MARKERS if share >= threshold)


def group_label(names: list[str]) -> str:
    """'gate_proj', 'up_proj', 'down_proj' -> 'gate/up/down_proj' (the plot command's grouping of one point)."""
    if len(names) == 1:
        return names[0]
    suffix = "_proj"
    if all(n.endswith(suffix) for n in names):
        return "/".join(n[: -len(suffix)] for n in names) + suffix
    return "/".join(names)


def compute_roofs(a: Analysis) -> dict[str, float]:
    """The flat roofs the ops sit under, by label ('bf16', 'fp32 vector'), highest first."""
    roofs = {a.workload.dtype + ("" if a.compute_unit == "tensor" else " vector"): a.peak_flops}
    for p in a.placements:
        if p.op.unit == "link":  # a collective sits under no compute roof
            continue
        label = p.op.dtype + ("" if p.op.unit == "tensor" else " vector")
        roofs.setdefault(label, p.peak_flops)
    return dict(sorted(roofs.items(), key=lambda kv: -kv[1]))


def roofline_chart(a: Analysis, selected: str | None, width: int, height: int) -> Chart:
    """Draw ``a`` on a width×height canvas; ``selected`` names the op to highlight and label."""
    width, height = max(width, 24), max(height, 8)
    canvas = Canvas(width, height)
    left, top = Y_LABEL_WIDTH + 1, 1
    plot_w, plot_h = width - left, height - top - 2

    bw = a.roofs.bandwidth
    roofs = compute_roofs(a)
    drawable = [p for p in a.placements if p.intensity > 0 and p.attainable_flops > 0]
    xs = [p.intensity for p in drawable]
    x_lo = min([MIN_X_SPAN[0], *(decade_floor(x) for x in xs)])
    x_hi = max([MIN_X_SPAN[1], *(decade_ceil(x * 1.01) for x in xs), decade_ceil(max(roofs.values()) / bw * 10)])
    y_hi = max(roofs.values()) * HEADROOM
    y_lo = decade_floor(min([bw * x_lo, *(p.attainable_flops for p in drawable)]))
    chart = Chart(canvas, LogAxis(x_lo, x_hi, plot_w), LogAxis(y_lo, y_hi, plot_h), left, top)
    chart.off_chart = [p.name for p in a.placements if p not in drawable]

    def at(x: float, y: float) -> tuple[float, float]:
        return left + chart.x.position(x), top + plot_h - chart.y.position(y)

    # Axes: decades labelled on both, the y labels right-aligned in the margin.
    for r in range(top, top + plot_h):
        canvas.put(left - 1, r, "│", AXIS_STYLE)
    canvas.put(left - 1, top + plot_h, "└" + "─" * plot_w, AXIS_STYLE)
    for y in chart.y.decades():
        r = chart.row(y) if y < y_hi else top
        canvas.put(0, r, si(y, sep="").rjust(Y_LABEL_WIDTH), AXIS_STYLE)
        canvas.put(left - 1, r, "┤", AXIS_STYLE)
    for x in chart.x.decades():
        c = chart.col(x) if x < x_hi else width - 1
        canvas.put(c, top + plot_h, "┴", AXIS_STYLE)
        tick = f"{x:g}" if x < 1000 else si(x, sep="")
        start = min(max(left, c - len(tick) // 2), width - len(tick))
        if canvas.free(start, height - 1, len(tick)):
            canvas.put(start, height - 1, tick, AXIS_STYLE)

    # The ops: one marker per cell (the largest share there decides it; the selected op wins).
    cells: dict[tuple[int, int], list[Placement]] = defaultdict(list)
    for p in drawable:
        cell = (chart.col(p.intensity), chart.row(p.attainable_flops))
        chart.points[p.name] = cell
        cells[cell].append(p)
    for (c, r), ps in cells.items():
        ps.sort(key=lambda p: -p.share)
        if any(p.name == selected for p in ps):
            canvas.put(c, r, SELECTED_MARKER, SELECTED_STYLE)
        else:
            canvas.put(c, r, marker(ps[0].share), Style.parse(BOUND_STYLE[ps[0].bound]))

    def label(cell: tuple[int, int], text: str, style: Style) -> bool:
        """Write ``text`` beside the marker at ``cell``, wherever it fits: right, left, above, below."""
        c, r = cell
        n = len(text)

        def inside(start: int) -> int:
            return min(max(start, left), width - n)

        candidates = [(c + 2, r), (c - n - 1, r)]
        for row in (r - 1, r + 1):
            candidates += [(inside(c + 1), row), (inside(c - n), row), (inside(c - n // 2), row)]
        for start, row in candidates:
            # One free cell either side (or the canvas edge), so that two labels never run together.
            pad_l, pad_r = int(start > left), int(start + n < width)
            if (start >= left and top <= row < top + plot_h
                    and canvas.free(start - pad_l, row, n + pad_l + pad_r)):
                canvas.put(start, row, text, style)
                return True
        return False

    # The selected op's label comes first: it is what the user is looking at.
    order = sorted(cells, key=lambda cell: -sum(p.share for p in cells[cell]))
    for cell in order:
        names = [p.name for p in cells[cell]]
        if selected in names:
            text = selected if len(names) == 1 else f"{selected} +{len(names) - 1}"
            if label(cell, text, SELECTED_STYLE):
                chart.labels[text] = "selected"

    # The roofs: the HBM slope up to the highest peak, then one flat roof per peak from its own ridge.
    top_peak = max(roofs.values())
    canvas.polyline([at(x_lo, bw * x_lo), at(top_peak / bw, top_peak)], ROOF_STYLE)
    for i, (name, peak) in enumerate(roofs.items()):
        style = ROOF_STYLE if i == 0 else VECTOR_ROOF_STYLE
        canvas.polyline([at(peak / bw, peak), at(x_hi, peak)], style)
        row = chart.row(peak)
        chart.roof_rows[name] = row
        text = f"{si(peak, sep='')} {name}"
        if row - 1 >= top and canvas.free(width - len(text) - 1, row - 1, len(text) + 1):
            canvas.put(width - len(text), row - 1, text, style)
            chart.labels[text] = "roof"

    # The ridge of the workload's own roof: a dotted column from under the corner to the axis.
    ridge = a.ridge
    chart.ridge_col = chart.col(ridge)
    corner = chart.row(a.peak_flops)
    for r in range(corner + 1, top + plot_h):
        if canvas.free(chart.ridge_col, r, 1):
            canvas.put(chart.ridge_col, r, "┊", ROOF_STYLE)
    ridge_text = f"ridge {ridge:.0f}"
    if canvas.free(chart.ridge_col + 1, corner + 1, len(ridge_text)):
        canvas.put(chart.ridge_col + 1, corner + 1, ridge_text, ROOF_STYLE)
        chart.labels[ridge_text] = "ridge"
    # The bandwidth above the slope, a third of the way up: the empty side, as every op sits on a roof.
    bw_text = f"{si(bw, 'B/s', sep='')} HBM"
    mid_x = 10 ** ((2 * math.log10(x_lo) + math.log10(top_peak / bw)) / 3)
    c, r = chart.col(mid_x), chart.row(bw * mid_x) - 2
    start = max(left + 1, c - len(bw_text) - 1)
    if r >= top and canvas.free(start, r, len(bw_text) + 1):
        canvas.put(start, r, bw_text, ROOF_STYLE)
        chart.labels[bw_text] = "bandwidth"

    # Then the heaviest other points, where they fit.
    for cell in order:
        names = [p.name for p in cells[cell]]
        if selected in names or sum(p.share for p in cells[cell]) < LABEL_SHARE:
            continue
        text = group_label(names)
        if len(text) > plot_w // 2:
            text = f"{names[0]} +{len(names) - 1}"
        style = Style.parse(BOUND_STYLE[cells[cell][0].bound])
        if label(cell, text, style):
            chart.labels[text] = "op"

    # The header: the axes' units on the left, the markers' legend on the right (compact when narrow).
    units = "FLOP/s vs FLOP/B"
    for memory, compute, chosen in ((" memory ", " compute ", " selected"), ("memory ", "compute ", "selected")):
        legend: list[tuple[str, Style | None]] = [("●", Style.parse(BOUND_STYLE["memory"])), (memory, None), ("●", Style.parse(BOUND_STYLE["compute"])),
                  (compute, None), (SELECTED_MARKER, SELECTED_STYLE), (chosen, None)]
        start = width - sum(len(t) for t, _ in legend)
        if start >= len(units) + 1:
            break
    else:
        units = "FLOP/s"
    canvas.put(0, 0, units, AXIS_STYLE)
    if start > len(units):
        for text, legend_style in legend:
            canvas.put(start, 0, text, legend_style)
            start += len(text)
    return chart
