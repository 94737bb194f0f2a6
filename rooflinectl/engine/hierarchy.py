"""Where a byte lives on its way from HBM to the tensor cores: a GPU's memory levels, top to bottom, and the ridge
point at each. Pure: a ``hardware.GPU`` in, numbers out.

HBM -> L2 -> shared memory / L1 (each SM's own) -> register file (each SM's own) -> tensor cores and vector units.
For each memory level: what it holds in all and per SM (for the chip-wide HBM and L2, an SM's even share), its
bandwidth where the GPU file gives one, and how that number was obtained (the spec sheet, or the file's
``derived`` note, which says "derived" or "estimated" and how), and the ridge point at that level:

    ridge = peak FLOP/s of a unit and data type ÷ that level's bandwidth (bytes/s)

the arithmetic intensity (FLOP per byte moved *from that level*) an operation needs to be compute-bound when its
data streams from there. The ridge falls as the data sits closer to the units: data reused from shared memory needs
far fewer FLOPs per byte than data streamed from HBM, which is why tiling pays.

A level the GPU file gives no size for is left out (a part without SMs has no shared memory or register file of
an SM), and without an SM count the per-SM figures are None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..specs.hardware import GPU, Sourced
from ..units import KIB, MIB
from .count.op import Unit

REGISTER_BYTES = 4  # a register is 32 bits
# Shared memory moves 32 banks × 4 B per clock per SM: the GPU files derive its bandwidth from it, at the clock
# their tensor peaks are stated at (the H100 SXM5's 1.83 GHz, below its 1.98 GHz boost).
SMEM_BYTES_PER_CLOCK = 128

Provenance = Literal["spec", "derived", "estimated", "unknown"]


@dataclass(frozen=True)
class Ridge:
    unit: Literal["tensor", "vector"]
    dtype: str
    flop_per_byte: float


@dataclass(frozen=True)
class Note:
    """A number of the GPU file that no datasheet gives: which field, and the file's words on how it was had."""

    field: str
    provenance: Literal["derived", "estimated"]
    how: str


@dataclass(frozen=True)
class MemoryLevel:
    name: str
    size_bytes: int  # in all, over the chip, in whole bytes (a size in GiB, MiB or KiB may have a fraction)
    # an SM's own (SM-local levels) or its even share (HBM, L2), rounded down to a byte; None without an SM count
    per_sm_bytes: int | None
    chip_wide: bool  # True: one pool shared by every SM; False: each SM has its own
    bandwidth_gbps: float | None  # over the whole chip; None: no number in the GPU file
    bandwidth_per_sm_gbps: float | None  # an SM's share of it (None without a bandwidth or an SM count)
    provenance: Provenance  # of the bandwidth
    how: str  # the section's source, or the GPU file's derived note for the bandwidth
    detail: str
    ridges: tuple[Ridge, ...]  # empty without a bandwidth
    size_note: Note | None = None  # when the size is derived or estimated
    notes: tuple[Note, ...] = ()  # other derived numbers the level's detail shows

    def ridge(self, dtype: str, unit: Literal["tensor", "vector"] = "tensor") -> float | None:
        for r in self.ridges:
            if r.dtype == dtype and r.unit == unit:
                return r.flop_per_byte
        return None


@dataclass(frozen=True)
class ComputeUnit:
    unit: Literal["tensor", "vector"]
    dtype: str
    tflops: float  # dense peak, whole chip
    per_sm_tflops: float | None  # None without an SM count


@dataclass(frozen=True)
class Hierarchy:
    gpu_id: str
    gpu_name: str
    sm_count: int | None  # None: a part without SMs, or whose count no source gives
    levels: tuple[MemoryLevel, ...]  # top (HBM) to bottom (register file), the levels the GPU file gives
    compute: tuple[ComputeUnit, ...]  # what the levels feed: tensor cores, then vector units
    compute_source: str
    compute_notes: tuple[Note, ...] = ()

    def level(self, name: str) -> MemoryLevel:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(name)


def _note(section: Sourced, field: str) -> Note | None:
    """The GPU file's derived note on ``field``, or None when the number is the spec sheet's."""
    provenance = section.derivation(field)
    if provenance is None:
        return None
    return Note(field, provenance, section.derived[field])


def _notes(section: Sourced, *fields: str) -> tuple[Note, ...]:
    return tuple(n for n in (_note(section, f) for f in fields) if n is not None)


