"""A small log-log character canvas: lines drawn in braille dots, text and markers on top. Pure: no terminal.

Each character cell holds a 2×4 grid of braille dots, so a line is drawn at twice the horizontal and four times
the vertical resolution of the cells; text written into a cell replaces its dots. Rows count from the top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

# Braille dot bits (Unicode U+2800 block) by (sub-column, sub-row) inside one cell.
_BRAILLE_BASE = 0x2800
_DOT_BITS = {
    (0, 0): 0x01, (0, 1): 0x02, (0, 2): 0x04, (0, 3): 0x40,
    (1, 0): 0x08, (1, 1): 0x10, (1, 2): 0x20, (1, 3): 0x80,
}


@dataclass(frozen=True)
class LogAxis:
    """Maps a positive value on [lo, hi] (log scale) to a position on [0, cells]."""

    lo: float
    hi: float
    cells: int

    def __post_init__(self) -> None:
        if not (0 < self.lo < self.hi) or self.cells < 1:
            raise ValueError(f"log axis needs 0 < lo < hi and cells >= 1, got {self.lo}, {self.hi}, {self.cells}")

    def position(self, value: float) -> float:
        """Fractional cell position of ``value`` (0 at lo, ``cells`` at hi); outside values fall outside."""
        return (math.log10(value) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo)) * self.cells

    def cell(self, value: float) -> int:
        """The cell that holds ``value``, clamped to the axis."""
        return min(self.cells - 1, max(0, int(self.position(value))))

    def value(self, position: float) -> float:
        """The inverse of :meth:`position`."""
        span = math.log10(self.hi) - math.log10(self.lo)
        return 10 ** (math.log10(self.lo) + position / self.cells * span)

    def decades(self) -> list[float]:
        """The powers of ten on the axis, lo to hi."""
        first, last = math.ceil(math.log10(self.lo) - 1e-9), math.floor(math.log10(self.hi) + 1e-9)
        return [10.0**k for k in range(first, last + 1)]


def decade_floor(x: float) -> float:
    return 10.0 ** math.floor(math.log10(x))


def decade_ceil(x: float) -> float:
    return 10.0 ** math.ceil(math.log10(x))


class Canvas:
    """A width×height grid of cells: braille dots for lines, characters for text."""

    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self._dots = [[0] * width for _ in range(height)]
        self._dot_style: list[list[Style | None]] = [[None] * width for _ in range(height)]
        self._chars: list[list[str | None]] = [[None] * width for _ in range(height)]
        self._char_style: list[list[Style | None]] = [[None] * width for _ in range(height)]

    def inside(self, col: int, row: int) -> bool:
        return 0 <= col < self.width and 0 <= row < self.height

    def dot(self, x: int, y: int, style: Style | None = None) -> None:
        """Set the braille dot at sub-cell coordinates (x in 0..2·width, y in 0..4·height, y down)."""
        col, row = x // 2, y // 4
        if self.inside(col, row) and x >= 0 and y >= 0:
            self._dots[row][col] |= _DOT_BITS[(x % 2, y % 4)]
            self._dot_style[row][col] = style

    def polyline(self, points: list[tuple[float, float]], style: Style | None = None) -> None:
        """Join points given in fractional cell coordinates (col, row) with dots, filling vertical gaps."""
        subs = [(x * 2, y * 4) for x, y in points]
        for (x0, y0), (x1, y1) in zip(subs, subs[1:]):
            steps = max(1, int(max(abs(x1 - x0), abs(y1 - y0))))
            for i in range(steps + 1):
                t = i / steps
                self.dot(int(x0 + (x1 - x0) * t), int(y0 + (y1 - y0) * t), style)

    def put(self, col: int, row: int, text: str, style: Style | None = None) -> None:
        """Write ``text`` from (col, row) rightwards; what falls outside the canvas is cut off."""
        for i, ch in enumerate(text):
            if self.inside(col + i, row):
                self._chars[row][col + i] = ch
                self._char_style[row][col + i] = style

    def free(self, col: int, row: int, length: int) -> bool:
        """True when ``length`` cells from (col, row) hold no text and lie inside the canvas."""
        return all(self.inside(col + i, row) and self._chars[row][col + i] is None for i in range(length))

    def char(self, col: int, row: int) -> str:
        ch = self._chars[row][col]
        if ch is not None:
            return ch
        dots = self._dots[row][col]
        return chr(_BRAILLE_BASE + dots) if dots else " "

    def lines(self) -> list[str]:
        """The canvas as plain text, one string per row."""
        return ["".join(self.char(c, r) for c in range(self.width)) for r in range(self.height)]

    def rows(self) -> list[list[tuple[str, Style | None]]]:
        """Each row as runs of (text, style): one run per change of style."""
        out = []
        for r in range(self.height):
            runs: list[tuple[str, Style | None]] = []
            chars: list[str] = []
            run_style: Style | None = None
            for c in range(self.width):
                style = self._char_style[r][c] if self._chars[r][c] is not None else self._dot_style[r][c]
                if style != run_style and chars:
                    runs.append(("".join(chars), run_style))
                    chars = []
                run_style = style
                chars.append(self.char(c, r))
            runs.append(("".join(chars), run_style))
            out.append(runs)
        return out

    def text(self) -> Text:
        """The canvas as styled rich Text, rows joined by newlines."""
        out = Text(no_wrap=True, overflow="crop")
        for r, runs in enumerate(self.rows()):
            if r:
                out.append("\n")
            for chunk, style in runs:
                out.append(chunk, style)
        return out
