"""``rooflinectl measure`` and ``rooflinectl calibrate``: real kernels on the GPU in hand, against the roofline.

The commands parse options, check them in the order that reports bad input before a missing GPU, call
``rooflinectl.measure.harness`` / ``rooflinectl.measure.ceilings``, and lay out what comes back. Torch and triton are imported
inside the commands, after ``--interpret`` has set TRITON_INTERPRET.
"""

from __future__ import annotations

import importlib.util
import secrets
import shlex
import sys
import warnings
from pathlib import Path

import typer

from ..errors import UserError
from ..render.measure import list_table, print_calibration, print_run
from ._app import app, command, console, print_json

# --- option checks -------------------------------------------------------------------------------------------


def check_writable(path: Path, option: str) -> None:
    """A UserError now, before minutes of work, when ``path`` cannot be written (the file is not left behind)."""
    if path.is_dir():
        raise UserError(f"{option} {path}: is a folder, not a file")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as err:
        raise UserError(f"{option} {path}: cannot write: {err.strerror}") from None
    if not existed:
        path.unlink()


def resolve_spec(gpu: str | None, device: str):
    """--gpu, or the spec matching the CUDA device's name; None under the interpreter without --gpu."""
    from ..measure.harness import detect_device_spec
    from ..specs.hardware import load_gpu

    if gpu is not None:
        return load_gpu(gpu)
    return detect_device_spec() if device == "cuda" else None


def kernel_available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def load_kernel(name: str):
    from ..kernels.registry import KERNELS, get_kernel

    info = KERNELS[name]
    try:
        return get_kernel(name)
    except ModuleNotFoundError as err:
        if err.name == info.module:
            raise UserError(f"kernel '{name}' is registered but {info.module} is not installed yet") from None
        raise


def reproducing_command(kernel: str, shapes: list[str] | None, dtype: str, baseline: str, gpu: str | None,
                        seed: int, interpret: bool, cuda_graph: bool, save: Path | None, json: bool) -> str:
    """The command line that repeats this run, with the seed it drew and the spec it resolved."""
    args = ["rooflinectl", "measure", "--kernel", kernel]
    for s in shapes or []:
        args += ["--shape", s]
    args += ["--dtype", dtype]
    if not interpret:
        args += ["--baseline", baseline]
    if gpu:
        args += ["--gpu", gpu]
    args += ["--seed", str(seed)]
    if interpret:
        args.append("--interpret")
    if cuda_graph:
        args.append("--cuda-graph")
    if save:
        args += ["--save", str(save)]
    if json:
        args.append("--json")
    return shlex.join(args)


# --- progress ------------------------------------------------------------------------------------------------


