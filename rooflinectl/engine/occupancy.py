"""Occupancy: how many blocks (programs) and warps of a kernel one SM holds at once, which limit binds, how many
waves a grid takes, and what change would raise it. Pure: a GPU's ``limits`` in, numbers out; no device, no torch.

The arithmetic is NVIDIA's CUDA Occupancy Calculator, as the CUDA toolkit ships it in ``include/cuda_occupancy.h``
(``cudaOccMaxActiveBlocksPerMultiprocessor``, CUDA 12.x; the same rules as the retired
``CUDA_Occupancy_Calculator.xls`` and Nsight Compute's occupancy calculator). Four limits, each in blocks per SM:

- warps:  ``max_warps_per_sm // warps_per_block``, with ``warps_per_block = ceil(threads / warp_size)``
  (``cudaOccMaxBlocksPerSMWarpsLimit``: a partial warp occupies a whole warp slot).
- registers: registers are allocated per warp, ``regs × warp_size`` rounded up to ``register_alloc_unit``
  (256 on every compute capability from 3.x to 9.x: ``cudaOccRegAllocationGranularity``). With a 32-thread warp
  that is the same as rounding registers per thread up to a multiple of 256 / 32 = 8: a kernel of 33 registers
  is charged 40. The register file is split among the SM's sub-partitions (four processing blocks on every
  architecture since Volta: ``cudaOccSubPartitionsPerMultiprocessor``), and a warp's registers come from one of
  them, so the warps that fit are ``(registers_per_sm / 4) // regs_per_warp × 4`` — fewer than
  ``registers_per_sm // regs_per_warp`` when the per-warp allocation does not divide a sub-partition
  (``cudaOccMaxBlocksPerSMRegsLimit``). A block whose registers exceed ``max_registers_per_block`` cannot launch;
  the hardware makes that check as if the block's warps were rounded up to a multiple of the sub-partitions.
- shared memory: a block is charged its shared memory plus the driver's ``reserved_smem_per_block_bytes``
  (1 KiB from Ampere on), rounded up to ``smem_alloc_unit_bytes`` (128 B on 8.x and 9.x, 256 B before:
  ``cudaOccSMemAllocationGranularity``); blocks = ``smem_per_sm // that`` with the SM's carveout at its largest,
  ``smem_per_sm_kib`` (the header's default, ``SHAREDMEM_CARVEOUT_DEFAULT``, uses ``sharedMemPerMultiprocessor``).
  The per-block limit is ``max_smem_per_block_kib`` (the opt-in maximum; ``cudaOccSMemPerBlock`` adds the reserved
  share on top).
- blocks: ``max_blocks_per_sm``.

Active blocks = the smallest of the four; every limit equal to it binds (the header's ``limitingFactors``).
Occupancy = active warps / ``max_warps_per_sm``. Hopper's block-barrier limit (``numBlockBarriers``) allows twice
``max_blocks_per_sm`` for the one barrier a kernel has by default, so it never binds and is left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from ..errors import UserError
from ..specs.hardware import GPU
from ..units import plural

Limit = Literal["warps", "registers", "shared memory", "blocks"]
LIMITS: tuple[Limit, ...] = ("warps", "registers", "shared memory", "blocks")

KIB = 1024
# CUDA's largest grid: x up to 2^31 − 1 blocks, y and z up to 65,535 each (CUDA C++ Programming Guide, 'Technical
# Specifications per Compute Capability', every compute capability from 3.0 on).
MAX_GRID = (2**31 - 1) * 65535 * 65535
# The last wave of a grid counts as "mostly empty" when fewer than this share of its slots have a program.
MOSTLY_EMPTY = 0.5


def sub_partitions(gpu: GPU) -> int:
    """Processing blocks (sub-partitions) per SM, among which the register file is split.

    Four on every NVIDIA architecture the calculator knows except GP100 (compute capability 6.0), which has two
    (``cudaOccSubPartitionsPerMultiprocessor`` in cuda_occupancy.h; the Volta, Ampere and Hopper whitepapers draw
    each SM as four processing blocks).
    """
    return 2 if gpu.compute_capability == "6.0" else 4


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@dataclass(frozen=True)
class LimitResult:
    """One limit: how many blocks per SM it allows, and the arithmetic that gave it, in words."""

    name: Limit
    blocks: int | None  # None: this resource does not limit (a kernel of 0 registers)
    arithmetic: str


@dataclass(frozen=True)
class Suggestion:
    """A change of the launch that raises occupancy, and the occupancy it gives."""

    text: str
    threads_per_block: int
    registers_per_thread: int
    smem_per_block_bytes: int
    blocks_per_sm: int
    occupancy: float


@dataclass(frozen=True)
class Occupancy:
    gpu_id: str
    sm_count: int
    max_warps_per_sm: int
    # What was asked for
    threads_per_block: int
    registers_per_thread: int
    smem_per_block_bytes: int
    # What the SM allocates for it
    warps_per_block: int
    registers_per_warp: int  # allocated: regs × warp size rounded up to the allocation unit
    registers_per_block: int  # allocated
    smem_allocated_per_block_bytes: int  # requested + reserved, rounded up to the allocation unit
    limits: tuple[LimitResult, ...]
    blocks_per_sm: int
    grid: int | None = None
    suggestions: tuple[Suggestion, ...] = ()
    note: str | None = None  # a caveat on the method (a GPU that is not NVIDIA's)

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def threads_per_sm(self) -> int:
        return self.blocks_per_sm * self.threads_per_block

    @property
    def occupancy(self) -> float:
        """Active warps per SM over the most an SM can hold (the calculator's 'occupancy')."""
        return self.warps_per_sm / self.max_warps_per_sm

    @property
    def binding(self) -> tuple[Limit, ...]:
        """Every limit that allows exactly the active number of blocks."""
        return tuple(r.name for r in self.limits if r.blocks == self.blocks_per_sm)

    def limit(self, name: Limit) -> LimitResult:
        for r in self.limits:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def blocks_per_wave(self) -> int:
        """Blocks the whole GPU runs at once."""
        return self.blocks_per_sm * self.sm_count

    @property
    def waves(self) -> int | None:
        """ceil(grid / (blocks per SM × SMs)); None without a grid."""
        if self.grid is None:
            return None
        return -(-self.grid // self.blocks_per_wave)

    @property
    def last_wave_fill(self) -> float | None:
        """The share of the last wave's slots that have a block (1.0: the grid is a whole number of waves)."""
        if self.grid is None:
            return None
        waves = -(-self.grid // self.blocks_per_wave)
        return (self.grid - (waves - 1) * self.blocks_per_wave) / self.blocks_per_wave


# --- the calculator ------------------------------------------------------------------------------------------


def _shown(n: int, grouped: bool = False) -> str:
    """An input number for a message: in full up to 30 digits, else by its length (a 4,000-digit --grid is not
    echoed, and converting it to a float to shorten it would overflow)."""
    digits = len(str(abs(n)))
    if digits > 30:
        return f"a number of {digits:,} digits"
    return f"{n:,}" if grouped else str(n)


def _check(gpu: GPU, threads: int, regs: int, smem_bytes: int, grid: int | None) -> None:
    lim = gpu.limits
    if threads < 1 or threads > lim.max_threads_per_block:
        raise UserError(f"threads per block must be between 1 and {lim.max_threads_per_block} on {gpu.id}, "
                        f"got {_shown(threads)}")
    if regs < 0 or regs > lim.max_registers_per_thread:
        raise UserError(f"registers per thread must be between 0 and {lim.max_registers_per_thread} on {gpu.id}, "
                        f"got {_shown(regs)}")
    max_smem = int(lim.max_smem_per_block_kib * KIB)
    if smem_bytes < 0 or smem_bytes > max_smem:
        raise UserError(f"shared memory per block must be between 0 and {lim.max_smem_per_block_kib:g} KiB "
                        f"({max_smem:,} bytes) on {gpu.id}, got {_shown(smem_bytes, grouped=True)} bytes")
    if grid is not None and not 1 <= grid <= MAX_GRID:
        raise UserError(f"grid must be between 1 and {MAX_GRID:,} blocks (CUDA's largest grid), got "
                        f"{_shown(grid, grouped=True)}")


@dataclass(frozen=True)
class _Counts:
    """The calculator's numbers for one block shape, without the words (what the suggestion search evaluates
    many times); :func:`_limits` puts them in words."""

    warps: int  # per block: ceil(threads / warp_size)
    regs_per_warp: int  # allocated
    regs_per_block: int  # allocated
    regs_launch_check: int  # what the launch check compares with max_registers_per_block
    warps_fit: int | None  # warps the register file holds at these registers per thread (None: 0 registers)
    smem_alloc: int  # per block, reserved share included, rounded up
    by_warps: int
    by_regs: int | None  # None: a kernel of 0 registers is not limited by them
    by_smem: int | None  # None: a block of 0 bytes, with no reserved share, is not limited by it
    by_blocks: int
    cannot_launch: bool  # its registers exceed max_registers_per_block

    @property
    def blocks(self) -> int:
        """Active blocks per SM: the smallest limit; 0 when the block cannot launch or a limit lets none in."""
        if self.cannot_launch:
            return 0
        return min(b for b in (self.by_warps, self.by_regs, self.by_smem, self.by_blocks) if b is not None)


def _counts(gpu: GPU, threads: int, regs: int, smem_bytes: int) -> _Counts:
    """The four limits' arithmetic (the module's docstring states each rule). No validation of the inputs."""
    lim = gpu.limits
    warps = -(-threads // lim.warp_size)
    parts = sub_partitions(gpu)
    regs_per_warp = _round_up(regs * lim.warp_size, lim.register_alloc_unit)
    warps_fit = None if regs == 0 else lim.registers_per_sm // parts // regs_per_warp * parts
    # The hardware's launch check assumes the block's warps are spread over all sub-partitions.
    launch_check = max(regs_per_warp * _round_up(warps, parts), regs_per_warp * warps)
    smem_alloc = _round_up(smem_bytes + lim.reserved_smem_per_block_bytes, lim.smem_alloc_unit_bytes)
    return _Counts(
        warps=warps,
        regs_per_warp=regs_per_warp,
        regs_per_block=regs_per_warp * warps,
        regs_launch_check=launch_check,
        warps_fit=warps_fit,
        smem_alloc=smem_alloc,
        by_warps=lim.max_warps_per_sm // warps,
        by_regs=None if warps_fit is None else warps_fit // warps,
        by_smem=int(gpu.memory.smem_per_sm_kib * KIB) // smem_alloc if smem_alloc else None,
        by_blocks=lim.max_blocks_per_sm,
        cannot_launch=regs > 0 and launch_check > lim.max_registers_per_block,
    )


def _limits(
    gpu: GPU, threads: int, regs: int, smem_bytes: int
) -> tuple[_Counts, tuple[LimitResult, ...], str | None]:
    """(the counts, the four LimitResults with their arithmetic in words, why the block cannot launch or None).
    No validation of the inputs: callers check them."""
    lim = gpu.limits
    c = _counts(gpu, threads, regs, smem_bytes)
    warps, regs_per_warp, parts = c.warps, c.regs_per_warp, sub_partitions(gpu)
    warps_text = f"{lim.max_warps_per_sm} warps/SM ÷ {warps} warps/block"
    cannot_launch: str | None = None
    if c.warps_fit is None:
        regs_text = "a kernel of 0 registers is not limited by them"
    else:
        if c.cannot_launch:
            cannot_launch = (
                f"a block of {threads} threads × {regs} registers is allocated "
                f"{regs_per_warp:,} registers/warp × {warps} warps = {c.regs_per_block:,}"
                + (f" (the hardware checks {regs_per_warp:,} × {_round_up(warps, parts)} warps = "
                   f"{c.regs_launch_check:,})" if c.regs_launch_check > c.regs_per_block else "")
                + f", more than the {lim.max_registers_per_block:,} one block may have: it cannot launch"
            )
        per_part = lim.registers_per_sm // parts
        regs_text = (
            f"{regs} × {lim.warp_size} = {regs * lim.warp_size:,} regs/warp → {regs_per_warp:,} "
            f"(unit {lim.register_alloc_unit}); {per_part:,} per sub-partition ÷ {regs_per_warp:,} = "
            f"{per_part // regs_per_warp} warps × {parts} = {c.warps_fit} warps/SM ÷ {warps}"
        )
    requested = smem_bytes + lim.reserved_smem_per_block_bytes
    smem_text = (
        f"{smem_bytes:,} B + {lim.reserved_smem_per_block_bytes:,} B reserved = {requested:,} B → "
        f"{c.smem_alloc:,} B (unit {lim.smem_alloc_unit_bytes} B); "
        f"{int(gpu.memory.smem_per_sm_kib * KIB):,} B/SM ÷ {c.smem_alloc:,} B"
    )
    results = (
        LimitResult("warps", c.by_warps, warps_text),
        LimitResult("registers", c.by_regs, regs_text),
        LimitResult("shared memory", c.by_smem, smem_text),
        LimitResult("blocks", c.by_blocks, f"at most {plural(lim.max_blocks_per_sm, 'block')} per SM"),
    )
    return c, results, cannot_launch


def _blocks(gpu: GPU, threads: int, regs: int, smem_bytes: int) -> int:
    """Active blocks per SM; 0 when the block cannot launch or no limit lets one in."""
    return _counts(gpu, threads, regs, smem_bytes).blocks


def _regs_allow(gpu: GPU, threads: int, regs: int) -> int:
    """Blocks per SM that the register limit alone allows (0 if the block cannot launch)."""
    c = _counts(gpu, threads, regs, 0)
    return 0 if c.cannot_launch else (gpu.limits.max_blocks_per_sm if c.by_regs is None else c.by_regs)


def _method_note(gpu: GPU) -> str | None:
    """What to keep in mind about this GPU's answer: another vendor's chip, or limits no datasheet gives."""
    parts = []
    if gpu.vendor.upper() != "NVIDIA":
        parts.append(f"{gpu.vendor} GPU: NVIDIA's calculator rules applied to this file's limits (compute units as "
                     f"SMs, {gpu.limits.warp_size}-wide wavefronts as warps, SIMDs as sub-partitions), an "
                     f"approximation")
    if gpu.limits.derived:
        parts.append(f"derived limits (no datasheet gives them; see the GPU file): {', '.join(gpu.limits.derived)}")
    return "; ".join(parts) or None


def occupancy(gpu: GPU, threads: int, regs: int, smem_bytes: int = 0, grid: int | None = None) -> Occupancy:
    """The occupancy of blocks of ``threads`` threads using ``regs`` registers per thread and ``smem_bytes`` of
    shared memory per block (static + dynamic) on ``gpu``; with ``grid`` (blocks in the launch), its waves.

    Raises UserError for impossible input (threads, registers or shared memory out of the GPU's range) and for a
    block that cannot launch (its registers exceed ``max_registers_per_block``).
    """
    _check(gpu, threads, regs, smem_bytes, grid)
    c, results, cannot_launch = _limits(gpu, threads, regs, smem_bytes)
    if cannot_launch:
        raise UserError(cannot_launch)
    if c.blocks == 0:
        # A block that no SM can hold is not a result of 0 blocks per SM (the waves would divide by it): one line
        # naming each limit that lets none in, with its arithmetic. The GPU file's own rules (a block may not ask
        # for more registers or shared memory than an SM has) leave the reserved share and the allocation unit
        # as the way to get here: a block at max_smem_per_block_kib when that equals smem_per_sm_kib.
        none = "; ".join(f"{r.name} allow{'s' if r.name == 'shared memory' else ''} 0 ({r.arithmetic})"
                         for r in results if r.blocks == 0)
        raise UserError(f"a block of {threads:,} threads, {regs} registers per thread and {smem_bytes:,} B of "
                        f"shared memory never fits on one {gpu.id} SM: {none}")
    result = Occupancy(
        gpu_id=gpu.id,
        sm_count=gpu.sm_count,
        max_warps_per_sm=gpu.limits.max_warps_per_sm,
        threads_per_block=threads,
        registers_per_thread=regs,
        smem_per_block_bytes=smem_bytes,
        warps_per_block=c.warps,
        registers_per_warp=c.regs_per_warp,
        registers_per_block=c.regs_per_block,
        smem_allocated_per_block_bytes=c.smem_alloc,
        limits=results,
        blocks_per_sm=c.blocks,
        grid=grid,
        note=_method_note(gpu),
    )
    return _with_suggestions(gpu, result)


# --- what would raise it -------------------------------------------------------------------------------------


def _occ(gpu: GPU, blocks: int, threads: int) -> float:
    return blocks * -(-threads // gpu.limits.warp_size) / gpu.limits.max_warps_per_sm


def _fmt_bytes(n: int) -> str:
    return f"{n / KIB:g} KiB" if n % KIB == 0 or n >= 10 * KIB else f"{n:,} B"


def _most_registers(gpu: GPU, threads: int, regs: int, target: int) -> int:
    """The most registers per thread below ``regs`` at which the register limit allows ``target`` blocks per SM,
    or 0 when even 1 does not. ``regs`` itself allows fewer (registers bind).

    Bisection, log2(regs) steps: the blocks the registers allow never rise as registers per thread rise (the
    per-warp allocation, rounded up, only grows; the warps that fit only shrink; the launch check only fails
    more), so the answer is where that count crosses ``target``. (A linear search down from the current count
    took 3.1 s at 2^18 registers and over a minute at 2^22 on a schema-valid spec.)
    """
    lo, hi = 0, regs  # lo: 0 or a count that allows target; hi: a count that does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _regs_allow(gpu, threads, mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def _last_launchable_warps(gpu: GPU, regs: int, most: int) -> int:
    """The most warps per block (at most ``most``) whose registers pass the launch check, or 0 when none does.
    Bisection: the check compares the registers a block is charged, which only grow with its warps."""
    ws = gpu.limits.warp_size
    lo, hi = 0, most + 1  # lo: 0 or a size that launches; hi: one that does not (most + 1 stands for "none")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _counts(gpu, mid * ws, regs, 0).cannot_launch:
            hi = mid
        else:
            lo = mid
    return lo


def _block_size_candidates(gpu: GPU, regs: int, smem: int) -> list[int]:
    """The warps per block among which the best block size is, at these registers per thread and shared memory.

    Every block size (a multiple of the warp size) is not tried: a spec with warp size 1 and 2^31 threads per
    block would take hours (25 s at 2^20). With w warps per block, blocks per SM = min(C, K // w), where
    K = min(max_warps_per_sm, the warps the registers fit) and C = min(blocks by shared memory,
    max_blocks_per_sm) do not depend on w (⌊min(a, b)/w⌋ = min(⌊a/w⌋, ⌊b/w⌋)), up to the last size that passes
    the launch check (found by bisection), beyond which blocks are 0. Occupancy ∝ w × min(C, K // w). Where
    K // w keeps one value, occupancy grows with w, so a best w is always the last of its run (or the last
    launchable size); and while K // w ≥ C occupancy is w × C, so of those only the last one, K // C, can be best.
    What remains are the run ends where K // w < C: at most min(C, 2√K) sizes, each then evaluated by the
    calculator itself (_blocks) and compared exactly as an exhaustive search would.
    """
    lim = gpu.limits
    # None when no whole warp fits the per-block limit (a file may give fewer threads per block than a warp) or
    # no size passes the launch check.
    most = _last_launchable_warps(gpu, regs, lim.max_threads_per_block // lim.warp_size)
    if most == 0:
        return []
    one = _counts(gpu, lim.warp_size, regs, smem)
    k = lim.max_warps_per_sm if one.warps_fit is None else min(lim.max_warps_per_sm, one.warps_fit)
    c = lim.max_blocks_per_sm if one.by_smem is None else min(lim.max_blocks_per_sm, one.by_smem)
    candidates = {1, most}
    start = k // c  # the last w with K // w ≥ C (0: none)
    if start:
        candidates.add(min(start, most))
    w = start + 1
    while w <= min(most, k):
        end = k // (k // w)  # the last w of the run where K // w keeps its value
        candidates.add(min(end, most))
        w = end + 1
    return sorted(candidates)


def _with_suggestions(gpu: GPU, r: Occupancy) -> Occupancy:
    """Add the smallest changes that raise occupancy: fewer registers and/or less shared memory for one more
    block per SM (when those bind), and the block size that gives the most occupancy with the same registers per
    thread and shared memory per block. Both searches are bounded (:func:`_most_registers`,
    :func:`_block_size_candidates`), whatever the GPU file's limits."""
    if r.occupancy >= 1.0:
        return r
    lim = gpu.limits
    out: list[Suggestion] = []
    threads, regs, smem = r.threads_per_block, r.registers_per_thread, r.smem_per_block_bytes
    target = r.blocks_per_sm + 1
    fixed = [x.blocks for x in r.limits if x.name in ("warps", "blocks") and x.blocks is not None]
    resource_bound = [b for b in r.binding if b in ("registers", "shared memory")]
    if resource_bound and all(b >= target for b in fixed):
        new_regs, new_smem, parts = regs, smem, []
        if "registers" in resource_bound:
            new_regs = _most_registers(gpu, threads, regs, target)
            parts.append(f"at most {new_regs} registers per thread")
        if "shared memory" in resource_bound:
            per_block = int(gpu.memory.smem_per_sm_kib * KIB) // target
            new_smem = per_block // lim.smem_alloc_unit_bytes * lim.smem_alloc_unit_bytes
            new_smem -= lim.reserved_smem_per_block_bytes
            parts.append(f"at most {_fmt_bytes(new_smem)} of shared memory per block")
        if new_regs >= 1 and new_smem >= 0:
            blocks = _blocks(gpu, threads, new_regs, new_smem)
            if blocks > r.blocks_per_sm:
                occ = _occ(gpu, blocks, threads)
                out.append(Suggestion(
                    text=f"{' and '.join(parts)}: {plural(blocks, 'block')} per SM, {occ:.1%} occupancy",
                    threads_per_block=threads, registers_per_thread=new_regs, smem_per_block_bytes=new_smem,
                    blocks_per_sm=blocks, occupancy=occ,
                ))
    # Block size: the multiples of the warp size that can be best, same registers per thread and shared memory
    # per block; the most occupancy, then the size nearest the current one, then the larger.
    best: tuple[tuple[float, int, int], int, int, float] | None = None
    for w in _block_size_candidates(gpu, regs, smem):
        t = w * lim.warp_size
        blocks = _blocks(gpu, t, regs, smem)
        occ = _occ(gpu, blocks, t)
        key = (occ, -abs(t - threads), t)
        if best is None or key > best[0]:
            best = (key, t, blocks, occ)
    if best is not None and best[3] > r.occupancy:
        _, t, blocks, occ = best
        out.append(Suggestion(
            text=f"blocks of {t} threads ({t // lim.warp_size} warps), same registers per thread and shared "
                 f"memory per block: {plural(blocks, 'block')} per SM, {occ:.1%} occupancy",
            threads_per_block=t, registers_per_thread=regs, smem_per_block_bytes=smem, blocks_per_sm=blocks,
            occupancy=occ,
        ))
    return replace(r, suggestions=tuple(out))


# --- one Triton launch, for the measure harness --------------------------------------------------------------


@dataclass(frozen=True)
class Anatomy:
    """One kernel launch seen from the hardware: grid, warps, registers, spills, shared memory, the occupancy
    they give on the GPU, the waves, and warnings.

    ``registers_per_thread``, ``spills`` and ``shared_bytes`` are None when the compiler's metadata is not
    available (Triton's interpreter compiles nothing); then ``occupancy`` counts only what is known (warps, and
    shared memory if given) and is an upper bound, and ``metadata_complete`` is False.
    """

    grid: tuple[int, ...]
    programs: int
    num_warps: int
    threads_per_program: int
    registers_per_thread: int | None
    spills: int | None  # triton's n_spills: the kernel's local memory in bytes per thread ÷ 4
    shared_bytes: int | None
    occupancy: Occupancy
    warnings: tuple[str, ...]

    @property
    def metadata_complete(self) -> bool:
        return None not in (self.registers_per_thread, self.spills, self.shared_bytes)

    @property
    def waves(self) -> int:
        waves = self.occupancy.waves
        assert waves is not None  # a launch always has its grid
        return waves

    @property
    def last_wave_fill(self) -> float:
        fill = self.occupancy.last_wave_fill
        assert fill is not None  # a launch always has its grid
        return fill


def launch_anatomy(
    gpu: GPU,
    grid: int | Sequence[int],
    num_warps: int,
    n_regs: int | None,
    n_spills: int | None,
    shared_bytes: int | None,
) -> Anatomy:
    """The anatomy of one Triton launch of ``grid`` programs of ``num_warps`` warps on ``gpu``.

    ``n_regs``, ``n_spills`` and ``shared_bytes`` are what the compiled kernel reports (``kernel.n_regs``,
    ``kernel.n_spills``, ``kernel.metadata.shared``); pass None for any the compiler did not give. A Triton program
    is one CUDA block of ``num_warps × warp_size`` threads.
    """
    dims = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid)
    if not dims or any(d < 1 for d in dims):
        raise UserError(f"a grid needs at least one program along each axis, got {dims}")
    if num_warps < 1:
        raise UserError(f"num_warps must be at least 1, got {num_warps}")
    programs = math.prod(dims)
    threads = num_warps * gpu.limits.warp_size
    occ = occupancy(gpu, threads, n_regs or 0, shared_bytes or 0, grid=programs)

    warnings: list[str] = []
    missing = [name for name, v in (("registers", n_regs), ("spills", n_spills), ("shared memory", shared_bytes))
               if v is None]
    if missing:
        warnings.append(
            f"no compiled kernel to read {', '.join(missing)} from (Triton's interpreter, or an older triton): "
            f"the occupancy counts only warps{'' if shared_bytes is None else ' and shared memory'} and is an "
            f"upper bound"
        )
    if n_spills:
        warnings.append(
            f"spills: {n_spills * 4:,} bytes of local memory per thread ({n_spills} registers' worth), "
            f"read and written through L1/L2 instead of the register file"
        )
    if programs < gpu.sm_count:
        idle = gpu.sm_count - programs
        warnings.append(f"{programs} program{'s' if programs > 1 else ''} for {gpu.sm_count} SMs: {idle} SMs "
                        f"({idle / gpu.sm_count:.0%}) sit idle")
    elif (waves := occ.waves or 0) > 1 and (occ.last_wave_fill or 0.0) < MOSTLY_EMPTY:
        warnings.append(
            f"the last of {waves} waves is {occ.last_wave_fill:.0%} full "
            f"({programs - (waves - 1) * occ.blocks_per_wave:,} of {occ.blocks_per_wave:,} slots): "
            f"the GPU is mostly idle for that wave"
        )
    return Anatomy(
        grid=dims,
        programs=programs,
        num_warps=num_warps,
        threads_per_program=threads,
        registers_per_thread=n_regs,
        spills=n_spills,
        shared_bytes=shared_bytes,
        occupancy=occ,
        warnings=tuple(warnings),
    )
