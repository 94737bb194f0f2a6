"""Issue 19, checked through the rendered figure, not by eye alone: on every README and docs chart and the crowded
ones the issue found (two to five GPUs, batch sweeps), no text overlaps another text (labels, roof and ridge
labels, titles, axis titles, tick labels, legend, footnotes), no text sits on a marker, and no roof line or leader
line crosses a text (a label's own leader ends at it). The title keeps clear of the panel's title, and each panel
has its own y-axis title, left of its tick labels."""

from __future__ import annotations

import numpy as np
import pytest
from test_label_overlap import CHARTS as DOCS_CHARTS
from test_label_overlap import chart_of

from rooflinectl.plot.boxes import text_boxes
from rooflinectl.plot.build import build_chart, draw
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

CHARTS = {
    **DOCS_CHARTS,
    # issue 19's: three GPUs with naive attention, four with a batch sweep of a 70B model that fits on none
    "prefill-3-gpus-naive": (["prefill"], ["a100", "h100", "h200"], None, None, {"attention": "naive"}, None),
    "decode-70b-4-gpus-sweep": (["decode"], ["a100", "h100", "h200", "b200"], "batch", [1, 8, 64, 256],
                                {"model": "llama-3-70b"}, None),
    "decode-2-gpus": (["decode"], ["h100", "mi300x"], None, None, {"batch": 32}, None),
    "decode-5-gpus": (["decode"], ["a100", "h100", "h200", "b200", "mi300x"], None, None, {"batch": 16}, None),
    "default-2-gpus": (["decode", "prefill"], ["h100", "h200"], None, None, {}, None),
}

SHRINK = 0.5  # display pixels: boxes that only touch do not overlap


def _box(bbox) -> np.ndarray:
    return np.array([[bbox.x0, bbox.y0, bbox.x1, bbox.y1]])


def texts_of(fig) -> list[tuple[str, np.ndarray, object]]:
    """Every visible text of the figure as (name, its boxes in display space, the artist)."""
    renderer = fig.canvas.get_renderer()
    out = []
    if fig._suptitle is not None:
        out.append(("title", _box(fig._suptitle.get_window_extent(renderer)), fig._suptitle))
    for legend in fig.legends:
        out.append(("legend", _box(legend.get_window_extent(renderer)), legend))
    for k, ax in enumerate(fig.axes):
        for t in ax.texts:
            if t.get_visible() and t.get_text().strip():
                out.append((f"panel {k} {t.get_gid()} {t.get_text()!r}", text_boxes(t, renderer), t))
        for name, t in (("panel title", ax._left_title), ("x title", ax.xaxis.label), ("y title", ax.yaxis.label)):
            if t.get_text():
                out.append((f"panel {k} {name}", _box(t.get_window_extent(renderer)), t))
        frame = ax.get_window_extent(renderer)
        for axis, lo, hi, centre in ((ax.xaxis, frame.x0, frame.x1, lambda b: (b.x0 + b.x1) / 2),
                                     (ax.yaxis, frame.y0, frame.y1, lambda b: (b.y0 + b.y1) / 2)):
            for tick in axis.get_ticklabels():
                box = tick.get_window_extent(renderer)
                if tick.get_visible() and tick.get_text() and lo - 1 <= centre(box) <= hi + 1:  # drawn ones only
                    out.append((f"panel {k} tick {tick.get_text()}", _box(box), tick))
    return out


def markers_of(fig) -> list[tuple[str, np.ndarray]]:
    """Each marker as the square inscribed in its circle (a text may pass a round marker's corner)."""
    out = []
    for k, ax in enumerate(fig.axes):
        for c in ax.collections:
            gid = c.get_gid() or ""
            if not gid.startswith(("point ", "measured ")):
                continue
            xy = ax.transData.transform(c.get_offsets())
            sizes = np.resize(c.get_sizes(), len(xy))
            r = np.sqrt(sizes) / 2 * fig.dpi / 72 * 0.7  # radius in pixels, to the inscribed square
            out += [(f"panel {k} {gid}", np.array([x - ri, y - ri, x + ri, y + ri])) for (x, y), ri in zip(xy, r)]
        for line in ax.lines:
            if (line.get_gid() or "").startswith("ridge "):
                x, y = ax.transData.transform(line.get_xydata())[0]
                r = line.get_markersize() / 2 * fig.dpi / 72 * 0.7
                out.append((f"panel {k} {line.get_gid()}", np.array([x - r, y - r, x + r, y + r])))
    return out


def lines_of(fig) -> list[tuple[str, np.ndarray, object]]:
    """Roof lines and leader lines as polylines in display space, each with its owner (a leader's text)."""
    out = []
    for k, ax in enumerate(fig.axes):
        for line in ax.lines:
            if (line.get_gid() or "").startswith("roof "):
                out.append((f"panel {k} {line.get_gid()}", ax.transData.transform(line.get_xydata()), None))
        for t in ax.texts:
            patch = getattr(t, "arrow_patch", None)
            if patch is not None and t.get_visible():
                out.append((f"panel {k} leader of {t.get_text()!r}", patch.get_path().vertices, t))
    return out


