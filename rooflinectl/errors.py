"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is imported only for the type: errors.py stays the lowest, lightest layer
    from pydantic import ValidationError


def one_line(text: str) -> str:
    """``text`` as one line of plain characters: a line break, an escape sequence or any other character that is
    not printable (a name given as ``'h100\\n'``, a path holding ``\\x1b[31m``) is shown escaped, as ``repr``
    shows it, so that a message naming it stays one line and cannot drive the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class UserError(Exception):
    """Bad input from the user: an unknown name, a malformed file, an impossible size.

    The CLI prints ``str(err)`` on one line and exits with code 2, never a traceback: ``str`` is the message
    with whatever the user gave that is not a printable character escaped (:func:`one_line`).
    """

    def __str__(self) -> str:
        return one_line(super().__str__())


def closest(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """A ' (did you mean: a, b?)' hint naming the closest candidates, or '' when none is close."""
    matches = difflib.get_close_matches(name.lower(), sorted(set(candidates)), n=n, cutoff=0.5)
    return f" (did you mean: {', '.join(matches)}?)" if matches else ""


def format_validation_error(source: str, err: ValidationError) -> str:
    """One line from a pydantic ValidationError: file, field path and reason of the first error."""
    # An unknown key is usually the cause of a 'missing' one (a typo such as 'bandwith'): name it first. One lean
    # pass over the errors (no inputs, URLs or contexts copied): a file of 200,000 unknown keys took 3 s here.
    errors = err.errors(include_url=False, include_context=False, include_input=False)
    first = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    field = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    more = err.error_count() - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return f"{source}: field '{field}': {first['msg']}{tail}"
