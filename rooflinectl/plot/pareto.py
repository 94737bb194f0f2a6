"""``plot pareto``: the latency–throughput curve of a request on each GPU, as the chart a capacity planner shows.

x: time per output token (ms, the mean of the decode steps), y: output tokens/s per GPU, one line per GPU as the
batch grows from 1 to the largest that fits (powers of two and the largest), each point labelled by its batch,
the largest marked as the memory limit. A GPU where not even one request fits is named in the chart with why.
The points are served batches (``engine.choice.serve_curve``: the static batch or the simulated one); this module
only draws them. matplotlib is imported inside ``draw_pareto``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.choice import Curve
from ..errors import UserError
from ..files import write_atomic
from ..serving.cost import Pricing
from ..units import gib
from .chart import GPU_COLORS, GPU_MARKERS, check_output

SIZE_IN = (10.0, 6.6)
DPI = 150
# Where a point's label may go, in points from the marker, tried in this order until one overlaps nothing drawn.
# The memory limit's point is ringed (13 pt across): its label starts outside the ring.
LIMIT_OFFSETS = ((11, -3), (-11, -3), (0, 10), (0, -16), (11, 6), (-11, 6))
NOT_FIT_COLOR = "#AA0000"
# Points sampled along each line segment between two markers, which labels keep clear of.
LINE_SAMPLES = 24
LABEL_OFFSETS = ((7, -3), (7, 5), (-7, 5), (-7, -11), (0, 9), (0, -14), (12, -10), (-12, 9))


@dataclass(frozen=True)
class Series:
    gpu: str
    color: str
    marker: str
    tpot_ms: tuple[float, ...]
    tokens_per_s: tuple[float, ...]
    batches: tuple[int, ...]
    note: str  # a GPU where nothing fits: why


# The y axes ``--y`` offers: output tokens/s per GPU (the default), or what an output token costs at the GPU's price
# or board power (serving.cost.Pricing: a closed batch's GPUs are busy from its start to its last token).
Y_AXES = {"tokens": "output tokens/s per GPU",
          "usd": "$ per million output tokens (GPU-hours at the price given, all on the output tokens)",
          "joules": "J per output token (board power, an upper bound)"}


def _y(tokens_per_s: float, y: str, pricing: Pricing | None) -> float:
    if y == "tokens":
        return tokens_per_s
    assert pricing is not None
    usd, joules = pricing.per_output_token(tokens_per_s)
    value = usd if y == "usd" else joules
    assert value is not None
    return value


def check_y(y: str, pricing: Sequence[Pricing]) -> None:
    """``--y`` names an axis, and what it needs is given: a price for usd, every GPU's board power for joules."""
    if y not in Y_AXES:
        raise UserError(f"--y {y}: give one of {', '.join(Y_AXES)}")
    if y == "usd" and any(p.price_per_gpu_hour is None for p in pricing):
        raise UserError("--y usd: give --price-per-gpu-hour")
    if y == "joules" and any(p.board_w is None for p in pricing):
        raise UserError("--y joules: a GPU file given states no board power (power.board_w)")


def series(curves: Sequence[Curve], y: str = "tokens", pricing: Sequence[Pricing] = ()) -> list[Series]:
    out = []
    for i, c in enumerate(curves):
        note = ""
        if c.largest_batch == 0:
            m = c.limit
            note = (f"{c.gpu}: does not fit, one request needs {gib(m.total_bytes)} of "
                    f"{gib(m.capacity_bytes, 0)} ({gib(m.weight_bytes)} weights, "
                    f"{gib(m.reserve_bytes)} reserve)")
        out.append(Series(
            gpu=c.gpu, color=GPU_COLORS[i % len(GPU_COLORS)], marker=GPU_MARKERS[i % len(GPU_MARKERS)],
            tpot_ms=tuple((g.tpot_s or 0.0) * 1e3 for g in c.points),
            tokens_per_s=tuple(_y(g.output_tokens_per_s_per_gpu, y, pricing[i] if pricing else None)
                               for g in c.points),
            batches=tuple(g.request.batch for g in c.points), note=note))
    return out


def draw_pareto(curves: Sequence[Curve], title: str, path: Path, y: str = "tokens",
                pricing: Sequence[Pricing] = ()) -> Any:
    """Draw the curves to ``path`` (format from its extension), ``y`` one of Y_AXES; returns the figure."""
    check_y(y, pricing)
    check_output(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False}):
        fig, ax = plt.subplots(figsize=SIZE_IN)
        try:
            _draw(fig, ax, series(curves, y, pricing), title, Y_AXES[y])
            buffer = io.BytesIO()
            fig.savefig(buffer, dpi=DPI, format=Path(path).suffix.lower().lstrip("."))
        except (OSError, ValueError) as err:
            plt.close(fig)
            raise UserError(f"cannot draw {path}: {' '.join(str(err).split())[:200]}") from None
        write_atomic(path, buffer.getvalue(), "-o")
    return fig


