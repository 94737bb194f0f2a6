"""Run a Gluon kernel's own source on the CPU, for the parts of Gluon that rooflinectl's Hopper kernel uses.

Gluon has no interpreter (TRITON_INTERPRET runs triton.jit kernels only), so this one executes the kernel's Python
functions as written, with the names they call bound to emulations in torch: each program of the grid in turn, each
partition of ``gl.warp_specialize`` in a thread of its own. Products multiply the 16-bit inputs exactly and
accumulate in fp32, as the tensor cores do. What it checks beyond the values:

- mbarriers keep their phase, pending arrivals and expected bytes as the hardware does (``wait(bar, parity)``
  returns once the phase of that parity has completed; a fresh barrier's parity-1 phase counts as completed); a wait
  that does not return within ``WAIT_S`` raises ``Deadlock``;
- a TMA copy fills its box (zeros outside the tensor, per dimension) on a timer thread after a random delay, the
  destination NaN until then, and completes its bytes on its barrier;
- what each partition may see, as the hardware orders it: a partition knows a copy has landed, or that another
  partition's products have finished reading a buffer, only through an mbarrier phase it waited for, which the
  copy's bytes or an arrival completed (an arrival publishes all its partition knows: the reads it retired, what
  it waited for). A product issued on a buffer whose last copy
  its partition has not waited for, or a copy into a buffer whose readers' retirement its partition has not waited
  for, raises ``Race`` whatever the timing; so does a shared operand that changes between a product's issue and the
  wait that retires it (the other partitions run for a random while first), and a result used before that wait.

What it cannot check: layouts, swizzles, registers and anything else the compiler decides (the sm_90 compile tests
and the GPU do).
"""

from __future__ import annotations

import itertools
import random
import threading
import time
import types
from math import prod

import torch

WAIT_S = 20.0


class Deadlock(RuntimeError):
    pass


class Race(RuntimeError):
    pass


