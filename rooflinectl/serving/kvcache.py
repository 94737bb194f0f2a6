"""The paged KV cache: fixed blocks of ``block_size`` positions, each request holding ⌈positions / block_size⌉
of them (vLLM's and SGLang's paged layout; the last block partly filled). Its capacity, in blocks, is what the
memory model leaves for the cache (``simulate.kv_blocks``)."""

from __future__ import annotations

from ..errors import UserError


class BlockPool:
    """``total`` blocks of ``block_size`` positions; each request's blocks by its id."""

    def __init__(self, total: int, block_size: int) -> None:
        self.check_block_size(block_size)
        if total < 1:
            raise UserError("no room for a single KV block: the weights and activations fill the GPU")
        self.total = total
        self.block_size = block_size
        self.held: dict[int, int] = {}
        self.used = 0
        self.peak = 0

    @staticmethod
    def check_block_size(block_size: int) -> None:
        if not 1 <= block_size <= 2**16:
            raise UserError(f"--block-size {block_size:,}: give 1 to {2**16:,} positions")

    @property
    def most_positions(self) -> int:
        """The most positions one request can hold: every block."""
        return self.total * self.block_size

    def blocks_for(self, positions: int) -> int:
        return -(-positions // self.block_size)

    def can_grow(self, rid: int, positions: int) -> bool:
        """Whether request ``rid`` can hold ``positions`` in all."""
        return self.blocks_for(positions) - self.held.get(rid, 0) <= self.total - self.used

    def room(self, rid: int, positions: int) -> int:
        """How many positions request ``rid``, holding ``positions`` now, can add with the blocks left."""
        blocks = self.held.get(rid, 0) + self.total - self.used
        return max(0, blocks * self.block_size - positions)

    def grow(self, rid: int, positions: int) -> None:
        """Request ``rid`` holds ``positions`` in all (it has room: :meth:`can_grow`)."""
        need = self.blocks_for(positions) - self.held.get(rid, 0)
        if need > 0:
            assert need <= self.total - self.used, "grow without room"
            self.held[rid] = self.held.get(rid, 0) + need
            self.used += need
            self.peak = max(self.peak, self.used)

    def free(self, rid: int) -> None:
        self.used -= self.held.pop(rid, 0)
