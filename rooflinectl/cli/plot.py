"""``rooflinectl plot``: the roofline chart of a workload on one or more GPUs, as PNG, SVG or PDF."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ..errors import UserError
from ..plot.chart import GPU_COLORS
from . import options as opt
from ._app import DEFAULT_GPU, app, command, print_json, split_ints
from .options import workload_overrides
from .routing import routed

if TYPE_CHECKING:  # the specs are imported inside the functions: `rooflinectl --help` needs none of them
    from ..specs.step import Phase
    from ..specs.workload import SizeField


def size_flag(field: str) -> str:
    """The option of a size field: seq_len is --seq-len."""
    return "--" + field.replace("_", "-")


def sizes(given: dict[SizeField, str | None]) -> tuple[dict[str, int], SizeField | None, list[int]]:
    """The size options (``specs.workload.SIZE_FIELDS``): one value each overrides the scenario; a list (of one
    option only) is a sweep.

    Returns (the single-value overrides, the swept field or None, its values sorted and without repeats).
    """
    from ..specs.workload import SIZE_FIELDS

    overrides: dict[str, int] = {}
    swept: list[tuple[SizeField, list[int]]] = []
    for field in SIZE_FIELDS:
        text = given.get(field)
        if text is None:
            continue
        values = split_ints(text, size_flag(field))
        if not values:
            raise UserError(f"{size_flag(field)}: give a value or a comma-separated list such as 1,8,64")
        if len(values) == 1:
            overrides[field] = values[0]
        else:
            swept.append((field, sorted(set(values))))
    if len(swept) > 1:
        flags = " and ".join(size_flag(f) for f, _ in swept)
        raise UserError(f"{flags} are both lists: sweep one size at a time")
    if not swept:
        return overrides, None, []
    field, values = swept[0]
    return overrides, field, values


# The most GPUs a sweep draws on one chart (without a sweep, the six of plot.chart.GPU_COLORS). Every command
# answers within 5 s on any accepted input: 64 sizes on 4 GPUs, decode and prefill, took 2.9 s on a 2-core
# machine under a load of 2.6 (benchmarks/plot_speed.py), on 6 GPUs 4.4 s, with 2 of its 13 op labels and 1 of
# the 128 sizes finding room: more lines than a chart shows apart.
MAX_SWEPT_GPUS = 4


def check_gpu_count(gpus: list[str], field: SizeField | None) -> None:
    """A size list sweeps at most MAX_SWEPT_GPUS GPUs."""
    if field is not None and len(gpus) > MAX_SWEPT_GPUS:
        raise UserError(f"--gpu: {len(gpus)} GPUs with a list of {size_flag(field)} values; a sweep draws at most "
                        f"{MAX_SWEPT_GPUS} (give fewer GPUs, or one value)")


# What `rooflinectl plot` draws with no workload named.
DEFAULT_PHASES: tuple[Phase, ...] = ("decode", "prefill")


def default_phases(given: dict[SizeField, str | None]) -> list[str]:
    """With no workload named: decode and prefill, or the one whose length (``specs.workload.length_field``)
    an option gives."""
    from ..specs.workload import length_field

    lengths = {length_field(p) for p in DEFAULT_PHASES if given.get(length_field(p)) is not None}
    if len(lengths) > 1:
        raise UserError("--context is decode's length and --seq-len prefill's: name the workload to plot")
    return [p for p in DEFAULT_PHASES if not lengths or length_field(p) in lengths]


@command(app, cls=routed(pareto=".pareto:pareto_app", serve=".plot_serve:plot_serve_app"))
def plot(
    workload: str = typer.Argument(
        None, help="A phase (decode, prefill, attention) or a workload YAML file (default: decode and prefill)."
    ),
    gpu: list[str] = typer.Option(
        None, "--gpu", "-g",
        # Parentheses, not brackets: typer's help reads "[default: …]" as rich markup and drops it.
        help=f"GPU id, alias or YAML path; repeat to compare GPUs, at most {len(GPU_COLORS)} ({MAX_SWEPT_GPUS} with a size list; "
        f"default: {DEFAULT_GPU}).",
    ),
    model: opt.Model = None,
    batch: str = typer.Option(None, "--batch", "-b", help="Sequences in the batch; a list (1,8,64,256) draws "
                              "each op's trajectory."),
    seq_len: str = typer.Option(None, "--seq-len", "-s", help="Prompt tokens per sequence (prefill, attention); "
                                "a list draws trajectories."),
    context: str = typer.Option(None, "--context", "-c", help="KV positions a decode step attends to; a list "
                                "draws trajectories."),
    dtype: opt.Dtype = None,
    kv_dtype: opt.KvDtype = None,
    weight_dtype: opt.WeightDtype = None,
    act_dtype: opt.ActDtype = None,
    group_size: opt.GroupSize = None,
    attention: opt.Attention = None,
    causal: opt.Causal = None,
    fuse: opt.Fuse = None,
    calibrated: opt.Calibrated = False,
    tp: opt.Tp = 1,
    ep: opt.Ep = 1,
    pp: opt.Pp = 1,
    measured: Path = typer.Option(
        None, "--measured", help="Overlay measured kernels from a 'rooflinectl measure --save' or 'rooflinectl "
        "profile --save' JSON file."
    ),
    output: Path = typer.Option(Path("roofline.png"), "--output", "-o", help="The file to write: .png, .svg or .pdf."),
    json: bool = typer.Option(False, "--json", help="Print the chart's content (roofs, ridges, points) as JSON."),
    style: str = typer.Option("light", "--style", help="light or dark: the slide the chart goes on."),
) -> None:
    """Draw the roofline chart: every op of the step at its intensity and attainable rate, under the GPU's roofs.

    Example: rooflinectl plot decode --gpu h100 --batch 1,8,64,256 -o decode-batching.png
    """
    from ..engine.parallel import Layout
    from ..plot.build import chart_json, check_output, plot_workloads
    from ..plot.chart import check_style
    from ..render.console import say
    from ..specs.hardware import load_gpu
    from ..specs.scenario import resolve_workload

    check_output(output)
    check_style(style)
    given: dict[SizeField, str | None] = {"batch": batch, "context": context, "seq_len": seq_len}
    overrides, field, values = sizes(given)
    check_gpu_count(gpu or [], field)
    names = [workload] if workload is not None else default_phases(given)
    common = workload_overrides(model, None, None, None, dtype, kv_dtype, attention, causal, fuse,
                                weight_dtype=weight_dtype, act_dtype=act_dtype, group_size=group_size)
    workloads = [resolve_workload(name, **{**common, **overrides}) for name in names]
    gpus = [load_gpu(g) for g in (gpu or [DEFAULT_GPU])]
    chart = plot_workloads(workloads, gpus, output, field, values, measured, calibrated, style, Layout(tp, ep, pp))
    if json:
        print_json(chart_json(chart, output))
    else:
        panels = ", ".join(p.title for p in chart.panels)
        say(f"wrote {output} ({panels}; {', '.join(chart.gpus)})")
