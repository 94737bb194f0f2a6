"""THE rich console that rooflinectl prints through: markup and highlighting off.

rooflinectl writes no rich markup of its own (its styles are set on ``Text`` objects and table columns), so nothing
it prints is read as markup: a GPU, model or workload name from a user's file, an exception's text, a device name
prints exactly as written. With markup on, a name "[/]" raised rich's MarkupError (a traceback) and
"[link=http://x]y[/link]" put a terminal hyperlink in the output. Highlighting is off so that rich does
not recolour numbers and paths by its guesses.
"""

from __future__ import annotations

from rich.console import Console


def console(stderr: bool = False) -> Console:
    """A console on stdout (stderr with ``stderr``) that prints every string literally."""
    return Console(highlight=False, markup=False, stderr=stderr)
