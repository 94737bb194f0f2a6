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
    # Each load once, in order: a repeat simulated the same run twice.
    again = cli(*[a if a != "1,4" else "4,1,4" for a in args], "--json")
    assert [r["load"]["concurrency"] for r in json.loads(again.stdout)["runs"]] == [1, 4]
    one = [a if a != "1,4" else "4,4" for a in args]
    assert cli(*one).stdout.strip() == f"wrote {chart} (1 run)"


def test_plot_serve_refuses_in_one_line(tmp_path):
    assert_one_line_error(cli("plot", "serve", "--concurrency", "1", "--rate", "2", "-o", str(tmp_path / "a.png")),
                          "give one list of loads")
    assert_one_line_error(cli("plot", "serve", "-o", str(tmp_path / "a.gif")), "unknown image format")
    assert_one_line_error(cli("plot", "serve", "--rate", "x", "-o", str(tmp_path / "a.png")), "--rate 'x'")
    # An empty list ran the four default loads; --rate "" was refused.
    assert_one_line_error(cli("plot", "serve", "--concurrency", "", "-o", str(tmp_path / "a.png")), "empty item")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_a_narrow_latency_range_is_labelled_and_an_idle_engine_is_drawn_idle(tmp_path):
    """TTFT 34 to 68 ms at 1 and 2 clients: a log axis labelled by decades alone had no label at all. Requests 2 s
    apart at 0.5/s: the batch panel drew the last step's sequence across every idle gap."""
    from rooflinectl.plot.serve import draw_serve

    runs = [rl.serve(gpu="h100", concurrency=c, output=1, requests=4).simulation for c in (1, 2)]
    fig = draw_serve(runs, "narrow", tmp_path / "n.png")
    latency, batch = fig.axes[0], fig.axes[1]
    low, high = latency.get_ylim()
    labels = [t.get_text() for t, v in zip(latency.get_yticklabels(), latency.get_yticks()) if low <= v <= high]
    assert len([t for t in labels if t]) >= 2, labels
    assert all(float(v).is_integer() for v in batch.get_yticks())  # a count: no 0.96 … 1.04
    idle = rl.serve(gpu="h100", rate=0.5, output=4, prompt=64, requests=4).simulation
    points = idle.run.timeline
    assert any(p.sequences == 0 for p in points)  # the gaps between arrivals
    gaps = [(a.time_s, b.time_s) for a, b in zip(points, points[1:]) if a.sequences == b.sequences == 0]
    assert sum(b - a for a, b in gaps) > 0.5 * idle.run.duration_s  # idle most of the run, and drawn so


def test_a_folder_as_the_chart_is_said_so(tmp_path):
    # "-o ." said "unknown image format '(none)'".
    assert_one_line_error(cli("plot", "decode", "-o", str(tmp_path)),
                          "cannot write: it is a folder; give the chart's file")
    # Each command suggests its own default file in the folder.
    for args, name in ((["plot", "decode", "-o"], "roofline.png"), (["plot", "serve", "-o"], "serve.png"),
                       (["plot", "pareto", "--chart"], "pareto.png")):
        assert_one_line_error(cli(*args, str(tmp_path)), f"e.g. {tmp_path / name}")