def overlap(a: np.ndarray, b: np.ndarray) -> bool:
    a = a.reshape(-1, 4)
    b = b.reshape(-1, 4)
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return bool(((w > 2 * SHRINK) & (h > 2 * SHRINK)).any())


def crosses(poly: np.ndarray, boxes: np.ndarray) -> bool:
    """Whether the polyline passes through any of ``boxes`` (sampled every pixel, boxes shrunk by a pixel)."""
    pts = []
    for a, b in zip(poly[:-1], poly[1:]):
        n = max(2, int(np.hypot(*(b - a))))
        pts.append(a + np.linspace(0, 1, n)[:, None] * (b - a))
    p = np.vstack(pts)
    inner = boxes.reshape(-1, 4) + np.array([1, 1, -1, -1])
    inside = ((p[:, None, 0] > inner[None, :, 0]) & (p[:, None, 0] < inner[None, :, 2])
              & (p[:, None, 1] > inner[None, :, 1]) & (p[:, None, 1] < inner[None, :, 3]))
    return bool(inside.any())


def clashes(fig) -> list[str]:
    fig.canvas.draw()
    texts, markers, lines = texts_of(fig), markers_of(fig), lines_of(fig)
    found = [f"{a} over {b}" for i, (a, ba, _) in enumerate(texts) for b, bb, _ in texts[i + 1:] if overlap(ba, bb)]
    found += [f"{a} on {m}" for a, ba, _ in texts for m, bm in markers if overlap(ba, bm)]
    found += [f"{line} crosses {a}" for line, poly, owner in lines for a, ba, t in texts
              if t is not owner and crosses(poly, ba)]
    return found


@pytest.mark.parametrize("name", list(CHARTS))
def test_no_text_overlaps_a_text_a_marker_or_a_line(name):
    import matplotlib.pyplot as plt

    fig = draw(chart_of(CHARTS[name]))
    try:
        assert clashes(fig) == []
        renderer = fig.canvas.get_renderer()
        title = fig._suptitle.get_window_extent(renderer)
        for ax in fig.axes:
            assert ax._left_title.get_window_extent(renderer).y1 < title.y0 - 4  # a gap under the title
            ylabel = ax.yaxis.label
            assert ylabel.get_text() and ylabel.get_window_extent(renderer).x1 < ax.get_window_extent(renderer).x0
    finally:
        plt.close(fig)


def test_the_check_finds_a_clash():
    """The check is not vacuous: a text put on a marker, over a label and across a roof is found three ways."""
    import matplotlib.pyplot as plt

    chart = build_chart([resolve_workload("decode")], [load_gpu("h100")])
    fig = draw(chart)
    try:
        ax = fig.axes[0]
        label = next(t for t in ax.texts if t.get_gid() == "op-label")
        p = chart.panels[0].points[0]
        hbm = chart.panels[0].roofs[0]
        ax.text(p.intensity, p.flops, "on a marker", gid="probe")
        ax.annotate("over a label", label.xy, xytext=label.get_position(), textcoords=label.get_anncoords(),
                    ha=label.get_ha(), va=label.get_va(), fontsize=label.get_fontsize())
        x = (hbm.x_from * hbm.x_to) ** 0.5
        ax.text(x, hbm.at(x), "across the HBM roof", ha="center", va="center")
        found = clashes(fig)
        assert any("'on a marker' on" in c for c in found)
        assert any("'over a label'" in c and "over" in c for c in found)
        assert any("roof h100-sxm HBM crosses" in c and "across the HBM roof" in c for c in found)
    finally:
        plt.close(fig)


def test_a_tensor_parallel_chart_draws_the_interconnect_roof_clear_of_every_text():
    """--tp 4 (issue 13): the points are one GPU's ops, the NVLink roof (H100: 900 GB/s both ways, 450 a
    direction) is drawn below HBM's and labelled, the collectives (0 FLOPs) are named in the footnote, and the
    title says whose ops these are; one GPU's chart has no such roof."""
    import matplotlib.pyplot as plt

    from rooflinectl.engine.parallel import Layout

    w = resolve_workload("decode", model="llama-3-70b", batch=32)
    chart = build_chart([w], [load_gpu("h100")], layout=Layout(tp=4))
    panel = chart.panels[0]
    link = [r for r in panel.roofs if r.name == "interconnect"]
    assert [(r.value, r.slope) for r in link] == [(450e9, 1.0)]
    assert link[0].label == "NVLink 4 (18 links) 450 GB/s a direction"
    assert "TP 4, one GPU's ops" in chart.title
    assert any("attn_all_reduce" in f for f in panel.footnotes)
    assert any("interconnect roof is the collectives' bandwidth" in f for f in panel.footnotes)
    fig = draw(chart)
    try:
        assert clashes(fig) == []
    finally:
        plt.close(fig)
    single = build_chart([w], [load_gpu("h100")])
    assert not [r for r in single.panels[0].roofs if r.name == "interconnect"]
