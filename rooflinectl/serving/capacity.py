"""The KV cache a GPU holds beside a model: HBM less the weights, the largest activation live set of a full step and
the reserve, in blocks of the paged cache (``serving.kvcache``), and the pool a replica starts from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine.parallel import Layout, kv_bytes_per_sequence_per_gpu, kv_spans_per_gpu
from ..errors import UserError
from ..specs.step import Seqs
from ..specs.workload import Workload
from ..units import gib, plural
from .kvcache import EVERY_LAYER, BlockPool, Part, kv_blocks
from .stepmodel import StepModel


@dataclass(frozen=True)
class Capacity:
    """What one GPU holds beside the KV cache, and the cache's blocks: HBM less the weights, the largest
    activation live set of a full step (``engine.memory.activation_live_set`` of a step of the token budget) and
    the reserve, divided by one block's K and V on that GPU (all layers, ``block_size`` positions). A model with
    recurrent layers holds its fixed state per sequence in ``state_blocks`` whole blocks of the same pool; one with
    sliding-window or chunked layers has a block of a group of layers and ``parts`` saying what a request's
    positions take in each kind (``serving.kvcache``)."""

    capacity_bytes: float
    weight_bytes: float
    activation_bytes: float
    reserve_bytes: float
    block_bytes: float
    blocks: int
    state_blocks: int = 0
    parts: tuple[Part, ...] = EVERY_LAYER

    def pool(self, block_size: int) -> BlockPool:
        """An empty pool of these blocks; where not one block fits, a UserError naming what fills the GPU (the
        reserve too: --reserve-gib 79.9 on an 80 GiB GPU blamed the weights and activations)."""
        if self.blocks < 1:
            raise UserError(f"no room for a single KV block: the weights ({gib(self.weight_bytes)}), the "
                            f"activations ({gib(self.activation_bytes)}) and the reserve ({gib(self.reserve_bytes)}, "
                            f"--reserve-gib) fill the GPU's {gib(self.capacity_bytes)}")
        return BlockPool(self.blocks, block_size, self.state_blocks, self.parts)

    def most_positions(self, block_size: int) -> int:
        """The most positions one request can hold in these blocks (0: not one block)."""
        return self.pool(block_size).most_positions if self.blocks >= 1 else 0

    def overflow(self, positions: int, block_size: int) -> str | None:
        """Where one request of ``positions`` does not fit in these blocks (its own, its state's too, and at least
        one: ``BlockPool.blocks_for``, as the scheduler admits it), the sum that overflows one GPU: weights + its KV
        cache + activations + reserve = total of capacity; None where it fits."""
        blocks = max(1, kv_blocks(positions, block_size, self.parts) + (self.state_blocks if positions > 0 else 0))
        if blocks <= self.blocks:
            return None
        kv = blocks * self.block_bytes
        total = self.weight_bytes + kv + self.activation_bytes + self.reserve_bytes
        return (f"{gib(self.weight_bytes)} weights + {gib(kv)} KV cache ({plural(blocks, 'block')} of {block_size}) "
                f"+ {gib(self.activation_bytes)} activations + {gib(self.reserve_bytes)} reserve = {gib(total)} of "
                f"{gib(self.capacity_bytes)}")


def kv_parts(per_gpu: Workload, layout: Layout, block_size: int) -> tuple[float, tuple[Part, ...]]:
    """(a block's bytes, the parts of a request's blocks) of the KV cache of one GPU's workload ``per_gpu``: the
    layers of each kind that hold K and V (``engine.parallel.kv_spans_per_gpu``) in groups of g, their greatest
    common divisor, a block holding the K and V of ``block_size`` positions in one group (Gemma 3 27B's 10 full
    and 52 sliding layers: groups of 2, a request taking 5 blocks for each block of its positions and 26 for each
    of its window's). Where every such layer is full this is one block of every layer (``EVERY_LAYER``). The bytes
    are the engine's count of one block of positions in every layer, shared out over the groups."""
    spans = kv_spans_per_gpu(per_gpu, layout)
    group = math.gcd(*(layers for layers, _, _ in spans))
    every = kv_bytes_per_sequence_per_gpu(per_gpu, layout, block_size, block_size)
    parts = tuple((layers // group, window, chunk) for layers, window, chunk in spans)
    return every * group / sum(layers for layers, _, _ in spans), EVERY_LAYER if parts == EVERY_LAYER else parts

def kv_capacity(model: StepModel, budget_tokens: int, block_size: int, reserve: float) -> Capacity:
    """The KV blocks ``model``'s GPU holds when a step may carry ``budget_tokens`` tokens."""
    from ..engine.memory import activation_live_set

    limit = model.base.model.max_length()
    longest = min(budget_tokens, limit[0] if limit else budget_tokens)
    full = model.analyze((Seqs(max(1, budget_tokens // longest), longest),))
    block = model.analyze((Seqs(1, block_size),)) if limit is None or block_size <= limit[0] else full
    held = block.totals.kv_cache_bytes_per_sequence
    state_blocks, parts = 0, EVERY_LAYER
    if model.base.model.recurrent:
        # The cache a sequence holds is its attention layers' K and V, growing by block_bytes a block (all of
        # them full: Model refuses a window or chunks beside recurrent layers), and its fixed state: two lengths
        # tell them apart.
        positions = block.workload.uniform.positions
        twice = model.analyze((Seqs(1, 2 * positions),)).totals.kv_cache_bytes_per_sequence
        block_bytes = (twice - held) * (block_size / positions)
        state_blocks = math.ceil((2 * held - twice) / block_bytes)
    elif model.base.model.sliding_window is not None or model.base.model.attention_chunk_size is not None:
        block_bytes, parts = kv_parts(block.workload, model.layout, block_size)  # a block of a group of layers
    else:
        block_bytes = held * (block_size / block.workload.uniform.positions)
    weights = full.totals.weight_footprint_bytes
    activations = activation_live_set([full]).bytes
    capacity = model.gpu.capacity_bytes
    room = capacity - reserve - weights - activations
    return Capacity(capacity, weights, activations, reserve, block_bytes,
                    max(0, math.floor(room / block_bytes)) if room > 0 else 0, state_blocks, parts)
