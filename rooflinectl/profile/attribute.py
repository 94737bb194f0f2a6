"""Charge each profiled kernel (or, on the CPU, each CPU op) to the engine's op it serves. Pure: no torch, no I/O.

An :class:`Event` is one kernel with its device time (or one CPU op with its self CPU time), the rooflinectl
ranges it ran inside (``profile.ranges`` opens them, one per module or function the engine has an op for) and the
CPU calls between the innermost range and the event: on the GPU the aten op that launched the kernel and its
callers, on the CPU the op itself and its callers (``aten::linear`` > ``aten::addmm``).

The rules, in order:

1. The innermost range decides where an event goes (:data:`CONTAINERS` for the ranges that are not an op of
   their own). An event in the harness's range (the cache's position reset before each step) is not part of the
   step: counted apart, in no total. An event in no range, or only in a decoder layer's, is *unattributed*.
2. Inside an op's range an event is the op's *work* when its calls are what the roofline counts for the op's kind
   (:func:`is_work`): the matmul of a projection, the attention kernel of the core, the gather of the embedding,
   the index copy of the KV write, the arithmetic of a norm or an activation. Anything else in the range (a cast,
   a copy, a mask, repeat_kv's expand-and-copy of the KV heads) is that op's *overhead*, listed by kernel name.
3. The naive attention core (eager attention: ``qk``, ``softmax``, ``pv``) is one range: its first matmul call is
   ``qk``, its softmax call ``softmax``, its second matmul call ``pv``; the other events in it go as overhead to
   the core op last started (the mask add after ``qk`` is qk's, the cast back after softmax is softmax's).

So every event is in exactly one of: an op's work, an op's overhead, unattributed, the harness; and the step's
profiled total is the sum of the first three (:func:`attribute` checks it with ``math.fsum``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# Range labels that are not an op of the engine, and where their own events go.
CORE = "attention_core"  # the attention interface's function: the engine's core ops (flash: attention)
SELF_ATTN = "self_attn"  # the attention module around the projections: its reshapes go to the core as overhead
MLP = "mlp"  # the MLP module: the gate product SiLU(gate)·up is computed here, outside act_fn, and is act's work
ROPE_TABLES = "rope_tables"  # the model's rotary embedding module (cos/sin of the positions): rope's overhead
LAYER = "layer"  # a decoder layer: what runs in it outside every op is unattributed
HARNESS = "harness"  # rooflinectl's own work before the step (the cache position's reset): not the step's
CONTAINERS = (CORE, SELF_ATTN, MLP, ROPE_TABLES, LAYER, HARNESS)

# CPU calls by what they do. A call name is the aten op's name as the profiler gives it.
MATMUL_CALLS = frozenset({"aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                          "aten::_addmm_activation", "aten::einsum"})
SOFTMAX_CALLS = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
# Copies of data that the roofline does not count: casts, layout copies, concatenation and repetition of KV heads.
MOVE_CALLS = frozenset({"aten::to", "aten::_to_copy", "aten::copy_", "aten::clone", "aten::contiguous", "aten::cat",
                        "aten::stack", "aten::repeat", "aten::repeat_interleave", "aten::type_as"})
# Masks and the index arithmetic that builds them.
MASK_CALLS = frozenset({"aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::fill_", "aten::zero_",
                        "aten::zeros", "aten::zeros_like", "aten::ones", "aten::ones_like", "aten::full",
                        "aten::full_like", "aten::arange", "aten::triu", "aten::tril", "aten::eq", "aten::ne",
                        "aten::lt", "aten::le", "aten::gt", "aten::ge", "aten::bitwise_and", "aten::bitwise_or",
                        "aten::bitwise_not", "aten::logical_and", "aten::logical_or", "aten::logical_not",
                        "aten::__and__", "aten::__or__", "aten::any", "aten::all", "aten::index"})
# Views and allocations: no kernel on a GPU, a little CPU time on the CPU.
VIEW_CALLS = frozenset({"aten::view", "aten::reshape", "aten::_reshape_alias", "aten::_unsafe_view",
                        "aten::transpose", "aten::t", "aten::permute", "aten::expand", "aten::expand_as",
                        "aten::unsqueeze", "aten::squeeze", "aten::slice", "aten::select", "aten::as_strided",
                        "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::detach", "aten::alias",
                        "aten::lift_fresh", "aten::resolve_conj", "aten::resolve_neg", "aten::split",
                        "aten::chunk", "aten::narrow", "aten::flatten", "aten::unbind", "aten::numpy_T"})
# The work of a gather or a cache write (kinds gather and copy): the row gather, the index copy.
COPY_WORK_CALLS = frozenset({"aten::embedding", "aten::index_select", "aten::index_copy_", "aten::index_copy",
                             "aten::index_put_", "aten::_index_put_impl_", "aten::copy_", "aten::_to_copy",
                             "aten::to", "aten::slice_scatter"})


def is_sdpa_call(call: str) -> bool:
    """torch's fused attention and the backends it dispatches to (flash, memory-efficient, cuDNN, math)."""
    return call == "aten::scaled_dot_product_attention" or call.startswith("aten::_scaled_dot_product") or \
        call.startswith("aten::_flash_attention") or call.startswith("aten::_efficient_attention")


