"""The panels of ``rooflinectl explore``'s app: the ops table, the key bar and the roofline chart as widgets, and
the text of the settings line, the totals and the selected op. Every number is the engine's (an Analysis and its
Placements); the panels format, they compute nothing.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from ..engine.roofline import Analysis, Placement
from ..render.analysis import BOUND_STYLE
from ..units import duration, gib, number, si
from . import state
from .chart import Chart, roofline_chart
from .describe import describe, intensity_text

# Table columns: (header, width, right-aligned). 56 columns in all, to leave the chart 43 at 100 columns (23 at
# 80). The op column cuts long fused names; the op panel below shows them whole. The kind column is the op's
# kind (engine.count.op.OpKind) as the engine gives it, coloured by its bound (cyan memory, magenta compute: the op panel
# says it in words), so that a kind added to the engine shows here unchanged: elementwise, the longest, fits.
KIND = 2  # the kind column's index in COLUMNS (left out at narrow widths)
COLUMNS = (("op", 14, False), ("FLOP/B", 7, True), (" kind", 13, False), ("TFLOP/s", 8, True),
           ("time×n", 7, True), ("share", 7, True))


def ops_in_time_order(a: Analysis) -> list[Placement]:
    """The table's order: the ops that take the most time in the step first."""
    return sorted(a.placements, key=lambda p: -p.total_time_s)


def table_row(p: Placement) -> tuple[str, ...]:
    """One op's cells: intensity, kind (coloured by bound), attainable rate, the time of all its instances, share
    of the step."""
    return (
        p.name,
        intensity_text(p.intensity),
        " " + p.op.kind,
        number(p.achieved_flops / 1e12),
        duration(p.total_time_s, sep=""),
        f"{p.share:.1%}",
    )


def _cell(text: str, width: int, right: bool) -> str:
    text = text if len(text) <= width else text[: width - 2] + "… "
    return text.rjust(width) if right else text.ljust(width)


class OpsTable(Widget):
    """The ops table: a header and one line per op in time order, the selected one in reverse video and kept
    in view. Drawn line by line (Textual's line API) rather than as a DataTable: it renders in a fraction of the
    time, which keeps every key well under 100 ms on two cores (see docs/explore.md)."""

    DEFAULT_CSS = "OpsTable { height: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:  # Widget's: name, id, classes, disabled
        super().__init__(**kwargs)
        self.rows: list[tuple[str, ...]] = []  # the cells as shown, for each op in time order
        self.bounds: list[str] = []
        self.selected_index = 0
        self.first_row = 0  # the first row in view

    def set_rows(self, placements: list[Placement], selected_index: int) -> None:
        self.rows = [table_row(p) for p in placements]
        self.bounds = [p.limit for p in placements]
        self.select(selected_index)

    def select(self, index: int) -> None:
        self.selected_index = index
        self.refresh()

    def in_view(self) -> range:
        """The rows shown: the selected one always among them."""
        visible = max(1, self.size.height - 1)
        i = self.selected_index
        if i < self.first_row:
            self.first_row = i
        elif i >= self.first_row + visible:
            self.first_row = i - visible + 1
        self.first_row = max(0, min(self.first_row, len(self.rows) - visible))
        return range(self.first_row, min(len(self.rows), self.first_row + visible))

    compact = False  # no kind column (a narrow terminal): the op's name carries the bound's colour instead

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        width = self.size.width
        shown = self.in_view()
        columns = [c for i, c in enumerate(COLUMNS) if not (self.compact and i == KIND)]
        if y == 0:
            first = "op" if len(shown) == len(self.rows) else f"op {shown.start + 1}-{shown.stop}/{len(self.rows)}"
            heads = (first, *(c[0] for c in columns[1:]))
            text = "".join(_cell(h, w, r) for h, (_, w, r) in zip(heads, columns))
            return Strip([Segment(text, base + Style(bold=True))]).adjust_cell_length(width, base)
        k = shown.start + y - 1
        if k >= shown.stop:
            return Strip.blank(width, base)
        row = [c for i, c in enumerate(self.rows[k]) if not (self.compact and i == KIND)]
        cells = [_cell(c, w, r) for c, (_, w, r) in zip(row, columns)]
        row_style = base + Style(reverse=True, bold=True) if k == self.selected_index else base
        bound = row_style + Style.parse(BOUND_STYLE[self.bounds[k]])
        if self.compact:
            segments = [Segment(cells[0], bound), Segment("".join(cells[1:]), row_style)]
        else:
            segments = [Segment("".join(cells[:2]), row_style), Segment(cells[2], bound),
                        Segment("".join(cells[3:]), row_style)]
        return Strip(segments).adjust_cell_length(width, base)


# The keys and what they do. The bar wraps between hints, never inside one, so that every key stays in view on a
# narrow terminal (Textual's footer cut "x chart" and "q quit" at 80 columns).
KEY_HINTS = ("p phase", "bB batch ×2/÷2", "cC length ×2/÷2", "d dtype", "a attn", "m model", "g GPU", "↓↑ op",
             "s YAML", "x chart", "q quit")


