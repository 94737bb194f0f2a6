"""What a served batch holds in HBM, and whether it fits: weights, KV cache, activations and a reserve.

Pure: it reads the engine's step analyses (``roofline.Analysis``), never a model, so that a per-GPU analysis
(tensor, expert or pipeline parallelism: engine/parallel/) gives a per-GPU budget with no change here.

  weights      the weights one GPU holds (``Totals.weight_footprint_bytes``: ``resident.weight_footprint_bytes``
               of its share, every parameter as stored, quantized formats with their scales, every expert of a
               mixture of experts, or its E/ep under expert parallelism, its stage's under pipeline parallelism).
  KV cache     the step's batch (one GPU's: ⌈B/ep⌉ under expert parallelism) × one sequence's cache on the GPU
               (``Totals.kv_cache_bytes_per_sequence``) at the longest context of the request: the
               last decode step's (it holds prompt + output − 1 positions: the last token's K and V are never
               written), or the prefill's when there is no decode step.
  activations  the largest live set of one op over the steps given: for each op, one instance's HBM traffic less
               the weights and KV cache it reads (``bytes − weight_bytes − kv_bytes``), i.e. its activation
               inputs and outputs, which must all be allocated while it runs; the largest of these. A batched
               prefill's gated MLP sets it (SiLU(gate)·up reads N×I twice and writes N×I: 3·N·I elements). It
               counts no tensor outside that op (the residual stream held around it, N×H, is not added), treats
               inputs and outputs as separate buffers (an in-place softmax would need half), and counts the KV
               write's cache side as activation (a few MB): an estimate of the peak of live activations from the
               op list, which holds no tensor lifetimes.
  reserve      what the framework holds beyond these: the CUDA context, library workspaces, CUDA graphs,
               allocator fragmentation. Default: 10% of HBM, what vLLM leaves out with its default
               ``--gpu-memory-utilization 0.9`` ("Engine Arguments",
               https://docs.vllm.ai/en/latest/serving/engine_args.html); ``--reserve-gib`` sets it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import UserError
from ..units import GIB
from .roofline import Analysis

# The share of HBM the default reserve keeps back: 1 − vLLM's default gpu_memory_utilization of 0.9.
DEFAULT_RESERVE_FRACTION = 0.10


@dataclass(frozen=True)
class LiveSet:
    """The largest activation live set: which op of which step, and its bytes."""

    phase: str
    op: str
    bytes: float


@dataclass(frozen=True)
class MemoryBudget:
    capacity_bytes: float  # the GPU's HBM
    weight_bytes: float
    kv_cache_bytes: float  # the whole batch at the longest context
    kv_cache_bytes_per_sequence: float
    activations: LiveSet
    reserve_bytes: float
    batch_shards: int = 1  # the GPUs a batch's sequences are spread over (expert parallelism's ep; else 1)

    @property
    def activation_bytes(self) -> float:
        return self.activations.bytes

    @property
    def total_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes + self.activation_bytes + self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes


def reserve_bytes(capacity_bytes: float, reserve_gib: float | None) -> float:
    """The reserve: ``reserve_gib`` GiB, or DEFAULT_RESERVE_FRACTION of the capacity. A reserve that is negative,
    not finite or not below the capacity is a UserError."""
    if reserve_gib is None:
        return DEFAULT_RESERVE_FRACTION * capacity_bytes
    if not 0 <= reserve_gib < capacity_bytes / GIB:  # NaN fails too
        raise UserError(f"--reserve-gib {reserve_gib}: give a reserve from 0 to below the GPU's "
                        f"{capacity_bytes / GIB:g} GiB")
    return reserve_gib * GIB


def activation_live_set(steps: Sequence[Analysis]) -> LiveSet:
    """The largest one-op activation live set of ``steps`` (the module's docstring states the rule)."""
    best = LiveSet(phase="", op="", bytes=0.0)
    for a in steps:
        for p in a.placements:
            if p.op.kind == "communication":  # interconnect bytes; its buffer is the op before it's output
                continue
            live = p.op.bytes - p.op.weight_bytes - p.op.kv_bytes
            if live > best.bytes:
                best = LiveSet(phase=a.workload.phase, op=p.name, bytes=live)
    return best


def memory_budget(prefill: Analysis, longest: Analysis, reserve: float) -> MemoryBudget:
    """What the batch of ``prefill`` holds: the weights, the KV cache of ``longest`` (the step at the longest
    context: the last decode step, or the prefill itself), the largest live set of either step, and ``reserve``
    bytes. Both steps run the same batch on the same GPU."""
    w = longest.workload
    per_seq = longest.totals.kv_cache_bytes_per_sequence
    return MemoryBudget(
        capacity_bytes=longest.totals.capacity_bytes,
        weight_bytes=longest.totals.weight_footprint_bytes,
        kv_cache_bytes=w.batch * per_seq,
        kv_cache_bytes_per_sequence=per_seq,
        activations=activation_live_set([prefill, longest]),
        reserve_bytes=reserve,
        batch_shards=longest.layout.batch_shards,
    )