@dataclass(frozen=True)
class Range:
    """One rooflinectl range around a module's or function's call: its label and which call it was."""

    label: str  # an engine op's name, or one of CONTAINERS
    id: int  # tells two calls of one label apart (layer 0's q_proj from layer 1's)


@dataclass(frozen=True)
class Event:
    """One kernel (device time) or one CPU op (self CPU time)."""

    name: str  # the kernel's name, or the CPU op's
    time_s: float
    ranges: tuple[Range, ...] = ()  # outermost first
    calls: tuple[str, ...] = ()  # CPU ops from the innermost range down to the event or its launcher, outermost first
    call_id: int = -1  # which top-level call (calls[0]) it came from: a matmul's kernels share it
    start_s: float = 0.0  # for ordering: the naive core's calls are taken in the order they ran


@dataclass(frozen=True)
class NameTime:
    """Events of one (shortened) kernel name: their time together and how many."""

    name: str
    time_s: float
    events: int


@dataclass(frozen=True)
class OpTime:
    """One engine op's events in the step: its work, and its overhead by kernel name (largest first)."""

    op: str
    time_s: float  # the work's events
    events: int
    overhead: tuple[NameTime, ...]

    @property
    def overhead_s(self) -> float:
        return math.fsum(o.time_s for o in self.overhead)


@dataclass(frozen=True)
class Attribution:
    ops: tuple[OpTime, ...]  # in the engine's order, every op of the step (0 events where none ran)
    unattributed: tuple[NameTime, ...]  # by name, largest first ("in a decoder layer: …" or "outside: …")
    harness: NameTime | None  # the harness's events, outside the step
    total_s: float  # every event of the step: Σ work + Σ overhead + Σ unattributed
    events: int

    @property
    def work_s(self) -> float:
        return math.fsum(o.time_s for o in self.ops)

    @property
    def overhead_s(self) -> float:
        return math.fsum(o.overhead_s for o in self.ops)

    @property
    def unattributed_s(self) -> float:
        return math.fsum(u.time_s for u in self.unattributed)


# --- kernel names --------------------------------------------------------------------------------------------

_FUNCTOR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:Functor|_kernel_cuda|_kernel_impl|Ops|_kernel)[A-Za-z0-9_]*)")


def short_name(name: str) -> str:
    """A kernel's name without its template arguments, keeping the functor that says what it does:
    'void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(...)::{lambda...}>(...)' is
    'elementwise_kernel<direct_copy_kernel_cuda>'. A CPU op's name ('aten::addmm') is kept."""
    text = name.removeprefix("void ").replace("at::native::", "").replace("(anonymous namespace)::", "")
    if "<" not in text:
        return text.split("(")[0].strip() or name
    base, rest = text.split("<", 1)
    base = base.split("::")[-1].strip()
    inner = [m for m in _FUNCTOR.findall(rest) if m != base]
    if inner:
        return f"{base}<{inner[0]}>"
    # No functor: the first template argument where it is a name (cutlass's kernel traits, a dtype), not a size.
    first = re.split(r"[,<>(]", rest, maxsplit=1)[0].strip()
    return f"{base}<{first}>" if first and not first[0].isdigit() else base


# --- the rules -----------------------------------------------------------------------------------------------


def is_work(kind: str, calls: Sequence[str]) -> bool:
    """Whether an event whose CPU calls are ``calls`` is work the roofline counts for an op of ``kind``
    (engine.count.op.OpKind). An event with no call (a kernel whose launch no aten op owns) is never work."""
    names = set(calls)
    if not names:
        return False
    if kind in ("linear", "matmul"):
        return bool(names & MATMUL_CALLS)
    if kind in ("gather", "copy"):
        return bool(names & COPY_WORK_CALLS)
    if kind == "attention":
        return any(is_sdpa_call(c) for c in names)
    # norm, elementwise: the arithmetic, not the casts, copies, masks or views around it.
    return not names & (MOVE_CALLS | MASK_CALLS | VIEW_CALLS)


