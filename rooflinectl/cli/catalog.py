"""``rooflinectl hardware …`` and ``rooflinectl workloads …``: what specs are bundled, and each in full."""

from __future__ import annotations

import typer

from . import options as opt
from ._app import Group, app, command, console, one_format, print_json

hardware_app = typer.Typer(cls=Group, help="The GPU specs: list them, show one with its ridge points.", no_args_is_help=True)
workloads_app = typer.Typer(cls=Group, help="The bundled scenarios and models.", no_args_is_help=True)
app.add_typer(hardware_app, name="hardware")
app.add_typer(workloads_app, name="workloads")


@command(hardware_app, "list")
def hardware_list(json: bool = typer.Option(False, "--json", help="Print the specs as JSON."),
                  csv: opt.Csv = False) -> None:
    """List the known GPUs (bundled, and folders named in ROOFLINECTL_HARDWARE_PATH).

    Example: rooflinectl hardware list
    """
    one_format(json, csv)
    from ..render.hardware import gpu_table, gpus_json
    from ..specs.hardware import list_gpus

    gpus = list_gpus()
    if json:
        print_json(gpus_json(gpus))
    elif csv:
        from ..render.csvout import gpus_csv

        print(gpus_csv(gpus), end="")
    else:
        console().print(gpu_table(gpus))


@command(hardware_app, "show")
def hardware_show(
    gpu: str = typer.Argument(..., help="GPU id, alias or YAML path."),
    json: bool = typer.Option(False, "--json", help="Print the spec as JSON."),
) -> None:
    """Show one GPU's spec, the source of each number, its memory hierarchy and ridge points.

    Example: rooflinectl hardware show h100
    """
    from ..render.hardware import gpu_detail, gpu_json
    from ..specs.hardware import load_gpu

    g = load_gpu(gpu)
    if json:
        print_json(gpu_json(g))
    else:
        console().print(gpu_detail(g))


@command(workloads_app, "list")
def workloads_list(json: bool = typer.Option(False, "--json", help="Print as JSON."), csv: opt.Csv = False) -> None:
    """List the bundled scenarios (decode, prefill, attention) and models.

    Example: rooflinectl workloads list
    """
    one_format(json, csv)
    from ..render.workloads import catalog_json, print_catalog
    from ..specs.models import list_models
    from ..specs.scenario import list_scenarios

    scenarios, models = list_scenarios(), list_models()
    if json:
        print_json(catalog_json(scenarios, models))
    elif csv:
        from ..render.csvout import catalog_csv

        print(catalog_csv(scenarios, models), end="")
    else:
        print_catalog(console(), scenarios, models)


@command(workloads_app, "show")
def workloads_show(
    name: str = typer.Argument(..., help="A scenario (decode, prefill, attention), a model id, or a YAML path."),
    json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Show one scenario or model in full.

    Example: rooflinectl workloads show decode
    """
    from ..errors import UserError
    from ..render.workloads import spec_json, spec_view
    from ..specs.model import Model
    from ..specs.models import load_model
    from ..specs.scenario import Scenario, load_scenario

    spec: Scenario | Model
    try:
        # A config.json is a model's: its own error, never the scenario reader's.
        spec = load_model(name) if name.endswith(".json") else load_scenario(name)
    except UserError as scenario_error:  # not a scenario: a model, or the scenario's message
        try:
            spec = load_model(name)
        except UserError as model_error:  # a model's file says what is wrong with it as a model
            if str(scenario_error).startswith("unknown workload"):  # no file: neither a scenario's nor a model's name
                raise UserError(f"'{name}' is no scenario (decode, prefill, attention): {model_error}") from None
            raise (model_error if "not a scenario file" in str(scenario_error) else scenario_error) from None
    if json:
        print_json(spec_json(spec))
    else:
        # Written as it is, never through a console that wraps at the terminal's width: the output is YAML that
        # loads back (`workloads show X > mine.yaml`), its comments included.
        print(spec_view(spec), end="")
