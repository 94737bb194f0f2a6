"""Measured kernels on the chart: each timed record at (flops / bytes, flops / time_s), with its share of the roof
above it, tied to the engine's prediction for the same op when one sits close by.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..engine.op import Op, OpKind
from ..engine.roofline import Analysis, place
from ..errors import UserError, format_validation_error
from ..specs.hardware import GPU
from ..specs.load import read_json
from .chart import MeasuredPoint, OpPoint

# A measured point is tied to the prediction for its op only when their intensities are within 2× (a shape
# like the workload's): a kernel timed at another shape sits elsewhere, and a line across the chart would mislead.
PAIR_DECADES = math.log10(2)


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
    op_kind: OpKind | None = None


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


def measured_points(
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
