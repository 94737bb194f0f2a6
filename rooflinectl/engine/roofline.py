"""Placement of operations on a GPU's roofline, step totals and sweeps. Pure: no I/O, no torch.

attainable = min(peak, intensity × bandwidth); predicted time = max(FLOPs / peak, bytes / bandwidth);
the bound is whichever term is larger (memory on a tie: the op sits exactly at the ridge). Under
``calibrated=True`` with a GPU file that carries an op model (``measured.op_model``), each op's time is the
model's instead (engine/calibrated.py); its bound, intensity and attainable rate stay the roofline's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..errors import UserError
from ..specs.hardware import GPU, Roofs
from ..specs.measured import OpModel
from ..specs.workload import SizeField, Workload
from ..units import dtype_bytes
from .calibrated import timed_by_model
from .count.op import Op, Unit, matmul_unit
from .count.quant import kernel_name
from .count.transformer import step_ops
from .parallel import (
    Layout,
    NetworkUse,
    check_interconnect,
    communication_ops,
    expert_ops_per_gpu,
    kv_bytes_per_sequence_per_gpu,
    network_use,
    per_gpu_workload,
    weight_bytes_per_gpu,
)
from .parallel import notes as parallel_notes
from .placement import Placement, add_times, place

__all__ = ["Placement", "place"]  # engine/placement.py's, re-exported: every caller imports them from here


@dataclass(frozen=True)
class MeasuredShare:
    """A measured time of one op against its roof: THE one place where that share is computed.

    ``op`` is the count the measurement moved (its FLOPs and bytes, one instance), placed under ``roofs`` by the
    same rule as a predicted op. ``fraction`` = predicted time / measured time, which equals achieved FLOP/s /
    attainable FLOP/s (predicted = FLOPs / attainable): 1.0 is the roofline itself, the binding roof's bandwidth
    for a memory-bound op, its peak for a compute-bound one.
    """

    placement: Placement
    time_s: float  # measured, one instance
    predicted_time_s: float
    attainable_flops: float  # FLOP/s: min(peak, intensity × bandwidth)
    achieved_flops: float  # FLOP/s: the op's FLOPs over the measured time
    achieved_gbps: float  # 1e9 bytes/s: the op's bytes over the measured time
    achieved_tflops: float  # 1e12 FLOP/s
    fraction: float


def achieved_rates(op: Op, time_s: float) -> tuple[float, float]:
    """(GB/s, TFLOP/s) that ``op``'s count reaches in ``time_s``: bytes / time and FLOPs / time, decimal units.
    They need no roof, so a measurement without a spec (or without a peak for its data type) still has them."""
    if time_s <= 0:
        raise ValueError(f"a measured time must be positive, got {time_s}")
    return op.bytes / time_s / 1e9, op.flops / time_s / 1e12


def measured_share(op: Op, roofs: Roofs, time_s: float) -> MeasuredShare:
    """Place ``op`` (one instance, as measured) under ``roofs`` and compare its predicted time with ``time_s``."""
    gbps, tflops = achieved_rates(op, time_s)
    p = place(op, roofs)
    return MeasuredShare(
        placement=p,
        time_s=time_s,
        predicted_time_s=p.time_s,
        attainable_flops=p.attainable_flops,
        achieved_flops=op.flops / time_s,
        achieved_gbps=gbps,
        achieved_tflops=tflops,
        fraction=p.time_s / time_s,
    )


@dataclass(frozen=True)
class Totals:
    flops: float
    bytes: float  # HBM bytes (a collective's interconnect bytes are communication_bytes)
    time_s: float
    tokens_per_s: float  # decode: new tokens per second; prefill/attention: prompt tokens per second
    weight_bytes: float  # weights read in the step
    kv_cache_bytes: float  # KV cache read in the step
    memory_bytes: float  # weights + KV cache held
    fits: bool
    capacity_bytes: float
    max_batch: int  # largest batch whose weights + KV cache fit in HBM (0: the weights alone do not fit)
    communication_bytes: float = 0  # sent over the interconnect by one GPU (tensor parallelism)
    communication_time_s: float = 0  # the step's collectives' time (its communication ops, each × its count)
    gpus: int = 1  # the GPUs the step runs on (engine.parallel.Layout.gpus)
    weight_footprint_bytes: float = 0  # the weights one GPU holds (engine.parallel.weight_bytes_per_gpu)
    kv_cache_bytes_per_sequence: float = 0  # one sequence's KV cache on one GPU (its stage's layers under PP)

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """The model copy's tokens per second shared among its GPUs."""
        return self.tokens_per_s / self.gpus

    @property
    def communication_share(self) -> float:
        """The collectives' share of the step's time."""
        return self.communication_time_s / self.time_s


