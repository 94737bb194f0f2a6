"""``calibrate``'s op model: the probes of ``calibrate.probes`` timed on the device in hand, fitted into
curves (``engine.calibrated.fit``) under the ceilings the same run measured, so that ``analyze --calibrated`` and
``measure --workload`` time each op by what ops of its class and size took on this GPU.

Torch is imported inside the probes: importing this module costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from ..engine.calibrated import fit
from ..measure.harness import Reporter
from ..specs.hardware import GPU
from ..specs.measured import Measured, OpModel
from ..units import binary_size
from .probes import DEFAULT_GRID, ProbeGrid, ProbeRun, probe_samples

# The probes run in bf16: the curves hold times against roofline times, which the data type's own ceilings set, so
# one data type's curves time the others' ops (fp16 runs the same kernels at the same rates on Hopper).
PROBE_DTYPE = "bf16"


def grid_text(grid: ProbeGrid, dtype: str = PROBE_DTYPE) -> str:
    """The probes in words, for the record (``OpModel.grid``)."""
    kn = ", ".join(f"{k}×{n}" for k, n in grid.gemm_kn)
    return (f"{dtype}; F.linear M {grid.gemm_m[0]}–{grid.gemm_m[-1]} (powers of 2) × K×N {kn}; SDPA decode "
            f"(GQA 32/8, d 128) batch {'/'.join(map(str, grid.decode_batch))} × positions "
            f"{'/'.join(map(str, grid.decode_positions))}; SDPA causal prefill tokens "
            f"{'/'.join(map(str, grid.prefill_tokens))} × batch {'/'.join(map(str, grid.prefill_batch))}; "
            f"RMSNorm, RoPE, SiLU·up, residual add, embedding gather and KV write at "
            f"{binary_size(grid.memory_bytes[0])}–{binary_size(grid.memory_bytes[-1])} moved; "
            f"{grid.rep_ms:g} ms timing windows")


class _Steps(Reporter):
    """The probes' progress as calibrate's one-line steps (one line a probe family would be too coarse)."""

    def __init__(self, step: Callable[[str], None]) -> None:
        self._step = step

    def step(self, text: str) -> None:
        self._step(f"op model: {text}")


def fit_probes(run: ProbeRun, spec: GPU, measured: Measured) -> OpModel:
    """The op model of a probe run, each probe's roofline time read under ``measured``'s ceilings (what
    ``GPU.roofs(calibrated=True)`` of the written file gives, so that fitting and predicting use the same roofs)."""
    roofs = spec.model_copy(update={"measured": measured}).roofs(calibrated=True)
    samples = [(s.op, s.median_s, s.label) for s in run.samples]
    return fit(samples, roofs, run.launch_floor_s, grid_text(run.grid, run.dtype), run.timer)


def calibrate_op_model(spec: GPU, measured: Measured, step: Callable[[str], None],
                       grid: ProbeGrid = DEFAULT_GRID) -> tuple[OpModel, list[str]]:
    """Time the probes on the CUDA device and fit them; the model and the probes left out (with why)."""
    run = probe_samples("cuda", PROBE_DTYPE, _Steps(step), grid)
    return fit_probes(run, spec, measured), run.skipped
