"""Boxes in display space, the geometry the label placer (``plot.place``) works with: the boxes a text covers
(level, or a chain of squares along slanted text), the boxes of text aligned at anchors, a growing set of boxes,
and the overlap tests. Rows of x0, y0, x1, y1; numpy only, and matplotlib imported inside the one function that
measures a drawn text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def text_boxes(t: Any, renderer: Any) -> np.ndarray:
    """The display-space boxes (rows of x0, y0, x1, y1) a text covers: its box, or for text at a slant a chain
    of squares along its middle (its upright box would cover a whole triangle around it). Leader lines of
    annotations are left out. Slanted text must use rotation_mode 'anchor' (it turns about its alignment point)."""
    from matplotlib.text import Text

    angle = t.get_rotation()
    if hasattr(t, "update_positions"):
        t.update_positions(renderer)
    box = Text.get_window_extent(t, renderer)
    if angle in (0, 90):
        return np.array([[box.x0, box.y0, box.x1, box.y1]])
    t.set_rotation(0)
    up = Text.get_window_extent(t, renderer)
    t.set_rotation(angle)
    pivot = np.array([
        {"left": up.x0, "center": (up.x0 + up.x1) / 2, "right": up.x1}[t.get_horizontalalignment()],
        {"bottom": up.y0, "baseline": up.y0, "center": (up.y0 + up.y1) / 2, "center_baseline": (up.y0 + up.y1) / 2,
         "top": up.y1}[t.get_verticalalignment()],
    ])
    return slanted_boxes(np.array([up.x0, up.y0, up.x1, up.y1]), pivot, angle)


def slanted_boxes(up: np.ndarray, pivot: np.ndarray, angle: float) -> np.ndarray:
    """The chain of squares ``text_boxes`` gives for text whose level box is ``up`` (x0, y0, x1, y1) turned by
    ``angle`` degrees about ``pivot``: from a box computed instead of measured, the same rows."""
    width, height = up[2] - up[0], up[3] - up[1]
    rad = math.radians(angle)
    rot = np.array([[math.cos(rad), -math.sin(rad)], [math.sin(rad), math.cos(rad)]])
    # Squares a little smaller than the line height: turned with the text, a full-height square's corners would
    # reach past the text's edge and onto the roof line it sits beside.
    side = 0.75 * height
    n = max(1, math.ceil(width / side))
    xs = up[0] + (np.arange(n) + 0.5) * width / n
    middle = np.stack([xs, np.full(n, (up[1] + up[3]) / 2)], axis=1)
    c = pivot + (middle - pivot) @ rot.T
    return np.hstack([c - side / 2, c + side / 2])


def aligned_boxes(anchors: np.ndarray, width: float, height: float, ha: Sequence[str],
                  va: Sequence[str]) -> np.ndarray:
    """The boxes (rows of x0, y0, x1, y1) of level text ``width`` × ``height`` aligned by ``ha`` and ``va`` at
    each of ``anchors`` (display coordinates): where matplotlib draws it (exact: a test compares)."""
    shift_x = np.array([{"left": 0.0, "center": 0.5, "right": 1.0}[h] for h in ha]) * width
    shift_y = np.array([{"bottom": 0.0, "center": 0.5, "top": 1.0}[v] for v in va]) * height
    x0, y0 = anchors[:, 0] - shift_x, anchors[:, 1] - shift_y
    return np.stack([x0, y0, x0 + width, y0 + height], axis=1)


class Rows:
    """Boxes (rows of x0, y0, x1, y1 in display space) added a few at a time and read as one array: stacking onto
    an array at every marker copied it each time, quadratic in the markers of a long sweep."""

    def __init__(self) -> None:
        self._array = np.empty((0, 4))
        self._pending: list[np.ndarray] = []

    def add(self, rows: Any) -> None:
        self._pending.append(np.asarray(rows, dtype=float).reshape(-1, 4))

    @property
    def array(self) -> np.ndarray:
        if self._pending:
            self._array = np.vstack([self._array, *self._pending])
            self._pending = []
        return self._array


def hits(boxes: np.ndarray, taken: np.ndarray, pad: float) -> np.ndarray:
    """Per row of ``boxes`` (padded by ``pad`` display units): whether it overlaps any row of ``taken`` (an
    overlap of positive area; touching edges is no overlap). Compared edge to edge (min(x1, x1') > max(x0, x0')
    holds when x1 > x0', x1' > x0 and both boxes have width): boolean work only, a third of the time of
    computing the overlap's width and height, and the same answer."""
    if not taken.size or not boxes.size:
        return np.zeros(len(boxes), dtype=bool)
    b = boxes + np.array([-pad, -pad, pad, pad])
    t = taken[(taken[:, 2] > taken[:, 0]) & (taken[:, 3] > taken[:, 1])]
    out = (b[:, 2] > b[:, 0]) & (b[:, 3] > b[:, 1])
    hit = b[:, None, 2] > t[None, :, 0]
    hit &= t[None, :, 2] > b[:, None, 0]
    hit &= b[:, None, 3] > t[None, :, 1]
    hit &= t[None, :, 3] > b[:, None, 1]
    overlaps: np.ndarray = out & hit.any(axis=1)  # numpy types a mask's operators as Any
    return overlaps


def within(taken: np.ndarray, region: np.ndarray) -> np.ndarray:
    """The rows of ``taken`` that reach into ``region`` (x0, y0, x1, y1): what a label around one point can
    meet. Checking spots against only these keeps each label's cost flat as the chart fills up."""
    if not taken.size:
        return taken
    keep = ((taken[:, 2] >= region[0]) & (taken[:, 0] <= region[2])
            & (taken[:, 3] >= region[1]) & (taken[:, 1] <= region[3]))
    near: np.ndarray = taken[keep]
    return near


def nearest_relpos(anchor: tuple[float, float], box: np.ndarray) -> tuple[float, float]:
    """The point of ``box`` nearest ``anchor``, as a fraction of the box (matplotlib's arrow ``relpos``)."""
    a = np.asarray(anchor, dtype=float)
    nearest = np.clip(a, box[:2], box[2:])
    size = np.maximum(box[2:] - box[:2], 1e-9)
    rx, ry = (nearest - box[:2]) / size
    return float(rx), float(ry)
