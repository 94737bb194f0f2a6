"""Drawing a roofline ``Chart`` with matplotlib.

Everything drawn comes from the chart's data (``plot.chart``, filled in by ``plot.build``, which this module never
imports); this module decides only how things look, and ``plot.place`` where their labels go. matplotlib is
imported inside the functions (on the Agg backend, so it works headless): importing this module costs nothing
heavy. Each artist carries a gid ("roof h100-sxm HBM", "point h100-sxm q/k/v_proj", "op-label", …) so that tests
can find what was drawn. matplotlib's figures and axes are typed ``Any``: its stubs are partial, and nothing
here depends on more than the calls it makes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..files import write_atomic
from ..units import si
from .chart import (
    BOUND_COLORS,
    GPU_COLORS,
    GPU_MARKERS,
    MEASURED_COLOR,
    Chart,
    OpPoint,
    Panel,
    Roof,
    check_output,
    check_style,
)
from .place import Placer

PANEL_SIZE_IN = (10.0, 6.6)
# The measured points a panel tries to label, in the record's order; the rest are drawn unlabelled and counted
# in a footnote. A panel has room for a few dozen labels (16 of 100 gemv records found a free spot), and each
# label tried costs a few ms: 300 records took 89 s before the placer was rewritten, and now take about as
# long as 48.
MEASURED_LABELS = 48
# A slide's resolution: a 16:9 slide is 13.3 in wide, and a chart that fills it is 2,660 px across at 200 dpi (a
# 4K projector's 3,840 over a slide and a half); PDF and SVG are vector (text kept as text, svg.fonttype "none").
DPI = 200
# The dark style: the light colours the drawing uses for ink (text, frame, grey lines) and paper, and what each
# becomes on a dark slide. The GPUs' and bounds' colours (Okabe-Ito) read on both; the first GPU's near-black
# turns light grey.
DARK_BACKGROUND = "#1b1b1f"
DARK_INK = {"#222222": "#e8e8e8", "#333333": "#dddddd", "#111111": "#f0f0f0", "#000000": "#e8e8e8",
            "#555555": "#b8b8b8", "#999999": "#8a8a8a", "#bbbbbb": "#777777", "#e6e6e6": "#34343a",
            "#ffffff": DARK_BACKGROUND}
# Op labels of at least this share of the step are placed before the roof labels.
BIG_SHARE = 0.1


def draw_chart(chart: Chart, path: Path | None = None, style: str = "light") -> Any:
    """Render ``chart`` in ``style`` (light or dark, for the slide it goes on); write it to ``path`` (format from
    the extension) when given. Returns the figure."""
    if path is not None:
        check_output(path)
    check_style(style)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Names come from the user's files: a '$' in one must print as a '$', not start matplotlib's mathtext (whose
    # parse errors left a partial SVG or PDF behind).
    # SVG keeps its text as text (a slide tool can search, edit and restyle it), not as paths.
    with matplotlib.rc_context({"text.parse_math": False, "svg.fonttype": "none"}):
        return _render(chart, path, plt, style)


def _render(chart: Chart, path: Path | None, plt: Any, style: str = "light") -> Any:
    import io

    n = len(chart.panels)
    panels_in = PANEL_SIZE_IN[0] * n
    fig, axes = plt.subplots(1, n, figsize=(panels_in, PANEL_SIZE_IN[1]), squeeze=False, dpi=DPI)
    # The legend stands right of the panels, outside the axes: inside, it sat on a sweep's points and
    # took the corner the labels need. The figure grows by its width.
    legend = _draw_legend(fig, chart)
    legend_in = legend.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi + 0.2
    width = panels_in + legend_in
    fig.set_size_inches(width, PANEL_SIZE_IN[1])
    # Fixed margins in inches, not tight_layout: labels are placed by measuring text in display space, which
    # must not move afterwards.
    # left: the tick labels ("100 GFLOP/s") and the y-axis title beside them; each panel has its own y-axis title,
    # so the gap between panels holds a full left margin. top: the title's lines (0.25 in each at 12.5 points), a
    # clear 0.12 in, and the panel's title above the axes (0.3 in).
    left_in, right_in = 1.35, 0.25
    gap_in = left_in + 0.15
    height = PANEL_SIZE_IN[1]
    title = wrap_title(chart.title, int(width * 9))
    top_in = 0.15 + 0.25 * (title.count("\n") + 1) + 0.1 + 0.22
    axes_in = (panels_in - left_in - right_in - gap_in * (n - 1)) / n
    fig.subplots_adjust(left=left_in / width, right=(panels_in - right_in) / width, top=1 - top_in / height,
                        bottom=0.17, wspace=gap_in / axes_in)
    legend.set_bbox_to_anchor((panels_in / width, 1 - top_in / height), transform=fig.transFigure)
    fig.suptitle(title, fontsize=12.5, fontweight="bold", y=1 - 0.15 / height, va="top")
    for panel, ax in zip(chart.panels, axes[0], strict=True):
        _draw_panel(fig, ax, panel, chart)
    if style == "dark":
        _darken(fig)
    if path is not None:
        # Rendered into memory first, then written all at once (files.write_atomic): a render error or a full
        # disk never leaves a truncated image where the old one was.
        buffer = io.BytesIO()
        try:
            # Cropped to what is drawn (a 0.15 in margin): the footnotes' room under a chart with one footnote
            # was a wide empty band. Cropping moves nothing: the labels stay where they were placed.
            fig.savefig(buffer, dpi=DPI, format=Path(path).suffix.lower().lstrip("."),
                        facecolor=fig.get_facecolor(), bbox_inches="tight", pad_inches=0.15)
        except (OSError, ValueError) as err:
            plt.close(fig)
            raise UserError(f"cannot draw {path}: {' '.join(str(err).split())[:200]}") from None
        try:
            write_atomic(path, buffer.getvalue(), "-o")
        except UserError:
            plt.close(fig)
            raise
    return fig


def _darken(fig: Any) -> None:
    """Recolour a drawn figure for a dark slide: paper to DARK_BACKGROUND, each ink colour by DARK_INK. Positions
    do not change: the labels stay where they were placed."""
    from matplotlib.colors import to_hex, to_rgba

    def dark(color: Any) -> Any:
        rgba = to_rgba(color)
        if rgba[3] == 0:
            return color
        new = DARK_INK.get(to_hex(rgba[:3]))
        return color if new is None else to_rgba(new, rgba[3])

    fig.set_facecolor(DARK_BACKGROUND)
    for artist in fig.findobj():
        for getter, setter in (("get_color", "set_color"), ("get_edgecolor", "set_edgecolor"),
                               ("get_facecolor", "set_facecolor"), ("get_markeredgecolor", "set_markeredgecolor"),
                               ("get_markerfacecolor", "set_markerfacecolor")):
            if not (hasattr(artist, getter) and hasattr(artist, setter)) or artist is fig:
                continue
            try:
                value = getattr(artist, getter)()
                if isinstance(value, np.ndarray) and value.ndim == 2:
                    new = [dark(c) for c in value]
                    getattr(artist, setter)(new)
                elif isinstance(value, str) or (isinstance(value, (tuple, np.ndarray)) and len(value) in (3, 4)):
                    getattr(artist, setter)(dark(value))
            except (ValueError, TypeError, AttributeError):
                continue  # an artist without that colour ("none", auto): nothing to change
    for ax in fig.axes:
        ax.set_facecolor(DARK_BACKGROUND)


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


def _draw_panel(fig: Any, ax: Any, panel: Panel, chart: Chart) -> None:
    """Order matters: everything that cannot move (markers) is drawn and blocked first, then the roof
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
        axis.set_major_formatter(FuncFormatter(lambda v, _, unit=unit: si(v, unit)))
        axis.set_minor_formatter(NullFormatter())
    ax.grid(True, which="major", color="#e6e6e6", linewidth=0.7)
    ax.set_axisbelow(True)

    placer = Placer(fig, ax)
    gpu_index = {g: i for i, g in enumerate(chart.gpus)}

    for g in panel.groups:
        c = GPU_COLORS[gpu_index[g.gpu]]
        if g.moves:
            ax.plot([p.intensity for p in g.points], [p.flops for p in g.points], color=c, linewidth=1.1,
                    alpha=0.6, zorder=3, gid=f"trajectory {g.gpu} {g.label}")
            _draw_arrows(ax, g.points, [_radius(p, panel) for p in g.points], c, placer.pt,
                         gid=f"arrows {g.gpu} {g.label}")
        # One scatter per group, its points in order (one per point made a 64-size sweep draw ~1,000 artists).
        ax.scatter([p.intensity for p in g.points], [p.flops for p in g.points],
                   s=[_area(p.share, panel) for p in g.points], color=[BOUND_COLORS[p.bound] for p in g.points],
                   marker=GPU_MARKERS[gpu_index[g.gpu]], edgecolors="white", linewidths=0.8, alpha=0.9,
                   zorder=4, gid=f"point {g.gpu} {g.label}")
        placer.block_points([(p.intensity, p.flops) for p in g.points], [_radius(p, panel) for p in g.points],
                            g.ops)
    for m in panel.measured:
        if m.predicted:
            ax.plot([m.intensity, m.predicted[0]], [m.flops, m.predicted[1]], color=MEASURED_COLOR,
                    linestyle=":", linewidth=0.9, zorder=3)
        ax.scatter([m.intensity], [m.flops], s=70, marker="X", color=MEASURED_COLOR, edgecolors="white",
                   linewidths=0.6, zorder=6, gid=f"measured {m.gpu} {m.kernel}")
        placer.block_point(m.intensity, m.flops, 5)
    for ridge in panel.ridges:
        c = GPU_COLORS[gpu_index[ridge.gpu]]
        ax.plot([ridge.intensity], [ridge.flops], marker="D", color=c, markersize=6, zorder=5, linestyle="none",
                gid=f"ridge {ridge.gpu}")
        ax.plot([ridge.intensity, ridge.intensity], [panel.ylim[0], ridge.flops], color=c, linestyle=":",
                linewidth=0.8, zorder=1)
        placer.block_point(ridge.intensity, ridge.flops, 4)

    for r in panel.roofs:  # labels keep off the roof lines
        placer.block_line(r.x_from, r.at(r.x_from), r.x_to, r.at(r.x_to))
    # The ops that take most of the step are labelled before the roofs: a roof's label has many spots along its
    # line, the big markers under a crowded compute roof only a few ("gate/up/down_proj 64%" found no
    # room under three GPUs' roof labels).
    big = [lab for lab in panel.labels if lab.share >= BIG_SHARE]
    unlabelled = [lab.text.replace("\n", ", ") for lab in big
                  if not placer.label(lab.text, lab.intensity, lab.flops, _radius_of(lab.share, panel), ops=lab.ops)]
    unlabelled += _draw_roofs(ax, panel, gpu_index, placer)
    for ridge in panel.ridges:  # ridge labels (only) keep off the other ridges' lines
        placer.block_line(ridge.intensity, panel.ylim[0], ridge.intensity, ridge.flops, half_pt=0.5, ridge=True)
    # A label goes where it overlaps nothing, or is left off and named below (plot.place): never over another.
    for ridge in panel.ridges:
        if not placer.vertical_label(ridge.label, ridge.intensity, panel.ylim[0], GPU_COLORS[gpu_index[ridge.gpu]]):
            unlabelled.append(ridge.label)

    unlabelled_measured = [m.label for k, m in enumerate(panel.measured)  # measured first: why it was drawn
                           if k >= MEASURED_LABELS
                           or not placer.label(m.label, m.intensity, m.flops, 5, color=MEASURED_COLOR,
                                               prefer="below", weight="bold", gid="measured-label")]
    for lab in panel.labels:
        if lab.share >= BIG_SHARE:
            continue
        if not placer.label(lab.text, lab.intensity, lab.flops, _radius_of(lab.share, panel), ops=lab.ops):
            unlabelled.append(lab.text.replace("\n", ", "))
    unlabelled_values: list[str] = []
    for g in panel.groups:  # short, and free to sit on any side of their point
        if g.show_values:
            for k, p in enumerate(g.points):
                text = f"{panel.sweep_field} {p.value}" if k == 0 else str(p.value)
                if not placer.label(text, p.intensity, p.flops, _radius(p, panel), color="#555555", fontsize=7.5,
                                    prefer="below", leader=False, gid="value-label"):
                    unlabelled_values.append(str(p.value))

    footnotes = list(panel.footnotes)
    if unlabelled:
        footnotes.append(f"No room to label: {_listed(unlabelled)}.")
    if unlabelled_measured:
        footnotes.append(f"No room to label {len(unlabelled_measured)} of {len(panel.measured)} measured points: "
                         f"{_listed(unlabelled_measured)}.")
    if unlabelled_values:
        footnotes.append(f"No room to write {panel.sweep_field} {_listed(unlabelled_values, sep=', ')} beside "
                         f"its point.")
    if footnotes:
        ax.annotate("\n".join(footnotes), (0, 0), xycoords="axes fraction", xytext=(0, -36),
                    textcoords="offset points", fontsize=7.5, color="#555555", va="top", ha="left",
                    gid="footnote")


