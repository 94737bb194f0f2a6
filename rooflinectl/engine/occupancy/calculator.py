"""``occupancy``: the calculator's answer for one block shape, each limit's arithmetic in words, the checks of
the input, and a note on the method; the four rules themselves are ``limits``'s."""

from __future__ import annotations

from ...errors import UserError
from ...specs.hardware import GPU
from ...units import plural
from .limits import MAX_GRID, Counts, LimitResult, Occupancy, counts, round_up, sm_level, sub_partitions
from .suggest import with_suggestions


def _shown(n: int, grouped: bool = False) -> str:
    """An input number for a message: in full up to 30 digits, else by its length (a 4,000-digit --grid is not
    echoed, and converting it to a float to shorten it would overflow)."""
    digits = len(str(abs(n)))
    if digits > 30:
        return f"a number of {digits:,} digits"
    return f"{n:,}" if grouped else str(n)


def _check(gpu: GPU, threads: int, regs: int, smem_bytes: int, grid: int | None) -> None:
    lim = sm_level(gpu).limits  # a UserError first where the calculator does not apply
    if threads < 1 or threads > lim.max_threads_per_block:
        raise UserError(f"threads per block must be between 1 and {lim.max_threads_per_block} on {gpu.id}, "
                        f"got {_shown(threads)}")
    if regs < 0 or regs > lim.max_registers_per_thread:
        raise UserError(f"registers per thread must be between 0 and {lim.max_registers_per_thread} on {gpu.id}, "
                        f"got {_shown(regs)}")
    max_smem = lim.max_smem_per_block_bytes
    if smem_bytes < 0 or smem_bytes > max_smem:
        raise UserError(f"shared memory per block must be between 0 and {lim.max_smem_per_block_kib:g} KiB "
                        f"({max_smem:,} bytes) on {gpu.id}, got {_shown(smem_bytes, grouped=True)} bytes")
    if grid is not None and not 1 <= grid <= MAX_GRID:
        raise UserError(f"grid must be between 1 and {MAX_GRID:,} blocks (CUDA's largest grid), got "
                        f"{_shown(grid, grouped=True)}")


def _limits(
    gpu: GPU, threads: int, regs: int, smem_bytes: int
) -> tuple[Counts, tuple[LimitResult, ...], str | None]:
    """(the counts, the four LimitResults with their arithmetic in words, why the block cannot launch or None).
    No validation of the inputs: callers check them."""
    sm = sm_level(gpu)
    lim = sm.limits
    c = counts(gpu, threads, regs, smem_bytes)
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
                + (f" (the hardware checks {regs_per_warp:,} × {round_up(warps, parts)} warps = "
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
        f"{sm.smem_per_sm_bytes:,} B/SM ÷ {c.smem_alloc:,} B"
    )
    results = (
        LimitResult("warps", c.by_warps, warps_text),
        LimitResult("registers", c.by_regs, regs_text),
        LimitResult("shared memory", c.by_smem, smem_text),
        LimitResult("blocks", c.by_blocks, f"at most {plural(lim.max_blocks_per_sm, 'block')} per SM"),
    )
    return c, results, cannot_launch


def _method_note(gpu: GPU) -> str | None:
    """What to keep in mind about this GPU's answer: another vendor's chip, or limits no datasheet gives."""
    parts = []
    lim = sm_level(gpu).limits
    if gpu.vendor.upper() != "NVIDIA":
        parts.append(f"{gpu.vendor} GPU: NVIDIA's calculator rules applied to this file's limits (compute units as "
                     f"SMs, {lim.warp_size}-wide wavefronts as warps, SIMDs as sub-partitions), an "
                     f"approximation")
    if lim.derived:
        parts.append(f"derived limits (no datasheet gives them; see the GPU file): {', '.join(lim.derived)}")
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
    sm = sm_level(gpu)
    result = Occupancy(
        gpu_id=gpu.id,
        sm_count=sm.sm_count,
        max_warps_per_sm=sm.limits.max_warps_per_sm,
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
    return with_suggestions(gpu, result)
