"""The bundled scenarios and models as rich tables, and one of them in full (``workloads list`` and ``show``).
Formats; computes nothing."""

from __future__ import annotations

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from ..specs.workload import Model, Scenario


def scenarios_table(scenarios: dict[str, Scenario]) -> Table:
    t = Table(title="Scenarios (rooflinectl analyze NAME)", title_justify="left", box=box.SIMPLE_HEAD,
              pad_edge=False, collapse_padding=True)
    for col in ("name", "phase", "model", "batch", "seq_len", "context", "dtype", "attention"):
        t.add_column(col, no_wrap=True)
    for name, s in scenarios.items():
        model = s.model if isinstance(s.model, str) else s.model.id
        t.add_row(Text(name), s.phase, Text(model),  # names from the user's files: never markup str(s.batch), str(s.seq_len or "-"), str(s.context or "-"), s.dtype,
                  s.attention)
    return t


def models_table(models: list[Model]) -> Table:
    """One row per model; ``params`` is the model's own ``parameter_count()``."""
    m = Table(title="Models (--model ID)", title_justify="left", box=box.SIMPLE_HEAD)
    for col in ("id", "params", "hidden", "layers", "heads/kv", "mlp", "vocab"):
        m.add_column(col, no_wrap=True, justify="left" if col == "id" else "right")
    for model in models:
        m.add_row(Text(model.id), f"{model.parameter_count() / 1e9:.2f} B", str(model.hidden_size),
                  str(model.num_layers), f"{model.num_heads}/{model.num_kv_heads}", str(model.intermediate_size),
                  str(model.vocab_size))
    return m


def catalog_view(scenarios: dict[str, Scenario], models: list[Model]) -> Group:
    """``workloads list``: the scenarios, then the models."""
    return Group(scenarios_table(scenarios), models_table(models))


def catalog_json(scenarios: dict[str, Scenario], models: list[Model]) -> dict:
    return {
        "scenarios": {name: s.model_dump() for name, s in scenarios.items()},
        "models": [m.model_dump() for m in models],
    }


def spec_view(spec: Scenario | Model) -> Text:
    """``workloads show``: the scenario or model as the YAML that would define it (fields left unset omitted)."""
    import yaml

    return Text(yaml.safe_dump(spec.model_dump(exclude_none=True), sort_keys=False).rstrip())
