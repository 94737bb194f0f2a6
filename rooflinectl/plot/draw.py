"""Drawing a roofline ``Chart`` with matplotlib, and placing its labels so that none overlap.

Everything drawn comes from the chart's data (``rooflinectl.plot.build``); this module decides only where things go.
matplotlib is imported inside the functions (on the Agg backend, so it works headless): importing this module
costs numpy only. Each artist carries a gid ("roof h100-sxm HBM", "point h100-sxm q/k/v_proj", "op-label", …) so
that tests can find what was drawn.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import UserError
from .build import (
    BOUND_COLORS,
    FIELD_NAMES,
    GPU_COLORS,
    GPU_MARKERS,
    MEASURED_COLOR,
    Chart,
    OpPoint,
    Panel,
    Roof,
    check_output,
)

PANEL_SIZE_IN = (10.0, 6.6)
DPI = 150
LABEL_FONT = 8.5
ROOF_FONT = 8


def draw_chart(chart: Chart, path: Path | None = None):
    """Render ``chart``; write it to ``path`` (format from the extension) when given. Returns the figure."""
    if path is not None:
        check_output(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(chart.panels)
    width = PANEL_SIZE_IN[0] * n
    fig, axes = plt.subplots(1, n, figsize=(width, PANEL_SIZE_IN[1]), squeeze=False, dpi=DPI)
    # Fixed margins in inches, not tight_layout: labels are placed by measuring text in display space, which
    # must not move afterwards.
    left_in, right_in, gap_in = 1.0, 0.25, 1.4
    axes_in = (width - left_in - right_in - gap_in * (n - 1)) / n
    fig.subplots_adjust(left=left_in / width, right=1 - right_in / width, top=0.88, bottom=0.17,
                        wspace=gap_in / axes_in)
    fig.suptitle(wrap_title(chart.title, int(width * 9)), fontsize=12.5, fontweight="bold")
    for i, (panel, ax) in enumerate(zip(chart.panels, axes[0])):
        _draw_panel(fig, ax, panel, chart, with_legend=(i == 0))
    if path is not None:
        try:
            fig.savefig(path, dpi=DPI, format=Path(path).suffix.lower().lstrip("."))
        except OSError as err:
            plt.close(fig)
            raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    return fig


def wrap_title(title: str, width: int) -> str:
    """Break a long title at its ' · ' and ' vs ' separators (never inside a GPU's name) into lines of at most
    ``width`` characters where the pieces allow."""
    pieces = re.split(r"(?<= · )|(?<= vs )", title)
    lines = [""]
    for piece in pieces:
        if lines[-1] and len(lines[-1]) + len(piece) > width:
            lines.append("")
        lines[-1] += piece
    return "\n".join(line.rstrip(" ·") for line in lines)


def _draw_panel(fig, ax, panel: Panel, chart: Chart, with_legend: bool) -> None:
    """Order matters: everything that cannot move (legend, markers) is drawn and blocked first, then the roof
    labels, then the op labels from the largest share down."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*panel.xlim)
    ax.set_ylim(*panel.ylim)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)", fontsize=10)
    ax.set_ylabel("attainable throughput (FLOP/s)", fontsize=10)
    ax.set_title(panel.title, fontsize=11, loc="left")
    for axis, unit in ((ax.xaxis, ""), (ax.yaxis, "FLOP/s")):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(FuncFormatter(lambda v, _, unit=unit: _tick(v, unit)))
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color="#e6e6e6", linewidth=0.7)
    ax.set_axisbelow(True)

    placer = _Placer(fig, ax)
    gpu_index = {g: i for i, g in enumerate(chart.gpus)}
    if with_legend:
        _draw_legend(ax, chart)
        placer.block(ax.get_legend().get_window_extent(placer.renderer))

    for g in panel.groups:
        c = GPU_COLORS[gpu_index[g.gpu]]
        if g.moves:
            ax.plot([p.intensity for p in g.points], [p.flops for p in g.points], color=c, linewidth=1.1,
                    alpha=0.6, zorder=3, gid=f"trajectory {g.gpu} {g.label}")
            for a, b in zip(g.points, g.points[1:]):
                ax.annotate("", xy=(b.intensity, b.flops), xytext=(a.intensity, a.flops), zorder=3,
                            arrowprops=dict(arrowstyle="-|>", color=c, lw=1.1, alpha=0.8,
                                            shrinkA=_radius(a, panel), shrinkB=_radius(b, panel)))
        for p in g.points:
            ax.scatter([p.intensity], [p.flops], s=_area(p.share, panel), color=BOUND_COLORS[p.bound],
                       marker=GPU_MARKERS[gpu_index[g.gpu]], edgecolors="white", linewidths=0.8, alpha=0.9,
                       zorder=4, gid=f"point {g.gpu} {g.label}")
            placer.block_point(p.intensity, p.flops, _radius(p, panel), g.ops)
    for m in panel.measured:
        if m.predicted:
            ax.plot([m.intensity, m.predicted[0]], [m.flops, m.predicted[1]], color=MEASURED_COLOR,
                    linestyle=":", linewidth=0.9, zorder=3)
        ax.scatter([m.intensity], [m.flops], s=70, marker="X", color=MEASURED_COLOR, edgecolors="white",
                   linewidths=0.6, zorder=6, gid=f"measured {m.gpu} {m.kernel}")
        placer.block_point(m.intensity, m.flops, 5)
    for r in panel.ridges:
        c = GPU_COLORS[gpu_index[r.gpu]]
        ax.plot([r.intensity], [r.flops], marker="D", color=c, markersize=6, zorder=5, linestyle="none",
                gid=f"ridge {r.gpu}")
        ax.plot([r.intensity, r.intensity], [panel.ylim[0], r.flops], color=c, linestyle=":", linewidth=0.8,
                zorder=1)
        placer.block_point(r.intensity, r.flops, 4)

    for r in panel.roofs:  # labels keep off the roof lines
        placer.block_line(r.x_from, r.at(r.x_from), r.x_to, r.at(r.x_to))
    unlabelled = _draw_roofs(ax, panel, gpu_index, placer)
    for r in panel.ridges:  # ridge labels (only) keep off the other ridges' lines
        placer.block_line(r.intensity, panel.ylim[0], r.intensity, r.flops, half_pt=0.5, ridge=True)
    for r in panel.ridges:
        placer.vertical_label(r.label, r.intensity, panel.ylim[0], GPU_COLORS[gpu_index[r.gpu]])

    for m in panel.measured:  # what was measured first: it is why the chart was drawn
        placer.label(m.label, m.intensity, m.flops, 5, color=MEASURED_COLOR, prefer="below", weight="bold",
                     gid="measured-label")
    for lab in panel.labels:
        placer.label(lab.text, lab.intensity, lab.flops, _radius_of(lab.share, panel), ops=lab.ops)
    for g in panel.groups:  # short, and free to sit on any side of their point
        if g.show_values:
            for k, p in enumerate(g.points):
                text = f"{FIELD_NAMES[panel.sweep_field]} {p.value}" if k == 0 else str(p.value)
                placer.label(text, p.intensity, p.flops, _radius(p, panel), color="#555555", fontsize=7.5,
                             prefer="below", leader=False, gid="value-label")

    footnotes = list(panel.footnotes)
    if unlabelled:
        footnotes.append(f"No room to label: {'; '.join(unlabelled)}.")
    if footnotes:
        ax.annotate("\n".join(footnotes), (0, 0), xycoords="axes fraction", xytext=(0, -36),
                    textcoords="offset points", fontsize=7.5, color="#555555", va="top", ha="left",
                    gid="footnote")


