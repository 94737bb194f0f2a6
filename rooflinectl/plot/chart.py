"""The roofline chart as plain data: what ``plot.build`` fills in and ``plot.draw`` draws, and their colours.

A leaf: it imports nothing of the plot package (and nothing heavy), so that building a chart and drawing one
depend on it, never on each other. Tests read a chart through these dataclasses; ``--json`` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import UserError
from ..files import check_writable, is_dir

FORMATS = (".png", ".svg", ".pdf")
STYLES = ("light", "dark")  # the slide a chart goes on: the dark style swaps ink and paper (plot.draw)


def check_style(style: str) -> None:
    """A chart style: one of ``STYLES``, else a one-line UserError."""
    if style not in STYLES:
        raise UserError(f"--style {style!r}: use {' or '.join(STYLES)}")

BOUND_COLORS = {"memory": "#0072B2", "compute": "#D55E00"}  # Okabe-Ito blue and vermillion: colour-blind safe
GPU_COLORS = ("#333333", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F3C8D")
GPU_MARKERS = ("o", "s", "^", "D", "v", "P")
MEASURED_COLOR = "#111111"

Bound = Literal["memory", "compute"]


@dataclass(frozen=True)
class Roof:
    """One roof line of one GPU. Memory roofs are y = value·x (slope 1 on log-log axes, value in bytes/s);
    compute roofs are y = value (slope 0, value in FLOP/s). The line is drawn from ``x_from`` to ``x_to``."""

    gpu: str
    kind: Literal["memory", "compute"]
    name: str  # "HBM", "L2", "SRAM", "bf16 tensor", "fp32 vector"
    value: float
    slope: float
    label: str
    x_from: float
    x_to: float

    def at(self, intensity: float) -> float:
        return self.value * intensity if self.kind == "memory" else self.value


@dataclass(frozen=True)
class Ridge:
    """Where the HBM roof meets the compute roof of the workload's data type."""

    gpu: str
    intensity: float  # FLOP/byte
    flops: float  # FLOP/s
    label: str


@dataclass(frozen=True)
class OpPoint:
    """One operation on one GPU (at one value of a sweep): exactly the engine's placement."""

    gpu: str
    op: str
    kind: str  # the op's kind (engine.count.op.OpKind: linear, attention, router, expert ...), as the engine gives it
    intensity: float
    flops: float  # attainable FLOP/s
    bound: Bound
    share: float  # of the step's predicted time
    value: int | None = None  # the swept field's value, None without a sweep


@dataclass(frozen=True)
class Trajectory:
    """One operation's points over a sweep, in the order of the values."""

    gpu: str
    op: str
    field: str
    points: tuple[OpPoint, ...]


@dataclass(frozen=True)
class Group:
    """What is drawn: ops of one GPU that share a point (or, in a sweep, every point) get one marker per value
    and one label. Each of its points is the placement of its op with the largest share, coloured by that op's
    bound and sized by the members' summed share."""

    gpu: str
    ops: tuple[str, ...]
    label: str
    points: tuple[OpPoint, ...]
    moves: bool  # a sweep changes its position (False: every value sits on one point)
    show_values: bool = False  # the swept field's values are written next to its points


@dataclass(frozen=True)
class MeasuredPoint:
    """A measured kernel at (flops/bytes, flops/time_s), with its fraction of the roof above it: both from the
    engine (``engine.roofline.measured_share``), ``roof_flops`` = min(peak, intensity × bandwidth) of the roof the
    record names."""

    gpu: str
    kernel: str
    op: str
    intensity: float
    flops: float
    roof_flops: float
    fraction: float
    label: str
    predicted: tuple[float, float] | None  # the engine's point for the same op on the same GPU


@dataclass(frozen=True)
class Label:
    """One label: the text, the ops it names, and the point it is placed next to (its marker's share sets the
    gap). Small groups close together share one label, and ops that sit in one column on several GPUs too."""

    text: str
    ops: tuple[str, ...]
    intensity: float
    flops: float
    share: float


@dataclass(frozen=True)
class LegendEntry:
    label: str
    kind: Literal["gpu", "bound", "share", "ridge", "sweep", "measured", "note"]  # note: text, no mark
    color: str
    marker: str | None = None
    linestyle: Literal["-"] | None = None  # GPUs' roofs and a sweep's trajectories are solid lines


@dataclass(frozen=True)
class Panel:
    title: str
    phase: str
    roofs: tuple[Roof, ...]
    ridges: tuple[Ridge, ...]
    points: tuple[OpPoint, ...]  # every op with FLOPs, every GPU, every value of a sweep
    trajectories: tuple[Trajectory, ...]  # a sweep only: one per op and GPU
    groups: tuple[Group, ...]
    labels: tuple[Label, ...]
    measured: tuple[MeasuredPoint, ...]
    footnotes: tuple[str, ...]
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    sweep_field: str | None = None
    values: tuple[int, ...] = ()


@dataclass(frozen=True)
class Chart:
    title: str
    panels: tuple[Panel, ...]
    legend: tuple[LegendEntry, ...]
    gpus: tuple[str, ...]  # GPU ids, in the order given (colours and markers follow it)


def check_output(path: Path, name: str = "roofline.png") -> None:
    """Before any work: the extension picks the format (anything else is a UserError), and the folder exists.
    ``name``: the command's default file, which a folder's message suggests in it."""
    path = Path(path)
    if is_dir(path):  # "-o ." or "-o charts": a folder, not a file with no extension
        raise UserError(f"-o {path}: cannot write: it is a folder; give the chart's file, e.g. {path / name}")
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"{path}: unknown image format '{path.suffix or '(none)'}': use {', '.join(FORMATS)}")
    check_writable(path, "-o")  # no folder, link, FIFO or device; the folder exists and may be written
