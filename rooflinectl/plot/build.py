"""Roofline charts of the engine's results, in two steps so that tests can check what a chart says.

``build_chart`` turns ``roofline.Analysis`` objects into a plain description: the roofs with their values and
slopes, each GPU's ridge point, one point per operation (intensity, attainable FLOP/s, bound, share of the step),
one trajectory per operation for a sweep, measured points with their fraction of the roof above them, the legend
entries and the footnotes. It computes nothing but layout: every number is read from the engine's results.
``draw`` renders that description with matplotlib (``plot_draw``: imported lazily, on the Agg backend, so it runs
headless), placing labels where they overlap nothing. Only this module's data is drawn.

A chart has one panel per workload (``rooflinectl plot`` with no workload draws decode and prefill side by side);
a panel holds every GPU given, each with its own roofs colour and marker shape.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..engine.op import Op
from ..engine.roofline import Analysis, Placement, analyze, place, sweep
from ..errors import UserError, format_validation_error
from ..specs.hardware import GPU
from ..specs.load import read_json
from ..specs.workload import Workload

FORMATS = (".png", ".svg", ".pdf")
BOUND_COLORS = {"memory": "#0072B2", "compute": "#D55E00"}  # Okabe-Ito blue and vermillion: colour-blind safe
GPU_COLORS = ("#333333", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F3C8D")
GPU_MARKERS = ("o", "s", "^", "D", "v", "P")
MEASURED_COLOR = "#111111"
# Points closer than this many decades on both axes (7%) share one marker and one label: at the chart's scale
# (about an inch per decade) that is under 2 points, well inside a marker.
GROUP_DECADES = 0.03
# A marker covers a smaller one when it is this much bigger (share of the step) and this close (decades): about
# the radius of a marker of 5% share at the chart's scale.
COVER_SHARE = 0.05
COVER_DECADES = 0.08
# Groups under 2% of the step within 0.1 decade (26%) of one another share one label.
SMALL_SHARE = 0.02
CLUSTER_DECADES = 0.1
# A measured point is tied to the prediction for its op only when their intensities are within 2× (a shape
# like the workload's): a kernel timed at another shape sits elsewhere, and a line across the chart would mislead.
PAIR_DECADES = math.log10(2)
FIELD_NAMES = {"batch": "batch", "context": "context", "seq_len": "seq_len"}

Bound = Literal["memory", "compute"]


# --- the chart's data ----------------------------------------------------------------------------------------


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
    """A measured kernel at (flops/bytes, flops/time_s), with its fraction of the roof above it (the roof of the
    engine op of the same name: ``roof_flops`` = min(peak, intensity × bandwidth))."""

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
    kind: Literal["gpu", "bound", "share", "ridge", "sweep", "measured"]
    color: str
    marker: str | None = None
    linestyle: str | None = None


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


# --- measured records ----------------------------------------------------------------------------------------


class _Loose(BaseModel):
    # The measure record carries more than the chart needs (versions, spread, launches): keep what we read.
    model_config = ConfigDict(extra="ignore", frozen=True)


class MeasuredGPU(_Loose):
    name: str = Field(min_length=1)  # as the device reports it: "NVIDIA H100 80GB HBM3"
    spec: str | None = None  # the id of the hardware spec the run was compared against, when it names one


class MeasuredRecord(_Loose):
    kernel: str = Field(min_length=1)
    op: str = Field(min_length=1)  # the engine's name for the operation
    shape: list = Field(default_factory=list)
    dtype: str | None = None
    flops: float = Field(ge=0)
    bytes: float = Field(gt=0)
    time_s: float | None = Field(default=None, gt=0)  # median; None when not timed (failed, or the interpreter)
    unit: Literal["tensor", "vector"] | None = None  # the compute roof the engine places the op under …
    op_dtype: str | None = None  # … at this data type
    op_kind: str | None = None


class MeasuredFile(_Loose):
    gpu: MeasuredGPU
    records: list[MeasuredRecord] = Field(min_length=1)

    def matches(self, gpu: GPU) -> bool:
        """Measured on ``gpu``: a name or id of one contains one of the other, case-insensitively ('NVIDIA H200'
        and 'NVIDIA H200 SXM 141GB'), or the run names ``gpu``'s spec id."""
        mine = [self.gpu.name.strip().lower()]
        theirs = [gpu.name.strip().lower(), gpu.id.lower()]
        if self.gpu.spec and self.gpu.spec.strip().lower() == gpu.id.lower():
            return True
        return any(a and b and (a in b or b in a) for a in mine for b in theirs)


