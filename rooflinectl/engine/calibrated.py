"""The calibrated model of where time goes: each op's time read from measured probes of its class. Pure, no torch.

The roofline's time, t_roof = max(bytes / bandwidth, FLOPs / peak) under the calibrated roofs (the measured
copy bandwidth and matmul peaks: ``GPU.roofs(calibrated=True)``), is what an op would take at the ceilings.
Measured on the H200 (docs/performance.md, 2026-12-03), real kernels fall short of it by an amount that
depends on their class and size: an elementwise c = a + b runs at 17% of the copy ceiling at 1.6 MB, 43% at
6.3 MB and 73% at 25 MB; a decode GEMV 1×4096×4096 bf16 at 57%; SDPA decode at 33% for batch 1 × 4,096
positions and 100% for 16 × 16,384. So ``calibrate`` runs probes of each class (:data:`OpClass`) at sizes
across the range and stores, per (class, bound), the curve of (t_roof, measured) points, and the launch floor
(the time of a kernel that does almost nothing).

An op's time (:func:`curve_time`), with (r_i, m_i) its (class, bound) curve's points in rising r:

- inside the curve, r_i ≤ t_roof ≤ r_(i+1): linear interpolation, m_i + (m_(i+1) − m_i)·(t_roof − r_i)/(r_(i+1) − r_i);
- beyond an end point (r, m): the end segment's line carried on, t = m + s·(t_roof − r), with its slope s kept
  between 1 and the point's ratio m / r: s ≥ 1 because no kernel gains on the roof at the margin (each byte or FLOP
  more costs at least its roofline time), s ≤ m / r so that the fixed cost m − s·r is never negative; a curve of
  one point has no segment, and s is its ratio (t = t_roof · m / r);
- never below the launch floor.

Why linear in (t_roof, t) and not in logarithms: a kernel's time is close to a fixed launch cost plus its
roofline time over an efficiency (the latency-bandwidth model), a straight line in those axes, which linear
interpolation follows exactly between two probes and a log-log one does not. On the H200's three elementwise
probes, the middle one (6.3 MB, 2¹⁹ fp32 elements a tensor: 1.482 µs at the 4,245.5 GB/s ceiling, 3.4
measured) read from the other two (1.6 MB: 0.370 → 2.2 µs; 25 MB: 5.928 → 8.1 µs) is 3.38 µs linearly (0.6%
off) and 4.22 µs in logarithms (24% off); the three lie on 1.82 µs + t_roof / 0.943 to within 0.5% (a
least-squares line).

An op whose (class, bound) has no curve is read from the other bound's curve of its class, and where its class has
none, it takes t_roof + the launch floor; either way the op says so (``CurveTime.note``). A collective has no
class and keeps its measured-collective timing (engine/parallel/); the op's bound and intensity are always the
roofline's: the model changes its time only.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..specs.hardware import Roofs
from ..specs.measured import OpClass, OpCurve, OpModel, OpPoint
from .count.op import Op, OpKind
from .placement import Placement, place

Bound = Literal["memory", "compute"]

# Each op kind's class (engine.count.op.OpKind); an elementwise op's is its ``Op.elementwise`` where it has one;
# communication has none.
OP_CLASS: dict[OpKind, OpClass] = {
    "linear": "gemm", "matmul": "gemm", "expert": "gemm", "router": "gemm",
    "attention": "attention",
    # A recurrent core is a per-sequence kernel over its state as attention is over its cache; a conv streams its
    # input once, as the memory-bound elementwise kernels do.
    "recurrent": "attention", "conv": "memory",
    # The sparse indexer scores each query against a per-sequence key cache, as attention does.
    "indexer": "attention",
    "norm": "norm", "elementwise": "memory", "gather": "gather", "copy": "copy",
}
# Where a memory-bound class has no curve, the residual add's: the simplest kernel that reads its inputs and writes
# its output once (the others' curves lie above it: they launch more kernels or reduce).
FALLBACK_CLASS: dict[OpClass, OpClass] = {c: "residual" for c in ("norm", "rope", "activation", "gather", "copy",
                                                                  "memory")}


def op_class(op: Op) -> OpClass | None:
    """The class whose curve times ``op``: its ``elementwise`` operation for an elementwise op that names one,
    else :data:`OP_CLASS` of its kind; None for a collective."""
    if op.kind == "elementwise" and op.elementwise is not None:
        return op.elementwise
    return OP_CLASS.get(op.kind)


Limit = Literal["memory", "compute", "launch"]


@dataclass(frozen=True)
class CurveTime:
    """One instance's time by the model, the curve it was read from (None: t_roof + the launch floor), a note
    when that curve is not the op's own (class, bound) curve, and what set the time: ``launch`` where the launch
    floor is the time, else the bound of the curve read (of the roofline where none was)."""

    time_s: float
    curve: OpCurve | None
    note: str | None
    limit: Limit

    def describe(self) -> str:
        """In words: which curve gave the time, or why none did."""
        if self.curve is None:
            assert self.note is not None
            return self.note
        n = len(self.curve.points)
        used = f"the calibrated {self.curve.op_class} {self.curve.bound}-bound curve ({n} point{'s' if n > 1 else ''})"
        return f"{used}: {self.note}" if self.note else used


def _slope(a: OpPoint, b: OpPoint, end: OpPoint) -> float:
    """The end segment's slope, kept between 1 and the end point's ratio measured / roof (see the module's doc)."""
    slope = (b.measured_s - a.measured_s) / (b.roof_s - a.roof_s)
    return min(max(slope, 1.0), end.measured_s / end.roof_s)


def read_curve(points: Sequence[OpPoint], roof_s: float) -> float:
    """The curve's time at ``roof_s`` before the launch floor: interpolated inside, carried on beyond its ends."""
    first, last = points[0], points[-1]
    if len(points) == 1:
        return roof_s * first.measured_s / first.roof_s
    if roof_s < first.roof_s:
        return first.measured_s - _slope(first, points[1], first) * (first.roof_s - roof_s)
    if roof_s > last.roof_s:
        return last.measured_s + _slope(points[-2], last, last) * (roof_s - last.roof_s)
    for a, b in zip(points, points[1:], strict=False):
        if roof_s <= b.roof_s:
            return a.measured_s + (b.measured_s - a.measured_s) * (roof_s - a.roof_s) / (b.roof_s - a.roof_s)
    raise AssertionError("unreachable: roof_s lies inside the curve")


def curve_time(cls: OpClass, bound: Bound, roof_s: float, model: OpModel) -> CurveTime:
    """One instance's time for an op of class ``cls``, bound by ``bound``, whose roofline time is ``roof_s``: its
    own (class, bound) curve, else its class's other bound, else the same of :data:`FALLBACK_CLASS`, else the
    roofline time plus the launch floor; a note says which where it is not the op's own curve."""
    other: Bound = "compute" if bound == "memory" else "memory"
    tries: list[tuple[OpClass, Bound]] = [(cls, bound), (cls, other)]
    if cls in FALLBACK_CLASS:
        tries += [(FALLBACK_CLASS[cls], bound), (FALLBACK_CLASS[cls], other)]
    for i, (c, b) in enumerate(tries):
        curve = model.curve(c, b)
        if curve is None:
            continue
        note = None if i == 0 else (f"no {bound}-bound curve for {cls}, so its {other}-bound one" if c == cls
                                    else f"no curve for {cls}, so the {c} {b}-bound one")
        read = read_curve(curve.points, roof_s)
        if read <= model.launch_floor_s:
            return CurveTime(model.launch_floor_s, curve, note, "launch")
        return CurveTime(read, curve, note, curve.bound)
    return CurveTime(roof_s + model.launch_floor_s, None,
                     f"no calibrated curve for {cls}: roofline time plus the launch floor", bound)


def _bound(p: Placement) -> Bound:
    return "compute" if p.bound == "compute" else "memory"


def predict_time(op: Op, model: OpModel, roofs: Roofs) -> tuple[float, str | None]:
    """Seconds for ONE instance of ``op`` by the model, under the calibrated ``roofs`` its curves were measured
    under, and a note when it fell back (no curve of its own class and bound). A collective is a ValueError: it
    has no class (engine.placement.place times it)."""
    cls = op_class(op)
    if cls is None:
        raise ValueError(f"op {op.name} ({op.kind}) has no class of the calibrated model")
    p = place(op, roofs)
    t = curve_time(cls, _bound(p), p.roofline_time_s, model)
    return t.time_s, t.note


def timed_by_model(p: Placement, model: OpModel) -> Placement:
    """``p`` with its time read from ``model`` (:func:`curve_time` of the placement's own roofline time and bound,
    as :func:`predict_time`), and which curve gave it in words; a collective is returned as it is (no class: its
    measured-collective timing)."""
    cls = op_class(p.op)
    if cls is None:
        return p
    t = curve_time(cls, _bound(p), p.roofline_time_s, model)
    return replace(p, model_time_s=t.time_s, time_model=t.describe(), time_note=t.note, model_limit=t.limit)


def fit(samples: Sequence[tuple[Op, float, str]], roofs: Roofs, launch_floor_s: float, grid: str,
        timer: str) -> OpModel:
    """The model from probes: each sample is (the engine op a probe ran, its measured median in s, its label).

    Each op is placed under ``roofs`` (the calibrated roofs) for its roofline time and bound; the points are grouped
    by (class, bound), sorted by roofline time, and probes of equal roofline time merged into one point, the median
    of their measured times (labels joined with " = "). Nothing is dropped: an op with no class (a collective) or a
    time that is not positive is a ValueError."""
    groups: dict[tuple[OpClass, Bound], dict[float, list[tuple[float, str]]]] = {}
    for op, measured_s, label in samples:
        cls = op_class(op)
        if cls is None:
            raise ValueError(f"probe {label!r}: op {op.name} ({op.kind}) has no class of the calibrated model")
        if not measured_s > 0:
            raise ValueError(f"probe {label!r}: measured time {measured_s} s is not positive")
        p = place(op, roofs)
        groups.setdefault((cls, _bound(p)), {}).setdefault(p.roofline_time_s, []).append((measured_s, label))
    curves = [
        OpCurve(op_class=cls, bound=bound, points=[
            OpPoint(label=" = ".join(label for _, label in runs), roof_s=roof_s,
                    measured_s=statistics.median(m for m, _ in runs))
            for roof_s, runs in sorted(by_roof.items())])
        for (cls, bound), by_roof in sorted(groups.items())
    ]
    return OpModel(launch_floor_s=launch_floor_s, grid=grid, timer=timer, curves=curves)
