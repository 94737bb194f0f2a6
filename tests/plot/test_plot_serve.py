"""plot serve: one simulated run per load drawn to a file, its JSON each run's analyze serve --json."""

from __future__ import annotations

import json

import rooflinectl as rl
from helpers import assert_one_line_error, cli


def test_plot_serve_draws_a_run_per_load(tmp_path):
    chart = tmp_path / "serve.png"
    args = ["plot", "serve", "--gpu", "h100", "--concurrency", "1,4", "--prompt", "256", "--output", "8",
            "--requests", "8", "-o", str(chart)]
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert chart.stat().st_size > 10_000 and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["load"]["concurrency"] for r in data["runs"]] == [1, 4]
    assert data["runs"][1] == rl.serve(gpu="h100", concurrency=4, prompt=256, output=8, requests=8).to_dict()
    assert cli(*args).stdout.strip() == f"wrote {chart} (2 runs)"


def test_plot_serve_refuses_in_one_line(tmp_path):
    assert_one_line_error(cli("plot", "serve", "--concurrency", "1", "--rate", "2", "-o", str(tmp_path / "a.png")),
                          "give one list of loads")
    assert_one_line_error(cli("plot", "serve", "-o", str(tmp_path / "a.gif")), "unknown image format")
    assert_one_line_error(cli("plot", "serve", "--rate", "x", "-o", str(tmp_path / "a.png")), "--rate 'x'")
    assert not list(tmp_path.iterdir())  # nothing half-written
