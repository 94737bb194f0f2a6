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
