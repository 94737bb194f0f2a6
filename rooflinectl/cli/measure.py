"""``rooflinectl measure`` and ``rooflinectl calibrate``: real kernels on the GPU in hand, against the roofline.

The commands parse options, check them in the order that reports bad input before a missing GPU, call
``rooflinectl.measure`` / ``rooflinectl.ceilings``, and lay out what comes back. Torch and triton are imported
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
from rich import box
from rich.table import Table
from rich.text import Text

from ..errors import UserError
from ..records import MeasurementFile, ShapeRecord
from ..render import duration, si
from ._app import app, command, console, print_json

STATUS_STYLE = {"passed": "green", "checked": "green", "failed": "bold red", "error": "bold red"}


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
    from ..hardware import load_gpu
    from ..measure import detect_device_spec

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

    from ..measure import Reporter

    if json or not sys.stderr.isatty():
        return nullcontext(Reporter())
    return RichReporter()


# --- layout --------------------------------------------------------------------------------------------------


def _num(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None else format(x, fmt)


def _time(x: float | None) -> str:
    return "-" if x is None else duration(x, sep=" ")


_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"))


def _band(low: float, high: float) -> str:
    """'1.90–2.20 µs': both ends in the unit of the upper one."""
    scale, unit = next(((f, u) for f, u in _UNITS if high >= f), _UNITS[-1])
    return f"{low / scale:.3g}–{high / scale:.3g} {unit}"


def _table(title: str | None) -> Table:
    return Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)


def _check_cell(r: ShapeRecord) -> Text:
    if r.status == "error":
        return Text("ERROR", style=STATUS_STYLE["error"])
    c = r.correctness
    assert c is not None
    word = "ok" if c.passed else "FAILED"
    return Text(f"{word} {c.rel_error:.1e}", style=STATUS_STYLE[r.status])


def headline(run: MeasurementFile) -> str:
    first = run.records[0] if run.records else None
    what = f"{first.kernel} {first.dtype}" if first else "measure"
    spec = f", against the spec {run.gpu.spec}" if run.gpu.spec else ""
    return f"{what} on {run.gpu.name}{spec}"


def results_table(run: MeasurementFile) -> Table:
    """Per shape: the check, and when timed, the time, the rates and the share of the roof."""
    t = _table(None)
    t.add_column("shape", no_wrap=True)
    t.add_column("check", no_wrap=True)
    timed = not run.interpret
    cols = ("time", "p20–p80", "GB/s", "TFLOP/s", "predicted", "%spec", "%meas") if timed else (
        "tolerance", "predicted")
    for col in cols:
        t.add_column(col, justify="right", no_wrap=True)
    for r in run.records:
        row = [r.shape_text, _check_cell(r)]
        if timed:
            row += [_time(r.time_s), _band(r.timing.p20_s, r.timing.p80_s) if r.timing else "-",
                    _num(r.achieved_gbps), _num(r.achieved_tflops, ",.1f"), _time(r.predicted_time_s),
                    _num(r.spec_roof_pct, ".0f"), _num(r.measured_roof_pct, ".0f")]
        else:
            row += [f"{r.correctness.tolerance:.0e}" if r.correctness else "-", _time(r.predicted_time_s)]
        t.add_row(*row)
    return t


def baselines_table(run: MeasurementFile) -> Table:
    """Per shape and baseline: its time, rate and error, and the kernel's speedup over it."""
    t = _table("Baselines: the same op by torch (×: baseline time / kernel time)")
    t.add_column("shape", no_wrap=True)
    t.add_column("baseline")
    for col in ("time", "p20–p80", "GB/s", "TFLOP/s", "rel. err", "kernel ×"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in run.records:
        for b in r.baselines:
            if b.error:
                t.add_row(r.shape_text, b.name, Text("error (below)", style="red"), "", "", "", "", "")
                continue
            t.add_row(r.shape_text, "torch.compile" if b.name == "compile" else "torch eager", _time(b.time_s),
                      _band(b.timing.p20_s, b.timing.p80_s) if b.timing else "-", _num(b.achieved_gbps),
                      _num(b.achieved_tflops, ",.1f"), _num(b.rel_error, ".1e"), _num(b.speedup, ".2f"))
    return t


def anatomy_table(run: MeasurementFile) -> Table:
    t = _table("Launch anatomy: each Triton launch of the checked run (occupancy on the spec's limits)")
    t.add_column("shape", no_wrap=True)
    t.add_column("function", overflow="fold", min_width=10)
    for col in ("grid", "warps", "threads", "regs", "spills", "smem", "per SM", "occup.", "waves"):
        t.add_column(col, justify="right", no_wrap=True)
    t.add_column("limit")
    for r in run.records:
        for launch in r.launches:
            occ = "-" if launch.occupancy is None else f"{launch.occupancy:.0%}"
            t.add_row(
                r.shape_text, launch.function, "×".join(str(g) for g in launch.grid), _num(launch.num_warps, "d"),
                _num(launch.threads_per_program, "d"), _num(launch.n_regs, "d"), _num(launch.n_spills, "d"),
                "-" if launch.shared_bytes is None else si(launch.shared_bytes, "B", sep=""),
                _num(launch.programs_per_sm, "d"), ("≤" + occ) if launch.occupancy_upper_bound else occ,
                _num(launch.waves, "d"), launch.limiter or "-",
            )
    return t


def fusion_table(run: MeasurementFile) -> Table:
    """What the fusion buys by the engine's count: the fused op against the operations it replaces."""
    t = _table("Fusion: the fused kernel against the operations it replaces (engine's count, spec roofs)")
    for col in ("shape", "unfused ops", "bytes unfused", "fused", "predicted unfused", "fused", "measured"):
        t.add_column(col, justify="left" if col in ("shape", "unfused ops") else "right", no_wrap=col != "unfused ops")
    for r in run.records:
        if not r.unfused:
            continue
        predicted = [u.predicted_time_s for u in r.unfused]
        t.add_row(
            r.shape_text, " + ".join(u.op for u in r.unfused), si(sum(u.bytes for u in r.unfused), "B"),
            si(r.bytes, "B"), _time(None if None in predicted else sum(predicted)), _time(r.predicted_time_s),
            _time(r.time_s),
        )
    return t


def _grouped(items: list[tuple[str, str]]) -> list[str]:
    """('shape', 'message') pairs -> one line per message, naming the shapes it holds for."""
    shapes: dict[str, list[str]] = {}
    for shape, message in items:
        shapes.setdefault(message, [])
        if shape not in shapes[message]:
            shapes[message].append(shape)
    return [f"{', '.join(where)}: {message}" for message, where in shapes.items()]


def print_run(run: MeasurementFile) -> None:
    c = console()
    c.print(headline(run), highlight=False, markup=False)
    c.print(results_table(run))
    if any(r.baselines for r in run.records):
        c.print(baselines_table(run))
    if any(r.unfused for r in run.records):
        c.print(fusion_table(run))
    if any(r.launches for r in run.records):
        c.print(anatomy_table(run))
    items: list[tuple[str, str]] = []
    for r in run.records:
        if r.error:
            items.append((r.shape_text, f"error: {r.error}"))
        items += [(r.shape_text, f"baseline {b.name}: {b.error}") for b in r.baselines if b.error]
        for launch in r.launches:
            where = f"{r.shape_text} {launch.function}"
            items += [(where, f"warning: {w}") for w in launch.warnings]
            if launch.note:
                items.append((where, f"anatomy: {launch.note}"))
        items += [(r.shape_text, n) for n in r.notes if not n.startswith("checked in the Triton interpreter")]
    lines = _grouped(items) + run.notes
    g = run.gpu
    versions = f"torch {run.torch_version}, triton {run.triton_version}"
    if g.driver:
        versions += f", driver {g.driver}"
    if run.interpret:
        lines.append("checked correctness only, in Triton's interpreter on the CPU: nothing was timed "
                     "(run without --interpret on a GPU for speed)")
    else:
        how = "a CUDA graph's replays" if run.timer == "cuda_graph" else "CUDA events, the L2 flushed before each"
        lines.append(f"time: median of the timed runs ({how}), p20–p80 the band around it. %spec, %meas: "
                     f"the engine's predicted time under the spec's roofs, or under the ceilings measured in this "
                     f"run, over the measured time (100 = on the roofline)")
        cl = run.ceilings
        if cl and cl.copy_bandwidth_gbps:
            parts = [f"copy {cl.copy_bandwidth_gbps:,.0f} GB/s"]
            parts += [f"{d} matmul {v:,.0f} TFLOP/s" for d, v in cl.tensor_tflops.items()]
            lines.append("ceilings measured in this run: " + ", ".join(parts))
            lines += [f"ceilings: {n}" for n in cl.notes]
    lines.append(f"{versions}; {run.date}")
    lines.append(f"reproduce: {run.command}")
    for line in lines:
        c.print(line, highlight=False, markup=False)


def list_table(rows: list[dict]) -> Table:
    t = Table(title="Kernels", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    t.add_column("name", no_wrap=True)
    t.add_column("summary")
    t.add_column("installed", no_wrap=True)
    for row in rows:
        t.add_row(row["name"], row["summary"], "yes" if row["available"] else "not yet")
    return t


# --- the commands --------------------------------------------------------------------------------------------


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
    from ..measure import Plan, baselines_for, parse_shapes, run_measure, set_interpret

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
    from ..measure import require_cuda, require_gpu_stack

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
        from ..records import save as save_record

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
    from ..ceilings import PROBE_DTYPES, measure_ceilings, measured_section, write_calibrated
    from ..measure import device_info, do_bench, now, require_cuda, require_gpu_stack

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


def print_calibration(spec, written, notes: list[str], output: Path) -> None:
    m = written.measured
    t = Table(title=f"Measured on {m.device_name} ({m.date})", title_justify="left", box=box.SIMPLE_HEAD)
    t.add_column("ceiling")
    t.add_column("measured", justify="right")
    t.add_column(f"spec {spec.id}", justify="right")
    t.add_column("of spec", justify="right")
    spec_bw = spec.memory.hbm_bandwidth_gbps
    t.add_row("copy bandwidth (read + write)", f"{m.copy_bandwidth_gbps:,.0f} GB/s", f"{spec_bw:,.0f} GB/s",
              f"{m.copy_bandwidth_gbps / spec_bw:.0%}")
    for d, v in m.tensor_tflops.items():
        peak = spec.compute.tensor_tflops.get(d)
        t.add_row(f"{d} matmul", f"{v:,.1f} TFLOP/s", _num(peak, ",.1f") + (" TFLOP/s" if peak else ""),
                  f"{v / peak:.0%}" if peak else "-")
    c = console()
    c.print(t)
    for n in notes:
        c.print(n, highlight=False, markup=False)
    c.print(f"wrote {output} (id {written.id}); use it: rooflinectl analyze --calibrated --gpu {output}",
            highlight=False, markup=False)

