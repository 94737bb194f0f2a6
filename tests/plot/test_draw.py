"""plot.draw: the drawn artists carry the chart's data, the legend and title, and labels that never overlap."""

from __future__ import annotations

from pathlib import Path

import pytest
from plot_helpers import DECODE, GPU1, GPU2, measured_run

from rooflinectl.plot.build import build_chart, draw
from rooflinectl.plot.draw import wrap_title


def test_wrap_title_breaks_between_pieces_only():
    title = "Meta Llama 3 8B on NVIDIA A100 SXM4 80GB vs NVIDIA H100 SXM5 80GB · bf16 · naive attention"
    assert wrap_title(title, 200) == title
    assert wrap_title(title, 60).split("\n") == ["Meta Llama 3 8B on NVIDIA A100 SXM4 80GB vs",
                                                 "NVIDIA H100 SXM5 80GB · bf16 · naive attention"]


@pytest.fixture(scope="module")
def drawn():
    """One figure with most of what a chart can hold: a sweep, two GPUs, measured points."""
    import matplotlib.pyplot as plt

    measured = measured_run()
    chart = build_chart([DECODE], [GPU1, GPU2], "batch", [1, 8, 64, 256], measured)
    fig = draw(chart)
    yield chart, fig
    plt.close(fig)


def by_gid(ax, gid: str) -> list:
    """The artists drawn with this gid, in drawing order."""
    return [a for a in [*ax.lines, *ax.collections, *ax.texts] if a.get_gid() == gid]


def test_drawn_roofs_ridges_and_points_are_the_charts_data(drawn):
    chart, fig = drawn
    panel, ax = chart.panels[0], fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx(panel.xlim) and ax.get_ylim() == pytest.approx(panel.ylim)
    for r in panel.roofs:
        (line,) = by_gid(ax, f"roof {r.gpu} {r.name}")
        assert list(line.get_xdata()) == pytest.approx([r.x_from, r.x_to])
        assert list(line.get_ydata()) == pytest.approx([r.at(r.x_from), r.at(r.x_to)])
    for r in panel.ridges:
        (marker,) = by_gid(ax, f"ridge {r.gpu}")
        assert (marker.get_xdata()[0], marker.get_ydata()[0]) == pytest.approx((r.intensity, r.flops))
    for g in panel.groups:
        (markers,) = by_gid(ax, f"point {g.gpu} {g.label}")  # one scatter per group, a marker per point
        assert len(markers.get_offsets()) == len(g.points)
        for offset, p in zip(markers.get_offsets(), g.points):
            assert tuple(offset) == pytest.approx((p.intensity, p.flops))
    (measured,) = by_gid(ax, "measured test-gpu gemv")
    assert tuple(measured.get_offsets()[0]) == pytest.approx((panel.measured[0].intensity, panel.measured[0].flops))
    texts = {t.get_text() for t in ax.texts}
    assert "gemv 1x4096x4096 84%" in texts
    (footnote,) = [t.get_text() for t in by_gid(ax, "footnote")]
    assert footnote.startswith("\n".join(panel.footnotes))
    # Every label is drawn, or (no free spot: never over another) named in the footnote.
    for lab in panel.labels:
        assert lab.text in texts or lab.text.replace("\n", ", ") in footnote.split("No room to label: ")[1]
    assert any(t.startswith("test-gpu ") and "HBM 2 TB/s" in t for t in texts)


def test_drawn_legend_and_title(drawn):
    chart, fig = drawn
    (legend,) = fig.legends  # beside the panels, not on one
    assert [t.get_text() for t in legend.get_texts()] == [e.label for e in chart.legend]
    assert "batch 1 → 8 → 64 → 256" in [e.label for e in chart.legend]
    title = fig._suptitle.get_text().replace("\n", " ")
    for part in ("Meta Llama 3 8B", "Test GPU 1", "Test GPU 2", "bf16"):
        assert part in title
    assert fig.axes[0].get_title(loc="left") == "decode · batch 1, 8, 64, 256 · context 4096"


