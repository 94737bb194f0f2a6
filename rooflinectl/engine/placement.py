"""An operation's placement under a GPU's roofs: the one rule of its roofline time and bound. Pure.

attainable = min(peak, intensity × bandwidth); roofline time = max(FLOPs / peak, bytes / bandwidth); the bound is
whichever term is larger (memory on a tie: the op sits exactly at the ridge). ``roofline`` re-exports both names;
``calibrated`` reads the roofline time and bound from here (a module of its own so that neither imports the other).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..specs.hardware import Roofs
from .count.op import Op


@dataclass(frozen=True)
class Placement:
    op: Op
    peak_flops: float  # FLOP/s of the compute roof above this op
    bandwidth: float  # bytes/s of the memory roof
    compute_time_s: float  # one instance
    memory_time_s: float  # one instance (a collective's: its latency + bytes / the interconnect's bandwidth)
    share: float = 0.0  # of the step's predicted time, count included
    latency_s: float = 0.0  # a collective's fixed cost, part of memory_time_s; 0 for every other op
    # One instance's time by the calibrated op model (engine/calibrated.py), and which curve gave it in words;
    # None: the roofline's time, max(compute_time_s, memory_time_s).
    model_time_s: float | None = None
    time_model: str | None = None
    time_note: str | None = None  # where that curve is not the op's own (class, bound) one: why (CurveTime.note)

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def intensity(self) -> float:
        return self.op.intensity

    @property
    def roofline_time_s(self) -> float:
        """One instance's time at the roofs: max(FLOPs / peak, bytes / bandwidth)."""
        return max(self.compute_time_s, self.memory_time_s)

    @property
    def time_s(self) -> float:
        """Predicted time of one instance: the calibrated op model's where it timed the op, else the roofline's."""
        return self.roofline_time_s if self.model_time_s is None else self.model_time_s

    @property
    def total_time_s(self) -> float:
        return self.time_s * self.op.count

    @property
    def bound(self) -> str:
        return "compute" if self.compute_time_s > self.memory_time_s else "memory"

    @property
    def attainable_flops(self) -> float:
        return min(self.peak_flops, self.intensity * self.bandwidth)

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.bandwidth


def place(op: Op, roofs: Roofs) -> Placement:
    """Place one operation under ``roofs``. A collective (kind ``communication``) moves its bytes over the
    interconnect, not HBM: its roof is the interconnect's bandwidth in one direction and its time
    latency + bytes / bandwidth (engine/parallel/ states the model). Where the roofs carry that collective's
    measured bus bandwidth and latency (``analyze --calibrated`` of a file ``calibrate --comm`` wrote), those are
    the bandwidth and the latency: busbw × time is the bytes one GPU sends (nccl-tests' definition), the op's
    ``bytes``; a point-to-point send, never measured, keeps the datasheet's."""
    peak = roofs.peak(op.dtype, op.unit)
    if op.kind == "communication":
        measured = roofs.measured_collectives.get(op.collective) if op.collective else None
        gbps, latency_us = measured or (roofs.interconnect_gbps, roofs.interconnect_latency_us)
        if gbps is None or latency_us is None:
            raise UserError(f"{roofs.gpu_id}: the GPU file gives no interconnect, so a collective cannot be timed")
        bandwidth = gbps * 1e9
        latency = latency_us * 1e-6
        return Placement(op=op, peak_flops=peak, bandwidth=bandwidth, compute_time_s=op.flops / peak,
                         memory_time_s=latency + op.bytes / bandwidth, latency_s=latency)
    return Placement(
        op=op,
        peak_flops=peak,
        bandwidth=roofs.bandwidth,
        compute_time_s=op.flops / peak,
        memory_time_s=op.bytes / roofs.bandwidth,
    )