# The most FLOPs or bytes one step may count. The size ranges (specs/sizes.py) keep every count finite
# (below about 2e37); this bound refuses what no GPU could run at all: 1e30 FLOPs take 1e15 s (30 million years)
# at 1 PFLOP/s, and 1e30 bytes are 1e18 TB, where the largest real steps (a 405B prefill of a thousand 128k-token
# prompts) count about 1e21. A number beyond it would be printed as a result while meaning nothing.
MAX_STEP_COUNT = 1e30


def _check_step(w: Workload, totals: Totals) -> None:
    """Refuse, with one line, a step whose FLOPs or bytes are not finite or beyond :data:`MAX_STEP_COUNT`. With
    both finite and bounded, the times and rates are too: the GPU's roofs are finite and positive (hardware.py's
    ranges), and weights, KV cache and memory are parts of the bytes or smaller than them."""
    for what, value in (("FLOPs", totals.flops), ("bytes", totals.bytes)):
        if not value <= MAX_STEP_COUNT:  # NaN fails the comparison too
            raise UserError(f"{w.label()}: the step counts {value:.3g} {what}, beyond the {MAX_STEP_COUNT:.0e} "
                            f"any GPU could run; give smaller sizes")


@dataclass(frozen=True)
class Analysis:
    """Everything ``analyze`` shows: the workload, the GPU, each op's placement and the totals."""

    workload: Workload
    gpu: GPU
    roofs: Roofs
    placements: tuple[Placement, ...]
    totals: Totals
    # The same step with FlashAttention, when this one runs naive attention outside decode: what the verdict
    # compares the score matrix's traffic with. None otherwise.
    flash: Analysis | None = None
    # How the model is spread over GPUs; with more than one, ``workload`` is one GPU's share
    # (engine.parallel.per_gpu_workload), and every figure here is one GPU's.
    layout: Layout = Layout()
    layout_notes: tuple[str, ...] = ()  # engine.parallel.notes of the whole model: what the per-GPU figures mean
    whole: Workload | None = None  # with more than one GPU: the model copy's workload (``workload`` is one GPU's)
    # The calibrated op model that timed the ops (``analyze --calibrated`` of a file that has one); None: the
    # roofline's times, under ``roofs``.
    op_model: OpModel | None = None
    # What the layout's collectives cross (engine.parallel.network_use); None on one GPU.
    network: NetworkUse | None = None

    @property
    def roofline_time_s(self) -> float:
        """The step's time at the roofs alone, every op's max(FLOPs / peak, bytes / bandwidth) × its count: the
        same as ``totals.time_s`` without an op model."""
        return add_times(p.roofline_time_s * p.op.count for p in self.placements)

    @property
    def compute_unit(self) -> Unit:
        return matmul_unit(self.workload.matmul_dtype)

    @property
    def peak_flops(self) -> float:
        """The compute roof of the linear layers' data type (tensor cores; vector units for fp32): the
        workload's dtype, or the narrower type its quantized matmuls multiply in (``Workload.matmul_dtype``)."""
        return self.roofs.peak(self.workload.matmul_dtype, self.compute_unit)

    @property
    def ridge(self) -> float:
        return self.peak_flops / self.roofs.bandwidth

    @property
    def kernel(self) -> str:
        """The matmul kernel the linear layers run (engine.count.quant.kernel_name): its data type is the roof's."""
        return kernel_name(self.workload)

    def placement(self, name: str) -> Placement:
        """The placement of the op named ``name`` (names are unique in a step): a lookup for a row someone chose
        or a record that names its engine op, never a way to tell what an op is (that is ``Op.kind``)."""
        for p in self.placements:
            if p.name == name:
                return p
        raise KeyError(name)


