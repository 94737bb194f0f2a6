"""Tensor, expert and pipeline parallelism: one GPU's share of a step, and the collectives that join the shares.
Pure: no I/O.

The package: ``layout`` (the degrees, checked), ``shard`` (one GPU's model, workload, expert ops, KV cache and
weights; the layouts' table), ``collectives`` (the communication ops and their bytes; their table),
``stages`` (the layers each pipeline stage holds, and the heaviest), ``network`` (the scale-up domain and the scale-out network a group crosses, and the two-level algorithms past the
domain), ``summary`` (the notes beside the per-GPU figures).

The rule: one GPU's step is the engine's own step of a model with that GPU's sizes (``per_gpu_workload``),
which ``engine.count.transformer`` counts unchanged, plus the collectives, ops of kind ``communication`` on
the interconnect's roof. tokens/s per GPU divides by the GPUs one copy spans, max(tp, ep)·pp. The layouts with
their sources, the time rule and what is not modelled: docs/design.md, "Parallelism".
"""

from __future__ import annotations

from .collectives import all_gather_bytes, all_reduce_bytes, communication_ops
from .layout import MAX_DEGREE, Layout, check_degree, check_interconnect
from .network import NetworkUse, Span, network_use
from .shard import (
    check_experts,
    expert_ops_per_gpu,
    kv_bytes_per_sequence_per_gpu,
    kv_heads_per_gpu,
    kv_spans_per_gpu,
    padded_vocab,
    per_gpu_model,
    per_gpu_workload,
    sequences_per_gpu,
    weight_bytes_per_gpu,
)
from .stages import stage_note, stage_workload
from .summary import notes

__all__ = [
    "MAX_DEGREE",
    "Layout",
    "NetworkUse",
    "Span",
    "all_gather_bytes",
    "all_reduce_bytes",
    "check_degree",
    "check_experts",
    "check_interconnect",
    "communication_ops",
    "expert_ops_per_gpu",
    "kv_bytes_per_sequence_per_gpu",
    "kv_heads_per_gpu",
    "kv_spans_per_gpu",
    "network_use",
    "notes",
    "padded_vocab",
    "per_gpu_model",
    "per_gpu_workload",
    "sequences_per_gpu",
    "stage_note",
    "stage_workload",
    "weight_bytes_per_gpu",
]