def _draw_roofs(ax, panel: Panel, gpu_index: dict[str, int], placer: _Placer) -> list[str]:
    """Each roof in its GPU's colour. A roof that several GPUs share (same kind, name and value) alternates
    their colours in dashes and is labelled once, naming them. Returns the labels that found no room."""
    unlabelled = []
    shared: dict[tuple, list[Roof]] = {}
    for r in panel.roofs:
        shared.setdefault((r.kind, r.name, round(r.value, 3)), []).append(r)
    # Main roofs (HBM, the workload's tensor roof) first: they get the best label spots.
    for same in sorted(shared.values(), key=lambda s: not _main(s[0])):
        r, k = same[0], len(same)
        for j, rr in enumerate(same):
            style = "-" if k == 1 else (j * 6, (6, 6 * (k - 1)))
            ax.plot([rr.x_from, rr.x_to], [rr.at(rr.x_from), rr.at(rr.x_to)], color=GPU_COLORS[gpu_index[rr.gpu]],
                    linewidth=2.0 if _main(r) else 1.1, alpha=0.95 if _main(r) else 0.55, linestyle=style,
                    zorder=2, solid_capstyle="butt", gid=f"roof {rr.gpu} {rr.name}")
        # With several GPUs a roof names the GPUs it belongs to; where that is too long to fit, its colour does.
        label = r.label if len(gpu_index) == 1 else f"{' / '.join(x.gpu for x in same)} {r.label}"
        texts = [label] if k > 1 or len(gpu_index) == 1 else [label, r.label]
        if not placer.roof_label(texts, r, GPU_COLORS[gpu_index[r.gpu]] if k == 1 else "#333333", _main(r)):
            unlabelled.append(label)
    return unlabelled


