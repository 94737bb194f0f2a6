"""THE rich console that rooflinectl prints through: markup and highlighting off.

rooflinectl writes no rich markup of its own (its styles are set on ``Text`` objects and table columns), so nothing
it prints is read as markup: a GPU, model or workload name from a user's file, an exception's text, a device name
prints exactly as written. With markup on, a name "[/]" raised rich's MarkupError (a traceback) and
"[link=http://x]y[/link]" put a terminal hyperlink in the output. Highlighting is off so that rich does
not recolour numbers and paths by its guesses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, cast

from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text


class _NoTrailingBlanks:
    """A text stream that passes each whole line on without its trailing blanks. rich pads a table's rows and the
    blank lines between parts to the console's width and ends a wrapped line with the blank it broke at: in a
    pipe, a file or a diff those are noise (a line of 80 blanks between two paragraphs). A part line is held
    until its end comes or the stream is flushed."""

    def __init__(self, target: IO[str]) -> None:
        self._target = target
        self._pending = ""

    def write(self, text: str) -> int:
        *lines, self._pending = (self._pending + text).split("\n")
        if lines:
            self._target.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._target.write(self._pending)
            self._pending = ""
        self._target.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        """The target's: rich draws its boxes in ASCII where the stream cannot hold the line characters."""
        return getattr(self._target, "encoding", None) or "utf-8"

    def fileno(self) -> int:
        return self._target.fileno()


def console(stderr: bool = False) -> Console:
    """A console on stdout (stderr with ``stderr``) that prints every string literally. Where stdout is not a
    terminal, lines leave it without trailing blanks (``_NoTrailingBlanks``); a terminal and stderr (where a
    progress bar redraws its line) get rich's own output."""
    import sys

    if stderr or sys.stdout.isatty():
        return Console(highlight=False, markup=False, stderr=stderr)
    return Console(file=cast(IO[str], _NoTrailingBlanks(sys.stdout)), highlight=False, markup=False)


def say(text: str) -> None:
    """Print ``text`` on stdout wrapped at the console's width, at blanks only: a path or a name longer than the
    width stays whole on its line (rich's wrap would fold it)."""
    import textwrap

    width = console().width
    print(textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False) if len(text) > width else text)


def _drawn(renderable: RenderableType, width: int, strip: bool = True) -> list[str]:
    """``renderable`` drawn at ``width`` columns, each line's trailing blanks dropped (kept: ``strip`` False)."""
    import io

    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, markup=False).print(renderable)
    return [line.rstrip() if strip else line for line in out.getvalue().splitlines()]


def fits(renderable: RenderableType, width: int, whole: list[str] | None = None) -> bool:
    """Whether ``renderable`` drawn at ``width`` columns is drawn as it is whole (``whole``: its lines so drawn,
    stripped, where the caller has them): no cell cut or wrapped. (Its widest line is no test: a table's blank
    right edge may or may not be a column rich can give up, so a table whose lines were 80 wide was cut to "%ro…"
    at 80.)"""
    return _drawn(renderable, width) == (_drawn(renderable, 100_000) if whole is None else whole)


def fit_table(table: Table, width: int, optional: Sequence[str]) -> tuple[Table, tuple[str, ...]]:
    """``table`` with no cell wrapped or cut at ``width`` columns: the ``optional`` columns (by header) dropped
    in order until every cell fits whole; (the table, the columns left out). One that fits no narrower keeps its
    natural width (:func:`print_table` prints it so): a name or a number is never cut to fit a terminal."""
    left_out: tuple[str, ...] = ()
    for drop in ("", *optional):
        if drop:
            left_out = (*left_out, drop)
            table.columns = [c for c in table.columns if str(c.header) != drop]
            for index, column in enumerate(table.columns):
                column._index = index  # rich pads the first and last columns by this index
        for column in table.columns:
            column.no_wrap = True
        title, table.title = table.title, None  # a title wraps at any width
        whole = fits(table, width)
        table.title = title
        if whole:
            break
    return table, left_out


def left_out_line(width: int, left_out: Sequence[str]) -> str:
    """The one line that says which columns a table left out at ``width`` columns (within ``width``)."""
    line = f"(left out at {width} columns: {', '.join(left_out)}; --json has all)"
    return line if len(line) <= width else f"(left out: {', '.join(left_out)})"


def print_table(console: Console, table: Table, optional: Sequence[str] = ()) -> None:
    """Print ``table`` whole at the console's width (:func:`fit_table`), then the line saying what it left out.
    A table wider than the console even so prints at its natural width: a terminal wraps its lines, but a pipe
    and grep get every row on one line, whole."""
    table, left_out = fit_table(table, console.width, optional)
    title, table.title = table.title, None
    whole = _drawn(table, 100_000, strip=False)  # drawn once, whole: rich's width, blank edges included
    stripped = [line.rstrip() for line in whole]
    # The title on its own lines, wrapped at the table's width or the console's where that is less: rich wraps
    # it at the table's, blank edges included, which may pass the console's (81 at 80 columns, where "H100
    # SXM5" printed "H100 SXM").
    if title is not None:
        text = Text(title, style="table.title") if isinstance(title, str) else title
        console.print(text, width=min(console.width, max(map(len, whole), default=0)))
    if fits(table, console.width, stripped):
        console.print(table, width=console.width)
    else:
        console.print(table, width=max(console.width, max(map(len, stripped), default=0) + 1))  # + its blank edge
    if left_out:
        console.print(left_out_line(console.width, left_out), highlight=False)