class RichReporter:
    """A rich progress bar on stderr, for a terminal; the harness calls start/step/advance."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self.task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def start(self, total: int) -> None:
        self.task = self.progress.add_task("starting", total=total)

    def step(self, text: str) -> None:
        if self.task is not None:
            self.progress.update(self.task, description=text)

    def advance(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)


def _reporter(json: bool):
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
    baseline: str = typer.Option("torch", "--baseline", help="Also time torch eager, torch.compile, all or none."),
    gpu: str = typer.Option(None, "--gpu", "-g", help="Spec to compare against (default: the one matching the "
                                                       "device's name)."),
    save: Path = typer.Option(None, "--save", help="Write the record as JSON (what 'plot --measured' reads)."),
    interpret: bool = typer.Option(False, "--interpret", help="Run in Triton's interpreter on the CPU: "
                                                              "correctness only, small shapes, no timing."),
    seed: int = typer.Option(None, "--seed", help="Seed of the random inputs (default: a fresh one, recorded)."),
    cuda_graph: bool = typer.Option(False, "--cuda-graph", help="Time replays of a CUDA graph (no CPU launch "
                                                                "overhead: for kernels of a few µs)."),
    json: bool = typer.Option(False, "--json", help="Print the record as JSON; no progress bar."),
):
    """Run a Triton kernel on this GPU: check it, time it, and place it against the roofline.

    Example: rooflinectl measure --kernel fused_softmax --shape 4096x16384 --dtype bf16 --baseline all
    """
    from ..kernels.registry import KERNELS
    from ..measure.harness import Plan, baselines_for, parse_shapes, run_measure, set_interpret

    if list_:
        rows = [{"name": i.name, "summary": i.summary, "available": kernel_available(i.module)}
                for i in KERNELS.values()]
        if json:
            print_json(rows)
        else:
            console().print(list_table(rows))
        return
    if kernel is None:
        raise UserError("give --kernel NAME (or --list to see the kernels)")
    if kernel not in KERNELS:
        from ..kernels.registry import get_kernel

        get_kernel(kernel)  # the UserError naming the closest kernels
    chosen_baselines = baselines_for(baseline)
    if save is not None:
        check_writable(save, "--save")
    if interpret:
        set_interpret(KERNELS[kernel].module)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
    from ..measure.harness import require_cuda, require_gpu_stack

    require_gpu_stack()
    k = load_kernel(kernel)
    dtype = dtype or k.default_dtype
    shapes = parse_shapes(k, shape) if shape else list(k.interpret_shapes if interpret else k.default_shapes)
    for s in shapes:
        k.check(s, dtype)
    device = "cpu" if interpret else "cuda"
    if not interpret:
        require_cuda()
    spec = resolve_spec(gpu, device)
    seed = seed if seed is not None else secrets.randbelow(2**31 - 10**6)
    plan = Plan(shapes=shapes, dtype=dtype, device=device, timed=not interpret,
                baselines=() if interpret else chosen_baselines, seed=seed,
                timer="cuda_graph" if cuda_graph else "events")
    cmd = reproducing_command(kernel, shape, dtype, baseline, gpu or (spec.id if spec else None), seed, interpret,
                              cuda_graph, save, json)
    with _reporter(json) as reporter:
        run = run_measure(k, plan, spec, command=cmd, reporter=reporter)
    if save is not None:
        from ..measure.records import save as save_record

        save_record(run, save)
    if json:
        sys.stdout.write(run.to_json())
    else:
        print_run(run)
        if save is not None:
            console().print(f"saved {save}", highlight=False)
    if run.failed:
        raise typer.Exit(1)


@command(app)
def calibrate(
    output: Path = typer.Option(..., "--output", "-o", help="Hardware YAML to write (the spec + 'measured')."),
    gpu: str = typer.Option(None, "--gpu", "-g", help="Spec to start from (default: the one matching the "
                                                       "device's name)."),
    json: bool = typer.Option(False, "--json", help="Print what was measured as JSON; no progress bar."),
):
    """Measure this GPU's copy bandwidth and matmul peaks, and write them into a hardware file.

    'analyze --calibrated --gpu FILE' and 'plot' then use the measured ceilings as the roofs.

    Example: rooflinectl calibrate -o hardware/my-h200.yaml
    """
    from ..measure.ceilings import PROBE_DTYPES, measure_ceilings, measured_section, write_calibrated
    from ..measure.harness import device_info, do_bench, now, require_cuda, require_gpu_stack

    check_writable(output, "-o")
    torch_version, triton_version = require_gpu_stack()
    require_cuda()
    spec = resolve_spec(gpu, "cuda")
    info = device_info(spec, "cuda")
    cmd = shlex.join(["rooflinectl", "calibrate", "-o", str(output), "--gpu", spec.id])
    with _reporter(json) as reporter:
        reporter.start(1 + len(PROBE_DTYPES))

        started = []

        def step(text: str) -> None:  # each probe announces itself: the one before it is done
            if started:
                reporter.advance()
            started.append(text)
            reporter.step(text)

        ceilings = measure_ceilings(do_bench, info.l2_bytes, PROBE_DTYPES, on_step=step)
    measured = measured_section(ceilings, device_name=info.name, date=now(), command=cmd,
                                torch_version=torch_version, triton_version=triton_version, driver=info.driver)
    written = write_calibrated(spec, measured, output)
    if json:
        print_json({"file": str(output), "id": written.id, "spec": spec.id,
                    "measured": measured.model_dump(mode="json"), "notes": ceilings.notes})
        return
    print_calibration(spec, written, ceilings.notes, output)