# A trajectory's arrow heads, as matplotlib's "-|>" draws them at an annotation's text size (10 points): 4 points
# long, 2 wide each side of the line, at the line's width (1.1 points) and 80% opaque.
ARROW_HEAD_PT = (4.0, 2.0)
ARROW_LW = 1.1


def _draw_arrows(ax: Any, points: Sequence[OpPoint], radii_pt: Sequence[float], color: str, pt: float,
                 gid: str) -> None:
    """One arrow from each point of a trajectory to the next, all in one artist (an arrow per segment, each an
    annotation, made a 64-value sweep of 3 GPUs draw 1,100 arrows and spend 3 s rendering them).

    Each arrow is what ``ax.annotate("", b, a, arrowprops=dict(arrowstyle="-|>", shrinkA=r_a, shrinkB=r_b))``
    draws: the segment a-b shortened by each marker's radius (by neither end whose circle holds the other end:
    matplotlib's rule), a filled wedge at its end. Shapes are in points around b, placed in data coordinates,
    so they stay right at any dpi (PDF and SVG are drawn at 72)."""
    from matplotlib.collections import PathCollection
    from matplotlib.path import Path as MplPath
    from matplotlib.transforms import IdentityTransform

    xy = np.array([(p.intensity, p.flops) for p in points], dtype=float)
    at = ax.transData.transform(xy) / pt  # in points
    head_len, head_half = ARROW_HEAD_PT
    head_dist = math.hypot(head_len, head_half)
    cos_t, sin_t = head_len / head_dist, head_half / head_dist
    rot = np.array([[cos_t, sin_t], [-sin_t, cos_t]])  # turns the backward direction to each side of the wedge
    paths, offsets = [], []
    codes = [MplPath.MOVETO, MplPath.LINETO, MplPath.MOVETO, MplPath.LINETO, MplPath.LINETO, MplPath.CLOSEPOLY]
    for k in range(len(points) - 1):
        a, b = at[k], at[k + 1]
        length = math.hypot(*(b - a))
        if length == 0:
            continue
        u = (b - a) / length
        start = a + u * radii_pt[k] if length > radii_pt[k] else a
        end = b - u * radii_pt[k + 1] if math.hypot(*(b - start)) > radii_pt[k + 1] else b
        if start[0] == end[0] and start[1] == end[1]:
            continue
        tip = end - u * (0.5 * ARROW_LW / sin_t)  # the wedge's stroke would reach past the end otherwise
        back = -u * head_dist
        side1, side2 = tip + rot @ back, tip + rot.T @ back
        verts = np.array([start, tip, side1, tip, side2, tip]) - b
        paths.append(MplPath(verts, codes))
        offsets.append(xy[k + 1])
    if not paths:
        return
    arrows = PathCollection(paths, sizes=[1.0], offsets=np.array(offsets), offset_transform=ax.transData,
                            facecolors=color, edgecolors=color, linewidths=ARROW_LW, alpha=0.8, zorder=3,
                            joinstyle="round", capstyle="butt", clip_on=False, gid=gid)
    arrows.set_transform(IdentityTransform())
    ax.add_collection(arrows, autolim=False)