def key_lines(width: int) -> list[list[str]]:
    """The hints in lines of at most ``width`` cells: all on one line with one space between them where that
    fits, else packed greedily with two."""
    if len(" ".join(KEY_HINTS)) <= width:
        return [list(KEY_HINTS)]
    lines: list[list[str]] = [[]]
    for hint in KEY_HINTS:
        if lines[-1] and len("  ".join([*lines[-1], hint])) > width:
            lines.append([])
        lines[-1].append(hint)
    return lines


class KeyBar(Widget):
    """The keys, on as many lines as the width needs."""

    DEFAULT_CSS = "KeyBar { height: auto; background: $panel; }"

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(key_lines(width))

    def render(self) -> Text:
        lines = key_lines(self.content_size.width or 200)
        out = Text(no_wrap=True, overflow="crop")
        for n, line in enumerate(lines):
            if n:
                out.append("\n")
            sep = " " if len(lines) == 1 else "  "
            for i, hint in enumerate(line):
                key, _, word = hint.partition(" ")
                if i:
                    out.append(sep)
                out.append(key, style="bold")
                out.append(" " + word)
        return out


def settings_line(k: state.Knobs, a: Analysis) -> Text:
    kv = f" (KV {k.kv_dtype})" if k.kv_dtype != k.dtype else ""
    roofs = "" if a.roofs.label == "spec" else " (measured roofs, op model)" if a.op_model else " (measured roofs)"
    # The GPU first: at 80 columns the line is cut at its end, and which GPU it is matters most.
    parts = [
        ("", k.gpu.id + roofs), ("", k.phase), ("", k.model.id), ("batch ", f"{k.batch:,}"),
        (f"{k.length_name} ", f"{k.length:,}"), ("", k.dtype + kv), ("attn ", k.attention),
        *([("", f"{k.layout.label()}, per GPU")] if not k.layout.single else []),
    ]
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, (name, value) in enumerate(parts):
        if i:
            out.append(" │ ", style="dim")
        out.append(name, style="dim")
        out.append(value, style="bold")
    return out


def totals_text(a: Analysis) -> Text:
    """The step's totals in four short lines (``render.totals_lines`` says the same at full width)."""
    t, w = a.totals, a.workload
    if w.phase == "decode":
        rate = f"{duration(t.time_s)} per step · {number(t.tokens_per_s)} tokens/s"
    elif w.phase == "prefill":
        rate = f"time to first token {duration(t.time_s)} · {number(t.tokens_per_s)} prompt tokens/s"
    else:
        rate = f"attention core {duration(t.time_s)} · {number(t.tokens_per_s)} prompt tokens/s"
    fits = ("fits", "green") if t.fits else ("does NOT fit", "bold red")
    return Text.assemble(
        (rate, "bold"), "\n",
        f"{si(t.flops, 'FLOP')}, {si(t.bytes, 'B')} HBM: {si(t.weight_bytes, 'B')} weights, "
        f"{si(t.kv_cache_bytes, 'B')} KV\n",
        f"holds {gib(t.memory_bytes)} of {gib(t.capacity_bytes, 0)}: ", fits,
        f" · max batch {t.max_batch:,}\n",
        f"roofs {number(a.roofs.bandwidth_gbps)} GB/s · {number(a.peak_flops / 1e12)} TFLOP/s {w.dtype} · "
        f"ridge {number(a.ridge)}",
    )


def detail_text(p: Placement, a: Analysis) -> Text:
    lines = describe(p, a)
    out = Text()
    out.append(lines[0], style=f"bold {BOUND_STYLE[p.limit]}")
    for line in lines[1:]:
        out.append("\n")
        out.append(line, style="italic" if line.startswith("→") else "")
    return out


class RooflineChart(Widget):
    """The roofline of the current analysis, redrawn to the widget's size (line API, like the table)."""

    DEFAULT_CSS = "RooflineChart { height: 1fr; }"
    chart: Chart | None = None
    _strips: list[Strip] | None = None

    def show(self, a: Analysis, selected: str | None) -> None:
        self._analysis, self._selected = a, selected
        self.redraw()

    def redraw(self) -> None:
        a = getattr(self, "_analysis", None)
        width, height = self.content_size
        if a is None or width < 1 or height < 1:
            return
        self.chart = roofline_chart(a, self._selected, width, height)
        self._strips = None
        self.refresh()

    def on_resize(self) -> None:
        self.redraw()

    def render_line(self, y: int) -> Strip:
        base = self.rich_style
        if self.chart is None:
            return Strip.blank(self.content_size.width, base)
        if self._strips is None:
            self._strips = [Strip([Segment(text, base + style if style else base) for text, style in runs])
                            for runs in self.chart.canvas.rows()]
        if y >= len(self._strips):
            return Strip.blank(self.content_size.width, base)
        return self._strips[y]