def _main(r: Roof) -> bool:
    return r.name == "HBM" or (r.kind == "compute" and r.name.endswith("tensor"))


def _draw_legend(ax, chart: Chart) -> None:
    from matplotlib.lines import Line2D

    handles = []
    for e in chart.legend:
        if e.kind == "gpu":
            h = Line2D([], [], color=e.color, marker=e.marker, markerfacecolor="#bbbbbb", markeredgecolor=e.color,
                       linestyle=e.linestyle, linewidth=2)
        elif e.kind == "share":
            h = Line2D([], [], color="none", marker="o", markerfacecolor=e.color, markeredgecolor="none",
                       markersize=11, linestyle="none")
        elif e.kind == "sweep":
            h = Line2D([], [], color=e.color, linestyle="-", linewidth=1.1)
        else:
            h = Line2D([], [], color=e.color, marker=e.marker, linestyle="none", markersize=7)
        handles.append(h)
    ax.legend(handles, [e.label for e in chart.legend], loc="upper left", fontsize=8, framealpha=0.92,
              borderpad=0.6, handlelength=2.2)


def _tick(v: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= factor:
            return f"{v / factor:g} {prefix}{unit}".strip()
    return f"{v:g} {unit}".strip()


def _area(share: float, panel: Panel) -> float:
    """Marker area in points² ∝ share, with a floor so that the smallest ops stay visible."""
    return 16 + (500 if panel.sweep_field else 900) * share


def _radius(p: OpPoint, panel: Panel) -> float:
    return _radius_of(p.share, panel)


def _radius_of(share: float, panel: Panel) -> float:
    return math.sqrt(_area(share, panel)) / 2


def text_boxes(t, renderer) -> np.ndarray:
    """The display-space boxes (rows of x0, y0, x1, y1) a text covers: its box, or for text at a slant a chain
    of squares along its middle (its upright box would cover a whole triangle around it). Leader lines of
    annotations are left out. Slanted text must use rotation_mode 'anchor' (it turns about its alignment point)."""
    from matplotlib.text import Text

    angle = t.get_rotation()
    if hasattr(t, "update_positions"):
        t.update_positions(renderer)
    box = Text.get_window_extent(t, renderer)
    if angle in (0, 90):
        return np.array([[box.x0, box.y0, box.x1, box.y1]])
    t.set_rotation(0)
    up = Text.get_window_extent(t, renderer)
    t.set_rotation(angle)
    pivot = np.array([
        {"left": up.x0, "center": (up.x0 + up.x1) / 2, "right": up.x1}[t.get_horizontalalignment()],
        {"bottom": up.y0, "baseline": up.y0, "center": (up.y0 + up.y1) / 2, "center_baseline": (up.y0 + up.y1) / 2,
         "top": up.y1}[t.get_verticalalignment()],
    ])
    rad = math.radians(angle)
    rot = np.array([[math.cos(rad), -math.sin(rad)], [math.sin(rad), math.cos(rad)]])
    # Squares a little smaller than the line height: turned with the text, a full-height square's corners would
    # reach past the text's edge and onto the roof line it sits beside.
    side = 0.75 * up.height
    n = max(1, math.ceil(up.width / side))
    xs = up.x0 + (np.arange(n) + 0.5) * up.width / n
    middle = np.stack([xs, np.full(n, (up.y0 + up.y1) / 2)], axis=1)
    c = pivot + (middle - pivot) @ rot.T
    return np.hstack([c - side / 2, c + side / 2])


class _Placer:
    """Greedy label placement in display space: try spots around the anchor, nearest first, and take the first
    that stays inside the axes and overlaps no label, marker, legend or roof line, and whose leader line (spots
    further out get one) crosses no label or marker. Rotated text and sloped lines are held as chains of small
    squares, not their (much larger) upright boxes."""

    def __init__(self, fig, ax):
        self.ax = ax
        self.renderer = fig.canvas.get_renderer()
        self.pt = fig.dpi / 72  # display pixels per point
        self.solid = np.empty((0, 4))  # labels, markers, legend: x0, y0, x1, y1 in display coordinates
        self.tags: list[frozenset] = []  # per row of ``solid``: the ops of a marker (empty for the rest)
        self.lines = np.empty((0, 4))  # roof lines: text keeps off them, leader lines may cross them
        self.ridge_lines = np.empty((0, 4))  # the dotted lines under the ridges: only ridge labels keep off them
        self.texts = []  # every label placed

    @staticmethod
    def _stack(array: np.ndarray, rows) -> np.ndarray:
        return np.vstack([array, np.asarray(rows, dtype=float).reshape(-1, 4)])

    def _add_solid(self, rows, tag: frozenset = frozenset()) -> None:
        rows = np.asarray(rows, dtype=float).reshape(-1, 4)
        self.solid = self._stack(self.solid, rows)
        self.tags += [tag] * len(rows)

    def block(self, bbox) -> None:
        self._add_solid([bbox.x0, bbox.y0, bbox.x1, bbox.y1])

    def block_point(self, x: float, y: float, radius_pt: float, ops: Sequence[str] = ()) -> None:
        cx, cy = self.ax.transData.transform((x, y))
        r = radius_pt * self.pt
        self._add_solid([cx - r, cy - r, cx + r, cy + r], frozenset(ops))

    def _segment(self, a, b, half: float) -> np.ndarray:
        """Squares of half-side ``half`` (display units) every ``half`` along the segment a-b."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        n = max(2, int(np.hypot(*(b - a)) / half))
        c = a + np.linspace(0, 1, n)[:, None] * (b - a)
        return np.hstack([c - half, c + half])

    def block_line(self, x0: float, y0: float, x1: float, y1: float, half_pt: float = 1.5,
                   ridge: bool = False) -> None:
        """A straight line in data space (log-log roofs are straight on screen too)."""
        a, b = self.ax.transData.transform((x0, y0)), self.ax.transData.transform((x1, y1))
        rows = self._segment(a, b, half_pt * self.pt)
        if ridge:
            self.ridge_lines = self._stack(self.ridge_lines, rows)
        else:
            self.lines = self._stack(self.lines, rows)

    def _boxes(self, t) -> np.ndarray:
        return text_boxes(t, self.renderer)

    def _overlap(self, boxes: np.ndarray, taken: np.ndarray, pad: float = 0.0) -> float:
        """The area ``boxes`` (each padded by ``pad`` points) share with ``taken``."""
        if not taken.size:
            return 0.0
        b = boxes[:, None, :] + np.array([-1, -1, 1, 1]) * pad * self.pt
        t = taken[None, :, :]
        w = np.clip(np.minimum(b[..., 2], t[..., 2]) - np.maximum(b[..., 0], t[..., 0]), 0, None)
        h = np.clip(np.minimum(b[..., 3], t[..., 3]) - np.maximum(b[..., 1], t[..., 1]), 0, None)
        return float((w * h).sum())

    def _inside(self, boxes: np.ndarray) -> bool:
        box = self.ax.get_window_extent(self.renderer)
        return bool(boxes[:, 0].min() >= box.x0 and boxes[:, 2].max() <= box.x1
                    and boxes[:, 1].min() >= box.y0 and boxes[:, 3].max() <= box.y1)

    def _free(self, boxes: np.ndarray, pad: float = 1.5) -> bool:
        """Inside the axes, and clear (by ``pad`` points) of every label, marker and roof line."""
        return (self._inside(boxes) and self._overlap(boxes, self.solid, pad) == 0
                and self._overlap(boxes, self.lines, pad) == 0)

    def _leader_crossing(self, x: float, y: float, radius_pt: float, box: np.ndarray, ops: frozenset) -> float:
        """How much the leader from the marker's edge to the nearest point of the label crosses labels and
        markers, but for the markers of the ops it names (the same ops on other GPUs sit in its column)."""
        a = np.asarray(self.ax.transData.transform((x, y)))
        target = np.clip(a, box[:2], box[2:])
        d = target - a
        length = float(np.hypot(*d))
        if length < (radius_pt + 4) * self.pt:
            return 0.0
        start = a + d / length * (radius_pt + 2) * self.pt
        others = np.array([not (tag and tag <= ops) for tag in self.tags], dtype=bool)
        return self._overlap(self._segment(start, target, 1.0 * self.pt), self.solid[others])

    def _keep(self, t, boxes: np.ndarray) -> None:
        self._add_solid(boxes)
        self.texts.append(t)

    def label(self, text: str, x: float, y: float, radius_pt: float, color: str = "#222222",
              fontsize: float = LABEL_FONT, prefer: str = "right", leader: bool = True,
              weight: str = "normal", ops: Sequence[str] = (), gid: str = "op-label",
              fallback: bool = True) -> bool:
        """Next to the marker at (x, y) of radius ``radius_pt``: the nearest free spot, else (with ``fallback``)
        the least crowded one. False when it placed nothing."""
        angles = [0, -35, 35, -70, 70, 180, 145, -145, -90, 90, -20, 20, -55, 55, -110, 110, -125, 125, -160, 160]
        if prefer == "below":
            angles = [-60, -30, -90, -120, 0, 180, 30, 150, 90, 120, 60]
        rings = [3, 16, 30, 46, 64, 84, 106, 130] if leader else [2, 8]
        own = frozenset(ops)
        style = dict(textcoords="offset points", fontsize=fontsize, color=color, zorder=7, fontweight=weight,
                     gid=gid)
        best = None
        for ring, extra in enumerate(rings):
            dist = radius_pt + extra
            for angle, ha in self._spots(angles):
                dx, dy = dist * math.cos(math.radians(angle)), dist * math.sin(math.radians(angle))
                va = "bottom" if dy > 2 else "top" if dy < -2 else "center"
                t = self.ax.annotate(text, (x, y), xytext=(dx, dy), ha=ha, va=va, **style)
                boxes = self._boxes(t)
                far = ring > 0 and leader
                crossing = self._leader_crossing(x, y, radius_pt, boxes[0], own) if far else 0.0
                if self._free(boxes) and crossing == 0:
                    t.remove()
                    self._keep(self._annotate(text, x, y, dx, dy, ha, va, style, far, radius_pt), boxes)
                    return True
                # Failing a free spot: first a text that overlaps nothing (its leader crossing the least), then
                # the text that overlaps the least.
                cost = (self._overlap(boxes, self.solid) + self._overlap(boxes, self.lines), crossing)
                if self._inside(boxes) and (best is None or cost < best[0]):
                    best = (cost, dx, dy, ha, va, far)
                t.remove()
        if not fallback:
            return False
        _, dx, dy, ha, va, far = best or (0, radius_pt + 3, 0, "left", "center", False)
        t = self._annotate(text, x, y, dx, dy, ha, va, style, far, radius_pt)
        self._keep(t, self._boxes(t))
        return True

    @staticmethod
    def _spots(angles: Sequence[float]) -> list[tuple[float, str]]:
        """(angle, horizontal alignment) to try: text to the right of a spot on the right, and so on; straight
        above or below, centred, then starting or ending there (near the axes' side, centred text can't fit)."""
        out = []
        for angle in angles:
            dx = math.cos(math.radians(angle))
            if abs(dx) > 0.05:
                out.append((angle, "left" if dx > 0 else "right"))
            else:
                out += [(angle, "center"), (angle, "left"), (angle, "right")]
        return out

    def _annotate(self, text, x, y, dx, dy, ha, va, style, leader: bool, radius_pt: float):
        arrow = dict(arrowstyle="-", color="#999999", lw=0.6, shrinkA=1, shrinkB=radius_pt) if leader else None
        return self.ax.annotate(text, (x, y), xytext=(dx, dy), ha=ha, va=va, arrowprops=arrow, **style)

    def vertical_label(self, text: str, x: float, y: float, color: str) -> None:
        """Along a vertical line from the bottom of the axes: right of it, else left, moving up if taken."""
        for lift in (4, 40, 80, 120, 160):
            for dx, ha in ((3, "left"), (-3, "right")):
                t = self.ax.annotate(text, (x, y), xytext=(dx, lift), textcoords="offset points", rotation=90,
                                     fontsize=ROOF_FONT, color=color, ha=ha, va="bottom", zorder=6,
                                     gid="ridge-label")
                boxes = self._boxes(t)
                if self._free(boxes, pad=0.5) and self._overlap(boxes, self.ridge_lines, 0.5) == 0:
                    self._keep(t, boxes)
                    return
                t.remove()
        t = self.ax.annotate(text, (x, y), xytext=(3, 4), textcoords="offset points", rotation=90,
                             fontsize=ROOF_FONT, color=color, ha="left", va="bottom", zorder=6, gid="ridge-label")
        self._keep(t, self._boxes(t))

    def roof_label(self, texts: Sequence[str], roof: Roof, color: str, main: bool) -> bool:
        """Along the roof, just above it or just below, at the first free spot: from the left for memory roofs,
        from the ends inwards for compute roofs; each of ``texts`` in turn (a long form, then a short one).
        False when no spot is free (the caller says so in a footnote)."""
        ax = self.ax
        style = dict(fontsize=ROOF_FONT + (0.5 if main else 0), color=color, fontweight="bold" if main else "normal",
                     zorder=6, textcoords="offset points", gid="roof-label")
        lx0, lx1 = math.log10(roof.x_from), math.log10(roof.x_to)
        spots = []  # (x, offset in points, ha, va, rotation)
        if roof.kind == "compute":
            for frac, dx, ha in ((1.0, -4, "right"), (0.0, 8, "left"), (0.75, 0, "center"), (0.5, 0, "center"),
                                 (0.25, 0, "center")):
                for dy, va in ((3, "bottom"), (-3, "top"), (13, "bottom"), (-13, "top")):
                    spots.append((10 ** (lx0 + frac * (lx1 - lx0)), (dx, dy), ha, va, 0.0))
        else:
            p0 = ax.transData.transform((roof.x_from, roof.at(roof.x_from)))
            p1 = ax.transData.transform((roof.x_to, roof.at(roof.x_to)))
            angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
            normal = (-math.sin(math.radians(angle)), math.cos(math.radians(angle)))
            for va, side in (("bottom", 3), ("top", -3)):  # above the line, then below it
                for frac in np.arange(0.02, 0.8, 0.04):
                    spots.append((10 ** (lx0 + frac * (lx1 - lx0)), (normal[0] * side, normal[1] * side), "left",
                                  va, angle))
        for text in texts:
            for x, offset, ha, va, rotation in spots:
                t = ax.annotate(text, (x, roof.at(x)), xytext=offset, ha=ha, va=va, rotation=rotation,
                                rotation_mode="anchor", **style)
                boxes = self._boxes(t)
                if self._free(boxes, pad=0.5):
                    self._keep(t, boxes)
                    return True
                t.remove()
        # No room along the line (parallel roofs of several GPUs lie close): level text nearby, with a leader.
        for frac in (0.55, 0.75, 0.35, 0.9, 0.15):
            x = 10 ** (lx0 + frac * (lx1 - lx0))
            if self.label(texts[0], x, roof.at(x), 1.5, color=color, fontsize=style["fontsize"],
                          weight=style["fontweight"], gid="roof-label", fallback=False):
                return True
        return False


