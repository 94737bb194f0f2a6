"""One Triton launch's anatomy for a measure record: what the launch and its compiled kernel say (grid, warps,
registers, spills, shared memory, config), and the occupancy and waves ``engine.occupancy`` gives them on the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UserError
from ..records.kernel import LaunchRecord
from ..specs.hardware import GPU

if TYPE_CHECKING:
    from ..kernels.base import Launch


def _plain(value: object) -> str | int | float | bool | None:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


def launch_record(launch: Launch, gpu: GPU | None) -> LaunchRecord:
    """One launch's anatomy: what the launch and its compiled kernel say, and, through
    ``occupancy.launch_anatomy``, the occupancy and waves it gives on ``gpu`` and its warnings."""
    warp_size = gpu.limits.warp_size if gpu and gpu.limits else 32
    warps = launch.num_warps
    base = LaunchRecord(
        function=launch.function,
        grid=list(launch.grid),
        programs=launch.programs,
        num_warps=warps,
        threads_per_program=warps * warp_size if warps else None,
        n_regs=launch.n_regs,
        n_spills=launch.n_spills,
        shared_bytes=launch.shared_bytes,
        config={k: _plain(v) for k, v in launch.config.items()},
    )
    if gpu is None or warps is None:
        why = "no hardware spec (--gpu)" if gpu is None else "the launch does not say its num_warps"
        return base.model_copy(update={"note": f"occupancy not computed: {why}"})
    from ..engine.occupancy import launch_anatomy

    try:
        a = launch_anatomy(gpu, tuple(launch.grid), warps, launch.n_regs, launch.n_spills, launch.shared_bytes)
    except UserError as err:  # a launch that the spec's limits cannot hold: say so rather than guess
        return base.model_copy(update={"note": f"occupancy not computed on {gpu.id}: {err}"})
    occ = a.occupancy
    return base.model_copy(update={
        "programs_per_sm": occ.blocks_per_sm,
        "occupancy": occ.occupancy,
        "occupancy_upper_bound": not a.metadata_complete,
        "limiter": ", ".join(occ.binding) or None,
        "waves": a.waves,
        "last_wave_fill": a.last_wave_fill,
        "warnings": list(a.warnings),
    })
