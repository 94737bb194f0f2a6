"""``rooflinectl calibrate``: the ceilings ``measure.ceilings`` probes, and the op model where asked, written into a
hardware YAML whose ``measured`` section ``analyze --calibrated`` and ``plot`` use as roofs (by
``specs.write.write_measured``, which keeps the collectives ``calibrate --comm`` wrote); and the measured ceilings
beside the spec's figures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import UserError
from ..measure import ceilings as probes
from ..measure.bench import Bench
from ..records.calibration import Calibration
from ..records.kernel import RunCeilings, Timer
from ..specs.hardware import GPU
from ..specs.measured import Measured, OpModel
from ..specs.write import write_measured

# --- the measured section -----------------------------------------------------------------------------------


def measured_section(ceilings: RunCeilings, *, device_name: str, date: str, command: str, torch_version: str,
                     triton_version: str | None, driver: str | None) -> Measured:
    if ceilings.copy_bandwidth_gbps is None:
        raise UserError("calibrate: the copy bandwidth was not measured")
    return Measured.model_validate(dict(
        device_name=device_name,
        date=date,
        command=command,
        torch_version=torch_version,
        triton_version=triton_version,
        driver=driver,
        copy_bandwidth_gbps=round(ceilings.copy_bandwidth_gbps, 1),
        tensor_tflops={k: round(v, 1) for k, v in ceilings.tensor_tflops.items()},
        vector_tflops={k: round(v, 1) for k, v in ceilings.vector_tflops.items()},
        timer=ceilings.timer,
        tensor_tflops_check={k: round(v, 1) for k, v in ceilings.tensor_tflops_check.items()},
    ))


# --- calibrate: the run, and the measured ceilings beside the spec's ----------------------------------------


# Times the op model's probes and fits them: (spec, the measured ceilings, step) -> (the model, probes left out).
OpModelRun = Callable[[GPU, Measured, Callable[[str], None]], tuple[OpModel, list[str]]]


def step_count(op_model: bool) -> int:
    """How many steps :func:`calibrate` announces through its ``step`` callback (a progress bar's length): the
    warm-up, the copy, each matmul and its check, the vector FMAs; with the op model, its probes and the launch
    floor."""
    ceilings = 3 + 2 * len(probes.PROBE_DTYPES)
    if not op_model:
        return ceilings
    from .op_model import PROBE_DTYPE
    from .probes import DEFAULT_GRID, probe_cases

    return ceilings + len(probe_cases(DEFAULT_GRID, PROBE_DTYPE)) + 1


def calibrate(output: Path, gpu: str | None, *, step: Callable[[str], None] = lambda text: None,
              bench: Bench | None = None, timer: Timer = "cuda_graph",
              op_model: OpModelRun | None = None) -> Calibration:
    """Measure the device's copy bandwidth and matmul peaks (PROBE_DTYPES) with ``timer`` (the matmuls checked by
    the other one), after warming the clocks up, and, with ``op_model`` (the CLI passes
    ``calibrate.op_model.calibrate_op_model``), time the op model's probes and fit them under those ceilings; write
    them into ``output``: the spec (``gpu``, or the one
    matching the device's name) with its ``measured`` section."""
    from ..files import check_writable
    from ..measure import bench as timing
    from ..measure.device import device_info, now, require_cuda, require_gpu_stack, resolve_spec
    from ..shell import command_line

    check_writable(output, "-o", replaces_input=True)  # -o may be the spec it merges into
    if gpu is not None:
        from ..specs.hardware import load_gpu

        load_gpu(gpu)  # an unknown --gpu is said as such on any machine, not as "no GPU"
    torch_version, triton_version = require_gpu_stack("calibrate")
    require_cuda("calibrate")  # its message offers no --interpret: calibrate has none
    spec = resolve_spec(gpu, "cuda")
    assert spec is not None  # resolve_spec finds one for a CUDA device, or raises
    info = device_info(spec, "cuda")
    command = command_line(["calibrate"], [("-o", output), ("--gpu", spec.id)])
    run_ceilings = probes.measure_ceilings(bench or timing.gpu_bench(timer), info.l2_bytes, probes.PROBE_DTYPES,
                                           on_step=step, timer=timer, events=bench or timing.gpu_bench("events"),
                                           check=bench or timing.gpu_bench(probes.other_timer(timer)))
    measured = measured_section(run_ceilings, device_name=info.name, date=now(), command=command,
                                torch_version=torch_version, triton_version=triton_version, driver=info.driver)
    notes = list(run_ceilings.notes)
    model = None
    if op_model is not None:
        model, skipped = op_model(spec, measured, step)
        notes += [f"op model: probe left out: {why}" for why in skipped]
    written = write_measured(spec, output, ceilings=measured, op_model=model)
    return Calibration(spec, written, measured.model_copy(update={"op_model": model}), notes, output)
