"""explore/chart.py and canvas.py: the terminal roofline puts every op at the engine's coordinates."""

from __future__ import annotations

import pytest
from explore_helpers import (
    H100,
    explore,
    explore_steps,
)

from rooflinectl.engine.roofline import analyze
from rooflinectl.explore.canvas import Canvas, LogAxis
from rooflinectl.explore.chart import group_label, roofline_chart
from rooflinectl.explore.panels import RooflineChart
from rooflinectl.specs.scenario import resolve_workload


def test_chart_places_every_op_at_the_engines_coordinates():
    def check(app, pilot):
        widget = app.query_one("#chart", RooflineChart)
        chart = widget.chart
        a = app.analysis
        lines = chart.lines()
        assert (len(lines[0]), len(lines)) == widget.content_size  # drawn to the widget's size
        assert chart.off_chart == ["embed", "kv_write"]  # no FLOPs: intensity 0 has no place on a log axis
        for p in a.placements:
            if p.name in chart.off_chart:
                continue
            col, row = chart.points[p.name]
            assert col == chart.left + chart.x.cell(p.intensity)
            assert row == chart.top + chart.y.cells - 1 - chart.y.cell(p.attainable_flops)
            # Decode at batch 1: every op is memory-bound, left of the ridge.
            assert col < chart.ridge_col
        # The ridge column holds the ridge intensity.
        x0 = chart.ridge_col - chart.left
        assert chart.x.value(x0) <= a.ridge < chart.x.value(x0 + 1)
        # The selected op is the diamond, labelled; the tensor roof is labelled with its value.
        col, row = chart.points["gate_proj"]
        assert lines[row][col] == "◆"
        sharing = [name for name, point in chart.points.items() if point == (col, row)]
        assert {"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"} < set(sharing)
        assert f"gate_proj +{len(sharing) - 1}" in lines[row]  # the ops at intensity 1 share one point
        assert "989T bf16" in "\n".join(lines)
        assert chart.roof_rows["bf16"] < chart.roof_rows["fp32 vector"]

    explore("", check)


def test_batching_moves_the_linear_layers_right_toward_the_ridge():
    cols = {}

    def record(app, pilot):
        chart = app.query_one("#chart").chart
        cols[app.knobs.batch] = (chart.points["gate_proj"][0], chart.points["attention"][0], chart.ridge_col)

    explore_steps([("", record), (["b"] * 8, record)])
    (g1, att1, ridge), (g256, att256, _) = cols[1], cols[256]
    assert g1 < g256 < ridge  # batch 256 is still left of the ridge (batch ≈ 332 reaches it) ...
    assert att1 == att256  # ... and attention does not move: each sequence reads its own KV cache


def test_prefill_puts_the_big_matmuls_right_of_the_ridge():
    def check(app, pilot):
        chart = app.query_one("#chart").chart
        for p in app.analysis.placements:
            if p.name in chart.points:
                col = chart.points[p.name][0]
                assert (col >= chart.ridge_col) == (p.bound == "compute"), p.name

    explore(["p"], check)


def test_log_axis_and_canvas():
    axis = LogAxis(0.1, 1e4, 50)
    assert axis.position(0.1) == 0 and axis.position(1e4) == pytest.approx(50)
    assert axis.cell(1.0) == 10 and axis.cell(1e9) == 49 and axis.cell(1e-9) == 0
    assert axis.decades() == [0.1, 1, 10, 100, 1000, 10000]
    assert axis.value(axis.position(3.3)) == pytest.approx(3.3)
    canvas = Canvas(4, 2)
    canvas.polyline([(0, 2), (4, 0)])  # corner to corner: a braille dot in every cell of the diagonal
    canvas.put(3, 1, "xyz")  # cut at the edge
    assert canvas.lines() == ["  ⢀⠔", "⢀⠔⠁x"]
    assert group_label(["gate_proj", "up_proj", "down_proj"]) == "gate/up/down_proj"


def test_chart_stays_readable_when_small():
    a = analyze(resolve_workload("prefill", attention="naive"), H100)
    chart = roofline_chart(a, "softmax", 30, 10)
    assert all(len(line) == 30 for line in chart.lines()) and len(chart.lines()) == 10
    assert set(chart.points) == {p.name for p in a.placements} - {"embed", "kv_write"}
