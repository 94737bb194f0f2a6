"""What would raise occupancy: fewer registers or less shared memory for one more block per SM, and the block
size that gives the most; both searches bounded, whatever the GPU file's limits. The calculator's counts are
reached through ``limits`` (the module), so that a test counting them sees every one."""

from __future__ import annotations

from dataclasses import replace

from ...specs.hardware import GPU
from ...units import binary_size, plural
from . import limits
from .limits import Occupancy, Suggestion, sm_level


def _occ(gpu: GPU, blocks: int, threads: int) -> float:
    lim = sm_level(gpu).limits
    return blocks * -(-threads // lim.warp_size) / lim.max_warps_per_sm


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
        if limits.regs_allow(gpu, threads, mid) >= target:
            lo = mid
        else:
            hi = mid
    return lo


def _last_launchable_warps(gpu: GPU, regs: int, most: int) -> int:
    """The most warps per block (at most ``most``) whose registers pass the launch check, or 0 when none does.
    Bisection: the check compares the registers a block is charged, which only grow with its warps."""
    ws = sm_level(gpu).limits.warp_size
    lo, hi = 0, most + 1  # lo: 0 or a size that launches; hi: one that does not (most + 1 stands for "none")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if limits.counts(gpu, mid * ws, regs, 0).cannot_launch:
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
    calculator itself (limits.active_blocks) and compared exactly as an exhaustive search would.
    """
    lim = sm_level(gpu).limits
    # None when no whole warp fits the per-block limit (a file may give fewer threads per block than a warp) or
    # no size passes the launch check.
    most = _last_launchable_warps(gpu, regs, lim.max_threads_per_block // lim.warp_size)
    if most == 0:
        return []
    one = limits.counts(gpu, lim.warp_size, regs, smem)
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


def with_suggestions(gpu: GPU, r: Occupancy) -> Occupancy:
    """Add the smallest changes that raise occupancy: fewer registers and/or less shared memory for one more
    block per SM (when those bind), and the block size that gives the most occupancy with the same registers per
    thread and shared memory per block. Both searches are bounded (:func:`_most_registers`,
    :func:`_block_size_candidates`), whatever the GPU file's limits."""
    if r.occupancy >= 1.0:
        return r
    sm = sm_level(gpu)
    lim = sm.limits
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
            per_block = sm.smem_per_sm_bytes // target
            new_smem = per_block // lim.smem_alloc_unit_bytes * lim.smem_alloc_unit_bytes
            new_smem -= lim.reserved_smem_per_block_bytes
            parts.append(f"at most {binary_size(new_smem, exact=True)} of shared memory per block")
        if new_regs >= 1 and new_smem >= 0:
            blocks = limits.active_blocks(gpu, threads, new_regs, new_smem)
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
        blocks = limits.active_blocks(gpu, t, regs, smem)
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
