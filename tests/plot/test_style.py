"""Issue 19: SVG keeps its text as text, PNG at a slide's resolution, a light and a dark style."""

from __future__ import annotations

import struct

from plot_helpers import assert_one_line_error

from helpers import cli
from rooflinectl.plot.draw import DARK_BACKGROUND, DPI


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # IHDR: width, height


def test_svg_keeps_text_as_text(tmp_path):
    out = tmp_path / "d.svg"
    assert cli("plot", "decode", "--gpu", "h100", "-o", str(out)).exit_code == 0
    svg = out.read_text()
    assert "<text" in svg and "HBM 3.35 TB/s" in svg and "bf16 tensor 989 TFLOP/s" in svg  # searchable, editable


def test_png_is_drawn_at_a_slides_resolution(tmp_path):
    """200 dpi: one panel of 10 × 6.6 in and the legend beside it, cropped to what is drawn (no empty band under
    the footnotes), is over 2,660 px wide (a 13.3 in slide) and 1,200 to 1,320 px high."""
    out = tmp_path / "d.png"
    assert cli("plot", "decode", "--gpu", "h100", "-o", str(out)).exit_code == 0
    width, height = png_size(out)
    assert DPI == 200 and 1200 <= height <= round(6.6 * DPI) and width >= 2660


def test_dark_style_paints_a_dark_slide(tmp_path):
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from rooflinectl.plot.build import build_chart, draw
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    chart = build_chart([resolve_workload("decode")], [load_gpu("h100")])
    fig = draw(chart, tmp_path / "d.png", style="dark")
    try:
        assert to_hex(fig.get_facecolor()) == DARK_BACKGROUND == to_hex(fig.axes[0].get_facecolor())
        inks = {to_hex(t.get_color()) for t in fig.axes[0].texts if t.get_gid() == "op-label"}
        assert inks == {"#e8e8e8"}  # light text on the dark paper, where the light style has #222222
    finally:
        plt.close(fig)
    out = tmp_path / "cli.png"
    assert cli("plot", "decode", "--style", "dark", "-o", str(out)).exit_code == 0 and png_size(out)[0] > 0


def test_an_unknown_style_is_one_line():
    assert_one_line_error(cli("plot", "--style", "blue", "-o", "x.png"), "--style", "light or dark")