def hierarchy(gpu: GPU) -> Hierarchy:
    """The levels of ``gpu``'s memory hierarchy with their sizes, bandwidths and ridge points."""
    m, lim, c = gpu.memory, gpu.limits, gpu.compute
    sms = gpu.sm_count
    roofs = gpu.roofs()
    peaks: list[tuple[Unit, str, float]] = [("tensor", d, roofs.peak(d, "tensor")) for d in c.tensor_tflops]
    peaks += [("vector", d, roofs.peak(d, "vector")) for d in c.vector_tflops]

    def per_sm(x: float | None) -> float | None:
        return None if x is None or sms is None else x / sms

    def level(name: str, size: int, own: int | None, chip_wide: bool, size_field: str, bandwidth_field: str,
              detail: str, notes: tuple[Note, ...] = ()) -> MemoryLevel:
        """A level of ``size`` bytes in all; ``own`` is an SM's own bytes of an SM-local level (None: chip-wide,
        an even share of ``size``). Each ridge divides two rates at one clock: at shared memory a vector peak,
        stated at the boost clock, is divided by the bandwidth at that clock (SMEM_BYTES_PER_CLOCK a clock an
        SM), the file's bandwidth being at the tensor peaks' clock."""
        bandwidth: float | None = getattr(m, bandwidth_field)
        provenance: Provenance
        if bandwidth is None:
            provenance, how = "unknown", "not in the GPU file"
        else:
            note = _note(m, bandwidth_field)
            provenance, how = (note.provenance, note.how) if note else ("spec", m.source)
        at_boost = (None if bandwidth_field != "smem_bandwidth_gbps" or sms is None or gpu.boost_clock_mhz is None
                    else SMEM_BYTES_PER_CLOCK * sms * gpu.boost_clock_mhz * 1e6)
        ridges = () if bandwidth is None else tuple(
            Ridge(unit, dtype, peak / (at_boost if unit == "vector" and at_boost else bandwidth * 1e9))
            for unit, dtype, peak in peaks)
        share = own if own is not None else (None if sms is None else size // sms)
        return MemoryLevel(name=name, size_bytes=size, per_sm_bytes=share, chip_wide=chip_wide,
                           bandwidth_gbps=bandwidth, bandwidth_per_sm_gbps=per_sm(bandwidth),
                           provenance=provenance, how=how, detail=detail, ridges=ridges,
                           size_note=_note(m, size_field), notes=notes)

    # Sizes in whole bytes: --json prints them as integers (the GPU file's 178.4 GiB is not a whole number).
    hbm = round(gpu.capacity_bytes)
    levels = [level("HBM", hbm, None, True, "hbm_capacity_gib", "hbm_bandwidth_gbps", m.hbm_type)]
    if m.l2_size_mib is not None:
        l2 = round(m.l2_size_mib * MIB)
        shared_by = f"all {sms} SMs" if sms is not None else "the whole chip"
        levels.append(level("L2", l2, None, True, "l2_size_mib", "l2_bandwidth_gbps",
                            f"one cache shared by {shared_by}"))
    if m.smem_per_sm_kib is not None and sms is not None:
        smem = round(m.smem_per_sm_kib * KIB)
        array = (f" of each SM's {m.l1_smem_per_sm_kib:g} KiB L1 + shared array"
                 if m.l1_smem_per_sm_kib is not None else " per SM")
        per_block = f"; at most {lim.max_smem_per_block_kib:g} KiB to one block" if lim is not None else ""
        levels.append(level("shared memory / L1", smem * sms, smem, False, "smem_per_sm_kib", "smem_bandwidth_gbps",
                            f"{m.smem_per_sm_kib:g} KiB{array}{per_block}",
                            notes=_notes(m, "l1_smem_per_sm_kib")))
    if m.register_file_per_sm_kib is not None and sms is not None and lim is not None:
        regs = round(m.register_file_per_sm_kib * KIB)
        per_thread_full = lim.registers_per_sm // lim.max_threads_per_sm
        levels.append(MemoryLevel(
            name="register file", size_bytes=regs * sms, per_sm_bytes=regs, chip_wide=False, bandwidth_gbps=None,
            bandwidth_per_sm_gbps=None, provenance="unknown",
            how="not published (instructions read their operands from registers every cycle): no byte roof here",
            detail=f"{lim.registers_per_sm:,} × 32-bit per SM; at most {lim.max_registers_per_thread} "
                   f"({lim.max_registers_per_thread * REGISTER_BYTES:,} B) per thread, {per_thread_full} "
                   f"({per_thread_full * REGISTER_BYTES} B) each with all {lim.max_threads_per_sm:,} threads "
                   f"resident",
            ridges=(),
            size_note=_note(m, "register_file_per_sm_kib"),
            notes=_notes(lim, "registers_per_sm", "max_registers_per_thread"),
        ))
    compute = tuple(ComputeUnit(unit, dtype, peak / 1e12, per_sm(peak / 1e12)) for unit, dtype, peak in peaks)
    return Hierarchy(gpu_id=gpu.id, gpu_name=gpu.name, sm_count=sms, levels=tuple(levels), compute=compute,
                     compute_source=c.source, compute_notes=_notes(c, "tensor_tflops", "vector_tflops"))
