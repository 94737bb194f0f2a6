"""Where each label goes on a drawn panel: greedy placement in display space, so that no two labels overlap and
none covers a marker, the legend or a roof line.

The drawing (``plot.draw``) blocks what cannot move (legend, markers, roof lines) and then asks for each label in
turn, most important first. matplotlib objects are typed loosely (``Any``): matplotlib ships partial stubs, and
the artists here are only created, measured and removed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .boxes import Rows, aligned_boxes, hits, nearest_relpos, slanted_boxes, text_boxes, within
from .chart import Roof

LABEL_FONT = 8.5
ROOF_FONT = 8


# Spots tried around a marker, nearest ring first: rings at these distances (points) beyond its radius, with a
# leader line from the second ring on; without leaders (the swept values, short) only two close rings.
LEADER_RINGS = (3, 16, 30, 46, 64, 84, 106, 130, 160, 195)  # the last two: room below a crowded roof
NEAR_RINGS = (2, 8)
# A label set right beside its marker (no leader) keeps this far (points) from every other marker.
NEIGHBOUR_PT = 7.0
# The directions (degrees) tried in each ring, in order: right of the marker first, or below it.
RIGHT_ANGLES = (0, -35, 35, -70, 70, 180, 145, -145, -90, 90, -20, 20, -55, 55, -110, 110, -125, 125, -160, 160)
BELOW_ANGLES = (-60, -30, -90, -120, 0, 180, 30, 150, 90, 120, 60)


@functools.cache
def _ring_spots(prefer: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The spots of one ring (cosine and sine of each direction, and the text's horizontal alignment there): text
    to the right of a spot on the right, and so on; straight above or below, centred, then starting or ending
    there (near the axes' side, centred text can't fit)."""
    spots: list[tuple[float, str]] = []
    for angle in BELOW_ANGLES if prefer == "below" else RIGHT_ANGLES:
        dx = math.cos(math.radians(angle))
        if abs(dx) > 0.05:
            spots.append((angle, "left" if dx > 0 else "right"))
        else:
            spots += [(angle, "center"), (angle, "left"), (angle, "right")]
    cos = np.array([math.cos(math.radians(a)) for a, _ in spots])
    sin = np.array([math.sin(math.radians(a)) for a, _ in spots])
    return cos, sin, [ha for _, ha in spots]