def load_measured(path: Path) -> MeasuredFile:
    """Read the JSON that ``rooflinectl measure --save`` writes; a malformed file is a one-line UserError."""
    data = read_json(path, "a JSON object with 'gpu' and 'records'")
    try:
        measured = MeasuredFile.model_validate(data)
    except ValidationError as err:
        raise UserError(format_validation_error(str(path), err)) from None
    if all(r.time_s is None for r in measured.records):
        raise UserError(f"{path}: no record has a time (each failed its check, or ran in the Triton interpreter): "
                        f"nothing to draw")
    return measured


# --- building the chart --------------------------------------------------------------------------------------


def build_chart(
    workloads: Sequence[Workload],
    gpus: Sequence[GPU],
    sweep_field: str | None = None,
    values: Sequence[int] | None = None,
    measured: MeasuredFile | None = None,
    measured_source: str = "measured file",
    calibrated: bool = False,
) -> Chart:
    """One panel per workload, every GPU in each; a sweep of ``sweep_field`` over ``values`` draws trajectories."""
    if not workloads:
        raise UserError("nothing to plot: give a workload")
    if not gpus:
        raise UserError("nothing to plot: give a GPU")
    if len(gpus) > len(GPU_COLORS):
        raise UserError(f"at most {len(GPU_COLORS)} GPUs fit on one chart, got {len(gpus)}")
    ids = [g.id for g in gpus]
    if len(set(ids)) != len(ids):
        raise UserError(f"a GPU is given twice: {', '.join(ids)}")
    if measured is not None and not any(measured.matches(g) for g in gpus):
        plotted = ", ".join(f"{g.id} ({g.name})" for g in gpus)
        raise UserError(
            f"{measured_source} was measured on '{measured.gpu.name}', not on the GPU plotted: {plotted}; "
            f"pass --gpu for the GPU it was measured on"
        )
    panels = []
    for w in workloads:
        if sweep_field:
            runs = [sweep(w, g, sweep_field, list(values or ()), calibrated) for g in gpus]
        else:
            runs = [[analyze(w, g, calibrated)] for g in gpus]
        panels.append(build_panel(runs, sweep_field, measured))
    return Chart(
        title=chart_title(workloads[0], gpus, calibrated),
        panels=tuple(panels),
        legend=legend_entries(gpus, sweep_field, [v for v in values or ()], measured is not None, calibrated,
                              ridge_dtype=workloads[0].dtype),
        gpus=tuple(ids),
    )


def chart_title(w: Workload, gpus: Sequence[GPU], calibrated: bool) -> str:
    on = " vs ".join(g.name for g in gpus)
    kv = f", KV cache {w.kv_dtype}" if w.kv_dtype != w.dtype else ""
    fused = f", fused {'+'.join(w.fused)}" if w.fused else ""
    roofs = " (measured roofs)" if calibrated else ""
    return f"{w.model.name} on {on}{roofs} · {w.dtype}{kv} · {w.attention} attention{fused}"


def panel_title(w: Workload, sweep_field: str | None, values: Sequence[int]) -> str:
    def size(field: str, current: int) -> str:
        if field == sweep_field:
            return f"{FIELD_NAMES[field]} {', '.join(str(v) for v in values)}"
        return f"{FIELD_NAMES[field]} {current}"

    length = size("context", w.kv_len) if w.phase == "decode" else size("seq_len", w.tokens_per_seq)
    return f"{w.phase} · {size('batch', w.batch)} · {length}"