class _Barrier:
    """An mbarrier; ``seen`` is every event (a copy landed, a product's reads retired) that a completed phase
    published: what a partition that waits on it may rely on."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.count = self.pending = self.tx = self.phase = 0
        self.events: set[int] = set()
        self.seen: set[int] = set()

    def init(self, count: int) -> None:
        with self.cv:
            self.count = self.pending = count

    def _settle(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            self.seen |= self.events
            self.events = set()
            self.cv.notify_all()

    def arrive(self, events: set[int], count: int = 1, tx: int = 0) -> None:
        with self.cv:
            self.events |= events
            self.tx += tx
            self.pending -= count
            if self.pending < 0:
                raise Race("more arrivals on an mbarrier than its count")
            self._settle()

    def complete_tx(self, nbytes: int, event: int) -> None:
        with self.cv:
            self.events.add(event)
            self.tx -= nbytes
            self._settle()

    def wait(self, parity: int) -> set[int]:
        with self.cv:
            if not self.cv.wait_for(lambda: (self.phase & 1) != parity, timeout=WAIT_S):
                raise Deadlock(f"an mbarrier wait on parity {parity} did not return in {WAIT_S:.0f} s")
            return set(self.seen)


class _Barriers:
    def __init__(self, n: int) -> None:
        self.bars = [_Barrier() for _ in range(n)]

    def index(self, i: int) -> _Barrier:
        return self.bars[i]


class _Smem:
    """A shared-memory buffer or a view of one (index, slice, permute, reshape share its storage)."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @property
    def shape(self) -> list[int]:
        return list(self.t.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.t.dtype

    @property
    def span(self) -> tuple[int, int]:
        """The byte addresses [first, last] it covers."""
        last = sum((n - 1) * st for n, st in zip(self.t.shape, self.t.stride()))
        return self.t.data_ptr(), self.t.data_ptr() + (last + 1) * self.t.element_size() - 1

    def index(self, i: int) -> _Smem:
        return _Smem(self.t[i])

    def slice(self, start: int, length: int, dim: int = 0) -> _Smem:
        return _Smem(self.t.narrow(dim, start, length))

    def permute(self, order) -> _Smem:
        return _Smem(self.t.permute(*order))

    def reshape(self, shape) -> _Smem:
        return _Smem(self.t.view(*shape))


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


class _MBarrierLayout:
    pass


class _Ptr:
    """A pointer into a tensor's storage, plus element offsets."""

    def __init__(self, base: torch.Tensor, offs=0) -> None:
        self.base, self.offs = base, offs

    def __add__(self, offs) -> _Ptr:
        return _Ptr(self.base, self.offs + offs)


class _BlockType:
    def __init__(self, shape: list[int], dtype: torch.dtype) -> None:
        self.shape = list(shape)
        self.nbytes = prod(shape) * torch.empty((), dtype=dtype).element_size()


class _Desc:
    """The kernel's view of a host TMA descriptor: its tensor, box and shared layout."""

    def __init__(self, host) -> None:
        self.tensor = host.base.view(*host.shape)
        self.dtype = self.tensor.dtype
        self.layout = host.layout
        self.block_type = _BlockType(host.block_shape, self.dtype)


class _Token:
    """An asynchronous product in flight: its operands as read at issue, and its result once retired."""

    def __init__(self, a, b, acc, use_acc: bool, read: int) -> None:
        self.a, self.b, self.acc, self.use_acc, self.read = a, b, acc, use_acc, read
        self.issued = [x.t.clone() if isinstance(x, _Smem) else x for x in (a, b)]
        self.result: torch.Tensor | None = None

    def retire(self) -> None:
        if any(isinstance(x, _Smem) and not torch.equal(x.t, y) for x, y in zip((self.a, self.b), self.issued)):
            raise Race("a shared buffer was rewritten while a product read it")
        a, b = (y.to(torch.float32) for y in self.issued)
        self.result = a @ b + (self.acc if self.use_acc else 0.0)


class Emulator:
    """The bindings a Gluon kernel's functions run against, and the launch."""

    def __init__(self, seed: int = 0, max_delay_s: float = 2e-3) -> None:
        self.rng = random.Random(seed)
        self.max_delay_s = max_delay_s
        self.pid: tuple[int, ...] = (0, 0, 0)
        self.local = threading.local()
        self.timers: list[threading.Timer] = []
        self.ids = itertools.count()
        self.lock = threading.Lock()
        self.copies: list[tuple[tuple[int, int], int]] = []  # (span, event) of each copy, latest last
        self.reads: list[tuple[tuple[int, int], int]] = []  # (span, event) of each product's shared operands

    def _partition(self) -> None:
        self.local.pending = []  # products issued, not yet retired, oldest first
        self.local.known: set[int] = set()  # events this partition has retired or waited for

    # ---- the language ----
    def gl(self) -> types.SimpleNamespace:
        def allocate_shared_memory(dtype, shape, layout, value=None):
            if isinstance(layout, _MBarrierLayout):
                return _Barrier() if list(shape) == [1] else _Barriers(shape[0])
            return _Smem(torch.full(list(shape), float("nan"), dtype=dtype))

        def warp_specialize(functions_and_args, worker_num_warps, worker_num_regs=None):
            errors: list[BaseException] = []

            def run(fn, args):
                self._partition()
                try:
                    fn(*args)
                except BaseException as err:  # re-raised below, first one wins
                    errors.append(err)

            threads = [threading.Thread(target=run, args=fa, daemon=True) for fa in functions_and_args]
            for t in threads:
                t.start()
            for t in threads:
                t.join(WAIT_S * 3)
            if errors:
                raise errors[0]
            if any(t.is_alive() for t in threads):
                raise Deadlock("a partition did not finish")

        def store(ptr: _Ptr, value, mask=None):
            offs, value = torch.broadcast_tensors(torch.as_tensor(ptr.offs), value)
            keep = torch.ones_like(offs, dtype=torch.bool) if mask is None else torch.broadcast_to(mask, offs.shape)
            ptr.base.view(-1)[offs[keep]] = value[keep].to(ptr.base.dtype)

        def scalar_or(fn, op):
            return lambda a, b: fn(a, b) if torch.is_tensor(a) or torch.is_tensor(b) else op(a, b)

        return types.SimpleNamespace(
            constexpr=lambda v=None: v, static_range=range, program_id=lambda axis: self.pid[axis],
            cdiv=lambda a, b: -(-a // b), minimum=scalar_or(torch.minimum, min), maximum=scalar_or(torch.maximum, max),
            arange=lambda start, end, layout=None: torch.arange(start, end, dtype=torch.int32),
            full=lambda shape, value, dtype, layout=None: torch.full(list(shape), value, dtype=dtype),
            zeros=lambda shape, dtype, layout=None: torch.zeros(list(shape), dtype=dtype),
            expand_dims=lambda x, axis: x.unsqueeze(axis), where=torch.where, exp2=torch.exp2,
            max=lambda x, axis: torch.amax(x, dim=axis), sum=lambda x, axis: x.sum(dim=axis),
            convert_layout=lambda x, layout, assert_trivial=False: x, allocate_shared_memory=allocate_shared_memory,
            warp_specialize=warp_specialize, store=store,
            NVMMADistributedLayout=lambda **kw: None, DotOperandLayout=lambda **kw: None,
            SliceLayout=lambda dim, parent: None,
            float32=torch.float32, float16=torch.float16, bfloat16=torch.bfloat16, int32=torch.int32,
            int64=torch.int64,
        )

    def mbarrier(self) -> types.SimpleNamespace:
        def arrive(bar: _Barrier, count: int = 1, pred=True, tx: int = 0) -> None:
            bar.arrive(self.local.known, count, tx)  # a release: everything the partition knows, with it

        def wait(bar: _Barrier, phase: int, pred=True, deps=()) -> None:
            self.local.known |= bar.wait(phase)

        return types.SimpleNamespace(
            MBarrierLayout=_MBarrierLayout, init=lambda bar, count: bar.init(count),
            expect=lambda bar, nbytes, pred=True: arrive(bar, 1, tx=nbytes), arrive=arrive, wait=wait,
        )

    def tma_load(self, desc: _Desc, coord, bar: _Barrier, dest: _Smem, pred=True) -> None:
        span = dest.span
        with self.lock:
            unknown = [e for s, e in self.reads if _overlap(s, span) and e not in self.local.known]
            event = next(self.ids)
            self.copies.append((span, event))
        if unknown:
            raise Race("a copy into a shared buffer before waiting for its readers to be done with it")
        box = dest.shape
        src = desc.tensor
        block = torch.zeros(box, dtype=src.dtype)
        take_src, take_box = [], []
        for c, n, size in zip(coord, box, src.shape):
            lo, hi = max(int(c), 0), min(int(c) + n, size)
            take_src.append(slice(lo, max(lo, hi)))
            take_box.append(slice(lo - int(c), lo - int(c) + max(0, hi - lo)))
        block[tuple(take_box)] = src[tuple(take_src)]
        dest.t.fill_(float("nan"))  # its contents are undefined until the copy lands

        def land():
            dest.t.copy_(block)
            bar.complete_tx(desc.block_type.nbytes, event)

        timer = threading.Timer(self.rng.uniform(0, self.max_delay_s), land)
        self.timers.append(timer)
        timer.start()

    def warpgroup_mma(self, a, b, acc, *, use_acc=True, is_async=False, **_):
        spans = [x.span for x in (a, b) if isinstance(x, _Smem)]
        with self.lock:
            for span in spans:
                last = [e for s, e in self.copies if _overlap(s, span)]
                if last and last[-1] not in self.local.known:
                    raise Race("a product on a shared buffer before waiting for the copy into it")
            read = next(self.ids)
            self.reads.extend((s, read) for s in spans)
        token = _Token(a, b, acc, bool(use_acc), read)
        self.local.pending.append(token)
        if is_async:
            return token
        return self.warpgroup_mma_wait(0, deps=(token,))

    def warpgroup_mma_wait(self, num_outstanding=0, deps=()):
        time.sleep(self.rng.uniform(0, self.max_delay_s))  # the products take time; the other partitions run
        pending = self.local.pending
        while len(pending) > num_outstanding:
            token = pending.pop(0)
            token.retire()
            self.local.known.add(token.read)
        out = []
        for d in deps:
            if isinstance(d, _Token):
                if d.result is None:
                    raise Race("a product's result used before a wait retired it")
                d = d.result
            out.append(d)
        return out[0] if len(out) == 1 else tuple(out)

    # ---- the launch ----
    def bind(self, module) -> dict:
        """The module's Gluon functions as plain functions of these bindings, by name."""
        env = dict(vars(module))
        env.update(gl=self.gl(), mbarrier=self.mbarrier(), _tma_load=self.tma_load, warpgroup_mma=self.warpgroup_mma,
                   warpgroup_mma_wait=self.warpgroup_mma_wait)
        for name, obj in vars(module).items():
            if getattr(obj, "is_gluon", lambda: False)():
                fn = obj.fn
                env[name] = types.FunctionType(fn.__code__, env, fn.__name__, fn.__defaults__, fn.__closure__)
        return env

    def launch(self, module, kernel_name: str, grid, args, options: dict) -> None:
        """Run every program of ``grid`` of the module's kernel on ``args`` (host descriptors, tensors for pointers,
        scalars) and the constexprs among ``options`` (launch options such as num_warps are dropped)."""
        kernel = self.bind(module)[kernel_name]
        names = kernel.__code__.co_varnames[:kernel.__code__.co_argcount]
        bound = [_Desc(a) if hasattr(a, "block_shape") else _Ptr(a) if torch.is_tensor(a) else a for a in args]
        consts = {k: v for k, v in options.items() if k in names}
        grid = tuple(grid) + (1,) * (3 - len(grid))
        for z in range(grid[2]):
            for y in range(grid[1]):
                for x in range(grid[0]):
                    self.pid = (x, y, z)
                    self.copies, self.reads = [], []  # a program's shared memory is its own
                    self._partition()
                    kernel(*bound, **consts)
                    for timer in self.timers:
                        timer.join()
                    self.timers.clear()
