"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pydantic is imported only for the type: errors.py stays the lowest, lightest layer
    from pydantic import ValidationError


class UserError(Exception):
    """Bad input from the user: an unknown name, a malformed file, an impossible size.

    The CLI prints ``str(err)`` on one line and exits with code 2, never a traceback.
    """


def closest(name: str, candidates: Iterable[str], n: int = 3) -> str:
    """A ' (did you mean: a, b?)' hint naming the closest candidates, or '' when none is close."""
    matches = difflib.get_close_matches(name.lower(), sorted(set(candidates)), n=n, cutoff=0.5)
    return f" (did you mean: {', '.join(matches)}?)" if matches else ""


def format_validation_error(source: str, err: ValidationError) -> str:
    """One line from a pydantic ValidationError: file, field path and reason of the first error."""
    # An unknown key is usually the cause of a 'missing' one (a typo such as 'bandwith'): name it first.
    errors = sorted(err.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    first = errors[0]
    field = ".".join(str(p) for p in first.get("loc", ())) or "(top level)"
    more = len(err.errors()) - 1
    tail = f" (and {more} more error{'s' if more > 1 else ''})" if more else ""
    return f"{source}: field '{field}': {first['msg']}{tail}"