def analyze(workload: Workload, gpu: GPU, calibrated: bool = False, layout: Layout = Layout()) -> Analysis:
    """Build the step's operations and place each under the GPU's roofs (spec sheet or measured). With a
    ``layout`` over several GPUs: one GPU's share of the step (engine.parallel.per_gpu_workload) and the
    collectives that join the shares, listed after it."""
    roofs = gpu.roofs(calibrated)
    roofs.peak(workload.matmul_dtype, matmul_unit(workload.matmul_dtype))  # a clear error up front
    check_interconnect(gpu, layout)
    net = network_use(gpu, layout)
    whole = workload
    workload = per_gpu_workload(whole, layout)
    ops = expert_ops_per_gpu(step_ops(workload), whole, workload, layout)
    ops += communication_ops(whole, layout, net)
    if len({op.name for op in ops}) != len(ops):
        raise ValueError("two ops of one step share a name")  # a bug in the engine: names are lookups
    placed = [place(op, roofs) for op in ops]
    op_model = gpu.measured.op_model if calibrated and gpu.measured is not None else None
    if op_model is not None:
        placed = [timed_by_model(p, op_model) for p in placed]
    step_time = add_times(p.total_time_s for p in placed)
    placed = [replace(p, share=p.total_time_s / step_time) for p in placed]

    weights = weight_bytes_per_gpu(whole, workload, layout)
    if len(workload.seqs) == 1:
        per_seq_kv = kv_bytes_per_sequence_per_gpu(workload, layout)
        held = workload.batch * per_seq_kv
    else:  # each group's sequences at their own length; the largest batch below is at their mean
        held = sum(g.count * kv_bytes_per_sequence_per_gpu(workload, layout, g.positions) for g in workload.seqs)
        per_seq_kv = held / workload.batch
    memory = weights + held
    capacity = gpu.capacity_bytes
    # The largest batch of the model copy: one GPU's, times the ep GPUs that share the sequences under EP alone.
    max_batch = max(0, math.floor((capacity - weights) / per_seq_kv)) * layout.batch_shards if capacity > weights else 0
    totals = Totals(
        flops=sum(p.op.flops * p.op.count for p in placed),
        bytes=sum(p.op.bytes * p.op.count for p in placed if p.op.kind != "communication"),
        time_s=step_time,
        tokens_per_s=whole.tokens / step_time,  # the model copy's: per GPU, divide by layout.gpus
        weight_bytes=sum(p.op.weight_bytes * p.op.count for p in placed),
        kv_cache_bytes=sum(p.op.kv_bytes * p.op.count for p in placed),
        memory_bytes=memory,
        fits=memory <= capacity,
        capacity_bytes=capacity,
        max_batch=max_batch,
        communication_bytes=sum(p.op.bytes * p.op.count for p in placed if p.op.kind == "communication"),
        communication_time_s=add_times(p.total_time_s for p in placed if p.op.kind == "communication"),
        gpus=layout.gpus,
        weight_footprint_bytes=weights,
        kv_cache_bytes_per_sequence=per_seq_kv,
    )
    _check_step(workload, totals)
    flash = None
    if workload.attention == "naive" and workload.phase != "decode":
        flash = analyze(Workload.model_validate({**dict(whole), "attention": "flash"}), gpu, calibrated, layout)
    # The step's collectives that a measured interconnect timed (calibrate --comm), for the layout's note.
    measured = [c for c in roofs.measured_collectives if any(p.op.collective == c for p in placed)]
    return Analysis(workload=workload, gpu=gpu, roofs=roofs, placements=tuple(placed), totals=totals, flash=flash,
                    layout=layout, layout_notes=tuple(parallel_notes(whole, layout, measured, net)),
                    whole=None if layout.single else whole, op_model=op_model,
                    network=None if layout.single else net)


