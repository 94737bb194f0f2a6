"""``rooflinectl measure --workload PHASE``: the wiring of measure's workload mode (the options parsed by
``cli/measure.py``). Builds the Workload exactly as ``analyze`` does (``options.workload_overrides``,
``resolve_workload``), runs ``measure.step.run.run_workload`` and hands the record to the renderer."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from ..errors import UserError
from ..shell import command_line
from ._app import console
from .options import workload_overrides

DEVICES = ("cuda", "cpu")
# measure's own options of its workload mode (the others it takes are options.py's).
WorkloadSeqLen = Annotated[
    int | None, typer.Option("--seq-len", help="With --workload prefill: prompt tokens per sequence.")
]
Device = Annotated[str, typer.Option("--device", help="With --workload: cuda, or cpu to run every path on the CPU "
                                                      "(times are CPU wall time, not a GPU figure).")]


def measure_workload(workload: str, model: str | None, batch: int | None, seq_len: int | None, context: int | None,
                     dtype: str | None, attention: str | None, fuse: str | None, gpu: str | None, device: str,
                     seed: int | None, save: Path | None, json: bool, reporter_for: object) -> bool:
    """Run it and print it; True when an op failed its check or raised."""
    from ..specs.scenario import resolve_workload

    if device not in DEVICES:
        raise UserError(f"--device {device}: expected one of {', '.join(DEVICES)}")
    if save is not None:
        from ..files import check_writable

        check_writable(save, "--save", will_read=(model, gpu))
    w = resolve_workload(workload, **workload_overrides(model, batch, seq_len, context, dtype, None, attention, None,
                                                         fuse))
    from ..measure.step.run import WorkloadRequest, run_workload
    from ..records.step import save as save_run

    given = [("--workload", workload), ("--model", model), ("--batch", batch), ("--seq-len", seq_len),
             ("--context", context), ("--dtype", dtype), ("--attention", attention), ("--fuse", fuse),
             ("--gpu", gpu), ("--device", device if device != "cuda" else None), ("--seed", seed)]
    command = command_line(["measure"], given)
    request = WorkloadRequest(workload=w, device=device, gpu=gpu, seed=seed, command=command)
    with reporter_for(json) as reporter:  # type: ignore[operator]
        # The calibrated column: the --gpu file's op model (calibrate -o FILE), where it has one.
        run = run_workload(request, reporter)
    if json:
        sys.stdout.write(run.to_json())
    else:
        from ..render.workload_measure import print_workload_run

        print_workload_run(run, out=console())
    if save is not None:  # after the results are shown: a save that fails (a full disk) loses none of them
        sys.stdout.flush()
        save_run(run, save)
        if not json:
            console().print(f"saved {save}", highlight=False, markup=False)
    return bool(run.failed) or run.step is None or run.step.error is not None