@dataclass
class _Acc:
    time: list[float] = field(default_factory=list)
    overhead: dict[str, list[float]] = field(default_factory=dict)


def attribute(events: Iterable[Event], ops: Sequence[tuple[str, str]], core: Sequence[str]) -> Attribution:
    """Charge ``events`` to ``ops`` (the engine's (name, kind) of every op of the step, in order). ``core``: the
    engine's attention-core ops, ``("attention",)`` for flash or ``("qk", "softmax", "pv")`` for naive, which
    the core range's events go to (module docstring, rule 3)."""
    kinds = dict(ops)
    if len(core) not in (1, 3) or any(c not in kinds for c in core):
        raise ValueError(f"attention core {core} is not among the step's ops")  # a bug: the caller's list
    acc = {name: _Acc() for name, _ in ops}
    unattributed: dict[str, list[float]] = {}
    harness: list[float] = []
    # The naive core: per call of the core range, which core op each top-level call is, by the order they ran.
    core_state: dict[int, tuple[int, dict[int, str]]] = {}  # range id -> (matmuls seen, call id -> op)
    every: list[float] = []
    ordered = sorted(events, key=lambda e: e.start_s)
    for e in ordered:
        inner = e.ranges[-1] if e.ranges else None
        if inner is not None and inner.label == HARNESS:
            harness.append(e.time_s)
            continue
        every.append(e.time_s)
        op, overhead = _target(e, inner, core, core_state, kinds)
        if op is None:
            where = "in a decoder layer" if any(r.label == LAYER for r in e.ranges) else "outside the layers"
            unattributed.setdefault(f"{short_name(e.name)} ({where})", []).append(e.time_s)
            continue
        if overhead is False or (overhead is None and is_work(kinds[op], e.calls)):
            acc[op].time.append(e.time_s)
        else:
            acc[op].overhead.setdefault(short_name(e.name), []).append(e.time_s)

    def by_name(groups: dict[str, list[float]]) -> tuple[NameTime, ...]:
        items = [NameTime(n, math.fsum(t), len(t)) for n, t in groups.items()]
        return tuple(sorted(items, key=lambda x: (-x.time_s, x.name)))

    result = Attribution(
        ops=tuple(OpTime(name, math.fsum(acc[name].time), len(acc[name].time), by_name(acc[name].overhead))
                  for name, _ in ops),
        unattributed=by_name(unattributed),
        harness=NameTime("harness", math.fsum(harness), len(harness)) if harness else None,
        total_s=math.fsum(every),
        events=len(every),
    )
    parts = [t for name in acc for t in acc[name].time + [x for v in acc[name].overhead.values() for x in v]]
    parts += [t for v in unattributed.values() for t in v]
    if len(parts) != len(every):
        raise ValueError("an event was lost or charged twice")  # a bug here
    return result


def _target(e: Event, inner: Range | None, core: Sequence[str], state: dict[int, tuple[int, dict[int, str]]],
            kinds: dict[str, str]) -> tuple[str | None, bool | None]:
    """(the op ``e`` is charged to, None: unattributed; True: that op's overhead, False: its work, None: as
    :func:`is_work` judges by the op's kind)."""
    if inner is None or inner.label == LAYER:
        return None, None
    label = inner.label
    if label == ROPE_TABLES:
        return ("rope", True) if "rope" in kinds else (None, None)
    if label == MLP:
        return ("act", None) if "act" in kinds else (None, None)
    if label == SELF_ATTN:
        return core[-1], True
    if label == CORE:
        if len(core) == 1:
            return core[0], None
        return _naive_core(e, inner.id, core, state)
    if label in kinds:
        return label, None
    return None, None  # a range of an op this step does not have (a bug in ranges): shown, never hidden


def _naive_core(e: Event, range_id: int, core: Sequence[str],
                state: dict[int, tuple[int, dict[int, str]]]) -> tuple[str, bool]:
    """Rule 3: qk, softmax, pv by the calls in the order they ran; other events to the core op last started."""
    qk, softmax, pv = core
    matmuls, seen = state.get(range_id, (0, {}))
    names = set(e.calls)
    op: str | None = seen.get(e.call_id)
    if op is None and names & MATMUL_CALLS:
        op = qk if matmuls == 0 else pv
        matmuls += 1
    elif op is None and names & SOFTMAX_CALLS:
        op = softmax
    if op is not None:
        seen[e.call_id] = op
        state[range_id] = (matmuls, seen)
        return op, not (names & (MATMUL_CALLS | SOFTMAX_CALLS))
    last = list(seen.values())[-1] if seen else qk
    state[range_id] = (matmuls, seen)
    return last, True
