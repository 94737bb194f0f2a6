"""``rooflinectl measure`` and ``rooflinectl calibrate``: real kernels on the GPU in hand, against the roofline.

The commands parse options, call ``rooflinectl.measure.request.measure`` / ``rooflinectl.calibrate.run.calibrate``
(which check the options in the order that reports bad input before a missing GPU), and lay out what comes back.
Torch and triton are imported by the library, after ``--interpret`` has set TRITON_INTERPRET.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import typer

from ..errors import UserError
from ..records import MAX_SEED
from . import options as opt
from ._app import app, command, console, one_format, print_json
from .measure_workload import Device, WorkloadSeqLen, measure_workload

# --- progress ------------------------------------------------------------------------------------------------


class RichReporter:
    """A rich progress bar on stderr, for a terminal; the harness calls start/step/advance."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from ..render.console import console as plain_console

        # markup=False: a step's text holds a kernel's shape and names, printed as written (render.console).
        self.progress = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=plain_console(stderr=True), transient=True)
        self.task: Any = None

    def __enter__(self) -> RichReporter:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def start(self, total: int) -> None:
        self.task = self.progress.add_task("starting", total=total)

    def step(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text)

    def advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)


def _reporter(json: bool) -> AbstractContextManager[Any]:
    from contextlib import nullcontext

    from ..measure.harness import Reporter

    if json or not sys.stderr.isatty():
        return nullcontext(Reporter())
    return RichReporter()


@command(app)
def measure(
    list_: bool = typer.Option(False, "--list", help="List the registered kernels and exit."),
    kernel: str = typer.Option(None, "--kernel", "-k", help="Kernel name (see --list)."),
    shape: list[str] = typer.Option(None, "--shape", "-s",
                                    help="Shape in the kernel's format, e.g. 4096x16384; repeat it or give a comma "
                                         "list. Default: the kernel's default shapes (small ones with --interpret)."),
    dtype: str = typer.Option(None, "--dtype", help="Data type: fp32, fp16, bf16 (default: the kernel's)."),
    baseline: str = typer.Option("torch", "--baseline", help="Also time torch eager (torch), torch.compile "
                                                             "(compile), F.linear alone on the normalized x for "
                                                             "rmsnorm_linear (cublas), SDPA with one backend "
                                                             "forced for the attention kernels (sdpa_flash, "
                                                             "sdpa_cudnn, sdpa_efficient), all or none."),
    gpu: str = typer.Option(None, "--gpu", "-g", help="Spec to compare against (default: the one matching the "
                                                       "device's name)."),
    save: Path = typer.Option(None, "--save", help="Write the record as JSON (what 'plot --measured' reads)."),
    interpret: bool = typer.Option(False, "--interpret", help="Run in Triton's interpreter on the CPU: "
                                                              "correctness only, small shapes, no timing."),
    seed: int = typer.Option(None, "--seed", min=0, max=MAX_SEED,
                             help="Seed of the random inputs (default: a fresh one, recorded)."),
    timer: str = typer.Option(None, "--timer", help="cuda_graph (the default): replays of a CUDA graph of the "
                                                    "rotated runs, no launch gaps, no L2 flush; events: CUDA "
                                                    "events around each run, the L2 flushed before each."),
    cuda_graph: bool = typer.Option(False, "--cuda-graph", help="The same as --timer cuda_graph (the default)."),
    json: bool = typer.Option(False, "--json", help="Print the record as JSON; no progress bar."),
    csv: bool = typer.Option(False, "--csv", help="Print the results and baselines as CSV; no progress bar."),
    workload: str = typer.Option(None, "--workload", help="Measure a workload's own ops and its whole step "
                                                         "instead: decode, prefill or a workload YAML."),
    model: opt.Model = None,
    batch: opt.Batch = None,
    context: opt.Context = None,
    seq_len: WorkloadSeqLen = None,
    attention: opt.Attention = None,
    fuse: opt.Fuse = None,
    device: Device = "cuda",
) -> None:
    """Run a Triton kernel on this GPU: check it, time it, and place it against the roofline.

    Example: rooflinectl measure --kernel fused_softmax --shape 4096x16384 --dtype bf16 --baseline all

    A workload's ops, each checked and timed, then its whole step as one CUDA graph:
    rooflinectl measure --workload decode --model llama-3-8b --batch 16 --context 4096
    """
    one_format(json, csv)
    if workload is not None:
        if kernel is not None or list_ or csv or shape or interpret:
            raise UserError("--workload measures a workload's ops: leave out --kernel, --shape, --interpret, "
                            "--list and --csv")
        if measure_workload(workload, model, batch, seq_len, context, dtype, attention, fuse, gpu, device, seed,
                            save, json, _reporter):
            raise typer.Exit(1)
        return
    for given, name in ((model, "--model"), (batch, "--batch"), (context, "--context"), (seq_len, "--seq-len"),
                        (attention, "--attention"), (fuse, "--fuse")):
        if given is not None:
            raise UserError(f"{name} belongs to measure --workload")
    if list_:
        from ..kernels.registry import KERNELS

        if json:
            print_json([{"name": i.name, "summary": i.summary} for i in KERNELS.values()])
        else:
            from ..render.measure import list_table  # rich tables and records: not for --help
            console().print(list_table(list(KERNELS.values())))
        return
    if kernel is None:
        raise UserError("give --kernel NAME (or --list to see the kernels)")
    from ..measure.request import MeasureRequest
    from ..measure.request import measure as run_request

    request = MeasureRequest(kernel=kernel, shapes=tuple(shape or ()), dtype=dtype, baseline=baseline, gpu=gpu,
                             seed=seed, interpret=interpret, cuda_graph=cuda_graph, timer=timer, save=save,
                             json=json)
    with _reporter(json or csv) as reporter:
        run = run_request(request, reporter)
    if json:
        sys.stdout.write(run.to_json())
    elif csv:
        from ..render.csvout import measure_csv

        print(measure_csv(run), end="")
    else:
        from ..render.measure import print_run  # rich tables and records: not for --help
        print_run(run)
    if save is not None:  # after the results are shown: a save that fails (a full disk) loses none of them
        from ..records.kernel import save as save_record

        sys.stdout.flush()
        save_record(run, save)
        if not (json or csv):
            console().print(f"saved {save}", highlight=False, markup=False)
    if run.failed:
        raise typer.Exit(1)


