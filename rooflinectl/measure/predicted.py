"""What the engine says of one measured shape: its op's placement under the spec's roofs before the run
(``predict``, step 1 of the harness), and its reading of the measured time after it (``shares``, step 4):
achieved GB/s and TFLOP/s and the share of the attainable time, under the spec's roofs and under the ceilings
measured in the run. Arithmetic only, all of it the engine's (``engine.roofline``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..engine.roofline import achieved_rates, measured_share, place
from ..errors import UserError
from ..records.kernel import RunCeilings, UnfusedOp
from ..specs.hardware import Roofs

if TYPE_CHECKING:
    from ..engine.count.op import Op
    from ..kernels.base import Kernel


@dataclass(frozen=True)
class Prediction:
    """Step 1: the engine's placement of the op under the spec's roofs (None without a spec or a peak)."""

    bound: Literal["memory", "compute"] | None = None
    predicted_time_s: float | None = None
    unfused: list[UnfusedOp] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def predict(kernel: Kernel, shape: tuple[int, ...], dtype: str, op: Op, roofs: Roofs | None) -> Prediction:
    if roofs is None:
        return Prediction()
    unfused = [_unfused(u, roofs) for u in kernel.unfused_ops(shape, dtype)]
    try:
        placed = place(op, roofs)
    except UserError as err:
        return Prediction(unfused=unfused, notes=[f"no prediction: {err}"])
    bound: Literal["memory", "compute"] = "compute" if placed.bound == "compute" else "memory"
    return Prediction(bound=bound, predicted_time_s=placed.time_s, unfused=unfused)


def _unfused(op: Op, roofs: Roofs) -> UnfusedOp:
    try:
        predicted: float | None = place(op, roofs).time_s * op.count
    except UserError:
        predicted = None
    return UnfusedOp(op=op.name, kind=op.kind, flops=op.flops * op.count, bytes=op.bytes * op.count,
                     predicted_time_s=predicted)


@dataclass(frozen=True)
class Shares:
    """Step 4: the engine's reading of the measured time (engine.roofline.measured_share)."""

    achieved_gbps: float | None = None
    achieved_tflops: float | None = None
    spec_roof_pct: float | None = None
    measured_predicted_time_s: float | None = None
    measured_roof_pct: float | None = None
    notes: list[str] = field(default_factory=list)


def shares(op: Op, spec_roofs: Roofs | None, ceilings: RunCeilings | None, time_s: float) -> Shares:
    """Achieved rates and the share of the attainable time under the spec's roofs and under this run's ceilings
    (100% is the roofline itself). The achieved rates need no roof; the shares need the spec's roofs and a peak
    for the op's data type."""
    gbps, tflops = achieved_rates(op, time_s)
    if spec_roofs is None:
        return Shares(achieved_gbps=gbps, achieved_tflops=tflops)
    try:
        spec = measured_share(op, spec_roofs, time_s)
    except UserError:  # no peak for the op's data type: predict() has said so
        return Shares(achieved_gbps=gbps, achieved_tflops=tflops)
    out = Shares(achieved_gbps=spec.achieved_gbps, achieved_tflops=spec.achieved_tflops,
                 spec_roof_pct=100.0 * spec.fraction)
    if ceilings is None or not ceilings.copy_bandwidth_gbps:
        return out
    measured = measured_share(op, spec_roofs.with_ceilings(ceilings), time_s)
    notes = []
    if op.unit == "tensor" and op.dtype not in ceilings.tensor_tflops:
        notes.append(f"no {op.dtype} matmul ceiling measured: '% of measured' uses the spec's peak")
    return Shares(achieved_gbps=out.achieved_gbps, achieved_tflops=out.achieved_tflops,
                  spec_roof_pct=out.spec_roof_pct, measured_predicted_time_s=measured.predicted_time_s,
                  measured_roof_pct=100.0 * measured.fraction, notes=notes)
