"""The paged KV cache: fixed blocks of ``block_size`` positions, each request holding ⌈positions / block_size⌉
of them (vLLM's and SGLang's paged layout; the last block partly filled). Its capacity, in blocks, is what the
memory model leaves for the cache (``simulate.kv_blocks``).

A model with sliding-window or chunked layers (``parts``): a request's positions take, in each kind of layer, the
blocks ``engine.count.attention.positions_held`` says a sequence keeps there in blocks of ``block_size``: every
block of its positions in a full layer; at most the ⌈(W − 1)/b⌉ + 1 blocks a window W can span in a sliding one,
the blocks past it freed as the window moves (vLLM's hybrid KV cache manager, SGLang's sliding-window pool);
those of one chunk in a chunked one. A block of the pool is then the K and V of ``block_size`` positions in a
group of layers (vLLM's hybrid manager too gives each group of layers its own pages of one pool), and a part
``(n, window, chunk)`` says how many of those groups attend that way. The count of each part depends only on
⌈positions / block_size⌉, so a request still takes blocks only where its next position starts a block.

Prefix caching: the full blocks of a prompt's shared prefix, once a request has computed them, become the prefix's
(by its id), reference counted: a request that finds its prefix cached holds them too (``attach``) and computes
only the rest of its prompt; the blocks count once in ``used``. When the last request holding them goes they are
free (out of ``used``) but keep their content, ``idle``, so that a later request may still find them, until a
request needs the room: then the idle prefixes are evicted, the least recently freed first (vLLM's free-block
queue, which evicts the least recently used cached block). With sliding or chunked layers a prefix keeps, in
those layers, the blocks of its own last window (or chunk), what a later request needs to go on from it (vLLM's
sliding-window prefix hit asks for the ⌈(W − 1)/b⌉ blocks before its end), and a request that holds a prefix holds
of its own the blocks of its positions past the prefix's end, counted as a sequence of those positions alone.

A model with recurrent layers (Gated DeltaNet) holds, beside the K and V of its attention layers, a state of fixed
size per sequence: ``state_blocks`` blocks each request holds from its first position on, whatever its length
(vLLM's hybrid cache manager gives each sequence's state whole pages of the same pool)."""

from __future__ import annotations

from ..engine.count.attention import positions_held
from ..errors import UserError

# A part of a request's blocks: (blocks of the pool a block of positions takes, the window of those layers, their
# chunk); None, None: full layers, which keep every block.
Part = tuple[int, int | None, int | None]
# A model whose every attention layer is full: a block is every layer's K and V of block_size positions.
EVERY_LAYER: tuple[Part, ...] = ((1, None, None),)
# The positions a request may hold where no part of it grows past a bound (every layer sliding or chunked).
UNBOUNDED = 2**62


