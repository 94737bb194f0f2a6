"""plot.chart: the chart's data model, and the output check every chart is written through."""

from __future__ import annotations

import pytest

from rooflinectl.errors import UserError
from rooflinectl.plot.chart import GPU_COLORS, GPU_MARKERS, Roof, check_output


def test_a_memory_roof_rises_with_intensity_and_a_compute_roof_is_flat():
    hbm = Roof("g", "memory", "HBM", 2000e9, 1.0, "HBM 2 TB/s", 0.1, 150)
    peak = Roof("g", "compute", "bf16 tensor", 300e12, 0.0, "bf16 tensor 300 TFLOP/s", 150, 1000)
    assert [hbm.at(x) for x in (1, 10, 150)] == [2000e9, 20000e9, 300e12]
    assert [peak.at(x) for x in (1, 150, 1000)] == [300e12] * 3


def test_each_gpu_has_its_own_colour_and_marker():
    assert len(set(GPU_COLORS)) == len(GPU_COLORS) == len(set(GPU_MARKERS)) == len(GPU_MARKERS)


@pytest.mark.parametrize("name", ["chart.png", "chart.svg", "chart.pdf", "CHART.PNG"])
def test_the_extension_picks_the_format(tmp_path, name):
    check_output(tmp_path / name)  # no error


@pytest.mark.parametrize(
    "name, fragment",
    [("chart.jpg", "unknown image format '.jpg': use .png, .svg, .pdf"), ("chart", "unknown image format '(none)'"),
     ("folder.png", "is a folder"), ("missing/chart.png", "no such folder")],
)
def test_a_bad_output_is_a_user_error(tmp_path, name, fragment):
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(UserError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        check_output(tmp_path / name)


def plot_imports(module: str) -> set[str]:
    """The plot modules that rooflinectl/plot/<module>.py imports (relative imports from within the package)."""
    import ast
    from pathlib import Path

    import rooflinectl.plot

    tree = ast.parse((Path(rooflinectl.plot.__file__).parent / f"{module}.py").read_text())
    return {node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}


def test_the_chart_is_a_leaf_and_drawing_never_imports_building():
    """chart.py is what build and draw share; draw and place read a chart and never import build (the circle
    plot.py and plot_draw.py made before), and place's geometry (boxes) imports nothing of plot; labels and
    measured only fill a chart in."""
    assert plot_imports("chart") == set()
    assert plot_imports("boxes") == set()
    assert plot_imports("place") == {"chart", "boxes"}
    assert plot_imports("draw") == {"chart", "place"}
    assert plot_imports("labels") == {"chart"}
    assert plot_imports("measured") == {"chart"}
    assert plot_imports("build") == {"chart", "labels", "measured", "draw"}  # draw inside draw(): matplotlib