def test_op_labels_do_not_overlap(drawn):
    _, fig = drawn
    ax = fig.axes[0]
    from matplotlib.text import Text

    renderer = fig.canvas.get_renderer()
    labels = by_gid(ax, "op-label") + by_gid(ax, "measured-label") + by_gid(ax, "value-label")
    boxes = []
    for t in labels:
        t.update_positions(renderer)
        boxes.append(Text.get_window_extent(t, renderer))  # the text, without its leader line
    assert len(boxes) >= 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)


def test_readme_chart_is_committed():
    png = Path(__file__).parents[2] / "docs" / "img" / "decode-batching.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000


def test_a_sweep_draws_a_few_artists_per_series_not_one_per_point():
    """issue 18: an arrow per segment (an annotation each) made a 64-value sweep of 3 GPUs draw 1,100 artists and
    take 10 s. Each group is one scatter, each trajectory one line and one collection of arrows, whatever the
    count of values."""
    import matplotlib.pyplot as plt

    chart = build_chart([DECODE], [GPU1, GPU2], "batch", list(range(1, 65)))
    fig = draw(chart)
    try:
        panel, ax = chart.panels[0], fig.axes[0]
        labels = {"op-label", "measured-label", "value-label", "roof-label", "ridge-label", "footnote"}
        drawn = [a for a in [*ax.lines, *ax.collections, *ax.patches, *ax.texts] if a.get_gid() not in labels]
        moving = [g for g in panel.groups if g.moves]
        assert len(panel.points) > 1000
        assert len(drawn) <= 3 * len(panel.groups) + 2 * len(panel.roofs) + 2 * len(panel.ridges)
        for g in moving:
            (arrows,) = by_gid(ax, f"arrows {g.gpu} {g.label}")
            assert len(arrows.get_paths()) <= len(g.points) - 1
    finally:
        plt.close(fig)


def test_the_arrows_are_matplotlibs_annotation_arrows():
    """plot.draw._draw_arrows computes each arrow (shortened by the markers' radii, a wedge at its end) as
    ``ax.annotate("", b, a, arrowprops=dict(arrowstyle="-|>", shrinkA=r_a, shrinkB=r_b))`` draws it."""
    import matplotlib.pyplot as plt
    import numpy as np

    from rooflinectl.plot.draw import _draw_arrows, _radius

    chart = build_chart([DECODE], [GPU1], "batch", [1, 2, 8, 64, 256])
    fig = draw(chart)
    try:
        panel, ax = chart.panels[0], fig.axes[0]
        renderer = fig.canvas.get_renderer()
        pt = fig.dpi / 72
        g = next(g for g in panel.groups if g.moves)
        radii = [_radius(p, panel) for p in g.points]
        _draw_arrows(ax, g.points, radii, "#333333", pt, gid="arrows under test")
        (arrows,) = by_gid(ax, "arrows under test")
        offsets = ax.transData.transform(arrows.get_offsets())
        checked = 0
        for k, (a, b) in enumerate(zip(g.points, g.points[1:])):
            ann = ax.annotate("", xy=(b.intensity, b.flops), xytext=(a.intensity, a.flops),
                              arrowprops=dict(arrowstyle="-|>", lw=1.1, shrinkA=radii[k], shrinkB=radii[k + 1]))
            ann.update_positions(renderer)
            ann.arrow_patch._dpi_cor = renderer.points_to_pixels(1.0)
            (shaft, wedge), _ = ann.arrow_patch._get_path_in_displaycoord()
            ann.remove()
            mine = offsets[checked] + arrows.get_paths()[checked].vertices * pt
            assert np.allclose(mine[0], shaft.vertices[0], atol=0.05)  # start
            assert np.allclose(mine[1], shaft.vertices[-1], atol=0.05)  # shaft's end
            assert np.allclose(mine[2:5], wedge.vertices[:3], atol=0.05)  # the wedge: side, tip, side
            checked += 1
        assert checked == len(g.points) - 1
    finally:
        plt.close(fig)
