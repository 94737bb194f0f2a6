"""The paged KV cache: fixed blocks of ``block_size`` positions, each request holding ⌈positions / block_size⌉
of them (vLLM's and SGLang's paged layout; the last block partly filled). Its capacity, in blocks, is what the
memory model leaves for the cache (``simulate.kv_blocks``).

Prefix caching: the full blocks of a prompt's shared prefix, once a request has computed them, become the prefix's
(by its id), reference counted: a request that finds its prefix cached holds them too (``attach``) and computes
only the rest of its prompt; the blocks count once in ``used``. When the last request holding them goes they are
free (out of ``used``) but keep their content, ``idle``, so that a later request may still find them, until a
request needs the room: then the idle prefixes are evicted, the least recently freed first (vLLM's free-block
queue, which evicts the least recently used cached block).

A model with recurrent layers (Gated DeltaNet) holds, beside the K and V of its attention layers, a state of fixed
size per sequence: ``state_blocks`` blocks each request holds from its first position on, whatever its length
(vLLM's hybrid cache manager gives each sequence's state whole pages of the same pool)."""

from __future__ import annotations

from ..errors import UserError


class BlockPool:
    """``total`` blocks of ``block_size`` positions; each request's blocks by its id."""

    def __init__(self, total: int, block_size: int, state_blocks: int = 0) -> None:
        self.check_block_size(block_size)
        if total < 1:
            raise UserError("no room for a single KV block: the weights and activations fill the GPU")
        self.total = total
        self.block_size = block_size
        self.state_blocks = state_blocks
        self.held: dict[int, int] = {}  # each request's own blocks
        self.used = 0
        self.peak = 0
        self.prefixes: dict[int, list[int]] = {}  # a cached prefix's id → [its blocks, the requests holding it]
        self.idle = 0  # the blocks of cached prefixes no request holds: free, until evicted
        self.attached: dict[int, tuple[int, int]] = {}  # a request → (the prefix it holds, that prefix's blocks)

    @staticmethod
    def check_block_size(block_size: int) -> None:
        if not 1 <= block_size <= 2**16:
            raise UserError(f"--block-size {block_size:,}: give 1 to {2**16:,} positions")

    @property
    def most_positions(self) -> int:
        """The most positions one request can hold: every block but its state's."""
        return max(0, self.total - self.state_blocks) * self.block_size

    def blocks_for(self, positions: int) -> int:
        """The blocks a request of ``positions`` holds: its positions', and its state's once it has any."""
        return -(-positions // self.block_size) + (self.state_blocks if positions > 0 else 0)

    def holds(self, rid: int) -> int:
        """The blocks request ``rid``'s positions are in: its own and its prefix's."""
        return self.held.get(rid, 0) + self.attached.get(rid, (0, 0))[1]

    def can_grow(self, rid: int, positions: int) -> bool:
        """Whether request ``rid`` can hold ``positions`` in all."""
        return self.blocks_for(positions) - self.holds(rid) <= self.total - self.used

    def room(self, rid: int, positions: int) -> int:
        """How many positions request ``rid``, holding ``positions`` now, can add with the blocks left."""
        blocks = self.holds(rid) + self.total - self.used - (self.state_blocks if positions or self.holds(rid) else 0)
        return max(0, blocks * self.block_size - positions)

    def grow(self, rid: int, positions: int) -> None:
        """Request ``rid`` holds ``positions`` in all (it has room: :meth:`can_grow`)."""
        need = self.blocks_for(positions) - self.holds(rid)
        if need > self.total - self.used - self.idle:
            self._evict(need - (self.total - self.used - self.idle))
        if need > 0:
            assert need <= self.total - self.used, "grow without room"
            self.held[rid] = self.held.get(rid, 0) + need
            self.used += need
            self.peak = max(self.peak, self.used)

    def free(self, rid: int) -> None:
        """Request ``rid`` goes: its own blocks are freed, and its prefix's when it held them last."""
        self.used -= self.held.pop(rid, 0)
        if rid in self.attached:
            pid, _ = self.attached.pop(rid)
            entry = self.prefixes[pid]
            entry[1] -= 1
            if entry[1] == 0:  # idle: free, its content kept; last in the eviction order
                del self.prefixes[pid]
                self.prefixes[pid] = entry
                self.used -= entry[0]
                self.idle += entry[0]

    def _evict(self, blocks: int) -> None:
        """Evict idle prefixes, the least recently freed first, until ``blocks`` more are empty."""
        for pid in [p for p, (_, refs) in self.prefixes.items() if refs == 0]:
            if blocks <= 0:
                break
            size = self.prefixes.pop(pid)[0]
            self.idle -= size
            blocks -= size

    def attach_cost(self, pid: int) -> int:
        """The blocks that attaching prefix ``pid`` takes out of the free ones: all of it when it is idle."""
        entry = self.prefixes.get(pid)
        return entry[0] if entry is not None and entry[1] == 0 else 0

    def cached_prefix(self, pid: int) -> int:
        """The blocks of prefix ``pid`` in the cache (0: not cached)."""
        entry = self.prefixes.get(pid)
        return 0 if entry is None else entry[0]

    def attach(self, rid: int, pid: int, blocks: int) -> None:
        """Request ``rid`` holds the first ``blocks`` blocks of cached prefix ``pid`` (at most all of them)."""
        entry = self.prefixes[pid]
        if entry[1] == 0:
            self.idle -= entry[0]
            self.used += entry[0]
            self.peak = max(self.peak, self.used)
        entry[1] += 1
        self.attached[rid] = (pid, blocks)

    def share(self, rid: int, pid: int, blocks: int) -> None:
        """Request ``rid``'s first ``blocks`` blocks, computed, become prefix ``pid``'s, which it holds."""
        self.held[rid] -= blocks
        self.prefixes[pid] = [blocks, 1]
        self.attached[rid] = (pid, blocks)
