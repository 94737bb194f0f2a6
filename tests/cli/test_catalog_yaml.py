"""workloads show writes YAML that loads back, at any terminal width, for every bundled scenario and model."""

from __future__ import annotations

import pytest
import yaml

from helpers import cli
from rooflinectl.specs.model import Model
from rooflinectl.specs.models import model_catalog
from rooflinectl.specs.scenario import list_scenarios


@pytest.mark.parametrize("name", [*sorted(model_catalog()), *sorted(list_scenarios())])
def test_workloads_show_is_yaml_that_loads_back_at_40_columns(name, tmp_path):
    out = cli("workloads", "show", name, env={"COLUMNS": "40"}).stdout
    data = yaml.safe_load(out)
    if name in model_catalog():
        assert Model.model_validate(data).id == name
    else:
        assert data["phase"] in ("decode", "prefill", "attention", "mixed")
