"""``rooflinectl occupancy``: an occupancy result as text and JSON. Formats ``engine.occupancy.Occupancy``;
computes nothing of its own. (measure lays out a compiled launch's ``Anatomy`` in its own table.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..engine.occupancy import Occupancy


def _bytes(n: int) -> str:
    return f"{n / 1024:g} KiB ({n:,} B)" if n >= 1024 else f"{n:,} B"


def _and(names: Sequence[str]) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def occupancy_json(o: Occupancy) -> dict[str, Any]:
    """The stable ``occupancy --json`` shape."""
    return {
        "gpu": o.gpu_id,
        "threads_per_block": o.threads_per_block,
        "registers_per_thread": o.registers_per_thread,
        "smem_per_block_bytes": o.smem_per_block_bytes,
        "warps_per_block": o.warps_per_block,
        "allocated": {
            "registers_per_warp": o.registers_per_warp,
            "registers_per_block": o.registers_per_block,
            "smem_per_block_bytes": o.smem_allocated_per_block_bytes,
        },
        "limits": {r.name: {"blocks_per_sm": r.blocks, "arithmetic": r.arithmetic} for r in o.limits},
        "binding": list(o.binding),
        "blocks_per_sm": o.blocks_per_sm,
        "warps_per_sm": o.warps_per_sm,
        "threads_per_sm": o.threads_per_sm,
        "max_warps_per_sm": o.max_warps_per_sm,
        "occupancy": o.occupancy,
        "grid": o.grid,
        "blocks_per_wave": o.blocks_per_wave,
        "waves": o.waves,
        "last_wave_fill": o.last_wave_fill,
        "note": o.note,
        "suggestions": [
            {"text": s.text, "threads_per_block": s.threads_per_block, "registers_per_thread": s.registers_per_thread,
             "smem_per_block_bytes": s.smem_per_block_bytes, "blocks_per_sm": s.blocks_per_sm,
             "occupancy": s.occupancy}
            for s in o.suggestions
        ],
    }


def summary_line(o: Occupancy) -> str:
    return (f"active per SM: {o.blocks_per_sm} block{'s' if o.blocks_per_sm != 1 else ''}, {o.warps_per_sm} of "
            f"{o.max_warps_per_sm} warps ({o.threads_per_sm:,} threads): occupancy {o.occupancy:.1%}, "
            f"bound by {_and(o.binding)}")


def waves_line(o: Occupancy) -> str | None:
    if o.grid is None:
        return None
    return (f"grid of {o.grid:,} blocks: {o.blocks_per_wave:,} per wave ({o.blocks_per_sm} × {o.sm_count} SMs) "
            f"→ {o.waves} wave{'s' if o.waves != 1 else ''}, the last {o.last_wave_fill:.0%} full")


def occupancy_view(o: Occupancy, name: str) -> Group:
    warps = f"{o.warps_per_block} warp{'s' if o.warps_per_block != 1 else ''}"
    head = Text(
        f"{name} ({o.gpu_id}): blocks of {o.threads_per_block:,} threads ({warps}), "
        f"{o.registers_per_thread} registers per thread, {_bytes(o.smem_per_block_bytes)} of shared memory "
        f"per block\nallocated per block: {warps} × {o.registers_per_warp:,} registers = "
        f"{o.registers_per_block:,} registers; {_bytes(o.smem_allocated_per_block_bytes)} of shared memory"
    )
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    t.add_column("limit", no_wrap=True)
    t.add_column("blocks/SM", justify="right", no_wrap=True)
    t.add_column("arithmetic", overflow="fold")
    for r in o.limits:
        binds = r.name in o.binding
        t.add_row(r.name + (" ◀" if binds else ""), "—" if r.blocks is None else str(r.blocks), r.arithmetic,
                  style="bold" if binds else None)
    lines = [summary_line(o)]
    waves = waves_line(o)
    if waves:
        lines.append(waves)
    if o.suggestions:
        lines.append("to raise it:")
        lines += [f"  - {s.text}" for s in o.suggestions]
    elif o.occupancy >= 1:
        lines.append("every warp slot of the SM is in use: occupancy cannot go higher")
    else:
        lines.append("no change of registers, shared memory or block size alone raises it")
    if o.note:
        lines.append(f"note: {o.note}")
    lines.append("(NVIDIA's CUDA Occupancy Calculator arithmetic, cuda_occupancy.h; higher occupancy is not "
                 "always faster)")
    return Group(head, Text(""), t, *[Text(x) for x in lines])


def print_occupancy(console: Console, o: Occupancy, name: str) -> None:
    console.print(occupancy_view(o, name))
