"""One Triton launch seen from the hardware, for the measure harness: its grid, warps, registers, spills and
shared memory, the occupancy and waves they give (``occupancy``), and warnings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import UserError
from ...specs.hardware import GPU
from .calculator import occupancy
from .limits import Occupancy, sm_level

# The last wave of a grid counts as "mostly empty" when fewer than this share of its slots have a program.
MOSTLY_EMPTY = 0.5


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
    sm = sm_level(gpu)
    threads = num_warps * sm.limits.warp_size
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
    if programs < sm.sm_count:
        idle = sm.sm_count - programs
        warnings.append(f"{programs} program{'s' if programs > 1 else ''} for {sm.sm_count} SMs: {idle} SMs "
                        f"({idle / sm.sm_count:.0%}) sit idle")
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