def build_panel(
    runs: Sequence[Sequence[Analysis]],
    sweep_field: str | None = None,
    measured: MeasuredFile | None = None,
) -> Panel:
    """``runs[i]`` are GPU i's analyses: one, or one per value of ``sweep_field``, in the order of the values."""
    first = runs[0][0]
    values = tuple(_field_value(a.workload, sweep_field) for a in runs[0]) if sweep_field else ()
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
        for a in analyses:
            value = _field_value(a.workload, sweep_field) if sweep_field else None
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
        groups = _mark_values_group(groups)

    measured_points, measured_notes = _measured_points(runs, measured, points)
    for analyses in runs:
        roofs += roof_lines(analyses[0])
    # Intensity 1 is always on the chart, so that the memory roofs show a stretch long enough to read.
    xs = [p.intensity for p in points] + [r.intensity for r in ridges] + [m.intensity for m in measured_points]
    xs.append(1.0)
    ys = [p.flops for p in points] + [m.flops for m in measured_points] + [r.at(1.0) for r in roofs if r.name == "HBM"]
    xlim, ylim = _limits(xs, ys, [r.value for r in roofs if r.kind == "compute"])
    roofs = [_span(r, roofs, xlim, ylim) for r in roofs]

    footnotes = []
    if off_chart:
        footnotes.append(f"Not drawn: {', '.join(off_chart)} (0 FLOPs: pure data movement has no place on a log "
                         f"intensity axis).")
    footnotes += measured_notes
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


def _field_value(w: Workload, field: str | None) -> int:
    return {"batch": w.batch, "context": w.kv_len, "seq_len": w.tokens_per_seq}[field]


def op_point(gpu: str, p: Placement, value: int | None = None) -> OpPoint:
    return OpPoint(gpu=gpu, op=p.name, intensity=p.intensity, flops=p.attainable_flops, bound=p.bound,
                   share=p.share, value=value)


def roof_lines(a: Analysis) -> list[Roof]:
    """The roofs of one analysis' GPU: HBM, L2 and SRAM where known; the compute roofs of the data types in play
    (the workload's data type on its unit, and every (unit, dtype) an op of the step is placed under: fp32 vector
    for the elementwise work). Spans are set later, once the axes' limits are known."""
    r, gpu = a.roofs, a.gpu
    derived = gpu.memory.derived
    measured = " measured" if r.label == "measured" else ""
    out = [Roof(gpu.id, "memory", "HBM", r.bandwidth, 1.0, f"HBM {_rate(r.bandwidth, 'B/s')}{measured}",
                0, 0)]
    for name, gbps, field in (("L2", r.l2_bandwidth_gbps, "l2_bandwidth_gbps"),
                              ("SRAM", r.smem_bandwidth_gbps, "smem_bandwidth_gbps")):
        if gbps is None:
            continue
        how = derived.get(field, "")
        note = " (estimated)" if how.startswith("estimated") else " (derived)" if how else ""
        out.append(Roof(gpu.id, "memory", name, gbps * 1e9, 1.0, f"{name} {_rate(gbps * 1e9, 'B/s')}{note}",
                        0, 0))
    in_play = [(a.compute_unit, a.workload.dtype)]
    for p in a.placements:
        if (p.op.unit, p.op.dtype) not in in_play:
            in_play.append((p.op.unit, p.op.dtype))
    for unit, dtype in sorted(in_play, key=lambda ud: -r.peak(ud[1], ud[0])):
        peak = r.peak(dtype, unit)
        unit_name = "TOPS" if dtype == "int8" else "FLOP/s"
        out.append(Roof(gpu.id, "compute", f"{dtype} {unit}", peak, 0.0,
                        f"{dtype} {unit} {_rate(peak, unit_name)}{measured}", 0, 0))
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


def _limits(xs: list[float], ys: list[float], peaks: list[float]) -> tuple[tuple[float, float], tuple[float, float]]:
    """Whole decades on x around every point and ridge; y from under the lowest point to above the highest roof."""
    x_lo = 10 ** math.floor(math.log10(min(xs) / 1.5))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 3))
    y_lo = 10 ** math.floor(math.log10(min(ys) / 1.5))
    y_hi = max(peaks) * 4
    return (x_lo, x_hi), (y_lo, y_hi)


