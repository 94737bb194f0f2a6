"""Measured kernels on the chart: each timed record at (flops / bytes, flops / time_s), with its share of the roof
above it, tied to the engine's prediction for the same op when one sits close by.

Nothing here reads JSON or does roofline arithmetic of its own: the file is read by the records' one reader
(``records.read.read_measurements``), "measured on this GPU" is the specs' one matcher, exact or nothing (``specs.devices.device_matches``),
and a point's roof and fraction are the engine's (``engine.roofline.measured_share``), the same figures that
``rooflinectl measure`` prints for the record.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ..engine.count.op import Op, OpKind
from ..engine.roofline import Analysis, Placement, measured_share
from ..errors import UserError
from ..records.kernel import MeasurementFile, ShapeRecord
from ..records.read import read_measurements
from ..specs.devices import device_matches
from ..specs.hardware import GPU, list_gpus
from .chart import MeasuredPoint

# A measured point is tied to the prediction for its op only when their intensities are within 2× (a shape
# like the workload's): a kernel timed at another shape sits elsewhere, and a line across the chart would mislead.
PAIR_DECADES = math.log10(2)


def load_measured(path: Path) -> MeasurementFile:
    """Any saved record (``records.read``: a ``measure --save`` file in every schema version, a ``measure
    --workload --save`` or a ``profile --save`` one, each op a record); a malformed file, or one with no timed
    record (nothing to draw), is a one-line UserError."""
    run = read_measurements(path)  # its schema bounds what the chart divides by: bytes, time_s > 0, finite
    if all(r.time_s is None for r in run.records):
        if run.timer is None and not run.interpret and any(r.status == "passed" for r in run.records):
            raise UserError(f"{path}: measured on the CPU, whose times have no place under a GPU's roofs: "
                            f"nothing to draw (measure --workload on a GPU to plot it)")
        raise UserError(f"{path}: no record has a time (each failed its check, or ran in the Triton interpreter): "
                        f"nothing to draw")
    return run


def measured_gpu(run: MeasurementFile, gpus: Sequence[GPU], source: str = "measured file") -> GPU:
    """The plotted GPU ``run`` was measured on, or a one-line UserError: a record is drawn under the roofs of the
    GPU it ran on, or not at all (drawn under another's, an L40S's kernel read as 900% of the L4's roof).

    By the device's name, exactly (``specs.devices.device_matches``, the matcher ``measure`` picks its spec with
    and ``--calibrated`` checks a measured section with; where two plotted specs both have the name, the one the
    run was compared against). A device no plotted spec names is refused whatever spec the run was compared
    against: ``measure --gpu h100`` on an H100 NVL or a MIG slice records that device, whose roofs are not the
    H100 SXM's. A board of the user's own is named in its file's ``device_names``.
    """
    device = run.gpu.name
    if not device.strip():
        raise UserError(f"{source} names no device it was measured on: nothing says which GPU's roofs are its own "
                        f"(measure it again)")
    recorded = (run.gpu.spec or "").strip().lower()
    by_name = [g for g in gpus if device_matches(device, g)]
    if len(by_name) > 1:
        by_name = [g for g in by_name if g.id == recorded] or by_name
    if len(by_name) == 1:
        return by_name[0]
    plotted = ", ".join(f"{g.id} ({g.name})" for g in gpus)
    if len(by_name) > 1:
        raise UserError(f"{source} was measured on '{device}', which several GPUs plotted claim "
                        f"({', '.join(g.id for g in by_name)}): plot one of them")
    known = [g for g in list_gpus() if device_matches(device, g)]
    which = f" (the spec {known[0].id}: pass --gpu {known[0].id})" if len(known) == 1 else \
        " (pass --gpu for the GPU it was measured on; a file of your own lists the device in its device_names)"
    raise UserError(f"{source} was measured on '{device}', none of the GPUs plotted: {plotted}{which}")


def measured_points(
    runs: Sequence[Sequence[Analysis]], run: MeasurementFile | None, gpu_id: str | None = None
) -> tuple[list[MeasuredPoint], list[str]]:
    """Each timed record of ``run`` on the GPU it was measured on (``gpu_id``, found by :func:`measured_gpu`),
    under the roof its record names (its unit and op_dtype), and the footnotes naming the records not drawn."""
    if run is None or gpu_id is None:
        return [], []
    analyses = next(a for a in runs if a[0].gpu.id == gpu_id)
    a = analyses[0]
    # Every drawn prediction on this GPU, over every value of a sweep: a kernel timed at batch 8 pairs with the
    # batch-8 point of its op.
    predictions = [p for an in analyses for p in an.placements if p.op.flops > 0]
    out: list[MeasuredPoint] = []
    skipped: dict[str, list[str]] = {}
    for r in run.records:
        if r.time_s is None:
            skipped.setdefault("not timed", []).append(r.kernel)
            continue
        if r.flops <= 0:
            skipped.setdefault("0 FLOPs: no place on a log axis", []).append(r.kernel)
            continue
        same_op = _same_op(r, predictions)
        # The engine places the record's own count under the roof it names: attainable = min(peak, intensity ×
        # bandwidth), fraction = predicted time / measured time (= achieved / attainable).
        share = measured_share(record_op(r, same_op), a.roofs, r.time_s)
        intensity = share.placement.intensity
        near = min(same_op, key=lambda q: abs(math.log10(q.intensity / intensity)), default=None)
        predicted = None
        if near is not None and abs(math.log10(near.intensity / intensity)) < PAIR_DECADES:
            predicted = (near.intensity, near.attainable_flops)
        out.append(MeasuredPoint(gpu=a.gpu.id, kernel=r.kernel, op=r.op, intensity=intensity,
                                 flops=share.achieved_flops, roof_flops=share.attainable_flops,
                                 fraction=share.fraction, label=measured_label(r, share.fraction),
                                 predicted=predicted))
    notes = [f"Measured, not drawn: {', '.join(names)} ({why})." for why, names in skipped.items()]
    return out, notes


def _same_op(r: ShapeRecord, predictions: Sequence[Placement]) -> list[Placement]:
    """The engine's placements of the op ``r`` measured: those of the same kind that fuse the same work. A record
    saved before records kept kinds (schema 1: ``op_kind`` None) says only what its op is called: it is paired by
    that name, the one place the chart goes by a name, and only for such records."""
    if r.op_kind is None:
        return [p for p in predictions if p.name == r.op]
    fuses = sorted(r.op_fuses)
    return [p for p in predictions if p.op.kind == r.op_kind and sorted(p.op.fuses) == fuses]


def record_op(r: ShapeRecord, same_op: Sequence[Placement] = ()) -> Op:
    """The op a record measured, with the record's own count, unit and data type (the engine's rules, applied by
    measure when it ran). A schema 1 record kept no kind: it takes that of the engine op of its name where the step
    has one, else the usual kind of work on its unit; placement reads only FLOPs, bytes, unit and dtype, and such a
    record is paired by name, so that stand-in decides nothing."""
    kind: OpKind
    if r.op_kind is not None:
        kind = r.op_kind
    elif same_op:
        kind = same_op[0].op.kind
    else:
        kind = "matmul" if r.unit == "tensor" else "elementwise"
    return Op(name=r.op, kind=kind, flops=r.flops, bytes=r.bytes, unit=r.unit, dtype=r.op_dtype,
              reads=f"{r.kernel} {r.shape_text} {r.dtype}: the inputs measure counted",
              writes="the outputs measure counted", computes=f"{r.flops:.0f} FLOPs, as measure counted them",
              fuses=tuple(r.op_fuses))


def measured_label(r: ShapeRecord, fraction: float) -> str:
    """'matmul 8x4096x14336 33%': the kernel, its shape (several shapes of one kernel are usual), the fraction."""
    shape = "x".join(str(n) for n in r.shape)
    return f"{r.kernel} {shape + ' ' if shape else ''}{fraction:.0%}"