class Placer:
    """Greedy label placement in display space: try spots around the anchor, nearest first, and take the first
    that stays inside the axes and overlaps no label, marker, legend or roof line, and whose leader line (spots
    further out get one) crosses no label or marker. Rotated text and sloped lines are held as chains of small
    squares, not their (much larger) upright boxes.

    A label with no free spot is not drawn (``label`` returns False and the drawing names it in a footnote): no
    label is ever placed over another. Level text is measured once per label and its box at each spot computed
    (matplotlib puts an annotation's box at the anchor plus the offset, aligned by ha and va: exact, a test
    compares), and every spot is checked at once against only what lies within reach of the anchor: a label
    costs about the same on a chart of 300 measured points as on one of 10 (300 records took 89 s before).
    """

    def __init__(self, fig: Any, ax: Any) -> None:
        self.ax = ax
        self.renderer = fig.canvas.get_renderer()
        self.pt = fig.dpi / 72  # display pixels per point
        self._solid = Rows()  # labels, markers, legend: x0, y0, x1, y1 in display coordinates
        self._tags: list[frozenset[str]] = []  # per row of ``solid``: the ops of a marker (empty for the rest)
        self._lines = Rows()  # roof lines: text keeps off them, leader lines may cross them
        self._ridge_lines = Rows()  # the dotted lines under the ridges: only ridge labels keep off them
        self._marks = Rows()  # markers (points, ridges, measured): a label beside its own keeps its distance
        self._mark_tags: list[frozenset[str]] = []
        self.texts: list[Any] = []  # every label placed
        self._axes_box: np.ndarray | None = None
        self._sizes: dict[tuple[str, float, str], tuple[float, float]] = {}
        self._probe: Any = None

    @property
    def solid(self) -> np.ndarray:
        return self._solid.array

    @property
    def lines(self) -> np.ndarray:
        return self._lines.array

    @property
    def ridge_lines(self) -> np.ndarray:
        return self._ridge_lines.array

    def _add_solid(self, rows: Any, tag: frozenset[str] = frozenset()) -> None:
        rows = np.asarray(rows, dtype=float).reshape(-1, 4)
        self._solid.add(rows)
        self._tags += [tag] * len(rows)

    def block(self, bbox: Any) -> None:
        self._add_solid([bbox.x0, bbox.y0, bbox.x1, bbox.y1])

    def block_point(self, x: float, y: float, radius_pt: float, ops: Sequence[str] = ()) -> None:
        self.block_points([(x, y)], [radius_pt], ops)

    def block_points(self, xy: Sequence[tuple[float, float]], radii_pt: Sequence[float],
                     ops: Sequence[str] = ()) -> None:
        """Markers at ``xy`` (data coordinates) of radii ``radii_pt``, all of the ops ``ops``: one transform for
        a whole trajectory (one a point cost 0.6 s on a 64-value sweep of 6 GPUs)."""
        c = self.ax.transData.transform(np.asarray(xy, dtype=float).reshape(-1, 2))
        r = np.asarray(radii_pt, dtype=float)[:, None] * self.pt
        self._add_solid(np.hstack([c - r, c + r]), frozenset(ops))
        self._marks.add(np.hstack([c - r, c + r]))
        self._mark_tags += [frozenset(ops)] * len(c)

    def _segment(self, a: Any, b: Any, half: float) -> np.ndarray:
        """Squares of half-side ``half`` (display units) every ``half`` along the segment a-b."""
        a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        n = max(2, int(np.hypot(*(b - a)) / half))
        c = a + np.linspace(0, 1, n)[:, None] * (b - a)
        return np.hstack([c - half, c + half])

    def block_line(self, x0: float, y0: float, x1: float, y1: float, half_pt: float = 1.5,
                   ridge: bool = False) -> None:
        """A straight line in data space (log-log roofs are straight on screen too)."""
        a, b = self.ax.transData.transform((x0, y0)), self.ax.transData.transform((x1, y1))
        rows = self._segment(a, b, half_pt * self.pt)
        (self._ridge_lines if ridge else self._lines).add(rows)

    def _boxes(self, t: Any) -> np.ndarray:
        return text_boxes(t, self.renderer)

    def _axes(self) -> np.ndarray:
        if self._axes_box is None:
            box = self.ax.get_window_extent(self.renderer)
            self._axes_box = np.array([box.x0, box.y0, box.x1, box.y1])
        return self._axes_box

    def _inside_each(self, boxes: np.ndarray) -> np.ndarray:
        a = self._axes()
        inside: np.ndarray = ((boxes[:, 0] >= a[0]) & (boxes[:, 2] <= a[2])
                              & (boxes[:, 1] >= a[1]) & (boxes[:, 3] <= a[3]))
        return inside

    def _inside(self, boxes: np.ndarray) -> bool:
        return bool(self._inside_each(boxes).all())

    def _keep(self, t: Any, boxes: np.ndarray) -> None:
        self._add_solid(boxes)
        self.texts.append(t)

    def _text_size(self, text: str, fontsize: float, weight: str) -> tuple[float, float]:
        """Width and height in display units of ``text`` set level: measured once per text, font size and weight,
        by one text never drawn (a text made and removed for each cost 1.3 ms)."""
        key = (text, fontsize, weight)
        if key not in self._sizes:
            if self._probe is None:
                self._probe = self.ax.text(0, 0, "")
                self._probe.remove()  # measured, never drawn
                self._probe.set_figure(self.ax.figure)
            self._probe.set_text(text)
            self._probe.set_fontsize(fontsize)
            self._probe.set_fontweight(weight)
            box = self._probe.get_window_extent(self.renderer)
            self._sizes[key] = (box.width, box.height)
        return self._sizes[key]

    def label(self, text: str, x: float, y: float, radius_pt: float, color: str = "#222222",
              fontsize: float = LABEL_FONT, prefer: str = "right", leader: bool = True,
              weight: str = "normal", ops: Sequence[str] = (), gid: str = "op-label") -> bool:
        """Next to the marker at (x, y) of radius ``radius_pt``: the nearest free spot. False, and nothing drawn,
        when no spot is free: a label is never placed over another (the caller names it in a footnote)."""
        cos, sin, has = _ring_spots(prefer)
        rings = LEADER_RINGS if leader else NEAR_RINGS
        per_ring = len(has)
        style = dict(textcoords="offset points", fontsize=fontsize, color=color, zorder=7, fontweight=weight,
                     gid=gid)
        w, h = self._text_size(text, fontsize, weight)
        cx, cy = self.ax.transData.transform((x, y))
        dist = np.repeat([radius_pt + extra for extra in rings], per_ring)
        dx, dy = dist * np.tile(cos, len(rings)), dist * np.tile(sin, len(rings))
        ha = has * len(rings)
        va = np.where(dy > 2, "bottom", np.where(dy < -2, "top", "center")).tolist()
        offsets = np.stack([dx, dy], axis=1) * self.pt
        boxes = aligned_boxes(np.array([cx, cy]) + offsets, w, h, ha, va)
        pad = 1.5 * self.pt
        region = np.array([boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()])
        region += np.array([-pad, -pad, pad, pad])
        solid = self.solid
        near = ((solid[:, 2] >= region[0]) & (solid[:, 0] <= region[2]) & (solid[:, 3] >= region[1])
                & (solid[:, 1] <= region[3])) if solid.size else np.zeros(0, dtype=bool)
        near_rows = np.flatnonzero(near)
        near_solid, near_lines = solid[near_rows], within(self.lines, region)
        others: np.ndarray | None = None  # what a leader may not cross: all but this label's own markers
        for ring in range(len(rings)):  # nearest ring first: most labels are placed in the first or second
            b = boxes[ring * per_ring:(ring + 1) * per_ring]
            ring_region = np.array([b[:, 0].min() - pad, b[:, 1].min() - pad, b[:, 2].max() + pad,
                                    b[:, 3].max() + pad])
            free = (self._inside_each(b) & ~hits(b, within(near_solid, ring_region), pad)
                    & ~hits(b, within(near_lines, ring_region), pad))
            if ring == 0 and leader and free.any():
                # Right beside its marker, with no leader, a label must sit nearer its own marker than any other:
                # "attention 3%" under the ridge's diamond read as the ridge's label.
                free[free] = ~hits(b[free], self._other_marks(ops, ring_region), NEIGHBOUR_PT * self.pt)
            if ring > 0 and leader and free.any():
                if others is None:
                    own = frozenset(ops)
                    mine = np.array([bool(self._tags[k]) and self._tags[k] <= own for k in near_rows], dtype=bool)
                    others = solid[near_rows[~mine]] if near_rows.size else solid[:0]
                free[free] = ~self._leaders_cross((cx, cy), radius_pt, b[free], others)
            if free.any():
                i = ring * per_ring + int(np.flatnonzero(free)[0])
                annotation = self._annotate(text, x, y, float(dx[i]), float(dy[i]), ha[i], va[i], style,
                                            ring > 0 and leader, radius_pt, nearest_relpos((cx, cy), boxes[i]))
                self._keep(annotation, boxes[i:i + 1])
                if ring > 0 and leader:
                    self._block_leader((cx, cy), radius_pt, boxes[i])
                return True
        return False

    def _other_marks(self, ops: Sequence[str], region: np.ndarray) -> np.ndarray:
        """The markers near ``region`` that are not of ``ops`` (ridges and measured points have no ops)."""
        marks = self._marks.array
        if not marks.size:
            return marks
        own = frozenset(ops)
        keep = np.array([not (tag and tag <= own) for tag in self._mark_tags], dtype=bool)
        return within(marks[keep], region + np.array([-1, -1, 1, 1]) * NEIGHBOUR_PT * self.pt)

    def _block_leader(self, anchor: tuple[float, float], radius_pt: float, box: np.ndarray) -> None:
        """A leader drawn (from the marker's edge to the nearest point of its label's box) is a line that later
        text keeps off, as a roof is: no label is placed across another's leader."""
        a = np.asarray(anchor, dtype=float)
        target = np.clip(a, box[:2], box[2:])
        d = target - a
        length = float(np.hypot(*d))
        if length < (radius_pt + 4) * self.pt:
            return  # too short to draw (matplotlib shrinks it to nothing)
        start = a + d / length * radius_pt * self.pt
        self._lines.add(self._segment(start, target, 1.0 * self.pt))

    def _leaders_cross(self, anchor: tuple[float, float], radius_pt: float, boxes: np.ndarray,
                       others: np.ndarray) -> np.ndarray:
        """Per label box: whether its leader (from the marker's edge to the nearest point of the box) crosses any
        of ``others`` grown by a point (the leader's width and a margin), all at once by the slab test of a
        segment against boxes. A leader shorter than the marker's radius and 4 points is not drawn."""
        a = np.asarray(anchor, dtype=float)
        target = np.clip(a, boxes[:, :2], boxes[:, 2:])
        d = target - a
        length = np.hypot(d[:, 0], d[:, 1])
        drawn = length >= (radius_pt + 4) * self.pt
        out = np.zeros(len(boxes), dtype=bool)
        if not others.size or not drawn.any():
            return out
        d, target, length = d[drawn], target[drawn], length[drawn]
        start = a + d / length[:, None] * (radius_pt + 2) * self.pt
        seg = target - start  # segments start + t·seg, t in [0, 1]
        grown = others + np.array([-1, -1, 1, 1]) * self.pt
        t_lo = np.zeros((len(seg), len(grown)))
        t_hi = np.ones((len(seg), len(grown)))
        inside = np.ones((len(seg), len(grown)), dtype=bool)
        for axis in (0, 1):
            p, v = start[:, axis:axis + 1], seg[:, axis:axis + 1]
            lo, hi = grown[None, :, axis], grown[None, :, axis + 2]
            flat = np.abs(v) < 1e-12
            with np.errstate(divide="ignore", invalid="ignore"):
                t1, t2 = (lo - p) / v, (hi - p) / v
            t_lo = np.where(flat, t_lo, np.maximum(t_lo, np.minimum(t1, t2)))
            t_hi = np.where(flat, t_hi, np.minimum(t_hi, np.maximum(t1, t2)))
            inside &= ~flat | ((p > lo) & (p < hi))
        out[np.flatnonzero(drawn)] = (inside & (t_lo < t_hi)).any(axis=1)
        return out

    def _annotate(self, text: str, x: float, y: float, dx: float, dy: float, ha: str, va: str,
                  style: dict[str, Any], leader: bool, radius_pt: float,
                  relpos: tuple[float, float] = (0.5, 0.5)) -> Any:
        # The leader starts at the point of the text's box nearest the marker (relpos), the segment that
        # _leaders_cross checked and _block_leader keeps text off: from the box's centre it swept across a long
        # roof label's neighbours.
        arrow = dict(arrowstyle="-", color="#999999", lw=0.6, shrinkA=1, shrinkB=radius_pt,
                     relpos=relpos) if leader else None
        return self.ax.annotate(text, (x, y), xytext=(dx, dy), ha=ha, va=va, arrowprops=arrow, **style)

    def _place_first(self, candidates: Sequence[tuple[np.ndarray, Any]], make: Any, pad: float,
                     ridge: bool = False) -> bool:
        """Draw the text at the first of ``candidates`` (computed boxes, spot) that is free, and keep it. The
        boxes are computed, not measured (a text measured at every spot cost 1 ms a spot: 3 s for a chart's
        28 roof labels); the one drawn is measured, and kept only if free by its own boxes."""
        for boxes, spot in candidates:
            if not self._free_near(boxes, pad, ridge):
                continue
            t = make(spot)
            drawn = self._boxes(t)
            if self._free_near(drawn, pad, ridge):
                self._keep(t, drawn)
                return True
            t.remove()  # not where computed (never seen): try the next spot
        return False

    def _free_near(self, boxes: np.ndarray, pad: float, ridge: bool = False) -> bool:
        """Inside the axes, and clear (by ``pad`` points) of every label, marker and roof line (and of the ridge
        lines when ``ridge``): checked against only what lies near the boxes."""
        if not self._inside(boxes):
            return False
        p = pad * self.pt
        region = np.array([boxes[:, 0].min() - p, boxes[:, 1].min() - p, boxes[:, 2].max() + p,
                           boxes[:, 3].max() + p])
        taken = [self.solid, self.lines] + ([self.ridge_lines] if ridge else [])
        return not any(hits(boxes, within(rows, region), p).any() for rows in taken)

    def vertical_label(self, text: str, x: float, y: float, color: str) -> bool:
        """Along a vertical line from the bottom of the axes: right of it, else left, moving up if taken. False,
        and nothing drawn, when every spot is taken (the caller names it in a footnote)."""
        spots = [(dx, lift, ha) for lift in (4, 40, 80, 120, 160) for dx, ha in ((3, "left"), (-3, "right"))]

        def make(spot: tuple[float, float, str]) -> Any:
            dx, lift, ha = spot
            return self.ax.annotate(text, (x, y), xytext=(dx, lift), textcoords="offset points", rotation=90,
                                    fontsize=ROOF_FONT, color=color, ha=ha, va="bottom", zorder=6,
                                    gid="ridge-label")

        probe = make(spots[0])  # the turned text's size, measured once
        box = self._boxes(probe)[0]
        probe.remove()
        anchors = self.ax.transData.transform((x, y)) + np.array([(dx, lift) for dx, lift, _ in spots]) * self.pt
        boxes = aligned_boxes(anchors, box[2] - box[0], box[3] - box[1], [ha for *_, ha in spots],
                              ["bottom"] * len(spots))
        return self._place_first([(boxes[k:k + 1], spot) for k, spot in enumerate(spots)], make, 0.5, ridge=True)

    def roof_spots(self, text: str, roof: Roof, main: bool) -> list[tuple[np.ndarray, tuple[Any, ...]]]:
        """Where ``roof_label`` tries ``text``, in order: (its boxes there, computed from the text's level size
        measured once; the spot: x, offset in points, ha, va, rotation). Along the roof, just above it or just
        below: from the left for memory roofs, at a slant; from the ends inwards for compute roofs."""
        lx0, lx1 = math.log10(roof.x_from), math.log10(roof.x_to)
        spots: list[tuple[float, tuple[float, float], str, str, float]] = []  # x, offset (points), ha, va, rotation
        if roof.kind == "compute":
            for frac, dx, ha in ((1.0, -4, "right"), (0.0, 8, "left"), (0.75, 0, "center"), (0.5, 0, "center"),
                                 (0.25, 0, "center")):
                for dy, va in ((3, "bottom"), (-3, "top"), (13, "bottom"), (-13, "top")):
                    spots.append((10 ** (lx0 + frac * (lx1 - lx0)), (dx, dy), ha, va, 0.0))
        else:
            p0 = self.ax.transData.transform((roof.x_from, roof.at(roof.x_from)))
            p1 = self.ax.transData.transform((roof.x_to, roof.at(roof.x_to)))
            angle = math.degrees(math.atan2(p1[1] - p0[1], p1[0] - p0[0]))
            normal = (-math.sin(math.radians(angle)), math.cos(math.radians(angle)))
            for va, side in (("bottom", 3), ("top", -3)):  # above the line, then below it
                for frac in np.arange(0.02, 0.8, 0.04):
                    spots.append((10 ** (lx0 + frac * (lx1 - lx0)), (normal[0] * side, normal[1] * side), "left",
                                  va, angle))
        fontsize, weight = ROOF_FONT + (0.5 if main else 0), "bold" if main else "normal"
        w, h = self._text_size(text, fontsize, weight)
        anchors = self.ax.transData.transform([(x, roof.at(x)) for x, *_ in spots])
        anchors += np.array([offset for _, offset, *_ in spots]) * self.pt
        level = aligned_boxes(anchors, w, h, [ha for _, _, ha, _, _ in spots], [va for *_, va, _ in spots])
        out = []
        for k, spot in enumerate(spots):
            rotation = spot[4]
            boxes = level[k:k + 1] if rotation == 0 else slanted_boxes(level[k], anchors[k], rotation)
            out.append((boxes, spot))
        return out

    def roof_label(self, texts: Sequence[str], roof: Roof, color: str, main: bool) -> bool:
        """Along the roof at the first free spot (``roof_spots``), each of ``texts`` in turn (a long form, then a
        short one). False when no spot is free (the caller says so in a footnote)."""
        fontsize, weight = ROOF_FONT + (0.5 if main else 0), "bold" if main else "normal"
        style = dict(fontsize=fontsize, color=color, fontweight=weight, zorder=6, textcoords="offset points",
                     gid="roof-label")
        lx0, lx1 = math.log10(roof.x_from), math.log10(roof.x_to)
        for text in texts:
            def make(spot: tuple[Any, ...], text: str = text) -> Any:
                x, offset, ha, va, rotation = spot
                return self.ax.annotate(text, (x, roof.at(x)), xytext=offset, ha=ha, va=va, rotation=rotation,
                                        rotation_mode="anchor", **style)

            if self._place_first(self.roof_spots(text, roof, main), make, 0.5):
                return True
        # No room along the line (parallel roofs of several GPUs lie close): level text nearby, with a leader.
        for frac in (0.55, 0.75, 0.35, 0.9, 0.15):
            x = 10 ** (lx0 + frac * (lx1 - lx0))
            if self.label(texts[0], x, roof.at(x), 1.5, color=color, fontsize=fontsize, weight=weight,
                          gid="roof-label"):
                return True
        return False