def _rate(x: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= factor:
            v = x / factor
            return f"{v:,.0f} {prefix}{unit}" if v >= 100 else f"{v:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


# --- grouping ops that share a point, and their labels ------------------------------------------------------


def _close(a: OpPoint, b: OpPoint) -> bool:
    return (a.bound == b.bound
            and abs(math.log10(a.intensity / b.intensity)) < GROUP_DECADES
            and abs(math.log10(a.flops / b.flops)) < GROUP_DECADES)


def group_ops(gpu: str, per_op: dict[str, list[OpPoint]]) -> list[Group]:
    """Ops whose points coincide (at every value of a sweep) form one group. Greedy from the largest share:
    each op joins the first group whose leading op is close to it at every value."""
    order = list(per_op)
    by_share = sorted(order, key=lambda op: -max(p.share for p in per_op[op]))
    members: list[list[str]] = []
    for op in by_share:
        for m in members:
            lead = per_op[m[0]]
            if all(_close(a, b) for a, b in zip(lead, per_op[op])):
                m.append(op)
                break
        else:
            members.append([op])
    groups = []
    for m in members:
        ops = tuple(sorted(m, key=order.index))
        lead = per_op[m[0]]
        points = tuple(replace(p, share=sum(per_op[op][i].share for op in ops)) for i, p in enumerate(lead))
        moves = any(not _close(points[0], p) for p in points[1:])
        groups.append(Group(gpu=gpu, ops=ops, label=join_names(ops), points=points, moves=moves))
    return groups


def _mark_values_group(groups: list[Group]) -> list[Group]:
    """Write the swept values next to the moving group of the first GPU with the largest share."""
    first_gpu = groups[0].gpu if groups else None
    moving = [g for g in groups if g.moves and g.gpu == first_gpu]
    if not moving:
        return groups
    best = max(moving, key=lambda g: max(p.share for p in g.points))
    return [replace(g, show_values=True) if g is best else g for g in groups]


def join_names(names: Sequence[str]) -> str:
    """['q_proj', 'k_proj', 'v_proj', 'o_proj', 'lm_head'] -> 'q/k/v/o_proj, lm_head': names that end alike
    share their ending (and a common fused prefix such as 'attn_norm+')."""
    by_suffix: dict[str, list[str]] = {}
    for name in names:
        head, sep, tail = name.rpartition("_")
        key = sep + tail if head else name
        by_suffix.setdefault(key, []).append(name)
    parts = []
    for suffix, group in by_suffix.items():
        if len(group) == 1:
            parts.append(group[0])
            continue
        heads = [n[: -len(suffix)] for n in group]
        common = _common_prefix(heads)
        if any("+" in h[len(common):] for h in heads):  # 'attn_norm+q' and 'o' share no readable prefix
            parts.extend(group)
            continue
        parts.append(common + "/".join(h[len(common):] for h in heads) + suffix)
    return ", ".join(parts)


def _common_prefix(heads: list[str]) -> str:
    """The longest common prefix that ends at a '+' (a fused op's leading part), or ''."""
    prefix = heads[0]
    for h in heads[1:]:
        while not h.startswith(prefix):
            prefix = prefix[:-1]
    cut = prefix.rfind("+")
    return prefix[: cut + 1] if cut >= 0 else ""


def group_label(g: Group, field: str | None) -> str:
    """A group's label: its names, and its share of the step (without a sweep), or that it stays put (sweep)."""
    if field is None:
        share = g.points[0].share
        return f"{g.label} {share:.0%}" if share >= 0.005 else g.label
    if not g.moves and len(g.points) > 1:
        return f"{g.label} (every {FIELD_NAMES[field]})"
    return g.label


def op_labels(groups: Sequence[Group], field: str | None) -> list[Label]:
    """One label per group, the most important first. The same ops on several GPUs sit in one column (one
    intensity): they get one label, by the highest point. Groups under SMALL_SHARE that sit within
    CLUSTER_DECADES of one another share a label (elementwise ops crowd around 1 FLOP/byte)."""
    first_gpu = groups[0].gpu if groups else None
    order = sorted(groups, key=lambda g: (g.gpu != first_gpu, -max(p.share for p in g.points)))
    items: list[tuple[list[str], list[str], OpPoint, float]] = []  # texts, ops, anchor, importance
    seen: set[tuple[str, ...]] = set()
    for g in order:
        if g.ops in seen:
            continue
        seen.add(g.ops)
        anchor = max((_anchor(h, groups) for h in groups if h.ops == g.ops), key=lambda p: p.flops)
        importance = max(p.share for h in groups if h.ops == g.ops for p in h.points)
        for texts, ops, lead, weight in items:
            if (importance < SMALL_SHARE and weight < SMALL_SHARE
                    and abs(math.log10(lead.intensity / anchor.intensity)) < CLUSTER_DECADES
                    and abs(math.log10(lead.flops / anchor.flops)) < CLUSTER_DECADES):
                texts.append(group_label(g, field))
                ops.extend(g.ops)
                break
        else:
            items.append(([group_label(g, field)], list(g.ops), anchor, importance))
    labels = []
    for texts, ops, anchor, _ in items:
        one_line = ", ".join(texts)
        labels.append(Label(one_line if len(one_line) <= 40 else "\n".join(texts), tuple(ops), anchor.intensity,
                            anchor.flops, anchor.share))
    return labels


def _anchor(g: Group, groups: Sequence[Group]) -> OpPoint:
    """Where a group's label goes: its last point (the end of a trajectory), unless a bigger marker of another
    group covers it there, as a norm's last point can sit on the projections' first one; then an earlier point."""
    def covered(p: OpPoint) -> bool:
        return any(h is not g and h.gpu == g.gpu and q.share > p.share + COVER_SHARE
                   and abs(math.log10(q.intensity / p.intensity)) < COVER_DECADES
                   and abs(math.log10(q.flops / p.flops)) < COVER_DECADES
                   for h in groups for q in h.points)

    return next((p for p in reversed(g.points) if not covered(p)), g.points[-1])


# --- measured points -----------------------------------------------------------------------------------------


def _measured_points(
    runs: Sequence[Sequence[Analysis]], measured: MeasuredFile | None, points: Sequence[OpPoint]
) -> tuple[list[MeasuredPoint], list[str]]:
    """Each timed record at (flops/bytes, flops/time_s) under the roof its op is placed under: the record's own
    unit and data type when it gives them, else those of the engine's op of the same name in this step."""
    if measured is None:
        return [], []
    analyses = next((a for a in runs if measured.matches(a[0].gpu)), None)
    if analyses is None:
        return [], []
    a = analyses[0]
    gpu = a.gpu.id
    out: list[MeasuredPoint] = []
    skipped: dict[str, list[str]] = {}
    for r in measured.records:
        if r.time_s is None:
            skipped.setdefault("not timed", []).append(r.kernel)
            continue
        if r.flops <= 0:
            skipped.setdefault("0 FLOPs: no place on a log axis", []).append(r.kernel)
            continue
        if r.unit and r.op_dtype:
            roofed = Op(name=r.op, kind=r.op_kind or "matmul", flops=r.flops, bytes=r.bytes, unit=r.unit, dtype=r.op_dtype, reads="",
                        writes="", computes="")
        else:
            try:
                roofed = replace(a.placement(engine_op_name(r.op, a)).op, flops=r.flops, bytes=r.bytes, count=1)
            except KeyError:
                skipped.setdefault(f"no op of that name in this {a.workload.phase} step, and the record names "
                                   f"no roof", []).append(f"{r.kernel} ({r.op})")
                continue
        # The engine places the measured count under that roof: attainable = min(peak, intensity × bandwidth).
        probe = place(roofed, a.roofs)
        achieved = r.flops / r.time_s
        same_op = [q for q in points if q.gpu == gpu and q.op == engine_op_name(r.op, a)]
        predicted = None
        if same_op:
            near = min(same_op, key=lambda q: abs(math.log10(q.intensity / probe.intensity)))
            if abs(math.log10(near.intensity / probe.intensity)) < PAIR_DECADES:
                predicted = (near.intensity, near.flops)
        fraction = achieved / probe.attainable_flops
        out.append(MeasuredPoint(gpu=gpu, kernel=r.kernel, op=r.op, intensity=probe.intensity, flops=achieved,
                                 roof_flops=probe.attainable_flops, fraction=fraction,
                                 label=measured_label(r, fraction), predicted=predicted))
    notes = [f"Measured, not drawn: {', '.join(names)} ({why})." for why, names in skipped.items()]
    return out, notes


def measured_label(r: MeasuredRecord, fraction: float) -> str:
    """'matmul 8x4096x14336 33%': the kernel, its shape (several shapes of one kernel are usual), the fraction."""
    shape = "x".join(str(n) for n in r.shape)
    return f"{r.kernel} {shape + ' ' if shape else ''}{fraction:.0%}"


def engine_op_name(record_op: str, a: Analysis) -> str:
    """The engine op a record measures: its ``op`` exactly, else its first word ('softmax 4096x16384', as the
    measure harness names a shape, is the engine's 'softmax')."""
    names = {p.name for p in a.placements}
    if record_op in names:
        return record_op
    first = record_op.split()[0] if record_op.split() else record_op
    return first if first in names else record_op


# --- legend --------------------------------------------------------------------------------------------------


def legend_entries(
    gpus: Sequence[GPU],
    sweep_field: str | None,
    values: Sequence[int],
    measured: bool,
    calibrated: bool,
    ridge_dtype: str,
) -> tuple[LegendEntry, ...]:
    entries = [
        LegendEntry(f"{g.name} ({g.id}){' measured roofs' if calibrated else ''}", "gpu", GPU_COLORS[i],
                    GPU_MARKERS[i], "-")
        for i, g in enumerate(gpus)
    ]
    entries += [
        LegendEntry("memory-bound op", "bound", BOUND_COLORS["memory"], "o"),
        LegendEntry("compute-bound op", "bound", BOUND_COLORS["compute"], "o"),
        LegendEntry("marker area ∝ share of the step's time", "share", "#999999", "o"),
        LegendEntry(f"ridge: HBM meets the {ridge_dtype} roof", "ridge", "#333333", "D"),
    ]
    if sweep_field:
        entries.append(LegendEntry(f"{FIELD_NAMES[sweep_field]} {' → '.join(str(v) for v in values)}", "sweep",
                                   "#555555", None, "-"))
    if measured:
        entries.append(LegendEntry("measured (% of the roof above it)", "measured", MEASURED_COLOR, "X"))
    return tuple(entries)


def chart_json(chart: Chart, path: Path | None = None) -> dict:
    data = asdict(chart)
    if path is not None:
        data = {"path": str(path), **data}
    return data


# --- output --------------------------------------------------------------------------------------------------


def check_output(path: Path) -> None:
    """Before any work: the extension picks the format (anything else is a UserError), and the folder exists."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise UserError(f"{path}: unknown image format '{path.suffix or '(none)'}': use {', '.join(FORMATS)}")
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise UserError(f"cannot write {path}: no such folder {path.parent}")


def draw(chart: Chart, path: Path | None = None):
    """Render ``chart`` with matplotlib (``plot_draw``); write it to ``path`` when given. Returns the figure."""
    from .draw import draw_chart

    return draw_chart(chart, path)


def plot_workloads(
    workloads: Sequence[Workload],
    gpus: Sequence[GPU],
    path: Path,
    sweep_field: str | None = None,
    values: Sequence[int] | None = None,
    measured_path: Path | None = None,
    calibrated: bool = False,
) -> Chart:
    """Build the chart of ``workloads`` on ``gpus`` and write it to ``path``: what ``rooflinectl plot`` does."""
    check_output(path)
    measured = load_measured(measured_path) if measured_path is not None else None
    chart = build_chart(workloads, gpus, sweep_field, values, measured, str(measured_path), calibrated)
    fig = draw(chart, path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return chart
