"""The Textual app of ``rooflinectl explore``: keys turn the knobs, every panel follows at once.

Layout at 100×30 (the smallest size it is designed for):

    settings: phase, model, batch, length, dtype, attention, GPU                         1 row
    ops table, sorted by time (the selected op highlighted) │ roofline chart             the rest
    verdict (scrolls)                                       │ totals, the selected op    11 rows
    status line (what the last key did, or the error it met)                             1 row
    footer: the keys                                                                      1 row

Every number is the engine's: ``roofline.analyze`` for the table, chart and totals, ``explain.verdict`` for the
verdict, the op's own Placement for its explanation. The app formats; it computes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from ..engine.explain import verdict
from ..engine.roofline import Analysis, Placement
from ..errors import UserError
from ..render.analysis import BOUND_STYLE
from ..specs.hardware import GPU, list_gpus
from ..specs.model import Model, list_models
from ..specs.workload import Workload
from ..units import duration, gib, number, si
from . import state
from .chart import Chart, roofline_chart
from .describe import describe, intensity_text

_BATCH = Binding.Group("batch ×2/÷2", compact=True)
_LENGTH = Binding.Group("length ×2/÷2", compact=True)
_OP = Binding.Group("op", compact=True)

# Table columns: (header, width, right-aligned). 56 columns in all, to leave the chart 43 at 100 columns (23 at
# 80). The op column cuts long fused names; the op panel below shows them whole. The kind column is the op's
# kind (engine.op.OpKind) as the engine gives it, coloured by its bound (cyan memory, magenta compute: the op panel
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
        number(p.attainable_flops / 1e12),
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

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.rows: list[tuple[str, ...]] = []  # the cells as shown, for each op in time order
        self.bounds: list[str] = []
        self.selected_index = 0
        self.first_row = 0  # the first row in view

    def set_rows(self, placements: list[Placement], selected_index: int) -> None:
        self.rows = [table_row(p) for p in placements]
        self.bounds = [p.bound for p in placements]
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

    def get_content_height(self, container, viewport, width: int) -> int:
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
    # The GPU first: at 80 columns the line is cut at its end, and which GPU it is matters most (issue 19).
    parts = [
        ("", k.gpu.id + roofs), ("", k.phase), ("", k.model.id), ("batch ", f"{k.batch:,}"),
        (f"{k.length_name} ", f"{k.length:,}"), ("", k.dtype + kv), ("attn ", k.attention),
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
    out.append(lines[0], style=f"bold {BOUND_STYLE[p.bound]}")
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


class ExploreApp(App):
    """An interactive roofline: keys turn the knobs of one workload on one GPU."""

    TITLE = "rooflinectl explore"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #settings { height: 1; background: $boost; padding: 0 1; }
    #upper { height: 1fr; }
    #ops { width: 57; height: 1fr; border-right: vkey $foreground 20%; }
    #chart { width: 1fr; height: 1fr; padding: 0 0 0 1; }
    #lower { height: 13; border-top: hkey $foreground 20%; }
    #left { width: 54; border-right: vkey $foreground 20%; }
    #totals { height: auto; }
    #verdict-box { height: 1fr; scrollbar-size-vertical: 1; scrollbar-gutter: stable; margin-top: 1; }
    #detail-box { width: 1fr; padding: 0 0 0 1; scrollbar-size-vertical: 1; scrollbar-gutter: stable; }
    #status { height: auto; max-height: 6; background: $boost; padding: 0 1; }
    #status.error { background: $error 40%; text-style: bold; }
    """
    BINDINGS = [
        Binding("p", "phase", "phase"),
        Binding("b", "batch(2)", "batch ×2", group=_BATCH),
        Binding("B,shift+b", "batch(0.5)", "batch ÷2", group=_BATCH),
        Binding("c", "length(2)", "length ×2", group=_LENGTH),
        Binding("C,shift+c", "length(0.5)", "length ÷2", group=_LENGTH),
        Binding("d", "dtype", "dtype"),
        Binding("a", "attention", "attn"),
        Binding("m", "model", "model"),
        Binding("g", "gpu", "GPU"),
        Binding("down,j", "select(1)", "next op", group=_OP),
        Binding("up,k", "select(-1)", "previous op", group=_OP),
        Binding("s", "save_yaml", "YAML"),
        Binding("x", "save_chart", "chart"),
        Binding("q", "quit", "quit"),
    ]

    def __init__(
        self,
        workload: Workload,
        gpu: GPU,
        *,
        calibrated: bool = False,
        gpu_ref: str | None = None,
        out_dir: Path = Path("."),
        models: list[Model] | None = None,
        gpus: list[GPU] | None = None,
    ):
        super().__init__()
        self.knobs = state.Knobs.from_workload(workload, gpu, calibrated)
        self.analysis = self.knobs.analyze()  # bad input fails here, before the terminal is taken over
        self.models = list(models if models is not None else list_models())
        if all(m.id != workload.model.id for m in self.models):
            self.models.insert(0, workload.model)
        self.gpus = list(gpus if gpus is not None else list_gpus())
        self.gpu_refs = {g.id: g.id for g in self.gpus}
        if gpu.id not in self.gpu_refs:
            self.gpus.insert(0, gpu)
        self.gpu_refs[gpu.id] = gpu_ref or gpu.id
        self.out_dir = Path(out_dir)
        self.order = [p.name for p in ops_in_time_order(self.analysis)]
        self.selected = self.order[0]
        self.update_seconds: list[float] = []  # how long each update of the view took (for measuring)

    # --- layout ------------------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="settings")
        with Horizontal(id="upper"):
            yield OpsTable(id="ops")
            yield RooflineChart(id="chart")
        with Horizontal(id="lower"):
            with Vertical(id="left"):
                yield Static(id="totals")
                box = VerticalScroll(Static(id="verdict"), id="verdict-box")
                box.can_focus = False
                yield box
            detail = VerticalScroll(Static(id="detail"), id="detail-box")
            detail.can_focus = False
            yield detail
        yield Static("the keys below turn the knobs; ↓↑ pick an op; q quits", id="status")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.fit_layout(self.size.width, self.size.height)
        self.show()

    def on_resize(self, event) -> None:
        self.fit_layout(event.size.width, event.size.height)

    def fit_layout(self, width: int, height: int) -> None:
        """The panels' sizes for the terminal's: at 80×24 (a stock terminal) the table drops its kind column
        and the lower panels take fewer rows, so that the chart keeps some width and height; from 100×30 the
        layout designed for it; at 200×60 the lower panels grow with the screen."""
        narrow = width < 100
        table = self.query_one("#ops", OpsTable)
        table.compact = narrow
        table.styles.width = 57 - 13 if narrow else 57
        self.query_one("#left").styles.width = 44 if narrow else 54
        self.query_one("#lower").styles.height = max(8, min(13, height - 15)) if height < 40 else height // 3
        table.refresh()

    # --- the view ----------------------------------------------------------------------------------------------

    def show(self, only_selection: bool = False) -> None:
        """Bring every panel up to date with ``self.analysis`` and ``self.selected``."""
        start = time.perf_counter()
        a = self.analysis
        placements = ops_in_time_order(a)
        table = self.query_one("#ops", OpsTable)
        if not only_selection:
            self.order = [p.name for p in placements]
            if self.selected not in self.order:
                self.selected = self.order[0]
            self.query_one("#settings", Static).update(settings_line(self.knobs, a), layout=False)
            table.set_rows(placements, self.order.index(self.selected))
            self.query_one("#totals", Static).update(totals_text(a), layout=False)
            # A Text, not a str: Textual reads a str as markup, and the verdict names the user's model and GPU.
            self.query_one("#verdict", Static).update(Text("\n".join(verdict(a))))
        else:
            table.select(self.order.index(self.selected))
        self.query_one("#chart", RooflineChart).show(a, self.selected)
        self.query_one("#detail", Static).update(detail_text(a.placement(self.selected), a))
        self.update_seconds.append(time.perf_counter() - start)

    def status(self, message: str, error: bool = False) -> None:
        line = self.query_one("#status", Static)
        # Wrapped, not cut: the s key's confirmation (a path and a command) is longer than 120 columns (issue 19).
        line.update(Text(("error: " if error else "") + message, overflow="fold"))
        line.set_class(error, "error")

    def turn(self, change: Callable[[state.Knobs], state.Knobs], what: Callable[[state.Knobs], str]) -> None:
        """Apply one knob change; on a UserError keep the current view and say why in the status line."""
        before = self.analysis
        try:
            knobs = change(self.knobs)
            analysis = knobs.analyze()
        except UserError as err:
            self.status(str(err), error=True)
            return
        self.knobs, self.analysis = knobs, analysis
        self.show()
        unit = "per step" if knobs.phase == "decode" else "to first token" if knobs.phase == "prefill" else ""
        self.status(f"{what(knobs)}: {duration(before.totals.time_s)} → {duration(analysis.totals.time_s)} {unit}")

    # --- actions -----------------------------------------------------------------------------------------------

    def action_phase(self) -> None:
        self.turn(state.next_phase, lambda k: f"phase {k.phase}")

    def action_batch(self, factor: float) -> None:
        self.turn(lambda k: state.scale_batch(k, factor), lambda k: f"batch {k.batch:,}")

    def action_length(self, factor: float) -> None:
        self.turn(lambda k: state.scale_length(k, factor), lambda k: f"{k.length_name} {k.length:,}")

    def action_dtype(self) -> None:
        self.turn(state.next_dtype, lambda k: f"dtype {k.dtype}, KV cache {k.kv_dtype}")

    def action_attention(self) -> None:
        self.turn(state.toggle_attention, lambda k: f"{k.attention} attention")

    def action_model(self) -> None:
        self.turn(lambda k: state.next_model(k, self.models), lambda k: f"model {k.model.id}")

    def action_gpu(self) -> None:
        skipped: list[str] = []

        def change(k: state.Knobs) -> state.Knobs:
            knobs, passed = state.next_gpu(k, self.gpus)
            skipped.extend(passed)
            return knobs

        def what(k: state.Knobs) -> str:
            note = f" (skipped {', '.join(skipped)}: no {k.dtype} peak)" if skipped else ""
            return f"GPU {k.gpu.id}{note}"

        if len(self.gpus) < 2:
            self.status(f"{self.knobs.gpu.id} is the only GPU known: add files with ROOFLINECTL_HARDWARE_PATH",
                        error=True)
            return
        self.turn(change, what)

    def action_select(self, step: int) -> None:
        i = (self.order.index(self.selected) + step) % len(self.order)
        self.selected = self.order[i]
        self.show(only_selection=True)

    def action_save_yaml(self) -> None:
        try:
            path = state.save_workload(self.knobs, self.gpu_refs[self.knobs.gpu.id], self.out_dir)
        except UserError as err:
            self.status(str(err), error=True)
            return
        self.status(f"saved {path}; rooflinectl analyze {path} --gpu {self.gpu_refs[self.knobs.gpu.id]}")

    def action_save_chart(self) -> None:
        path = self.out_dir / state.workload_filename(self.knobs).replace(".yaml", ".png")
        self.status(f"drawing {path} …")
        self.run_worker(lambda: self._save_chart(self.analysis, path, self.knobs.calibrated), thread=True,
                        group="chart", exclusive=True)

    def _save_chart(self, a: Analysis, path: Path, calibrated: bool) -> None:
        """In a worker thread: matplotlib takes a second or two, the keys stay live meanwhile."""
        try:
            save_chart(a, path, calibrated)
        except UserError as err:
            self.call_from_thread(self.status, str(err), True)
            return
        self.call_from_thread(self.status, f"saved the chart to {path}")


def save_chart(a: Analysis, path: Path, calibrated: bool = False) -> Path:
    """Draw ``a``'s workload on its GPU to ``path`` through the plot package, imported only now (matplotlib)."""
    from ..plot.build import plot_workloads

    plot_workloads([a.workload], [a.gpu], path, calibrated=calibrated)
    return path
