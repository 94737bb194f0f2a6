"""The occupancy calculator's arithmetic: how many blocks (programs) of a kernel one SM holds at once by each of
four limits, and the result types. Pure: a GPU's ``limits`` in, numbers out; no device, no torch.

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

from dataclasses import dataclass
from typing import Literal, get_args

from ...errors import UserError
from ...specs.hardware import GPU, Limits

Limit = Literal["warps", "registers", "shared memory", "blocks"]
LIMITS: tuple[Limit, ...] = get_args(Limit)

KIB = 1024
# CUDA's largest grid: x up to 2^31 − 1 blocks, y and z up to 65,535 each (CUDA C++ Programming Guide, 'Technical
# Specifications per Compute Capability', every compute capability from 3.0 on).
MAX_GRID = (2**31 - 1) * 65535 * 65535


@dataclass(frozen=True)
class SmLevel:
    """What the calculator reads of a GPU spec, all of it given: the SMs, each one's shared memory, the limits."""

    sm_count: int
    smem_per_sm_bytes: int
    limits: Limits


def sm_level(gpu: GPU) -> SmLevel:
    """``gpu``'s SM-level figures; a UserError in one line where its spec has none (a part without SMs, such as
    Gaudi, or one whose limits no source gives): the calculator does not apply there."""
    lim, sms, smem = gpu.limits, gpu.sm_count, gpu.memory.smem_per_sm_kib
    if lim is None or sms is None or smem is None:
        raise UserError(f"occupancy does not apply to {gpu.id} ({gpu.name}): its spec gives no SM-level limits "
                        f"(SMs or compute units, with their warps, registers and shared memory)")
    return SmLevel(sm_count=sms, smem_per_sm_bytes=int(smem * KIB), limits=lim)


def sub_partitions(gpu: GPU) -> int:
    """Processing blocks (sub-partitions) per SM, among which the register file is split.

    Four on every NVIDIA architecture the calculator knows except GP100 (compute capability 6.0), which has two
    (``cudaOccSubPartitionsPerMultiprocessor`` in cuda_occupancy.h; the Volta, Ampere and Hopper whitepapers draw
    each SM as four processing blocks).
    """
    return 2 if gpu.compute_capability == "6.0" else 4


def round_up(x: int, unit: int) -> int:
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


@dataclass(frozen=True)
class Counts:
    """The calculator's numbers for one block shape, without the words (what the suggestion search evaluates
    many times); :func:`calculator._limits` puts them in words."""

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


def counts(gpu: GPU, threads: int, regs: int, smem_bytes: int) -> Counts:
    """The four limits' arithmetic (the module's docstring states each rule). No validation of the inputs."""
    sm = sm_level(gpu)
    lim = sm.limits
    warps = -(-threads // lim.warp_size)
    parts = sub_partitions(gpu)
    regs_per_warp = round_up(regs * lim.warp_size, lim.register_alloc_unit)
    warps_fit = None if regs == 0 else lim.registers_per_sm // parts // regs_per_warp * parts
    # The hardware's launch check assumes the block's warps are spread over all sub-partitions.
    launch_check = max(regs_per_warp * round_up(warps, parts), regs_per_warp * warps)
    smem_alloc = round_up(smem_bytes + lim.reserved_smem_per_block_bytes, lim.smem_alloc_unit_bytes)
    return Counts(
        warps=warps,
        regs_per_warp=regs_per_warp,
        regs_per_block=regs_per_warp * warps,
        regs_launch_check=launch_check,
        warps_fit=warps_fit,
        smem_alloc=smem_alloc,
        by_warps=lim.max_warps_per_sm // warps,
        by_regs=None if warps_fit is None else warps_fit // warps,
        by_smem=sm.smem_per_sm_bytes // smem_alloc if smem_alloc else None,
        by_blocks=lim.max_blocks_per_sm,
        cannot_launch=regs > 0 and launch_check > lim.max_registers_per_block,
    )


def active_blocks(gpu: GPU, threads: int, regs: int, smem_bytes: int) -> int:
    """Active blocks per SM; 0 when the block cannot launch or no limit lets one in."""
    return counts(gpu, threads, regs, smem_bytes).blocks


def regs_allow(gpu: GPU, threads: int, regs: int) -> int:
    """Blocks per SM that the register limit alone allows (0 if the block cannot launch)."""
    c = counts(gpu, threads, regs, 0)
    return 0 if c.cannot_launch else (sm_level(gpu).limits.max_blocks_per_sm if c.by_regs is None else c.by_regs)