def kv_blocks(positions: int, block_size: int, parts: tuple[Part, ...] = EVERY_LAYER) -> int:
    """The blocks of ``block_size`` positions a sequence of ``positions`` takes in its attention layers: each
    part's ``engine.count.attention.positions_held`` in blocks, times the part's blocks."""
    if parts == EVERY_LAYER:
        return -(-positions // block_size)
    return sum(n * (positions_held(positions, w, c, block_size) // block_size) for n, w, c in parts)


class BlockPool:
    """``total`` blocks of ``block_size`` positions; each request's blocks by its id; ``parts``: what a request's
    positions take in each kind of layer (the module's docstring)."""

    def __init__(self, total: int, block_size: int, state_blocks: int = 0,
                 parts: tuple[Part, ...] = EVERY_LAYER) -> None:
        self.check_block_size(block_size)
        if total < 1:
            raise UserError("no room for a single KV block: the weights and activations fill the GPU")
        self.total = total
        self.block_size = block_size
        self.state_blocks = state_blocks
        self.parts = parts
        self._plain = parts == EVERY_LAYER
        # Where every part is sliding or chunked: the blocks of positions past which no part takes another.
        self._bound = None if any(w is None and c is None for _, w, c in parts) else max(
            positions_held(UNBOUNDED, w, c, block_size) // block_size for _, w, c in parts)
        self.held: dict[int, int] = {}  # each request's own blocks
        self.used = 0
        self.peak = 0
        # A cached prefix's id → [its blocks, the requests holding it, the blocks of positions it covers].
        self.prefixes: dict[int, list[int]] = {}
        self.idle = 0  # the blocks of cached prefixes no request holds: free, until evicted
        # A request → (the prefix it holds, the blocks of positions of that prefix it holds).
        self.attached: dict[int, tuple[int, int]] = {}

    @staticmethod
    def check_block_size(block_size: int) -> None:
        if not 1 <= block_size <= 2**16:
            raise UserError(f"--block-size {block_size:,}: give 1 to {2**16:,} positions")

    def _kv_blocks(self, positions: int) -> int:
        return kv_blocks(positions, self.block_size, self.parts)

    def _positions_in(self, blocks: int) -> int:
        """The most positions a sequence's attention layers hold in ``blocks`` blocks (:meth:`_kv_blocks`'s
        inverse; UNBOUNDED where every part has stopped growing within them)."""
        b = self.block_size
        if self._plain:
            return blocks * b
        if blocks <= 0:
            return 0
        if self._bound is not None and self._kv_blocks(self._bound * b) <= blocks:
            return UNBOUNDED
        # A full part takes at least one block a block of positions: at most ``blocks`` of those fit.
        low, high = 0, blocks if self._bound is None else self._bound
        while low < high:
            mid = (low + high + 1) // 2
            if self._kv_blocks(mid * b) <= blocks:
                low = mid
            else:
                high = mid - 1
        return low * b

    @property
    def most_positions(self) -> int:
        """The most positions one request can hold: every block but its state's."""
        return self._positions_in(max(0, self.total - self.state_blocks))

    def blocks_for(self, positions: int) -> int:
        """The blocks a request of ``positions`` holds: its positions', and its state's once it has any."""
        return self._kv_blocks(positions) + (self.state_blocks if positions > 0 else 0)

    def _shared(self, rid: int) -> int:
        """The positions of request ``rid`` that are a cached prefix's (0: none)."""
        return self.attached[rid][1] * self.block_size if rid in self.attached else 0

    def _own(self, rid: int, positions: int) -> int:
        """The blocks request ``rid`` holds of its own at ``positions``: those of its positions past its prefix,
        counted as a sequence of those alone, and its state once it has any."""
        return self._kv_blocks(positions - self._shared(rid)) + (self.state_blocks if positions > 0 else 0)

    def holds(self, rid: int) -> int:
        """The blocks request ``rid``'s positions are in: its own and its prefix's."""
        return self.held.get(rid, 0) + self.attached.get(rid, (0, 0))[1]

    def needs(self, rid: int, positions: int) -> int:
        """The blocks request ``rid`` takes to hold ``positions`` in all (0 or less: none)."""
        return self._own(rid, positions) - self.held.get(rid, 0)

    def opens(self, rid: int, positions: int) -> int:
        """The blocks request ``rid``, holding ``positions``, takes for one more."""
        if self._plain:
            return 0 if positions % self.block_size else 1
        return self._own(rid, positions + 1) - self._own(rid, positions)

    def can_grow(self, rid: int, positions: int) -> bool:
        """Whether request ``rid`` can hold ``positions`` in all."""
        return self.needs(rid, positions) <= self.total - self.used

    def room(self, rid: int, positions: int) -> int:
        """How many positions request ``rid``, holding ``positions`` now, can add with the blocks left."""
        blocks = (self.held.get(rid, 0) + self.total - self.used
                  - (self.state_blocks if positions or self.holds(rid) else 0))
        return max(0, self._positions_in(blocks) - (positions - self._shared(rid)))

    def grow(self, rid: int, positions: int) -> None:
        """Request ``rid`` holds ``positions`` in all (it has room: :meth:`can_grow`)."""
        need = self.needs(rid, positions)
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
        for pid in [p for p, entry in self.prefixes.items() if entry[1] == 0]:
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
        """The blocks of positions prefix ``pid`` covers in the cache (0: not cached)."""
        entry = self.prefixes.get(pid)
        return 0 if entry is None else entry[2]

    def attach(self, rid: int, pid: int, blocks: int) -> None:
        """Request ``rid`` holds the first ``blocks`` blocks of positions of cached prefix ``pid`` (at most all
        of them)."""
        entry = self.prefixes[pid]
        if entry[1] == 0:
            self.idle -= entry[0]
            self.used += entry[0]
            self.peak = max(self.peak, self.used)
        entry[1] += 1
        self.attached[rid] = (pid, blocks)

    def share(self, rid: int, pid: int, blocks: int, positions: int) -> None:
        """Request ``rid``, holding ``positions``, makes its first ``blocks`` blocks of positions prefix
        ``pid``'s, which it holds. With sliding or chunked layers the prefix keeps its own last window's blocks
        beside the request's (the module's docstring): where the blocks left cannot hold them, the prefix is not
        cached."""
        shared = blocks * self.block_size
        prefix = self._kv_blocks(shared)
        mine = self._kv_blocks(positions) - self._kv_blocks(positions - shared)  # its blocks that are the prefix's
        more = prefix - mine  # 0 without sliding or chunked layers: the prefix is the request's first blocks
        if more > 0:
            free = self.total - self.used - self.idle
            if more > free:
                self._evict(more - free)
            if more > self.total - self.used - self.idle:
                return
            self.used += more
            self.peak = max(self.peak, self.used)
        self.held[rid] -= mine
        self.prefixes[pid] = [prefix, 1, blocks]
        self.attached[rid] = (pid, blocks)
