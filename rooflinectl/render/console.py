"""THE rich console that rooflinectl prints through: markup and highlighting off.

rooflinectl writes no rich markup of its own (its styles are set on ``Text`` objects and table columns), so nothing
it prints is read as markup: a GPU, model or workload name from a user's file, an exception's text, a device name
prints exactly as written. With markup on, a name "[/]" raised rich's MarkupError (a traceback) and
"[link=http://x]y[/link]" put a terminal hyperlink in the output. Highlighting is off so that rich does
not recolour numbers and paths by its guesses.
"""

from __future__ import annotations

from rich.console import Console, RenderableType


def console(stderr: bool = False) -> Console:
    """A console on stdout (stderr with ``stderr``) that prints every string literally."""
    return Console(highlight=False, markup=False, stderr=stderr)


def natural_width(renderable: RenderableType) -> int:
    """The widest line of ``renderable`` drawn whole, on a console without an edge."""
    import io

    drawn = io.StringIO()
    Console(file=drawn, width=100_000, color_system=None, highlight=False, markup=False).print(renderable)
    return max((len(line.rstrip()) for line in drawn.getvalue().splitlines()), default=0)