# A footnote names at most this many things left unlabelled, then counts the rest: 300 measured points without
# room would otherwise be a footnote taller than the chart.
FOOTNOTE_NAMES = 6


def _listed(names: list[str], sep: str = "; ") -> str:
    """'a; b; c', or the first FOOTNOTE_NAMES and 'and N more'."""
    shown = sep.join(names[:FOOTNOTE_NAMES])
    return shown if len(names) <= FOOTNOTE_NAMES else f"{shown} and {len(names) - FOOTNOTE_NAMES} more"


def _draw_roofs(ax: Any, panel: Panel, gpu_index: dict[str, int], placer: Placer) -> list[str]:
    """Each roof in its GPU's colour. A roof that several GPUs share (same kind, name and value) alternates
    their colours in dashes and is labelled once, naming them. Returns the labels that found no room."""
    unlabelled = []
    shared: dict[tuple[str, str, float], list[Roof]] = {}
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


def _draw_legend(fig: Any, chart: Chart) -> Any:
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
        elif e.kind == "note":
            h = Line2D([], [], color="none", linestyle="none")
        else:
            h = Line2D([], [], color=e.color, marker=e.marker, linestyle="none", markersize=7)
        handles.append(h)
    return fig.legend(handles, [e.label for e in chart.legend], loc="upper left", fontsize=8, framealpha=0.92,
                      borderpad=0.6, handlelength=2.2)


def _area(share: float, panel: Panel) -> float:
    """Marker area in points² ∝ share, with a floor so that the smallest ops stay visible."""
    return 16 + (500 if panel.sweep_field else 900) * share


def _radius(p: OpPoint, panel: Panel) -> float:
    return _radius_of(p.share, panel)


def _radius_of(share: float, panel: Panel) -> float:
    return math.sqrt(_area(share, panel)) / 2