def sweep(workload: Workload, gpu: GPU, field: SizeField, values: Sequence[int],
          calibrated: bool = False, layout: Layout = Layout()) -> list[Analysis]:
    """Analyze the workload once per value of ``field`` (batch, context or seq_len: :meth:`Workload.with_size`,
    which says which phase has which), over ``layout``'s GPUs."""
    workload.size(field)  # a size the phase does not have is an error even before the first value
    return [analyze(workload.with_size(field, value), gpu, calibrated, layout) for value in values]


def batch_at_ridge(weight_elements: float, io_elements_per_row: float, dtype: str, ridge: float,
                   weight_bytes: float | None = None) -> float | None:
    """The batch m at which linear layers reach the ridge, or None if they never do.

    Linear layers of ``weight_elements`` weights (Σ k·n) and ``io_elements_per_row`` inputs plus outputs per row
    (Σ k + n) do 2·m·Σkn FLOPs over (Σkn + m·Σ(k+n))·s bytes; setting that ratio to ``ridge`` gives
    m = ridge·s·Σkn / (2·Σkn − ridge·s·Σ(k+n)). Weights stored in a quantized format take ``weight_bytes``
    (scales included) instead of s·Σkn: m = ridge·weight_bytes / (2·Σkn − ridge·s·Σ(k+n)).
    """
    s = dtype_bytes(dtype)
    stored = s * weight_elements if weight_bytes is None else weight_bytes
    denominator = 2 * weight_elements - ridge * s * io_elements_per_row
    if denominator <= 0:
        return None
    return ridge * stored / denominator


# The share of a layer's experts at which the verdict calls them all touched: the expected count approaches E
# only asymptotically, so "every expert" is stated as the batch where 99% of them are.
ALL_EXPERTS = 0.99


def is_linear(p: Placement) -> bool:
    """A linear layer: a matmul against weights (the projections and the LM head)."""
    return p.op.kind == "linear"


def layer_linears(a: Analysis) -> list[Placement]:
    """The layers' linear ops: the projections, without the once-per-model LM head (``Op.per_model``)."""
    return [p for p in a.placements if is_linear(p) and not p.op.per_model]


def linear_summary(a: Analysis) -> tuple[float, float | None]:
    """(intensity of the layers' linear ops together, the batch at which they would reach the ridge)."""
    linear = layer_linears(a)
    if not linear:
        return 0.0, None
    flops = sum(p.op.flops for p in linear)
    total = sum(p.op.bytes for p in linear)
    s = dtype_bytes(a.workload.dtype)
    stored = sum(p.op.weight_bytes for p in linear)
    io_per_row = sum(p.op.bytes - p.op.weight_bytes for p in linear) / (a.workload.tokens * s)
    if not a.workload.quantized:
        return flops / total, batch_at_ridge(stored / s, io_per_row, a.workload.dtype, a.ridge)
    # Quantized weights: their elements Σk·n from the FLOPs (2·N·k·n each; a fused norm's 4 FLOPs per input
    # element add 2/n to it, below 0.1% at n ≥ 2,048), their bytes as stored, scales included.
    elements = flops / (2 * a.workload.tokens)
    return flops / total, batch_at_ridge(elements, io_per_row, a.workload.dtype, a.ridge, weight_bytes=stored)
