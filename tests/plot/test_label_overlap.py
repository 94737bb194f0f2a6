"""docs/plot.md's promise, checked on the charts the README and docs/ draw and on the crowded ones issue 18 found
(8 of 36 had overlapping labels, such as "batch 1" under the bf16 roof's label in `plot prefill --gpu h100 --batch
1,4,16,64`): no label overlaps another (op, measured, value, roof and ridge labels alike), and a label that found
no free spot is named in the footnote instead of drawn over another."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rooflinectl.plot.boxes import text_boxes
from rooflinectl.plot.build import build_chart, draw
from rooflinectl.plot.measured import load_measured
from rooflinectl.specs.hardware import load_gpu
from rooflinectl.specs.scenario import resolve_workload

RESULTS = Path(__file__).parents[2] / "docs" / "results"
LABELS = ("op-label", "measured-label", "value-label", "roof-label", "ridge-label")

CHARTS = {
    # README and docs/plot.md
    "decode-batching": (["decode"], ["h100"], "batch", [1, 8, 64, 256], {}, None),
    "default": (["decode", "prefill"], ["h100"], None, None, {}, None),
    "prefill-3-gpus": (["prefill"], ["a100", "h100", "h200"], None, None, {"attention": "naive"}, None),
    "decode-measured-h200": (["decode"], ["h200"], "batch", [1, 8, 64, 256], {},
                             RESULTS / "h200-2026-12-03" / "decode-matmul.json"),
    "rmsnorm-measured-h200": (["decode"], ["h200"], "batch", [1, 8, 32], {},
                              RESULTS / "h200-2026-12-02" / "rmsnorm-decode-inloop.json"),
    # crowded ones from issue 18
    "prefill-batch-sweep": (["prefill"], ["h100"], "batch", [1, 4, 16, 64], {}, None),
    "attention-naive-seq-sweep": (["attention"], ["h100"], "seq_len", [512, 2048, 8192], {"attention": "naive"},
                                  None),
    "decode-context-2-gpus": (["decode"], ["a100", "h100"], "context", [1024, 4096, 8192], {}, None),
    "softmax-measured": (["attention"], ["h200"], None, None, {"attention": "naive"},
                         RESULTS / "h200-2026-12-02-softmax" / "softmax-bf16.json"),
}


def chart_of(spec: tuple):
    """A CHARTS entry (phases, GPUs, swept field, values, workload overrides, measured record) as its chart."""
    phases, gpus, field, values, overrides, measured = spec
    return build_chart([resolve_workload(p, **overrides) for p in phases], [load_gpu(g) for g in gpus], field,
                       values, load_measured(measured) if measured else None)


def drawn_label_boxes(fig) -> list[tuple[str, np.ndarray]]:
    renderer = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_gid() in LABELS:
                out.append((f"{t.get_gid()} {t.get_text()!r}", text_boxes(t, renderer)))
    return out


def overlapping(a: np.ndarray, b: np.ndarray) -> bool:
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    return bool(((w > 0) & (h > 0)).any())


@pytest.mark.parametrize("name", list(CHARTS))
def test_no_label_overlaps_another(name):
    import matplotlib.pyplot as plt

    chart = chart_of(CHARTS[name])
    fig = draw(chart)
    try:
        boxes = drawn_label_boxes(fig)
        assert len(boxes) >= 5
        clashes = [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if overlapping(ba, bb)]
        assert clashes == []
        # What is not drawn is said: every op label is on the chart or in its panel's footnote.
        for panel, ax in zip(chart.panels, fig.axes):
            texts = {t.get_text() for t in ax.texts}
            footnote = "\n".join(t.get_text() for t in ax.texts if t.get_gid() == "footnote")
            for lab in panel.labels:
                assert lab.text in texts or lab.text.replace("\n", ", ") in footnote
    finally:
        plt.close(fig)


def test_the_computed_box_of_a_label_is_the_box_matplotlib_draws():
    """place.Placer.label computes each spot's box from the text's size (measured once) instead of drawing the
    text at every spot: the box of the text it keeps is the box matplotlib renders."""
    import matplotlib.pyplot as plt

    chart = build_chart([resolve_workload("decode")], [load_gpu("h100")], "batch", [1, 8, 64, 256])
    fig = draw(chart)
    try:
        from rooflinectl.plot.place import Placer

        ax = fig.axes[0]
        placer = Placer(fig, ax)
        for text, prefer in (("q/k/v_proj 12%", "right"), ("two\nlines", "below"), ("batch 1", "below")):
            assert placer.label(text, 3.0, 1e12, 4, prefer=prefer)
            t = placer.texts[-1]
            assert np.allclose(text_boxes(t, placer.renderer), placer.solid[-1:], atol=1e-6)
    finally:
        plt.close(fig)


def test_the_computed_boxes_of_a_roof_label_are_the_boxes_matplotlib_draws():
    """place.Placer.roof_spots computes the boxes of a roof label at every spot (level on a compute roof, a chain
    of squares at a slant along a memory roof) from the text's level size, measured once: they are the boxes of
    the text drawn there (what text_boxes measures)."""
    import matplotlib.pyplot as plt

    from rooflinectl.plot.place import ROOF_FONT, Placer

    chart = build_chart([resolve_workload("decode")], [load_gpu("h100")], "batch", [1, 8, 64, 256])
    fig = draw(chart)
    try:
        ax = fig.axes[0]
        placer = Placer(fig, ax)
        roofs = {r.kind: r for r in chart.panels[0].roofs}
        for roof in roofs.values():
            for main in (True, False):
                spots = placer.roof_spots(roof.label, roof, main)
                assert len(spots) >= 20
                for boxes, (x, offset, ha, va, rotation) in spots[::3]:
                    t = ax.annotate(roof.label, (x, roof.at(x)), xytext=offset, textcoords="offset points", ha=ha,
                                    va=va, rotation=rotation, rotation_mode="anchor",
                                    fontsize=ROOF_FONT + (0.5 if main else 0), fontweight="bold" if main else "normal")
                    assert np.allclose(text_boxes(t, placer.renderer), boxes, atol=1e-6)
                    t.remove()
    finally:
        plt.close(fig)


def test_the_edge_test_of_hits_is_the_overlap_of_positive_area():
    """boxes.hits compares edges instead of computing each overlap's width and height: the same answer, on
    boxes that touch, nest, coincide, or have no width."""
    from rooflinectl.plot.boxes import hits

    rng = np.random.default_rng(18)
    corners = rng.integers(0, 12, size=(400, 2, 2)).astype(float)  # small integers: many shared edges
    rows = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
    boxes, taken = rows[:60], rows[60:]
    for pad in (0.0, 0.5, 1.0):
        b = boxes[:, None, :] + np.array([-pad, -pad, pad, pad])
        w = np.minimum(b[..., 2], taken[None, :, 2]) - np.maximum(b[..., 0], taken[None, :, 0])
        h = np.minimum(b[..., 3], taken[None, :, 3]) - np.maximum(b[..., 1], taken[None, :, 1])
        assert (hits(boxes, taken, pad) == ((w > 0) & (h > 0)).any(axis=1)).all()
