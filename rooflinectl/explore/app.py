"""The Textual app of ``rooflinectl explore``: keys turn the knobs, every panel follows at once.

Layout at 100×30 (the smallest size it is designed for):

    settings: phase, model, batch, length, dtype, attention, GPU                         1 row
    ops table, sorted by time (the selected op highlighted) │ roofline chart             the rest
    verdict (scrolls)                                       │ totals, the selected op    11 rows
    status line (what the last key did, or the error it met)                             1 row
    footer: the keys                                                                      1 row

Every number is the engine's: ``roofline.analyze`` for the table, chart and totals, ``render.verdict`` for the
verdict, the op's own Placement for its explanation. The app formats; it computes nothing. The panels it lays out
(the ops table, the key bar, the chart, the text of the settings, totals and op) are ``panels``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from ..engine.parallel import Layout
from ..engine.roofline import Analysis
from ..errors import UserError
from ..render.verdict import verdict
from ..specs.hardware import GPU, list_gpus
from ..specs.model import Model
from ..specs.models import list_models
from ..specs.workload import Workload
from ..units import duration
from . import state
from .panels import (
    KeyBar,
    OpsTable,
    RooflineChart,
    detail_text,
    ops_in_time_order,
    settings_line,
    totals_text,
)

_BATCH = Binding.Group("batch ×2/÷2", compact=True)
_LENGTH = Binding.Group("length ×2/÷2", compact=True)
_OP = Binding.Group("op", compact=True)


class ExploreApp(App[None]):
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
        layout: Layout = Layout(),
        gpu_ref: str | None = None,
        out_dir: Path = Path("."),
        models: list[Model] | None = None,
        gpus: list[GPU] | None = None,
    ):
        super().__init__()
        self.knobs = state.Knobs.from_workload(workload, gpu, calibrated, layout)
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

    def on_resize(self, event: events.Resize) -> None:
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
        # Wrapped, not cut: the s key's confirmation (a path and a command) is longer than 120 columns.
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
        self.status(f"saved {path}; rooflinectl analyze {path} --gpu {self.gpu_refs[self.knobs.gpu.id]}"
                    f"{state.layout_flags(self.knobs.layout)}")

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
