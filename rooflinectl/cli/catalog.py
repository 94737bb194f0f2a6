"""``rooflinectl hardware …`` and ``rooflinectl workloads …``: what specs are bundled, and each in full."""

from __future__ import annotations

import typer

from ..render.analysis import gpu_detail, gpu_table
from ..render.hierarchy import gpu_hierarchy_json, gpu_hierarchy_view
from ..specs.hardware import list_gpus, load_gpu
from ..specs.workload import list_models, list_scenarios, load_model, load_scenario
from ._app import app, command, console, print_json

hardware_app = typer.Typer(help="The GPU specs: list them, show one with its ridge points.", no_args_is_help=True)
workloads_app = typer.Typer(help="The bundled scenarios and models.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(workloads_app, name="workloads")


@command(hardware_app, "list")
def hardware_list(json: bool = typer.Option(False, "--json", help="Print the specs as JSON.")):
    """List the known GPUs (bundled, and folders named in ROOFLINECTL_HARDWARE_PATH).

    Example: rooflinectl hardware list
    """
    gpus = list_gpus()
    if json:
        print_json([g.model_dump() for g in gpus])
    else:
        console().print(gpu_table(gpus))


@command(hardware_app, "show")
def hardware_show(
    gpu: str = typer.Argument(..., help="GPU id, alias or YAML path."),
    json: bool = typer.Option(False, "--json", help="Print the spec as JSON."),
):
    """Show one GPU's spec, the source of each number, and its ridge points per data type.

    Example: rooflinectl hardware show h100
    """
    g = load_gpu(gpu)
    if json:
        print_json({**g.model_dump(), "hierarchy": gpu_hierarchy_json(g)})
    else:
        console().print(gpu_detail(g), gpu_hierarchy_view(g))


@command(workloads_app, "list")
def workloads_list(json: bool = typer.Option(False, "--json", help="Print as JSON.")):
    """List the bundled scenarios (decode, prefill, attention) and models.

    Example: rooflinectl workloads list
    """
    scenarios = list_scenarios()
    models = list_models()
    if json:
        print_json({
            "scenarios": {name: s.model_dump() for name, s in scenarios.items()},
            "models": [m.model_dump() for m in models],
        })
        return
    from rich import box
    from rich.table import Table

    t = Table(title="Scenarios (rooflinectl analyze NAME)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("name", "phase", "model", "batch", "seq_len", "context", "dtype", "attention"):
        t.add_column(col, no_wrap=True)
    for name, s in scenarios.items():
        model = s.model if isinstance(s.model, str) else s.model.id
        t.add_row(name, s.phase, model, str(s.batch), str(s.seq_len or "-"), str(s.context or "-"), s.dtype,
                  s.attention)
    m = Table(title="Models (--model ID)", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("id", "params", "hidden", "layers", "heads/kv", "mlp", "vocab"):
        m.add_column(col, no_wrap=True, justify="left" if col == "id" else "right")
    for model in models:
        m.add_row(model.id, f"{model.parameter_count() / 1e9:.2f} B", str(model.hidden_size),
                  str(model.num_layers), f"{model.num_heads}/{model.num_kv_heads}", str(model.intermediate_size),
                  str(model.vocab_size))
    c = console()
    c.print(t)
    c.print(m)


@command(workloads_app, "show")
def workloads_show(
    name: str = typer.Argument(..., help="A scenario (decode, prefill, attention), a model id, or a YAML path."),
    json: bool = typer.Option(False, "--json", help="Print as JSON."),
):
    """Show one scenario or model in full.

    Example: rooflinectl workloads show decode
    """
    from ..errors import UserError

    try:
        obj = load_scenario(name)
    except UserError as scenario_error:
        try:
            obj = load_model(name)
        except UserError:
            raise scenario_error from None
    if json:
        print_json(obj.model_dump())
        return
    import yaml

    console().print(yaml.safe_dump(obj.model_dump(exclude_none=True), sort_keys=False).rstrip())
