"""cli/catalog.py: the hardware and workloads commands."""

from __future__ import annotations

import json

from helpers import cli


def test_hardware_and_workloads_commands():
    shown = cli("hardware", "show", "h100")
    assert shown.exit_code == 0
    assert "989.4" in shown.stdout and "295" in shown.stdout  # bf16 peak and its ridge
    assert cli("hardware", "list").exit_code == 0
    data = json.loads(cli("hardware", "show", "h100", "--json").stdout)
    assert data["memory"]["hbm_bandwidth_gbps"] == 3350
    listed = cli("workloads", "list")
    assert "llama-3-8b" in listed.stdout and "decode" in listed.stdout
    assert "context: 4096" in cli("workloads", "show", "decode").stdout
    assert "hidden_size: 4096" in cli("workloads", "show", "llama-3-8b").stdout


def test_workloads_show_an_moe_model_states_its_parameters_and_layers():
    shown = cli("workloads", "show", "qwen3-30b-a3b").stdout
    assert "# parameters: 30,532,122,624 in all (every expert, held in memory)" in shown
    assert "# active per token: 3,353,032,704" in shown
    assert "# layers: 48 MoE (top-8 of 128 experts of width 768), q/k RMSNorm per head" in shown
    data = json.loads(cli("workloads", "show", "mixtral-8x7b", "--json").stdout)
    assert data["parameters"] == {"total": 46_702_792_704, "active_per_token": 12_879_925_248}
    assert data["layers"] == {"dense": 0, "moe": 32, "sliding": 0}
    assert data["moe"]["num_experts"] == 8
    listed = cli("workloads", "list").stdout
    assert "top-2 of 8×14336" in listed


def test_workloads_show_of_an_moe_model_is_the_yaml_that_defines_it(tmp_path):
    """The derived lines are YAML comments: the text output read back as a model file is the same model."""
    from rooflinectl.specs.workload import load_model

    path = tmp_path / "copy.yaml"
    path.write_text(cli("workloads", "show", "qwen3-235b-a22b").stdout)
    assert load_model(str(path)) == load_model("qwen3-235b-a22b")
