"""An operation's placement under a GPU's roofs: the one rule of its roofline time and bound. Pure.

attainable = min(peak, intensity × bandwidth); roofline time = max(FLOPs / peak, bytes / bandwidth); the bound is
whichever term is larger (memory on a tie: the op sits exactly at the ridge). ``roofline`` re-exports both names;
``calibrated`` reads the roofline time and bound from here (a module of its own so that neither imports the other).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

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
    # What set the op model's time: the launch floor, or the memory- or compute-bound curve read (CurveTime.limit).
    model_limit: Literal["memory", "compute", "launch"] | None = None
    # A collective's binding link: the interconnect (the scale-up domain's) or the scale-out network; None for
    # every other op.
    link: Literal["interconnect", "network"] | None = None

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
        """compute or memory (memory on a tie); for a collective, the link whose bytes take longest."""
        if self.link is not None:
            return self.link
        return "compute" if self.compute_time_s > self.memory_time_s else "memory"

    @property
    def limit(self) -> str:
        """What set :attr:`time_s`: the op model's limit (memory, compute or launch) where it timed the op, else
        the roofline's :attr:`bound`."""
        return self.bound if self.model_limit is None else self.model_limit

    @property
    def attainable_flops(self) -> float:
        """FLOP/s at the roofs: min(peak, intensity × bandwidth)."""
        return min(self.peak_flops, self.intensity * self.bandwidth)

    @property
    def achieved_flops(self) -> float:
        """FLOP/s at the predicted time: FLOPs / :attr:`time_s`, the attainable rate where the roofline timed the
        op, and what the op model says the kernel reaches where it did."""
        return self.attainable_flops if self.model_time_s is None else self.op.flops / self.model_time_s

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.bandwidth



def add_times(times: Iterable[float]) -> float:
    """Seconds added left to right from 0, the engine's one way to add a step's times (and the decode series' fast
    path in generate.py adds its ops' times in the same order): Python 3.12's ``sum`` compensates its rounding, so
    the builtin would give totals that differ in the last bit from 3.10's and 3.11's, and from the fast path's."""
    total: float = 0
    for t in times:
        total += t
    return total


def place(op: Op, roofs: Roofs) -> Placement:
    """Place one operation under ``roofs``. A collective (kind ``communication``) moves its bytes over links, not
    HBM, and computes nothing (no compute roof: an infinite peak, so that its compute time is 0). Within the
    scale-up domain its roof is the interconnect's bandwidth in one direction (times the op's ``link_share``: a
    mesh's links between the group's GPUs) and its time latency + bytes / bandwidth. Where the roofs carry that
    collective's measured bus bandwidth and latency (``analyze --calibrated`` of a file ``calibrate --comm`` wrote
    on one domain's GPUs), those are the bandwidth and the latency: busbw × time is the bytes one GPU sends
    (nccl-tests' definition), the op's ``bytes``; a point-to-point send, never measured, keeps the datasheet's. Past
    the domain (``op.network_bytes``: the two-level algorithms of engine/parallel/network.py) the interconnect and
    the scale-out network run at once: latency = the interconnect's + each network step's hop, and the bandwidth is
    the collective's bus bandwidth, bytes / max(interconnect bytes / its bandwidth, network bytes / the network's),
    the binding link's time."""
    if op.kind == "communication":
        crosses = op.network_bytes > 0
        if op.collective in roofs.unusable_collectives and not crosses:
            raise UserError(f"{roofs.gpu_id}: {roofs.unusable_collectives[op.collective]}")
        measured = roofs.measured_collectives.get(op.collective) if op.collective and not crosses else None
        gbps, latency_us = measured or (roofs.interconnect_gbps, roofs.interconnect_latency_us)
        if gbps is None or latency_us is None:
            raise UserError(f"{roofs.gpu_id}: the GPU file gives no interconnect, so a collective cannot be timed")
        # A measured bus bandwidth is the topology's already; the datasheet's is the GPU's, of which a mesh
        # gives the op's group its link share.
        bandwidth = gbps * 1e9 * (1 if measured else op.link_share)
        latency = latency_us * 1e-6
        link: Literal["interconnect", "network"] = "interconnect"
        if crosses:
            if roofs.network_gbps is None or roofs.network_latency_us is None:
                raise UserError(f"{roofs.gpu_id}: the GPU file gives no scale_out network, so a collective past "
                                f"its scale-up domain cannot be timed")
            up = (op.bytes - op.network_bytes) / bandwidth
            out = op.network_bytes / (roofs.network_gbps * 1e9)
            link = "network" if out >= up else "interconnect"
            bandwidth = op.bytes / max(up, out)
            latency += op.network_steps * roofs.network_latency_us * 1e-6
        return Placement(op=op, peak_flops=math.inf, bandwidth=bandwidth, compute_time_s=0.0,
                         memory_time_s=latency + op.bytes / bandwidth, latency_s=latency, link=link)
    peak = roofs.peak(op.dtype, op.compute_unit)
    return Placement(
        op=op,
        peak_flops=peak,
        bandwidth=roofs.bandwidth,
        compute_time_s=op.flops / peak,
        memory_time_s=op.bytes / roofs.bandwidth,
    )