@command(app)
def calibrate(
    output: Path = typer.Option(..., "--output", "-o", help="Hardware YAML to write (the spec + 'measured')."),
    gpu: str = typer.Option(None, "--gpu", "-g", help="Spec to start from (default: the one matching the "
                                                       "device's name)."),
    json: bool = typer.Option(False, "--json", help="Print what was measured as JSON; no progress bar."),
    comm: bool = typer.Option(False, "--comm", help="Measure the collectives between GPUs instead (all-reduce, "
                                                    "all-gather, reduce-scatter, all-to-all), one process a GPU: "
                                                    "under torchrun, or with --world-size."),
    comm_max: str = typer.Option(None, "--comm-max", help="With --comm: the largest message, 4KiB to 1GiB "
                                                           "(default 1GiB); sizes are the powers of two from 4KiB."),
    collectives: str = typer.Option(None, "--collectives", help="With --comm: a comma list of all_reduce, "
                                                                 "all_gather, reduce_scatter, all_to_all "
                                                                 "(default: all four)."),
    world_size: int = typer.Option(None, "--world-size", help="With --comm, outside torchrun: start this many "
                                                              "local processes (one a GPU; gloo on the CPU)."),
    op_model: bool = typer.Option(True, "--op-model/--no-op-model", help="Also time the op model's probes (GEMMs, "
                                                                         "attention, memory-bound ops over their "
                                                                         "sizes; about 30 s on an H200) that "
                                                                         "'analyze --calibrated' times each op by."),
) -> None:
    """Measure this GPU's copy bandwidth and matmul peaks, and the op model, and write them into a hardware file.

    'analyze --calibrated --gpu FILE' and 'plot' then use the measured ceilings as the roofs, and time each op by
    the op model: what probes of its class and size took on this GPU. With --comm, the
    collectives' bus bandwidth and latency over several GPUs instead, which 'analyze --calibrated --tp N' uses.

    Example: rooflinectl calibrate -o hardware/my-h200.yaml

    Example: torchrun --nproc-per-node 8 -m rooflinectl calibrate --comm -o hardware/my-8xh200.yaml
    """
    if comm:
        _calibrate_comm(output, gpu, json, comm_max, collectives, world_size)
        return
    for given, name in ((comm_max, "--comm-max"), (collectives, "--collectives"), (world_size, "--world-size")):
        if given is not None:
            raise UserError(f"{name} belongs to calibrate --comm")
    from ..calibrate.op_model import calibrate_op_model
    from ..calibrate.run import calibrate as run_calibration
    from ..calibrate.run import step_count

    with _reporter(json) as reporter:
        reporter.start(step_count(op_model))
        started: list[str] = []

        def step(text: str) -> None:  # each probe announces itself: the one before it is done
            if started:
                reporter.advance()
            started.append(text)
            reporter.step(text)

        done = run_calibration(output, gpu, step=step, op_model=calibrate_op_model if op_model else None)
    if json:
        print_json(done.to_dict())
        return
    from ..render.measure import print_calibration  # rich tables and records: not for --help
    print_calibration(done)


def _calibrate_comm(output: Path, gpu: str | None, json: bool, comm_max: str | None, collectives: str | None,
                    world_size: int | None) -> None:
    """calibrate --comm: check the options, run the ranks, and print on rank 0 what it wrote."""
    from ..calibrate.comm import MAX_BYTES, parse_collectives, parse_size
    from ..calibrate.comm_run import CommRequest, calibrate_comm, check_launch, command_line

    chosen = parse_collectives(collectives)
    max_bytes = MAX_BYTES if comm_max is None else parse_size(comm_max)
    if world_size is not None and world_size < 2:
        raise UserError(f"--world-size {world_size}: collectives need at least 2 processes")
    check_launch(world_size)
    request = CommRequest(output=output, gpu=gpu, collectives=tuple(chosen), max_bytes=max_bytes,
                          world_size=world_size,
                          command=command_line(output, gpu, collectives, comm_max, world_size))
    done = calibrate_comm(request)
    if done is None:  # not rank 0
        return
    if json:
        print_json(done.to_dict())
        return
    from ..render.comm import print_comm_calibration  # rich tables: not for --help
    print_comm_calibration(done)