def _draw(fig: Any, ax: Any, all_series: list[Series], title: str, ylabel: str = Y_AXES["tokens"]) -> None:
    drawn = [s for s in all_series if s.batches]
    for s in drawn:
        ax.plot(s.tpot_ms, s.tokens_per_s, color=s.color, marker=s.marker, markersize=5, linewidth=1.5,
                label=f"{s.gpu} (largest batch {s.batches[-1]:,})", gid=f"curve {s.gpu}")
        # The memory limit: the largest batch that fits, ringed.
        ax.plot(s.tpot_ms[-1], s.tokens_per_s[-1], marker="o", markersize=13, markerfacecolor="none",
                markeredgecolor=s.color, markeredgewidth=1.5, linestyle="none", gid=f"limit {s.gpu}")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    ax.set_xscale("log")
    # Plain numbers at 1, 2 and 5 of each decade (mathtext, which writes 10^3, is off: names print as written).
    for axis, form in ((ax.xaxis, "{:g}"), (ax.yaxis, "{:,.0f}" if ylabel == Y_AXES["tokens"] else "{:g}")):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _, form=form: form.format(v)))
        axis.set_minor_formatter(NullFormatter())
    # Static or simulated, TPOT is each request's (end-to-end − TTFT) / (output − 1), averaged over the requests.
    ax.set_xlabel("time per output token (ms, mean over the requests of (end-to-end − TTFT) / (output − 1))")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9.5, loc="left")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", alpha=0.1)
    if drawn:
        xs = [x for s in drawn for x in s.tpot_ms]
        ys = [y for s in drawn for y in s.tokens_per_s]
        ax.set_xlim(min(xs) / 1.15, max(xs) * 1.35)
        ax.set_ylim(min(ys) / 1.6, max(ys) * 1.8)
        ax.plot([], [], marker="o", markersize=11, markerfacecolor="none", markeredgecolor="#555555",
                linestyle="none", label="memory limit (largest batch that fits)")
    notes = [s.note for s in all_series if s.note]
    if drawn:
        # A GPU where nothing fits is a legend entry of its own, in red, with why: nothing of it is drawn, and
        # the legend is the one box that never covers a point.
        for note in notes:
            ax.plot([], [], linestyle="none", marker="x", color=NOT_FIT_COLOR, label=note)
        # Lower right: the curves rise from the lower left to the upper right, and the corner of slow steps at
        # low throughput is the one no curve reaches.
        # (A cost falls as the batch grows: its curves leave the upper right empty instead.)
        corner = "lower right" if ylabel == Y_AXES["tokens"] else "upper right"
        legend = ax.legend(loc=corner, fontsize=8, framealpha=0.9)
        for text in legend.get_texts():
            if text.get_text() in notes:
                text.set_color(NOT_FIT_COLOR)
                text.set_gid("does-not-fit")
    elif notes:
        ax.text(0.5, 0.5, "\n".join(notes), transform=ax.transAxes, ha="center", va="center", fontsize=9,
                color=NOT_FIT_COLOR, gid="does-not-fit",
                bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": NOT_FIT_COLOR})
    if not drawn:  # no axis to read: no ticks, no grid
        for minor in (False, True):
            ax.set_xticks([], minor=minor)
            ax.set_yticks([], minor=minor)
        ax.grid(False, which="both")
    fig.tight_layout()
    _label_points(fig, ax, drawn)


def _label_points(fig: Any, ax: Any, drawn: list[Series]) -> None:
    """Each point's batch beside it, at the first offset whose text overlaps no label, marker or legend."""
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    taken: list[Any] = []
    legend = ax.get_legend()
    if legend is not None:
        taken.append(legend.get_window_extent(renderer))
    for text in ax.texts:
        taken.append(text.get_window_extent(renderer))
    marker_px = 6
    for s in drawn:
        for x, y in zip(s.tpot_ms, s.tokens_per_s, strict=True):
            px, py = ax.transData.transform((x, y))
            taken.append(Bbox.from_extents(px - marker_px, py - marker_px, px + marker_px, py + marker_px))
    # The lines between points, as small boxes along each segment, so that no label sits across a line.
    for s in drawn:
        xy = [ax.transData.transform(p) for p in zip(s.tpot_ms, s.tokens_per_s, strict=True)]
        for (x0, y0), (x1, y1) in zip(xy, xy[1:], strict=False):
            for k in range(1, LINE_SAMPLES):
                t = k / LINE_SAMPLES
                x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                taken.append(Bbox.from_extents(x - 1, y - 1, x + 1, y + 1))
    axes_box = ax.get_window_extent(renderer)
    left_out = 0
    for s in drawn:
        for i, (x, y, b) in enumerate(zip(s.tpot_ms, s.tokens_per_s, s.batches, strict=True)):
            text = f"{b:,}" + (" (memory limit)" if i == len(s.batches) - 1 else "")  # ringed: further out
            last = i == len(s.batches) - 1
            for dx, dy in (LIMIT_OFFSETS if last else LABEL_OFFSETS):
                artist = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7.5,
                                     color=s.color, ha="left" if dx >= 0 else "right", gid=f"batch {s.gpu} {b}")
                box = artist.get_window_extent(renderer)
                inside = (box.x0 >= axes_box.x0 and box.x1 <= axes_box.x1 and box.y0 >= axes_box.y0
                          and box.y1 <= axes_box.y1)
                if inside and not any(box.overlaps(t) for t in taken):
                    taken.append(box)
                    break
                artist.remove()
            else:
                left_out += 1
    if left_out:
        ax.text(0.01, -0.1, f"{left_out} batch label{'s' if left_out > 1 else ''} left out for room; --json "
                f"lists every point", transform=ax.transAxes, fontsize=7.5, color="#555555", gid="labels-left-out")
